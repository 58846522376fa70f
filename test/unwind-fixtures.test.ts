// The unwinder against gdb on the unwind_zoo fixtures (fixtures/x86_64/unwind_zoo.c,
// unwind_cxx.cc; built by `make -C fixtures` as unwind_zoo-pie and unwind_zoo-static):
//   live      every scenario x {pie, static}: start it, wait for "ready SCENARIO" and for every
//             thread to block, `dwunw unwind-pid PID --json`, then gdb -p PID with
//             test/oracle/gdb_frames.py; every thread's stack pc for pc, the how of each frame
//             and stop OK; then kill it.
//   snapshot  the fixture under gdb (test/oracle/gdb_snapshot.py) with breakpoints on the CFI
//             cases worth a stop (a function's first instruction, a call site mid-function, the
//             signal handler and the sigreturn trampoline, the PLT stub and lazy binding's
//             _dl_runtime_resolve/_dl_fixup, rbp-based alloca/VLA frames, DW_CFA_register,
//             libgcc's unwinder and the C++ personality routine, the vDSO), and every instruction
//             of some functions (`steps`: prologues, epilogues); each stop's snapshot through
//             `dwunw unwind-snapshot FILE --json` against gdb's frames of the same stop.
//   recursion the recursion scenario has >= 200 frames, equal to gdb's.
// On a mismatch both stacks are printed side by side, and a summary lists one line per
// mismatch at the end. gdb is required (scripts/ensure-deps installs it).
import { mkdtempSync, rmSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { pool, root, run } from './helpers.js';
import {
  type DwProcess,
  type GdbFrames,
  type Mismatch,
  callSite,
  compareProcess,
  compareSteps,
  disassemble,
  dwunwJson,
  gdbFrames,
  gdbPrefix,
  killAll,
  mismatchSummary,
  oracleDir,
  pltEntries,
  sectionRange,
  startTarget,
  symbols,
  waitBlocked,
} from './oracle/harness.js';

const fixdir = join(root, 'fixtures', 'x86_64', 'build');
const links = ['pie', 'static'] as const;
const scenarios = [
  'qsort',
  'bsearch',
  'phdr',
  'backtrace',
  'signal',
  'sigaltstack',
  'async_signal',
  'recursion',
  'threads',
  'alloca',
  'cfi_ops',
  'cxx_dtor',
  'cxx_terminate',
  'cxx_catch',
];
// What each scenario's stacks must show (a frame name gdb gives, per thread that has it), so a
// fixture that stopped building the chain it promises fails here rather than passing vacuously.
const expectNames: Record<string, string[]> = {
  qsort: ['zoo_qsort_cmp', 'msort_with_tmp', 'zoo_qsort', 'main'],
  bsearch: ['zoo_bsearch_cmp', 'bsearch', 'main'],
  phdr: ['zoo_phdr_cb', 'dl_iterate_phdr', 'main'],
  backtrace: ['zoo_backtrace_cb', '_Unwind_Backtrace', 'main'],
  signal: ['zoo_handler', '<sigtramp>', 'raise', 'zoo_signal', 'main'],
  sigaltstack: ['zoo_handler', '<sigtramp>', 'raise', 'zoo_sigaltstack', 'main'],
  async_signal: ['zoo_async_handler', '<sigtramp>', 'zoo_spin_at_entry', 'zoo_async_signal', 'main'],
  recursion: ['zoo_recurse', 'main'],
  threads: ['zoo_threads', 'zoo_qsort_cmp', 'zoo_phdr_cb', 'zoo_bsearch_cmp', 'zoo_thread_sleep', 'zoo_thread_read', 'start_thread'],
  alloca: ['zoo_vla', 'zoo_alloca', 'main'],
  cfi_ops: ['zoo_cfi_cb3', 'cfi_ops_remember', 'cfi_ops_cfa_rbx', 'cfi_ops_expr', 'main'],
  cxx_dtor: ['cxx_in_dtor', 'cxx_throw_through', 'cxx_dtor', 'main'],
  cxx_terminate: ['cxx_terminate_handler', '__gxx_personality_v0', '_Unwind_RaiseException', '__cxa_throw', 'cxx_noexcept_caller', 'main'],
  cxx_catch: ['cxx_in_catch', 'cxx_catch', 'main'],
};
const CONCURRENCY = 2;

const work = mkdtempSync(join(tmpdir(), 'dwunw-unwind-'));
const mismatches: Mismatch[] = [];
const timings: string[] = [];
t.teardown(() => {
  killAll();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) t.comment(`timings: ${timings.join(', ')}`);
});

