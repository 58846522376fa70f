// Issue 29: short-lived processes. `dwunw profile` (dwarf mode) follows scripts/churn-workload: a
// long-lived fixtures/x86_64/hot beside loops of short-lived dynamically linked processes with known
// chains (hot 0.02, /bin/true, sh -c true). Invariants, not timings:
//  - every sample accounted for: the entries' counts add up to the summary's samples;
//  - >= 95 % of the workload's user stacks complete (a process gone before its samples were processed
//    is unwound from its mapping records like any other), and the long-lived hot's complete stacks run
//    through hot's own chains (the chains hot reports measuring);
//  - samples inside execve are unwound against the old image, or lost under a reason that names why;
//  - what profile holds per process is freed at its exit: at the end the views, held files and
//    address spaces are those of the few live processes, forks and exits applied balance; its RSS
//    (/proc/PID/status) grows < 2 % between the second and the last of 10 intervals; the BPF side's
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
]);
if (why) {
  skipOrFail(t, why, 'churn tests skipped');
} else {
  t.test('dwarf: short-lived processes unwound, every sample accounted for, memory flat', async (tt) => {
    const rss: number[] = [];
    const mms: { entries: number; live: number }[] = [];
    let tick: NodeJS.Timeout | undefined;
    // the intervals start with the sampling (the header is printed once the BPF programs are in:
    // their load takes seconds on a loaded machine), not with the process
    const wlOut = tmpOut('dwarf');
    const p = start(profileBin, ['-F', '99', '--json', '--', workload, String(SECONDS)], {
      timeoutMs: (SECONDS + 120) * 1000,
      env: cliEnv({ CHURN_OUT: wlOut }),
      onOutput: (_out, err) => {
        if (tick || !err.includes('Sampling at')) return;
        tick = setInterval(() => {
          const r = rssKib(p.child.pid!);
          if (r !== null) rss.push(r);
          const e = prMmsEntries();
          if (e !== null) mms.push({ entries: e, live: liveProcesses() });
        }, (SECONDS * 1000) / 11); // 10 intervals inside the run, whatever the start lag
      },
    });
    const r = await p.done;
    clearInterval(tick);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-1500)}`);
    const out = parseProfileJson(r.stdout);
    const sum = out.summary as unknown as Record<string, any>;
    if (!sum) return void tt.fail('no summary');
    const wl = workloadReport(wlOut);
    tt.ok((wl.starts ?? 0) > 100, `the workload started processes: ${wl.starts}`);

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
    tt.ok(rss.length >= 9, `RSS sampled ${rss.length} times: ${rss.join(' ')}`);
    if (rss.length >= 9) {
      // What still grows is what is kept per process for the final report: its stacks and their
      // keys (held.stacks, held.keys; issue 29's open item). So the bound is bytes per process
      // started between the 2nd and the last sample (the samples are SECONDS / 11 apart), below
      // the 1.2 KiB per exited process measured when issue 29 was filed: a leak of a view, a held
      // file or a module per process is far more.
      const grown = (rss[rss.length - 1]! - rss[1]!) * 1024;
      const started = ((wl.starts ?? 0) * (rss.length - 2)) / 11;
      const per = started > 0 ? grown / started : Infinity;
      tt.ok(per < 1024, `RSS growth between the 2nd and the last interval: ${Math.round(per)} bytes per process started (< 1024; ${rss[1]} -> ${rss[rss.length - 1]} KiB, ${Math.round(started)} processes)`);
    }
    tt.ok(mms.length > 0, `pr_mms read ${mms.length} times`);
    for (const m of mms) tt.ok(m.entries <= m.live + 32, `pr_mms entries ${m.entries} <= live processes ${m.live} (+32 in flight)`);
  });

  t.test('memleak -c: a forking tree of 1,000 short-lived children, their blocks kept, their state freed', async (tt) => {
    const CHILDREN = 1000;
    const BATCH = 16; // children alive at once (forktree's second argument)
    // dwarf mode: its view of each child follows the tree's fork/exit records (memleak's kernel
    // mode, the default, keeps no view: a child gone before its fallback is processed stops there)
    const r = await start(memleakBin, ['--unwind=dwarf', '--json', '-o', '0', '-T', '100000', '-c', `${forktree} ${CHILDREN} ${BATCH}`, '1'], { timeoutMs: 120_000 }).done;
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-800)}`);
    interface Frame { symbol: string | null }
    interface Stack { pid?: number; allocations: number; bytes: number; frames: Frame[]; complete: boolean | null; stop?: string }
    interface Report { stacks: Stack[]; maps?: { forks: number; forgotten: number; held: { processes: number; files: number } } }
    const reps = r.stdout.split('\n').filter((l) => l.startsWith('{"time"')).map((l) => JSON.parse(l) as Report);
    const ft = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{"children"')) ?? '{}') as { children?: number; block?: number };
    tt.equal(ft.children, CHILDREN, 'forktree forked and reaped every child');
    const last = reps[reps.length - 1];
    if (!last) return void tt.fail('no report');
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
    // with --interval the stacks come per interval, then all of them again before the summary
    const lines = r.stdout.split('\n');
    const lastIv = lines.map((l) => l.startsWith('{"interval"')).lastIndexOf(true);
    const out = parseProfileJson(lines.slice(lastIv + 1).join('\n'));
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
