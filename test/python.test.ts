// Python frames in dwunw's stacks, against three oracles on fixtures/python/chains.py (one known
// chain per thread: plain calls, methods, recursion 25 deep, generators, a key= callback called by
// sorted() in C, the main thread), each parked in time.sleep:
//   the program's own view   sys._current_frames() of every parked thread (qualname, file, line)
//   gdb py-bt                 /usr/bin/python3.11 with python3.11-dbg of the very same version
//   py-spy dump               the peer, from PyPI (build/pyvenv, scripts/ensure-deps)
// unwind-pid (ptrace: each thread read while stopped) and unwind-core (gcore of the same process)
// must give every thread's chain exactly, merged: each native _PyEval_EvalFrameDefault frame
// preceded by the Python frames it ran, the stack ending at the native root. pyenv's CPython
// 3.11 and 3.12 (libpython3.x.so: embedders) are checked when the machine has them; a CPython with no
// layout (pyenv's 3.13) or without Py_Version (3.10) gives one warning and native frames only. Under DWUNW_REQUIRE_BPF=1 a missing
// python3.11-dbg, gdb or py-spy is a failure, not a skip.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { dwunwBin, root, run, skipOrFail, start, waitFor } from './helpers.js';

const FIXTURE = join(root, 'fixtures', 'python', 'chains.py');
const DEBIAN_PY = '/usr/bin/python3.11';
const PYSPY = join(root, 'build', 'pyvenv', 'bin', 'py-spy');

interface ViewFrame {
  name: string;
  qualname: string;
  file: string;
  line: number;
}
interface View {
  pid: number;
  threads: { tag: string; native_id: number; frames: ViewFrame[] }[];
}
interface JFrame {
  symbol: string | null;
  file: string | null;
  line: number | null;
  origin: string;
  module: string | null;
}
interface JThread {
  tid: number;
  frames: JFrame[];
  stop: string;
  python?: { stop: string; frames: number; merged: boolean; unplaced?: string };
}

/** Start the fixture under `python` and wait for its own view (printed once every thread is parked). */
async function startFixture(python: string): Promise<{ pid: number; view: View; stop: () => void }> {
  const s = start(python, [FIXTURE], { timeoutMs: 300_000 });
  let out = '';
  s.child.stdout!.on('data', (d: Buffer | string) => (out += d.toString()));
  await waitFor(() => out.includes('\n'), 60_000, `${python} ${FIXTURE} to park its threads`, 20);
  const view = JSON.parse(out.split('\n')[0]!) as View;
  return { pid: s.child.pid!, view, stop: () => s.child.kill('SIGKILL') };
}

const key = (f: { qualname: string; file: string; line: number | null }): string => `${f.qualname} (${f.file}:${f.line})`;
const pyKeys = (th: JThread): string[] =>
  th.frames.filter((f) => f.origin === 'python').map((f) => key({ qualname: f.symbol!, file: f.file!, line: f.line }));

/** The invariants of a merged stack, and its Python chain equal to the program's own. */
function checkThread(tt: Test, what: string, th: JThread | undefined, want: ViewFrame[]): void {
  if (!th) {
    tt.fail(`${what}: no such thread in dwunw's output`);
    return;
  }
  tt.equal(th.stop, 'OK', `${what}: the native walk reaches the outermost frame`);
  tt.match(th.python, { stop: 'OK', merged: true }, `${what}: the whole Python chain, merged`);
  tt.same(pyKeys(th), want.map(key), `${what}: Python frames equal the program's own view`);
  // each eval frame directly after (outward) a Python frame; no Python frame outermost
  const evalIdx = th.frames.flatMap((f, i) => (f.origin !== 'python' && f.symbol === '_PyEval_EvalFrameDefault' ? [i] : []));
  tt.ok(evalIdx.length > 0, `${what}: has _PyEval_EvalFrameDefault frames`);
  tt.ok(
    evalIdx.every((i) => i > 0 && th.frames[i - 1]!.origin === 'python'),
    `${what}: every _PyEval_EvalFrameDefault frame has the Python frames it ran just inside it`,
  );
  const last = th.frames[th.frames.length - 1];
  tt.ok(last && last.origin !== 'python', `${what}: the outermost frame is native`);
}

