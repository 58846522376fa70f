// `dwunw offcputime` end to end, against the program's own measure: fixtures/x86_64/waits (built
// -O2 -fomit-frame-pointer -g) waits in known chains (nanosleep, a mutex another thread holds, a
// pipe read, poll, a page-cache-cold pread; two helper threads sleeping; with --fork a child
// process sleeping while main waits for it) and prints, per chain, its wall time and its CPU time
// around each wait. Checked, for --unwind=dwarf and --unwind=kernel, with the command run by
// `-- waits --fork` (so the forked child is followed): every chain's user stack is complete to
// main's start or the thread start, each chain's off-CPU time is within 10 % (and 5 us a wait) of
// what the program measured (wall - CPU), and the child's chain is there under its own pid. Kernel
// mode both ways: a record per span (--no-aggregate) and its default, the spans of complete walks
// summed in BPF maps and drained (--aggregate): the same checks, and every switch-out accounted for
// (summed in the kernel + records + counted losses + out of -m/-M + still off CPU at the end).
// Usage errors: exit 2, one line naming `dwunw offcputime --help`.
//
// Needs root, the kernel's BTF and BPF: without them the checks that trace are skipped with the
// reason, unless DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
//
// `dwunw profile --wall` (offcputime --wall: on-CPU samples beside the spans) on `waits --mixed`
// (main -> chain_mixed spinning MS of CPU then sleeping MS, in turn, measuring its own wall and
// CPU time): chain_mixed's on/off split within 5 points of the program's, its wall time within
// 10 %, every on-CPU sample accounted for (taken = received + lost, all in the entries), the folded
// lines' [off-CPU] leaf and the pprof's state label carrying the same split.
//
// A process whose main thread exits first (waits --leader-exit: main pthread_exit()s, orphan_thread
// goes on sleeping), --unwind=kernel -p PID (its tables loaded before the leader exits): the
// process's walker tables stay until its last thread exits, so every one of the orphan's spans is
// walked in the kernel (frames "kernel-walk"), none fallen back to the snapshot; the summary's
// kernel_walk figures add up.
//
// --waker (offwaketime) on waits: main's pipe reads are woken by writer_thread's write, its mutex
// waits by holder_thread's unlock, its nanosleeps by the timer interrupt ([interrupt]); the waker
// stacks complete, nearly all of each wait's time under its known waker.
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, root, type Run, skipOrFail, start, startDwunw, waitFor } from './helpers.js';
import { OFF_CPU_FRAME, parseProfileJson, type PrEntry } from '../lib/profile.js';

const bin = join(root, 'build', 'bpf', 'offcputime');
const waits = join(root, 'fixtures', 'x86_64', 'build', 'waits');

const dwunw = (args: string[], timeoutMs = 120_000): Promise<Run> =>
  start(process.execPath, [dwunwBin, 'offcputime', ...args], { timeoutMs, env: cliEnv() }).done;

