// Issue 29: short-lived processes. `dwunw profile` (dwarf mode) follows scripts/churn-workload: a
// long-lived fixtures/x86_64/hot beside loops of short-lived dynamically linked processes with known
// chains (hot 0.02, /bin/true, sh -c true). Invariants, not timings:
//  - every sample accounted for: the entries' counts add up to the summary's samples;
//  - >= 95 % of the workload's user stacks complete (a process gone before its samples were processed
//    is unwound from its mapping records like any other), and the long-lived hot's complete stacks run
//    through hot's own chains (the chains hot reports measuring);
//  - samples inside execve are unwound against the old image, or lost under a reason that names why;
//  - what profile holds per process is freed at its exit: at the end the views, held files and
//    address spaces are those of the few live processes, forks and exits applied balance; with
//    --interval each interval's keys are dropped once printed and the stacks of processes gone
//    freed (profile's own figures: user stacks held <= the keys of this interval and the last);
//    its RSS (/proc/PID/status) grows < 2 % between the 2nd and the 10th interval; the BPF side's
//    per-process map (pr_mms) holds no more entries than there are live processes.
//  - kernel mode (--unwind=kernel): the BPF side makes, merges and frees the walker's process entries
//    (no no-proc fallback, entries freed at exit, map memory flat over 10 intervals), >= 95 % of the
//    workload's user stacks complete, the fallback share and its reasons reported.
//
// Needs root, the kernel's BTF and BPF: without them skipped with the reason, unless
// DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, cliEnv, root, runSync, skipOrFail, start } from './helpers.js';
import { type PrEntry, parseProfileJson } from '../lib/profile.js';

const profileBin = join(root, 'build', 'bpf', 'profile');
const hot = join(root, 'fixtures', 'x86_64', 'build', 'hot');
const workload = join(root, 'scripts', 'churn-workload');
/** where the workload writes its one JSON line (CHURN_OUT): on the shared stdout it could land
 * inside one of profile's long JSON lines */
const tmpOut = (what: string): string => join(tmpdir(), `dwunw-churn-${process.pid}-${what}.json`);
const workloadReport = (file: string): { starts?: number; hot?: { pid: number } } => {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as { starts?: number; hot?: { pid: number } };
  } catch {
    return {};
  } finally {
    rmSync(file, { force: true });
  }
};
const memleakBin = join(root, 'build', 'bpf', 'memleak');
const forktree = join(root, 'fixtures', 'x86_64', 'build', 'forktree');
const lastthread = join(root, 'fixtures', 'x86_64', 'build', 'lastthread');
const SECONDS = 40;
/** the workload's programs (comm), each with a known chain */
const WORKLOAD = new Set(['hot', 'true', 'sh', 'churn-workload']);
/** hot's chains: the function found in every stack of the chain (test/profile.test.ts) */
const CHAINS = ['chain_plain', 'chain_qsort', 'chain_recurse', 'chain_lib', 'chain_signal', 'thread_main'];

const rssKib = (pid: number): number | null => {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
};
const liveProcesses = (): number => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).length;
/** entries of profile's pr_mms map now (bpftool), null when it cannot be read */
function prMmsEntries(): number | null {
  const r = runSync('bpftool', ['-j', 'map', 'dump', 'name', 'pr_mms'], { timeoutMs: 20_000 });
  if (r.status !== 0) return null;
  try {
    return (JSON.parse(r.stdout) as unknown[]).length;
  } catch {
    return null;
  }
}
const names = (e: PrEntry): string[] => (e.user?.frames ?? []).map((f) => f.symbol ?? '?');
/** the workload's entries with a user stack: samples, complete ones, the others by comm and reason */
function workloadStacks(entries: PrEntry[]): { mine: PrEntry[]; total: number; complete: number; notComplete: Map<string, number> } {
  const mine = entries.filter((e) => WORKLOAD.has(e.comm) && e.user);
  const total = mine.reduce((a, e) => a + e.count, 0);
  const complete = mine.filter((e) => e.user!.complete).reduce((a, e) => a + e.count, 0);
  const notComplete = new Map<string, number>();
  for (const e of mine)
    if (!e.user!.complete) {
      const k = `${e.comm}: ${e.user!.stop ?? e.user!.reason ?? e.user!.kind}`;
      notComplete.set(k, (notComplete.get(k) ?? 0) + e.count);
    }
  return { mine, total, complete, notComplete };
}

