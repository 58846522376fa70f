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
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { runStackTool, type SplitArgs, splitToolArgs, type StackTool, type ToolRun, VIEWS_HELP } from '../lib/stack-tool.js';
import { ExportRun, exportHelp } from '../lib/export.js';
import { type ExportArgs, exportOptions, newExportArgs, takeExportArg } from './export-options.js';
import { OFFCPUTIME } from './offcputime.js';

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

const PROFILE: StackTool = { name: 'profile', flags: 'UKIdav', help: EXTRA_HELP, noValue: 'a value is expected', pprofCounts: 'samples' };

type Split = SplitArgs & ExportArgs;

/** Our options taken out of profile's (the views', --export's). */
export function splitArgs(args: string[]): Split {
  const ex = newExportArgs();
  const sp = splitToolArgs(PROFILE, args, (a, i) => takeExportArg(a, i, ex, 'profile'));
  return { ...sp, ...ex };
}

/** The run: with --export, each interval sent as profile prints it. */
function parse(args: string[]): ToolRun {
  const sp = splitArgs(args);
  const eo = exportOptions(sp, 'profile');
  return { sp, exp: eo ? { run: new ExportRun(eo), opts: eo } : undefined };
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
  if (wall) return runStackTool(OFFCPUTIME, wall);
  return runStackTool(PROFILE, args, parse);
}
