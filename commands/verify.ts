// dwunw verify [--arch x86_64|arm64|mips32|all] [--json] [--jobs N] [--keep DIR]: build the fixture
// programs (make -C fixtures verify-ARCH), stop them under gdb at known places (qemu-user's
// gdbstub and gdb-multiarch for arm64 and mips32), unwind every stop's snapshot with libdwunw as
// `dwunw unwind-snapshot` does, and compare with gdb's backtrace pc for pc. Prints, per fixture,
// the expected (gdb) and actual (dwunw) stacks side by side with a summary, then a total; exit
// status 1 on any mismatch or error. Frames beyond code that has no CFI at all are reported as
// "cfi-absent", not compared. See lib/verify.ts.
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { packageRoot } from '../lib/root.js';
import { ChunkedWriter, CliError, ExitCode } from '../lib/output.js';
import { VERIFY_ARCHES, type VerifyArch, killStarted, reportJson, reportText, verify } from '../lib/verify.js';

interface Args {
  arch: string;
  json: boolean;
  jobs?: number;
  keep?: string;
}

export const command = 'verify';
export const describe = 'Unwind known stacks of the fixture programs and compare them with gdb (x86_64, arm64, mips32)';

export function builder(y: Argv): Argv<Args> {
  return y
    .option('arch', { type: 'string', default: 'all', choices: [...VERIFY_ARCHES, 'all'], describe: 'Architecture to verify' })
    .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
    .option('jobs', { type: 'number', requiresArg: true, describe: 'gdb sessions at a time (default: the CPUs, at least 2)' })
    .option('keep', { type: 'string', requiresArg: true, describe: 'Keep the snapshots and gdb frames in this directory' })
    .example('$0 verify --arch arm64', 'the arm64 fixtures under qemu-aarch64 against gdb-multiarch');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  if (argv.jobs !== undefined && (!Number.isInteger(argv.jobs) || argv.jobs < 1 || argv.jobs > 64))
    throw new CliError('--jobs', `not a number of jobs (1-64): ${argv.jobs}`, ExitCode.USAGE);
  const arches: VerifyArch[] = argv.arch === 'all' ? [...VERIFY_ARCHES] : [argv.arch as VerifyArch];
  // Interrupted: no qemu may stay behind waiting for its debugger.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
    process.once(sig, () => {
      killStarted();
      process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1));
    });
  const report = await verify({
    arches,
    root: packageRoot(),
    jobs: argv.jobs,
    keep: argv.keep,
    progress: argv.json ? undefined : (line) => process.stderr.write(`verify: ${line}\n`),
  });
  const out = new ChunkedWriter();
  await out.write(argv.json ? `${JSON.stringify(reportJson(report), null, 1)}\n` : reportText(report));
  await out.flush();
  if (!report.ok) process.exitCode = 1;
}
