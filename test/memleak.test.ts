// memleak (build/bpf/memleak, run as `dwunw memleak`) on the workload fixtures/x86_64/leaky, with
// real BPF programs: every printed DWARF stack against the known chains of `leaky --manifest`
// (depth 3-12, through glibc's strdup, qsort, fopen, getline, asprintf, a second thread, a large
// malloc that mmaps), exact sizes and counts, the frame-pointer mode on the same workload for
// comparison, the perf buffer, -c and -p, a target exiting mid-trace, the errors, the text and
// folded formats, and the options -o -z -Z -s -T -a -C.
//
// Needs root, the kernel's BTF and BPF. Without them every check is skipped with the reason,
// unless DWUNW_REQUIRE_BPF=1 (CI), which turns that into a failure.
//
// The memleak runs are independent: they run a few at a time (detaching 24 uprobes takes the
// kernel 2-3 s per run here), then each subtest checks one run's output.
import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, jsonLines, memleakBpfFailure, REQUIRE_BPF as REQUIRE, root, type Run, skipOrFail, start as startProcess, waitFor } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const leaky = join(root, 'fixtures', 'x86_64', 'build', 'leaky');

// ---- Processes ----------------------------------------------------------------------------------

interface Started {
  child: ChildProcess;
  /** "Attaching to pid N" was printed (on stdout, or stderr with --json/--folded). */
  attached: Promise<void>;
  done: Promise<Run>;
}

/** Run a command in the background, killed after timeoutMs (and at teardown). */
function start(cmd: string, args: string[], timeoutMs = 90_000, env = cliEnv()): Started {
  let attachedNow: () => void = () => {};
  const attached = new Promise<void>((resolve) => (attachedNow = resolve));
  const p = startProcess(cmd, args, {
    timeoutMs,
    env,
    onOutput: (stdout, stderr) => /Attaching to pid \d+, Ctrl\+C to quit\./.test(stdout + stderr) && attachedNow(),
  });
  // whoever waits for the attach sees the failure in the result
  const done = p.done.then((r) => (attachedNow(), r));
  return { child: p.child, attached, done };
}

/** `dwunw memleak ARGS` (the CLI passes them to build/bpf/memleak untouched). */
const dwunw = (args: string[], timeoutMs?: number): Started => start(process.execPath, [dwunwBin, 'memleak', ...args], timeoutMs);

/** State letter of a process, '' when gone. */
function stateOf(pid: number): string {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ')[0] ?? '';
  } catch {
    return '';
  }
}

/**
 * leaky, stopped (SIGSTOP) while it sleeps its initial --delay, before any round (libc mapped);
 * the caller attaches tracers with -p, then continues it.
 */
async function stoppedLeaky(args: string[]): Promise<{ pid: number; child: ChildProcess; done: Promise<Run> }> {
  const s = start(leaky, ['--delay', '3', ...args]);
  const pid = s.child.pid!;
  const libc = () => {
    try {
      return readFileSync(`/proc/${pid}/maps`, 'utf8').includes('/libc.so.6');
    } catch {
      return false;
    }
  };
  await waitFor(() => stateOf(pid) === 'S' && libc(), 60_000, `leaky (pid ${pid}) to start its delay`);
  process.kill(pid, 'SIGSTOP');
  await waitFor(() => stateOf(pid) === 'T', 60_000, `leaky (pid ${pid}) to stop`);
  return { pid, child: s.child, done: s.done };
}

/** A pid that no process has. */
function freePid(): number {
  for (let p = 4_000_000; ; p++) if (!existsSync(`/proc/${p}`)) return p;
}

// ---- JSON reports and the manifest ----------------------------------------------------------------

interface JFrame {
  pc: string;
  symbol: string | null;
  offset: number;
  module: string | null;
}
interface JStack {
  bytes: number;
  allocations: number;
  frames: JFrame[];
  kind: string;
  complete: boolean | null;
  stop: string;
  reason?: string;
  allocs?: { addr: string; size: number }[];
}
interface JReport {
  pid: number;
  unwind_mode: string;
  stacks: JStack[];
  lost: number;
  untracked: Record<string, number>;
  unwind: Record<string, unknown>;
  kernel_walk?: { events: number; from_kernel: number; fallback: number; fallback_pct: number; bad: number; by_status: Record<string, number>; table_loads: number; mmaps: number; map_bytes: number; table_bytes: number };
}

