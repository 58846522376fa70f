// `dwunw unwind-pid` and `dwunw unwind-snapshot` as a user runs them (node bin/dwunw), on processes
// this test starts: the frames against gdb's (pc for pc), the text format, errors, a thread traced
// by another tracer, signals while a thread is held (the target must keep running), a target that
// dies while held, a thread that cannot stop (--attach-timeout), and --save + unwind-snapshot
// (offline) against the live unwind.
//
// Needs root (or CAP_SYS_PTRACE) and x86_64: it ptraces, and reads /proc/PID/syscall numbers.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { cliEnv, dwunwSync, type Run, type Started, startDwunw, waitFor as waitForStep } from './helpers.js';

/** Wait for cond() (checked every 20 ms); an error naming `what` after ms. */
const waitFor = (cond: () => boolean, ms: number, what: string): Promise<void> => waitForStep(cond, ms, what, 20);


// ---- Running dwunw ------------------------------------------------------------------------------

// The limits below are hang guards, not assertions: a loaded 2-core machine runs everything 5-10x slower.
const dwunw = (args: string[], env: Record<string, string> = {}): Run => dwunwSync(args, { env: cliEnv(env), timeoutMs: 180_000 });

/** dwunw in the background, killed at the end of the subtest. */
function dwunwAsync(t: Test, args: string[], env: Record<string, string> = {}): Started {
  const s = startDwunw(args, { env: cliEnv(env) });
  t.teardown(() => kill(s.child));
  return s;
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- JSON shapes ------------------------------------------------------------------------------

interface JFrame {
  pc: string;
  sp: string;
  module: string | null;
  module_offset: string | null;
  symbol: string | null;
  offset: string | null;
  symbol_source: 'elf' | 'perf-map' | null;
  file: string | null;
  line: number | null;
  how: string;
  flags: string[];
  origin: string;
  anon?: true;
}
interface JThread {
  tid: number;
  comm: string | null;
  frames: JFrame[];
  stop: string;
  stop_text: string;
  error?: string;
}
interface JProcess {
  pid: number;
  comm: string | null;
  threads: JThread[];
}

function parseJson<T>(t: Test, text: string, what: string): T | null {
  try {
    return JSON.parse(text) as T;
  } catch (e) {
    t.fail(`${what}: not valid JSON: ${(e as Error).message}`, { text: text.slice(0, 2000) });
    return null;
  }
}

// ---- Target processes ------------------------------------------------------------------------------

function kill(c: ChildProcess): void {
  if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** Start a process that the test owns; it is killed at teardown. */
function start(t: Test, cmd: string, args: string[]): ChildProcess {
  const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => kill(c));
  return c;
}

/** The first line the process prints. */
function firstLine(c: ChildProcess, ms = 120_000): Promise<string> {
  return within(
    new Promise<string>((resolve, reject) => {
      let buf = '';
      c.stdout!.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        const nl = buf.indexOf('\n');
        if (nl >= 0) resolve(buf.slice(0, nl));
      });
      c.on('exit', () => reject(new Error('exited before printing a line')));
    }),
    ms,
    'first line of output',
  );
}

function readOr(path: string, dflt: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return dflt;
  }
}

/** State letter of a task (S, R, t, T, Z, ...), '' when gone. */
function stateOf(pid: number, tid = pid): string {
  const s = readOr(`/proc/${pid}/task/${tid}/stat`, '');
  return s ? (s.slice(s.lastIndexOf(')') + 2).split(' ')[0] ?? '') : '';
}

function tracerOf(pid: number, tid = pid): number {
  return Number(/^TracerPid:\s*(\d+)$/m.exec(readOr(`/proc/${pid}/task/${tid}/status`, ''))?.[1] ?? -1);
}

function tasksOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number).sort((a, b) => a - b);
  } catch {
    return [];
  }
}

// x86_64 system calls the targets block in: pause, nanosleep, futex (pthread_join), clock_nanosleep,
// and restart_syscall (a sleep interrupted by a ptrace stop resumes through it).
const BLOCKING = new Set(['34', '35', '202', '230', '219']);

/** Every thread of pid sleeps in one of the expected system calls: its stack no longer moves. */
async function blocked(pid: number): Promise<void> {
  await waitFor(
    () => {
      const tasks = tasksOf(pid);
      return (
        tasks.length > 0 &&
        tasks.every((tid) => stateOf(pid, tid) === 'S' && BLOCKING.has(readOr(`/proc/${pid}/task/${tid}/syscall`, '').split(' ')[0]!))
      );
    },
    60_000,
    `pid ${pid} to block`,
  );
}

/** dwunw holds the thread: it is its tracer and the thread is in a ptrace stop (after the seize). */
async function heldBy(pid: number, tracer: number): Promise<void> {
  await waitFor(() => tracerOf(pid) === tracer && /^[tT]$/.test(stateOf(pid)), 60_000, 'dwunw to hold the thread');
}

async function startSleep(t: Test): Promise<number> {
  const c = start(t, 'sleep', ['300']);
  await blocked(c.pid!);
  return c.pid!;
}

// ---- Helper programs, compiled now -------------------------------------------------------------

