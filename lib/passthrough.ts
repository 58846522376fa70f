// The subcommands that run a C tool (memleak, profile) pass their arguments through as given:
// yargs parses none of them (--help included), so the tool's own option layer answers; runTool
// runs the tool.
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import type { Argv } from 'yargs';
import { CliError } from './errors.js';

export interface PassthroughArgs {
  args?: (string | number)[];
}

export function passthroughBuilder(y: Argv, tool: string): Argv<PassthroughArgs> {
  return y
    .help(false)
    .version(false)
    .strict(false)
    .parserConfiguration({
      'unknown-options-as-args': true,
      'parse-numbers': false,
      'parse-positional-numbers': false,
      'short-option-groups': false,
      'camel-case-expansion': false,
      'dot-notation': false,
      'boolean-negation': false,
    })
    .positional('args', { type: 'string', array: true, describe: `${tool}'s arguments (see dwunw ${tool} --help)` }) as Argv<PassthroughArgs>;
}

export interface RunToolOptions {
  /** stdout read line by line (complete: false for a last line without a newline); else inherited */
  onLine?: (line: string, complete: boolean) => void;
}

/**
 * Runs a tool's binary with SIGINT, SIGTERM and SIGHUP forwarded, and SIGTERM when dwunw exits
 * first (DWUNW_PARENT_PID: the tool dies with dwunw even of SIGKILL, PR_SET_PDEATHSIG).
 * Resolves with its exit status (128 + N when killed by signal N).
 */
export async function runTool(name: string, bin: string, args: string[], o: RunToolOptions = {}): Promise<number> {
  const child = spawn(bin, args, {
    stdio: ['inherit', o.onLine ? 'pipe' : 'inherit', 'inherit'],
    env: { ...process.env, DWUNW_PARENT_PID: String(process.pid) },
  });
  const forward = (sig: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  const onExit = () => forward('SIGTERM')();
  process.on('exit', onExit);
  let partial = '';
  const onLine = o.onLine;
  if (onLine)
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      const ls = (partial + d).split('\n');
      partial = ls.pop()!;
      for (const l of ls) onLine(l, true);
    });
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', (e) => reject(new CliError(name, `${bin}: ${e.message}`)));
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  if (partial && onLine) onLine(partial, false);
  for (const [s, h] of handlers) process.removeListener(s, h);
  process.removeListener('exit', onExit);
  return status ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
}
