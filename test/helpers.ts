// The one helper module of the test files (every test/*.test.ts and test/oracle/harness.ts import
// it): where things are, starting programs (killed on timeout and at teardown, their output
// collected), waiting for a condition, NDJSON reports, and the gate of the checks that cannot run
// here (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1, as CI runs them).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const dwunwBin = join(root, 'bin', 'dwunw');
export const bpfDir = join(root, 'build', 'bpf');
export const fixturesX64 = join(root, 'fixtures', 'x86_64', 'build');
/** The build directory (build/, or $DWUNW_BUILD). */
export const buildDir = resolve(root, process.env.DWUNW_BUILD ?? 'build');
/** CI: a check that cannot run here is a failure, not a skip (requireOrSkip). */
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

/**
 * The environment of a program under test: without tap's loaders (NODE_OPTIONS), FORCE_COLOR or
 * the test knobs of dwunw (DWUNW_TEST_*) inherited from the shell, plus `extra`.
 */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  delete e.FORCE_COLOR;
  delete e.NODE_OPTIONS; // tap's loaders are for the test file, not for the program under test
  for (const k of Object.keys(e)) if (k.startsWith('DWUNW_TEST_')) delete e[k];
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
  /** the repository root unless given */
  cwd?: string;
  /** a pipe on stdin, left open (the program then waits in read) */
  stdinPipe?: boolean;
  /** called with everything read so far, at each chunk of output */
  onOutput?: (stdout: string, stderr: string) => void;
}

