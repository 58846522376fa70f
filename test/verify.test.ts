// `dwunw verify --arch all --json`: the fixtures of x86_64 (gdb), arm64 and mips32 (qemu-user's
// gdbstub with gdb-multiarch) stopped at known places, each stop unwound by dwunw and compared
// with gdb pc for pc (lib/verify.ts). Asserted here:
//   - the command passes (exit 0, ok), with no session error and no mismatch;
//   - every fixture variant ran, and every stop it promises was reached;
//   - the stacks are not vacuous: gdb's frames show the chains the fixture builds (a signal
//     trampoline before the interrupted function, glibc's qsort under the comparator, main);
//   - no stack stops at code without CFI ("cfi-absent"): mips32 glibc's abort() (no FDE) and the
//     mips fixtures built without unwind tables are walked by the prologue analyser (frames
//     marked "prologue"), equal to gdb's frames; where gdb's own prologue analysis gives up
//     ("gdb-short", the fixtures without unwind tables) every frame it has is dwunw's;
//   - the pointer-authentication variants ran signed (qemu -cpu max) against an unsigned oracle.
import t from 'tap';
import type { StackResult, VerifyReport } from '../lib/verify.js';
import { libsOutside } from '../lib/verify-run.js';
import { dwunw, type Run } from './helpers.js';


const runVerify = (): Promise<Run> => dwunw(['verify', '--arch', 'all', '--json'], { timeoutMs: 600_000 });

const variants: Record<string, string[]> = {
  x86_64: ['pie', 'pie-g', 'static', 'static-g'],
  arm64: ['pie', 'pie-g', 'pie-pac', 'pie-nocfi', 'static', 'static-g', 'static-pac', 'static-nocfi'],
  mips32: ['pie', 'pie-g', 'pie-async', 'static', 'static-g', 'static-async'],
};
const runStops = [
  'leaf_entry', 'qsort_cmp_after_call', 'bsearch_entry', 'raise_entry', 'bsearch_cmp_entry', 'handler_entry',
  'handler_leaf', 'sigtramp', 'rt_handler_entry', 'rt_handler_leaf', 'rt_sigtramp', 'async_leaf', 'recurse_leaf',
  'big_leaf', 'alloca_leaf',
];
/** glibc's allocator under glibc's callers: mips32 and arm64 only (mipsel's has no CFI). */
const mallocStops = ['strdup_entry', 'malloc_from_strdup', 'getdelim_entry', 'malloc_from_getline'];
const stepStops = [
  'steps_qsort_cmp', 'steps_bsearch', 'steps_handler', 'steps_rt_handler', 'steps_raise_mid', 'steps_recurse',
  'steps_big', 'steps_alloca',
];
const stubStops: Record<string, string[]> = { x86_64: ['plt_entry'], arm64: ['plt_entry', 'plt_lazy_entry', 'plt0_after_stp'], mips32: ['stub_entry', 'stub_t7'] };
/** Names gdb must show in a stop's stack (the chain the fixture builds). */
const chains: Record<string, RegExp> = {
  leaf_entry: /zoo_leaf zoo_qsort_cmp .*qsort.* zoo_qsort zoo_run main/,
  handler_leaf: /zoo_sig_leaf zoo_handler <sigtramp> .*(raise|gsignal).* zoo_raise_leaf zoo_raise_mid zoo_signal zoo_run main/,
  rt_handler_leaf: /zoo_sig_leaf zoo_rt_handler <sigtramp> .*(raise|gsignal).* zoo_rt_signal zoo_run main/,
  sigtramp: /^<sigtramp> .*(raise|gsignal).* zoo_signal zoo_run main/,
  async_leaf: /zoo_async_leaf zoo_async_handler <sigtramp> zoo_spin_at_entry zoo_async zoo_run main/,
  recurse_leaf: /zoo_leaf( zoo_recurse){25} zoo_run main/,
  malloc_from_strdup: /malloc .*strdup zoo_strdup zoo_run main/,
  malloc_from_getline: /malloc .*getdelim zoo_getline zoo_run main/,
  big_leaf: /^zoo_leaf zoo_big zoo_run main/,
  alloca_leaf: /^zoo_leaf zoo_alloca zoo_run main/,
  segv: /^zoo_segv zoo_segv_mid zoo_run main/,
  abort: /abort zoo_abort_mid zoo_run main/,
  core_segv: /^zoo_segv zoo_segv_mid zoo_run main/,
  core_abort: /abort zoo_abort_mid zoo_run main/,
};