const reports = (text: string): JReport[] => jsonLines<JReport>(text);

interface Site {
  name: string;
  allocator: string;
  size: number;
  count: number;
  chain: string[][];
  incidental: boolean;
}

function loadManifest(): Site[] {
  const r = spawnSync(leaky, ['--manifest'], { encoding: 'utf8' });
  return r.stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [name, allocator, size, count, chain] = l.split('\t') as [string, string, string, string, string];
      return {
        name,
        allocator,
        size: Number(size),
        count: Number(count),
        chain: chain.split(',').map((c) => c.split('|')),
        incidental: name.startsWith('incidental'),
      };
    });
}

const names = (s: JStack): string[] => s.frames.map((f) => f.symbol ?? (f.module ? `[${f.module}]` : '?'));
const labels = (s: JStack): string[] => s.frames.map((f) => (f.symbol ? `${f.symbol}+0x${f.offset.toString(16)}` : f.module ? `[${f.module}]` : '?'));

/** How many leading frames follow the chain (all of it: complete). */
function matched(site: Site, n: string[]): number {
  let k = 0;
  while (k < site.chain.length && k < n.length && site.chain[k]!.includes(n[k]!)) k++;
  return k;
}
const completeFor = (site: Site, s: JStack): boolean => matched(site, names(s)) === site.chain.length;
const expCount = (site: Site, rounds: number): number => site.count * (site.incidental ? 1 : rounds);

/** The stacks holding a site's allocations: by chain, else (broken stacks) by the allocation size. */
function stacksOf(site: Site, rep: JReport, sites: Site[]): JStack[] {
  return rep.stacks.filter((s) => {
    if (completeFor(site, s)) return true;
    if (sites.some((o) => completeFor(o, s))) return false;
    const sizes = new Set((s.allocs ?? []).map((a) => a.size));
    if (!s.allocs && s.allocations && s.bytes % s.allocations === 0) sizes.add(s.bytes / s.allocations);
    return sizes.size === 1 && sizes.has(site.size);
  });
}

// ---- Gate ---------------------------------------------------------------------------------------

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [leaky, 'make fixtures']]);

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'memleak tests skipped');
} else {
  t.test('memleak on fixtures/x86_64/leaky', { timeout: 300_000 }, (tt) => main(tt));
}

// ---- The runs --------------------------------------------------------------------------------------

