// dwunw bench [--json] [--quick] [--iterations N] [--batches N] [--snapshot FILE]... [--callgrind]:
// libdwunw against libunwind (remote API, UNW_CACHE_GLOBAL) and libdwfl (warm Dwfl) on reference
// snapshots, in one process, through one memory reader. This file parses the options and prints
// the report (tables, or JSON with --json); lib/bench.ts does the work (the C harness
// build/bench/dwunw-bench, gdb's frames, callgrind, the targets). doc/bench.md explains the figures.
//
// Snapshots: three of the harness's own process (x86_64: ~30 frames through glibc's qsort,
// bsearch and dl_iterate_phdr callbacks; ~200 frames of recursion; inside a signal handler), the
// reference snapshots of the arm64/mips32 verify fixtures taken at build time
// (build/bench/snapshots/*.snapshot.json), and any dwunw-snapshot-1 file given with --snapshot.
//
// Exit status 1 when the unwinders (or gdb, for a file with a NAME.frames.json beside it) do not
// all return the same frames; a missed target is reported, not an error.
import type { ChalkInstance } from 'chalk';
import Table from 'cli-table3';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type BenchOptions, type BenchReport, type SnapshotResult, type Target, UNWINDERS, type UnwinderName, type UnwinderResult, disagreements, runBench } from '../lib/bench.js';
import type { KernelBench } from '../lib/kernel-bench.js';
import type { PythonBench } from '../lib/python-bench.js';
import { ChunkedWriter, colorsFor, reportError } from '../lib/output.js';

interface Args {
  json: boolean;
  quick: boolean;
  check: boolean;
  iterations?: number;
  batches?: number;
  snapshot?: string[];
  callgrind: boolean;
}

export const command = 'bench';
export const describe = 'Time libdwunw against libunwind, libdwfl and framehop on reference snapshots';

export function builder(y: Argv): Argv<Args> {
  return y
    .option('json', { type: 'boolean', default: false, describe: 'Print the results as JSON (doc/bench.md)' })
    .option('quick', { type: 'boolean', default: false, describe: 'Few iterations: checks that it runs and the frames agree (seconds)' })
    .option('check', {
      type: 'boolean',
      default: false,
      describe: 'Exit 1 naming each target of bench/targets.json that was missed (instructions need --callgrind)',
    })
    .option('iterations', { type: 'number', requiresArg: true, describe: 'Unwinds per timed batch (default 100; --quick 10)' })
    .option('batches', { type: 'number', requiresArg: true, describe: 'Timed batches per unwinder (default 200; --quick 10)' })
    .option('snapshot', {
      type: 'string',
      array: true,
      requiresArg: true,
      describe: 'Also unwind this dwunw-snapshot-1 file (FILE or FILE@TID; repeatable)',
    })
    .option('callgrind', {
      type: 'boolean',
      default: false,
      describe: 'Also count instructions per unwind with valgrind --tool=callgrind (slow)',
    })
    .example('$0 bench', 'the full run (about 10 s)')
    .example('$0 bench --quick --json', 'a short run, as JSON')
    .example('$0 bench --snapshot snap.json', 'also unwind a saved snapshot');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await bench({
    json: argv.json,
    quick: argv.quick,
    check: argv.check,
    iterations: argv.iterations,
    batches: argv.batches,
    snapshots: argv.snapshot ?? [],
    callgrind: argv.callgrind,
  });
}

export async function bench(o: BenchOptions): Promise<void> {
  const report = await runBench(o, (what) => progress(o, what));
  if (progressOn(o)) process.stderr.write('\r\x1b[K');

  const out = new ChunkedWriter();
  if (o.json) await out.write(`${JSON.stringify(report, null, 1)}\n`);
  else await out.write(text(report, colorsFor(process.stdout), process.stdout.isTTY === true));
  await out.flush();

  const bad = disagreements(report);
  if (bad.length) reportError('bench', `the unwinders do not return the same frames: ${bad.join(', ')}`);
  if (o.check) {
    for (const t of report.targets ?? [])
      if (t.met === false) reportError('bench --check', `missed: ${t.name}: ${t.value} ${t.unit} (limit ${t.kind === 'max' ? '≤' : '≥'} ${t.limit})`);
  }
}

/** Progress goes to stderr only when it is a terminal, and never with --json. */
function progressOn(o: { json: boolean }): boolean {
  return !o.json && process.stderr.isTTY === true;
}

function progress(o: { json: boolean }, what: string): void {
  if (progressOn(o)) process.stderr.write(`\r\x1b[Kdwunw bench: ${what}`);
}

// ---- text output ----------------------------------------------------------------------------------

