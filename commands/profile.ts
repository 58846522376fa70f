// dwunw profile [ARGS...] [-- COMMAND ARGS...]: runs build/bpf/profile (bpf/profile/profile.c) with the same
// arguments (its flags: -p, -L, -U, -K, -F, -c, -C, -I, -f, -d, --unwind, --json, ...; `dwunw
// profile --help` shows them) and exits with its status. --pprof FILE and --html FILE are made
// here from its --json output (lib/stack-tool.ts).
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { runStackTool, type SplitArgs, splitToolArgs, type StackTool } from '../lib/stack-tool.js';

type Args = PassthroughArgs;

export const command = 'profile [args..]';
export const describe = 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph)';

const TOOL: StackTool = { name: 'profile', flags: 'UKIdav' };

export function builder(y: Argv): Argv<Args> {
  // Everything goes to profile as given (--help included), except --pprof and --html.
  return passthroughBuilder(y, 'profile');
}

/** Our options taken out of profile's: { pprof, html, folded, json, rest }. */
export const splitArgs = (args: string[]): SplitArgs => splitToolArgs(TOOL, args);

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  await profile([...before, ...(after.length ? ['--', ...after] : [])]);
}

export const profile = (args: string[]): Promise<void> => runStackTool(TOOL, args);
