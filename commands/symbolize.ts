// dwunw symbolize IN.pb.gz -o OUT.pb.gz [--debug-dir DIRS] [--debuginfod|--no-debuginfod] [--json]:
// name the frames a pprof profile left without a name, by build id (lib/symbolize.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { CliError } from '../lib/output.js';

/** A file error's cause, without node's "ENOENT: ..., open 'path'" wrapping. */
const cause = (e: unknown): string => {
  const x = e as NodeJS.ErrnoException;
  if (x.code === 'ENOENT') return 'no such file or directory';
  if (x.code === 'EACCES') return 'permission denied';
  if (x.code === 'EISDIR') return 'is a directory';
  return x.message;
};

interface Args {
  input: string;
  output: string;
  json: boolean;
  debuginfod?: boolean;
  'debug-dir'?: string;
}

export const command = 'symbolize <input>';
export const describe = 'Name the unnamed frames of a pprof profile by build id (local debug files, debuginfod)';

export function builder(y: Argv): Argv<Args> {
  return y
    .positional('input', { type: 'string', demandOption: true, describe: 'pprof profile (profile.proto, gzip\'d or not)' })
    .option('output', { alias: 'o', type: 'string', demandOption: true, requiresArg: true, describe: 'Write the named profile here (gzip\'d)' })
    .option('debuginfod', {
      type: 'boolean',
      describe: 'Fetch the debug files from DEBUGINFOD_URLS (default: on when it is set); --no-debuginfod: never',
    })
    .option('debug-dir', { type: 'string', requiresArg: true, describe: 'Roots of separate debug files, \':\'-separated (default /usr/lib/debug)' })
    .option('json', { type: 'boolean', default: false, describe: 'Print {unnamed, named, summary} as JSON' })
    .example('$0 symbolize host.pb.gz -o named.pb.gz', 'name what the profiling host could not');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const { debuginfodWanted, DEBUGINFOD_WAIT_MS } = await import('../lib/debuginfod.js');
  const { symbolizePprof } = await import('../lib/symbolize.js');
  let bytes: Buffer;
  try {
    bytes = readFileSync(argv.input);
  } catch (e) {
    throw new CliError(argv.input, cause(e));
  }
  const r = symbolizePprof(bytes, argv.input, {
    debugDirs: argv['debug-dir'],
    debuginfod: debuginfodWanted(argv.debuginfod),
    waitMs: DEBUGINFOD_WAIT_MS,
  });
  try {
    writeFileSync(argv.output, r.profile);
  } catch (e) {
    throw new CliError(argv.output, cause(e));
  }
  if (argv.json) process.stdout.write(`${JSON.stringify({ unnamed: r.unnamed, named: r.named, summary: r.summary })}\n`);
  for (const l of r.summary) process.stderr.write(`${l}\n`);
  if (!argv.json) process.stderr.write(`dwunw: symbolize: named ${r.named} of ${r.unnamed} locations without a name; wrote ${argv.output}\n`);
}