/** Run a command in the background from the repository root; killed after timeoutMs and at teardown. */
export function start(cmd: string, args: string[], o: StartOptions = {}): Started {
  const t0 = Date.now();
  const child = spawn(cmd, args, { cwd: o.cwd ?? root, env: o.env ?? cliEnv(), stdio: [o.stdinPipe ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
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
  child.on('error', (e) => (stderr += String(e)));
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

/** `dwunw ARGS` (bin/dwunw under this node) in the background. */
export const startDwunw = (args: string[], o: StartOptions = {}): Started => start(process.execPath, [dwunwBin, ...args], o);

/** `dwunw ARGS` to its end. */
export const dwunw = (args: string[], o: StartOptions = {}): Promise<Run> => startDwunw(args, o).done;

/** Run a command to its end, synchronously (killed after timeoutMs; 90 s unless given). */
export function runSync(cmd: string, args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Run {
  const t0 = Date.now();
  const r = spawnSync(cmd, args, {
    cwd: o.cwd ?? root,
    env: o.env ?? cliEnv(),
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    timeout: o.timeoutMs ?? 90_000,
    killSignal: 'SIGKILL',
  });
  const stderr = r.error && r.status === null && !r.signal ? `${r.stderr ?? ''}${String(r.error)}` : (r.stderr ?? '');
  return { args, pid: r.pid, status: r.status, signal: r.signal, stdout: r.stdout ?? '', stderr, ms: Date.now() - t0 };
}

/** `dwunw ARGS` to its end, synchronously. */
export const dwunwSync = (args: string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Run =>
  runSync(process.execPath, [dwunwBin, ...args], o);

/** Whether a command is on PATH. */
export const onPath = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v '${cmd}'`]).status === 0;

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

// ---- Scheduling ---------------------------------------------------------------------------------

/** Run jobs with at most `limit` at a time; each result (or error) in order. */
export function pool<T>(jobs: Array<() => Promise<T>>, limit: number): Array<Promise<T>> {
  const results: Array<Promise<T>> = [];
  let active = 0;
  const queue: Array<() => void> = [];
  const next = () => {
    active--;
    queue.shift()?.();
  };
  for (const job of jobs) {
    results.push(
      new Promise<T>((resolve, reject) => {
        const start = () => {
          active++;
          job().then(resolve, reject).finally(next);
        };
        if (active < limit) start();
        else queue.push(start);
      }),
    );
  }
  // the caller awaits each one; an unobserved rejection must not end the process first
  for (const p of results) p.catch(() => undefined);
  return results;
}

// ---- Process state (/proc) ----------------------------------------------------------------------

/** The command name of pid ('' when it is gone). */
export function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** fixtures/x86_64/hot's own report, one JSON line among its profiler's ({"pid":N,...,"cpu_ns":{chain: ns}}). */
export interface HotReport {
  pid: number;
  rounds: number;
  cpu_ns: Record<string, number>;
}
export function hotReport(text: string): HotReport | null {
  const line = text.split('\n').find((l) => l.startsWith('{"pid":') && l.includes('"cpu_ns"'));
  return line ? (JSON.parse(line) as HotReport) : null;
}

let clkTck = 0;
/**
 * CPU time pid has had, in seconds: user + system, its own and its waited-for children's
 * (/proc/PID/stat, the kernel's measure; NaN when it is gone).
 */
export function cpuSeconds(pid: number): number {
  clkTck ||= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after the command name: 14-17 of stat(5) are utime, stime, cutime, cstime
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return f.slice(11, 15).reduce((a, v) => a + Number(v), 0) / clkTck;
  } catch {
    return NaN;
  }
}

/** How many threads pid has (0 when it is gone). */
export function threadCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/task`).length;
  } catch {
    return 0;
  }
}

/**
 * Whether pid's main thread sleeps in nanosleep or clock_nanosleep (x86_64 numbers 35, 230), and
 * runs `comm` when given: a program that reached a sleep of its own, past the work before it.
 */
export function inSleep(pid: number, comm?: string): boolean {
  try {
    if (comm !== undefined && commOf(pid) !== comm) return false;
    return /^(35|230) /.test(readFileSync(`/proc/${pid}/syscall`, 'utf8'));
  } catch {
    return false;
  }
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

/**
 * The one gate of every skip in the suite: `what` cannot be checked here because `why`. Skipped
 * (tap prints the reason); under DWUNW_REQUIRE_BPF=1 (CI: a fresh Debian x86_64 machine, root,
 * `scripts/ensure-deps` run, `make` done) a failure, because every reason a test gives for not
 * running -- a missing tool, package, build, privilege, kernel feature -- is one that holds on
 * no such machine: if it fires there, the machine or the build is broken, and CI says so.
 */
export function requireOrSkip(tt: Test, what: string, why: string): void {
  if (REQUIRE_BPF) tt.fail(`DWUNW_REQUIRE_BPF=1 but ${what} cannot run: ${why}`);
  else tt.pass(`${what}: skipped: ${why}`, { skip: why });
}

/**
 * The options of a `t.test` that cannot run when `why` is a string: `{ skip: why }`, and under
 * DWUNW_REQUIRE_BPF=1 also a failure (requireOrSkip) on the parent.
 */
export function skipUnless(tt: Test, what: string, why: string | false | null | undefined): { skip: string | false } {
  if (why && REQUIRE_BPF) tt.fail(`DWUNW_REQUIRE_BPF=1 but ${what} cannot run: ${why}`);
  return { skip: why || false };
}

/** The old name of requireOrSkip (arguments: why, then what), for branches in flight. */
export const skipOrFail = (tt: Test, why: string, what: string): void => requireOrSkip(tt, what, why);

/** A memleak run that failed for want of BPF (not a memleak bug): the reason, else null. */
export function memleakBpfFailure(stderr: string): string | null {
  const m = /^(?:memleak|dwunw: memleak(?: --unwind=\w+)?): (need root.*|cannot (open|load) the BPF (object|programs).*|cannot probe .*|cannot attach .*|cannot open the (ring|perf) buffer.*)$/m.exec(stderr);
  return m ? m[1]! : null;
}

/**
 * SIGSTOP / SIGCONT processes while remembering which are stopped, so a test's `finally` can
 * continue every one it left stopped (`resumeAll`): no target left stopped when a check fails.
 */
export function stopper(): { signal: (pid: number, sig: 'SIGSTOP' | 'SIGCONT') => void; resumeAll: () => void } {
  const stopped = new Set<number>();
  const signal = (pid: number, sig: 'SIGSTOP' | 'SIGCONT'): void => {
    process.kill(pid, sig);
    if (sig === 'SIGSTOP') stopped.add(pid);
    else stopped.delete(pid);
  };
  return { signal, resumeAll: () => { for (const pid of [...stopped]) signal(pid, 'SIGCONT'); } };
}