t.test('usage errors: exit 2, one line naming dwunw offcputime --help', async (tt) => {
  const cases: [string[], RegExp][] = [
    [['--frobnicate'], /^offcputime: unknown option --frobnicate /],
    [['-m', 'abc'], /^offcputime: -m: not a number: abc /],
    [['-M'], /^offcputime: option -M needs a value /],
    [['-U', '-K'], /^offcputime: -U and -K exclude each other /],
    [['-u', '-k'], /^offcputime: -u and -k exclude each other /],
    [['-m', '100', '-M', '10'], /^offcputime: -m 100 is above -M 10 /],
    [['--unwind=lbr'], /^offcputime: --unwind: expected auto, kernel, dwarf, fp or freeze, got lbr /],
    [['--unwind=freeze'], /^offcputime: --unwind=freeze stops the traced threads: give -p, -t or -- COMMAND /],
    [['0'], /^offcputime: duration: 0 out of range /],
    [['--html'], /^dwunw: offcputime: --html: a file name is expected /],
    [['-F', '99'], /^offcputime: -F is for --wall /],
    [['--unwind=dwarf', '--aggregate'], /^offcputime: --aggregate sums the in-kernel walks' spans: it needs --unwind=kernel and user stacks /],
    [['--unwind=kernel', '--aggregate', '--waker'], /^offcputime: --aggregate and --waker exclude each other /],
  ];
  for (const [args, re] of cases) {
    const r = await dwunw(args);
    const lines = r.stderr.split('\n').filter(Boolean);
    tt.equal(r.status, 2, `${args.join(' ')}: exit status 2`);
    tt.equal(lines.length, 1, `${args.join(' ')}: one line`);
    tt.match(lines[0] ?? '', re, `${args.join(' ')}: ${lines[0]}`);
    tt.match(lines[0] ?? '', / \(see dwunw offcputime --help\)$/, `${args.join(' ')}: names the help`);
  }
  const dd = await start(bin, ['--'], { timeoutMs: 30_000 }).done;
  tt.equal(dd.status, 2, '-- without a command: exit status 2');
  tt.match(dd.stderr, /^offcputime: --: a command is expected after it \(see dwunw offcputime --help\)\n$/, '-- without a command: one line');
  const h = await dwunw(['--help']);
  tt.equal(h.status, 0, '--help: exit status 0');
  tt.match(h.stdout, /^Usage: offcputime \[OPTION\.\.\.\] \[DURATION\] \[-- COMMAND \[ARG\.\.\.\]\]$/m, 'its usage');
  tt.match(h.stdout, /--pprof=FILE/, 'and the CLI\'s views');
});

/** waits' own lines: "[child ]wait CHAIN FUNCTION WALL_US CPU_US COUNT" -> off-CPU us by who+function. */
function measured(stdout: string): Map<string, { off: number; count: number }> {
  const m = new Map<string, { off: number; count: number }>();
  for (const line of stdout.split('\n')) {
    const x = /^(child )?wait \w+ (\w+) (\d+) (\d+) (\d+)$/.exec(line);
    if (x) m.set(`${x[1] ? 'child' : 'main'} ${x[2]}`, { off: Number(x[3]) - Number(x[4]), count: Number(x[5]) });
  }
  return m;
}

/** offcputime --aggregate's summary figures. */
interface OcAgg { spans: number; counted_in_bpf: number; map_full: number; spans_lost: number; keys: number; drains: number; no_stack: number; drain_bytes: number }

/** The chain functions whose time the test checks (waits' noinline functions). */
const CHAINS = ['wait_sleep', 'wait_mutex', 'wait_pipe', 'wait_poll', 'wait_pread', 'wait_child', 'holder_hold', 'writer_pause'];

function check(tt: Test, r: Run, mode: string, unwind = mode): void {
  tt.equal(r.status, 0, `${mode}: exit status 0 ${r.stderr.slice(-400)}`);
  const own = measured(r.stdout);
  tt.equal(own.size, 7, `${mode}: the program's seven measured chains (${[...own.keys()].join(', ')})`);
  const out = parseProfileJson(r.stdout);
  tt.ok(out.summary, `${mode}: a summary`);
  tt.equal(out.summary?.unit, 'microseconds', `${mode}: counts are microseconds`);
  tt.equal(out.summary?.unwind, unwind, `${mode}: the summary says the unwinder`);
  const pids = [...new Set(out.entries.map((e) => e.pid))].sort((a, b) => a - b);
  tt.equal(pids.length, 2, `${mode}: two processes followed (the command and its fork): ${pids.join(' ')}`);
  const [mainPid, childPid] = pids;
  const sums = new Map<string, { us: number; incomplete: PrEntry[] }>();
  const others: string[] = []; // the child's stacks in no chain (shown when a check fails)
  for (const e of out.entries) {
    const fns = (e.user?.frames ?? []).map((f) => f.symbol ?? '');
    const fn = fns.find((s) => CHAINS.includes(s));
    if (!fn) {
      if (e.pid === childPid) others.push(`${e.count} us: ${fns.join(';')} ${e.user?.reason ?? ''}`);
      continue;
    }
    // preempted outside the program's two clock reads (in the chain function's own code, or in
    // the clock reads): off CPU, but not in what the program measured (a loaded machine)
    const outside = fns[0] === fn || (e.user?.frames ?? []).some((f) => /clock_gettime|clock_ns|now_ns|^note$/.test(f.symbol ?? '') || /vdso/.test(f.module ?? ''));
    if (outside) {
      if (!e.user?.complete) (sums.get('outside') ?? sums.set('outside', { us: 0, incomplete: [] }).get('outside')!).incomplete.push(e);
      continue;
    }
    const key = `${e.pid === childPid ? 'child' : 'main'} ${fn}`;
    const s = sums.get(key) ?? { us: 0, incomplete: [] };
    s.us += e.count;
    if (!e.user?.complete) s.incomplete.push(e);
    sums.set(key, s);
  }
  for (const [key, want] of [...own, ['main holder_hold', null], ['main writer_pause', null]] as const) {
    const got = sums.get(key);
    tt.ok(got, `${mode}: ${key} seen`);
    if (!got) continue;
    tt.same(
      got.incomplete.map((e) => `${e.user?.stop} ${(e.user?.frames ?? []).map((f) => f.symbol).join(';')}`),
      [],
      `${mode}: ${key}: every stack complete to the start of main or of the thread`,
    );
    if (!want) continue;
    // 10 %, and 5 us a wait: the switch itself is on neither side of the two clocks (a page-cache-
    // cold pread on a VM's host-cached disk waits ~30 us, where that is the whole difference)
    const ratio = got.us / want.off;
    const slack = Math.max(0.1 * want.off, 5 * want.count);
    if (key.endsWith('wait_pread')) {
      // A cold pread waits ~30 us: there the program's wall - thread CPU also holds what the
      // scheduler never saw as off CPU (a VM's steal time, interrupts on the thread's CPU), up to
      // 60-75 % of it in a clean-clone run (ratio 0.25-0.40). So the program's measure bounds it
      // from above only; the waits were seen and their stacks are complete (above).
      tt.ok(got.us > 0 && got.us <= want.off + slack, `${mode}: ${key}: ${got.us} us off CPU, at most the program's ${want.off} us (${want.count} waits): ratio ${ratio.toFixed(3)}`, { others });
      continue;
    }
    tt.ok(Math.abs(got.us - want.off) <= slack, `${mode}: ${key}: ${got.us} us off CPU, the program measured ${want.off} us (${want.count} waits): ratio ${ratio.toFixed(3)}`, { others });
  }
  tt.same((sums.get('outside')?.incomplete ?? []).map((e) => (e.user?.frames ?? []).map((f) => f.symbol).join(';')), [], `${mode}: preempted in the chains outside the waits: complete too`);
  tt.ok(mainPid && childPid && mainPid < childPid, `${mode}: the child has its own pid`);
}

const why = bpfUnavailable('offcputime needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [
  [bin, 'make bpf'],
  [waits, 'make fixtures'],
]);
if (why) {
  skipOrFail(t, why, 'offcputime tests skipped');
} else {
  for (const mode of ['dwarf', 'kernel']) {
    // kernel mode: a record per span (--no-aggregate); summed in the kernel below
    t.test(`--unwind=${mode} -- waits --fork: complete chains, the program's own time`, async (tt) => {
      const file = join('/tmp', `dwunw-offcpu-${process.pid}-${mode}.dat`);
      const r = await dwunw([`--unwind=${mode}`, ...(mode === 'kernel' ? ['--no-aggregate'] : []), '--json', '--', waits, '--fork', '--file', file]);
      rmSync(file, { force: true });
      check(tt, r, mode);
      tt.notOk((parseProfileJson(r.stdout).summary as unknown as { aggregated?: OcAgg } | undefined)?.aggregated, `${mode}: a record per span`);
    });
  }
  t.test('--unwind=kernel (--aggregate, its default) -- waits --fork: the same chains and times, every switch-out accounted for', async (tt) => {
    const file = join('/tmp', `dwunw-offcpu-${process.pid}-agg.dat`);
    const r = await dwunw(['--unwind=kernel', '--json', '--', waits, '--fork', '--file', file]); // the default
    rmSync(file, { force: true });
    check(tt, r, 'kernel --aggregate', 'kernel');
    const s = parseProfileJson(r.stdout).summary as unknown as Record<string, number> & { aggregated?: OcAgg } | undefined;
    const a = s?.aggregated;
    tt.ok(a, 'the summary has the aggregation\'s figures');
    if (!s || !a) return;
    // the complete walks' spans summed in the kernel, the rest (walks that fell back: a forked
    // child before its tables load) as records
    tt.ok(a.counted_in_bpf > 0, `spans summed in the kernel: ${a.counted_in_bpf} of ${s.switch_outs_bpf} switch-outs (${a.keys} keys, ${a.drains} drains), ${s.span_records} as records`);
    tt.equal(a.spans, a.counted_in_bpf, 'every span summed in the kernel drained');
    tt.equal(a.no_stack, 0, 'every drained key found its stack');
    const lost = s.spans_lost; // ring buffer, thread table or count map full (a.spans_lost among them)
    tt.equal(s.switch_outs_bpf, a.counted_in_bpf + s.span_records + lost + s.out_of_range + s.still_off,
      `every switch-out accounted for: ${s.switch_outs_bpf} = ${a.counted_in_bpf} summed in the kernel + ${s.span_records} records + ${lost} lost + ${s.out_of_range} out of -m/-M + ${s.still_off} still off CPU at the end`);
    tt.equal(s.switches, a.spans + s.span_records, `the spans summed in the report: those drained + the records (${s.switches})`);
  });
  t.test('--unwind=fp -f: folded lines in microseconds, as libbpf-tools offcputime', async (tt) => {
    const file = join('/tmp', `dwunw-offcpu-${process.pid}-fp.dat`);
    const r = await dwunw(['--unwind=fp', '-f', '--', waits, '--file', file]);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const lines = r.stdout.split('\n').filter((l) => /^waits;/.test(l));
    tt.ok(lines.length > 0, 'folded lines of waits');
    for (const l of lines) tt.match(l, /^waits;.+ \d+$/, `comm;frames... US: ${l.slice(-60)}`);
    tt.ok(lines.some((l) => /;__schedule \d+$/.test(l)), 'kernel stacks end (leaf) at __schedule, the tracing frames left out');
    tt.notOk(lines.some((l) => /;-;/.test(l)), 'no "-" between user and kernel frames without -d');
    const own = measured(r.stdout);
    const total = [...own.values()].reduce((a, v) => a + v.off, 0);
    const got = lines.reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    tt.ok(got >= 0.9 * total, `the waits' time is all there: ${got} us in all, the program's chains ${total} us`);
  });
  t.test('--unwind=fp -f --pprof FILE: the folded lines offcputime made (-f --json) on stdout, the pprof beside', async (tt) => {
    const file = join('/tmp', `dwunw-offcpu-${process.pid}-fpv.dat`);
    const pb = join('/tmp', `dwunw-offcpu-${process.pid}.pb.gz`);
    try {
      const r = await dwunw(['--unwind=fp', '-f', '--pprof', pb, '--', waits, '--file', file]);
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
      const lines = r.stdout.split('\n').filter(Boolean);
      tt.ok(lines.length > 0, 'folded lines');
      tt.same(lines.filter((l) => !/^[^{].*;.+ \d+$/.test(l)), [], 'only folded lines (no NDJSON, no summary) on stdout');
      tt.ok(lines.some((l) => /^waits;.+;__schedule \d+$/.test(l)), 'waits\' stacks, kernel leaf __schedule');
      tt.ok(existsSync(pb) && statSync(pb).size > 100, `pprof written: ${pb}`);
      tt.match(r.stderr, /offcputime: wrote .+ \(pprof, \d+ stacks\)/, 'said on stderr');
    } finally {
      rmSync(pb, { force: true });
      rmSync(file, { force: true });
    }
  });
  t.test('profile --wall -f --pprof -- waits --mixed: on/off split of the program\'s own, every sample accounted for', async (tt) => {
    const pb = join('/tmp', `dwunw-wall-${process.pid}.pb.gz`);
    try {
      const r = await start(process.execPath, [dwunwBin, 'profile', '--wall', '-F', '499', '-f', '--json', '--pprof', pb, '--', waits, '--mixed', '--rounds', '30', '--ms', '10'], {
        timeoutMs: 120_000,
        env: cliEnv(),
      }).done;
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-400)}`);
      const own = /^mixed (\d+) (\d+) (\d+)$/m.exec(r.stdout);
      tt.ok(own, 'the program\'s own line: mixed WALL_US CPU_US ROUNDS');
      const out = parseProfileJson(r.stdout);
      const w = out.summary?.wall;
      tt.ok(w, 'a summary with the wall split');
      if (!own || !w) return;
      const [wallUs, cpuUs] = [Number(own[1]), Number(own[2])];
      // every on-CPU sample: taken in BPF = received + lost; received = summed in the entries
      tt.equal(w.on_samples_bpf, w.on_records + w.on_lost, `samples taken ${w.on_samples_bpf} = received ${w.on_records} + lost ${w.on_lost}`);
      tt.equal(w.on_samples, w.on_records, 'every sample received is in the profile');
      const onEntries = out.entries.filter((e) => e.state === 'on');
      tt.equal(onEntries.reduce((a, e) => a + (e.samples ?? 0), 0), w.on_samples, 'the entries\' samples add up to the summary\'s');
      tt.same(out.entries.filter((e) => e.state !== 'on' && e.state !== 'off').length, 0, 'every entry says on or off');
      tt.same(onEntries.filter((e) => e.count !== Math.floor(((e.samples ?? 0) * w.period_ns) / 1000)), [], `on-CPU time: each sample its period (${w.period_ns} ns)`);
      // chain_mixed's split against the program's
      const inChain = out.entries.filter((e) => (e.user?.frames ?? []).some((f) => f.symbol === 'chain_mixed'));
      const on = inChain.filter((e) => e.state === 'on').reduce((a, e) => a + e.count, 0);
      const off = inChain.filter((e) => e.state === 'off').reduce((a, e) => a + e.count, 0);
      const share = (100 * on) / (on + off);
      const ownShare = (100 * cpuUs) / wallUs;
      tt.ok(Math.abs(share - ownShare) <= 5, `chain_mixed on CPU ${share.toFixed(1)}% of ${on + off} us, the program measured ${ownShare.toFixed(1)}% of ${wallUs} us`);
      tt.ok(Math.abs(on + off - wallUs) <= 0.1 * wallUs, `chain_mixed's wall time: ${on + off} us, the program's ${wallUs} us`);
      tt.ok(on > 0 && off > 0, 'both sides seen');
      // the folded lines: off-CPU stacks end in [off-CPU], their time the summary's off-CPU time
      const offFolded = out.folded.filter((l) => l.folded.endsWith(`;${OFF_CPU_FRAME}`));
      const offSum = offFolded.reduce((a, l) => a + l.count, 0);
      const onSum = out.folded.filter((l) => !l.folded.endsWith(`;${OFF_CPU_FRAME}`)).reduce((a, l) => a + l.count, 0);
      // each entry's time is rounded down to microseconds before entries of one stack are folded
      // into one line: up to 1 us lost per entry, not per line (27 entries in 15 lines, 14 us)
      const offEntries = out.entries.filter((e) => e.state === 'off').length;
      tt.ok(offSum <= w.off_cpu_us && offSum >= w.off_cpu_us - offEntries, `folded [off-CPU] lines: ${offSum} us, summary ${w.off_cpu_us} us (${offEntries} entries)`);
      tt.ok(onSum <= w.on_cpu_us && onSum >= w.on_cpu_us - onEntries.length, `folded on-CPU lines: ${onSum} us, summary ${w.on_cpu_us} us (${onEntries.length} entries)`);
      // the pprof: a state label on every sample, the same split
      const prof = Profile.decode(gunzipSync(readFileSync(pb)));
      const str = (i: number | bigint) => String(prof.stringTable.strings[Number(i)]);
      const byState = new Map<string, number>();
      for (const smp of prof.sample) {
        const st = smp.label.find((l) => str(l.key) === 'state');
        const k = st ? str(st.str) : 'none';
        byState.set(k, (byState.get(k) ?? 0) + Number(smp.value[1]) / 1000);
      }
      tt.same([...byState.keys()].sort(), ['off-cpu', 'on-cpu'], 'pprof: every sample labelled state=on-cpu or off-cpu');
      tt.equal(byState.get('on-cpu'), onEntries.reduce((a, e) => a + e.count, 0), 'pprof: the on-CPU time of the entries');
      tt.equal(str(prof.sampleType[1]!.type), 'wall', 'pprof: sample type wall/nanoseconds');
    } finally {
      rmSync(pb, { force: true });
    }
  });
  t.test('--unwind=kernel -p on a process whose leader exits first: the other thread\'s spans walked in the kernel', async (tt) => {
    const rounds = 20;
    let slept = false; // the orphan's line: its sleeps are over
    const w = start(waits, ['--leader-exit', '--rounds', String(rounds), '--ms', '10'], {
      stdinPipe: true,
      timeoutMs: 120_000,
      onOutput: (o) => (slept ||= /^wait orphan /m.test(o)),
    });
    let ready = false;
    const oc = startDwunw(['offcputime', '--unwind=kernel', '--json', '-p', String(w.child.pid)], {
      timeoutMs: 120_000,
      env: cliEnv(),
      onOutput: (_o, e) => (ready ||= /^Tracing /m.test(e)),
    });
    await waitFor(() => ready || oc.child.exitCode !== null, 60_000, 'offcputime to start tracing');
    w.child.stdin!.write('g'); // the leader exits, orphan_thread sleeps
    await waitFor(() => slept || w.child.exitCode !== null, 60_000, 'the orphan thread\'s sleeps');
    oc.child.kill('SIGINT'); // the report while the process (its maps) is still there
    const r = await oc.done;
    w.child.stdin!.end();
    const wr = await w.done;
    tt.equal(wr.status, 0, `waits: exit status 0 ${wr.stderr}`);
    tt.equal(r.status, 0, `offcputime: exit status 0 ${r.stderr.slice(-400)}`);
    const own = measured(wr.stdout).get('main orphan_sleep');
    tt.equal(own?.count, rounds, `the orphan thread's own line: ${rounds} sleeps`);
    const out = parseProfileJson(r.stdout);
    const kw = (out.summary as unknown as { kernel_walk?: { events: number; from_kernel: number; fallback: number; by_status: Record<string, number> } } | undefined)?.kernel_walk;
    tt.ok(kw, 'the summary has the kernel walker\'s figures');
    if (kw) {
      tt.equal(kw.from_kernel + kw.fallback, kw.events, `walker events ${kw.events} = ${kw.from_kernel} walked in the kernel + ${kw.fallback} fallen back ${JSON.stringify(kw.by_status)}`);
      tt.notOk(kw.by_status['no-proc'], 'no walk found the process without tables (they were loaded at the start, -p)');
    }
    // the orphan's waits (not preempted in the clock reads around them)
    const orphan = out.entries.filter((e) => {
      const fr = e.user?.frames ?? [];
      return fr.some((f) => f.symbol === 'orphan_sleep') && !fr.some((f) => /clock_gettime|clock_ns|now_ns|^note$/.test(f.symbol ?? '') || /vdso/.test(f.module ?? ''));
    });
    const walked = (e: PrEntry) => (e.user?.frames ?? []).every((f) => f.origin === 'kernel-walk' || f.origin === 'signal');
    const sw = (es: PrEntry[]) => es.reduce((a, e) => a + (e.switches ?? 0), 0);
    const inKernel = sw(orphan.filter(walked));
    const fellBack = orphan.filter((e) => !walked(e));
    tt.ok(inKernel >= rounds, `the orphan's switch-outs walked in the kernel: ${inKernel} (its ${rounds} sleeps)`);
    tt.same(fellBack.map((e) => `${e.switches}x ${(e.user?.frames ?? []).map((f) => `${f.symbol}[${f.origin}]`).join(';')}`), [], 'none fallen back to the snapshot');
    tt.same(orphan.filter((e) => !e.user?.complete).length, 0, 'every stack complete to the thread start');
  });
  t.test('--waker -- waits: the known wakers (pipe writer, mutex holder, timer interrupt)', async (tt) => {
    const file = join('/tmp', `dwunw-offcpu-${process.pid}-waker.dat`);
    const r = await dwunw(['--waker', '--json', '--', waits, '--file', file]);
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const out = parseProfileJson(r.stdout);
    tt.ok(out.summary?.waker?.wakeups, 'the summary counts the wakeups recorded');
    tt.match(r.stderr, /wakeups recorded: \d+/, 'and says so on stderr');
    const own = measured(r.stdout);
    const fn = (st: { frames: { symbol?: string }[] } | null | undefined) => (st?.frames ?? []).map((f) => f.symbol ?? '');
    const cases: [string, string, (e: PrEntry) => boolean][] = [
      ['wait_pipe', 'writer_thread', (e) => fn(e.waker?.user).includes('writer_thread') && fn(e.waker?.user).includes('write')],
      ['wait_mutex', 'holder_thread', (e) => fn(e.waker?.user).includes('holder_thread')],
      ['wait_sleep', '[interrupt] (hrtimer_wakeup)', (e) => e.waker?.comm === '[interrupt]' && fn(e.waker?.kernel).includes('hrtimer_wakeup') && e.waker.user === null],
    ];
    for (const [wait, waker, isWaker] of cases) {
      const es = out.entries.filter((e) => fn(e.user)[0] !== wait && fn(e.user).includes(wait) && !fn(e.user).some((s) => /clock_gettime|now_ns|^note$/.test(s)));
      const all = es.reduce((a, e) => a + e.count, 0);
      const known = es.filter(isWaker);
      const byWaker = known.reduce((a, e) => a + e.count, 0);
      tt.ok(known.length > 0, `${wait}: woken by ${waker}`);
      tt.ok(byWaker >= 0.9 * all, `${wait}: ${byWaker} of ${all} us under that waker (the program measured ${own.get(`main ${wait}`)?.off} us)`);
      tt.same(known.filter((e) => e.waker?.user && !e.waker.user.complete).map((e) => fn(e.waker?.user).join(';')), [], `${wait}: the waker's user stacks complete`);
    }
    rmSync(file, { force: true });
  });
}
