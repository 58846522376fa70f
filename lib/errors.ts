// The CLI's error type: reported as one line `dwunw: <what>: <cause>` (or `dwunw: <what>` when
// the cause is empty), exit status `status` (ExitCode; the table in README.md).
export class CliError extends Error {
  constructor(
    readonly what: string,
    readonly reason: string,
    readonly status: number = ExitCode.ERROR,
  ) {
    super(reason ? `${what}: ${reason}` : what);
    this.name = 'CliError';
  }
}

/** Exit statuses of dwunw and of the C tools (bpf/runtime/tool_opts.h): README.md, "Exit status". */
export const ExitCode = {
  OK: 0,
  /** Runtime error: bad input file, I/O, a thread not unwound. */
  ERROR: 1,
  /** Bad option or argument. */
  USAGE: 2,
  /** No such process, or it exited / is a zombie. */
  NO_PROCESS: 3,
  /** A kernel thread: no user stack. */
  KTHREAD: 4,
  /** Already traced by another process (TracerPid). */
  TRACED: 5,
  /** ptrace refused by Yama's ptrace_scope. */
  PTRACE_SCOPE: 6,
  /** Missing privileges (root, CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE). */
  PRIVILEGE: 7,
  /** Input cut short (a truncated core): what could be read was reported. */
  TRUNCATED: 8,
  /** The command cannot be executed / was not found (as a shell). */
  NOEXEC: 126,
  NOTFOUND: 127,
} as const;