async function main(t: Test): Promise<void> {
  const sites = loadManifest();
  t.ok(sites.length >= 15, `leaky --manifest lists ${sites.length} sites`);
  const JSONA = ['--json', '-a', '-o', '0', '-T', '100000'];

  // Each scenario returns its runs; at most `POOL` of them at a time.
  const POOL = 3;
  const scenarios: Record<string, () => Promise<Record<string, Run>>> = {
    dwarf: async () => ({ r: await dwunw(['--unwind=dwarf', ...JSONA, '-c', `${leaky} 3`, '600']).done }),
    fp: async () => ({ r: await dwunw(['--unwind=fp', ...JSONA, '-c', `${leaky} 3`, '600']).done }),
    perf: async () => ({ r: await dwunw(['--perf-buffer', ...JSONA, '-c', `${leaky} 3`, '600']).done }),
    kernel: async () => ({ r: await dwunw(['--unwind=kernel', ...JSONA, '-c', `${leaky} 3`, '600']).done }),
    // -p: four tracers on one run of leaky (-C and not, dwarf and fp), all attached before it runs
    pid: async () => {
      const target = await stoppedLeaky(['2']);
      const p = String(target.pid);
      const runs = {
        dwarf: dwunw(['--unwind=dwarf', ...JSONA, '-p', p, '600']),
        dwarfC: dwunw(['--unwind=dwarf', '--json', '-C', '-T', '100000', '-p', p, '600']),
        fp: dwunw(['--unwind=fp', '--json', '-o', '0', '-T', '100000', '-p', p, '600']),
        fpC: dwunw(['--unwind=fp', '--json', '-C', '-T', '100000', '-p', p, '600']),
        kernel: dwunw(['--unwind=kernel', ...JSONA, '-p', p, '600']),
      };
      await Promise.all(Object.values(runs).map((r) => r.attached));
      process.kill(target.pid, 'SIGCONT');
      const out: Record<string, Run> = { target: await target.done };
      for (const [k, r] of Object.entries(runs)) out[k] = await r.done;
      return out;
    },
    // text, -a, -T 5, a report every second until leaky exits (before COUNT=100 reports)
    text: async () => ({ r: await dwunw(['-a', '-o', '0', '-T', '5', '-c', `${leaky} 2`, '1', '100']).done }),
    folded: async () => ({ r: await dwunw(['--folded', '-o', '0', '-T', '100000', '-c', `${leaky} 2`, '600']).done }),
    older: async () => ({ r: await dwunw(['--json', '-o', '2500', '-T', '100000', '-c', `${leaky} 4`, '600']).done }),
    size: async () => ({ r: await dwunw([...JSONA, '-z', '1000', '-Z', '5000', '-c', `${leaky} 2`, '600']).done }),
    sample: async () => ({ r: await dwunw(['--json', '-o', '0', '-s', '10', '-c', `${leaky} --rate 20000 --leak --seconds 1`, '600']).done }),
    errors: async () => ({
      badPid: await dwunw(['-p', String(freePid())], 30_000).done,
      nonRoot: await start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'env', '-u', 'NODE_OPTIONS', process.execPath, dwunwBin, 'memleak', '-c', 'true'], 30_000).done,
      nonRootDirect: await start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', memleakBin, '-p', '1'], 30_000).done,
    }),
  };
  const results: Record<string, Record<string, Run>> = {};
  const queue = Object.keys(scenarios);
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: POOL }, async () => {
      for (let k = queue.shift(); k !== undefined; k = queue.shift()) {
        try {
          results[k] = await scenarios[k]!();
        } catch (e) {
          results[k] = { error: { args: [], status: null, signal: null, stdout: '', stderr: String(e), ms: 0 } };
        }
      }
    }),
  );
  t.comment(`memleak runs: ${Math.round((Date.now() - t0) / 1000)} s`);

  // A capability missing at run time (BPF load refused, no BTF for a program type, ...)
  for (const set of Object.values(results))
    for (const r of Object.values(set)) {
      const f = memleakBpfFailure(r.stderr);
      if (f && r !== results.errors?.nonRoot && r !== results.errors?.nonRootDirect) {
        if (REQUIRE) t.fail(`DWUNW_REQUIRE_BPF=1 but memleak cannot run here: ${f}`);
        else t.pass(`memleak tests skipped: ${f}`, { skip: f });
        return;
      }
    }

  const one = (tt: Test, r: Run | undefined, what: string): JReport | null => {
    if (!r) {
      tt.fail(`${what}: no run`);
      return null;
    }
    if (r.status !== 0) {
      tt.fail(`${what}: exit status ${r.status ?? r.signal}`, { args: r.args, stderr: r.stderr.slice(0, 3000) });
      return null;
    }
    const rep = reports(r.stdout).at(-1);
    if (!rep) tt.fail(`${what}: no JSON report`, { stdout: r.stdout.slice(0, 2000), stderr: r.stderr });
    return rep ?? null;
  };

  /** Every site complete with exact sizes and counts; nothing else outstanding. */
  function checkDwarf(tt: Test, rep: JReport, rounds: number, only?: (s: Site) => boolean): void {
    const want = sites.filter(only ?? (() => true));
    const used = new Set<JStack>();
    for (const site of want) {
      const st = rep.stacks.filter((s) => completeFor(site, s));
      const n = expCount(site, rounds);
      if (st.length !== 1) {
        tt.fail(`${site.name}: ${st.length} stacks with its chain (want 1)`, {
          chain: site.chain.map((c) => c.join('|')).join(','),
          stacks: rep.stacks.map((s) => `${s.bytes}/${s.allocations}: ${names(s).slice(0, 14).join(',')}`),
        });
        continue;
      }
      const s = st[0]!;
      used.add(s);
      tt.ok(s.kind === 'dwarf' && s.complete === true && s.stop === 'OK', `${site.name}: DWARF stack complete down to ${site.chain.at(-1)![0]} (${s.frames.length} frames)`, {
        kind: s.kind,
        stop: s.stop,
      });
      tt.same([s.allocations, s.bytes], [n, n * site.size], `${site.name}: ${n} x ${site.size} bytes`);
      if (s.allocs) tt.ok(s.allocs.every((a) => a.size === site.size), `${site.name}: every allocation is ${site.size} bytes`);
    }
    const extra = rep.stacks.filter((s) => !used.has(s));
    tt.same(
      extra.map((s) => `${s.bytes} bytes in ${s.allocations}: ${names(s).slice(0, 8).join(',')} ${s.reason ?? ''}`),
      [],
      'no other stack outstanding (freed allocations, the 16-byte block realloc freed, mmap inside malloc)',
    );
    tt.equal(rep.lost, 0, 'no lost records');
    tt.same(rep.untracked, { allocs_full: 0, no_pending: 0, combined_full: 0, stack_table_full: 0 }, 'nothing untracked');
  }

  function fpCompleteness(rep: JReport): string {
    let complete = 0;
    const broken: string[] = [];
    for (const site of sites) {
      const st = stacksOf(site, rep, sites);
      if (st.length && st.every((s) => completeFor(site, s))) complete++;
      else broken.push(`${site.name}: ${st.length ? `${matched(site, names(st[0]!))}/${site.chain.length} frames` : 'no stack'}`);
    }
    return `fp: ${complete}/${sites.length} complete (${rep.stacks.length} stacks; ${broken.join('; ')})`;
  }

  let dwarfRep: JReport | null = null;

  t.test('dwarf mode (-c "leaky 3"): every stack complete, sizes and counts exact', async (tt) => {
    const r = results.dwarf?.r;
    const rep = one(tt, r, 'memleak --json -a -c');
    if (!rep || !r) return;
    dwarfRep = rep;
    const m = /^Attaching to pid (\d+), Ctrl\+C to quit\.$/m.exec(r.stderr);
    tt.ok(m, 'Attaching line on stderr (--json)');
    tt.equal(rep.pid, Number(m?.[1]), 'the report names the pid of the command');
    tt.match(r.stderr, new RegExp(`^memleak: target pid ${rep.pid} exited$`, 'm'), 'says the command exited');
    tt.equal(rep.unwind_mode, 'dwarf');
    checkDwarf(tt, rep, 3);
    // the large malloc is the malloc (300000 bytes, frame 0 its caller big_2), not glibc's mmap in it
    const big = rep.stacks.find((s) => s.frames[0]?.symbol === 'big_2');
    tt.same(big && [big.allocations, big.bytes, big.frames[1]?.symbol], [3, 900000, 'big_1'], 'large malloc recorded as itself: 3 x 300000 from big_2');
    const inner = rep.stacks.filter((s) => s.frames.some((f) => /^(sysmalloc|_int_malloc|__libc_malloc|malloc|_int_realloc|__libc_realloc|realloc|__mmap|mmap64)$/.test(f.symbol ?? '')));
    tt.same(inner.map(names), [], 'no allocation recorded inside the allocator (its nested mmap)');
    // -a: the allocations listed under each stack
    const addrs = new Set<string>();
    let ok = true;
    for (const s of rep.stacks) {
      if (!s.allocs || s.allocs.length !== s.allocations || s.allocs.reduce((n, a) => n + a.size, 0) !== s.bytes) ok = false;
      for (const a of s.allocs ?? []) addrs.add(a.addr);
    }
    tt.ok(ok, '-a: each stack lists its allocations, sizes adding up to its bytes');
    tt.equal(addrs.size, rep.stacks.reduce((n, s) => n + s.allocations, 0), '-a: addresses are distinct');
  });

  t.test('fp mode on the same workload (for comparison)', async (tt) => {
    const rep = one(tt, results.fp?.r, 'memleak --unwind=fp');
    if (!rep) return;
    tt.equal(rep.unwind_mode, 'fp', 'ran in fp mode');
    tt.ok(rep.stacks.every((s) => s.kind === 'fp' || s.kind === 'none'), 'frame-pointer stacks');
    // recording does not depend on the unwinding: fp mode holds the very blocks dwarf mode does,
    // each under a stack with at least its caller's pc (an empty report is a failure)
    const want = sites.reduce((a, s) => a + expCount(s, 3), 0);
    const wantBytes = sites.reduce((a, s) => a + expCount(s, 3) * s.size, 0);
    const got = rep.stacks.reduce((a, s) => a + s.allocations, 0);
    const gotBytes = rep.stacks.reduce((a, s) => a + s.bytes, 0);
    tt.same([got, gotBytes], [want, wantBytes], `fp: every block of leaky's sites recorded (${got} blocks, ${gotBytes} bytes)`);
    tt.equal(rep.lost, 0, 'fp: no lost records');
    // bpf_get_stackid can fail for one event (EFAULT: the CPU's callchain buffer held by another
    // program's walk, preempted, when CPU-heavy tests run beside this one): such a block stands
    // under a labeled lost stack, never under an empty one
    const empty = rep.stacks.filter((s) => s.frames.length === 0);
    const fpLost = empty.filter((s) => /^\[stack lost: (frame-pointer|bpf_get_stackid)/.test(s.reason ?? ''));
    tt.same(empty.filter((s) => !fpLost.includes(s)).map((s) => `${s.bytes} ${s.reason ?? ''}`), [], 'fp: every stack has at least its caller\'s frame, or says why it was lost');
    tt.ok(fpLost.reduce((a, s) => a + s.allocations, 0) <= 3, `fp: at most 3 blocks under a lost frame-pointer stack (${fpLost.map((s) => `${s.allocations} x ${s.reason}`).join('; ') || 'none'})`);
    tt.comment(fpCompleteness(rep));
  });

  t.test('--perf-buffer: the same stacks as the ring buffer', async (tt) => {
    const rep = one(tt, results.perf?.r, 'memleak --perf-buffer');
    if (!rep) return;
    checkDwarf(tt, rep, 3);
    if (!dwarfRep) return;
    const key = (rep2: JReport) =>
      rep2.stacks.map((s) => `${s.bytes} ${s.allocations} ${s.kind} ${s.stop} ${labels(s).join(' ')}`).sort();
    tt.same(key(rep), key(dwarfRep), 'same frames (symbol+offset), bytes and counts');
  });

  /** The same stacks as dwarf mode's report of the same workload: frames, bytes and counts. */
  const sameAsDwarf = (tt: Test, rep: JReport, dw: JReport | null, what: string): void => {
    if (!dw) return;
    const key = (r: JReport) => r.stacks.map((s) => `${s.bytes} ${s.allocations} ${s.kind} ${s.stop} ${labels(s).join(' ')}`).sort();
    tt.same(key(rep), key(dw), `${what}: the same frames (symbol+offset), bytes and counts as dwarf mode`);
  };

  /**
   * --unwind=kernel: the least share of walker events walked in the kernel. -p (attached before
   * leaky runs: its tables are in first): 98 of 98 measured. -c: leaky's start-up allocations
   * come before its tables are loaded (no-proc, no-mapping): 147 of 256 (57 %) at load 15 on 2
   * cores, 96 of 256 (37 %) at load 34.
   */
  const KERNEL_SHARE = { c: 0.15, p: 0.9 };
  /** The walker's events all accounted for: from the walker or fallen back, none malformed. */
  const checkKernelWalk = (tt: Test, rep: JReport, what: string, minShare: number): void => {
    const k = rep.kernel_walk;
    if (!k) return void tt.fail(`${what}: no kernel_walk object in the report`);
    tt.equal(k.events, k.from_kernel + k.fallback, `${what}: every walker event from the walker or the snapshot (${k.from_kernel} + ${k.fallback})`);
    tt.equal(k.bad, 0, `${what}: no malformed event`);
    // a bounded fallback share, from measured runs (KERNEL_SHARE); and the fallbacks are the
    // tables not loaded yet (no-proc, no-mapping), any other reason at most 1 % of the events
    const other = Object.entries(k.by_status).filter(([st]) => !['ok', 'depth', 'no-code', 'no-proc', 'no-mapping'].includes(st));
    tt.ok(other.reduce((a, [, n]) => a + n, 0) <= 0.01 * k.events, `${what}: fallbacks other than before the tables load <= 1 % (${JSON.stringify(Object.fromEntries(other))})`);
    tt.ok(k.from_kernel >= minShare * k.events, `${what}: stacks walked in the kernel (${k.from_kernel} of ${k.events} >= ${100 * minShare} %, fallback ${k.fallback_pct} %, by status ${JSON.stringify(k.by_status)})`);
    tt.equal(Object.values(k.by_status).reduce((a, b) => a + b, 0), k.events, `${what}: stops by reason add up`);
    tt.ok(k.table_bytes > 0 && k.table_bytes <= k.map_bytes, `${what}: tables ${k.table_bytes} B within ${k.map_bytes} B of maps`);
  };

  t.test('--unwind=kernel (-c "leaky 3"): the dwarf mode stacks, the fallback counted', async (tt) => {
    const r = results.kernel?.r;
    const rep = one(tt, r, 'memleak --unwind=kernel -c');
    if (!rep || !r) return;
    tt.equal(rep.unwind_mode, 'kernel');
    checkDwarf(tt, rep, 3);
    sameAsDwarf(tt, rep, dwarfRep, '-c');
    checkKernelWalk(tt, rep, '-c', KERNEL_SHARE.c);
  });

  t.test('-p PID (attached before the target runs), -C against the plain report', async (tt) => {
    const rs = results.pid;
    if (!rs || rs.error) {
      tt.fail('the -p scenario failed', { error: rs?.error?.stderr });
      return;
    }
    tt.equal(rs.target!.status, 0, 'leaky ran to the end');
    const dw = one(tt, rs.dwarf, 'memleak -p');
    const dwC = one(tt, rs.dwarfC, 'memleak -p -C');
    const fp = one(tt, rs.fp, 'memleak --unwind=fp -p');
    const fpC = one(tt, rs.fpC, 'memleak --unwind=fp -p -C');
    if (dw) {
      tt.equal(dw.pid, rs.target!.pid, 'the report names the pid given');
      checkDwarf(tt, dw, 2);
    }
    // all four read their maps after leaky exited: nothing was freed in between
    const agg = (r: JReport) => r.stacks.map((s) => `${s.kind} ${s.stop} ${s.frames.map((f) => f.pc).join(' ')}: ${s.bytes} bytes in ${s.allocations}`).sort();
    if (dw && dwC) tt.same(agg(dwC), agg(dw), 'dwarf -C: the same per-stack totals as the report without -C');
    if (fp && fpC) tt.same(agg(fpC), agg(fp), 'fp -C (the aggregate kept in BPF): the same per-stack totals');
    if (dwC) tt.ok(dwC.stacks.every((s) => s.allocs === undefined), '-C lists no allocations');
    for (const k of ['dwarf', 'dwarfC', 'fp', 'fpC', 'kernel']) tt.match(rs[k]!.stderr, /memleak: target pid \d+ exited/, `${k}: saw the target exit`);
    // --unwind=kernel on the same run: tables loaded before it ran, so the walker did the stacks
    const kw = one(tt, rs.kernel, 'memleak --unwind=kernel -p');
    if (kw) {
      checkDwarf(tt, kw, 2);
      sameAsDwarf(tt, kw, dw, '-p');
      checkKernelWalk(tt, kw, '-p', KERNEL_SHARE.p);
    }
  });

  t.test('text output; the target exits mid-trace (before COUNT reports)', async (tt) => {
    const r = results.text?.r;
    if (!r) return void tt.fail('no run');
    tt.equal(r.status, 0, 'exit status 0', { stderr: r.stderr });
    const pid = /^Attaching to pid (\d+), Ctrl\+C to quit\.$/.exec(r.stdout.split('\n')[0] ?? '')?.[1];
    tt.ok(pid, 'first line: Attaching to pid N, Ctrl+C to quit.');
    tt.same(
      r.stderr.split('\n').filter((l) => l.trim()),
      [`memleak: target pid ${pid} exited`],
      'stderr: one line, the target exited',
    );
    const lines = r.stdout.split('\n').slice(1);
    if (lines.at(-1) === '') lines.pop();
    const pats = [
      /^\[\d{1,2}:\d{1,2}:\d{1,2}\] Top \d+ stacks with outstanding allocations:$/,
      /^\d+ bytes in \d+ allocations from stack$/,
      /^\taddr = 0x[0-9a-f]+ size = \d+$/,
      /^\t\d+ \[<[0-9a-f]{16}>\] (\S+\+0x[0-9a-f]+ \[\/[^\]]+\]|\[unknown\]( \[\/[^\]]+\]| \[anon\])?)( \[(live|fp|prologue|lr)\])?$/,
      // the default (auto) walks in the kernel here: its summary, and the walker's line (the
      // first allocations, before the process's tables loaded, fell back: counted by reason)
      /^(dwarf|kernel): \d+ stacks, \d+ complete, \d+ stopped early.*, \d+ with frames read live after the event; \d+ records, [\d.]+ us\/unwind, \d+ patched$/,
      /^kernel walker: \d+ events, [\d.]+% fell back to the snapshot( \([a-z-]+ \d+(, [a-z-]+ \d+)*\))?; tables [\d.]+ MiB of [\d.]+ MiB of maps, \d+ modules$/,
      /^frames marked \[(live|fp|prologue|lr)\] /,
      // -c runs the command through sh: the shell's blocks went with its image at the exec
      /^\d+ allocations \(\d+ bytes\) not shown: their image was replaced by exec \(its memory is gone\)$/,
      // following a tree (-c): what is held per process, freed at each one's exit
      /^held: \d+ processes' mappings \([\d.]+ KiB\), \d+ files open; \d+ views forked, \d+ freed \(\d+ of processes gone without an exit record\)$/,
    ];
    const odd = lines.filter((l) => !pats.some((p) => p.test(l)));
    tt.same(odd, [], 'every line is in the upstream format (header, stack, addr, frame, with a marker where it rests on live memory or no CFI), the legend or the dwarf summary');
    const heads = lines.map((l, i) => (pats[0]!.test(l) ? i : -1)).filter((i) => i >= 0);
    tt.ok(heads.length >= 2, `a report every second until the exit (${heads.length} reports)`);
    // the last report: -T 5, largest first, each with its -a lines
    const last = lines.slice(heads.at(-1));
    tt.match(last[0], / Top 5 stacks with outstanding allocations:$/, 'last report: Top 5');
    const blocks: { bytes: number; count: number; addrs: number[]; frames: string[] }[] = [];
    for (const l of last.slice(1)) {
      let m: RegExpExecArray | null;
      if ((m = /^(\d+) bytes in (\d+) allocations from stack$/.exec(l))) blocks.push({ bytes: +m[1]!, count: +m[2]!, addrs: [], frames: [] });
      else if ((m = /^\taddr = 0x[0-9a-f]+ size = (\d+)$/.exec(l))) blocks.at(-1)?.addrs.push(+m[1]!);
      else if ((m = /^\t(\d+) \[<[0-9a-f]{16}>\] (\S+?)\+0x/.exec(l))) blocks.at(-1)?.frames.push(m[2]!);
    }
    tt.same(
      blocks.map((b) => [b.bytes, b.count, b.frames[0]]),
      [
        [8392704, 1, 'pthread_create'],
        [600000, 2, 'big_2'],
        [131072, 2, 'mm_2'],
        [8192, 2, 'aa_5'],
        [6008, 2, 'pm_3'],
      ],
      'the five largest stacks, by bytes: thread stack, large malloc, mmap, aligned_alloc, posix_memalign',
    );
    tt.ok(
      blocks.every((b) => b.addrs.length === b.count && b.addrs.reduce((n, a) => n + a, 0) === b.bytes),
      '-a: one addr line per allocation, sizes adding up',
    );
    const d12 = blocks.find((b) => b.frames[0] === 'aa_5');
    tt.same(d12?.frames.slice(0, 7), ['aa_5', 'aa_4', 'aa_3', 'aa_2', 'aa_1', 'round_once', 'main'], 'frames down to main');
  });

  t.test('--folded', async (tt) => {
    const r = results.folded?.r;
    if (!r) return void tt.fail('no run');
    tt.equal(r.status, 0, 'exit status 0', { stderr: r.stderr });
    tt.match(r.stderr, /^Attaching to pid \d+, Ctrl\+C to quit\.$/m, 'Attaching line on stderr');
    const lines = r.stdout.split('\n');
    tt.ok(lines.every((l) => l === '' || /^\S+ \d+$/.test(l)), 'lines: root;...;leaf BYTES, a blank line after the report');
    const folded = lines.filter(Boolean).map((l) => {
      const sp = l.lastIndexOf(' ');
      return { frames: l.slice(0, sp).split(';').reverse(), bytes: Number(l.slice(sp + 1)) };
    });
    for (const site of sites) {
      const hits = folded.filter((f) => matched(site, f.frames) === site.chain.length);
      tt.same(
        hits.map((h) => h.bytes),
        [expCount(site, 2) * site.size],
        `${site.name}: ${hits[0] ? hits[0].frames.slice(0, site.chain.length + 3).reverse().join(';') : 'missing'}`,
      );
    }
    tt.equal(folded.length, sites.length, 'one line per site, nothing else');
    tt.ok(folded.every((f) => f.frames.at(-1) === '_start' || f.frames.at(-1) === 'clone3'), 'roots: _start or clone3');
  });

  t.test('-o AGE_MS is in milliseconds', async (tt) => {
    const rep = one(tt, results.older?.r, 'memleak -o 2500');
    if (!rep) return;
    // leaky 4: rounds at 0, 1, 2, 3 s, exit at 4 s: rounds 0 and 1 are older than 2.5 s at the
    // last report, rounds 2 and 3 younger (in nanoseconds, as upstream, all four would show)
    const d12 = sites.find((s) => s.name === 'own_d12')!;
    const st = rep.stacks.find((s) => completeFor(d12, s));
    tt.ok(st && st.allocations >= 1 && st.allocations <= 3, `own_d12: ${st?.allocations ?? 0} of 4 rounds older than 2.5 s (expected 2)`);
    const total = rep.stacks.reduce((n, s) => n + s.allocations, 0);
    const all = sites.reduce((n, s) => n + expCount(s, 4), 0);
    tt.ok(total > 0 && total < all, `${total} of ${all} allocations old enough`);
  });

  t.test('-z MIN -Z MAX', async (tt) => {
    const rep = one(tt, results.size?.r, 'memleak -z 1000 -Z 5000');
    if (!rep) return;
    checkDwarf(tt, rep, 2, (s) => s.size >= 1000 && s.size <= 5000);
    tt.ok(rep.stacks.flatMap((s) => s.allocs ?? []).every((a) => a.size >= 1000 && a.size <= 5000), 'only sizes in [1000, 5000]');
  });

  t.test('-s N: one allocation in N', async (tt) => {
    const r = results.sample?.r;
    const rep = one(tt, r, 'memleak -s 10');
    if (!rep || !r) return;
    const n = Number(/^leaky: (\d+) allocations/m.exec(r.stderr)?.[1]);
    tt.ok(n > 1000, `leaky made ${n} allocations`);
    const st = rep.stacks.find((s) => s.frames.slice(0, 4).map((f) => f.symbol).join(',') === 'rate_3,rate_2,rate_1,main');
    const got = st?.allocations ?? 0;
    tt.ok(Math.abs(got - n / 10) <= n / 10 * 0.15, `sampled ${got} of ${n} (expected ~${Math.round(n / 10)}, within 15 %)`);
    tt.equal(st?.bytes, got * 64, '64 bytes each');
    tt.equal(rep.lost, 0, 'no lost records');
  });

  t.test('errors: one line, each its exit status (README.md)', async (tt) => {
    const rs = results.errors;
    if (!rs || rs.error) return void tt.fail('the errors scenario failed', { error: rs?.error?.stderr });
    const oneLine = (r: Run, re: RegExp, what: string, status = /bad pid/.test(what) ? 3 : 7) => {
      tt.equal(r.status, status, `${what}: exit status ${status}`);
      tt.equal(r.stdout, '', `${what}: nothing on stdout`);
      const ls = r.stderr.split('\n').filter((l) => l.length);
      tt.equal(ls.length, 1, `${what}: one line on stderr`, { stderr: r.stderr });
      tt.match(ls[0] ?? '', re, `${what}: ${ls[0]}`);
    };
    oneLine(rs.badPid!, /^memleak: pid \d+: no such process$/, 'bad pid');
    oneLine(rs.nonRoot!, /^memleak: need root \(CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE\)$/, 'non-root (dwunw memleak)');
    oneLine(rs.nonRootDirect!, /^memleak: need root \(CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE\)$/, 'non-root (build/bpf/memleak)');
  });
}
