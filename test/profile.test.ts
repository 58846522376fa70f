// dwunw profile (bpf/profile/profile.c) on fixtures/x86_64/hot (-O2 -fomit-frame-pointer, six known
// chains, its own per-chain CPU time printed at exit): DWARF user stacks complete to _start /
// thread start for >= 99 % of the samples, each chain's share of the samples within 5 points of
// its measured share of the CPU time; frame-pointer mode reported beside it; and
// `perf record --call-graph dwarf` on the same workload as the peer oracle, chain by chain (the
// same frames from the chain's entry to its leaf, and its own shares against its run's split).
// --unwind=kernel (stacks walked in the BPF program, falling back to the snapshot when a walk
// stops short) on the same fixture: the same chains as dwarf mode and as perf, the fallback
// counted in the summary.
//
// Needs root, the kernel's BTF and BPF (and perf for the oracle): without them the checks are
// skipped with the reason, unless DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, hotReport, REQUIRE_BPF as REQUIRE, root, type Run, run as runProcess, skipOrFail } from './helpers.js';
import { type PrEntry, parseProfileJson } from '../lib/profile.js';

const profileBin = join(root, 'build', 'bpf', 'profile');
const hot = join(root, 'fixtures', 'x86_64', 'build', 'hot');

/** hot's chains: the function found in every stack of the chain, and its entry in hot's report. */
const CHAINS: Record<string, string> = {
  plain: 'chain_plain',
  qsort: 'chain_qsort',
  recurse: 'chain_recurse',
  lib: 'chain_lib',
  signal: 'chain_signal',
  thread: 'thread_main',
};

/** `cmd ARGS` to its end, with the test's own environment; killed after timeoutMs. */
const run = (cmd: string, args: string[], timeoutMs = 60_000): Promise<Run> => runProcess(cmd, args, { timeoutMs, env: process.env });

const cpuShares = (cpu: Record<string, number>): Record<string, number> => {
  const total = Object.keys(CHAINS).reduce((a, c) => a + (cpu[c] ?? 0), 0);
  return Object.fromEntries(Object.keys(CHAINS).map((c) => [c, (cpu[c] ?? 0) / total]));
};

/** A stack's names leaf first, and the part from the leaf up to the chain's marker. */
const names = (e: PrEntry): string[] => (e.user?.frames ?? []).map((f) => f.symbol ?? '?');
function chainOf(ns: string[]): string | null {
  for (const [c, m] of Object.entries(CHAINS)) if (ns.includes(m)) return c;
  return null;
}
const toMarker = (ns: string[], marker: string): string => ns.slice(0, ns.indexOf(marker) + 1).join(';');

/** Samples per chain, and per chain the most frequent leaf..marker frame list. */
function byChain(samples: { names: string[]; count: number }[]) {
  const counts: Record<string, number> = {};
  const paths: Record<string, Map<string, number>> = {};
  let total = 0;
  for (const s of samples) {
    total += s.count;
    const c = chainOf(s.names);
    if (!c) continue;
    counts[c] = (counts[c] ?? 0) + s.count;
    const p = toMarker(s.names, CHAINS[c]!);
    (paths[c] ??= new Map()).set(p, (paths[c]!.get(p) ?? 0) + s.count);
  }
  const top = Object.fromEntries(Object.entries(paths).map(([c, m]) => [c, [...m].sort((a, b) => b[1] - a[1])[0]![0]]));
  return { counts, total, top, paths };
}

/*
 * Frame lists equal up to naming: perf names glibc functions by their internal aliases
 * (__GI___qsort_r for qsort_r), keeps or drops compiler suffixes (.part.0), and names
 * __restore_rt [unknown] (that name only: [unknown] matches nothing else); glibc's merge sort recurses to a data-dependent depth (runs of
 * msort_with_tmp are compared once).
 */
function sameFrames(a: string, b: string): boolean {
  const norm = (p: string): string[] =>
    p
      .split(';')
      .map((n) => n.replace(/^__GI_+/, '').replace(/\.(part|isra|constprop|cold)\.\d+$/, ''))
      .filter((n, i, v) => !(n.startsWith('msort_with_tmp') && v[i - 1]?.startsWith('msort_with_tmp')));
  const x = norm(a);
  const y = norm(b);
  const restorer = (m: string, n: string): boolean => m === '[unknown]' && n === '__restore_rt';
  return x.length === y.length && x.every((n, i) => n === y[i] || restorer(n, y[i]!) || restorer(y[i]!, n));
}

