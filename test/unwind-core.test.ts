// `dwunw unwind-core` on real core files, against gdb on the same core:
//   x86_64 kernel cores  fixtures/x86_64/build/crash-{pie,static} dying in known chains (segv in a
//                        qsort comparator, abort, segv in a signal handler, segv in a second
//                        thread while three others block): every thread pc for pc against
//                        `gdb PROG CORE` (test/oracle/gdb_frames.py), the signal on the first
//                        thread, the chain's names, the text format.
//   gcore                of the live multi-threaded fixture (gdb writes NT_FILE too).
//   --exe, --sysroot     a core whose executable moved; module files under a sysroot.
//   errors               truncated core (partial, warned), not a core, not ELF, other machine.
//   arm64, mips32        qemu-user guest cores (no NT_FILE: the fixture saves /proc/self/maps as
//                        the --maps sidecar): static builds against gdb-multiarch on the core
//                        (gdb is right on raw guest cores only for static binaries: the crashing
//                        thread pc for pc, the others too on arm64, frame 0 on mips32), PIE
//                        builds checked for the fixture's chain by name. Skipped, saying why,
//                        when the backend, the cross compiler or qemu is missing.
// Kernel cores: with core_pattern a plain file name the core lands in the crash's directory;
// otherwise (a pipe to systemd-coredump, an absolute path) and as root, core_pattern is pointed
// at this test's directory for the run and restored after; without root those cases are skipped.
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { Dwunw } from '../lib/dwunw.js';
import { DWUNW_ARCH_ARM64, DWUNW_ARCH_MIPS32 } from '../lib/native.js';
import {
  type DwProcess,
  type DwThread,
  type GdbFrames,
  type RunResult,
  checkThread,
  compareProcess,
  dwunwBin,
  gdbCore,
  killAll,
  pool,
  root,
  run,
  startTarget,
  waitBlocked,
} from './oracle/harness.js';

const fixdir = join(root, 'fixtures', 'x86_64', 'build');
const crashSrc = join(root, 'fixtures', 'x86_64', 'crash.c');
const work = mkdtempSync(join(tmpdir(), 'dwunw-core-'));

// ---- core_pattern --------------------------------------------------------------------------------

const PATTERN = '/proc/sys/kernel/core_pattern';
let savedPattern: string | null = null;

function restorePattern(): void {
  if (savedPattern === null) return;
  try {
    writeFileSync(PATTERN, `${savedPattern}\n`);
  } catch {
    // nothing more can be done
  }
  savedPattern = null;
}

t.teardown(() => {
  restorePattern();
  killAll();
  rmSync(work, { recursive: true, force: true });
});
process.on('exit', restorePattern);

/** Where kernel cores go: the crash's directory, a directory of ours (pattern set), or nowhere. */
type CoreMode = { mode: 'cwd' } | { mode: 'dir'; dir: string } | { mode: 'none'; why: string };

function setupCores(): CoreMode {
  let pattern: string;
  try {
    pattern = readFileSync(PATTERN, 'utf8').replace(/\n$/, '');
  } catch (e) {
    return { mode: 'none', why: `cannot read ${PATTERN}: ${(e as Error).message}` };
  }
  if (!pattern.startsWith('|') && !pattern.includes('/')) return { mode: 'cwd' };
  if (process.getuid?.() !== 0) return { mode: 'none', why: `core_pattern is "${pattern}" and changing it needs root` };
  const dir = join(work, 'kernel-cores');
  mkdirSync(dir);
  try {
    writeFileSync(PATTERN, `${dir}/core.%p\n`);
    savedPattern = pattern;
  } catch (e) {
    return { mode: 'none', why: `cannot set core_pattern: ${(e as Error).message}` };
  }
  return { mode: 'dir', dir };
}

// ---- Running things ------------------------------------------------------------------------------

