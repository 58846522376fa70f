// `dwunw profile` end to end: bad input gives one line and its exit status (usage errors: 2, naming
// `dwunw profile --help`; no such process: 3; privileges: 7, as memleak); --pprof opens in
// `go tool pprof -top` with hot's functions on top; --html renders in headless Chromium (no
// console error, the hot function in the DOM, a screenshot written for the docs); -p PID -f prints
// complete folded stacks; -a sees a second process and a short-lived-process loop, with every
// sample counted; -p of a process in its own mount namespace and of a deleted binary gives named,
// complete stacks. A target's samples are checked against the CPU time it had (its own measure,
// or /proc/PID/stat) at the frequency, never against a wall time: on a loaded machine a program
// gets less CPU in a second, and the tests wait for the CPU instead.
//
// Needs root, the kernel's BTF and BPF: without them the checks that sample are skipped with the
// reason, unless DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, commOf, cpuSeconds, dwunwBin, hotReport, requireOrSkip, root, type Run, start as startProcess, type Started, threadCount, until, waitFor } from './helpers.js';
import { splitArgs } from '../commands/profile.js';
import { parseProfileJson } from '../lib/profile.js';

const profileBin = join(root, 'build', 'bpf', 'profile');
const hotDir = join(root, 'fixtures', 'x86_64', 'build');
const hot = join(hotDir, 'hot');
const shots = join(root, 'build', 'doc');

/** A command in the background, with the test's environment without NODE_OPTIONS. */
const start = (cmd: string, args: string[], timeoutMs = 60_000): Started =>
  startProcess(cmd, args, { timeoutMs, env: { ...cliEnv(), FORCE_COLOR: process.env.FORCE_COLOR } });
const run = (cmd: string, args: string[], timeoutMs?: number): Promise<Run> => start(cmd, args, timeoutMs).done;
const dwunw = (args: string[], timeoutMs?: number): Promise<Run> => run(process.execPath, [dwunwBin, 'profile', ...args], timeoutMs);

/**
 * `dwunw profile ARGS` (no duration: ended by SIGINT, which dwunw passes on) while `pids` run,
 * until each has had its `cpuS` seconds of CPU since the events were attached (profile's header
 * line) and `minMs` have passed; 120 s at most. Each pid's CPU time while sampled lies between
 * `inside` (read after the header and before the SIGINT: all of it sampled) and `around` (read
 * before the start and after the end). On a loaded machine a target gets less CPU in a given
 * time, so fewer samples: the test waits for the CPU, not for a time.
 */
async function profileWhile(args: string[], pids: number[], cpuS: number[], minMs = 0): Promise<{ r: Run; inside: number[]; around: number[] }> {
  const before = pids.map(cpuSeconds);
  let header = false;
  const p = startProcess(process.execPath, [dwunwBin, 'profile', ...args], {
    timeoutMs: 300_000,
    env: { ...cliEnv(), FORCE_COLOR: process.env.FORCE_COLOR },
    onOutput: (_o, e) => (header ||= /^Sampling /m.test(e)),
  });
  const ended = (): boolean => p.child.exitCode !== null || p.child.signalCode !== null;
  await until(() => header || ended(), 120_000);
  const t0 = Date.now();
  const c0 = pids.map(cpuSeconds);
  await until(() => ended() || (Date.now() - t0 >= minMs && pids.every((pid, i) => cpuSeconds(pid) - c0[i]! >= cpuS[i]!)), 120_000);
  const c1 = pids.map(cpuSeconds);
  p.child.kill('SIGINT');
  const r = await p.done;
  return { r, inside: c1.map((c, i) => c - c0[i]!), around: pids.map((pid, i) => cpuSeconds(pid) - before[i]!) };
}

/**
 * A process's samples (those whose stack was lost included) against its CPU time at hz: at least
 * half of what it had inside the sampling window (the records the ring lost counted as its
 * own), at most 1.5 times what it had around the run.
 */
