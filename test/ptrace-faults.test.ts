// ptrace faults of `dwunw unwind-pid`, as a user meets them. Already covered elsewhere, not repeated:
//  - test/cli-unwind-pid.test.ts: dwunw killed by SIGINT, SIGTERM or SIGKILL while it holds a
//    thread (the target keeps running, no tracer left); the target killed while held (a clean
//    NO_PROCESS stop, its parent still sees SIGKILL); a zombie target; a thread traced by another
//    tracer (PERM for it, the others unwound); a non-dumpable target of another user, dwunw as root
//    (the warning "attached only through CAP_SYS_PTRACE"); a thread that cannot stop (state D).
//  - test/unit/test_fd_leak.c (unit.test.ts, sanitizers.test.ts): no file descriptor leak over
//    10 000 captures reading beyond the snapshot (process_vm_readv, then /proc/PID/mem with
//    process_vm_readv refused by seccomp) and 1000 attach/read/detach cycles.
// Here:
//  - a target that exits, or is killed, at a random moment while dwunw runs (50 times, threads
//    being created and exiting all the while): dwunw never hangs, exits 0 (an exit is not an
//    error) or 1 with one-line errors (the pid already gone: "no such process"), never leaves a
//    thread stopped or traced, and the target's parent sees the exit status it chose;
//  - dwunw killed by SIGINT, SIGTERM or SIGKILL at a random moment, holding threads 150 ms each
//    (30 times): the target always keeps running, untraced;
//  - EPERM: dwunw as an unprivileged user (setpriv --reuid=65534) against a root process: exit 1,
//    one line "cannot attach: permission denied (EPERM)", the target untouched;
//  - a non-dumpable target of that same user, dwunw unprivileged: the library's warning that
//    ptrace is refused, then the EPERM line.
// Needs root (ptrace of other processes, setpriv) and x86_64 Linux. DWUNW_FAULT_SEED fixes the
// random timings (the seed used is printed).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { cliEnv, dwunwBin, type Run, skipUnless, start, type Started } from './helpers.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];

// ---- Randomness that can be replayed ------------------------------------------------------------

const seed = Number(process.env.DWUNW_FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
t.comment(`DWUNW_FAULT_SEED=${seed}`);
let state = seed >>> 0 || 1;
function rand(n: number): number {
  // xorshift32
  state ^= state << 13;
  state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5;
  state >>>= 0;
  return state % n;
}

// ---- Processes --------------------------------------------------------------------------------------

function startDwunw(args: string[], env: Record<string, string> = {}, asNobody = false): Started {
  // tap's process-info hook puts its NODE_OPTIONS back into every child's environment (it would
  // fail to write its report as nobody): env -u removes it after that.
  const [cmd, argv] = asNobody
    ? ['env', ['-u', 'NODE_OPTIONS', 'setpriv', ...NOBODY, process.execPath, dwunwBin, ...args]]
    : [process.execPath, [dwunwBin, ...args]];
  return start(cmd, argv, { env: cliEnv(env), timeoutMs: 600_000 });
}

async function within<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<'timeout'>((res) => (timer = setTimeout(() => res('timeout'), ms)))]);
  clearTimeout(timer);
  return r;
}

function kill(c: ChildProcess, sig: NodeJS.Signals = 'SIGKILL'): void {
  if (c.exitCode === null && c.signalCode === null) c.kill(sig);
}

function exitOf(c: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) resolve({ code: c.exitCode, signal: c.signalCode });
    else c.on('exit', (code, signal) => resolve({ code, signal }));
  });
}

function firstLine(c: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    c.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
    c.on('exit', () => reject(new Error('exited before printing a line')));
  });
}

function readOr(path: string, dflt: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return dflt;
  }
}

/** [tid, state letter, tracer pid] of every thread still there. */
function threads(pid: number): [number, string, number][] {
  let tids: number[];
  try {
    tids = readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [];
  }
  const out: [number, string, number][] = [];
  for (const tid of tids) {
    const stat = readOr(`/proc/${pid}/task/${tid}/stat`, '');
    if (!stat) continue;
    const st = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '';
    const tracer = Number(/^TracerPid:\s*(\d+)$/m.exec(readOr(`/proc/${pid}/task/${tid}/status`, ''))?.[1] ?? 0);
    out.push([tid, st, tracer]);
  }
  return out;
}