const ns = (v: number | null | undefined): string => {
  if (v === null || v === undefined) return '-';
  if (v < 1000) return `${v.toFixed(0)} ns`;
  if (v < 1e6) return `${(v / 1e3).toFixed(v < 1e4 ? 2 : 1)} µs`;
  return `${(v / 1e6).toFixed(2)} ms`;
};
const num = (v: number | undefined, digits = 0): string => (v === undefined ? '-' : v.toFixed(digits));

type Align = 'left' | 'right';

/** A table: cli-table3 with borders on a terminal, aligned plain columns otherwise. */
function table(head: string[], rows: string[][], align: Align[], c: ChalkInstance, tty: boolean): string {
  if (tty) {
    const t = new Table({
      head: head.map((h) => c.bold(h)),
      colAligns: align,
      style: { head: [], border: [] },
      // no rule between rows: a rule under the head only
      chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    });
    for (const r of rows) t.push(r);
    return `${t.toString()}\n`;
  }
  // eslint-disable-next-line no-control-regex
  const width = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '').length;
  const w = head.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ''))));
  const line = (r: string[]) =>
    r
      .map((cell, i) => {
        const pad = ' '.repeat(w[i]! - width(cell));
        return align[i] === 'right' ? pad + cell : cell + pad;
      })
      .join('  ')
      .trimEnd();
  return `${[c.bold(line(head)), ...rows.map(line)].join('\n')}\n`;
}

function framesCell(s: SnapshotResult, u: UnwinderName, c: ChalkInstance): string {
  const r = s.unwinders[u];
  const parts: string[] = [String(r.frames)];
  if (u === 'dwunw') {
    if (r.agrees === true) parts.push(c.green('= peers'));
    if (r.agrees === false) parts.push(c.red('≠ peers'));
  } else if (r.agrees === true) parts.push(c.green('same'));
  else if (r.agrees === false) {
    const first = r.differs?.[0]?.index;
    if (r.stops_early) parts.push(c.yellow(`stops early: ${r.frames} of ${s.unwinders.dwunw.frames}`));
    else parts.push(c.red(first === undefined ? 'differ' : `differ from #${first}`));
  }
  if (r.cache_collisions_per_unwind) parts.push(c.yellow(`${r.cache_collisions_per_unwind.toFixed(0)} cache collisions/unwind`));
  const g = s.oracle?.agrees[u];
  if (g !== undefined) parts.push(g ? c.green('= gdb') : c.red('≠ gdb'));
  return parts.join(' ');
}