function samplesForCpu(tt: Test, what: string, n: number, recordsLost: number, inside: number, around: number, hz: number): void {
  const lo = Math.floor(0.5 * inside * hz);
  const hi = Math.ceil(1.5 * around * hz) + 10;
  tt.ok(n + recordsLost >= lo && n <= hi, `${what}: ${n} samples (${recordsLost} records lost) for ${inside.toFixed(2)} .. ${around.toFixed(2)} s of CPU at ${hz} Hz (${lo} .. ${hi})`);
}

/** hot's pid and CPU seconds (both threads, its own measure), from its report. */
function hotCpu(text: string): { pid: number; cpuS: number } | null {
  const rep = hotReport(text);
  return rep && { pid: rep.pid, cpuS: Object.values(rep.cpu_ns).reduce((a, v) => a + v, 0) / 1e9 };
}

/** hot, run until it has had 1 s of CPU (both threads), however long that takes. */
const HOT_CPU = [hot, '1', '--cpu'];

// ---- Without BPF ----------------------------------------------------------------------------------

t.test('our options are taken out, profile\'s passed on', async (tt) => {
  tt.same(splitArgs(['-U', '--pprof', 'a.pb.gz', '-f', '--html=b.html', '--', 'x', '--pprof', 'y']), {
    pprof: 'a.pb.gz',
    html: 'b.html',
    folded: true,
    json: false,
    rest: ['-U', '-f', '--', 'x', '--pprof', 'y'],
    export: [],
    headers: [],
  });
  const h = await dwunw(['--help']);
  tt.equal(h.status, 0, '--help: exit status 0');
  tt.match(h.stdout, /^Usage: profile \[OPTION\.\.\.\] \[DURATION\] \[-- COMMAND \[ARG\.\.\.\]\]$/m, 'profile\'s usage');
  tt.match(h.stdout, /--pprof=FILE/, 'and ours');
});

const HELP = / \(see dwunw profile --help\)$/;
const oneLine = (tt: Test, r: Run, re: RegExp, what: string, status = 2): void => {
  tt.equal(r.status, status, `${what}: exit status ${status}`);
  tt.equal(r.stdout, '', `${what}: nothing on stdout`);
  const lines = r.stderr.split('\n').filter(Boolean);
  tt.equal(lines.length, 1, `${what}: one line on stderr`);
  tt.match(lines[0] ?? '', re, `${what}: ${lines[0]}`);
  if (status === 2) tt.match(lines[0] ?? '', HELP, `${what}: names dwunw profile --help`);
};

t.test('bad input: one line, the README\'s exit status', async (tt) => {
  if (process.getuid?.() !== 0) return requireOrSkip(tt, 'bad input', 'not root (profile refuses to start)');
  oneLine(tt, await dwunw(['-p', '4000000', '1']), /^profile: pid 4000000: no such process$/, '-p of no such pid', 3);
  oneLine(tt, await dwunw(['--frobnicate']), /^profile: unknown option --frobnicate /, '--frobnicate');
  oneLine(tt, await dwunw(['-F', 'abc']), /^profile: -F: not a number: abc /, '-F abc');
  oneLine(tt, await dwunw(['-p']), /^profile: option -p needs a value /, '-p without a value');
  oneLine(tt, await dwunw(['--pprof']), /^dwunw: profile: --pprof: a value is expected /, '--pprof without a file');
  oneLine(tt, await dwunw(['-F', '0', '1']), /^profile: -F 0: out of range \(1 \.\. 10000 Hz\) /, '-F 0');
  oneLine(tt, await dwunw(['-F', '100000', '1']), /^profile: -F 100000: out of range \(1 \.\. 10000 Hz\) /, '-F 100000');
  oneLine(tt, await dwunw(['-C', '99', '1']), /^profile: -C 99: no such online CPU \(online: [-0-9,]+\) /, '-C 99');
  oneLine(tt, await dwunw(['-U', '-K', '1']), /^profile: -U and -K exclude each other /, '-U -K');
  oneLine(tt, await dwunw(['--unwind=lbr', '1']), /^profile: --unwind: expected auto, kernel, dwarf, fp or freeze, got lbr /, '--unwind=lbr');
  oneLine(tt, await dwunw(['--unwind=freeze', '1']), /^profile: --unwind=freeze stops the sampled threads: give -p, -L or -- COMMAND /, '--unwind=freeze without targets');
  oneLine(tt, await dwunw(['--unwind=kernel', '--perf-buffer', '1']), /^profile: --unwind=kernel sends its events on the ring buffer: drop --perf-buffer /, '--unwind=kernel --perf-buffer');
  oneLine(tt, await dwunw(['--unwind=dwarf', '--table-budget=8', '1']), /^profile: --table-budget is for --unwind=kernel /, '--table-budget with dwarf');
  oneLine(tt, await dwunw(['--unwind=dwarf', '--aggregate', '1']), /^profile: --aggregate counts the in-kernel walks: it needs --unwind=kernel and user stacks /, '--aggregate with dwarf');
  oneLine(tt, await dwunw(['0']), /^profile: invalid duration: 0/, 'duration 0');
  const nonRoot = await run('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', profileBin, '1']);
  oneLine(tt, nonRoot, /^profile: need root \(CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE\)$/, 'not root', 7);
});

