// dwunw memleak [ARGS...]: runs build/bpf/memleak (bpf/memleak/memleak.c) with the same arguments, untouched
// (its own flags: -p, -c, -a, -o, -T, --unwind, --json, ...; `dwunw memleak --help` shows them),
// and exits with its status. On a terminal its text report is colored line by line (stack
// headers, symbol names, stop reasons); piped, or with --json/--folded, the output is memleak's
// own, byte for byte. With --export URL (lib/export.ts) each report is sent as it comes
// (inuse_space, inuse_objects; with -a also alloc_space, alloc_objects: lib/export-memleak.ts).
//
// dwunw memleak --demo [--rounds N] [--json]: builds what is missing, runs the workload
// fixtures/x86_64/leaky (-O2 -fomit-frame-pointer) under two memleaks at once (--unwind=dwarf and
// --unwind=fp), and prints each leak site's two stacks side by side, checked against the chains of
// `leaky --manifest`, then a completeness summary (lib/memleak-demo.ts). `npm start` runs it.
import { existsSync } from 'node:fs';
import type { ChalkInstance } from 'chalk';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder, runTool } from '../lib/passthrough.js';
import { memleakPath } from '../lib/memleak.js';
import { demoJson, demoText, runDemo } from '../lib/memleak-demo.js';
import { CliError, ExitCode, colorsFor } from '../lib/output.js';
import { ExportRun, type ExportOptions, exportHelp, exportSummary } from '../lib/export.js';
import { ReportReader } from '../lib/export-memleak.js';
import type { MlReport } from '../lib/memleak.js';
import { type ExportArgs, exportOptions, newExportArgs, takeExportArg } from './export-options.js';

type Args = PassthroughArgs;

export const command = 'memleak [args..]';
export const describe = 'Outstanding allocations of a process by stack, with DWARF stacks (memleak; --demo: a side-by-side demo)';

export function builder(y: Argv): Argv<Args> {
  // Everything goes to memleak as given: no option of ours is parsed here, --help included.
  return passthroughBuilder(y, 'memleak');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  // before `--`: in args; after it: in _ (after the command's name)
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  if (before.includes('--demo')) await demo(before, after);
  // `-- PROG ARGS`: the program memleak runs and follows (yargs took the `--` away)
  else {
    const sp = splitArgs(before);
    const eo = exportOptions(sp.exp, 'memleak');
    if (eo) await memleakExport(sp, eo, after);
    else await memleak(after.length ? [...before, '--', ...after] : before);
  }
}

// ---- --export --------------------------------------------------------------------------------------

/** memleak's options that take a value (bpf/memleak/memleak_opts.c): the rest are flags or positionals. */
const ML_VALUED_SHORT = 'pcosTzZOS';
const ML_VALUED_LONG = /^--(pid|older|command|sample-rate|top|min-size|max-size|obj|symbols-prefix|unwind|stack-size|buffer-size|max-stacks|expected-rate|max-frames|weight|table-budget)$/;

interface Split {
  exp: ExportArgs;
  /** memleak's own arguments (before `--`), ours taken out */
  rest: string[];
  /** INTERVAL [COUNT] */
  positionals: string[];
  json: boolean;
  top: boolean;
  /** -a, --show-allocs or --allocated: with --export, alloc_space and alloc_objects too */
  allocated: boolean;
  /** rest without -a's listing of each outstanding allocation (an export has no use for it) */
  restNoList: string[];
}

/** Our --export options taken out of memleak's arguments; memleak's positionals found. */
export function splitArgs(args: string[]): Split {
  const out: Split = { exp: newExportArgs(), rest: [], positionals: [], json: false, top: false, allocated: false, restNoList: [] };
  const push = (v: string, noList: string | null = v) => {
    out.rest.push(v);
    if (noList !== null) out.restNoList.push(noList);
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const j = takeExportArg(args, i, out.exp, 'memleak');
    if (j >= 0) {
      i = j;
      continue;
    }
    if (a === '--json') out.json = true;
    if (/^--top(=|$)|^-[a-zA-Z]*T/.test(a)) out.top = true;
    if (ML_VALUED_LONG.test(a)) {
      push(a);
      push(args[++i] ?? '');
    } else if (a === '--show-allocs' || a === '--allocated') {
      out.allocated = true;
      push(a, a === '--allocated' ? a : null);
    } else if (/^-[^-]/.test(a)) {
      // a cluster (-ap PID, -T5): the first valued letter takes the rest, or the next argument
      const k = [...a.slice(1)].findIndex((ch) => ML_VALUED_SHORT.includes(ch));
      const flags = k < 0 ? a.slice(1) : a.slice(1, k + 2); // up to the valued letter
      const noList = `-${flags.replaceAll('a', '')}${k < 0 ? '' : a.slice(k + 2)}`;
      if (flags.includes('a')) out.allocated = true;
      push(a, noList === '-' ? null : noList);
      if (k >= 0 && k === a.length - 2) push(args[++i] ?? '');
    } else {
      push(a);
      if (!a.startsWith('-')) out.positionals.push(a);
    }
  }
  return out;
}