const work = mkdtempSync(join(tmpdir(), 'dwunw-unwind-pid-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

// Three threads in three call chains: main in pthread_join, one in pause() under five frames of
// recursion, one in nanosleep. Prints the two workers' tids.
const MT_C = `#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static pid_t tids[2];
static pthread_barrier_t bar;
__attribute__((noinline)) static void deep(int n)
{
	if (n == 0)
		pause();
	else
		deep(n - 1);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}
static void *worker(void *arg)
{
	long i = (long)arg;
	tids[i] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&bar);
	if (i == 0) {
		deep(4);
	} else {
		struct timespec ts = { 1000, 0 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}
int main(void)
{
	pthread_t t[2];
	pthread_barrier_init(&bar, NULL, 3);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	pthread_barrier_wait(&bar);
	printf("%d %d\\n", tids[0], tids[1]);
	fflush(stdout);
	pthread_join(t[0], NULL);
	return 0;
}
`;

// Another tracer: PTRACE_SEIZEs the threads given (without stopping them) and waits to be killed.
const HOLDER_C = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/ptrace.h>
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (ptrace(PTRACE_SEIZE, atoi(argv[i]), NULL, NULL) != 0) {
			perror("PTRACE_SEIZE");
			return 1;
		}
	printf("ready\\n");
	fflush(stdout);
	for (;;)
		pause();
}
`;

// A non-dumpable process of another user (nobody): root may trace it, and the library warns.
const NONDUMP_C = `#include <stdio.h>
#include <unistd.h>
#include <sys/prctl.h>
int main(void)
{
	if (setgid(65534) != 0 || setuid(65534) != 0) {
		perror("setuid");
		return 1;
	}
	prctl(PR_SET_DUMPABLE, 0);
	printf("ready\\n");
	fflush(stdout);
	for (;;)
		pause();
}
`;

// gdb's frames, pc for pc: only real frames (NORMAL, SIGTRAMP); inline and tail-call frames are
// gdb's reconstruction from debug info, which call-frame information cannot produce.
const GDB_PY = `import gdb
for t in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
    t.switch()
    f = gdb.newest_frame()
    while f is not None:
        if f.type() in (gdb.NORMAL_FRAME, gdb.SIGTRAMP_FRAME):
            print("DWUNW-PC %d 0x%x" % (t.ptid[1], f.pc()))
        f = f.older()
`;

// A thread that cannot stop: prints "ready", then waits in vfork (state D) for its child, which
// exits only when the test releases it (closes its stdin, or the test process ends): the state holds
// however slow the machine is.
const VFORK_C = `#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
int main(void)
{
	pid_t g;
	printf("ready\\n");
	fflush(stdout);
	g = vfork();
	if (g == 0) {
		char c;
		while (read(0, &c, 1) > 0)
			;
		_exit(0);
	}
	waitpid(g, NULL, 0);
	return 0;
}
`;

const mtExe = join(work, 'mt');
const vforkExe = join(work, 'vfork');
const holderExe = join(work, 'holder');
const nondumpExe = join(work, 'nondump');
writeFileSync(join(work, 'nondump.c'), NONDUMP_C);
writeFileSync(join(work, 'mt.c'), MT_C);
writeFileSync(join(work, 'holder.c'), HOLDER_C);
writeFileSync(join(work, 'vfork.c'), VFORK_C);
writeFileSync(join(work, 'pcs.py'), GDB_PY);
execFileSync('gcc', ['-O2', '-g', '-pthread', '-o', mtExe, join(work, 'mt.c')]);
execFileSync('gcc', ['-O2', '-o', holderExe, join(work, 'holder.c')]);
execFileSync('gcc', ['-O2', '-o', nondumpExe, join(work, 'nondump.c')]);
execFileSync('gcc', ['-O2', '-o', vforkExe, join(work, 'vfork.c')]);

/** Start the three-thread program: its pid and its workers' tids once all three block. */
async function startMt(t: Test): Promise<{ pid: number; pauseTid: number; sleepTid: number }> {
  const c = start(t, mtExe, []);
  const [a, b] = (await firstLine(c)).split(' ').map(Number);
  await blocked(c.pid!);
  return { pid: c.pid!, pauseTid: a!, sleepTid: b! };
}

/** gdb's pcs per thread (run after dwunw: both see the same blocked threads). */
function gdbPcs(t: Test, pid: number): Map<number, string[]> {
  const r = spawnSync(
    'timeout',
    [
      '60',
      'gdb',
      '-q',
      '-batch',
      '-nx',
      '-p',
      String(pid),
      '-ex',
      'set backtrace past-main on',
      '-ex',
      'set backtrace past-entry on',
      '-x',
      join(work, 'pcs.py'),
    ],
    { encoding: 'utf8', env: { ...process.env, DEBUGINFOD_URLS: '' }, timeout: 90_000, killSignal: 'SIGKILL' },
  );
  const out = new Map<number, string[]>();
  for (const line of (r.stdout ?? '').split('\n')) {
    const m = /^DWUNW-PC (\d+) (0x[0-9a-f]+)$/.exec(line);
    if (!m) continue;
    const tid = Number(m[1]);
    if (!out.has(tid)) out.set(tid, []);
    out.get(tid)!.push(m[2]!);
  }
  if (out.size === 0) t.fail('gdb printed no frames', { status: r.status, stdout: r.stdout, stderr: r.stderr });
  return out;
}

function nonexistentPid(): number {
  for (let p = 999_999; ; p++) if (!existsSync(`/proc/${p}`)) return p;
}

// ---- Tests ----------------------------------------------------------------------------------------

t.test('the frames are gdb\'s, pc for pc', async (t) => {
  for (const which of ['sleep', 'three threads']) {
    const pid = which === 'sleep' ? await startSleep(t) : (await startMt(t)).pid;
    const r = dwunw(['unwind-pid', String(pid), '--json']);
    t.equal(r.status, 0, `${which}: exit status 0`);
    t.equal(r.stderr, '', `${which}: nothing on stderr`);
    const j = parseJson<JProcess>(t, r.stdout, which);
    if (!j) continue;
    t.equal(j.pid, pid, `${which}: pid`);
    t.same(j.threads.map((x) => x.tid).sort((a, b) => a - b), tasksOf(pid), `${which}: every thread`);
    const gdb = gdbPcs(t, pid);
    for (const th of j.threads) {
      t.equal(th.stop, 'OK', `${which}: thread ${th.tid} unwound to the end`);
      t.same(th.frames.map((f) => f.pc), gdb.get(th.tid), `${which}: thread ${th.tid}: gdb's pcs`);
      t.equal(th.frames[0]?.how, 'initial', `${which}: thread ${th.tid}: frame 0 is the initial frame`);
      t.ok(th.frames.slice(1).every((f) => f.how === 'cfi'), `${which}: thread ${th.tid}: every other frame from CFI`);
    }
  }
});