/** Threads left stopped (t/T) or traced, after a short grace period; [] when none. */
async function leftHeld(pid: number): Promise<string[]> {
  let bad: string[] = [];
  for (let i = 0; i < 50; i++) {
    bad = threads(pid)
      .filter(([, st, tracer]) => st !== 'Z' && st !== 'X' && (/^[tT]$/.test(st) || tracer !== 0))
      .map(([tid, st, tracer]) => `tid ${tid} state ${st} tracer ${tracer}`);
    if (bad.length === 0) return [];
    await sleep(20);
  }
  return bad;
}

// ---- Helper programs ---------------------------------------------------------------------------

// churn LIFE_MS CHURNERS SLEEPERS: CHURNERS threads each create a short-lived thread every 0.5 ms,
// SLEEPERS threads wait in pause(); main prints "ready", then _exit(7) after LIFE_MS (-1: never).
const CHURN_C = `#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static void *quick(void *a) { struct timespec ts = { 0, (long)(size_t)a }; nanosleep(&ts, NULL); return NULL; }
static void *sleeper(void *a) { (void)a; for (;;) pause(); return NULL; }
static void *churner(void *a)
{
	(void)a;
	for (unsigned i = 0;; i++) {
		pthread_t t;
		struct timespec ts = { 0, 500000 };
		if (pthread_create(&t, NULL, quick, (void *)(size_t)((i % 7) * 300000)) == 0)
			pthread_detach(t);
		nanosleep(&ts, NULL);
	}
	return NULL;
}
int main(int argc, char **argv)
{
	long life = argc > 1 ? atol(argv[1]) : -1;
	int churners = argc > 2 ? atoi(argv[2]) : 1, sleepers = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t t;
	for (int i = 0; i < churners; i++)
		pthread_create(&t, NULL, churner, NULL);
	for (int i = 0; i < sleepers; i++)
		pthread_create(&t, NULL, sleeper, NULL);
	printf("ready\\n");
	fflush(stdout);
	if (life < 0)
		for (;;)
			pause();
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += life / 1000;
	end.tv_nsec += (life % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	do
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
	while (clock_gettime(CLOCK_MONOTONIC, &now) == 0 && (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec)));
	_exit(7);
}
`;

// A non-dumpable process (run as nobody): prints "ready" and waits.
const NONDUMP_C = `#include <stdio.h>
#include <unistd.h>
#include <sys/prctl.h>
int main(void)
{
	prctl(PR_SET_DUMPABLE, 0);
	printf("ready\\n");
	fflush(stdout);
	for (;;)
		pause();
}
`;

const work = mkdtempSync(join(tmpdir(), 'dwunw-ptrace-faults-'));
chmodSync(work, 0o755); // nobody runs the programs too
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const churnExe = join(work, 'churn');
const nondumpExe = join(work, 'nondump');
writeFileSync(join(work, 'churn.c'), CHURN_C);
writeFileSync(join(work, 'nondump.c'), NONDUMP_C);
execFileSync('gcc', ['-O2', '-pthread', '-o', churnExe, join(work, 'churn.c')]);
execFileSync('gcc', ['-O2', '-o', nondumpExe, join(work, 'nondump.c')]);

