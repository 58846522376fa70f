// Shared by the unwind tests (test/unwind-*.test.ts): starting target programs and waiting until
// every thread is blocked, running `dwunw unwind-pid/unwind-snapshot --json`, running gdb with the
// oracle scripts of this directory (always under `timeout`), and comparing the stacks pc for pc.
// Every process started here is registered, so a test file's teardown can kill what is left.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const oracleDir = join(root, 'test', 'oracle');
export const dwunwBin = join(root, 'bin', 'dwunw');

// ---- processes -------------------------------------------------------------------------------

const live = new Set<ChildProcess>();

/** SIGKILL every process started here that has not exited (for t.teardown). */
export function killAll(): void {
  for (const c of live) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
  live.clear();
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Run a command to its end (killed after timeoutMs), collecting its output. */
export function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<RunResult> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env, cwd: opts.cwd ?? root });
    live.add(child);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => err.push(Buffer.from(String(e))));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      live.delete(child);
      resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), ms: Date.now() - t0 });
    });
  });
}

export interface Target {
  child: ChildProcess;
  pid: number;
  stdout: () => string;
  stderr: () => string;
  kill: () => Promise<void>;
}

/**
 * Start a target program. `ready`: a line to wait for on its stdout (the fixtures' `ready NAME`),
 * or null. `stdinPipe`: give it a pipe on stdin that stays open (sqlite3 then waits in read).
 */
