// memleak soak: fixtures/x86_64/leaky makes 2.5 M malloc(64) calls at up to 100 k/s and leaks
// every block, traced by build/bpf/memleak in dwarf mode with a report every 5 s. The BPF
// allocation map holds 1 M entries (as upstream): once it is full, every further record is
// still unwound and then counted as untracked, and every report walks a full map.
//
// Only invariants that hold at any speed and under any load are asserted (the machine may run
// other tests, BPF programs and qemu beside this one; leaky may reach 100 k/s or a fraction of it):
//  - every call accounted for, once: shown under its complete stack (rate_3 <- rate_2 <- rate_1
//    <- main) + shown under "[stack lost: ring buffer full]" + untracked = the calls made (give
//    or take leaky's own few allocations), lost-stack allocations <= lost records, and no
//    allocation without its record ("[stack unknown: ...]");
//  - memory per tracked outstanding allocation: all of memleak's anonymous memory (its fixed
//    part included) / outstanding allocations <= 64 bytes; whole RSS <= 128 MiB at 1 M outstanding;
//  - no growth once the map is full: between reports that both saw a full map, memleak's
//    anonymous memory (less the event window, which holds one interval of events whatever
//    their rate) grows by less than 4 MiB, and the table of old events stays within 32 bytes
//    per outstanding allocation.
// The rate reached, records, lost records and the RSS series are printed as comments and written
// to build/soak.json; they are reported, not asserted.
//
// Needs root, the kernel's BTF and BPF: without them the test is skipped with the reason, unless
// DWUNW_REQUIRE_BPF=1 (CI), which turns that into a failure.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { bpfUnavailable, root, skipOrFail, start } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const leaky = join(root, 'fixtures', 'x86_64', 'build', 'leaky');

const RATE = 100_000;
const CALLS = 2_500_000;
const INTERVAL = 5;
const MAP_ENTRIES = 1_000_000; // ML_ALLOCS_ENTRIES
const LIMIT_S = 400; // leaky at 10 k/s would still finish
const CHAIN = ['rate_3', 'rate_2', 'rate_1', 'main']; // run_rate is inlined into main
const MiB = 1024 * 1024;

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [leaky, 'make fixtures']]);

/** VmRSS and RssAnon of a process in bytes, or null once it is gone. */
function rss(pid: number): { rss: number; anon: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const r = /^VmRSS:\s+(\d+) kB/m.exec(s);
    const a = /^RssAnon:\s+(\d+) kB/m.exec(s);
    return r && a ? { rss: Number(r[1]) * 1024, anon: Number(a[1]) * 1024 } : null;
  } catch {
    return null;
  }
}

interface JFrame {
  symbol: string | null;
}
interface JStack {
  bytes: number;
  allocations: number;
  frames: JFrame[];
  complete?: boolean | null;
  reason?: string;
}
interface JMemory {
  rss_bytes: number;
  rss_anon_bytes: number;
  event_window_bytes: number;
  event_table_bytes: number;
  event_table_entries: number;
  outstanding: number;
  bpf_maps_bytes: number;
}
interface JReport {
  stacks: JStack[];
  lost: number;
  untracked: Record<string, number>;
  unwind: { records: number; complete: number; stopped: number; unwind_ns_avg: number; record_bytes_avg: number };
  memory: JMemory;
}