interface Crash {
  pid: number;
  signal: NodeJS.Signals | null;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `cmd` in `dir` with core dumps on (and a small stack limit: thread stacks stay small). */
function crash(dir: string, cmd: string[], stackKb = 1024): Promise<Crash> {
  return new Promise((resolve, reject) => {
    const script = `ulimit -c unlimited 2>/dev/null || ulimit -c hard; ulimit -s ${stackKb}; exec "$@"`;
    const child = spawn('sh', ['-c', script, 'sh', ...cmd], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ pid: child.pid ?? -1, signal, code, stdout, stderr });
    });
  });
}

function isCore(path: string): boolean {
  try {
    const b = readFileSync(path).subarray(0, 18);
    return b.length >= 18 && b.subarray(0, 4).toString('latin1') === '\x7fELF' && b.readUInt16LE(16) === 4;
  } catch {
    return false;
  }
}

/** The kernel's core of a crash (in dir, or the pattern's directory), or null. */
function kernelCore(m: CoreMode, dir: string, pid: number): string | null {
  if (m.mode === 'dir') {
    const p = join(m.dir, `core.${pid}`);
    return existsSync(p) ? p : null;
  }
  if (m.mode === 'cwd') {
    for (const f of readdirSync(dir)) if (f.startsWith('core') && isCore(join(dir, f))) return join(dir, f);
  }
  return null;
}

/** The environment for the CLI: tap's loaders are for the test file, not for the CLI. */
function cliEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  delete env.FORCE_COLOR;
  return env;
}

const dwunw = (args: string[]): Promise<RunResult> => run(process.execPath, [dwunwBin, ...args], { env: cliEnv(), timeoutMs: 60_000 });

interface CoreJson extends DwProcess {
  comm: string | null;
  signal: string | null;
  threads: (DwThread & { signal: string | null })[];
}

async function unwindCoreJson(args: string[]): Promise<{ json: CoreJson; r: RunResult }> {
  const r = await dwunw(['unwind-core', ...args, '--json']);
  try {
    return { json: JSON.parse(r.stdout) as CoreJson, r };
  } catch {
    throw new Error(`dwunw unwind-core ${args.join(' ')}: exit ${r.code ?? r.signal}, no JSON: ${r.stderr.trim() || r.stdout.slice(0, 300)}`);
  }
}

/** A skipped check, with the reason (tap prints "# SKIP reason"). */
function skip(t: Test, why: string): void {
  t.pass(why, { skip: why });
}

const has = (cmd: string): boolean => {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) if (dir && existsSync(join(dir, cmd))) return true;
  return false;
};

/** `want` appears in order in the thread's symbol names (not necessarily adjacent). */
function chainOf(th: DwThread | undefined, want: string[]): { ok: boolean; names: string } {
  const names = (th?.frames ?? []).map((f) => f.symbol ?? '??');
  let i = 0;
  for (const n of names) if (i < want.length && n === want[i]) i++;
  return { ok: i === want.length, names: names.join(' ') };
}

// ---- Scenarios ---------------------------------------------------------------------------------

interface Scenario {
  signal: string;
  threads: number;
  /** Names thread 0 must show, in order (the fixture's functions). */
  chain: string[];
  /** A frame recovered from a signal frame. */
  sigframe?: boolean;
}

const SCENARIOS: Record<string, Scenario> = {
  segv: { signal: 'SIGSEGV', threads: 1, chain: ['crash_poke', 'crash_cmp', 'crash_segv', 'main'] },
  abort: { signal: 'SIGABRT', threads: 1, chain: ['abort', 'crash_abort_inner', 'crash_abort', 'main'] },
  handler: {
    signal: 'SIGSEGV',
    threads: 1,
    chain: ['crash_poke', 'crash_on_signal', 'crash_raise', 'crash_handler', 'main'],
    sigframe: true,
  },
  thread_segv: { signal: 'SIGSEGV', threads: 5, chain: ['crash_poke', 'crash_cmp', 'crash_segv', 'crash_thread_segv'] },
};