const names = (s: StackResult): string => s.expected.map((f) => (f.type === 'sigtramp' ? '<sigtramp>' : (f.name ?? '??'))).join(' ');

t.test('dwunw verify --arch all', async (t) => {
  const r = await runVerify();
  let report: VerifyReport;
  try {
    report = JSON.parse(r.stdout) as VerifyReport;
  } catch {
    t.fail(`no JSON report: exit ${r.status}: ${r.stderr.slice(-2000)}${r.stdout.slice(0, 500)}`);
    return;
  }
  t.comment(`verify: ${report.totals.fixtures} fixtures, ${report.totals.stops} stops, ${report.totals.match} match, ${report.totals['cfi-absent']} cfi-absent, ${report.totals['gdb-short']} gdb-short, ${report.totals.mismatch} mismatch, ${report.totals.prologueFrames} frames by prologue analysis, ${(r.ms / 1000).toFixed(1)} s`);
  t.same(report.errors, [], 'no error outside the fixtures');
  for (const fx of report.fixtures) t.same(fx.errors, [], `${fx.arch} ${fx.variant}: no session error`);
  t.equal(report.totals.mismatch, 0, 'no mismatching stack');
  t.ok(report.totals.prologueFrames > 0, `frames by prologue analysis counted (${report.totals.prologueFrames})`);
  t.ok(report.ok, 'report ok');
  t.equal(r.status, 0, 'exit status 0');
  // Its time is reported above, not asserted: it depends on the machine and on what runs beside it.

  for (const [arch, vs] of Object.entries(variants)) {
    for (const v of vs) {
      const fx = report.fixtures.find((f) => f.arch === arch && f.variant === v);
      if (!fx) {
        t.fail(`${arch} ${v}: not run`);
        continue;
      }
      // qemu guests: also their cores at the segv and abort signals
      const cores = arch === 'x86_64' ? [] : ['core_segv', 'core_abort'];
      const want = [...runStops, ...(arch === 'x86_64' ? [] : mallocStops), ...(v.endsWith('-nocfi') ? [] : stepStops),
        ...(v.endsWith('-nocfi') || arch === 'x86_64' ? [] : ['steps_malloc']), 'segv', 'abort', ...cores, ...(v.startsWith('pie') ? stubStops[arch]! : [])].sort();
      t.same(fx.stops.map((s) => s.name).sort(), want, `${arch} ${v}: every stop reached`);
      for (const s of fx.stops) {
        const mis = s.stacks.filter((x) => x.status === 'mismatch');
        if (mis.length) t.fail(`${arch} ${v} ${s.name}: ${mis.length} mismatching stack(s)`);
        if (s.kind === 'steps') t.ok(s.steps >= 3, `${arch} ${v} ${s.name}: ${s.steps} steps`);
        // (gdb's own stacks of the mips fixtures without unwind tables are partial: its prologue
        // analysis does not get through the fixture's code either)
        const chain = arch === 'mips32' && (v === 'pie' || v === 'static') ? undefined : chains[s.name];
        if (chain && s.stacks[0]) t.match(names(s.stacks[0]), chain, `${arch} ${v} ${s.name}: gdb's stack is the fixture's chain`);
      }
      const absent = fx.stops.flatMap((s) => s.stacks.filter((x) => x.status === 'cfi-absent'));
      t.equal(absent.length, 0, `${arch} ${v}: no stack stops at code without CFI`);
      const short = fx.stops.flatMap((s) => s.stacks.filter((x) => x.status === 'gdb-short').map((x) => ({ s, x })));
      if (arch === 'mips32') {
        // glibc's abort() has no FDE in the mipsel libc: its prologue is decoded, to main
        for (const name of ['abort', 'core_abort']) {
          const ab = fx.stops.find((s) => s.name === name)?.stacks[0];
          const syms = (ab?.actual ?? []).map((f) => f.symbol ?? '??').join(' ');
          t.match(syms, /abort zoo_abort_mid zoo_run main/, `${arch} ${v} ${name}: dwunw's stack goes through abort() to main (${syms})`);
          t.ok(ab?.actual.some((f) => f.how === 'prologue'), `${arch} ${v} ${name}: frames found by the prologue analyser`);
          t.equal(ab?.dwStop, 'OK', `${arch} ${v} ${name}: dwunw ends at the outermost frame`);
          if (v !== 'pie' && v !== 'static') t.equal(ab?.status, 'match', `${arch} ${v} ${name}: equal to gdb's, frame for frame`);
        }
      }
      if (arch === 'mips32' && (v === 'pie' || v === 'static')) {
        // built without unwind tables: gdb's own prologue analysis gives up in the fixture's
        // code ("frame did not save the PC"); every frame it has is dwunw's
        t.ok(short.length > 10, `${arch} ${v}: gdb's stacks end early (${short.length}), dwunw's go on`);
        t.ok(short.every(({ x }) => x.gdbError !== null && x.dwStop === 'OK'), `${arch} ${v}: each with gdb's reason, dwunw to the outermost frame`);
      } else {
        t.same(short.map(({ s }) => s.name), [], `${arch} ${v}: gdb's stacks are complete`);
      }
      if (v.endsWith('-nocfi')) {
        // the program's code has no CFI: its frames come from the prologue analyser, checked
        // against gdb on the twin built with CFI (the same .text at the same address)
        t.match(fx.oracleFile ?? '', new RegExp(`verify_zoo-${v.replace('-nocfi', '')}$`), `${arch} ${v}: oracle from the twin with CFI`);
        const pro = fx.stops.flatMap((s) => s.stacks).filter((x) => x.actual.some((f) => f.how === 'prologue'));
        t.ok(pro.length > 10, `${arch} ${v}: stacks through frames of the prologue analyser (${pro.length})`);
      }
      if (v.endsWith('-pac')) {
        t.equal(fx.cpu, 'max,sve=off', `${arch} ${v}: run with pointer authentication`);
        t.equal(fx.oracleCpu, 'cortex-a57', `${arch} ${v}: oracle from the twin run`);
      }
    }
  }
});