const nameSeq = (g: GdbFrames): string =>
  Object.values(g.threads)
    .flat()
    .map((f) => (f.type === 'sigtramp' ? '<sigtramp>' : (f.name ?? '??')))
    .join(' ');

const missing = [
  '/usr/bin/gdb',
  '/usr/bin/objdump',
  '/usr/bin/nm',
  ...links.map((l) => join(fixdir, `unwind_zoo-${l}`)),
  ...['gdb_frames.py', 'gdb_snapshot.py'].map((f) => join(oracleDir, f)),
].filter((p) => !existsSync(p));
if (missing.length) {
  t.fail(`missing: ${missing.join(', ')} (make -C fixtures; scripts/ensure-deps installs gdb)`);
} else {
  main();
}

function main(): void {
  // ---- live: unwind-pid vs gdb -p ----
  interface LiveResult {
    dw: DwProcess;
    gdb: GdbFrames;
    ms: { dwunw: number; gdb: number };
  }
  const liveCases = links.flatMap((link) => scenarios.map((scenario) => ({ link, scenario })));
  const t0 = Date.now();
  const live = pool(
    liveCases.map(({ link, scenario }) => async (): Promise<LiveResult> => {
      const target = await startTarget(join(fixdir, `unwind_zoo-${link}`), [scenario], { ready: `ready ${scenario}` });
      try {
        await waitBlocked(target.pid, { threads: scenario === 'threads' ? 7 : 1 });
        const d = await dwunwJson(['unwind-pid', String(target.pid)]);
        const g = await gdbFrames(target.pid);
        return { dw: d.result, gdb: g.result, ms: { dwunw: d.run.ms, gdb: g.run.ms } };
      } finally {
        await target.kill();
      }
    }),
    CONCURRENCY,
  );

  t.test('live: unwind-pid against gdb -p', async (t) => {
    for (const [i, { link, scenario }] of liveCases.entries()) {
      await t.test(`${scenario} ${link}`, async (t) => {
        const r = await live[i]!;
        const label = `live ${scenario} ${link}`;
        mismatches.push(...compareProcess(t, label, r.dw, r.gdb));
        const names = nameSeq(r.gdb);
        for (const n of expectNames[scenario]!) t.ok(names.includes(n), `${label}: gdb's stacks show ${n}`);
        if (scenario === 'recursion') {
          const n = r.dw.threads[0]?.frames.length ?? 0;
          t.ok(n >= 200, `${label}: ${n} frames (>= 200)`);
        }
      });
    }
    timings.push(`live ${liveCases.length} runs ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });

  // ---- snapshots: gdb at breakpoints, unwind-snapshot vs gdb's frames ----
  t.test('snapshot: unwind-snapshot against gdb at breakpoints', async (t) => {
    const t1 = Date.now();
    const sessions = (await Promise.all(links.map((l) => snapshotSessions(l)))).flat();
    const results = pool(sessions.map((s) => () => runSession(s)), CONCURRENCY);
    for (const [i, s] of sessions.entries()) {
      await t.test(`${s.link} ${s.name}`, async (t) => {
        const r = await results[i]!;
        t.same(r.index.errors, [], `${s.link} ${s.name}: no gdb script errors`);
        t.same(r.index.missing, [], `${s.link} ${s.name}: every breakpoint was reached`);
        t.same(
          r.index.snapshots.map((x) => x.name).sort(),
          s.breakpoints.map((b) => b.name).sort(),
          `${s.link} ${s.name}: one snapshot per breakpoint`,
        );
        for (const snap of r.snaps) {
          const label = `snapshot ${s.link} ${snap.name}`;
          if (snap.error) {
            t.fail(`${label}: ${snap.error}`);
            continue;
          }
          const bp = s.breakpoints.find((b) => b.name === snap.name);
          if (bp?.steps) {
            const n = Object.keys(snap.gdb.threads).length;
            t.ok(n >= 3, `${label}: ${n} steps`);
            mismatches.push(...compareSteps(t, label, snap.dw!, snap.gdb));
          } else {
            // not vacuous: gdb's stack reaches main or a thread's start
            t.match(nameSeq(snap.gdb), /\b(main|start_thread)\b/, `${label}: gdb's stack reaches main or start_thread`);
            mismatches.push(...compareProcess(t, label, snap.dw!, snap.gdb));
          }
        }
      });
    }
    timings.push(`snapshot ${sessions.length} gdb sessions ${((Date.now() - t1) / 1000).toFixed(1)} s`);
  });

  t.test('summary', async (t) => {
    if (mismatches.length) t.comment(`mismatches (${mismatches.length} stacks):\n${mismatchSummary(mismatches)}`);
    // the file's verdict in one line: the stacks that differ from gdb's, by label (each also failed where compared)
    t.same(mismatches.map((m) => `${m.label} #${m.index}`), [], 'no stack of this file differs from gdb\'s');
  });
}