/** gdb's py-bt per LWP: [co_name, file, line] innermost first. */
function gdbPyBt(pid: number): Map<number, string[]> {
  const r = spawnSync('gdb', ['-q', '-batch', '-nx', '-p', String(pid), '-ex', 'set pagination off', '-ex', 'thread apply all py-bt'], {
    encoding: 'utf8',
    timeout: 180_000,
  });
  const out = new Map<number, string[]>();
  let cur: string[] | null = null;
  for (const l of (r.stdout ?? '').split('\n')) {
    const th = /^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\)/.exec(l);
    if (th) out.set(Number(th[1]), (cur = []));
    const fr = /^ {2}File "(.*)", line (\d+), in (.*)$/.exec(l);
    if (fr && cur) cur.push(`${fr[3]} (${fr[1]}:${fr[2]})`);
  }
  return out;
}

/** co_name of a qualname: its last part ("main.<locals>.<lambda>" -> "<lambda>"). */
const coName = (qualname: string): string => qualname.slice(qualname.lastIndexOf('.') + 1);

async function unwindPidJson(tt: Test, pid: number): Promise<{ threads: JThread[]; stderr: string }> {
  const r = await run(dwunwBin, ['unwind-pid', String(pid), '--json'], { timeoutMs: 180_000 });
  tt.equal(r.status, 0, `unwind-pid exits 0${r.stderr ? `: ${r.stderr}` : ''}`);
  return { threads: (JSON.parse(r.stdout) as { threads: JThread[] }).threads, stderr: r.stderr };
}

const dpkgVersion = (p: string): string | null => {
  try {
    return execFileSync('dpkg-query', ['-W', '-f=${Version}', p], { encoding: 'utf8' }) || null;
  } catch {
    return null;
  }
};