/** What every core's JSON must say besides the frames: threads, signals, comm, the chain. */
function checkCoreJson(t: Test, label: string, j: CoreJson, sc: Scenario, comm: string, pid: number): void {
  t.equal(j.pid, pid, `${label}: pid is the crashed process's`);
  t.equal(j.comm, comm, `${label}: comm from NT_PRPSINFO`);
  t.equal(j.threads.length, sc.threads, `${label}: ${sc.threads} thread(s)`);
  t.equal(j.signal, sc.signal, `${label}: the process's signal`);
  t.equal(j.threads[0]?.signal, sc.signal, `${label}: the first thread took it`);
  t.ok(
    j.threads.slice(1).every((x) => x.signal === null),
    `${label}: no signal shown on the other threads`,
  );
  if (sc.threads > 1) t.not(j.threads[0]?.tid, pid, `${label}: the crashing thread (not main) comes first`);
  const c = chainOf(j.threads[0], sc.chain);
  t.ok(c.ok, `${label}: thread 0 shows ${sc.chain.join(' < ')}`, { names: c.names });
  if (sc.sigframe) t.ok(j.threads[0]?.frames.some((f) => f.how === 'signal'), `${label}: a frame recovered from the signal frame`);
}

// ---- x86_64 kernel cores ---------------------------------------------------------------------------

const coreMode = setupCores();
const links = ['pie', 'static'] as const;