/**
 * memleak --json with a report per interval; each report, as it comes, goes to the destinations
 * (inuse_space and inuse_objects, lib/export-memleak.ts). stdout: the program's own output, and
 * the reports with --json; the export's summary on stderr.
 */
async function memleakExport(sp: Split, eo: ExportOptions, after: string[]): Promise<void> {
  const bin = memleakPath();
  if (!existsSync(bin)) throw new CliError('memleak', `${bin} is not built (run make bpf)`);
  if (sp.positionals.length && sp.exp.interval !== undefined)
    throw new CliError('memleak', `--interval and INTERVAL ${sp.positionals[0]} both given (see dwunw memleak --help)`, ExitCode.USAGE);
  if (sp.positionals.length) {
    const v = sp.positionals[0]!;
    if (!/^\d+$/.test(v) || Number(v) < 1) throw new CliError('memleak', `INTERVAL ${v}: expected whole seconds with --export (see dwunw memleak --help)`, ExitCode.USAGE);
    eo.intervalS = Number(v);
  }
  // every stack is exported, not the top 10 of the JSON report
  // -a: what was allocated in each interval too (memleak --allocated); its listing of every
  // outstanding allocation only when the reports are asked for (--json)
  const own = sp.allocated ? [...(sp.json ? sp.rest : sp.restNoList), ...(sp.rest.includes('--allocated') ? [] : ['--allocated'])] : sp.rest;
  const args = [...own, ...(sp.json ? [] : ['--json']), ...(sp.top ? [] : ['--top=1000000']), ...(sp.positionals.length ? [] : [String(eo.intervalS)]), ...(after.length ? ['--', ...after] : [])];
  const exp = new ExportRun(eo);
  const reader = new ReportReader(eo.intervalS);
  const status = await runTool('memleak', bin, args, {
    onLine: (l) => {
      let r: MlReport | null = null;
      if (l.startsWith('{"time":')) {
        try {
          r = JSON.parse(l) as MlReport;
        } catch {
          // a line cut short
        }
      }
      if (r) exp.send(reader.report(r));
      if (!r || sp.json) process.stdout.write(`${l}\n`);
    },
  });
  process.exitCode = status;
  const stats = await exp.finish(eo.timeoutMs);
  if (status !== 0 && !exp.intervals) return; // memleak refused its arguments, or did not start
  process.stderr.write(exportSummary(stats, exp.intervals, 'memleak'));
  if (sp.json) process.stdout.write(`${JSON.stringify({ export: { intervals: exp.intervals, destinations: stats } })}\n`);
}

const DEMO_HELP = `
dwunw memleak runs build/bpf/memleak with these arguments (colored on a terminal).
  dwunw memleak --demo [--rounds N] [--json]
                            trace fixtures/x86_64/leaky (-O2 -fomit-frame-pointer) with DWARF and
                            frame-pointer unwinding at once; print both stacks of each leak site
                            side by side and a completeness summary (N rounds of leaks, 3)
`;

// ---- memleak, passed through -------------------------------------------------------------------

export async function memleak(args: string[]): Promise<void> {
  const bin = memleakPath();
  if (!existsSync(bin)) throw new CliError('memleak', `${bin} is not built (run make bpf)`);
  const c = colorsFor(process.stdout);
  const colored = c.level > 0;
  // colored line by line on a terminal; else memleak writes to stdout itself
  const status = await runTool('memleak', bin, args, colored ? { onLine: (l, complete) => process.stdout.write(colorLine(c, l) + (complete ? '\n' : '')) } : {});
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(DEMO_HELP + exportHelp('memleak'));
  process.exitCode = status;
}