t.test('--json shape', async (t) => {
  const { pid, pauseTid } = await startMt(t);
  const r = dwunw(['unwind-pid', String(pid), '--tid', String(pauseTid), '--json', '--max-frames', '3']);
  t.equal(r.status, 0);
  const j = parseJson<JProcess>(t, r.stdout, '--json');
  if (!j) return;
  t.equal(j.threads.length, 1, '--tid: one thread');
  const th = j.threads[0]!;
  t.equal(th.tid, pauseTid);
  t.equal(th.comm, 'mt');
  t.equal(th.frames.length, 3, '--max-frames 3: three frames');
  t.equal(th.stop, 'DEPTH', '--max-frames: the stop reason');
  t.equal(th.stop_text, 'frame limit reached');
  const f0 = th.frames[0]!;
  t.match(f0, {
    pc: /^0x[0-9a-f]+$/,
    sp: /^0x[0-9a-f]+$/,
    module: /libc\.so\.6$/,
    module_offset: /^0x[0-9a-f]+$/,
    symbol: 'pause',
    offset: /^0x[0-9a-f]+$/,
    how: 'initial',
  });
  t.ok(f0.flags.includes('exact-pc'), 'frame 0: exact-pc');
  const f1 = th.frames[1]!;
  t.same([f1.symbol, f1.module, f1.how, f1.flags], ['deep', mtExe, 'cfi', []], 'frame 1: deep() in the program');
  t.ok(typeof f1.file === 'string' && f1.file.endsWith('mt.c') && typeof f1.line === 'number', 'frame 1: file:line from -g');
  t.ok(th.frames.every((f) => !f.symbol?.includes('@')), 'no symbol version suffixes');
});