const procs: ChildProcess[] = [];
t.teardown(() => procs.forEach((c) => kill(c)));
function target(args: string[], asNobody = false): ChildProcess {
  const c = asNobody
    ? spawn('setpriv', [...NOBODY, ...args], { stdio: ['ignore', 'pipe', 'ignore'] })
    : spawn(args[0]!, args.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  procs.push(c);
  return c;
}

/** Every stderr line is a one-line dwunw message (no stack trace, no blank noise). */
function oneLineMessages(t: Test, r: Run, what: string): void {
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  t.ok(lines.every((l) => l.startsWith('dwunw: ')), `${what}: stderr lines are dwunw's one-line messages`, { stderr: r.stderr });
  t.notMatch(r.stderr, /^\s+at /m, `${what}: no stack trace`);
}

// ---- Tests ------------------------------------------------------------------------------------------

const { skip } = skipUnless(t, 'the ptrace fault tests', !isRoot ? 'needs root (ptrace of other processes, setpriv)' : process.arch !== 'x64' ? 'x86_64 only' : false);

t.test('the target exits or is killed at a random moment: no hang, nothing left stopped', { skip }, async (t) => {
  const N = 50;
  const PARALLEL = 2;
  const outcomes = new Map<string, number>();
  const endings = new Map<string, number>();
  let next = 0;
  const one = async (i: number): Promise<void> => {
    // exits: by itself, at any moment (before dwunw looks at the pid, while it attaches and
    // unwinds, after); killed: by us, 0-20 ms after dwunw first holds one of its threads.
    const mode = i % 2 === 0 ? 'exits' : 'killed';
    const when = mode === 'exits' ? rand(2000) : rand(20);
    const hold = rand(2) * 20; // ms each thread is held (the test hook): a wider window
    const what = `#${i} (${mode} after ${when} ms${mode === 'killed' ? ' of being held' : ''}, hold ${hold} ms)`;
    const c = target([churnExe, mode === 'exits' ? String(when) : '-1', String(1 + rand(3)), String(rand(3))]);
    const pid = c.pid!;
    if ((await within(firstLine(c), 120_000)) === 'timeout') {
      t.fail(`${what}: the target started`);
      return;
    }
    const exited = exitOf(c);
    const run = startDwunw(['unwind-pid', String(pid), '--json'], hold ? { DWUNW_TEST_HOLD_MS: String(hold) } : {});
    let stopWatch = false;
    // killed mode: when our SIGKILL went out, relative to dwunw's end (told apart below)
    let killedWhileRunning = false;
    if (mode === 'killed') {
      void (async () => {
        const t0 = Date.now();
        while (!stopWatch && Date.now() - t0 < 20_000 && !threads(pid).some(([, , tracer]) => tracer === run.child.pid)) await sleep(2);
        if (stopWatch) return;
        await sleep(when);
        if (stopWatch) return;
        killedWhileRunning = true;
        kill(c);
      })();
    }
    const r = await within(run.done, 180_000);
    stopWatch = true;
    if (r === 'timeout') {
      kill(run.child);
      t.fail(`${what}: dwunw hangs (180 s)`);
      return;
    }
    // While the target still runs (exits mode, late), none of its threads may be held.
    const held = await leftHeld(pid);
    t.same(held, [], `${what}: no thread left stopped or traced`);
    // How the target ended, told apart: exits mode, on its own (status 7) or of our SIGKILL after
    // dwunw's end; killed mode, of the SIGKILL sent while dwunw ran, or (dwunw done before the kill
    // was due) of the one after it. It never ends otherwise (the killed-mode target never exits).
    kill(c);
    const ex = await within(exited, 60_000);
    let ending: string;
    if (mode === 'exits') {
      t.ok(ex !== 'timeout' && (ex.code === 7 || ex.signal === 'SIGKILL'), `${what}: its parent sees exit status 7 (or our SIGKILL after the run)`, { exit: ex });
      ending = ex !== 'timeout' && ex.code === 7 ? 'exited on its own' : 'still running at the end';
    } else {
      t.ok(ex !== 'timeout' && ex.signal === 'SIGKILL', `${what}: its parent sees SIGKILL`, { exit: ex });
      ending = killedWhileRunning ? 'killed during the run' : 'dwunw done before the kill';
    }
    endings.set(`${mode}: ${ending}`, (endings.get(`${mode}: ${ending}`) ?? 0) + 1);

    // The documented outcomes (README "Exit status", commands/unwind-pid.ts, lib/traceable.ts):
    //  0: every thread listed (at least the one dwunw found in /proc/PID/task), each unwound or
    //     NO_PROCESS (it exited while read), nothing on stderr;
    //  3: one line: the process gone before dwunw looked ("no such process"), or a zombie;
    //  1: a thread that did not stop within the attach timeout (state D): the library's warning,
    //     the thread's error "cannot attach: did not stop within N ms (ETIMEDOUT)". An exiting
    //     thread is NO_PROCESS, never "cannot attach" (native stack_reader.c task_gone).
    t.ok(r.signal === null && (r.status === 0 || r.status === 1 || r.status === 3), `${what}: dwunw exits 0, 1 or 3 (${r.status})`, { stderr: r.stderr });
    oneLineMessages(t, r, what);
    const lines = r.stderr.split('\n').filter(Boolean);
    const json = (): { pid: number; threads: { stop: string; frames: unknown[]; error?: string }[] } | null => {
      try {
        return JSON.parse(r.stdout);
      } catch (e) {
        t.fail(`${what}: valid JSON (${(e as Error).message})`, { stdout: r.stdout.slice(0, 2000) });
        return null;
      }
    };
    let outcome: string;
    if (r.status === 0) {
      t.equal(r.stderr, '', `${what}: exit 0: nothing on stderr`);
      const j = json();
      t.ok(j && j.pid === pid && j.threads.length >= 1, `${what}: exit 0 lists the process's threads (${j?.threads.length ?? 'no JSON'})`);
      const stops = new Set(j?.threads.map((x) => x.stop) ?? []);
      t.ok([...stops].every((s) => ['OK', 'NO_PROCESS', 'NO_PROGRESS', 'NO_DWARF', 'NO_MODULE', 'DEPTH', 'IO', 'STALE'].includes(s)), `${what}: documented stops (${[...stops].join(' ')})`);
      t.ok((j?.threads ?? []).every((x) => x.error === undefined), `${what}: exit 0: no thread with an error`);
      outcome = stops.has('NO_PROCESS') ? 'exit 0, some threads NO_PROCESS' : 'exit 0, unwound';
    } else if (r.status === 3) {
      t.equal(lines.length, 1, `${what}: exit 3: one line`, { stderr: r.stderr });
      t.match(lines[0] ?? '', new RegExp(`^dwunw: pid ${pid}: no such process$|^dwunw: pid ${pid} is a zombie: it has exited, no stack is left$`),
        `${what}: exit 3: the process was gone, or a zombie`);
      outcome = / is a zombie: /.test(lines[0] ?? '') ? 'exit 3, zombie' : 'exit 3, no such process';
    } else {
      const j = json();
      const failed = (j?.threads ?? []).filter((x) => x.error !== undefined);
      t.ok(failed.length >= 1 && failed.every((x) => x.stop === 'IO' && /^cannot attach: did not stop within \d+ ms \(ETIMEDOUT\)$/.test(x.error!)),
        `${what}: exit 1 only for a thread that did not stop in time`, { threads: failed });
      t.ok(lines.length === failed.length && lines.every((l) => new RegExp(`^dwunw: pid ${pid} tid \\d+ did not stop within \\d+ ms \\(state .\\): not unwound$`).test(l)),
        `${what}: exit 1: one warning per such thread`, { stderr: r.stderr });
      outcome = 'exit 1, did not stop';
    }
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  };
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      for (let i = next++; i < N; i = next++) await one(i);
    }),
  );
  t.comment(`outcomes: ${[...outcomes].map(([k, v]) => `${k}: ${v}`).join('; ')}`);
  t.comment(`targets: ${[...endings].map(([k, v]) => `${k}: ${v}`).join('; ')}`);
  // the killed-mode runs test a kill while dwunw holds threads only when the kill came in time
  const killedDuring = endings.get('killed: killed during the run') ?? 0;
  t.ok(killedDuring >= N / 4, `at least a half of the killed-mode runs killed the target while dwunw ran (${killedDuring} of ${N / 2})`);
});

