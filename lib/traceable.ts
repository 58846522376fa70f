// Why a live process cannot be unwound, found in /proc before attaching, so that the message
// names the cause instead of ptrace's EPERM: a kernel thread, a zombie, a process another tracer
// holds (gdb, strace), Yama's ptrace_scope. Each has its own exit status (ExitCode, README.md).
import { readFileSync, readdirSync } from 'node:fs';
import { CliError, ExitCode } from './errors.js';

const PF_KTHREAD = 0x00200000;
const CAP_SYS_PTRACE = 19;

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** State letter and flags of a task, from its stat file (after the comm, which may hold spaces). */
function statOf(path: string): { state: string; flags: number; ppid: number } | null {
  const s = read(path);
  if (s === null) return null;
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { state: f[0] ?? '', ppid: Number(f[1]), flags: Number(f[6]) };
}

const statusField = (status: string, name: string): string | undefined => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1];

/** Our effective capabilities include CAP_SYS_PTRACE. */
function havePtraceCap(): boolean {
  const eff = statusField(read('/proc/self/status') ?? '', 'CapEff');
  return eff !== undefined && ((BigInt(`0x${eff}`) >> BigInt(CAP_SYS_PTRACE)) & 1n) === 1n;
}

/** pid descends from this process (Yama scope 1 lets a process trace its descendants). */
function isDescendant(pid: number): boolean {
  for (let p = pid, n = 0; p > 1 && n < 4096; n++) {
    if (p === process.pid) return true;
    const st = statOf(`/proc/${p}/stat`);
    if (!st) return false;
    p = st.ppid;
  }
  return false;
}

/** Yama's ptrace_scope (0 when Yama is not there). DWUNW_TEST_YAMA_FILE: the tests' stand-in. */
function ptraceScope(): number {
  const v = read(process.env.DWUNW_TEST_YAMA_FILE || '/proc/sys/kernel/yama/ptrace_scope');
  return v === null ? 0 : Number(v.trim()) || 0;
}

/** Throw a CliError naming why pid cannot be attached to; return when nothing is known to stop it. */
export function checkTraceable(pid: number): void {
  const st = statOf(`/proc/${pid}/stat`);
  if (!st) throw new CliError(`pid ${pid}`, 'no such process', ExitCode.NO_PROCESS);
  if (st.flags & PF_KTHREAD) throw new CliError(`pid ${pid} is a kernel thread: no user stack`, '', ExitCode.KTHREAD);
  if (st.state === 'Z' || st.state === 'X') {
    // a zombie leader can have live threads: only when every thread is gone there is nothing to unwind
    let tids: string[] = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      // gone meanwhile
    }
    const live = tids.some((t) => {
      const s = statOf(`/proc/${pid}/task/${t}/stat`)?.state;
      return s !== undefined && s !== 'Z' && s !== 'X';
    });
    if (!live) throw new CliError(`pid ${pid} is a zombie: it has exited, no stack is left`, '', ExitCode.NO_PROCESS);
  }
  const tracer = Number(statusField(read(`/proc/${pid}/status`) ?? '', 'TracerPid') ?? 0);
  if (tracer > 0 && tracer !== process.pid) {
    const comm = (read(`/proc/${tracer}/comm`) ?? '?').trim();
    throw new CliError(`pid ${pid} is traced by PID ${tracer} (${comm})`, 'a thread has one tracer at a time', ExitCode.TRACED);
  }
  const scope = ptraceScope();
  if (scope >= 3) throw new CliError(`pid ${pid}`, 'ptrace is disabled by Yama (kernel.yama.ptrace_scope = 3)', ExitCode.PTRACE_SCOPE);
  if (scope === 2 && !havePtraceCap())
    throw new CliError(`pid ${pid}`, 'Yama (kernel.yama.ptrace_scope = 2) lets only CAP_SYS_PTRACE attach: run as root', ExitCode.PTRACE_SCOPE);
  if (scope === 1 && !havePtraceCap() && !isDescendant(pid))
    throw new CliError(
      `pid ${pid}`,
      'Yama (kernel.yama.ptrace_scope = 1) lets a process attach only to its descendants: run as root, or set the sysctl to 0',
      ExitCode.PTRACE_SCOPE,
    );
}
