// dwunw offcputime [ARGS...] [-- COMMAND ARGS...]: runs build/bpf/offcputime (bpf/offcputime/) with the same
// arguments (libbpf-tools offcputime's flags -p, -t, -u, -k, -U, -K, -m, -M, --state, -f, -d,
// DURATION, and --unwind, --json, ...; `dwunw offcputime --help` shows them) and exits with its
// status. --pprof FILE and --html FILE are made here from its --json output (lib/stack-tool.ts).
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { runStackTool, type StackTool } from '../lib/stack-tool.js';

type Args = PassthroughArgs;

export const command = 'offcputime [args..]';
export const describe = 'Time threads spend off CPU (blocked, waiting) by stack, with DWARF user stacks (folded, pprof, HTML flame graph)';

export const OFFCPUTIME: StackTool = { name: 'offcputime', flags: 'ukUKdv', pprofCounts: 'stacks' };

export function builder(y: Argv): Argv<Args> {
  return passthroughBuilder(y, 'offcputime');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  await runStackTool(OFFCPUTIME, [...before, ...(after.length ? ['--', ...after] : [])]);
}