const frameName = (f: JFrame): string => f.symbol ?? '';
const mib = (b: number): string => (b / MiB).toFixed(1);

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'memleak soak skipped');
} else {
  t.test(`memleak soak: ${CALLS / 1e6} M leaked malloc calls at up to ${RATE / 1000} k/s in dwarf mode`, { timeout: (LIMIT_S + 120) * 1000 }, async (t) => {
    const cmd = `${leaky} --delay 1 --rate ${RATE} --count ${CALLS} --seconds ${LIMIT_S} --leak`;
    const ml = start(memleakBin, ['--unwind=dwarf', '--json', '-o', '0', '-T', '1000', '-c', cmd, String(INTERVAL)], { timeoutMs: (LIMIT_S + 120) * 1000 });
    const child = ml.child;
    let stdout = '';
    let stderr = '';
    const done = ml.done.then((r) => {
      ({ stdout, stderr } = r);
      return { code: r.status, signal: r.signal };
    });

    // RSS twice a second while memleak runs
    const t0 = Date.now();
    const samples: { s: number; rss: number; anon: number }[] = [];
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished && Date.now() - t0 < (LIMIT_S + 60) * 1000) {
      const r = child.pid !== undefined ? rss(child.pid) : null;
      if (r) samples.push({ s: (Date.now() - t0) / 1000, ...r });
      await sleep(500);
    }
    const end = await Promise.race([done, sleep(5000).then(() => null)]);
    if (end === null) {
      child.kill('SIGKILL');
      t.fail(`memleak still running after ${LIMIT_S + 60} s`);
      return;
    }

    t.equal(end.signal, null, 'memleak was not killed by a signal');
    t.equal(end.code, 0, `memleak exits 0${end.code ? `: ${stderr.trim().split('\n').pop()}` : ''}`);
    t.match(stderr, /target pid \d+ exited/, 'memleak says the target exited');
    const sm = /^leaky: (\d+) allocations in ([\d.]+) s \((\d+)\/s\), (\d+) leaked/m.exec(stderr);
    t.ok(sm, 'leaky printed its summary');
    if (!sm) return;
    const [made, , rate, leaked] = [Number(sm[1]), Number(sm[2]), Number(sm[3]), Number(sm[4])];
    t.equal(leaked, CALLS, `leaky made and leaked ${CALLS} calls (at ${rate}/s)`);

    const reps = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as JReport);
    t.ok(reps.length >= 2, `${reps.length} reports`);
    t.ok(reps.every((r) => typeof r.lost === 'number' && typeof r.untracked === 'object' && typeof r.memory?.rss_bytes === 'number'),
      'every report carries its lost and untracked counters and memleak\'s memory');
    const last = reps[reps.length - 1];
    if (!last) return;
    const lost = last.lost;
    const untracked = Object.values(last.untracked).reduce((a, b) => a + b, 0);

    // every call accounted for, once
    const onChain = (s: JStack): boolean => {
      const n = s.frames.map(frameName);
      const k = n.indexOf(CHAIN[0]!);
      // shown under its stack: the chain, and the walk reached the outermost frame
      return s.complete === true && k >= 0 && CHAIN.every((c, i) => n[k + i] === c);
    };
    const sum = (f: (s: JStack) => boolean): number => last.stacks.filter(f).reduce((a, s) => a + s.allocations, 0);
    const found = sum(onChain);
    const shownLost = sum((s) => /^\[stack lost/.test(s.reason ?? ''));
    const unknown = sum((s) => /^\[stack unknown/.test(s.reason ?? ''));
    const tracked = last.stacks.reduce((a, s) => a + s.allocations, 0);
    t.equal(unknown, 0, 'no allocation without its record');
    t.ok(shownLost <= lost, `${shownLost} allocations under a lost stack <= ${lost} lost records`);
    t.equal(tracked, last.memory.outstanding, `the report shows every entry of the allocation map (${tracked})`);
    t.ok(last.memory.outstanding <= MAP_ENTRIES, `${last.memory.outstanding} outstanding <= ${MAP_ENTRIES} map entries`);
    const accounted = found + shownLost + untracked;
    t.ok(accounted >= made && accounted <= made + 200,
      `every call accounted for: ${found} under its stack + ${shownLost} lost stack + ${untracked} untracked = ${accounted}, made ${made} (+ leaky's own <= 200)`);

    // memory per tracked outstanding allocation (no RSS sample: nothing to bound, a failure)
    t.ok(samples.length >= 10, `${samples.length} RSS samples of memleak (twice a second)`);
    if (samples.length === 0) return;
    const full = last.memory.outstanding;
    const anonBase = Math.min(...samples.map((x) => x.anon));
    const perAlloc = full ? (last.memory.rss_anon_bytes - anonBase) / full : 0;
    t.ok(full > 0 && perAlloc <= 64, `${perAlloc.toFixed(1)} bytes of anonymous memory per outstanding allocation (all of memleak's: ${mib(last.memory.rss_anon_bytes)} - ${mib(anonBase)} MiB at exec, over ${full}) <= 64`);
    const peak = Math.max(0, ...samples.map((x) => x.rss));
    t.ok(peak <= 128 * MiB, `peak RSS ${mib(peak)} MiB <= 128 MiB (${full} outstanding)`);
    t.ok(last.memory.event_table_bytes <= 32 * full + 65536,
      `old-event table ${mib(last.memory.event_table_bytes)} MiB <= 32 bytes per outstanding allocation`);

    // no growth once the map is full
    const fullReps = reps.filter((r, i) => i > 0 && (reps[i - 1]!.untracked.allocs_full ?? 0) > 0);
    t.ok(fullReps.length >= 2, `${fullReps.length} reports with a full allocation map`);
    const steady = (r: JReport): number => r.memory.rss_anon_bytes - r.memory.event_window_bytes;
    for (let i = 1; i < fullReps.length; i++) {
      const a = fullReps[i - 1]!;
      const b = fullReps[i]!;
      t.ok(steady(b) - steady(a) <= 4 * MiB,
        `full map, report ${i} -> ${i + 1}: anonymous memory less the event window ${mib(steady(a))} -> ${mib(steady(b))} MiB (growth <= 4 MiB)`);
    }

    const series = samples.filter((_, i) => i % 10 === 0).map((x) => `${Math.round(x.s)}s:${mib(x.rss)}`).join(' ');
    t.comment(`memleak RSS (MiB): ${series}`);
    const figures = {
      calls: made, rate_asked: RATE, rate, interval: INTERVAL, found, shown_lost: shownLost,
      records: last.unwind.records, lost, lost_pct: +((100 * lost) / Math.max(1, last.unwind.records)).toFixed(3),
      untracked: last.untracked, unwind_ns_avg: last.unwind.unwind_ns_avg, record_bytes_avg: last.unwind.record_bytes_avg,
      outstanding: full, bytes_per_outstanding: +perAlloc.toFixed(1),
      rss_mib: { base_anon: +mib(anonBase), last: +mib(last.memory.rss_bytes), last_anon: +mib(last.memory.rss_anon_bytes), peak: +mib(peak) },
      event_table_mib: +mib(last.memory.event_table_bytes), event_window_mib: +mib(last.memory.event_window_bytes),
      bpf_maps_mib: +mib(last.memory.bpf_maps_bytes),
      reports: reps.length, full_reports: fullReps.length,
    };
    t.comment(`soak: ${JSON.stringify(figures)}`);
    try {
      writeFileSync(join(root, 'build', 'soak.json'), `${JSON.stringify(figures, null, 2)}\n`);
    } catch {
      // the figures are in the comment above
    }
  });
}
