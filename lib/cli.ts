// The dwunw command line: yargs with one module per subcommand (commands/<name>.ts).
// Only subcommands that work are registered here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import * as bench from '../commands/bench.js';
import * as dumpTable from '../commands/dump-table.js';
import * as memleakCmd from '../commands/memleak.js';
import * as profileCmd from '../commands/profile.js';
import * as unwindCore from '../commands/unwind-core.js';
import * as unwindPid from '../commands/unwind-pid.js';
import * as unwindSnapshot from '../commands/unwind-snapshot.js';
import * as verifyCmd from '../commands/verify.js';
import { Dwunw, DwunwError } from './dwunw.js';
import { packageRoot } from './native.js';
import { CliError, ExitCode, reportError } from './output.js';

function cliVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** `dwunw --version`: the CLI's version, then the library's (dwunw_version()). */
function printVersion(): void {
  process.stdout.write(`dwunw ${cliVersion()}\n`);
  try {
    process.stdout.write(`libdwunw ${Dwunw.libraryVersion()}\n`);
  } catch (e) {
    report(e);
  }
}

function report(e: unknown): void {
  if (e instanceof CliError) reportError(e.what, e.reason, e.status);
  else if (e instanceof DwunwError) reportError('libdwunw', e.message);
  else if (e instanceof Error) reportError(e.message);
  else reportError(String(e));
}

// Ending early when stdout is closed (`dwunw ... | head`) is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  report(e);
  process.exit(1);
});

export async function main(argv: string[] = hideBin(process.argv)): Promise<void> {
  // --version anywhere before `--` (yargs' own version would not know the library's).
  const dd = argv.indexOf('--');
  if ((dd < 0 ? argv : argv.slice(0, dd)).some((a) => a === '--version' || a === '-V')) {
    printVersion();
    return;
  }

  const y = yargs(argv)
    .scriptName('dwunw')
    .usage('$0 <command> [options]\n\nDWARF call-frame unwinding for eBPF tools (libdwunw).')
    .command(dumpTable)
    .command(bench)
    .command(unwindPid)
    .command(unwindSnapshot)
    .command(verifyCmd)
    .command(unwindCore)
    .command(memleakCmd)
    .command(profileCmd)
    .demandCommand(1, 'no command given')
    .recommendCommands()
    .strict()
    .version(false)
    .option('version', { alias: 'V', type: 'boolean', describe: 'Show the CLI and library versions' })
    .help()
    .alias('help', 'h')
    .wrap(Math.min(110, process.stdout.columns || 80))
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliError('usage', `${msg.replace(/\s*\n\s*/g, ' ')} (see dwunw --help)`, ExitCode.USAGE);
    });
  try {
    await y.parseAsync();
  } catch (e) {
    report(e);
  }
}