// A guest that loaded a library from outside gdb's sysroot (a host-installed libc6:arm64 in
// ld.so.cache) would give gdb another file's CFI: the session fails with that path instead.
t.test('libraries outside the sysroot are named', async (t) => {
  const maps = [
    '5500000000-5500001000 r-xp 00000000 fe:00 1 /work/fixtures/arm64/build/verify_zoo-pie',
    '5502880000-5502a07000 r-xp 00000000 fe:00 2 /usr/aarch64-linux-gnu/lib/libc.so.6',
    '550283c000-550285c000 r-xp 00000000 fe:00 3 /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1',
    '5502900000-5502a0c000 r-xp 00000000 fe:00 4 /usr/lib/aarch64-linux-gnu/libm.so.6',
    '5502a0c000-5502a1c000 ---p 0018c000 fe:00 4 /usr/lib/aarch64-linux-gnu/libm.so.6',
    '7fff000000-7fff100000 rw-p 00000000 00:00 0 [stack]',
  ].join('\n');
  t.same(libsOutside(maps, '/usr/aarch64-linux-gnu'), ['/usr/lib/aarch64-linux-gnu/libm.so.6']);
  t.same(libsOutside(maps, '/usr/aarch64-linux-gnu/'), ['/usr/lib/aarch64-linux-gnu/libm.so.6'], 'a trailing / on the sysroot');
  t.same(libsOutside(maps.split('\n').filter((l) => !l.includes('libm')).join('\n'), '/usr/aarch64-linux-gnu'), []);
});