const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [
  [profileBin, 'make bpf'],
  [hot, 'make fixtures'],
  [memleakBin, 'make bpf'],
  [forktree, 'make fixtures'],
  [lastthread, 'make fixtures'],
]);
if (why) {
  skipOrFail(t, why, 'churn tests skipped');
} else {
  t.test('dwarf: short-lived processes unwound, every sample accounted for, memory flat', async (tt) => {
    // --interval: each interval's keys are printed, then dropped with the stacks of the processes
    // gone (profile_reset.c); the RSS is read as each interval line comes
    // 13 intervals in the run: the 10th ends well before the workload (the last, partial one is
    // printed as profile exits, when its RSS may be gone)
    const IVAL = 3;
    const rss: number[] = [];
    const mms: { entries: number; live: number }[] = [];
    let cursor = 0;
    const wlOut = tmpOut('dwarf');
    const p = start(profileBin, ['-F', '99', '--json', `--interval=${IVAL}`, '--', workload, String(SECONDS)], {
      timeoutMs: (SECONDS + 120) * 1000,
      env: cliEnv({ CHURN_OUT: wlOut }),
      onOutput: (out) => {
        for (let i = out.indexOf('{"interval":', cursor); i >= 0; i = out.indexOf('{"interval":', cursor)) {
          cursor = i + 1;
          const r = rssKib(p.child.pid!);
          if (r !== null) rss.push(r);
          const e = prMmsEntries();
          if (e !== null) mms.push({ entries: e, live: liveProcesses() });
        }
      },
    });
    const r = await p.done;
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-1500)}`);
    // the entries come per interval (each interval's own counts), the summary at the end
    const out = parseProfileJson(r.stdout);
    const sum = out.summary as unknown as Record<string, any>;
    if (!sum) return void tt.fail('no summary');
    const ivs = r.stdout.split('\n').filter((l) => l.startsWith('{"interval"')).map((l) => (JSON.parse(l) as { interval: { samples: number; keys: number; held: Record<string, number> } }).interval);
    const wl = workloadReport(wlOut);
    tt.ok((wl.starts ?? 0) > 100, `the workload started processes: ${wl.starts}`);
    tt.equal(ivs.reduce((a, iv) => a + iv.samples, 0), sum.samples, 'the intervals add up to the samples');

    // every sample accounted for
    const counted = out.entries.reduce((a, e) => a + e.count, 0);
    tt.equal(counted, sum.samples, `entries add up to the samples: ${counted} of ${sum.samples}`);

    // the workload's user stacks complete; the losses named
    const { mine, total, complete, notComplete } = workloadStacks(out.entries);
    tt.ok(total > 100, `workload user stacks: ${total}`);
    tt.ok(complete / total >= 0.95, `>= 95 % of the workload's user stacks complete: ${complete}/${total} (${(100 * complete / total).toFixed(1)} %); not: ${JSON.stringify([...notComplete])}`);
    tt.ok((sum.stopped?.NO_PROCESS ?? 0) <= total * 0.01, `processes gone before their unwind: <= 1 % stopped NO_PROCESS (${sum.stopped?.NO_PROCESS ?? 0})`);
    // inside execve: unwound (complete stacks through execve) or lost under a reason
    for (const k of Object.keys(sum.lost ?? {}))
      tt.match(k, /^\[stack lost: (sampled inside execve: (new image installed|process not seen)|ring buffer full)/, `a lost stack says why: ${k}`);
    const execve = mine.filter((e) => e.user!.complete && names(e).some((n) => /^(__)?execve$/.test(n))).reduce((a, e) => a + e.count, 0);
    tt.pass(`inside execve: ${execve} unwound against the old image, lost: ${JSON.stringify(sum.lost ?? {})}`);

    // the long-lived hot: its complete stacks run through its chains
    const hotPid = wl.hot?.pid;
    const hots = out.entries.filter((e) => e.pid === hotPid && e.user?.complete);
    const hotTotal = hots.reduce((a, e) => a + e.count, 0);
    const inChain = hots.filter((e) => CHAINS.some((c) => names(e).includes(c))).reduce((a, e) => a + e.count, 0);
    tt.ok(hotTotal > 0 && inChain / hotTotal >= 0.95, `hot's complete stacks in its chains: ${inChain}/${hotTotal}`);
    const seen = CHAINS.filter((c) => hots.some((e) => names(e).includes(c)));
    tt.same(seen, CHAINS, 'every chain of hot seen');

    // per-process state freed at exit; memory flat
    const held = sum.held as Record<string, number>;
    tt.ok(held, 'the summary says what is held');
    tt.ok(held.processes <= 16 && held.files <= 64, `held at the end: ${JSON.stringify(held)}`);
    tt.ok(held.exits >= held.forks * 0.95, `exits applied balance forks: ${held.exits} / ${held.forks}`);
    // the tool's own figures: an interval's end holds its own keys' stacks and those a live
    // process used in the interval before, never the stacks of processes gone before that
    tt.ok(ivs.length >= 10, `${ivs.length} intervals`);
    for (const [i, iv] of ivs.entries())
      if (i > 0) tt.ok(iv.held.user_stacks <= iv.keys + ivs[i - 1]!.keys, `interval ${i}: ${iv.held.user_stacks} user stacks held <= keys of this interval and the last (${iv.keys} + ${ivs[i - 1]!.keys})`);
    tt.ok(held.user_stacks <= ivs[ivs.length - 1]!.keys, `at the end: ${held.user_stacks} user stacks, those of the last interval's live processes at most; ${held.stacks_freed} freed`);
    // address spaces (pid -> image generation) of processes gone are dropped at their exit (or,
    // for one whose sample came after its exit record, by a sweep): those left are live or
    // leaving with the workload
    tt.ok(held.spaces <= 32, `processes with an entry at the end: ${held.spaces}`);
    // RSS (/proc/PID/status) between the 2nd and the 10th interval's end: < 2 %
    tt.ok(rss.length >= 10, `RSS read at ${rss.length} interval ends: ${rss.join(' ')}`);
    if (rss.length >= 10) {
      const growth = (rss[9]! - rss[1]!) / rss[1]!;
      tt.ok(growth < 0.02, `RSS growth between the 2nd and the 10th interval < 2 %: ${(100 * growth).toFixed(2)} % (${rss[1]} -> ${rss[9]} KiB; ${wl.starts} processes started; user stacks held ${ivs.map((iv) => iv.held.user_stacks).join(' ')})`);
    }
    tt.ok(mms.length > 0, `pr_mms read ${mms.length} times`);
    for (const m of mms) tt.ok(m.entries <= m.live + 32, `pr_mms entries ${m.entries} <= live processes ${m.live} (+32 in flight)`);
  });

  // memleak's default mode (auto: the in-kernel walker here) and dwarf mode. forktree's 1,000
  // children take ~4 s under memleak (1,000 forks, one walk each); a mode's run is bounded at 120 s.
  for (const mode of ['default', 'dwarf'] as const)
    t.test(`memleak -c (${mode} mode): a forking tree of 1,000 short-lived children, their blocks kept, their state freed`, async (tt) => {
      const CHILDREN = 1000;
      const BATCH = 16; // children alive at once (forktree's second argument)
      // dwarf mode: its view of each child follows the tree's fork/exit records. Kernel mode: the
      // BPF side gives each child its parent's walker entry at fork (before its first allocation)
      // and frees it at its last thread's exit; its pcs are named through the same view.
      const flags = mode === 'dwarf' ? ['--unwind=dwarf'] : [];
      const r = await start(memleakBin, [...flags, '--json', '-o', '0', '-T', '100000', '-c', `${forktree} ${CHILDREN} ${BATCH}`, '1'], { timeoutMs: 120_000 }).done;
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-800)}`);
      interface Frame { symbol: string | null; origin?: string }
      interface Stack { pid?: number; allocations: number; bytes: number; frames: Frame[]; complete: boolean | null; stop?: string }
      interface Report {
        unwind_mode: string;
        stacks: Stack[];
        maps?: { forks: number; forgotten: number; held: { processes: number; files: number } };
        kernel_walk?: { events: number; from_kernel: number; fallback: number; by_status: Record<string, number>; procs: number; bpf_entries: Record<string, number> };
      }
      const reps = r.stdout.split('\n').filter((l) => l.startsWith('{"time"')).map((l) => JSON.parse(l) as Report);
      const ft = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{"children"')) ?? '{}') as { children?: number; block?: number };
      tt.equal(ft.children, CHILDREN, 'forktree forked and reaped every child');
      const last = reps[reps.length - 1];
      if (!last) return void tt.fail('no report');
      tt.equal(last.unwind_mode, mode === 'dwarf' ? 'dwarf' : 'kernel', `unwind mode ${last.unwind_mode}`);
      // every child's block, under its own pid, with its chain (ft_leak <- ft_child <- ft_spawn <- main)
      const blocks = last.stacks.filter((s) => s.allocations && s.bytes === s.allocations * ft.block!);
      const n = blocks.reduce((a, s) => a + s.allocations, 0);
      tt.equal(n, CHILDREN, `${CHILDREN} blocks of ${ft.block} bytes kept`);
      tt.equal(new Set(blocks.map((s) => s.pid)).size, CHILDREN, 'under their own pids');
      const chain = ['ft_leak', 'ft_child', 'ft_spawn', 'main'];
      const good = blocks.filter((s) => s.complete && chain.every((c, i) => s.frames.map((f) => f.symbol)[s.frames.findIndex((f) => f.symbol === 'ft_leak') + i] === c));
      const stops = blocks.filter((s) => !good.includes(s)).map((s) => s.stop);
      tt.ok(good.reduce((a, s) => a + s.allocations, 0) >= CHILDREN * 0.95, `>= 95 % complete through ${chain.join(' <- ')}: ${good.length}; others: ${JSON.stringify(stops.slice(0, 10))}`);
      // per-child state: made at each fork, freed at each exit; never more than the live children held
      tt.ok(last.maps, 'the maps summary');
      tt.ok(last.maps!.forks >= CHILDREN, `views forked: ${last.maps!.forks}`);
      tt.ok(last.maps!.forgotten >= CHILDREN, `views freed: ${last.maps!.forgotten}`);
      for (const [i, rep] of reps.entries())
        tt.ok(rep.maps && rep.maps.held.processes <= BATCH + 2, `report ${i}: ${rep.maps?.held.processes} views held (<= ${BATCH} children alive + the parent)`);
      tt.equal(last.maps!.held.processes, 0, 'held processes back to the baseline at the end (the tree is gone)');
      tt.equal(last.maps!.held.files, 0, 'no file held open');
      if (mode === 'dwarf') return;

      // kernel mode: every event accounted for, walked or fallen back under a reason (a fallback
      // is unwound from its snapshot through the view: its frames say so)
      const kw = last.kernel_walk;
      if (!kw) return void tt.fail('no kernel_walk in the report');
      const byReason = Object.values(kw.by_status).reduce((a, v) => a + v, 0);
      tt.equal(byReason, kw.events, `walker events by reason add up: ${JSON.stringify(kw.by_status)}`);
      tt.equal(kw.from_kernel + kw.fallback, kw.events, `walked ${kw.from_kernel} + fell back ${kw.fallback} = ${kw.events} events`);
      tt.ok(kw.events >= CHILDREN, `an event per child at least: ${kw.events}`);
      const walked = good.filter((s) => s.frames.every((f) => f.origin === 'kernel-walk')).length;
      tt.pass(`children's blocks walked in the kernel: ${walked} of ${good.length} complete (fallbacks ${JSON.stringify(kw.by_status)})`);
      // the walker's entries: one per child at fork, each freed at its exit, none held at the end
      const be = kw.bpf_entries;
      tt.ok(be.fork >= CHILDREN, `entries copied to the children at fork: ${be.fork}`);
      tt.equal(be.not_made, 0, 'no entry left unmade (kw_procs full)');
      tt.ok(be.freed >= be.fork, `entries freed at exit: ${be.freed} (made at fork ${be.fork}, at exec ${be.exec})`);
      tt.equal(kw.procs, 0, 'no walker entry held at the end (the tree is gone)');
    });

  // The walker's entry lives until the process's *last* thread exits: lastthread's main thread
  // leaves first (pthread_exit), its worker then leaks 50 blocks. Freed at the main thread's exit
  // (before), the worker's walks all fell back (no-proc) and its blocks were lost.
  t.test('memleak (default mode): the main thread leaves first, the worker\'s allocations still walked in the kernel', async (tt) => {
    const r = await start(memleakBin, ['--json', '-o', '0', '-T', '100000', '-c', lastthread, '1'], { timeoutMs: 60_000 }).done;
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-800)}`);
    const lt = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{"blocks"')) ?? '{}') as { blocks?: number; block?: number; main_gone?: boolean };
    tt.equal(lt.main_gone, true, 'the worker allocated after the main thread was gone');
    interface Stack { allocations: number; bytes: number; complete: boolean | null; frames: { symbol: string | null; origin?: string }[] }
    const reps = r.stdout.split('\n').filter((l) => l.startsWith('{"time"')).map((l) => JSON.parse(l) as { stacks: Stack[]; kernel_walk?: { events: number; from_kernel: number; by_status: Record<string, number>; procs: number; bpf_entries: Record<string, number> } });
    const last = reps[reps.length - 1];
    if (!last?.kernel_walk) return void tt.fail('no report with kernel_walk');
    const mine = last.stacks.filter((s) => s.allocations && s.bytes === s.allocations * lt.block!);
    const chain = ['lt_leak', 'lt_worker', 'start_thread'];
    const walked = mine.filter((s) => s.complete && chain.every((c, i) => s.frames[i]?.symbol === c) && s.frames.every((f) => f.origin === 'kernel-walk'));
    tt.equal(walked.reduce((a, s) => a + s.allocations, 0), lt.blocks, `${lt.blocks} blocks walked in the kernel through ${chain.join(' <- ')}: ${JSON.stringify(mine.map((s) => [s.allocations, s.frames.map((f) => f.symbol)]))}`);
    const kw = last.kernel_walk;
    tt.equal(Object.values(kw.by_status).reduce((a, v) => a + v, 0), kw.events, `events by reason add up: ${JSON.stringify(kw.by_status)}`);
    tt.notOk(kw.by_status['no-proc'], 'no walk without its process entry');
    tt.ok(kw.bpf_entries.freed >= 1, `the entry freed at the last thread's exit (freed ${kw.bpf_entries.freed})`);
    tt.equal(kw.procs, 0, 'no walker entry held at the end');
  });

  // Held files by identity (runtime/mapped_files.c): 60 live children mapping the same few
  // libraries hold each file once (one fd per device and inode, refcounted by the mappings), not
  // one per mapping; every hold goes with the last mapping of its file.
  t.test('held files by identity: 60 live processes mapping the same libraries hold each file once', async (tt) => {
    const KIDS = 60;
    const r = await start(memleakBin, ['--unwind=dwarf', '--json', '-o', '0', '-c', `sh -c 'for i in $(seq ${KIDS}); do sleep 6 & done; wait'`, '1'], { timeoutMs: 120_000 }).done;
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-800)}`);
    interface Maps { files_held: number; files_shared: number; files_missed: number; held: { processes: number; files: number; file_mappings: number } }
    const maps = r.stdout.split('\n').filter((l) => l.startsWith('{"time"')).map((l) => (JSON.parse(l) as { maps?: Maps }).maps).filter((m): m is Maps => !!m);
    const last = maps[maps.length - 1];
    if (!last) return void tt.fail('no report with a maps summary');
    // the report with the most mappings held: the children alive
    const peak = maps.reduce((a, m) => (m.held.file_mappings > a.held.file_mappings ? m : a));
    tt.ok(peak.held.processes >= KIDS / 2, `a report while the children lived: ${peak.held.processes} processes' views`);
    tt.ok(peak.held.file_mappings >= peak.held.processes, `each of them refers to held files: ${peak.held.file_mappings} mappings`);
    // sleep, libc, ld.so and sh: a few files, however many processes map them
    tt.ok(peak.held.files <= 8, `files held while they lived: ${peak.held.files} (<= 8) for ${peak.held.file_mappings} mappings`);
    tt.ok(last.files_shared >= KIDS, `mappings that found their file held already, without an open: ${last.files_shared}`);
    tt.ok(last.files_held <= 16, `files ever opened to be held: ${last.files_held}`);
    tt.equal(last.held.files, 0, 'no file held open at the end');
    tt.equal(last.held.file_mappings, 0, 'no mapping record left');
  });

  // ---- kernel mode (--unwind=kernel): helper kchurn's part (the in-kernel walker's side) ----------
  // The walker's process entries are made by the BPF side at exec and fork, merged at mmap and
  // freed at exit; modules are loaded once by file (kw_files) and shared by every process: no
  // process needs a load from /proc (no `no-proc` fallback), and what the walker holds stays flat.
  t.test('kernel mode: short-lived processes walked in the kernel, entries freed at exit, map memory flat', async (tt) => {
    const KSECONDS = 30;
    const wlOut = tmpOut('kernel');
    const p = start(profileBin, ['--unwind=kernel', '-F', '99', '--json', `--interval=${KSECONDS / 10}`, '--', workload, String(KSECONDS)], {
      timeoutMs: (KSECONDS + 60) * 1000,
      env: cliEnv({ CHURN_OUT: wlOut }),
    });
    const live: number[] = [];
    const tick = setInterval(() => live.push(liveProcesses()), (KSECONDS * 1000) / 10);
    const r = await p.done;
    clearInterval(tick);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-1500)}`);
    // with --interval the entries come per interval (each interval's own counts), the summary at the end
    const out = parseProfileJson(r.stdout);
    const sum = out.summary as unknown as Record<string, any>;
    if (!sum) return void tt.fail('no summary');
    const kw = sum.kernel_walk as Record<string, any>;
    if (!kw) return void tt.fail('no kernel_walk in the summary');
    const wl = workloadReport(wlOut);
    tt.ok((wl.starts ?? 0) > 100, `the workload started processes: ${wl.starts}`);
    const counted = out.entries.reduce((a, e) => a + e.count, 0);
    tt.equal(counted, sum.samples, `entries add up to the samples: ${counted} of ${sum.samples}`);

    // every walk accounted for under a reason; no process without its entry
    const byStatus = kw.by_status as Record<string, number>;
    const st = Object.values(byStatus).reduce((a, n) => a + n, 0);
    tt.equal(st, kw.events, `walker events by reason add up: ${JSON.stringify(byStatus)}`);
    const be = kw.bpf_entries as Record<string, number>;
    tt.ok(be.exec >= (wl.starts ?? 0) * 0.9, `entries made at exec by the BPF side: ${be.exec} for ${wl.starts} starts; forks ${be.fork}, mmaps ${be.mmap}`);
    tt.equal(be.not_made, 0, 'no entry left unmade (kw_procs full)');
    // the command's child is forked by profile and held until sampling starts: a sample inside its
    // execve before the point of no return walks profile's own image, never entered
    tt.ok((byStatus['no-proc'] ?? 0) <= 2, `no walk without its process entry but the held command's (no-proc ${byStatus['no-proc'] ?? 0})`);
    // a few are (a child forked before its parent's entry was complete): a small share of the starts
    tt.ok(kw.table_loads <= Math.max(32, 0.02 * (wl.starts ?? 0)), `processes loaded from /proc: ${kw.table_loads} of ${wl.starts} starts (files loaded by path: ${be.files_told}, not found ${be.files_not_found})`);
    tt.pass(`fallback ${kw.fallback_pct} % of ${kw.events} walks (${JSON.stringify(byStatus)}); inside execve ${JSON.stringify(kw.in_execve)}; load time ${(kw.load_ns / 1e6).toFixed(0)} ms`);

    // the workload's user stacks: complete with their chains
    const { total, complete, notComplete } = workloadStacks(out.entries);
    tt.ok(total > 100, `workload user stacks: ${total}`);
    // the walks that fall back (ld.so's _start has no CFI; a file's first processes before its
    // table is loaded) are unwound from their snapshot and the mapping events, like dwarf mode's
    tt.ok(complete / total >= 0.95, `>= 95 % of the workload's user stacks complete: ${complete}/${total} (${((100 * complete) / total).toFixed(1)} %); not: ${JSON.stringify([...notComplete])}`);
    for (const k of Object.keys(sum.lost ?? {}))
      tt.match(k, /^\[stack lost: (sampled inside execve: (new image installed|process not seen)|ring buffer full)/, `a lost stack says why: ${k}`);
    const hotPid = wl.hot?.pid;
    const hots = out.entries.filter((e) => e.pid === hotPid && e.user?.complete);
    const hotTotal = hots.reduce((a, e) => a + e.count, 0);
    const inChain = hots.filter((e) => CHAINS.some((c) => names(e).includes(c))).reduce((a, e) => a + e.count, 0);
    tt.ok(hotTotal > 0 && inChain / hotTotal >= 0.95, `hot's complete stacks in its chains: ${inChain}/${hotTotal}`);

    // entries freed at exit; what the walker holds flat (the interval lines)
    tt.ok(be.freed >= be.exec * 0.95, `entries freed at exit: ${be.freed} of ${be.exec} made at exec`);
    tt.ok(kw.procs <= 16, `entries at the end: ${kw.procs}`);
    const ivs = r.stdout.split('\n').filter((l) => l.startsWith('{"interval"')).map((l) => (JSON.parse(l) as { interval: { kernel_walk?: Record<string, number> } }).interval.kernel_walk);
    const held = ivs.filter((k): k is Record<string, number> => !!k);
    tt.ok(held.length >= 10, `${held.length} intervals with the walker's memory`);
    if (held.length >= 10) {
      const bytes = held.map((k) => k.map_bytes!);
      const growth = (bytes[9]! - bytes[1]!) / bytes[1]!;
      tt.ok(growth < 0.02, `BPF map memory growth between the 2nd and the last of 10 intervals < 2 %: ${(100 * growth).toFixed(2)} % (${bytes.join(' ')})`);
      const maxLive = Math.max(...live, 0);
      for (const [i, k] of held.entries()) tt.ok(k.procs! <= maxLive + 32, `interval ${i}: ${k.procs} entries <= live processes ${maxLive} (+32 in flight)`);
    }
  });
}
