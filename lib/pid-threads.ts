// A live process's threads for dwunw unwind-pid (commands/unwind-pid.ts prints): its names and
// threads from /proc, why an attach failed in one line, and the guard that resumes every held
// thread when dwunw is interrupted.
import { readFileSync, readdirSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ThreadCapture } from './dwunw.js';
import { DWUNW_ERR_IO, DWUNW_ERR_PERM } from './native-consts.js';
import { CliError, ExitCode } from './errors.js';

// ---- /proc ---------------------------------------------------------------------------------------

export function readComm(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').replace(/\n$/, '');
  } catch {
    return null;
  }
}

/** Tgid of a task, from its status file; null when unreadable. */
export function tgidOf(pid: number): number | null {
  try {
    const m = /^Tgid:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** The process's threads, the main thread first; throws CliError when the process is gone. */
export function threadsOf(pid: number): number[] {
  let names: string[];
  try {
    names = readdirSync(`/proc/${pid}/task`);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') throw new CliError(`pid ${pid}`, 'no such process', ExitCode.NO_PROCESS);
    throw new CliError(`pid ${pid}`, `cannot list threads: ${(e as Error).message}`);
  }
  const tids = names.filter((n) => /^\d+$/.test(n)).map(Number);
  if (tids.length === 0) throw new CliError(`pid ${pid}`, 'no such process', ExitCode.NO_PROCESS);
  return tids.sort((a, b) => (a === pid ? -1 : b === pid ? 1 : a - b));
}

/** Node's process.arch -> the library's architecture names (when no thread gave its registers). */
export const HOST_ARCH: Record<string, string> = { x64: 'x86_64', arm64: 'arm64', mipsel: 'mips32' };

const errnoName = (e: number): string | undefined =>
  Object.entries(osConstants.errno).find(([, v]) => v === e)?.[0];

/** Why attach failed, as one line: the library's text, the errno, and who traces the thread. */
export function attachFailure(pid: number, c: ThreadCapture): string {
  const detail: string[] = [];
  const name = c.attachErrno ? errnoName(c.attachErrno) : undefined;
  if (name) detail.push(name);
  if (c.stop === DWUNW_ERR_PERM) {
    try {
      const m = /^TracerPid:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/task/${c.tid}/status`, 'utf8'));
      if (m && m[1] !== '0') detail.push(`already traced by pid ${m[1]}`);
    } catch {
      // gone meanwhile: no detail
    }
  }
  return `cannot attach: ${c.stopText}${detail.length ? ` (${detail.join('; ')})` : ''}`;
}

/** Attach gave up waiting for the thread to stop (the library has warned about it). */
export const attachTimedOut = (c: ThreadCapture): boolean =>
  !c.attached && c.stop === DWUNW_ERR_IO && c.attachErrno === osConstants.errno.ETIMEDOUT;

// ---- Signals -------------------------------------------------------------------------------------

const GUARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Until the returned function is called: on SIGINT/SIGTERM/SIGHUP resume every held thread, say
 * so, and die of the same signal; on any exit, resume every held thread.
 */
export function guardHeldThreads(detachAll: () => number): () => void {
  const onSignal = (sig: NodeJS.Signals): void => {
    const n = detachAll();
    process.stderr.write(`dwunw: interrupted by ${sig}${n ? ` (resumed ${n} held thread${n > 1 ? 's' : ''})` : ''}\n`);
    remove();
    // With no listener left, the default action applies: die of the signal, as expected.
    process.kill(process.pid, sig);
  };
  const onExit = (): void => {
    detachAll();
  };
  const remove = (): void => {
    for (const s of GUARDED_SIGNALS) process.removeListener(s, onSignal);
    process.removeListener('exit', onExit);
  };
  for (const s of GUARDED_SIGNALS) process.on(s, onSignal);
  process.on('exit', onExit);
  return remove;
}

/**
 * Let a signal that arrived during the synchronous library calls be handled now. libuv notices
 * signals in its poll phase; one setImmediate may resolve in the current loop iteration's check
 * phase without passing through it, two cannot.
 */
export async function letSignalsIn(): Promise<void> {
  await yieldToEventLoop();
  await yieldToEventLoop();
}