t.test('text output', async (t) => {
  const pid = await startSleep(t);
  const r = dwunw(['unwind-pid', String(pid)]);
  t.equal(r.status, 0, 'exit status 0');
  t.equal(r.stderr, '');
  t.notMatch(r.stdout, /\x1b\[/, 'no colors when piped');
  const lines = r.stdout.trimEnd().split('\n');
  t.equal(lines[0], `PID ${pid} (sleep)`, 'process line');
  t.equal(lines[1], `Thread ${pid} (sleep):`, 'thread line');
  t.equal(lines.at(-1), 'stop: end of stack', 'stop line');
  const frames = lines.slice(2, -1);
  t.ok(frames.length >= 3, `frames (${frames.length})`);
  // the tools' markers: one per frame that rests on more than the window and the CFI
  const re = /^#(\d+) +0x[0-9a-f]{16} (\[unknown\]|[^\s?[][^\s]*?(\+0x[0-9a-f]+)?)( \((\/[^)]+|\[anon\])\))?( \[(live|fp|prologue|lr)\])?( \[jit\])?( \[uprobe\])?$/;
  frames.forEach((l, i) => {
    const m = re.exec(l);
    t.ok(m, `frame line ${i}: #N  0x<16 digits> symbol (module) [marker]`, { line: l });
    if (m) t.equal(Number(m[1]), i, `frame line ${i}: numbered`);
  });
  t.match(frames[0], /^#0  0x[0-9a-f]{16} \S+\+0x[0-9a-f]+ \(\/\S+libc\.so\.6\)$/, 'frame 0 in libc, no marker');
  t.ok(frames.every((l) => !/\[(live|fp|prologue|lr|uprobe)\]$/.test(l)), 'all from the window by CFI: no marker');
  t.notMatch(r.stdout, /frames marked/, 'no marker shown: no legend');
  t.ok(frames.some((l) => / \[unknown\] \(\/\S+\/sleep\)$/.test(l)), 'no name: [unknown] (module), as the tools print it (sleep is stripped)');
  t.notMatch(r.stdout, /\?\?|<null sym>/, 'never ?? or <null sym>');
  t.ok(frames.every((l) => !/\+0x0 /.test(l)), 'no +0x0');

  const withLines = dwunw(['unwind-pid', String(pid), '--lines']);
  t.equal(withLines.status, 0);
  t.match(withLines.stdout, /^#0 .*libc\.so\.6\) at \S+\.c:\d+$/m, '--lines: frame 0 has file:line (libc6-dbg)');
  t.notMatch(r.stdout, / at \S+:\d+/, 'no file:line without --lines');

  const colored = dwunw(['unwind-pid', String(pid)], { FORCE_COLOR: '1' });
  t.match(colored.stdout, /\x1b\[/, 'FORCE_COLOR colors the output');
});

t.test('errors are one line, each its exit status (README.md)', async (t) => {
  const none = nonexistentPid();
  const r = dwunw(['unwind-pid', String(none)]);
  t.equal(r.status, 3, 'nonexistent pid: exit status 3');
  t.equal(r.stderr, `dwunw: pid ${none}: no such process\n`, 'nonexistent pid: one line');
  t.equal(r.stdout, '', 'nonexistent pid: nothing on stdout');
  const rj = dwunw(['unwind-pid', String(none), '--json']);
  t.equal(rj.status, 3);
  t.equal(rj.stderr, `dwunw: pid ${none}: no such process\n`, 'nonexistent pid, --json: one line');

  const bad = dwunw(['unwind-pid', 'abc']);
  t.equal(bad.status, 2);
  t.equal(bad.stderr, 'dwunw: pid abc: not a process id (see dwunw unwind-pid --help)\n');

  const pid = await startSleep(t);
  const noThread = dwunw(['unwind-pid', String(pid), '--tid', String(none)]);
  t.equal(noThread.status, 3);
  t.equal(noThread.stderr, `dwunw: pid ${pid}: no thread ${none}\n`);

  for (const args of [['unwind-pid'], ['unwind-pid', String(pid), '--max-frames', '0'], ['unwind-pid', String(pid), '--bogus']]) {
    const u = dwunw(args);
    t.equal(u.status, 2, `${args.join(' ')}: exit status 2 (usage)`);
    t.match(u.stderr, /^dwunw: [^\n]+\n$/, `${args.join(' ')}: one line`);
  }
  const save = dwunw(['unwind-pid', String(pid), '--save', join(work, 'no-such-dir', 'x.json')]);
  t.equal(save.status, 1, '--save into a missing directory: exit status 1');
  t.match(save.stderr, /^dwunw: \S+x\.json: no such directory\n$/);
});

t.test('a thread traced by another tracer: PERM for it, the others unwound', async (t) => {
  const { pid, pauseTid, sleepTid } = await startMt(t);
  const holder = start(t, holderExe, [String(sleepTid)]);
  t.equal(await firstLine(holder), 'ready', 'the other tracer holds the nanosleep thread');
  t.equal(tracerOf(pid, sleepTid), holder.pid);

  const r = dwunw(['unwind-pid', String(pid), '--json']);
  t.equal(r.status, 1, 'exit status 1');
  t.equal(
    r.stderr,
    `dwunw: pid ${pid} tid ${sleepTid}: cannot attach: permission denied (EPERM; already traced by pid ${holder.pid})\n`,
    'one error line naming the thread and the tracer',
  );
  const j = parseJson<JProcess>(t, r.stdout, 'PERM --json');
  if (j) {
    const byTid = new Map(j.threads.map((x) => [x.tid, x]));
    t.same(j.threads.map((x) => x.tid).sort((a, b) => a - b), [pid, pauseTid, sleepTid].sort((a, b) => a - b), 'all threads listed');
    t.match(byTid.get(sleepTid), { stop: 'PERM', stop_text: 'permission denied', frames: [], error: /already traced/ }, 'PERM');
    for (const tid of [pid, pauseTid]) {
      t.equal(byTid.get(tid)?.stop, 'OK', `thread ${tid} unwound`);
      t.ok((byTid.get(tid)?.frames.length ?? 0) > 3, `thread ${tid}: frames`);
    }
  }
  const text = dwunw(['unwind-pid', String(pid)]);
  t.equal(text.status, 1, 'text: exit status 1');
  t.match(text.stdout, new RegExp(`Thread ${sleepTid} \\(mt\\):\\nstop: permission denied \\(PERM\\)\\n`), 'text: the thread\'s stop');
  t.match(text.stdout, new RegExp(`Thread ${pauseTid} \\(mt\\):\\n#0 `), 'text: the next thread is unwound');
  t.equal(text.stderr.split('\n').filter(Boolean).length, 1, 'text: one error line');
  t.equal(stateOf(pid, pauseTid), 'S', 'the threads dwunw held are running again');
});

t.test('a non-dumpable target: the library\'s warning on stderr', async (t) => {
  const c = start(t, nondumpExe, []);
  t.equal(await firstLine(c), 'ready');
  await blocked(c.pid!);
  const r = dwunw(['unwind-pid', String(c.pid)]);
  t.equal(r.status, 0, 'exit status 0: root may trace it');
  t.equal(
    r.stderr,
    `dwunw: pid ${c.pid} is not dumpable (PR_SET_DUMPABLE=0 or changed credentials): attached only through CAP_SYS_PTRACE\n`,
    'the warning, once',
  );
  t.match(r.stdout, /\nstop: end of stack\n$/, 'unwound');
  const a = dwunw(['unwind-pid', String(c.pid), '--audit', '--json']);
  t.match(a.stderr, new RegExp(`^dwunw: attach pid ${c.pid} tid ${c.pid}: ok \\(\\d+ us\\)$`, 'm'), '--audit: the attach');
  t.match(a.stderr, new RegExp(`^dwunw: detach pid ${c.pid} tid ${c.pid}: ok \\(\\d+ us\\)$`, 'm'), '--audit: the detach');
  t.doesNotThrow(() => JSON.parse(a.stdout), '--audit --json: stdout is still JSON');
});

t.test('signals while a thread is held: the target keeps running', async (t) => {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGKILL'] as const) {
    const pid = await startSleep(t);
    const run = dwunwAsync(t, ['unwind-pid', String(pid)], { DWUNW_TEST_HOLD_MS: '30000' });
    await heldBy(pid, run.child.pid!);
    t.match(stateOf(pid), /^[tT]$/, `${sig}: held (ptrace stop)`);
    run.child.kill(sig);
    const r = await within(run.done, 120_000, `dwunw to exit on ${sig}`);
    t.equal(r.signal, sig, `${sig}: dwunw died of it`);
    if (sig !== 'SIGKILL')
      t.equal(r.stderr, `dwunw: interrupted by ${sig} (resumed 1 held thread)\n`, `${sig}: says so, one line`);
    // Resumed, the target runs (R) for a moment and goes back to sleep (S) in clock_nanosleep, or
    // in restart_syscall (the kernel resumes an interrupted sleep through it). The kernel resumes
    // the tracee of a dead tracer on its own: give it a moment.
    const asleep = (): boolean =>
      stateOf(pid) === 'S' && /^(230|219)$/.test(readOr(`/proc/${pid}/syscall`, '').split(' ')[0]!);
    const back = await waitFor(asleep, 60_000, 'the target to sleep again').then(
      () => true,
      () => false,
    );
    t.match(stateOf(pid), /^[SR]$/, `${sig}: the target runs (state S or R, not t/T)`);
    t.equal(tracerOf(pid), 0, `${sig}: no tracer left`);
    t.ok(back, `${sig}: back in its sleep`, { state: stateOf(pid), syscall: readOr(`/proc/${pid}/syscall`, '') });
  }
});

t.test('a target that dies while held: a clean stop, no hang', async (t) => {
  const target = start(t, 'sleep', ['30']);
  const pid = target.pid!;
  await blocked(pid);
  // --save: the registers read while it was frozen (the snapshot's pc is frame 0's).
  const saved = join(work, 'died.json');
  const run = dwunwAsync(t, ['unwind-pid', String(pid), '--json', '--save', saved], { DWUNW_TEST_HOLD_MS: '3000' });
  await heldBy(pid, run.child.pid!);
  target.kill('SIGKILL');
  const r = await within(run.done, 120_000, 'dwunw to finish');
  t.equal(r.status, 0, 'exit status 0: an exit is not an error');
  t.equal(r.stderr, '', 'nothing on stderr');
  const j = parseJson<JProcess>(t, r.stdout, 'died while held');
  if (j) {
    // The maps were read while the thread was frozen (dwunw_maps_refresh), so the copied stack
    // window still unwinds completely; a walk cut short by the exit is reported as NO_PROCESS.
    t.equal(j.threads.length, 1, 'one thread');
    const th = j.threads[0]!;
    t.equal(th.tid, pid, 'the thread');
    if (th.stop === 'OK') {
      const snap = parseJson<Record<string, any>>(t, readOr(saved, ''), 'the saved snapshot');
      t.ok(th.frames.length > 0, `a complete unwind (${th.frames.length} frames)`);
      t.equal(th.frames[0]?.how, 'initial', 'frame 0: the initial frame');
      t.equal(th.frames[0]?.pc, snap?.threads?.[0]?.pc, 'frame 0: the pc of the registers read while frozen');
    } else {
      t.match(th, { stop: 'NO_PROCESS', stop_text: 'target process or thread exited' }, 'or the exit, as NO_PROCESS');
    }
  }
  const exit = await within(
    new Promise<string | null>((resolve) => (target.exitCode !== null || target.signalCode !== null ? resolve(target.signalCode) : target.on('exit', (_c, s) => resolve(s)))),
    60_000,
    'the parent to see the exit',
  );
  t.equal(exit, 'SIGKILL', 'its parent still sees how it died');

  // A process that has exited before dwunw attaches (a zombie): one line naming it, exit 3.
  const sh = start(t, 'sh', ['-c', 'sleep 0.3 & echo $!; exec sleep 30']);
  const zombie = Number(await firstLine(sh));
  await waitFor(() => stateOf(zombie) === 'Z', 60_000, 'the zombie');
  const z = dwunw(['unwind-pid', String(zombie)]);
  t.equal(z.status, 3, 'zombie: exit status 3');
  t.equal(z.stderr, `dwunw: pid ${zombie} is a zombie: it has exited, no stack is left\n`, 'zombie: one line naming it');
  t.equal(z.stdout, '', 'zombie: nothing on stdout');
});

t.test('--save, then unwind-snapshot: the same frames offline', async (t) => {
  const pid = await startSleep(t);
  const file = join(work, 'sleep.json');
  const live = dwunw(['unwind-pid', String(pid), '--json', '--save', file]);
  t.equal(live.status, 0, '--save: exit status 0');
  t.equal(live.stderr, '');
  const lj = parseJson<JProcess>(t, live.stdout, 'live');
  const snap = parseJson<Record<string, any>>(t, readFileSync(file, 'utf8'), 'snapshot file');
  if (!lj || !snap) return;

  t.match(snap, { format: 'dwunw-snapshot-1', arch: 'x86_64', pid, comm: 'sleep', sysroot: null }, 'snapshot header');
  t.match(snap.maps, /\/sleep\n/, 'the maps');
  t.equal(snap.threads.length, 1);
  const th = snap.threads[0];
  t.equal(th.tid, pid);
  t.equal(th.pc, lj.threads[0]!.frames[0]!.pc, 'pc: frame 0\'s');
  t.equal(th.regs['7'], lj.threads[0]!.frames[0]!.sp, 'regs["7"] (rsp): frame 0\'s sp');
  t.equal(th.stack_start, th.regs['7'], 'the stack window starts at the sp');
  const bytes = Buffer.from(th.stack, 'base64');
  t.ok(bytes.length > 0 && bytes.length <= 65536, `stack bytes (${bytes.length})`);
  t.equal((BigInt(th.stack_start) + BigInt(bytes.length)) % 4096n, 0n, 'the window ends at the end of the stack mapping (page)');
  const vm = /^([0-9a-f]+)-([0-9a-f]+) .* \[vdso\]$/m.exec(snap.maps);
  t.ok(vm, 'the maps have a [vdso]');
  if (vm) {
    const vdso = Buffer.from(snap.vdso ?? '', 'base64');
    t.equal(BigInt(vdso.length), BigInt(`0x${vm[2]}`) - BigInt(`0x${vm[1]}`), 'vdso: the whole [vdso] mapping');
    t.equal(vdso.subarray(0, 4).toString('latin1'), '\x7fELF', 'vdso: an ELF image');
  }

  const off = dwunw(['unwind-snapshot', file, '--json']);
  t.equal(off.status, 0, 'unwind-snapshot: exit status 0');
  t.equal(off.stderr, '');
  const oj = parseJson<JProcess>(t, off.stdout, 'offline');
  if (oj) t.same(oj, lj, 'the same process, threads, frames and stop as live');

  // The text forms are the same too (the comm is in the snapshot).
  const liveText = dwunw(['unwind-pid', String(pid), '--lines']);
  const offText = dwunw(['unwind-snapshot', file, '--lines']);
  t.equal(offText.status, 0);
  t.equal(offText.stdout, liveText.stdout, 'text: identical');

  // A window too small for the walk: live, the frames beyond it are read from the process and
  // marked; offline, the walk stops where the copy ends.
  const small = join(work, 'small.json');
  const ls = dwunw(['unwind-pid', String(pid), '--json', '--stack-size', '64', '--save', small]);
  t.equal(ls.status, 0);
  const lsj = parseJson<JProcess>(t, ls.stdout, 'small live');
  if (lsj) {
    const fr = lsj.threads[0]!.frames;
    t.same(fr.map((f) => f.pc), lj.threads[0]!.frames.map((f) => f.pc), 'small window, live: the same pcs');
    t.ok(fr.some((f) => f.flags.includes('beyond-snapshot')), 'frames beyond the 64-byte window are flagged');
    t.notOk(fr[0]!.flags.includes('beyond-snapshot'), 'frame 0 is not');
    // origin: live from the first frame read beyond the window on (the outer ones rest on it)
    const first = fr.findIndex((f) => f.flags.includes('beyond-snapshot'));
    t.same(fr.map((f) => f.origin), fr.map((f, i) => (i >= first ? 'live' : f.how === 'initial' || f.how === 'cfi' ? 'window' : f.how)), 'origin: window, then live from the first frame read beyond the window');
    t.ok(lj.threads[0]!.frames.every((f) => f.origin === 'window'), 'whole window: every frame from the window');
    const txt = dwunw(['unwind-pid', String(pid), '--stack-size', '64']);
    const tl = txt.stdout.trimEnd().split('\n');
    const fl = tl.filter((l) => l.startsWith('#'));
    t.same(fl.map((l) => l.endsWith(' [live]')), fr.map((f) => f.origin === 'live'), 'text: [live] on exactly the frames whose origin is live');
    t.equal(tl.filter((l) => l.startsWith('frames marked ')).length, 1, 'one legend line');
    t.equal(tl.at(-1), 'frames marked [live] rests on stack memory read from the process after the event (it may have changed since)', 'the legend, last, as the tools word it');
    const ts = dwunw(['unwind-snapshot', small]);
    t.notMatch(ts.stdout, /\[live\]|frames marked/, 'offline: nothing read live, no marker');
  }
  const os = dwunw(['unwind-snapshot', small, '--json']);
  t.equal(os.status, 0);
  const osj = parseJson<JProcess>(t, os.stdout, 'small offline');
  if (osj && lj) {
    const fr = osj.threads[0]!.frames;
    t.not(osj.threads[0]!.stop, 'OK', `offline, small window: stops early (${osj.threads[0]!.stop})`);
    t.ok(fr.length < lj.threads[0]!.frames.length, 'fewer frames');
    t.same(fr.map((f) => f.pc), lj.threads[0]!.frames.slice(0, fr.length).map((f) => f.pc), 'the frames it has are right');
  }
});

// JIT code has no CFI: the walk goes on through it by frame pointers, and each such frame says so
// in the text as the tools mark it ([fp], JIT code as [anon]), explained by one legend line, and in
// the JSON's origin. One snapshot, so that the text and the JSON are of the same stack.
t.test('frames found by frame pointers: [fp], one legend line, origin fp', async (t) => {
  const js = 'function spin(){let s=0;for(;;){s+=Math.sqrt(s)%7}} console.log("spinning"); spin()';
  const c = start(t, process.execPath, ['-e', js]);
  await firstLine(c);
  const file = join(work, 'jit.json');
  let fp = 0;
  // the main thread is in JavaScript (JIT code) nearly always; a capture in the GC or a
  // builtin with CFI all the way down has no fp frame: take another
  for (let i = 0; i < 5 && fp === 0; i++) {
    const r = dwunw(['unwind-pid', String(c.pid), '--tid', String(c.pid), '--json', '--save', file]);
    t.equal(r.status, 0, 'unwind-pid: exit 0');
    fp = parseJson<JProcess>(t, r.stdout, 'node')?.threads[0]?.frames.filter((f) => f.origin === 'fp').length ?? 0;
  }
  t.ok(fp > 0, `some frames found by frame pointers (${fp})`);
  const j = parseJson<JProcess>(t, dwunw(['unwind-snapshot', file, '--json']).stdout, 'snapshot json');
  const txt = dwunw(['unwind-snapshot', file]);
  t.equal(txt.status, 0);
  const frames = j?.threads[0]?.frames ?? [];
  const lines = txt.stdout.trimEnd().split('\n');
  const fl = lines.filter((l) => l.startsWith('#'));
  t.equal(fl.length, frames.length, 'a text line per JSON frame');
  t.same(fl.map((l) => / \[fp\]$/.test(l)), frames.map((f) => f.origin === 'fp'), '[fp] on exactly the frames whose origin is fp');
  t.ok(frames.every((f) => f.origin !== 'fp' || f.how === 'fp'), 'origin fp: stepped by frame pointers (how fp)');
  t.ok(fl.every((l, i) => frames[i]!.module !== null || !frames[i]!.flags.includes('jit') || l.includes(' ([anon])')), 'JIT code without a file: [anon]');
  t.same(lines.filter((l) => l.startsWith('frames marked ')), ['frames marked [fp] found by frame pointers (no CFI there)'], 'one legend line, the tools\' words');
  t.equal(lines.at(-1), 'frames marked [fp] found by frame pointers (no CFI there)', 'the legend after the stacks');
});

// ---- JIT frames named from /tmp/perf-PID.map ------------------------------------------------------

interface MapEntry {
  start: bigint;
  end: bigint;
  name: string;
  line: number;
}

/** The perf map file as written (the oracle): every whole line, in order. */
function readPerfMap(path: string): MapEntry[] {
  const out: MapEntry[] = [];
  readOr(path, '')
    .split('\n')
    .forEach((l, i) => {
      const m = /^(?:0x)?([0-9a-f]+) (?:0x)?([0-9a-f]+) (.+)$/i.exec(l);
      if (m) {
        const start = BigInt(`0x${m[1]}`);
        out.push({ start, end: start + BigInt(`0x${m[2]}`), name: m[3]!, line: i });
      }
    });
  return out;
}

/** The map's entry covering addr: the last line that does (code re-JITed at one place). */
const covering = (map: MapEntry[], addr: bigint): MapEntry | null =>
  map.reduce<MapEntry | null>((best, e) => (addr >= e.start && addr < e.end ? e : best), null);

// The address a frame is named by: its pc for frame 0 (exact), the call (pc - 1) for a return address.
const callSite = (f: { pc: string; flags: string[] }): bigint => BigInt(f.pc) - (f.flags.includes('exact-pc') ? 0n : 1n);

t.test('JIT frames named from /tmp/perf-PID.map, as the tools name them', async (t) => {
  const js =
    'function leaf(){let s=0;for(;;){s+=Math.sqrt(s)%7}} function middle(){leaf()} function outer(){middle()} console.log("spinning"); outer()';
  const c = start(t, process.execPath, ['--perf-basic-prof', '--interpreted-frames-native-stack', '-e', js]);
  const mapPath = `/tmp/perf-${c.pid}.map`;
  t.teardown(() => rmSync(mapPath, { force: true }));
  await firstLine(c);
  let j: JProcess | null = null;
  let named: JFrame[] = [];
  // the main thread is in JavaScript nearly always; a capture in the GC has no JIT frame: take another
  for (let i = 0; i < 5 && named.length === 0; i++) {
    const r = dwunw(['unwind-pid', String(c.pid), '--tid', String(c.pid), '--json']);
    t.equal(r.status, 0, 'unwind-pid: exit 0');
    j = parseJson<JProcess>(t, r.stdout, 'node --perf-basic-prof');
    named = j?.threads[0]?.frames.filter((f) => f.symbol_source === 'perf-map') ?? [];
  }
  // read after the unwind: the file only grows, and the latest line covering a pc wins
  const map = readPerfMap(mapPath);
  t.ok(map.length > 0, `the perf map has entries (${map.length})`);
  const frames = j?.threads[0]?.frames ?? [];
  t.ok(named.length >= 3, `JIT frames named from the map (${named.length} of ${frames.length})`);
  for (const [i, f] of frames.entries()) {
    if (f.module !== null) {
      t.not(f.symbol_source, 'perf-map', `frame ${i} in ${f.module}: named by its module, not the map`);
      if (f.symbol !== null) t.equal(f.symbol_source, 'elf', `frame ${i}: symbol_source elf`);
      continue;
    }
    const e = covering(map, callSite(f));
    if (e) {
      t.same(
        [f.symbol, f.offset, f.symbol_source, f.flags.includes('jit'), f.anon],
        [e.name, `0x${(BigInt(f.pc) - e.start).toString(16)}`, 'perf-map', true, true],
        `frame ${i} (${f.pc}): the map's entry covering it (line ${e.line + 1}), offset from its start`,
      );
    } else {
      t.same([f.symbol, f.symbol_source], [null, null], `frame ${i} (${f.pc}): no entry covers it, no name`);
    }
  }
  const names = named.map((f) => f.symbol!);
  for (const fn of ['leaf', 'middle', 'outer'])
    t.ok(names.some((n) => new RegExp(`\\b${fn}\\b`).test(n)), `the JS function ${fn} is named`, { names });
  t.ok(frames.some((f) => f.module?.endsWith('/node') || f.module?.endsWith('/nodejs')), 'the walk goes on into the node binary');

  // Text: a separate capture, checked against the map the same way.
  const txt = dwunw(['unwind-pid', String(c.pid), '--tid', String(c.pid)]);
  t.equal(txt.status, 0);
  const map2 = readPerfMap(mapPath);
  const lines = txt.stdout.trimEnd().split('\n');
  const fl = lines.filter((l) => l.startsWith('#'));
  t.notMatch(txt.stdout, /\?\?|<null sym>/, 'never ?? or <null sym>');
  let jit = 0;
  for (const l of fl) {
    const m = /^#(\d+) +0x([0-9a-f]{16}) (.*?) \(([^)]+)\)((?: \[\w+\])*)$/.exec(l);
    if (!m || m[4] !== '[anon]') continue;
    const pc = BigInt(`0x${m[2]}`);
    const e = covering(map2, m[1] === '0' ? pc : pc - 1n);
    if (e) {
      jit++;
      const off = pc - e.start;
      t.equal(m[3], off === 0n ? e.name : `${e.name}+0x${off.toString(16)}`, `text #${m[1]}: the map's name+offset`);
      t.match(m[5], / \[jit\]$/, `text #${m[1]}: marked [jit]`);
    } else {
      t.equal(m[3], '[unknown]', `text #${m[1]}: no entry: [unknown] ([anon])`);
      t.notMatch(m[5], /\[jit\]/);
    }
  }
  t.ok(jit > 0, `text: JIT frames named (${jit})`);
  const legend = lines.filter((l) => l.startsWith('frames marked '));
  t.equal(legend.length, 1, 'one legend line');
  t.match(legend[0], /\[jit\] named from the JIT's \/tmp\/perf-PID\.map$/, 'the legend explains [jit], as the tools word it');
});

t.test('a planted /tmp/perf-PID.map (another owner, a symlink) names nothing and is said once', async (t) => {
  // node without --perf-basic-prof: JIT frames, and no map of its own; the test writes one that
  // covers every address, as someone else could
  const js = 'function leaf(){let s=0;for(;;){s+=Math.sqrt(s)%7}} console.log("spinning"); leaf()';
  const c = start(t, process.execPath, ['--interpreted-frames-native-stack', '-e', js]);
  const mapPath = `/tmp/perf-${c.pid}.map`;
  const elsewhere = join(work, `planted-${c.pid}.map`);
  t.teardown(() => rmSync(mapPath, { force: true }));
  await firstLine(c);
  const planted = '0 ffffffffffff planted\n';
  /** JIT frames of one capture that has some, and stderr. */
  const capture = (): { anon: JFrame[]; stderr: string } => {
    let last = { anon: [] as JFrame[], stderr: '' };
    for (let i = 0; i < 5; i++) {
      const r = dwunw(['unwind-pid', String(c.pid), '--tid', String(c.pid), '--json']);
      const j = parseJson<JProcess>(t, r.stdout, 'unwind-pid');
      last = { anon: j?.threads[0]?.frames.filter((f) => f.module === null) ?? [], stderr: r.stderr };
      if (last.anon.length) break;
    }
    return last;
  };
  const cases: [string, () => void, RegExp | null][] = [
    // the control: the same file owned by root (the process's user) is used
    ['owned by root', () => writeFileSync(mapPath, planted), null],
    [
      'owned by another user',
      () => {
        writeFileSync(mapPath, planted);
        chownSync(mapPath, 65534, 65534);
      },
      /perf-\d+\.map not used: owned by uid 65534, not by root or the process's user \(uid 0\)$/,
    ],
    [
      'a symbolic link',
      () => {
        writeFileSync(elsewhere, planted);
        symlinkSync(elsewhere, mapPath);
      },
      /perf-\d+\.map not used: a symbolic link$/,
    ],
  ];
  for (const [what, plant, refused] of cases) {
    rmSync(mapPath, { force: true });
    plant();
    const { anon, stderr } = capture();
    t.ok(anon.length > 0, `${what}: the capture has JIT frames (${anon.length})`);
    const named = anon.filter((f) => f.symbol === 'planted');
    const lines = stderr.split('\n').filter((l) => /perf-\d+\.map/.test(l));
    if (refused === null) {
      t.equal(named.length, anon.length, `${what}: every JIT frame named from it`);
      t.equal(lines.length, 0, `${what}: nothing said`);
    } else {
      t.equal(named.length, 0, `${what}: no frame named from it`);
      t.equal(lines.length, 1, `${what}: said once`);
      t.match(lines[0] ?? '', refused, `${what}: the line names the file and why`);
    }
  }
});

t.test('the perf-map parser (libdwunw, through lib/perf-map.ts): ranges, latest line wins, read on after a miss, a new file from the start', async (t) => {
  const { PerfMap } = await import('../lib/perf-map.js');
  // a pid that no process has (above pid_max's default ceiling): only /tmp/perf-PID.map is read
  const pid = 4194304 + (process.pid % 1000000);
  const path = `/tmp/perf-${pid}.map`;
  t.teardown(() => rmSync(path, { force: true }));
  writeFileSync(path, '1000 100 first\n2000 10 second\n1800 100 third\n1000 10 newer\n');
  const m = new PerfMap(pid);
  t.equal(m.reads, 1, 'read once at the start');
  t.same(m.lookup(0x1050n), { name: 'first', start: 0x1000n }, 'inside a range');
  t.same(m.lookup(0x1005n), { name: 'newer', start: 0x1000n }, 'the latest line covering a pc wins');
  t.same(m.lookup(0x1850n), { name: 'third', start: 0x1800n }, 'an entry out of order');
  t.same(m.lookup(0x2005n), { name: 'second', start: 0x2000n }, 'sorted: the binary search finds it');
  t.equal(m.lookup(0x2010n), null, 'end is exclusive: a miss');
  t.equal(m.reads, 1, 'a miss with nothing appended reads nothing');
  writeFileSync(path, '3000 20 appended\n4000 10 half', { flag: 'a' });
  t.same(m.lookup(0x3004n), { name: 'appended', start: 0x3000n }, 'a miss reads on: the appended line');
  t.equal(m.reads, 2, 'read on once');
  t.equal(m.lookup(0x4004n), null, 'a line still being written is not read');
  writeFileSync(path, ' line\n', { flag: 'a' });
  t.same(m.lookup(0x4004n), { name: 'half line', start: 0x4000n }, 'read whole once it ends');
  rmSync(path);
  writeFileSync(path, '5000 10 another process\n');
  t.same(m.lookup(0x5000n), { name: 'another process', start: 0x5000n }, 'a new file: read from the start');
  t.equal(m.lookup(0x1050n), null, 'the old file\'s entries are gone');
  t.equal(m.length, 1);
  m.close();
});

t.test('unwind-snapshot errors are one line', async (t) => {
  // Not t.testdir(): its directory (.tap/fixtures/<file>-<test name>) is the same for every run
  // of this file in this checkout, and a concurrent run (another `tap` in the same tree) removes
  // it when it starts or ends: the files were then missing ("no such file or directory"). The
  // work directory is this process's own (mkdtemp).
  const dir = mkdtempSync(join(work, 'errors-'));
  const files: Record<string, string> = {
    'notjson.json': 'hello\n',
    'format.json': JSON.stringify({ format: 'other', arch: 'x86_64', pid: 1, threads: [], maps: '' }),
    'arch.json': JSON.stringify({ format: 'dwunw-snapshot-1', arch: 'sparc', pid: 1, threads: [], maps: '' }),
    'reg.json': JSON.stringify({
      format: 'dwunw-snapshot-1',
      arch: 'x86_64',
      pid: 1,
      threads: [{ tid: 1, pc: '0x1000', regs: { '7': 1234 }, stack_start: '0x0', stack: '' }],
      maps: '00400000-00401000 r-xp 00000000 00:00 0 /bin/true\n',
      sysroot: null,
    }),
    'vdso.json': JSON.stringify({
      format: 'dwunw-snapshot-1',
      arch: 'x86_64',
      pid: 1,
      threads: [],
      maps: '',
      sysroot: null,
      vdso: 'not base64!',
    }),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const cases: [string, RegExp][] = [
    ['no-such.json', /: no such file or directory$/],
    ['notjson.json', /: not a dwunw snapshot: not JSON: /],
    ['format.json', /: not a dwunw snapshot: format: expected "dwunw-snapshot-1", found "other"$/],
    ['arch.json', /: not a dwunw snapshot: arch: unsupported architecture: sparc$/],
    ['reg.json', /: not a dwunw snapshot: threads\[0\]\.regs\["7"\]: not a hex string/],
    ['vdso.json', /: not a dwunw snapshot: vdso: not base64/],
  ];
  for (const [name, cause] of cases) {
    const file = join(dir, name);
    const r = dwunw(['unwind-snapshot', file]);
    t.equal(r.status, 1, `${name}: exit status 1`);
    const lines = r.stderr.split('\n').filter(Boolean);
    t.equal(lines.length, 1, `${name}: one line`, { stderr: r.stderr });
    t.ok(lines[0]?.startsWith(`dwunw: ${file}: `), `${name}: names the file`);
    t.match(lines[0] ?? '', cause, `${name}: the cause`);
  }
  const u = dwunw(['unwind-snapshot', join(dir, 'notjson.json'), '--max-frames', '0']);
  t.equal(u.status, 2, '--max-frames 0: a usage error');
  t.equal(u.stderr, 'dwunw: --max-frames: not a number of frames (1-65536): 0 (see dwunw unwind-snapshot --help)\n', '--max-frames 0: one line, the pointer');
});

t.test('--attach-timeout: a thread that cannot stop (vfork parent, state D) is not unwound', async (t) => {
  // stdin a pipe: the child waits on it until the end of the subtest.
  const c = spawn(vforkExe, [], { stdio: ['pipe', 'pipe', 'ignore'] });
  t.teardown(() => {
    c.stdin!.end();
    kill(c);
  });
  const pid = c.pid!;
  t.equal(await firstLine(c), 'ready');
  await waitFor(() => stateOf(pid) === 'D', 60_000, 'the vfork parent to wait for its child (state D)');
  // Kill the child at the end too.
  const kids = readOr(`/proc/${pid}/task/${pid}/children`, '').trim().split(/\s+/).filter(Boolean).map(Number);
  t.teardown(() => {
    for (const k of kids) {
      try {
        process.kill(k, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  const warning = `dwunw: pid ${pid} tid ${pid} did not stop within 300 ms (state D): not unwound\n`;

  // dwunw gives up on its own: it returns (not killed by the hang guard) with the warning and status 1.
  const r = dwunw(['unwind-pid', String(pid), '--json', '--attach-timeout', '300']);
  t.equal(r.signal, null, 'it gave up by itself (not killed at the hang guard)');
  t.equal(r.status, 1, 'exit status 1: a thread was not unwound');
  t.equal(r.stderr, warning, 'one line: the library\'s warning');
  const j = parseJson<JProcess>(t, r.stdout, 'timeout --json');
  if (j)
    t.match(j.threads, [
      { tid: pid, frames: [], stop: 'IO', stop_text: 'did not stop within 300 ms', error: 'cannot attach: did not stop within 300 ms (ETIMEDOUT)' },
    ]);
  t.equal(tracerOf(pid), 0, 'not left traced');
  t.equal(stateOf(pid), 'D', 'still waiting for its child: not stopped (t/T)');

  const text = dwunw(['unwind-pid', String(pid), '--attach-timeout', '300']);
  t.equal(text.status, 1);
  t.equal(text.stderr, warning, 'text: the same one line');
  t.equal(text.stdout, `PID ${pid} (vfork)\nThread ${pid} (vfork):\nstop: did not stop within 300 ms (IO)\n`, 'text: the stop line');

  for (const bad of ['0', '-5', 'abc']) {
    const u = dwunw(['unwind-pid', String(pid), '--attach-timeout', bad]);
    t.equal(u.status, 2, `--attach-timeout ${bad}: exit status 2 (usage)`);
    t.match(u.stderr, /^dwunw: --attach-timeout: [^\n]+\n$/, `--attach-timeout ${bad}: one line`);
  }
});