export function text(r: BenchReport, c: ChalkInstance, tty: boolean): string {
  let o = '';
  o +=
    `${c.bold('dwunw bench')}: libdwunw ${r.versions.dwunw}, libunwind ${r.versions.libunwind} (remote API, UNW_CACHE_GLOBAL), ` +
    `libdwfl ${r.versions.libdwfl} (warm Dwfl), framehop ${r.versions.framehop ?? '-'} (its own process, same snapshots)\n` +
    `warm: median and p90 per unwind over ${r.config.batches} batches of ${r.config.iterations}; ` +
    `cold: the first unwind in a fresh context, tables built (median of ${r.config.cold_runs})` +
    `${r.config.quick ? c.yellow(' [--quick: figures are rough]') : ''}\n\n`;

  const cg = r.callgrind !== undefined;
  const head = ['snapshot', 'arch', 'unwinder', 'median', 'p90', 'ns/frame', 'cold', 'vs dwunw', ...(cg ? ['instructions'] : []), 'frames', 'stop'];
  const align: Align[] = ['left', 'left', 'left', 'right', 'right', 'right', 'right', 'right', ...(cg ? ['right' as Align] : []), 'left', 'left'];
  const rows: string[][] = [];
  for (const s of r.snapshots) {
    UNWINDERS.forEach((u, i) => {
      const x = s.unwinders[u];
      const first = i === 0 ? [s.name, s.arch] : ['', ''];
      if (x.status !== 'ok') {
        const why = `${x.status}${x.reason ? `: ${x.reason}` : ''}`;
        rows.push([...first, u, '-', '-', '-', '-', '-', ...(cg ? ['-'] : []), '-', c.dim(why.length > 60 ? `${why.slice(0, 57)}...` : why)]);
        return;
      }
      const ratio = u === 'dwunw' ? '1×' : x.ratio_to_dwunw === undefined ? '-' : `${x.ratio_to_dwunw.toFixed(1)}×`;
      const stop = x.stop === 'OK' ? 'end' : x.stop ?? '';
      rows.push([
        ...first,
        u === 'dwunw' ? c.bold(u) : u,
        u === 'dwunw' ? c.cyan(ns(x.median_ns)) : ns(x.median_ns),
        ns(x.p90_ns),
        num(x.ns_per_frame, 1),
        ns(x.cold_ns),
        ratio,
        ...(cg ? [x.ir_per_unwind === undefined ? '-' : x.ir_per_unwind.toLocaleString('en-US')] : []),
        framesCell(s, u, c),
        stop.length > 40 ? `${stop.slice(0, 37)}...` : stop,
      ]);
    });
  }
  o += table(head, rows, align, c, tty);
  if (cg) o += instructionsText(r, c, tty);

  // Where frames differ
  const diffs: string[] = [];
  for (const s of r.snapshots)
    for (const u of UNWINDERS) {
      const x = s.unwinders[u];
      if (x.stops_early) {
        const last = x.pcs?.[x.pcs.length - 1];
        diffs.push(`  ${s.name}, ${u}: stops after ${x.frames} of ${s.unwinders.dwunw.frames} frames (its last: ${last ?? '-'}), saying "${x.stop}"`);
        continue;
      }
      for (const d of x.differs ?? [])
        diffs.push(
          `  ${s.name}, ${u} #${d.index}: dwunw ${d.dwunw ?? '(none)'}${d.dwunw_symbol ? ` ${d.dwunw_symbol}` : ''}, ` +
            `${u} ${d.peer ?? '(none)'}${d.peer_symbol ? ` ${d.peer_symbol}` : ''}`,
        );
      if (s.oracle?.agrees[u] === false) diffs.push(`  ${s.name}, ${u}: not gdb's ${s.oracle.frames} frames (${s.oracle.file})`);
    }
  if (diffs.length) o += `\n${c.red.bold('Frames that differ')}:\n${diffs.join('\n')}\n`;

  // Tables
  const trows = r.tables.map((t) =>
    t.error
      ? [t.name, c.red(t.error), '', '', '', '', t.file]
      : [t.name, num(t.build_ms, 3), num(t.open_build_ms, 3), String(t.rows), num(t.bytes_per_row, 2), `${t.fdes}${t.fdes_dropped ? ` (${t.fdes_dropped} dropped)` : ''}`, t.file],
  );
  o += `\n${c.bold('Unwind tables')} (libdwunw; median of ${r.config.table_runs} builds in fresh contexts)\n`;
  o += table(['table', 'build ms', 'open+build ms', 'rows', 'B/row', 'FDEs', 'file'], trows, ['left', 'right', 'right', 'right', 'right', 'right', 'left'], c, tty);
  const k = r.cache;
  o += `\nModule cache (${k.contexts} context${k.contexts === 1 ? '' : 's'}, ${k.slots} slots): ${k.hits} hits, ${k.misses} misses, ${k.evictions} evictions; ${k.warm} warm, ${k.active} active\n`;

  if (r.targets) {
    o += `\n${c.bold('Targets')} (the ${r.reference} snapshot and libc, this run)\n`;
    const fmt = (t: Target, v: number) => (t.unit === 'ns' ? ns(v) : t.unit === '×' ? `${v.toFixed(1)}×` : `${v.toFixed(2)} ${t.unit}`);
    const trows2 = r.targets.map((t) => [
      t.name,
      `${t.kind === 'max' ? '≤' : '≥'} ${fmt(t, t.limit)}`,
      t.value === null ? '-' : fmt(t, t.value),
      t.met === null ? c.dim('n/a') : t.met ? c.green('met') : c.red('missed'),
    ]);
    o += table(['target', 'goal', 'measured', ''], trows2, ['left', 'right', 'right', 'left'], c, tty);
  }

  if (r.kernel) o += kernelText(r.kernel, c, tty);
  if (r.python) o += pythonText(r.python, c);

  if (cg) {
    const ref = r.snapshots.find((s) => s.name === r.reference) ?? r.snapshots[0];
    const top = ref?.unwinders.dwunw.callgrind_top;
    if (ref && top?.length) {
      o += `\n${c.bold('libdwunw, warm')} ${ref.name}: ${ref.unwinders.dwunw.ir_per_unwind?.toLocaleString('en-US')} instructions per unwind (callgrind, self counts)\n`;
      o += table(
        ['function', 'Ir/unwind', '%'],
        top.map((f) => [f.function, f.ir_per_unwind.toLocaleString('en-US'), f.percent.toFixed(1)]),
        ['left', 'right', 'right'],
        c,
        tty,
      );
    }
  }
  return o;
}