t.test("Debian's python3.11: unwind-pid, py-bt, py-spy, unwind-core", async (t) => {
  if (process.getuid?.() !== 0) return skipOrFail(t, 'not root (ptrace of a process this test did not start as a child is refused by Yama)', 'skipped');
  if (!existsSync(DEBIAN_PY)) return skipOrFail(t, `no ${DEBIAN_PY} (scripts/ensure-deps)`, 'skipped');
  const { pid, view, stop } = await startFixture(DEBIAN_PY);
  t.teardown(stop);
  t.equal(view.threads.length, 6, 'the fixture reports its six parked threads');

  await t.test('unwind-pid equals the program\'s own view, thread by thread', async (tt) => {
    const { threads } = await unwindPidJson(tt, pid);
    for (const v of view.threads) checkThread(tt, `${v.tag} (tid ${v.native_id})`, threads.find((x) => x.tid === v.native_id), v.frames);
    const rec = view.threads.find((v) => v.tag === 'recursion')!;
    tt.ok(rec.frames.filter((f) => f.name === 'recurse').length >= 20, 'recursion: at least 20 recurse frames');
    const cb = threads.find((x) => x.tid === view.threads.find((v) => v.tag === 'callback')!.native_id)!;
    const names = cb.frames.map((f) => f.symbol);
    const keyAt = names.indexOf('key_fn');
    const sortAt = names.indexOf('sort_it');
    tt.ok(
      keyAt >= 0 && sortAt > keyAt && names.slice(keyAt, sortAt).some((n) => n === 'builtin_sorted' || n?.startsWith('builtin_sorted')),
      'callback: key_fn, then the C sorted() that called it, then sort_it',
    );
  });

  await t.test('text: [py] frames and their legend', async (tt) => {
    const r = await run(dwunwBin, ['unwind-pid', String(pid), '--tid', String(view.threads.find((v) => v.tag === 'plain')!.native_id)]);
    tt.equal(r.status, 0, 'exit 0');
    tt.match(r.stdout, /#\d+ +python +plain_b \(.*chains\.py:\d+\) \[py\]/, 'a Python frame line');
    tt.match(r.stdout, /frames marked .*\[py\] a Python function/, 'the legend names [py]');
  });

  await t.test('gdb py-bt (python3.11-dbg) agrees, thread by thread', async (tt) => {
    const dbg = dpkgVersion('python3.11-dbg');
    if (!dbg || dbg !== dpkgVersion('python3.11'))
      return skipOrFail(tt, `python3.11-dbg (${dbg ?? 'missing'}) is not at python3.11's version (scripts/ensure-deps)`, 'skipped');
    const { threads } = await unwindPidJson(tt, pid);
    const bt = gdbPyBt(pid);
    tt.equal(bt.size, 6, 'py-bt printed six threads');
    for (const v of view.threads) {
      const th = threads.find((x) => x.tid === v.native_id)!;
      const ours = th.frames.filter((f) => f.origin === 'python').map((f) => `${coName(f.symbol!)} (${f.file}:${f.line})`);
      tt.same(ours, bt.get(v.native_id), `${v.tag}: dwunw's Python frames equal py-bt's`);
    }
  });

  await t.test('py-spy dump (the peer) agrees on every thread', async (tt) => {
    if (!existsSync(PYSPY)) return skipOrFail(tt, `no ${PYSPY} (scripts/ensure-deps installs py-spy from PyPI)`, 'skipped');
    const r = await run(PYSPY, ['dump', '--pid', String(pid), '--json'], { timeoutMs: 120_000 });
    tt.equal(r.status, 0, `py-spy exits 0 ${r.stderr}`);
    const dump = JSON.parse(r.stdout) as { os_thread_id: number; frames: { name: string; filename: string; line: number }[] }[];
    const { threads } = await unwindPidJson(tt, pid);
    for (const v of view.threads) {
      const peer = dump.find((d) => d.os_thread_id === v.native_id);
      const th = threads.find((x) => x.tid === v.native_id)!;
      tt.same(
        th.frames.filter((f) => f.origin === 'python').map((f) => `${f.symbol} (${f.file}:${f.line})`),
        peer?.frames.map((f) => `${f.name} (${f.filename}:${f.line})`),
        `${v.tag}: equal to py-spy's frames`,
      );
    }
  });

  await t.test('unwind-core on a gcore of the process', async (tt) => {
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-python-'));
    tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const g = spawnSync('gcore', ['-o', join(dir, 'core'), String(pid)], { encoding: 'utf8', timeout: 180_000 });
    const core = readdirSync(dir).find((f) => f.startsWith('core'));
    if (!core) return tt.fail(`gcore wrote no core: ${g.stderr}`);
    const r = await run(dwunwBin, ['unwind-core', join(dir, core), '--json'], { timeoutMs: 180_000 });
    tt.equal(r.status, 0, `unwind-core exits 0 ${r.stderr}`);
    const threads = (JSON.parse(r.stdout) as { threads: JThread[] }).threads;
    for (const v of view.threads) checkThread(tt, `core: ${v.tag}`, threads.find((x) => x.tid === v.native_id), v.frames);
  });
});

t.test("pyenv's CPython: 3.11 and 3.12 through libpython3.x.so; 3.13 and 3.10: one warning, native frames", async (t) => {
  if (process.getuid?.() !== 0) return skipOrFail(t, 'not root', 'skipped');
  for (const v of ['3.11.7/bin/python3.11', '3.12.1/bin/python3.12']) {
    const py = `/root/.pyenv/versions/${v}`;
    if (!existsSync(py)) {
      t.pass(`no ${py} here`, { skip: 'pyenv is not installed by ensure-deps' });
      continue;
    }
    const { pid, view, stop } = await startFixture(py);
    const { threads } = await unwindPidJson(t, pid);
    stop();
    for (const th of view.threads) checkThread(t, `${v} ${th.tag}`, threads.find((x) => x.tid === th.native_id), th.frames);
  }
  for (const [v, why] of [
    ['3.13.0/bin/python3.13', /\(3\.13\.0\): CPython 3\.13: no layout for it in this build: native frames only/],
    ['3.10.13/bin/python3.10', /CPython without Py_Version in \.dynsym \(older than 3\.11\): not read: native frames only/],
  ] as const) {
    const py = `/root/.pyenv/versions/${v}`;
    if (!existsSync(py)) {
      t.pass(`no ${py} here`, { skip: 'pyenv is not installed by ensure-deps' });
      continue;
    }
    const s = start(py, ['-c', 'import time\nprint("ok", flush=True)\ntime.sleep(600)'], { timeoutMs: 120_000 });
    let out = '';
    s.child.stdout!.on('data', (d: Buffer | string) => (out += d.toString()));
    await waitFor(() => out.includes('ok'), 60_000, `${py} to start`, 20);
    const { threads, stderr } = await unwindPidJson(t, s.child.pid!);
    s.child.kill('SIGKILL');
    const warns = stderr.split('\n').filter((l) => l.startsWith('dwunw: pid'));
    t.equal(warns.length, 1, `${v}: one warning: ${stderr}`);
    t.match(warns[0], why, `${v}: it names the version and why`);
    t.ok(threads.every((th) => th.frames.every((f) => f.origin !== 'python') && th.python === undefined), `${v}: no Python frame is guessed`);
  }
});
