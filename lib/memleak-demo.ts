// `dwunw memleak --demo`: the workload fixtures/x86_64/leaky (built -O2 -fomit-frame-pointer)
// traced by two memleaks at once, one unwinding with DWARF (libdwunw), one with frame pointers
// (bpf_get_stackid, as upstream), then each leak site of `leaky --manifest` with its two stacks
// side by side, checked against the site's known chain, and a completeness summary.
//
// One run of the workload feeds both: leaky starts stopped (startStopped), both memleaks attach
// to it with -p, and it runs once they are attached. Both list every outstanding allocation (-a)
// with its size, so every allocation is attributed to its site in both reports.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { ChalkInstance } from 'chalk';
import { CliError } from './errors.js';
import {
  type Analysis,
  type MlFrame,
  type MlReport,
  type MlStack,
  type SiteResult,
  analyze,
  bpfUnavailable,
  checkChain,
  chainText,
  frameLabel,
  frameNames,
  killChild,
  leakyPath,
  memleakPath,
  parseReports,
  readManifest,
  startMemleak,
  startStopped,
  within,
} from './memleak.js';
import { packageRoot } from './root.js';

export interface DemoOptions {
  rounds: number;
  /** Called with progress lines (stderr). */
  progress?: (line: string) => void;
}

export interface DemoResult {
  pid: number;
  rounds: number;
  dwarf: Analysis;
  fp: Analysis;
  seconds: number;
}