/** Instructions per warm unwind and per frame, the unwinders side by side (callgrind, profile_loop only). */
function instructionsText(r: BenchReport, c: ChalkInstance, tty: boolean): string {
  const cell = (x: UnwinderResult) =>
    x.status !== 'ok' || x.ir_per_unwind === undefined
      ? '-'
      : `${x.ir_per_unwind.toLocaleString('en-US')} (${x.frames ? Math.round(x.ir_per_unwind / x.frames) : '-'}/frame)`;
  const rows = r.snapshots.map((s) => [s.name, String(s.frames), ...UNWINDERS.map((u) => cell(s.unwinders[u]))]);
  return (
    `\n${c.bold('Instructions per warm unwind')} (callgrind, ${r.callgrind?.iterations} unwinds counted in profile_loop; per frame)\n` +
    table(['snapshot', 'frames', ...UNWINDERS], rows, ['left', 'right', ...UNWINDERS.map((): Align => 'right')], c, tty)
  );
}

/** The cost of reading Python frames, or why there are no figures. */
function pythonText(p: PythonBench, c: ChalkInstance): string {
  const o = `\n${c.bold('Python frames')} (issue 24)`;
  if (p.unavailable) return `${o}: ${c.dim(`not measured: ${p.unavailable}`)}\n`;
  return (
    `${o}: ${p.interpreter}, ${p.mode}: ${p.ns_per_frame} ns per frame, ${p.ns_per_stack} ns per stack of ${p.frames_per_stack} frames ` +
    `(${p.ns_shallow_stack} ns for 3 frames); OTel's eBPF profiler: ~${p.otel_ns_per_sample} ns per sample; BPF at the event: ${
      typeof p.bpf === 'string'
        ? p.bpf
        : Object.entries(p.bpf)
            .map(([m, b]) => `${m}: ${b.ns_per_sample} ns per sample of ${b.frames_per_sample} frames (${b.ns_per_frame} ns per frame), ${b.user_ns_per_sample} ns in user space`)
            .join('; ')
    }\n`
  );
}

/** The in-kernel walker beside its binary-search peer, or why there are no figures. */
function kernelText(k: KernelBench, c: ChalkInstance, tty: boolean): string {
  let o = `\n${c.bold('In-kernel walker')} (bpf_stats run_time_ns / run_cnt; issue 11)`;
  if (k.unavailable || !k.walker) return `${o}: ${c.dim(`not measured: ${k.unavailable ?? 'no figures'}`)}\n`;
  o += `: ${k.workload}; ${k.events} events unwound both ways, ${k.identical_pct?.toFixed(2)} % identical\n`;
  const row = (name: string, f: NonNullable<KernelBench['walker']>): string[] => [
    name,
    num(f.ns_per_frame, 1),
    num(f.ns_per_extra_frame, 1),
    ns(f.ns_first_frame),
    ns(f.ns_per_sample),
    num(f.frames_per_sample, 1),
    num(f.bytes_per_row, 2),
    String(f.verifier_insns),
    `${num(f.fallback_pct, 2)} %`,
  ];
  const rows = [row(c.bold('dwunw'), k.walker)];
  if (k.peer) rows.push(row('binary search', k.peer));
  o += table(
    ['walker', 'ns/frame', 'per extra frame', 'first frame', 'per sample', 'frames', 'B/row', 'verifier insns', 'fallback'],
    rows,
    ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    c,
    tty,
  );
  const met = k.met ? c.green('met') : c.red('missed');
  o += `target: ≤ ${k.target_ns_per_frame} ns/frame: ${met}; maps ${((k.walker.map_bytes ?? 0) / 1048576).toFixed(1)} MiB\n`;
  const f = k.floor;
  if (f) {
    o += `floor (same samples): entry ${ns(f.entry_ns)}, bpf_loop iteration ${num(f.loop_iter_ns, 1)}, user read 8 B ${num(f.read_user_8_ns, 1)} / 16 B ${num(f.read_user_16_ns, 1)}, `;
    o += `${f.chunk_bytes} B chunk ${ns(f.chunk_read_ns)}, hash lookup ${num(f.hash_lookup_ns, 1)}, array ${num(f.array_lookup_ns, 1)}, per-CPU ${num(f.percpu_lookup_ns, 1)}, `;
    o += `line cold ${num(f.cold_line_ns, 1)} / warm ${num(f.warm_line_ns, 1)} / hot ${num(f.hot_line_ns, 1)} ns\n`;
    const fm = k.floor_met ? c.green('met') : c.red('missed');
    o += `floor per frame ${num(f.ns_per_frame, 1)} ns ((entry + chunk) / frames + iteration + cold line); walker ${num(f.walker_x, 2)}x of it (≤ ${k.floor_x_allowed}x: ${fm}); `;
    o += `with a warm line ${num(f.ns_per_frame_warm, 1)} ns, walker ${num(f.walker_x_warm, 2)}x\n`;
  }
  return o;
}