t.test('dwunw killed at a random moment: the target keeps running', { skip }, async (t) => {
  const N = 30;
  const sigs: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGKILL'];
  let interrupted = 0;
  for (let i = 0; i < N; i++) {
    const sig = sigs[rand(3)]!;
    const when = 200 + rand(1300);
    const what = `#${i} (${sig} after ${when} ms)`;
    const c = target([churnExe, '-1', '0', '3']); // main + 3 sleepers: 4 threads, 150 ms held each
    const pid = c.pid!;
    await within(firstLine(c), 120_000);
    const run = startDwunw(['unwind-pid', String(pid)], { DWUNW_TEST_HOLD_MS: '150' });
    let sent = false;
    const killer = setTimeout(() => {
      sent = run.child.exitCode === null && run.child.signalCode === null;
      kill(run.child, sig);
    }, when);
    const r = await within(run.done, 180_000);
    clearTimeout(killer);
    if (r === 'timeout') {
      kill(run.child);
      t.fail(`${what}: dwunw exits`);
      kill(c);
      continue;
    }
    if (r.signal !== null) interrupted++;
    // told apart: killed (it dies of the signal: README "Signals"), or done before the signal was
    // due (or while it was on its way): then exit 0 with all 4 threads unwound
    const unwound = (r.stdout.match(/^Thread \d+ /gm) ?? []).length;
    if (r.signal !== null) t.equal(r.signal, sig, `${what}: dwunw died of it`);
    else t.ok(r.status === 0 && unwound === 4, `${what}: not killed${sent ? ' (the signal came as it ended)' : ''}: it had finished, exit 0, 4 threads unwound (${r.status}, ${unwound})`);
    if (sig !== 'SIGKILL' && r.signal === sig)
      t.match(r.stderr, /^(dwunw: interrupted by SIG(INT|TERM)( \(resumed \d+ held threads?\))?\n)?$/, `${what}: at most one line, naming the signal`, {
        stderr: r.stderr,
      });
    t.same(await leftHeld(pid), [], `${what}: no thread of the target left stopped or traced`);
    t.ok(c.exitCode === null && c.signalCode === null && threads(pid).length === 4, `${what}: the target runs on, 4 threads`);
    kill(c);
    t.equal((await exitOf(c)).signal, 'SIGKILL', `${what}: and dies only of our SIGKILL`);
  }
  t.comment(`${interrupted} of ${N} runs were interrupted, the others had finished`);
  t.ok(interrupted >= N / 3, `dwunw was killed while it ran in ${interrupted} of ${N} runs (>= ${N / 3})`);
});