// ---- snapshot sessions ------------------------------------------------------------------------

interface Bp {
  name: string;
  spec?: string;
  module_addr?: string;
  hit?: number;
  after?: string;
  steps?: { enter?: number; max?: number };
}
interface Session {
  name: string;
  link: string;
  args: string[];
  breakpoints: Bp[];
}
interface Index {
  snapshots: Array<{ name: string; tid: number; pc: string; snapshot: string; frames: string }>;
  missing: string[];
  errors: string[];
}

const hex = (a: bigint): string => `0x${a.toString(16)}`;

/** The breakpoints of each gdb session for one link mode (addresses from nm and objdump). */
async function snapshotSessions(link: string): Promise<Session[]> {
  const file = join(fixdir, `unwind_zoo-${link}`);
  const syms = await symbols(file);
  const at = (sym: string, off = 0n): string => {
    const a = syms.get(sym);
    if (a === undefined) throw new Error(`${file}: no symbol ${sym}`);
    return hex(a + off);
  };
  const call = async (sym: string, target: RegExp): Promise<string> => hex(await callSite(file, sym, target));
  const park = /<zoo_arrive_and_park>/;
  const plt = await pltEntries(file);
  const first = 'qsort_cmp_entry'; // reached in main: shared libraries are loaded by then

  const bps: Bp[] = [
    // a function's first instruction, called from glibc (CFA rsp+8, return address at the top)
    { name: 'qsort_cmp_entry', module_addr: at('zoo_qsort_cmp') },
    { name: 'bsearch_cmp_entry', module_addr: at('zoo_bsearch_cmp') },
    // mid-function, after the prologue (at the call instruction)
    { name: 'phdr_cb_call', module_addr: await call('zoo_phdr_cb', park) },
    // called from libgcc's _Unwind_Backtrace
    { name: 'backtrace_cb_entry', module_addr: at('zoo_backtrace_cb') },
    // the signal handler (first hit: the "signal" scenario, on the main stack)
    { name: 'handler_entry', module_addr: at('zoo_handler') },
    { name: 'handler_call', module_addr: await call('zoo_handler', park) },
    // the sigreturn trampoline as frame 0 (the handler has returned into it)
    { name: 'restore_rt', spec: '*__restore_rt', after: 'handler_call' },
    // glibc functions' first instructions
    { name: 'raise_entry', spec: '*raise', after: first },
    { name: 'dl_iterate_phdr_entry', spec: '*dl_iterate_phdr', after: first },
    // 240 frames deep
    { name: 'recursion_bottom', module_addr: await call('zoo_recurse', park) },
    // rbp-based CFA (VLA, alloca)
    { name: 'vla_entry', module_addr: at('zoo_vla') },
    { name: 'vla_call', module_addr: await call('zoo_vla', park) },
    { name: 'alloca_call', module_addr: await call('zoo_alloca', /<zoo_vla>/) },
    // cfi_ops.S: DW_CFA_register (rip in r11, rbx in rsi) in a leaf, and the call sites under a
    // CFA expression, a CFA on rbx and remember/restore_state
    { name: 'cfi_register', module_addr: at('cfi_ops_register', 5n) },
    { name: 'cfi_expr_call', module_addr: await call('cfi_ops_expr', /\*%r/) },
    { name: 'cfi_cfa_rbx_call', module_addr: await call('cfi_ops_cfa_rbx', /\*%r/) },
    { name: 'cfi_remember_call', module_addr: await call('cfi_ops_remember', /\*%r/) },
    // a thread's stack
    { name: 'thread_sleep_entry', module_addr: at('zoo_thread_sleep') },
    // C++: the throw, libgcc's unwinder and the personality routine, a landing pad's callee,
    // _Unwind_Resume from a landing pad, a catch handler's callee
    { name: 'cxa_throw_entry', spec: '*__cxa_throw', after: first },
    { name: 'raise_exception_entry', spec: '*_Unwind_RaiseException', after: first },
    { name: 'personality_entry', spec: '*__gxx_personality_v0', after: first },
    { name: 'dtor_entry', module_addr: at('_ZN12_GLOBAL__N_111cxx_in_dtorEv') },
    { name: 'catch_entry', module_addr: at('_ZN12_GLOBAL__N_112cxx_in_catchEi') },
    // the vDSO (clock_gettime): its first instruction, and after its prologue
    { name: 'vdso_entry', spec: '*__vdso_clock_gettime', after: first },
    { name: 'vdso_body', spec: '__vdso_clock_gettime', after: first },
  ];
  if (link === 'pie') {
    // Lazy binding (-z lazy): the first qsort call goes through its PLT stub (entry, push, jmp),
    // PLT0 (push, jmp) and _dl_runtime_resolve_* into _dl_fixup, whose caller's CFA is on rbx.
    const q = plt.entries.get('qsort@plt');
    if (q === undefined || plt.start === null) throw new Error(`${file}: no qsort@plt in .plt`);
    // _Unwind_Resume through its PLT stub (a bare *_Unwind_Resume would be glibc's own copy)
    const resume = plt.entries.get('_Unwind_Resume@plt');
    if (resume === undefined) throw new Error(`${file}: no _Unwind_Resume@plt in .plt`);
    bps.push(
      { name: 'unwind_resume_plt', module_addr: hex(resume), after: 'dtor_entry' },
      { name: 'plt_entry', module_addr: hex(q) },
      { name: 'plt_push', module_addr: hex(q + 6n) },
      { name: 'plt_jmp', module_addr: hex(q + 11n) },
      { name: 'plt0_push', module_addr: hex(plt.start) },
      { name: 'plt0_jmp', module_addr: hex(plt.start + 6n), after: 'plt_jmp' },
      { name: 'dl_fixup', spec: '_dl_fixup', after: 'plt0_jmp' },
    );
  } else {
    // static: the IRELATIVE PLT stub of an ifunc (memset, called from zoo_alloca)
    const range = await sectionRange(file, '.plt');
    const target = (await disassemble(file, 'zoo_alloca'))
      .map((x) => /^call\s+([0-9a-f]+)\s/.exec(x.text))
      .map((m) => (m ? BigInt(`0x${m[1]}`) : -1n))
      .find((a) => range !== null && a >= range[0] && a < range[1]);
    if (target === undefined) throw new Error(`${file}: no call through the PLT in zoo_alloca`);
    bps.push(
      { name: 'iplt_entry', module_addr: hex(target), after: first }, // first use: from libc
      { name: 'iplt_from_alloca', module_addr: hex(target), after: 'vla_call' }, // from zoo_alloca (rbp frame)
    );
    // libgcc_eh's _Unwind_Resume, called from the landing pad after the destructor
    bps.push({ name: 'unwind_resume_entry', spec: '*_Unwind_Resume', after: 'dtor_entry' });
  }
  // Every instruction of a function, from its entry until it returns (over calls): prologues,
  // epilogues, rbp-based frames, hand-written CFI, glibc and libgcc code, lazy binding.
  const steps = { max: 400 };
  // A function stepped over calls is not stepped into: a callee is stepped on a later call
  // (after: ...; `unwind_zoo run` runs vla before alloca and the cfi_ops chain four times).
  const stepBps: Bp[] = [
    { name: 'steps_qsort_cmp', module_addr: at('zoo_qsort_cmp'), steps },
    { name: 'steps_handler', module_addr: at('zoo_handler'), steps },
    { name: 'steps_recurse', module_addr: at('zoo_recurse'), steps },
    { name: 'steps_vla', module_addr: at('zoo_vla'), steps },
    { name: 'steps_alloca', module_addr: at('zoo_alloca'), steps, after: 'steps_vla' },
    { name: 'steps_cfi_register', module_addr: at('cfi_ops_register'), steps },
    { name: 'steps_cfi_remember', module_addr: at('cfi_ops_remember'), steps, after: 'steps_cfi_register' },
    { name: 'steps_cfi_cfa_rbx', module_addr: at('cfi_ops_cfa_rbx'), steps, after: 'steps_cfi_remember' },
    { name: 'steps_cfi_expr', module_addr: at('cfi_ops_expr'), steps, after: 'steps_cfi_cfa_rbx' },
    { name: 'steps_bsearch', spec: '*bsearch', after: 'steps_qsort_cmp', steps },
    { name: 'steps_dl_iterate_phdr', spec: '*dl_iterate_phdr', after: 'steps_qsort_cmp', steps },
    { name: 'steps_unwind_backtrace', spec: '*_Unwind_Backtrace', after: 'steps_qsort_cmp', steps },
    { name: 'steps_thread_main', module_addr: at('thread_main'), steps },
  ];
  if (link === 'pie') {
    // the next lazy call after _Unwind_Backtrace: PLT0's jmp into _dl_runtime_resolve_*, through
    // it (over _dl_fixup) until it jumps to the resolved function
    stepBps.push({ name: 'steps_dl_runtime_resolve', module_addr: hex(plt.start! + 6n), steps: { enter: 1, max: 400 }, after: 'steps_unwind_backtrace' });
  }
  return [
    { name: 'run', link, args: ['run'], breakpoints: bps },
    { name: 'steps', link, args: ['run'], breakpoints: stepBps },
    // the signal that hit the first instruction of zoo_spin_at_entry (never returns)
    { name: 'async_signal', link, args: ['async_signal'], breakpoints: [{ name: 'async_call', module_addr: await call('zoo_async_handler', park) }] },
    // the terminate handler, called from the personality routine in phase 2
    { name: 'cxx_terminate', link, args: ['cxx_terminate'], breakpoints: [{ name: 'terminate_handler', module_addr: at('_ZN12_GLOBAL__N_121cxx_terminate_handlerEv') }] },
  ];
}