/** One line of memleak's text report, colored; other lines (JSON, folded) unchanged. */
export function colorLine(c: ChalkInstance, line: string): string {
  let m: RegExpExecArray | null;
  if ((m = /^\t(\d+) \[<([0-9a-f]{16})>\] (.*)$/.exec(line))) {
    const [, idx, pc, line] = m as unknown as [string, string, string, string];
    const head = `\t${idx} ${c.dim(`[<${pc}>]`)} `;
    // --lines: " at FILE:LINE" last (a named frame's)
    const at = /^(.*\S) at (\S+)$/.exec(line);
    const all = at ? at[1]! : line;
    const src = at ? ` at ${c.green(at[2]!)}` : '';
    // where the frame came from, when it rests on more than the captured stack and CFI
    const mk = /((?: \[(?:live|fp|prologue|lr|jit)\])*)$/.exec(all)!;
    const rest = all.slice(0, all.length - mk[1]!.length);
    const marks = (mk[1] ? (mk[1].includes('[live]') ? c.red(mk[1]) : c.magenta(mk[1])) : '') + src;
    let s: RegExpExecArray | null;
    if ((s = /^(.+)\+0x([0-9a-f]+) \[(.*)\]$/.exec(rest))) return `${head}${c.cyan.bold(s[1]!)}${c.dim(`+0x${s[2]}`)} ${c.dim(`[${s[3]}]`)}${marks}`;
    if ((s = /^(.+)\+0x([0-9a-f]+)$/.exec(rest)) && !rest.startsWith('[')) return `${head}${c.cyan.bold(s[1]!)}${c.dim(`+0x${s[2]}`)}${marks}`;
    if (/^\[(unwind stopped|unwind failed|stack lost|stack unknown|stack table full)/.test(rest) || rest === '[unknown]') return head + c.red(rest) + marks;
    return head + c.yellow(rest) + marks;
  }
  if (/^frames marked \[/.test(line)) return c.dim(line);
  if ((m = /^(\d+) bytes in (\d+) allocations from stack( \(made since the last report: .*\))?$/.exec(line))) {
    return `${c.yellow.bold(m[1]!)} bytes in ${c.yellow.bold(m[2]!)} allocations from stack${m[3] ? c.dim(m[3]) : ''}`;
  }
  if (/^\[\d+:\d+:\d+\] Top \d+ stacks with outstanding allocations:$/.test(line)) return c.bold.underline(line);
  if (/^Attaching to pid \d+, Ctrl\+C to quit\.$/.test(line)) return c.dim(line);
  if (/^\taddr = 0x[0-9a-f]+ size = \d+$/.test(line)) return c.dim(line);
  if ((m = /^(dwarf|kernel): (\d+) stacks, (\d+) complete, (\d+) stopped early(.*)$/.exec(line))) {
    const ok = m[2] === m[3];
    return c.dim(`${m[1]}: `) + (ok ? c.green : c.red)(line.slice(m[1]!.length + 2));
  }
  if (/^kernel walker: \d+ events, /.test(line)) return c.dim(line);
  if (/^lost \d+ records|^\d+ (allocations|stacks) not (tracked|stored|aggregated)/.test(line)) return c.red(line);
  if (/^\[\d+\] \w+: (alloc exited|free entered)/.test(line)) return c.dim(line);
  return line;
}

// ---- --demo ------------------------------------------------------------------------------------------

async function demo(before: string[], after: string[]): Promise<void> {
  let rounds = 3;
  let json = false;
  const rest = [...before.filter((a) => a !== '--demo'), ...after];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    let v: string | undefined;
    if (a === '--json') json = true;
    else if (a === '--rounds' || a.startsWith('--rounds=')) {
      v = a === '--rounds' ? rest[++i] : a.slice('--rounds='.length);
      if (v === undefined || !/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 60)
        throw new CliError('usage', `--rounds: expected 1 to 60, got ${v ?? 'nothing'} (see dwunw memleak --help)`, ExitCode.USAGE);
      rounds = Number(v);
    } else throw new CliError('usage', `memleak --demo takes --rounds N and --json only, not ${a} (see dwunw memleak --help)`, ExitCode.USAGE);
  }
  const err = colorsFor(process.stderr);
  const r = await runDemo({ rounds, progress: (l) => process.stderr.write(err.dim(`dwunw: ${l}\n`)) });
  if (json) {
    process.stdout.write(`${JSON.stringify(demoJson(r))}\n`);
    return;
  }
  const c = colorsFor(process.stdout);
  process.stdout.write(demoText(c, r, process.stdout.isTTY ? process.stdout.columns || 80 : 0));
}
