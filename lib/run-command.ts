// Running a program with its output collected: the one way lib/ does it (bench and its peers,
// verify's sessions and tools). Every process started here is remembered until it ends, so a
// command's signal handler can kill what is left (killStarted).
import { type ChildProcess, spawn } from 'node:child_process';

export interface Exit {
  /** exit status; a negative errno when the program could not be started (stderr says why) */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const live = new Set<ChildProcess>();

/** SIGKILL every process started by this module that is still running. */
export function killStarted(): void {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  live.clear();
}

/** Start a command in the background, stdout and stderr collected; `done` never rejects. */
export function startCommand(cmd: string, args: string[], env?: NodeJS.ProcessEnv): { child: ChildProcess; done: Promise<Exit> } {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
  live.add(child);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout!.on('data', (b: Buffer) => out.push(b));
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const done = new Promise<Exit>((resolve) => {
    child.on('error', (e) => err.push(Buffer.from(String(e))));
    child.on('close', (code, signal) => {
      live.delete(child);
      resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() });
    });
  });
  return { child, done };
}

/** Run a command to its end (SIGKILL after timeoutMs, when given); never rejects. */
export async function runCommand(cmd: string, args: string[], timeoutMs?: number, env?: NodeJS.ProcessEnv): Promise<Exit> {
  const p = startCommand(cmd, args, env);
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  try {
    return await p.done;
  } finally {
    clearTimeout(timer);
  }
}