interface SessionResult {
  index: Index;
  snaps: Array<{ name: string; dw?: DwProcess; gdb: GdbFrames; error?: string }>;
}

async function runSession(s: Session): Promise<SessionResult> {
  const out = join(work, `${s.link}-${s.name}`);
  const cfg = join(work, `${s.link}-${s.name}.json`);
  writeFileSync(cfg, JSON.stringify({ program: join(fixdir, `unwind_zoo-${s.link}`), args: s.args, out, breakpoints: s.breakpoints }));
  const r = await run('timeout', [...gdbPrefix(90), '-x', join(oracleDir, 'gdb_snapshot.py')], {
    env: { ...process.env, DWUNW_SNAPSHOT_CONFIG: cfg },
    timeoutMs: 100_000,
  });
  const indexFile = join(out, 'index.json');
  if (!existsSync(indexFile))
    throw new Error(`gdb ${s.link} ${s.name}: exit ${r.status ?? r.signal}, no index.json:\n${r.stderr.slice(-2000)}${r.stdout.slice(-2000)}`);
  const index = JSON.parse(readFileSync(indexFile, 'utf8')) as Index;
  const snaps = await Promise.all(
    pool(
      index.snapshots.map((x) => async () => {
        const gdb = JSON.parse(readFileSync(x.frames, 'utf8')) as GdbFrames;
        try {
          const d = await dwunwJson(['unwind-snapshot', x.snapshot]);
          return { name: x.name, dw: d.result, gdb };
        } catch (e) {
          return { name: x.name, gdb, error: (e as Error).message };
        }
      }),
      CONCURRENCY,
    ),
  );
  return { index, snaps };
}
