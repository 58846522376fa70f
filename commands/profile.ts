// dwunw profile [ARGS...] [-- COMMAND ARGS...]: runs build/bpf/profile (bpf/profile/profile.c) with the same
// arguments (its flags: -p, -L, -U, -K, -F, -c, -C, -I, -f, -d, --unwind, --json, ...; `dwunw
// profile --help` shows them) and exits with its status. Views made here from its --json output:
// --pprof FILE (gzip'd profile.proto, lib/profile-pprof.ts), --html FILE (a self-contained flame
// graph, lib/profile-html.ts), and --export URL (continuous export, lib/export.ts: profile then
// runs with --interval and each interval is sent while sampling goes on); with them, stdout
// carries the folded lines with -f, the NDJSON with --json, else nothing (summaries on stderr).
// --wall (a wall-clock profile: on-CPU samples and off-CPU time of the same threads in one unit,
// microseconds) runs build/bpf/offcputime --wall, the off-CPU tracer with a cpu-clock sampler
// beside it: its options are offcputime's plus -F (-L is taken as its -t).
import { existsSync, writeFileSync } from 'node:fs';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder, runTool } from '../lib/passthrough.js';
import { CliError, ExitCode } from '../lib/errors.js';
import { parseProfileJson, profilePath } from '../lib/profile.js';
import { flameHtml } from '../lib/profile-html.js';
import { encodePprof } from '../lib/profile-pprof.js';
import { runStackTool, VIEWS_HELP } from '../lib/stack-tool.js';
import { ExportRun, exportHelp, exportSummary } from '../lib/export.js';
import { type ExportArgs, exportOptions, newExportArgs, takeExportArg } from './export-options.js';

type Args = PassthroughArgs;

export const command = 'profile [args..]';
export const describe = 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph, continuous export)';

export function builder(y: Argv): Argv<Args> {
  // Everything goes to profile as given (--help included), except ours (splitArgs).
  return passthroughBuilder(y, 'profile');
}

const WALL_HELP = `
      --wall                 wall-clock profile: on-CPU samples and off-CPU time of the same
                             threads in microseconds (runs offcputime --wall; its options
                             and -F; dwunw offcputime --help); off-CPU stacks end in [off-CPU]
`;
const EXTRA_HELP = `${VIEWS_HELP('profile')}${WALL_HELP}${exportHelp('profile')}`;

interface Split extends ExportArgs {
  pprof?: string;
  html?: string;
  folded: boolean;
  json: boolean;
  rest: string[];
}

const VALUED = /^--(pprof|html)(?:=(.*))?$/;

/** Our options taken out of profile's. */
export function splitArgs(args: string[]): Split {
  const out: Split = { folded: false, json: false, rest: [], ...newExportArgs() };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') break;
    const j = takeExportArg(args, i, out, 'profile');
    if (j >= 0) {
      i = j;
      continue;
    }
    const m = VALUED.exec(a);
    if (m) {
      const v = m[2] ?? args[++i];
      if (!v || v === '--') throw new CliError('profile', `--${m[1]}: a value is expected`, ExitCode.USAGE);
      out[m[1] as 'pprof' | 'html'] = v;
      continue;
    }
    if (a === '--folded' || /^-[UKIdav]*f[UKIdav]*$/.test(a)) out.folded = true;
    if (a === '--json') out.json = true;
    out.rest.push(a);
  }
  out.rest.push(...args.slice(i));
  return out;
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  await profile([...before, ...(after.length ? ['--', ...after] : [])]);
}

/** --wall before any `--`: the arguments for offcputime --wall (profile's -L is its -t) */
export function wallArgs(args: string[]): string[] | null {
  const dd = args.indexOf('--');
  const head = dd < 0 ? args : args.slice(0, dd);
  if (!head.includes('--wall')) return null;
  return [...head.map((a) => (a === '-L' ? '-t' : a)), ...(dd < 0 ? [] : args.slice(dd))];
}

export async function profile(args: string[]): Promise<void> {
  const wall = wallArgs(args);
  if (wall) return runStackTool({ name: 'offcputime', flags: 'ukUKdv' }, wall);
  const bin = profilePath();
  if (!existsSync(bin)) throw new CliError('profile', `${bin} is not built (run make bpf)`);
  const sp = splitArgs(args);
  const eo = exportOptions(sp, 'profile');
  const exp = eo ? new ExportRun(eo) : null;
  const views = sp.pprof !== undefined || sp.html !== undefined || exp !== null;
  let run = sp.rest;
  if (views) {
    // profile writes NDJSON for the views (with -f, its folded lines in it); with --export, one
    // block per interval, then the totals
    const dd = run.indexOf('--');
    const head = (dd < 0 ? run : run.slice(0, dd)).filter((a) => a !== '--json');
    run = [...head, '--json', ...(eo ? [`--interval=${eo.intervalS}`] : []), ...(dd < 0 ? [] : run.slice(dd))];
  }
  // the output, line by line: with --export every interval is handed over as it ends; what
  // follows the last interval line is the run's report (folded lines, summary: profile drops an
  // interval's keys once it is printed). --pprof/--html want the whole run: the intervals' entries
  // are kept for them (only then: memory that grows with the run's stacks)
  let lines: string[] = [];
  const keepEntries = sp.pprof !== undefined || sp.html !== undefined;
  const onLine = (l: string) => {
    if (exp && l.startsWith('{"interval":')) lines = keepEntries ? lines.filter((x) => x.startsWith('{"pid":')) : [];
    // an interval's stacks go to the exporter only (parsed below): their text, most of
    // profile's output, is not kept until the interval's end
    else if (!exp || keepEntries || !l.startsWith('{"pid":')) lines.push(l);
    if (!exp || !l.startsWith('{')) return; // the profiled command's own output on the same stdout
    try {
      exp.line(JSON.parse(l));
    } catch {
      // a line cut short
    }
  };
  const status = await runTool('profile', bin, run, views ? { onLine } : {});
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(EXTRA_HELP);
  process.exitCode = status;
  let exportStats = null;
  if (exp) {
    exportStats = await exp.finish(eo!.timeoutMs);
    process.stderr.write(exportSummary(exportStats, exp.intervals, 'profile'));
  }
  if (!views || status !== 0) return;
  const out = parseProfileJson(lines.join('\n'));
  if (!out.summary) throw new CliError('profile', 'no summary in the output (profile stopped early?)');
  if (sp.pprof !== undefined) {
    writeFileSync(sp.pprof, encodePprof(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.pprof} (pprof, ${out.summary.samples} samples)\n`);
  }
  if (sp.html !== undefined) {
    writeFileSync(sp.html, flameHtml(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.html} (flame graph)\n`);
  }
  if (exportStats) lines.push(JSON.stringify({ export: { intervals: exp!.intervals, destinations: exportStats } }));
  if (sp.json) process.stdout.write(lines.filter((l) => !exp || !keepEntries || !l.startsWith('{"pid":')).map((l) => `${l}\n`).join(''));
  else if (sp.folded) process.stdout.write(out.folded.map((l) => `${l.folded} ${l.count}\n`).join(''));
}