export async function startTarget(cmd: string, args: string[], opts: { ready?: string | null; stdinPipe?: boolean; timeoutMs?: number } = {}): Promise<Target> {
  const child = spawn(cmd, args, { stdio: [opts.stdinPipe ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  live.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<void>((res) => child.on('close', () => res()));
  const target: Target = {
    child,
    pid: child.pid ?? -1,
    stdout: () => out,
    stderr: () => err,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      live.delete(child);
    },
  };
  if (child.pid === undefined) {
    await new Promise((res) => setTimeout(res, 10));
    throw new Error(`cannot start ${cmd}: ${err}`);
  }
  if (opts.ready) {
    const want = `${opts.ready}\n`;
    const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
    while (!out.includes(want)) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${cmd} ${args.join(' ')} exited (${child.exitCode ?? child.signalCode}) before "${opts.ready}": ${err.trim()}`);
      if (Date.now() > deadline) throw new Error(`${cmd} ${args.join(' ')}: no "${opts.ready}" after ${opts.timeoutMs ?? 10_000} ms`);
      await new Promise((res) => setTimeout(res, 5));
    }
  }
  return target;
}

interface TaskState {
  state: string;
  syscall: string;
}

function taskStates(pid: number): Map<number, TaskState> {
  const m = new Map<number, TaskState>();
  for (const name of readdirSync(`/proc/${pid}/task`)) {
    const tid = Number(name);
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      const syscall = readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'utf8').trim();
      m.set(tid, { state, syscall });
    } catch {
      m.set(tid, { state: '?', syscall: 'gone' });
    }
  }
  return m;
}

/**
 * Wait until every thread of pid sleeps in a system call (state S, /proc/.../syscall not
 * "running"), the same one on two looks in a row; `mainSyscalls`: the main thread's system call
 * must be one of these numbers. Returns the tids.
 */
export async function waitBlocked(pid: number, opts: { mainSyscalls?: number[]; threads?: number; timeoutMs?: number } = {}): Promise<number[]> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  let prev = '';
  let last = '';
  for (;;) {
    const states = taskStates(pid);
    const key = [...states].map(([tid, s]) => `${tid}:${s.state}:${s.syscall}`).join('\n');
    const main = states.get(pid);
    const ok =
      [...states.values()].every((s) => s.state === 'S' && /^\d+ /.test(s.syscall)) &&
      (opts.threads === undefined || states.size >= opts.threads) &&
      (!opts.mainSyscalls || (main !== undefined && opts.mainSyscalls.includes(Number(main.syscall.split(' ')[0]))));
    if (ok && key === prev) return [...states.keys()].sort((a, b) => a - b);
    prev = ok ? key : '';
    last = key;
    if (Date.now() > deadline) throw new Error(`pid ${pid}: threads not all blocked after ${opts.timeoutMs ?? 10_000} ms:\n${last}`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

// ---- dwunw -------------------------------------------------------------------------------------

export interface DwFrame {
  pc: string;
  sp: string;
  module: string | null;
  symbol: string | null;
  offset: string | null;
  how: string;
  flags: string[];
}
export interface DwThread {
  tid: number;
  frames: DwFrame[];
  stop: string;
  stop_text?: string;
  error?: string;
}
export interface DwProcess {
  pid: number;
  threads: DwThread[];
}

/** The environment for the CLI: tap's loaders are for the test file, not for the CLI under test. */
function cliEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  delete env.FORCE_COLOR;
  return env;
}

/** `dwunw ARGS --json`, parsed; throws with stderr when it fails or prints no JSON. */
export async function dwunwJson(args: string[]): Promise<{ result: DwProcess; run: RunResult }> {
  const r = await run(process.execPath, [dwunwBin, ...args, '--json'], { env: cliEnv(), timeoutMs: 60_000 });
  let result: DwProcess;
  try {
    result = JSON.parse(r.stdout) as DwProcess;
  } catch {
    throw new Error(`dwunw ${args.join(' ')} --json: exit ${r.code ?? r.signal}, no JSON: ${r.stderr.trim() || r.stdout.slice(0, 300)}`);
  }
  return { result, run: r };
}

// ---- gdb ---------------------------------------------------------------------------------------

export interface GdbFrame {
  pc: string;
  type: 'normal' | 'sigtramp';
  name: string | null;
}
export interface GdbFrames {
  pid: number;
  threads: Record<string, GdbFrame[]>;
  errors: Record<string, string>;
}

/** gdb's command line head: quiet, batch, no init file, no auto-loaded scripts or debuginfod. */
export const gdbPrefix = (timeoutSec: number): string[] => [
  '-k',
  '5',
  String(timeoutSec),
  'gdb',
  '-q',
  '-nx',
  '-batch',
  '-iex',
  'set auto-load python-scripts off',
  '-iex',
  'set debuginfod enabled off',
];

/** gdb -p PID with gdb_frames.py: every thread's frames. */
export async function gdbFrames(pid: number): Promise<{ result: GdbFrames; run: RunResult }> {
  const r = await run('timeout', [...gdbPrefix(60), '-p', String(pid), '-x', join(oracleDir, 'gdb_frames.py')], { timeoutMs: 70_000 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('DWUNW_FRAMES '));
  if (!line) throw new Error(`gdb -p ${pid}: exit ${r.code ?? r.signal}, no DWUNW_FRAMES line:\n${r.stderr.slice(-2000)}${r.stdout.slice(-1000)}`);
  return { result: JSON.parse(line.slice('DWUNW_FRAMES '.length)) as GdbFrames, run: r };
}

/** gdb (or gdb-multiarch) on PROG CORE with gdb_frames.py: every thread's frames. */
export async function gdbCore(prog: string, core: string, multiarch = false): Promise<GdbFrames> {
  const args = gdbPrefix(60).map((a) => (a === 'gdb' && multiarch ? 'gdb-multiarch' : a));
  const r = await run('timeout', [...args, prog, core, '-x', join(oracleDir, 'gdb_frames.py')], { timeoutMs: 70_000 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('DWUNW_FRAMES '));
  if (!line) throw new Error(`gdb ${prog} ${core}: exit ${r.code ?? r.signal}, no DWUNW_FRAMES line:\n${r.stderr.slice(-2000)}`);
  return JSON.parse(line.slice('DWUNW_FRAMES '.length)) as GdbFrames;
}

// ---- comparison --------------------------------------------------------------------------------

const norm = (pc: string): string => `0x${BigInt(pc).toString(16)}`;

function dwLabel(f: DwFrame | undefined): string {
  if (!f) return '';
  const sym = f.symbol ? (f.offset && BigInt(f.offset) !== 0n ? `${f.symbol}+${f.offset}` : f.symbol) : '??';
  const mod = f.module ? f.module.slice(f.module.lastIndexOf('/') + 1) : '-';
  return `${norm(f.pc)} ${sym} (${mod}) [${f.how}]`;
}

function gdbLabel(f: GdbFrame | undefined): string {
  if (!f) return '';
  return `${norm(f.pc)} ${f.name ?? '??'}${f.type === 'sigtramp' ? ' <signal trampoline>' : ''}`;
}

/** Both stacks side by side; rows that differ are marked with '!'. */
export function sideBySide(dw: DwFrame[], gdb: GdbFrame[]): string {
  const n = Math.max(dw.length, gdb.length);
  const left = Array.from({ length: n }, (_, i) => dwLabel(dw[i]));
  const width = Math.min(90, Math.max(12, ...left.map((s) => s.length)));
  const rows = [`  ${'#'.padEnd(4)} ${'dwunw'.padEnd(width)} | gdb`];
  for (let i = 0; i < n; i++) {
    const same = dw[i] && gdb[i] && norm(dw[i]!.pc) === norm(gdb[i]!.pc);
    rows.push(`${same ? ' ' : '!'} ${String(i).padEnd(4)} ${left[i]!.padEnd(width)} | ${gdbLabel(gdb[i])}`);
  }
  return rows.join('\n');
}

/** What a thread comparison found, for the summary of mismatch classes. */
export interface Mismatch {
  label: string;
  tid: number;
  index: number; // first differing frame
  dw?: DwFrame;
  gdb?: GdbFrame;
  prev?: GdbFrame; // gdb's frame before it (the caller side of the step that went wrong)
  dwStop: string;
  table: string;
}

/** What comparing one thread with gdb found (no assertion made). */
export interface ThreadCheck {
  frames: number;
  equal: boolean;
  mismatch: Mismatch | null;
  hows: string[]; // "#i how[ exact-pc]" on the frames both agree on
  wantHows: string[];
  stopOk: boolean | null; // null: not checked (frames differ, or gdb ended on an error)
}

export function checkThread(label: string, dw: DwThread, gdb: GdbFrame[], gdbError?: string): ThreadCheck {
  const dpcs = dw.frames.map((f) => norm(f.pc));
  const gpcs = gdb.map((f) => norm(f.pc));
  let first = 0;
  while (first < dpcs.length && first < gpcs.length && dpcs[first] === gpcs[first]) first++;
  // gdb's walk ended on an error where dwunw went on by decoding a prologue (code without CFI,
  // where gdb's own analysis gives up): every frame gdb has is dwunw's, the rest is not compared.
  const gdbShort = !!gdbError && first === gpcs.length && first > 0 && dw.frames[first]?.how === 'prologue';
  const equal = (first === dpcs.length && first === gpcs.length) || gdbShort;
  const mismatch: Mismatch | null = equal
    ? null
    : { label, tid: dw.tid, index: first, dw: dw.frames[first], gdb: gdb[first], prev: gdb[first - 1], dwStop: dw.stop, table: sideBySide(dw.frames, gdb) };
  // how and flags, on the frames both agree on
  const hows: string[] = [];
  const wantHows: string[] = [];
  for (let i = 0; i < first; i++) {
    const f = dw.frames[i]!;
    const afterTramp = i > 0 && gdb[i - 1]!.type === 'sigtramp';
    // A linker stub (gdb names it "…@plt") may have CFI (a PIE's .plt) or none (a static binary's
    // IRELATIVE stubs): then its caller comes from where the call left the return address, "lr".
    const afterStub = i === 1 && f.how === 'lr' && (gdb[0]!.name === null || /@plt$/.test(gdb[0]!.name));
    hows.push(`#${i} ${f.how}${f.flags.includes('exact-pc') ? ' exact-pc' : ''}`);
    wantHows.push(`#${i} ${i === 0 ? 'initial' : afterTramp ? 'signal' : afterStub ? 'lr' : 'cfi'}${i === 0 || afterTramp ? ' exact-pc' : ''}`);
  }
  return { frames: dpcs.length, equal, mismatch, hows, wantHows, stopOk: equal && !gdbError ? dw.stop === 'OK' : null };
}

/**
 * One thread: pc for pc against gdb; the `how` of each frame ("initial" for #0, "signal" for the
 * frame after a signal trampoline, "cfi" otherwise; exact-pc flags on #0 and after a trampoline);
 * stop OK when gdb reached the end of the stack without an error. Returns the mismatch or null.
 */
export function compareThread(t: Test, label: string, dw: DwThread | undefined, gdb: GdbFrame[] | undefined, gdbError?: string): Mismatch | null {
  if (!dw || !gdb) {
    t.fail(`${label}: thread missing (${!dw ? 'dwunw' : 'gdb'} has no such thread)`);
    return null;
  }
  const c = checkThread(label, dw, gdb, gdbError);
  if (c.equal) {
    t.pass(`${label}: ${c.frames} frames, the same as gdb`);
  } else {
    const m = c.mismatch!;
    t.comment(`${label}:\n${m.table}`);
    t.fail(`${label}: frames differ from gdb's at #${m.index} (dwunw ${c.frames} frames, stop ${dw.stop}; gdb ${gdb.length})`);
  }
  t.same(c.hows, c.wantHows, `${label}: how of each frame (initial, cfi, signal after a trampoline)`);
  if (c.stopOk !== null) t.ok(c.stopOk, `${label}: stop OK (gdb reached the end of the stack; dwunw: ${dw.stop})`);
  return c.mismatch;
}

/** Compare every thread of a process, by tid. */
export function compareProcess(t: Test, label: string, dw: DwProcess, gdb: GdbFrames): Mismatch[] {
  const dtids = dw.threads.map((x) => x.tid).sort((a, b) => a - b);
  const gtids = Object.keys(gdb.threads)
    .map(Number)
    .sort((a, b) => a - b);
  t.same(dtids, gtids, `${label}: the same threads`);
  const out: Mismatch[] = [];
  for (const tid of gtids) {
    const m = compareThread(t, `${label} tid ${tid}${tid === gdb.pid ? ' (main)' : ''}`, dw.threads.find((x) => x.tid === tid), gdb.threads[String(tid)], gdb.errors[String(tid)]);
    if (m) out.push(m);
  }
  return out;
}

/**
 * A stepped snapshot (gdb_snapshot.py `steps`: thread i = the i-th instruction): one assertion
 * for the frames of every step, one for the hows, one for the stops; the failing steps are listed
 * (the first three with both stacks). Returns the mismatches.
 */
export function compareSteps(t: Test, label: string, dw: DwProcess, gdb: GdbFrames): Mismatch[] {
  const steps = Object.keys(gdb.threads)
    .map(Number)
    .sort((a, b) => a - b);
  const out: Mismatch[] = [];
  const bad: string[] = [];
  const badHow: string[] = [];
  const badStop: string[] = [];
  for (const step of steps) {
    const d = dw.threads.find((x) => x.tid === step);
    const g = gdb.threads[String(step)]!;
    const pc = g[0] ? norm(g[0].pc) : '?';
    const l = `${label} step ${step} (pc ${pc}${g[0]?.name ? ` ${g[0].name}` : ''})`;
    if (!d) {
      bad.push(`${l}: no such thread in dwunw's output`);
      continue;
    }
    const c = checkThread(l, d, g, gdb.errors[String(step)]);
    if (c.mismatch) {
      out.push(c.mismatch);
      bad.push(out.length <= 3 ? `${l}: differs at #${c.mismatch.index}\n${c.mismatch.table}` : `${l}: differs at #${c.mismatch.index}`);
    }
    if (JSON.stringify(c.hows) !== JSON.stringify(c.wantHows)) badHow.push(`${l}: ${c.hows.join(', ')} (want ${c.wantHows.join(', ')})`);
    if (c.stopOk === false) badStop.push(`${l}: stop ${d.stop}`);
  }
  const n = steps.length;
  if (bad.length) t.comment(bad.join('\n'));
  t.ok(bad.length === 0, `${label}: ${n} steps, ${n - bad.length} the same as gdb`);
  t.ok(badHow.length === 0, `${label}: how of each frame at every step`, badHow.length ? { diagnostic: true, steps: badHow.slice(0, 20) } : {});
  t.ok(badStop.length === 0, `${label}: stop OK at every step`, badStop.length ? { diagnostic: true, steps: badStop.slice(0, 20) } : {});
  return out;
}

/**
 * The summary of a file's mismatches, grouped by what went wrong (dwunw stopped early with a
 * reason, or gave another frame by some how), a few examples of each.
 */
export function mismatchSummary(ms: Mismatch[], examples = 4): string {
  const groups = new Map<string, Mismatch[]>();
  for (const m of ms) {
    const key = !m.dw ? `dwunw stops early (${m.dwStop})` : !m.gdb ? `dwunw has more frames (${m.dw.how})` : `dwunw gives another frame (${m.dw.how}, stop ${m.dwStop})`;
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  const out: string[] = [];
  for (const [key, list] of groups) {
    out.push(`${key}: ${list.length} stack(s), e.g.`);
    for (const m of list.slice(0, examples)) out.push(`  ${mismatchLine(m)}`);
  }
  return out.join('\n');
}

/** One line per mismatch: where it goes wrong, for the file's summary comment. */
export function mismatchLine(m: Mismatch): string {
  const g = m.gdb ? `${norm(m.gdb.pc)} ${m.gdb.name ?? '??'}` : '(gdb ends)';
  const d = m.dw ? `${norm(m.dw.pc)} ${m.dw.symbol ?? '??'} [${m.dw.how}]` : `(dwunw ends, stop ${m.dwStop})`;
  const p = m.prev ? ` after ${m.prev.name ?? '??'}${m.prev.type === 'sigtramp' ? ' <sigtramp>' : ''}` : '';
  return `${m.label}: #${m.index}${p}: gdb ${g} / dwunw ${d}`;
}

// ---- ELF helpers (objdump/nm) ------------------------------------------------------------------

/** Defined symbols of an ELF file: name -> address (the file's addresses). */
export async function symbols(file: string): Promise<Map<string, bigint>> {
  const r = await run('nm', ['--defined-only', file]);
  const m = new Map<string, bigint>();
  for (const line of r.stdout.split('\n')) {
    const f = line.split(' ');
    if (f.length === 3 && /^[tTwW]$/.test(f[1]!)) m.set(f[2]!, BigInt(`0x${f[0]}`));
  }
  return m;
}

export interface Insn {
  addr: bigint;
  text: string;
}

/** The instructions of one function (objdump --disassemble=SYM). */
export async function disassemble(file: string, sym: string): Promise<Insn[]> {
  const r = await run('objdump', ['-d', '--no-show-raw-insn', `--disassemble=${sym}`, file]);
  const out: Insn[] = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^\s+([0-9a-f]+):\s+(.*)$/.exec(line);
    if (m) out.push({ addr: BigInt(`0x${m[1]}`), text: m[2]!.trim() });
  }
  return out;
}

/** Address of the first call in `sym` whose text matches `target` (e.g. /<zoo_park>/, /\*%r/). */
export async function callSite(file: string, sym: string, target: RegExp): Promise<bigint> {
  const insns = await disassemble(file, sym);
  const i = insns.find((x) => /^call/.test(x.text) && target.test(x.text));
  if (!i) throw new Error(`${file}: no call matching ${target} in ${sym}`);
  return i.addr;
}

/** [start, end) of a section (its addresses), or null. */
export async function sectionRange(file: string, name: string): Promise<[bigint, bigint] | null> {
  const r = await run('readelf', ['-SW', file]);
  for (const line of r.stdout.split('\n')) {
    const m = /\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)/.exec(line);
    if (m && m[1] === name) {
      const a = BigInt(`0x${m[2]}`);
      return [a, a + BigInt(`0x${m[3]}`)];
    }
  }
  return null;
}

/** PLT entries by name (objdump's <name@plt> labels in .plt), and the start of .plt. */
export async function pltEntries(file: string): Promise<{ start: bigint | null; entries: Map<string, bigint> }> {
  const r = await run('objdump', ['-d', '--no-show-raw-insn', '--section=.plt', file]);
  const entries = new Map<string, bigint>();
  let start: bigint | null = null;
  for (const line of r.stdout.split('\n')) {
    const m = /^([0-9a-f]+) <(.*)>:$/.exec(line);
    if (!m) continue;
    const a = BigInt(`0x${m[1]}`);
    if (start === null || a < start) start = a;
    if (m[2]!.endsWith('@plt')) entries.set(m[2]!, a);
  }
  return { start, entries };
}

// ---- scheduling --------------------------------------------------------------------------------

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
