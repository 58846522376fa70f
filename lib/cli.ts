// The dwunw command line: yargs with one module per subcommand (commands/<name>.ts).
// Only subcommands that work are registered here.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yargs, { type Argv, type CommandModule } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { CliError, ExitCode, reportError } from './output.js';

/*
 * The subcommands, loaded lazily: `dwunw --help` and each command import only what they need
 * (the native library through koffi only for commands that unwind). `command` and `describe`
 * must equal the module's own exports (test/cli-start.test.ts checks).
 */
const COMMANDS: readonly { file: string; command: string; describe: string }[] = [
  { file: 'dump-table', command: 'dump-table <file>', describe: 'Print the unwind table compiled from an ELF file\'s CFI (readelf-like)' },
  { file: 'bench', command: 'bench', describe: 'Time libdwunw against libunwind and libdwfl on reference snapshots' },
  { file: 'unwind-pid', command: 'unwind-pid <pid>', describe: 'Unwind the stacks of a live process\'s threads (gdb/eu-stack-like)' },
  { file: 'unwind-snapshot', command: 'unwind-snapshot <file>', describe: 'Unwind a snapshot saved by unwind-pid --save, offline' },
  { file: 'verify', command: 'verify', describe: 'Unwind known stacks of the fixture programs and compare them with gdb (x86_64, arm64, mips32)' },
  { file: 'unwind-core', command: 'unwind-core <core>', describe: 'Unwind every thread of a core file (kernel core, gcore, qemu guest core), offline' },
  { file: 'memleak', command: 'memleak [args..]', describe: 'Outstanding allocations of a process by stack, with DWARF stacks (memleak; --demo: a side-by-side demo)' },
  { file: 'profile', command: 'profile [args..]', describe: 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph)' },
];
export const commandTable = COMMANDS;

function packageRoot(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..');
}

function cliVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** `dwunw --version`: the CLI's version, then the library's (dwunw_version()). */
async function printVersion(): Promise<void> {
  process.stdout.write(`dwunw ${cliVersion()}\n`);
  try {
    const { Dwunw } = await import('./dwunw.js');
    process.stdout.write(`libdwunw ${Dwunw.libraryVersion()}\n`);
  } catch (e) {
    report(e);
  }
}

function report(e: unknown): void {
  if (e instanceof CliError) reportError(e.what, e.reason, e.status);
  else if (e instanceof Error && e.constructor.name === 'DwunwError') reportError('libdwunw', e.message);
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
    await printVersion();
    return;
  }

  // Only the command being run is imported; the others are listed by name for --help.
  const wanted = COMMANDS.find((c) => c.command.split(' ')[0] === argv.find((a) => !a.startsWith('-')));
  const loaded = wanted ? ((await import(`../commands/${wanted.file}.js`)) as CommandModule) : undefined;
  let y: Argv = yargs(argv)
    .scriptName('dwunw')
    .usage('$0 <command> [options]\n\nDWARF call-frame unwinding for eBPF tools (libdwunw).');
  for (const c of COMMANDS)
    y = c === wanted && loaded ? y.command(loaded) : y.command(c.command, c.describe, () => {}, () => {});
  y = y
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