/** Build leaky and memleak when one is missing (npm start builds everything already). */
export function ensureBuilt(progress?: (line: string) => void): void {
  if (existsSync(memleakPath()) && existsSync(leakyPath())) return;
  progress?.('building the fixtures and memleak (make -s fixtures bpf)');
  const r = spawnSync('make', ['-s', 'fixtures', 'bpf'], { cwd: packageRoot(), stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new CliError('make fixtures bpf', r.error ? r.error.message : `exit status ${r.status ?? r.signal}`);
  if (!existsSync(memleakPath())) throw new CliError(memleakPath(), 'not built (make bpf)');
  if (!existsSync(leakyPath())) throw new CliError(leakyPath(), 'not built (make fixtures)');
}

export async function runDemo(opts: DemoOptions): Promise<DemoResult> {
  ensureBuilt(opts.progress);
  const why = bpfUnavailable();
  if (why) throw new CliError('memleak --demo', why);
  const sites = readManifest();
  const t0 = Date.now();
  const target = await startStopped(leakyPath(), [String(opts.rounds)]);
  const common = ['--json', '-a', '-o', '0', '-T', '1000000', '-p', String(target.pid), '3600'];
  const dw = startMemleak(['--unwind=dwarf', ...common]);
  const fp = startMemleak(['--unwind=fp', ...common]);
  const all = [target.child, dw.child, fp.child];
  const stopAll = (): void => all.forEach((c) => killChild(c));
  const onSignal = (): void => {
    stopAll();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    try {
      await within(Promise.all([dw.attached, fp.attached]), 300_000, 'memleak to attach');
    } catch (e) {
      stopAll();
      await Promise.all([dw.done, fp.done]);
      throw new CliError('memleak', (e as Error).message.replace(/^memleak:\s*/, ''));
    }
    opts.progress?.(`tracing leaky (pid ${target.pid}, ${opts.rounds} rounds of leaks, ~${opts.rounds} s) with memleak --unwind=dwarf and --unwind=fp`);
    target.resume();
    // hang guards: generous, a loaded host runs the three 5-10x slower
    await within(target.done, opts.rounds * 1000 + 300_000, 'leaky to finish');
    // each memleak sees the exit, prints its last report, detaches and exits
    const [d, f] = await within(Promise.all([dw.done, fp.done]), 300_000, 'memleak to exit after the target');
    const reports: MlReport[] = [];
    for (const [name, r] of [['dwarf', d], ['fp', f]] as const) {
      const last = parseReports(r.stdout).at(-1);
      if (!last) {
        const line = r.stderr.split('\n').find((l) => l.startsWith('memleak:') && !/target pid \d+ exited/.test(l));
        throw new CliError(`memleak --unwind=${name}`, line ? line.replace(/^memleak:\s*/, '') : `no report (exit status ${r.status ?? r.signal})`);
      }
      reports.push(last);
    }
    return {
      pid: target.pid,
      rounds: opts.rounds,
      dwarf: analyze(reports[0]!, sites, opts.rounds),
      fp: analyze(reports[1]!, sites, opts.rounds),
      seconds: (Date.now() - t0) / 1000,
    };
  } finally {
    stopAll();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

// ---- Summary ---------------------------------------------------------------------------------------

export interface DemoSummary {
  sites: number;
  dwarfComplete: number;
  dwarfExact: number;
  fpComplete: number;
  fpEndsEarly: number;
  fpWrongFrames: number;
  fpMissing: number;
  dwarfStacks: number;
  fpStacks: number;
  bytes: number;
  allocations: number;
  expectedBytes: number;
  expectedAllocations: number;
  dwarfLost: number;
  fpLost: number;
}

export function summarize(r: DemoResult): DemoSummary {
  const n = r.dwarf.sites.length;
  const fpBroken = r.fp.sites.filter((s) => !s.complete && s.check);
  return {
    sites: n,
    dwarfComplete: r.dwarf.sites.filter((s) => s.complete).length,
    dwarfExact: r.dwarf.sites.filter((s) => s.bytes === s.expectedBytes && s.allocations === s.expectedAllocations).length,
    fpComplete: r.fp.sites.filter((s) => s.complete).length,
    fpEndsEarly: fpBroken.filter((s) => s.check!.why?.startsWith('ends')).length,
    fpWrongFrames: fpBroken.filter((s) => !s.check!.why?.startsWith('ends')).length,
    fpMissing: r.fp.sites.filter((s) => s.stacks.length === 0).length,
    dwarfStacks: r.dwarf.sites.reduce((k, s) => k + s.stacks.length, 0) + r.dwarf.extra.length,
    fpStacks: r.fp.sites.reduce((k, s) => k + s.stacks.length, 0) + r.fp.extra.length,
    bytes: r.dwarf.bytes,
    allocations: r.dwarf.allocations,
    expectedBytes: r.dwarf.sites.reduce((k, s) => k + s.expectedBytes, 0),
    expectedAllocations: r.dwarf.sites.reduce((k, s) => k + s.expectedAllocations, 0),
    dwarfLost: r.dwarf.lost,
    fpLost: r.fp.lost,
  };
}

/** The demo as JSON (--demo --json). */
export function demoJson(r: DemoResult): object {
  const stacks = (s: SiteResult) =>
    s.stacks.map((st) => ({
      bytes: st.bytes,
      allocations: st.allocations,
      kind: st.kind,
      stop: st.stop,
      frames: st.frames.map((f) => ({ pc: f.pc, symbol: f.symbol, offset: f.offset, module: f.module })),
      ...checkChain(s.site, frameNames(st)),
    }));
  return {
    pid: r.pid,
    rounds: r.rounds,
    seconds: Math.round(r.seconds * 10) / 10,
    summary: summarize(r),
    sites: r.dwarf.sites.map((d, i) => {
      const f = r.fp.sites[i]!;
      return {
        site: d.site.name,
        allocator: d.site.allocator,
        size: d.site.size,
        expected: { allocations: d.expectedAllocations, bytes: d.expectedBytes },
        chain: d.site.chain.map((c) => c.join('|')),
        dwarf: { complete: d.complete, allocations: d.allocations, bytes: d.bytes, stacks: stacks(d) },
        fp: { complete: f.complete, allocations: f.allocations, bytes: f.bytes, stacks: stacks(f) },
      };
    }),
    extra: { dwarf: r.dwarf.extra.length, fp: r.fp.extra.length },
  };
}

// ---- Text ------------------------------------------------------------------------------------------

/** A piece of output: its text, and the same with colors. */
interface Cell {
  plain: string;
  colored: string;
}

const cell = (plain: string, colored = plain): Cell => ({ plain, colored });
const num = (v: number): string => v.toLocaleString('en-US');

/** Shorten a cell to at most w visible characters (colors dropped when cut). */
function fit(c: Cell, w: number): Cell {
  if (c.plain.length <= w) return c;
  const p = `${c.plain.slice(0, Math.max(0, w - 1))}…`;
  return cell(p, p);
}

const pad = (c: Cell, w: number): string => c.colored + ' '.repeat(Math.max(0, w - c.plain.length));

const MAX_FRAMES_SHOWN = 22;

function moduleTag(f: MlFrame, exe: string): string {
  if (!f.module || f.module === exe) return '';
  return f.module.slice(f.module.lastIndexOf('/') + 1);
}

/** The lines of one stack: a status line, then its frames. */
function stackCells(c: ChalkInstance, title: string, s: SiteResult, exe: string): Cell[] {
  const lines: Cell[] = [];
  const st = s.stacks[0];
  if (!st) {
    lines.push(cell(`${title}: no stack`, `${c.bold(title)}: ${c.red('no stack')} (allocations not seen)`));
    return lines;
  }
  const chk = s.check!;
  const more = s.stacks.length > 1 ? `, +${s.stacks.length - 1} other stack${s.stacks.length > 2 ? 's' : ''}` : '';
  const counts = `${s.allocations}/${s.expectedAllocations} allocs`;
  if (s.complete) {
    const p = `${title}: complete (${counts}${more})`;
    lines.push(cell(p, `${c.bold(title)}: ${c.green.bold('complete')} (${counts}${more})`));
  } else {
    const reason = chk.complete ? `stopped: ${st.stop}` : chk.why!;
    const p = `${title}: BROKEN, ${reason} (${counts}${more})`;
    lines.push(cell(p, `${c.bold(title)}: ${c.red.bold('BROKEN')}, ${reason} (${counts}${more})`));
  }
  const limit = s.complete ? MAX_FRAMES_SHOWN : Math.min(MAX_FRAMES_SHOWN, s.site.chain.length + 3);
  st.frames.slice(0, limit).forEach((f, i) => {
    const idx = String(i).padStart(2);
    const label = frameLabel(f);
    const tag = moduleTag(f, exe);
    const plain = `${idx} ${label}${tag ? ` ${tag}` : ''}`;
    let name: string;
    if (i < chk.matched) name = c.cyan(label);
    else if (i < s.site.chain.length) name = (i === chk.matched ? c.red.bold : c.red)(label);
    else name = s.complete ? c.dim(label) : c.red(label);
    lines.push(cell(plain, `${c.dim(idx)} ${name}${tag ? ` ${c.dim(tag)}` : ''}`));
  });
  if (st.frames.length > limit) {
    const p = `   … ${st.frames.length - limit} more frames`;
    lines.push(cell(p, c.dim(p)));
  }
  if (st.reason && st.kind !== 'none') lines.push(cell(`   ${st.reason}`, c.red(`   ${st.reason}`)));
  if (st.kind === 'none') lines.push(cell(`   ${st.reason ?? '(no frames)'}`, c.red(`   ${st.reason ?? '(no frames)'}`)));
  return lines;
}

function siteHeader(c: ChalkInstance, d: SiteResult): Cell {
  const s = d.site;
  const what = `${s.allocator}(${num(s.size)}) x ${d.expectedAllocations} = ${num(d.expectedBytes)} bytes`;
  const p = `${s.name}  ${what}  chain: ${chainText(s)}`;
  return cell(p, `${c.bold.yellow(s.name)}  ${what}  ${c.dim(`chain: ${chainText(s)}`)}`);
}

export function summaryLines(c: ChalkInstance, r: DemoResult): string[] {
  const s = summarize(r);
  const okd = s.dwarfComplete === s.sites ? c.green.bold : c.red.bold;
  const okf = s.fpComplete === s.sites ? c.green.bold : c.red.bold;
  const fpParts = [
    s.fpEndsEarly ? `${s.fpEndsEarly} end early` : '',
    s.fpWrongFrames ? `${s.fpWrongFrames} go through wrong frames` : '',
    s.fpMissing ? `${s.fpMissing} missing` : '',
  ].filter(Boolean);
  const exact = s.bytes === s.expectedBytes && s.allocations === s.expectedAllocations;
  return [
    `${c.bold('DWARF:')} ${okd(`${s.dwarfComplete}/${s.sites}`)} stacks complete to main (or the thread start), ` +
      `${s.dwarfExact}/${s.sites} sites with exact bytes and counts, ${s.dwarfStacks} stacks`,
    `${c.bold('FP:')}    ${okf(`${s.fpComplete}/${s.sites}`)} stacks complete${fpParts.length ? ` (${fpParts.join(', ')})` : ''}, ` +
      `the same allocations spread over ${s.fpStacks} stacks`,
    `${c.bold('Outstanding:')} ${num(s.bytes)} bytes in ${num(s.allocations)} allocations ` +
      `(${exact ? c.green('as leaky leaked them') : c.red(`leaky leaked ${num(s.expectedBytes)} bytes in ${num(s.expectedAllocations)}`)}); ` +
      `lost records: dwarf ${s.dwarfLost}, fp ${s.fpLost}`,
  ];
}

/** The demo as text: per site the two stacks side by side (width >= 100) or one after the other. */
export function demoText(c: ChalkInstance, r: DemoResult, width: number): string {
  const exe = leakyPath();
  const out: string[] = [];
  out.push(c.bold(`memleak on fixtures/x86_64/leaky (pid ${r.pid}, ${r.rounds} rounds, -O2 -fomit-frame-pointer): DWARF stacks (libdwunw) next to frame-pointer stacks (bpf_get_stackid)`));
  out.push(c.dim('frame 0 is the allocator\'s caller; "complete" = the site\'s known chain down to main or the thread start (leaky --manifest)'));
  out.push('');
  const two = width >= 100;
  const colw = two ? Math.floor((width - 3) / 2) : width || 1000;
  r.dwarf.sites.forEach((d, i) => {
    const f = r.fp.sites[i]!;
    out.push(pad(fit(siteHeader(c, d), width || 1000), 0));
    const left = stackCells(c, 'DWARF', d, exe).map((x) => fit(x, colw - 2));
    const right = stackCells(c, 'FP', f, exe).map((x) => fit(x, colw - 2));
    if (two) {
      for (let k = 0; k < Math.max(left.length, right.length); k++) {
        const l = left[k] ?? cell('');
        const rr = right[k] ?? cell('');
        out.push(`  ${pad(l, colw - 2)} ${c.dim('│')} ${rr.colored}`.trimEnd());
      }
    } else {
      for (const l of left) out.push(`  ${l.colored}`);
      for (const rr of right) out.push(`  ${rr.colored}`);
    }
    out.push('');
  });
  const extras = (a: Analysis, name: string) =>
    a.extra.length ? [c.dim(`${name}: ${a.extra.length} other stacks (${num(a.extra.reduce((k, s: MlStack) => k + s.bytes, 0))} bytes) belong to no site`)] : [];
  out.push(...extras(r.dwarf, 'DWARF'), ...extras(r.fp, 'FP'));
  out.push(...summaryLines(c, r));
  return `${out.join('\n')}\n`;
}
