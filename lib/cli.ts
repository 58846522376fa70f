// The dwunw command line: yargs with one module per subcommand (commands/<name>.ts: options and
// printing; the work is in lib/, see commands/README.md).
// Only subcommands that work are registered here.
import type { CommandModule } from 'yargs';
import { type CommandEntry, USAGE, classify, topHelp } from './cli-top.js';
import { CliError, ExitCode } from './errors.js';
import { packageVersion } from './root.js';

/*
 * The subcommands, loaded lazily: `dwunw --help` loads neither yargs nor any command, and each
 * command imports only what it needs (the native library through koffi only for commands that
 * unwind). `command` and `describe` must equal the module's own exports (test/cli-start.test.ts).
 */
const COMMANDS: readonly CommandEntry[] = [
  { file: 'dump-table', command: 'dump-table <file>', describe: 'Print the unwind table compiled from an ELF file\'s CFI (readelf-like)', load: () => import('../commands/dump-table.js') },
  { file: 'bench', command: 'bench', describe: 'Time libdwunw against libunwind, libdwfl and framehop on reference snapshots', load: () => import('../commands/bench.js') },
  { file: 'unwind-pid', command: 'unwind-pid <pid>', describe: 'Unwind the stacks of a live process\'s threads (gdb/eu-stack-like)', load: () => import('../commands/unwind-pid.js') },
  { file: 'unwind-snapshot', command: 'unwind-snapshot <file>', describe: 'Unwind a snapshot saved by unwind-pid --save, offline', load: () => import('../commands/unwind-snapshot.js') },
  { file: 'verify', command: 'verify', describe: 'Unwind known stacks of the fixture programs and compare them with gdb (x86_64, arm64, mips32)', load: () => import('../commands/verify.js') },
  { file: 'unwind-core', command: 'unwind-core <core>', describe: 'Unwind every thread of a core file (kernel core, gcore, qemu guest core), offline', load: () => import('../commands/unwind-core.js') },
  { file: 'memleak', command: 'memleak [args..]', describe: 'Outstanding allocations of a process by stack, with DWARF stacks (memleak; --demo: a side-by-side demo)', load: () => import('../commands/memleak.js') },
  { file: 'profile', command: 'profile [args..]', describe: 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph, continuous export)', load: () => import('../commands/profile.js') },
  { file: 'symbolize', command: 'symbolize <input>', describe: 'Name the unnamed frames of a pprof profile by build id (local debug files, debuginfod)', load: () => import('../commands/symbolize.js') },
  { file: 'offcputime', command: 'offcputime [args..]', describe: 'Time threads spend off CPU (blocked, waiting) by stack, with DWARF user stacks (folded, pprof, HTML flame graph)', load: () => import('../commands/offcputime.js') },
];
export const commandTable = COMMANDS;

/** Write `dwunw: <what>: <cause>` to stderr and set the exit status (as lib/output.ts, without chalk). */
function reportError(what: string, reason?: string, status = 1): void {
  const line = reason === undefined || reason === '' ? what : `${what}: ${reason}`;
  process.stderr.write(`dwunw: ${line.replace(/\s*\n\s*/g, ' ').trim()}\n`);
  process.exitCode = status;
}

/** `dwunw --version`: the CLI's version, then the library's (dwunw_version()). */
async function printVersion(): Promise<void> {
  process.stdout.write(`dwunw ${packageVersion()}\n`);
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

const width = (): number => Math.min(110, process.stdout.columns || 80);

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const top = classify(argv, COMMANDS);
  if (top.kind === 'version') return printVersion();
  if (top.kind === 'help') {
    process.stdout.write(topHelp(COMMANDS, width()));
    return;
  }
  if (top.kind === 'usage') {
    reportError('usage', `${top.message} (see dwunw --help)`, ExitCode.USAGE);
    return;
  }
  try {
    await runCommand(argv, top.entry);
  } catch (e) {
    report(e);
  }
}

/** The command through yargs: its options, its --help, its usage errors. */
async function runCommand(argv: string[], wanted: CommandEntry): Promise<void> {
  const [{ default: yargs }, loaded] = await Promise.all([import('yargs'), wanted.load()]);
  const name = wanted.command.split(' ')[0];
  let y = yargs(argv).scriptName('dwunw').usage(USAGE);
  for (const c of COMMANDS) y = c === wanted ? y.command(loaded as CommandModule) : y.command(c.command, c.describe, () => {}, () => {});
  // yargs renders the whole help text right after starting a command's handler, to keep it for a
  // later showHelp(); dwunw never shows help after a failure (.fail below throws), so that work
  // (the larger part of yargs' cost in a run) is skipped. An internal method: absent, nothing skipped.
  type Internals = { getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } } };
  const usage = (y as unknown as Internals).getInternalMethods?.().getUsageInstance?.();
  if (typeof usage?.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => {};
  await y
    .demandCommand(1, 'no command given')
    .strict()
    .version(false)
    .option('version', { alias: 'V', type: 'boolean', describe: 'Show the CLI and library versions' })
    .help()
    .alias('help', 'h')
    .wrap(width())
    .fail((msg, err) => {
      if (err) throw err;
      throw new CliError('usage', `${msg.replace(/\s*\n\s*/g, ' ')} (see dwunw ${name} --help)`, ExitCode.USAGE);
    })
    .parseAsync()
    .catch((e: unknown) => {
      // a command's own check of an option's value: the same pointer as yargs' errors
      if (e instanceof CliError && e.status === ExitCode.USAGE && !e.reason.includes('(see dwunw'))
        throw new CliError(e.what, `${e.reason} (see dwunw ${name} --help)`, e.status);
      throw e;
    });
}