t.test('EPERM: dwunw as an unprivileged user against a root process', { skip: skip || (!existsSync('/usr/bin/setpriv') && !existsSync('/bin/setpriv') && 'no setpriv') }, async (t) => {
  const c = target([churnExe, '-1', '0', '1']);
  const pid = c.pid!;
  await within(firstLine(c), 120_000);
  for (const json of [false, true]) {
    const what = json ? '--json' : 'text';
    const run = startDwunw(['unwind-pid', String(pid), ...(json ? ['--json'] : [])], {}, true);
    const r = await within(run.done, 180_000);
    if (r === 'timeout') {
      t.fail(`${what}: dwunw exits`);
      continue;
    }
    t.equal(r.status, 1, `${what}: exit status 1`);
    const lines = r.stderr.split('\n').filter(Boolean);
    t.ok(lines.length === 2 && lines.every((l) => new RegExp(`^dwunw: pid ${pid} tid \\d+: cannot attach: permission denied \\(EPERM\\)$`).test(l)),
      `${what}: one line per thread, "cannot attach: permission denied (EPERM)"`, { stderr: r.stderr });
    if (json) {
      const j = JSON.parse(r.stdout) as { threads: { stop: string; frames: unknown[]; error: string }[] };
      t.ok(j.threads.length === 2 && j.threads.every((x) => x.stop === 'PERM' && x.frames.length === 0 && /EPERM/.test(x.error)), `${what}: every thread PERM, no frames`);
    } else {
      t.match(r.stdout, /stop: permission denied \(PERM\)\n/, `${what}: the stop line`);
    }
  }
  t.same(await leftHeld(pid), [], 'the target untouched: not stopped, not traced');
});

t.test('a non-dumpable target, dwunw unprivileged: the warning, then EPERM', { skip }, async (t) => {
  const c = target([nondumpExe], true);
  t.equal(await within(firstLine(c), 120_000), 'ready');
  const pid = c.pid!; // setpriv execs the program: the same pid
  const run = startDwunw(['unwind-pid', String(pid)], {}, true);
  const r = await within(run.done, 180_000);
  if (r === 'timeout') {
    t.fail('dwunw exits');
    return;
  }
  t.equal(r.status, 1, 'exit status 1');
  t.equal(
    r.stderr,
    `dwunw: pid ${pid} is not dumpable (PR_SET_DUMPABLE=0 or changed credentials): ptrace refused, its stacks cannot be read\n` +
      `dwunw: pid ${pid} tid ${pid}: cannot attach: permission denied (EPERM)\n`,
    'the warning line, then the error line',
  );
  t.same(await leftHeld(pid), [], 'not stopped, not traced');
});