// ---- With BPF -------------------------------------------------------------------------------------

const unavailable = (): string | null =>
  bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[profileBin, 'make bpf'], [hot, 'make fixtures']]);

/** Share of a pid's samples whose user stack is complete, and the functions seen. */
function ofPid(text: string, pid: number): { total: number; complete: number; lost: number; fns: Set<string> } {
  const out = parseProfileJson(text);
  let total = 0;
  let complete = 0;
  let lost = 0;
  const fns = new Set<string>();
  for (const e of out.entries.filter((x) => x.pid === pid)) {
    // a sample whose snapshot was lost (buffer full while the tool opened some big module) is
    // counted and reported under its reason: the completeness is over the stacks received
    if (e.user?.kind === 'none' && e.user.reason?.startsWith('[stack lost:')) {
      lost += e.count;
      continue;
    }
    total += e.count;
    if (e.user?.complete) complete += e.count;
    for (const f of e.user?.frames ?? []) if (f.symbol) fns.add(f.symbol);
  }
  return { total, complete, lost, fns };
}

const why = unavailable();
if (why) {
  requireOrSkip(t, 'the profile tests', why);
} else {
  t.test('-p PID -U -f: complete folded stacks', async (tt) => {
    // hot runs until told to stop: the CLI can take seconds to start on a loaded machine
    const h = start(hot, ['120']);
    await waitFor(() => threadCount(h.child.pid!) >= 2, 30_000, 'hot to start its second thread');
    const { r, inside, around } = await profileWhile(['-p', String(h.child.pid), '-U', '-F', '499', '-f'], [h.child.pid!], [0.5]);
    h.child.kill('SIGTERM');
    await h.done;
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const lines = r.stdout.split('\n').filter(Boolean);
    tt.ok(lines.length >= 5, `${lines.length} folded lines`);
    const bad = lines.filter((l) => !/^hot;(_start;__libc_start_main;__libc_start_call_main;main|clone3;start_thread;thread_main);.* \d+$/.test(l));
    const badN = bad.reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    const all = lines.reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    tt.ok(badN / all <= 0.01, `complete from the root: ${all - badN}/${all} (${bad.slice(0, 3).join(' | ')})`);
    samplesForCpu(tt, 'hot', all, 0, inside[0]!, around[0]!, 499);
  });

  t.test('--pprof: go tool pprof -top reads it', async (tt) => {
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-pprof-'));
    try {
      const file = join(dir, 'hot.pb.gz');
      const r = await dwunw(['-F', '499', '--pprof', file, '--', ...HOT_CPU]);
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
      tt.ok(existsSync(file) && statSync(file).size > 100, 'profile written');
      tt.same([...readFileSync(file).subarray(0, 2)], [0x1f, 0x8b], 'gzip');
      if (!existsSync('/usr/bin/go')) {
        return requireOrSkip(tt, 'go tool pprof', 'go is not installed (scripts/ensure-deps installs golang-go)');
      }
      const go = await run('go', ['tool', 'pprof', '-top', '-nodecount=30', file], 120_000);
      tt.equal(go.status, 0, `go tool pprof exit status 0 ${go.stderr.slice(-300)}`);
      tt.match(go.stdout, /Type: cpu/, 'a CPU profile');
      tt.match(go.stdout, /\bspin\b/, 'spin (the hot leaf) listed');
      tt.match(go.stdout, /\bhotlib_leaf\b/, 'hotlib_leaf (libhot.so) listed');
      const raw = await run('go', ['tool', 'pprof', '-raw', file], 120_000);
      tt.match(raw.stdout, /Mappings\n[\s\S]*libhot\.so [0-9a-f]{40}/, 'mappings with build ids');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  t.test('--html: renders in headless Chromium', async (tt) => {
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-html-'));
    try {
      const file = join(dir, 'hot.html');
      const r = await dwunw(['-F', '499', '--html', file, '--', ...HOT_CPU]);
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
      const html = readFileSync(file, 'utf8');
      tt.notMatch(html, /<script[^>]+src=/, 'no external script');
      const chrome = ['--headless', '--no-sandbox', '--disable-gpu', '--enable-logging=stderr', '--v=0', '--window-size=1400,900', '--virtual-time-budget=3000'];
      if (!existsSync('/usr/bin/chromium')) {
        return requireOrSkip(tt, 'the page in Chromium', 'chromium is not installed (scripts/ensure-deps installs it)');
      }
      const dom = await run('chromium', [...chrome, '--dump-dom', `file://${file}`], 120_000);
      tt.equal(dom.status, 0, 'chromium ran');
      const consoleErrors = dom.stderr.split('\n').filter((l) => /CONSOLE/.test(l) && /error|Uncaught/i.test(l));
      tt.same(consoleErrors, [], 'no console error');
      tt.match(dom.stdout, /<svg[\s\S]*thread_work/, 'the flame graph drawn, thread_work in the DOM');
      mkdirSync(shots, { recursive: true });
      const png = join(shots, 'profile-flamegraph.png');
      rmSync(png, { force: true });
      const shot = await run('chromium', [...chrome, `--screenshot=${png}`, `file://${file}`], 120_000);
      tt.equal(shot.status, 0, 'screenshot taken');
      tt.ok(existsSync(png) && statSync(png).size > 10_000, `screenshot written: ${png}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  t.test('-a: a second process and a short-lived-process loop', async (tt) => {
    const h = start(hot, ['120']);
    const loop = start('/bin/sh', ['-c', 'while :; do /bin/true; done']);
    await waitFor(() => threadCount(h.child.pid!) >= 2, 30_000, 'hot to start its second thread');
    // until hot has had 0.5 s of CPU (~100 samples) and the loop 0.1 s (its children's included)
    const { r, inside, around } = await profileWhile(['-a', '-F', '199', '--json'], [h.child.pid!, loop.child.pid!], [0.5, 0.1], 1000);
    h.child.kill('SIGTERM');
    loop.child.kill('SIGKILL');
    await h.done;
    await loop.done;
    tt.equal(r.status, 0, 'exit status 0');
    const out = parseProfileJson(r.stdout);
    tt.ok(out.summary, 'summary');
    tt.equal(out.summary?.samples, out.entries.reduce((a, e) => a + e.count, 0), 'every sample in an entry');
    const mine = ofPid(r.stdout, h.child.pid!);
    samplesForCpu(tt, 'hot', mine.total + mine.lost, out.summary?.records_lost ?? 0, inside[0]!, around[0]!, 199);
    tt.ok(mine.complete / mine.total >= 0.95, `hot: ${mine.complete}/${mine.total} complete (${mine.lost} lost, reported)`);
    if (mine.lost) tt.ok(Object.keys(out.summary?.lost ?? {}).some((k) => k.startsWith('[stack lost:')), 'losses named in the summary');
    const comms = new Set(out.entries.map((e) => e.comm));
    tt.ok(comms.has('sh') || comms.has('true') || comms.has('date'), `the loop seen (${[...comms].slice(0, 12).join(', ')})`);
    tt.ok((out.summary?.processes ?? 0) >= 3, `processes seen: ${out.summary?.processes}`);
    const lost = Object.values(out.summary?.lost ?? {}).reduce((a, b) => a + b, 0);
    const stopped = Object.values(out.summary?.stopped ?? {}).reduce((a, b) => a + b, 0);
    tt.pass(`-a: ${out.summary?.samples} samples, ${out.summary?.user_complete}/${out.summary?.user_samples} user stacks complete, lost ${lost}, records lost (ring full) ${out.summary?.records_lost}, stopped ${stopped} (${JSON.stringify(out.summary?.stopped)})`);
  });

  for (const mode of ['fp', 'dwarf']) {
    // per-CPU buffers, ordered by the reader by each record's kernel time: every kind profile
    // sends (samples, exec, snapshots, mapping and process records) carries one
    t.test(`--perf-buffer --unwind=${mode} -- hot: every record ordered by its own time, every sample counted`, async (tt) => {
      const r = await dwunw(['--perf-buffer', `--unwind=${mode}`, '-F', '499', '--json', '--', ...HOT_CPU]);
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
      const out = parseProfileJson(r.stdout);
      const s = out.summary as unknown as { samples: number; perf_buffer?: { untimed: number } } | undefined;
      tt.ok(s?.perf_buffer, 'the summary has the perf buffer\'s figures');
      tt.equal(s?.perf_buffer?.untimed, 0, 'no record of a kind without a time');
      tt.equal(s?.samples, out.entries.reduce((a, e) => a + e.count, 0), 'every sample in an entry');
      const rep = hotCpu(r.stdout);
      if (!rep) return void tt.fail(`no report from hot in: ${r.stdout.slice(-300)}`);
      const mine = ofPid(r.stdout, rep.pid);
      samplesForCpu(tt, 'hot', mine.total + mine.lost, out.summary?.records_lost ?? 0, rep.cpuS, rep.cpuS, 499);
      if (mode === 'dwarf') tt.ok(mine.complete / mine.total >= 0.95, `hot: ${mine.complete}/${mine.total} complete (${mine.lost} lost, reported)`);
    });
  }

  t.test('-p of a process in its own mount namespace, and of a deleted binary', async (tt) => {
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-ns-'));
    try {
      // a tmpfs only the namespace sees, holding copies of hot and libhot.so
      const ns = start('unshare', ['-m', '--propagation', 'private', 'sh', '-c',
        `mkdir -p ${dir}/m && mount -t tmpfs none ${dir}/m && cp ${hot} ${hotDir}/libhot.so ${dir}/m/ && exec ${dir}/m/hot 120`]);
      const del = join(dir, 'del');
      mkdirSync(del);
      copyFileSync(hot, join(del, 'hot'));
      copyFileSync(join(hotDir, 'libhot.so'), join(del, 'libhot.so'));
      const d = start(join(del, 'hot'), ['120']);
      // both past their start (libhot.so mapped, the second thread running) before the unlink
      await waitFor(() => commOf(ns.child.pid!) === 'hot' && threadCount(ns.child.pid!) >= 2 && threadCount(d.child.pid!) >= 2, 30_000, 'both hots to run');
      unlinkSync(join(del, 'hot'));
      unlinkSync(join(del, 'libhot.so'));
      const nsPid = ns.child.pid!; // unshare and sh exec: the same process runs hot
      tt.ok(nsPid > 0, `process in the namespace: ${nsPid}`);
      tt.notOk(existsSync(`${dir}/m/hot`), 'its binary is not visible here');
      const { r, inside, around } = await profileWhile(['-p', `${nsPid},${d.child.pid}`, '-U', '-F', '499', '--json'], [nsPid, d.child.pid!], [0.3, 0.3]);
      ns.child.kill('SIGTERM');
      d.child.kill('SIGTERM');
      await ns.done;
      await d.done;
      tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
      const out = parseProfileJson(r.stdout);
      for (const [i, [what, pid]] of ([['mount namespace', nsPid], ['deleted binary', d.child.pid!]] as const).entries()) {
        const m = ofPid(r.stdout, pid);
        samplesForCpu(tt, what, m.total + m.lost, out.summary?.records_lost ?? 0, inside[i]!, around[i]!, 499);
        tt.ok(m.complete / m.total >= 0.95, `${what}: ${m.complete}/${m.total} complete`);
        tt.ok(m.fns.has('chain_plain') && m.fns.has('hotlib_leaf'), `${what}: hot's and libhot.so's functions named`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
