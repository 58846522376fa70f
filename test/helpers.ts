// Helpers the test files share: where things are, starting the tools (killed on timeout and at
// teardown, their output collected), waiting for a condition, NDJSON reports, and the gate of the
// tests that need BPF (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1).
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const dwunwBin = join(root, 'bin', 'dwunw');
export const bpfDir = join(root, 'build', 'bpf');
export const fixturesX64 = join(root, 'fixtures', 'x86_64', 'build');
/** CI: a test that cannot run for want of BPF is a failure, not a skip. */
export const REQUIRE_BPF = process.env.DWUNW_REQUIRE_BPF === '1';

// ---- Processes ----------------------------------------------------------------------------------

export interface Run {
  args: string[];
  pid?: number;
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Started {
  child: ChildProcess;
  done: Promise<Run>;
}

/** The environment of a program under test: without tap's loaders (NODE_OPTIONS) or FORCE_COLOR, plus `extra`. */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  delete e.FORCE_COLOR;
  delete e.NODE_OPTIONS; // tap's loaders are for the test file, not for the program under test
  return { ...e, ...extra };
}

const children = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** A child started elsewhere, killed at teardown too (unless it ended). */
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.on('close', () => children.delete(child));
  return child;
}

export interface StartOptions {
  /** killed (SIGKILL) after this long; 90 s unless given */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** called with everything read so far, at each chunk of output */
  onOutput?: (stdout: string, stderr: string) => void;
}

/** Run a command in the background from the repository root; killed after timeoutMs and at teardown. */
export function start(cmd: string, args: string[], o: StartOptions = {}): Started {
  const t0 = Date.now();
  const child = spawn(cmd, args, { cwd: root, env: o.env ?? cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 90_000);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    o.onOutput?.(stdout, stderr);
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    o.onOutput?.(stdout, stderr);
  });
  const done = new Promise<Run>((resolve) =>
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ args, pid: child.pid, status, signal, stdout, stderr, ms: Date.now() - t0 });
    }),
  );
  return { child, done };
}

/** `start` and wait for the end. */
export const run = (cmd: string, args: string[], o: StartOptions = {}): Promise<Run> => start(cmd, args, o).done;

// ---- Waiting ------------------------------------------------------------------------------------

/** Whether cond() became true within ms (checked every stepMs). */
export async function until(cond: () => boolean, ms: number, stepMs = 50): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await sleep(stepMs);
  }
  return true;
}

/** Wait for cond(); an error naming `what` after ms. */
export async function waitFor(cond: () => boolean, ms: number, what: string, stepMs = 5): Promise<void> {
  if (!(await until(cond, ms, stepMs))) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

// ---- Reports ------------------------------------------------------------------------------------

/** The JSON documents of NDJSON output (lines that start with '{'). */
export function jsonLines<T>(text: string): T[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as T);
}

// ---- BPF gate -----------------------------------------------------------------------------------

/**
 * Why a BPF tool cannot run here (null: it can): Linux on x86_64, root (`needs` says for what),
 * the kernel's BTF, and every file of `built` ([path, what builds it]).
 */
export function bpfUnavailable(needs: string, built: [string, string][]): string | null {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'needs Linux on x86_64';
  if (process.getuid?.() !== 0) return `not root (${needs})`;
  if (!existsSync('/sys/kernel/btf/vmlinux')) return 'the kernel has no BTF (/sys/kernel/btf/vmlinux)';
  for (const [path, how] of built) if (!existsSync(path)) return `${path} is not built (${how})`;
  return null;
}

/** A test that cannot run (`why`): skipped with the reason, or a failure under DWUNW_REQUIRE_BPF=1. */
export function skipOrFail(tt: Test, why: string, skipped: string): void {
  if (REQUIRE_BPF) tt.fail(`DWUNW_REQUIRE_BPF=1 but ${why}`);
  else tt.pass(`${skipped}: ${why}`, { skip: why });
}

/** A memleak run that failed for want of BPF (not a memleak bug): the reason, else null. */
export function memleakBpfFailure(stderr: string): string | null {
  const m = /^(?:memleak|dwunw: memleak(?: --unwind=\w+)?): (need root.*|cannot (open|load) the BPF (object|programs).*|cannot probe .*|cannot attach .*|cannot open the (ring|perf) buffer.*)$/m.exec(stderr);
  return m ? m[1]! : null;
}