/** The share of FROM's samples on a path TO also has (sameFrames), and FROM's paths TO lacks. */
function shared(from: Map<string, number>, to: Map<string, number>): { share: number; missing: string[] } {
  let n = 0;
  let hit = 0;
  const missing: string[] = [];
  for (const [p, k] of from) {
    n += k;
    if ([...to.keys()].some((q) => sameFrames(p, q))) hit += k;
    else missing.push(`${k} ${p}`);
  }
  return { share: n ? hit / n : 0, missing: missing.slice(0, 10) };
}
/** Paths of a chain that perf and dwunw must share, by samples (perf's own stacks are >= 95 % complete). */
const PATH_SHARE = 0.9;
/** --unwind=kernel: the share of walker events walked in the kernel (measured: see the commit). */
const KERNEL_SHARE = 0.9;

const unavailable = (): string | null =>
  bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[profileBin, 'make bpf'], [hot, 'make fixtures']]);

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'profile tests skipped');
} else {
  let dwarfTop: Record<string, string> = {};
  let kernelTop: Record<string, string> = {};
  // each run's paths per chain, once that run has been made (null: not run, nothing to compare)
  let dwarfPaths: Record<string, Map<string, number>> | null = null;
  let kernelPaths: Record<string, Map<string, number>> | null = null;

  t.test('dwarf: complete stacks, chain shares match the measured CPU split', async (tt) => {
    const r = await run(profileBin, ['-U', '-F', '999', '--unwind=dwarf', '--json', '--', hot, '8', '--cpu'], 180_000);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr}`);
    const rep = hotReport(r.stdout);
    if (!rep) return void tt.fail(`no report from hot in: ${r.stdout.slice(-500)}`);
    const out = parseProfileJson(r.stdout);
    tt.ok(out.summary, 'a summary line in the JSON');
    const mine = out.entries.filter((e) => e.pid === rep.pid);
    const total = mine.reduce((a, e) => a + e.count, 0);
    const complete = mine.filter((e) => e.user?.complete).reduce((a, e) => a + e.count, 0);
    tt.ok(total >= 300, `enough samples of hot (${total})`);
    tt.ok(complete / total >= 0.99, `>= 99 % complete to _start/thread start: ${complete}/${total}`);
    tt.equal(out.summary?.samples, out.entries.reduce((a, e) => a + e.count, 0), 'every sample counted in an entry (none dropped)');
    tt.match(r.stderr, /user stacks: \d+, \d+\.\d% complete to _start\/__libc_start_main\/thread start \(dwarf\)/, 'summary line');
    tt.match(r.stderr, /profile: self: CPU [\d.]+ s .* max RSS [\d.]+ MiB; \d+ processes, \d+ modules seen/, 'own CPU/RSS line');
    const bc = byChain(mine.map((e) => ({ names: names(e), count: e.count })));
    const cpu = cpuShares(rep.cpu_ns);
    for (const c of Object.keys(CHAINS)) {
      const share = (bc.counts[c] ?? 0) / total;
      tt.ok(Math.abs(share - cpu[c]!) <= 0.05, `${c}: ${(100 * share).toFixed(1)} % of samples vs ${(100 * cpu[c]!).toFixed(1)} % of CPU`);
    }
    // the chains' frames as hot builds them
    tt.match(bc.top.plain, /^spin;plain_leaf;plain_b;plain_a;chain_plain$/, 'plain chain');
    tt.match(bc.top.qsort, /^spin;cmp_work;(qsort_cmp;)?(msort_with_tmp[^;]*;)+qsort_r;chain_qsort$/, 'qsort callback through glibc');
    tt.equal(bc.top.recurse?.split(';').filter((n) => n === 'recurse').length, 26, 'recursion 26 frames deep');
    tt.match(bc.top.lib, /^hotlib_leaf;hotlib_work;chain_lib$/, 'shared library chain');
    tt.match(bc.top.signal, /^spin;signal_work;on_signal;__restore_rt;.*chain_signal$/, 'through the signal frame');
    tt.match(bc.top.thread, /^spin;thread_work;thread_main$/, 'second thread');
    const libMod = mine.find((e) => names(e).includes('hotlib_leaf'))?.user?.frames.find((f) => f.symbol === 'hotlib_leaf')?.module;
    tt.match(libMod ?? '', /libhot\.so$/, 'hotlib_leaf in libhot.so');
    dwarfTop = bc.top;
    dwarfPaths = bc.paths;
  });

  t.test('--unwind=kernel: the same complete stacks as dwarf mode, the fallback counted', async (tt) => {
    const r = await run(profileBin, ['-U', '-F', '999', '--unwind=kernel', '--json', '--', hot, '8', '--cpu'], 180_000);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr}`);
    const rep = hotReport(r.stdout);
    if (!rep) return void tt.fail(`no report from hot in: ${r.stdout.slice(-500)}`);
    const out = parseProfileJson(r.stdout);
    const mine = out.entries.filter((e) => e.pid === rep.pid);
    const total = mine.reduce((a, e) => a + e.count, 0);
    const complete = mine.filter((e) => e.user?.complete).reduce((a, e) => a + e.count, 0);
    tt.equal(out.summary?.unwind, 'kernel', 'summary says kernel');
    tt.ok(total >= 300, `enough samples of hot (${total})`);
    tt.ok(complete / total >= 0.99, `>= 99 % complete to _start/thread start: ${complete}/${total}`);
    tt.equal(out.summary?.samples, out.entries.reduce((a, e) => a + e.count, 0), 'every sample counted in an entry (none dropped)');
    const k = out.summary?.kernel_walk;
    if (!k) return void tt.fail('no kernel_walk in the summary');
    tt.equal(k.events, k.from_kernel + k.fallback, `every walker event from the walker or its snapshot (${k.from_kernel} + ${k.fallback})`);
    tt.equal(k.bad, 0, 'no malformed event');
    tt.equal(Object.values(k.by_status).reduce((a, b) => a + b, 0), k.events, 'stops by reason add up');
    // How many fall back depends on how soon the tables load after the exec (the first samples of
    // hot and of libhot.so): a bounded share, from measured runs (KERNEL_SHARE)
    tt.ok(k.from_kernel >= KERNEL_SHARE * k.events, `stacks walked in the kernel: ${k.from_kernel}/${k.events} (>= ${100 * KERNEL_SHARE} %; fallback ${k.fallback_pct} %, by status ${JSON.stringify(k.by_status)})`);
    tt.ok(k.table_bytes > 0 && k.table_bytes <= k.map_bytes, `tables ${k.table_bytes} B within ${k.map_bytes} B of maps`);
    tt.match(r.stderr, /\(kernel\); .*kernel walker: \d+ events, \d+\.\d% fell back to the snapshot/, 'summary line shows the fallback %');
    const bc = byChain(mine.map((e) => ({ names: names(e), count: e.count })));
    const cpu = cpuShares(rep.cpu_ns);
    for (const c of Object.keys(CHAINS)) {
      const share = (bc.counts[c] ?? 0) / total;
      tt.ok(Math.abs(share - cpu[c]!) <= 0.05, `${c}: ${(100 * share).toFixed(1)} % of samples vs ${(100 * cpu[c]!).toFixed(1)} % of CPU`);
      if (dwarfTop[c]) tt.ok(sameFrames(bc.top[c] ?? '', dwarfTop[c]!) && !bc.top[c]?.includes('?'), `${c}: the same frames as dwarf mode (kernel ${bc.top[c]}; dwarf ${dwarfTop[c]})`);
    }
    tt.match(bc.top.signal, /^spin;signal_work;on_signal;__restore_rt;.*chain_signal$/, 'through the signal frame');
    tt.equal(bc.top.recurse?.split(';').filter((n) => n === 'recurse').length, 26, 'recursion 26 frames deep');
    kernelTop = bc.top;
    kernelPaths = bc.paths;
  });

  t.test('fp mode: reported for comparison', async (tt) => {
    const r = await run(profileBin, ['-U', '-F', '999', '--unwind=fp', '--json', '--', hot, '4', '--cpu'], 180_000);
    tt.equal(r.status, 0, 'exit status 0');
    const rep = hotReport(r.stdout);
    if (!rep) return void tt.fail(`no report from hot in: ${r.stdout.slice(-500)}`);
    const out = parseProfileJson(r.stdout);
    const mine = out.entries.filter((e) => e.pid === rep.pid);
    const total = mine.reduce((a, e) => a + e.count, 0);
    const complete = mine.filter((e) => e.user?.complete).reduce((a, e) => a + e.count, 0);
    tt.equal(out.summary?.unwind, 'fp', 'summary says fp');
    // hot runs until it has had 4 s of CPU, at 999 Hz: an empty or near-empty report is a failure, not a comparison
    tt.ok(total >= 150, `enough samples of hot (${total})`);
    tt.equal(out.summary?.samples, out.entries.reduce((a, e) => a + e.count, 0), 'every sample counted in an entry (none dropped)');
    const withFrames = mine.filter((e) => (e.user?.frames.length ?? 0) > 0).reduce((a, e) => a + e.count, 0);
    tt.ok(withFrames >= 0.9 * total, `hot's samples carry a user stack, at least its pc (${withFrames} of ${total})`);
    tt.ok(mine.every((e) => !e.user || e.user.kind === 'fp' || e.user.kind === 'none'), 'frame-pointer stacks');
    tt.match(r.stderr, /complete to _start\/__libc_start_main\/thread start \(fp\)/, 'summary line names fp');
    tt.pass(`fp: ${complete}/${total} samples complete (${total ? ((100 * complete) / total).toFixed(1) : 0} %); dwarf >= 99 %`);
  });

  t.test('perf record --call-graph dwarf: the peer oracle, chain by chain', async (tt) => {
    const perf = await run('perf', ['--version']);
    if (perf.status !== 0) {
      if (REQUIRE) tt.fail('perf is not installed (linux-perf)');
      else tt.pass('perf not installed: skipped', { skip: 'no perf' });
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-perf-'));
    try {
      const data = join(dir, 'perf.data');
      const rec = await run('perf', ['record', '-q', '-F', '999', '--call-graph', 'dwarf,16384', '-o', data, '--', hot, '6', '--cpu'], 180_000);
      tt.equal(rec.status, 0, `perf record ran ${rec.stderr.slice(-300)}`);
      const rep = hotReport(rec.stdout);
      const sc = await run('perf', ['script', '--no-inline', '-i', data, '-F', 'pid,tid,ip,sym'], 120_000);
      tt.equal(sc.status, 0, 'perf script ran');
      const samples: { names: string[]; count: number }[] = [];
      for (const block of sc.stdout.split(/\n\s*\n/)) {
        const lines = block.split('\n').filter((l) => l.trim());
        if (!lines.length || !new RegExp(`^\\s*${rep?.pid}/`).test(lines[0]!)) continue;
        samples.push({ names: lines.slice(1).map((l) => l.trim().split(/\s+/)[1] ?? '?'), count: 1 });
      }
      const bc = byChain(samples);
      const complete = samples.filter((s) => ['_start', 'clone3', '__clone3'].includes(s.names[s.names.length - 1]!)).length;
      tt.ok(bc.total >= 200, `perf samples of hot: ${bc.total}`);
      tt.ok(complete / bc.total >= 0.95, `perf: ${complete}/${bc.total} complete`);
      const cpu = cpuShares(rep!.cpu_ns);
      for (const c of Object.keys(CHAINS)) {
        const share = (bc.counts[c] ?? 0) / bc.total;
        tt.ok(Math.abs(share - cpu[c]!) <= 0.05, `perf ${c}: ${(100 * share).toFixed(1)} % of samples vs ${(100 * cpu[c]!).toFixed(1)} % of CPU`);
        if (dwarfTop[c]) tt.ok(sameFrames(dwarfTop[c]!, bc.top[c] ?? ''), `${c}: same frames as perf (dwunw ${dwarfTop[c]}; perf ${bc.top[c]})`);
        if (kernelTop[c]) tt.ok(sameFrames(kernelTop[c]!, bc.top[c] ?? ''), `${c}: --unwind=kernel, same frames as perf (dwunw ${kernelTop[c]}; perf ${bc.top[c]})`);
        // every path of the chain, not the top one only: the samples of each side whose leaf..entry
        // frames the other side also has (a path one side never shows is a wrong or short stack)
        for (const [mode, paths] of [['dwarf', dwarfPaths], ['kernel', kernelPaths]] as const) {
          if (!paths) continue;
          const ours = paths[c] ?? new Map<string, number>();
          const theirs = bc.paths[c] ?? new Map<string, number>();
          const a = shared(ours, theirs);
          const b = shared(theirs, ours);
          tt.ok(a.share >= PATH_SHARE && b.share >= PATH_SHARE,
            `${c}: ${mode} and perf show the same paths: ${(100 * a.share).toFixed(1)} % of dwunw's samples on a path perf has, ${(100 * b.share).toFixed(1)} % of perf's on one dwunw has (>= ${100 * PATH_SHARE} %)`,
            { dwunw_only: a.missing, perf_only: b.missing });
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