t.test('x86_64 kernel cores against gdb', async (t) => {
  const missing = ['/usr/bin/gdb', ...links.map((l) => join(fixdir, `crash-${l}`))].filter((p) => !existsSync(p));
  if (missing.length) {
    t.fail(`missing: ${missing.join(', ')} (make -C fixtures; scripts/ensure-deps installs gdb)`);
    return;
  }
  if (coreMode.mode === 'none') {
    skip(t, `no kernel cores: ${coreMode.why}`);
    return;
  }
  const cases = links.flatMap((link) => Object.keys(SCENARIOS).map((scenario) => ({ link, scenario })));
  const results = pool(
    cases.map(({ link, scenario }) => async () => {
      const dir = join(work, `x86-${link}-${scenario}`);
      mkdirSync(dir);
      const prog = join(fixdir, `crash-${link}`);
      const c = await crash(dir, [prog, scenario]);
      const core = kernelCore(coreMode, dir, c.pid);
      if (!core) throw new Error(`${prog} ${scenario}: no core (exit ${c.code ?? c.signal}, pattern mode ${coreMode.mode}): ${c.stderr}`);
      const [dw, gdb] = await Promise.all([unwindCoreJson([core]), gdbCore(prog, core)]);
      return { prog, core, crash: c, dw, gdb };
    }),
    2,
  );
  for (const [i, { link, scenario }] of cases.entries()) {
    await t.test(`${scenario} ${link}`, async (t) => {
      const r = await results[i]!;
      const label = `x86_64 ${scenario} ${link}`;
      t.equal(r.crash.signal, SCENARIOS[scenario]!.signal, `${label}: the fixture died of ${SCENARIOS[scenario]!.signal}`);
      t.equal(r.dw.r.code, 0, `${label}: exit 0`, { stderr: r.dw.r.stderr });
      compareProcess(t, label, r.dw.json, r.gdb);
      checkCoreJson(t, label, r.dw.json, SCENARIOS[scenario]!, `crash-${link}`, r.crash.pid);
    });
  }

  await t.test('text output', async (t) => {
    const r = await results[cases.findIndex((c) => c.link === 'pie' && c.scenario === 'thread_segv')]!;
    const text = await dwunw(['unwind-core', r.core]);
    const lines = text.stdout.split('\n');
    const first = r.dw.json.threads[0]!.tid;
    t.equal(lines[0], `PID ${r.crash.pid} (crash-pie)`, 'PID N (comm) from the core');
    t.equal(lines[1], `Thread ${first} [SIGSEGV]:`, 'the crashing thread first, with its signal (no name: the core has only the main thread\'s)');
    t.match(lines[2] ?? '', /^#0 +0x[0-9a-f]{16} crash_poke(\+0x[0-9a-f]+)? \(.*crash-pie\)$/, '#0 as unwind-pid prints it');
    // the core's memory is the window: every frame by CFI or a signal frame, no marker, no legend
    const origins = r.dw.json.threads.flatMap((th) => th.frames.map((f) => (f as { origin?: string }).origin));
    t.ok(origins.every((o) => o === 'window' || o === 'signal'), 'JSON: every frame has its origin, window or signal', { origins });
    t.notMatch(text.stdout, /\[(live|fp|prologue|lr)\]|frames marked/, 'text: no marker, no legend');
    t.ok(lines.includes(`Thread ${r.crash.pid} (crash-pie):`), 'the main thread with its name, no signal');
    t.equal(lines.filter((l) => l.startsWith('Thread ')).length, 5, 'five threads');
    t.equal(lines.filter((l) => l === 'stop: end of stack').length, 5, 'every walk reaches the end of the stack');
  });
});

// ---- gcore -------------------------------------------------------------------------------------------

t.test('gcore of a live process against gdb', async (t) => {
  if (!has('gcore') || !existsSync(join(fixdir, 'crash-pie'))) {
    skip(t, 'gcore or the fixture is missing');
    return;
  }
  for (const link of links) {
    await t.test(link, async (t) => {
      const prog = join(fixdir, `crash-${link}`);
      const target = await startTarget(prog, ['threads'], { ready: 'ready threads' });
      const dir = join(work, `gcore-${link}`);
      mkdirSync(dir);
      let core: string;
      try {
        await waitBlocked(target.pid, { threads: 4 });
        const g = await run('timeout', ['-k', '5', '60', 'gcore', '-o', join(dir, 'gcore'), String(target.pid)], { timeoutMs: 70_000 });
        core = join(dir, `gcore.${target.pid}`);
        if (!existsSync(core)) {
          t.fail(`gcore wrote no core: ${g.stderr.slice(-500)}`);
          return;
        }
      } finally {
        await target.kill();
      }
      const [dw, gdb] = await Promise.all([unwindCoreJson([core]), gdbCore(prog, core)]);
      const label = `gcore ${link}`;
      t.equal(dw.r.code, 0, `${label}: exit 0`, { stderr: dw.r.stderr });
      compareProcess(t, label, dw.json, gdb);
      t.equal(dw.json.pid, target.pid, `${label}: the process's pid`);
      t.equal(dw.json.threads.length, 4, `${label}: four threads`);
      t.equal(dw.json.signal, null, `${label}: no signal (nothing crashed)`);
      t.ok(chainOf(dw.json.threads.find((x) => x.tid !== target.pid && x.frames.some((f) => f.symbol === 'crash_park_cmp')), ['crash_park_cmp', 'crash_thread_qsort']).ok, `${label}: a thread parked in the qsort comparator`);
    });
  }
});

// ---- --exe, --sysroot, errors ------------------------------------------------------------------------

t.test('--exe and --sysroot', async (t) => {
  if (coreMode.mode === 'none') {
    skip(t, `no kernel cores: ${coreMode.why}`);
    return;
  }
  const dir = join(work, 'moved');
  mkdirSync(join(dir, 'a'), { recursive: true });
  mkdirSync(join(dir, 'b'));
  const orig = join(dir, 'a', 'crash');
  copyFileSync(join(fixdir, 'crash-pie'), orig);
  const c = await crash(dir, [orig, 'segv']);
  const core = kernelCore(coreMode, dir, c.pid);
  if (!core) {
    t.fail(`no core (exit ${c.code ?? c.signal})`);
    return;
  }
  const before = await unwindCoreJson([core]);
  const moved = join(dir, 'b', 'moved');
  renameSync(orig, moved);

  const lost = await unwindCoreJson([core]);
  t.equal(lost.r.code, 0, 'executable gone: still exit 0');
  t.match(lost.r.stderr, `the executable ${orig} is not here: give it with --exe`, 'executable gone: says so');
  t.equal(lost.json.threads[0]?.frames[0]?.module, null, 'executable gone: #0 has no module');

  const gdb = await gdbCore(moved, core);
  const found = await unwindCoreJson([core, '--exe', moved]);
  t.equal(found.r.code, 0, '--exe: exit 0');
  t.equal(found.r.stderr, '', '--exe: no warning');
  compareProcess(t, '--exe', found.json, gdb);
  t.equal(found.json.threads[0]?.frames[0]?.module, realpathSync(moved), '--exe: the executable\'s frames name the file given');
  t.same(
    found.json.threads[0]?.frames.map((f) => f.pc),
    before.json.threads[0]?.frames.map((f) => f.pc),
    '--exe: the same stack as before the move',
  );

  // A sysroot holding (links to) every module file, the executable included.
  const sysroot = join(dir, 'sysroot');
  const modules = new Set(before.json.threads.flatMap((x) => x.frames.map((f) => f.module)).filter((m): m is string => m !== null && m.startsWith('/')));
  for (const m of modules) {
    const target = m === orig ? moved : m;
    mkdirSync(dirname(join(sysroot, m)), { recursive: true });
    symlinkSync(target, join(sysroot, m));
  }
  const rooted = await unwindCoreJson([core, '--sysroot', sysroot]);
  t.equal(rooted.r.code, 0, '--sysroot: exit 0');
  t.same(rooted.json.threads[0]?.frames.map((f) => f.pc), before.json.threads[0]?.frames.map((f) => f.pc), '--sysroot: the same stack');
  t.ok(
    rooted.json.threads[0]?.frames.every((f) => f.module === null || f.module.startsWith(sysroot)),
    '--sysroot: every module opened under the sysroot',
  );
  // --exe is not under the sysroot.
  rmSync(join(sysroot, orig));
  const both = await unwindCoreJson([core, '--sysroot', sysroot, '--exe', moved]);
  t.equal(both.r.code, 0, '--sysroot + --exe: exit 0');
  t.same(both.json.threads[0]?.frames.map((f) => f.pc), before.json.threads[0]?.frames.map((f) => f.pc), '--sysroot + --exe: the same stack');
  t.equal(both.json.threads[0]?.frames[0]?.symbol, 'crash_poke', '--sysroot + --exe: the executable\'s symbols');

  // A sysroot that holds none of the core's files: each missing module is named, the walk stops
  // where the first one is met, and no frame is made up from frame pointers past it.
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  const none = await unwindCoreJson([core, '--sysroot', empty, '--exe', moved]);
  const libc = before.json.threads[0]?.frames.find((f) => f.module?.includes('libc.so'))?.module;
  t.ok(libc, 'the stack goes through libc');
  t.match(none.r.stderr, `${empty}${libc}: cannot load the module (no such file`, 'empty sysroot: the missing libc is named');
  const nf = none.json.threads[0]?.frames ?? [];
  const firstLibc = before.json.threads[0]?.frames.findIndex((f) => f.module === libc) ?? -1;
  t.equal(nf.length, firstLibc + 1, 'empty sysroot: the walk stops at the first frame in a missing module');
  t.ok(nf.every((f) => f.how !== 'fp'), 'empty sysroot: no frame-pointer frame past a missing module');
  t.equal(none.json.threads[0]?.stop, 'NOT_FOUND', 'empty sysroot: stop NOT_FOUND, not a clean end');
  const bare = await unwindCoreJson([core, '--sysroot', empty]);
  t.equal(bare.json.threads[0]?.frames.length, 1, 'empty sysroot without --exe: frame 0 only, nothing guessed');
  t.match(bare.r.stderr, 'crash: cannot load the module', 'empty sysroot without --exe: the executable is named');
});

t.test('errors and damaged cores', async (t) => {
  const bad = join(work, 'bad');
  mkdirSync(bad);
  let r = await dwunw(['unwind-core', join(bad, 'nope')]);
  t.equal(r.code, 1, 'no such file: exit 1');
  t.match(r.stderr, /nope: no such file or directory/, 'no such file: says so');
  r = await dwunw(['unwind-core', join(root, 'package.json')]);
  t.match(r.stderr, /package\.json: not an ELF file/, 'not ELF: says so');
  t.equal(r.code, 1, 'not ELF: exit 1');
  r = await dwunw(['unwind-core', join(fixdir, 'crash-pie')]);
  t.match(r.stderr, /crash-pie: not a core file/, 'an executable: not a core file');
  r = await dwunw(['unwind-core', join(fixdir, 'crash-pie'), '--maps', join(bad, 'nomaps')]);
  t.match(r.stderr, /nomaps: no such file or directory/, '--maps missing: says so');
  r = await dwunw(['unwind-core', join(fixdir, 'crash-pie'), '--sysroot', join(root, 'package.json')]);
  t.match(r.stderr, /package\.json: not a directory/, '--sysroot not a directory: says so');

  if (coreMode.mode === 'none') {
    skip(t, `no kernel cores: ${coreMode.why}`);
    return;
  }
  const c = await crash(bad, [join(fixdir, 'crash-pie'), 'thread_segv']);
  const core = kernelCore(coreMode, bad, c.pid);
  if (!core) {
    t.fail('no core');
    return;
  }
  const whole = readFileSync(core);

  // Another machine in the header.
  const i386 = Buffer.from(whole.subarray(0, 4096));
  i386.writeUInt16LE(3, 18);
  writeFileSync(join(bad, 'i386.core'), i386);
  r = await dwunw(['unwind-core', join(bad, 'i386.core')]);
  t.match(r.stderr, /i386\.core: unsupported architecture \(i386, 64-bit, little-endian\)/, 'another machine: unsupported architecture, named');
  t.equal(r.code, 1, 'another machine: exit 1');

  // Cut short: the notes are at the start, the thread stacks near the end.
  const cut = join(bad, 'cut.core');
  writeFileSync(cut, whole.subarray(0, Math.floor(whole.length * 0.6)));
  const part = await unwindCoreJson([cut]);
  t.equal(part.r.code, 8, 'truncated: exit 8 after what could be read is unwound (README.md, exit status)');
  t.match(part.r.stderr, /cut\.core: truncated core \(\d+ of \d+ bytes\)/, 'truncated: the last line names it');
  t.match(part.r.stderr, /cut\.core: malformed or truncated core: unwinding what could be read/, 'truncated: warned');
  t.equal(part.json.threads.length, 5, 'truncated: every thread (the notes are whole)');
  t.ok(part.json.threads.every((x) => x.frames.length >= 1), 'truncated: each thread has at least frame 0');

  // Only the headers and notes (a 64-bit core: program headers at e_phoff, 56 bytes each).
  let notesEnd = 0;
  const phoff = Number(whole.readBigUInt64LE(32));
  for (let i = 0; i < whole.readUInt16LE(56); i++) {
    const ph = phoff + i * 56;
    if (whole.readUInt32LE(ph) === 4) notesEnd = Math.max(notesEnd, Number(whole.readBigUInt64LE(ph + 8) + whole.readBigUInt64LE(ph + 32)));
  }
  const head = join(bad, 'head.core');
  writeFileSync(head, whole.subarray(0, notesEnd));
  const h = await unwindCoreJson([head]);
  t.equal(h.json.threads.length, 5, 'headers only: the threads are still listed');
  t.match(h.r.stderr, /malformed or truncated/, 'headers only: warned');
  t.equal(h.r.code, 8, 'headers only: exit 8 (truncated)');

  // --maps with no mapping in it: nothing can be registered, the threads are still listed.
  const nomaps = await unwindCoreJson([core, '--maps', join(root, 'package.json')]);
  t.equal(nomaps.r.code, 0, 'maps that are not maps: exit 0');
  t.match(nomaps.r.stderr, /malformed or truncated core/, 'maps that are not maps: warned');
  t.equal(nomaps.json.threads.length, 5, 'maps that are not maps: the threads, frame 0 at least');
});

// ---- arm64 and mips32: qemu-user guest cores ------------------------------------------------------

/**
 * A guest core against gdb: the crashing thread pc for pc, with the how of each frame and the
 * stop. qemu records the other threads where it last saw them, at a moment that varies from run
 * to run, maybe in a system-call stub without CFI (stepped through the link register): their
 * stacks pc for pc too, or with `othersFrame0`, only frame 0 (the registers of the note), for an
 * arch whose glibc lacks CFI for much of its code (mipsel: gdb goes on by prologue analysis).
 */
function compareGuest(t: Test, label: string, dw: CoreJson, gdb: GdbFrames, othersFrame0: boolean): void {
  const dtids = dw.threads.map((x) => x.tid).sort((a, b) => a - b);
  const gtids = Object.keys(gdb.threads)
    .map(Number)
    .sort((a, b) => a - b);
  t.same(dtids, gtids, `${label}: the same threads`);
  for (const [i, th] of dw.threads.entries()) {
    const l = `${label} tid ${th.tid}${i === 0 ? ' (crashed)' : ''}`;
    const g = gdb.threads[String(th.tid)];
    if (!g) continue;
    if (i > 0 && othersFrame0) {
      const pc0 = (pc: string | undefined): bigint | null => (pc === undefined ? null : BigInt(pc));
      t.equal(pc0(th.frames[0]?.pc), pc0(g[0]?.pc), `${l}: frame 0 as gdb's (the note's registers)`);
      continue;
    }
    const c = checkThread(l, th, g, gdb.errors[String(th.tid)]);
    if (c.equal) t.pass(`${l}: ${c.frames} frames, the same as gdb`);
    else {
      t.comment(`${l}:\n${c.mismatch!.table}`);
      t.fail(`${l}: frames differ from gdb's at #${c.mismatch!.index} (dwunw ${c.frames} frames, stop ${th.stop}; gdb ${g.length})`);
    }
    if (i > 0) continue;
    t.same(c.hows, c.wantHows, `${l}: how of each frame (initial, cfi, signal after a trampoline)`);
    if (c.stopOk !== null) t.ok(c.stopOk, `${l}: stop OK (gdb reached the end of the stack; dwunw: ${th.stop})`);
  }
}

interface Cross {
  arch: string;
  id: number;
  cc: string;
  cflags: string[];
  qemu: string;
  qemuArgs: string[];
  sysroot: string;
  /** Scenarios whose static core is compared with gdb-multiarch. */
  oracle: string[];
  /** Other threads than the crashing one: compare frame 0 only (see compareGuest). */
  othersFrame0?: boolean;
  /** Names the chain shows per scenario, where they differ from SCENARIOS'. */
  chain?: Record<string, string[]>;
}

const CROSS: Cross[] = [
  {
    arch: 'arm64',
    id: DWUNW_ARCH_ARM64,
    cc: 'aarch64-linux-gnu-gcc',
    cflags: [],
    qemu: 'qemu-aarch64',
    qemuArgs: ['-cpu', 'cortex-a57'],
    sysroot: '/usr/aarch64-linux-gnu',
    oracle: ['segv', 'abort', 'handler', 'thread_segv'],
  },
  {
    arch: 'mips32',
    id: DWUNW_ARCH_MIPS32,
    cc: 'mipsel-linux-gnu-gcc',
    // mipsel gcc does not emit .eh_frame for C by default
    cflags: ['-fasynchronous-unwind-tables'],
    qemu: 'qemu-mipsel',
    qemuArgs: [],
    sysroot: '/usr/mipsel-linux-gnu',
    // mipsel glibc's abort has no CFI (notes/multiarch.md): dwunw stops there, gdb guesses on
    oracle: ['segv', 'handler', 'thread_segv'],
    othersFrame0: true,
    chain: { abort: ['abort'] },
  },
];

function backendPresent(id: number): boolean {
  try {
    return Dwunw.arch(id) !== null;
  } catch {
    return false;
  }
}

for (const x of CROSS) {
  t.test(`${x.arch} qemu guest cores`, async (t) => {
    if (!backendPresent(x.id)) {
      skip(t, `${x.arch} backend missing (dwunw_arch_get(${x.arch}) is NULL in this build)`);
      return;
    }
    const tools = [x.cc, x.qemu, 'gdb-multiarch'].filter((c) => !has(c));
    if (tools.length || !existsSync(x.sysroot)) {
      skip(t, `missing: ${[...tools, ...(existsSync(x.sysroot) ? [] : [x.sysroot])].join(', ')} (scripts/ensure-deps)`);
      return;
    }
    const dir = join(work, x.arch);
    mkdirSync(dir);
    for (const link of links) {
      const out = join(dir, `crash-${link}`);
      const b = await run(x.cc, ['-O2', '-fomit-frame-pointer', '-g', '-pthread', ...x.cflags, ...(link === 'static' ? ['-static'] : []), '-o', out, crashSrc]);
      if (b.code !== 0) {
        t.fail(`${x.cc} ${link}: ${b.stderr}`);
        return;
      }
    }
    const cases = links.flatMap((link) => Object.keys(SCENARIOS).map((scenario) => ({ link, scenario })));
    const results = pool(
      cases.map(({ link, scenario }) => async () => {
        const cdir = join(dir, `${link}-${scenario}`);
        mkdirSync(cdir);
        const prog = join(dir, `crash-${link}`);
        const c = await crash(cdir, [x.qemu, ...x.qemuArgs, '-s', '64k', '-L', x.sysroot, prog, scenario, 'maps']);
        const name = readdirSync(cdir).find((f) => f.startsWith('qemu_') && f.endsWith('.core'));
        if (!name) throw new Error(`${x.qemu} ${prog} ${scenario}: no qemu core (exit ${c.code ?? c.signal}): ${c.stderr}`);
        // qemu itself also dumps a host core: not ours.
        for (const f of readdirSync(cdir)) if (f.startsWith('core')) rmSync(join(cdir, f), { force: true });
        if (coreMode.mode === 'dir') rmSync(join(coreMode.dir, `core.${c.pid}`), { force: true });
        const core = join(cdir, name);
        const maps = join(cdir, 'maps');
        const dw = await unwindCoreJson([core, '--maps', maps]);
        const gdb = link === 'static' && x.oracle.includes(scenario) ? await gdbCore(prog, core, true) : null;
        const bare = await dwunw(['unwind-core', core]);
        return { prog, core, pid: Number(/_(\d+)\.core$/.exec(name)![1]), dw, gdb, bare };
      }),
      2,
    );
    for (const [i, { link, scenario }] of cases.entries()) {
      await t.test(`${scenario} ${link}`, async (t) => {
        const r = await results[i]!;
        const label = `${x.arch} ${scenario} ${link}`;
        const sc = { ...SCENARIOS[scenario]!, chain: x.chain?.[scenario] ?? SCENARIOS[scenario]!.chain };
        t.equal(r.dw.r.code, 0, `${label}: exit 0`, { stderr: r.dw.r.stderr });
        t.equal(r.dw.r.stderr, '', `${label}: no warning with --maps`);
        if (r.gdb) compareGuest(t, label, r.dw.json, r.gdb, x.othersFrame0 ?? false);
        // qemu names the process after the guest program, cut to 15 characters as a comm is.
        checkCoreJson(t, label, r.dw.json, sc, `crash-${link}`.slice(0, 15), r.pid);
        t.match(r.bare.stderr, /no NT_FILE note \(a qemu guest core\?\) and no --maps/, `${label}: without --maps, a warning`);
      });
    }
  });
}
