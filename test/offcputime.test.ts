// `dwunw offcputime` end to end, against the program's own measure: fixtures/x86_64/waits (built
// -O2 -fomit-frame-pointer -g) waits in known chains (nanosleep, a mutex another thread holds, a
// pipe read, poll, a page-cache-cold pread; two helper threads sleeping; with --fork a child
// process sleeping while main waits for it) and prints, per chain, its wall time and its CPU time
// around each wait. Checked, for --unwind=dwarf and --unwind=kernel, with the command run by
// `-- waits --fork` (so the forked child is followed): every chain's user stack is complete to
// main's start or the thread start, each chain's off-CPU time is within 10 % (and 5 us a wait) of
// what the program measured (wall - CPU), and the child's chain is there under its own pid. Usage errors: exit 2,
// one line naming `dwunw offcputime --help`.
//
// Needs root, the kernel's BTF and BPF: without them the checks that trace are skipped with the
// reason, unless DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, root, type Run, skipOrFail, start } from './helpers.js';
import { parseProfileJson, type PrEntry } from '../lib/profile.js';

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
    [['--unwind=lbr'], /^offcputime: --unwind: expected dwarf, fp, kernel or freeze, got lbr /],
    [['--unwind=freeze'], /^offcputime: --unwind=freeze stops the traced threads: give -p, -t or -- COMMAND /],
    [['0'], /^offcputime: duration: 0 out of range /],
    [['--html'], /^dwunw: offcputime: --html: a file name is expected /],
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

/** The chain functions whose time the test checks (waits' noinline functions). */
const CHAINS = ['wait_sleep', 'wait_mutex', 'wait_pipe', 'wait_poll', 'wait_pread', 'wait_child', 'holder_hold', 'writer_pause'];

function check(tt: Test, r: Run, mode: string): void {
  tt.equal(r.status, 0, `${mode}: exit status 0 ${r.stderr.slice(-400)}`);
  const own = measured(r.stdout);
  tt.equal(own.size, 7, `${mode}: the program's seven measured chains (${[...own.keys()].join(', ')})`);
  const out = parseProfileJson(r.stdout);
  tt.ok(out.summary, `${mode}: a summary`);
  tt.equal(out.summary?.unit, 'microseconds', `${mode}: counts are microseconds`);
  tt.equal(out.summary?.unwind, mode, `${mode}: the summary says the unwinder`);
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
    t.test(`--unwind=${mode} -- waits --fork: complete chains, the program's own time`, async (tt) => {
      const file = join('/tmp', `dwunw-offcpu-${process.pid}-${mode}.dat`);
      const r = await dwunw([`--unwind=${mode}`, '--json', '--', waits, '--fork', '--file', file]);
      check(tt, r, mode);
    });
  }
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
}
