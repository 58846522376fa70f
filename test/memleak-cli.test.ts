// `dwunw memleak` as a front end: arguments passed to build/bpf/memleak untouched (its --help, its
// errors and exit status), colors on a terminal only, SIGINT forwarded (a last report, exit 0),
// and `dwunw memleak --demo` (what `npm start` runs): DWARF stacks complete for every leak site
// of fixtures/x86_64/leaky, next to the frame-pointer ones.
//
// The checks that run memleak need root, the kernel's BTF and BPF: without them they are skipped
// with the reason, unless DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Chalk } from 'chalk';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, inSleep, memleakBpfFailure, requireOrSkip, root, type Run, start, type Started, until } from './helpers.js';
import { colorLine } from '../commands/memleak.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const leaky = join(root, 'fixtures', 'x86_64', 'build', 'leaky');

/** `dwunw memleak ARGS` (FORCE_COLOR only when `env` sets it). The limit is a hang guard: six
 * memleaks start at once below, and a loaded 2-core host runs them 5-10x slower. */
const dwunw = (args: string[], env: Record<string, string> = {}, timeoutMs = 420_000): Started =>
  start(process.execPath, [dwunwBin, 'memleak', ...args], { env: cliEnv(env), timeoutMs });

const ANSI = /\x1b\[[0-9;]*m/g;
const strip = (s: string): string => s.replace(ANSI, '');

// ---- Without BPF ------------------------------------------------------------------------------------

t.test('--help is memleak\'s help, plus --demo', async (tt) => {
  if (!existsSync(memleakBin)) return void tt.fail(`${memleakBin} is not built`);
  const r = await dwunw(['--help']).done;
  tt.equal(r.status, 0, 'exit status 0');
  tt.match(r.stdout, /^Usage: memleak \[OPTION\.\.\.\] \[INTERVAL \[COUNT\]\] \[-- PROG \[ARG\.\.\.\]\]$/m, 'memleak\'s usage line');
  tt.match(r.stdout, /--unwind=auto\|kernel\|dwarf\|fp/, 'its own flags');
  tt.match(r.stdout, /dwunw memleak --demo \[--rounds N\] \[--json\]/, 'and the demo');
  const h = await dwunw(['-h']).done;
  tt.equal(h.stdout, r.stdout, '-h: the same');
});

t.test('arguments go to memleak untouched; its errors and exit status', async (tt) => {
  const r = await dwunw(['--unwind=bogus', '-p', '1']).done;
  tt.equal(r.status, 2, 'exit status 2 (usage)');
  tt.same(r.stderr.split('\n').filter(Boolean), ['memleak: --unwind: expected auto, kernel, dwarf, fp or freeze, got bogus (see dwunw memleak --help)'], 'memleak\'s one-line error');
  const z = await dwunw(['-p', '1', '-z', '10', '-Z', '0x5']).done;
  tt.same(z.stderr.split('\n').filter(Boolean), ['memleak: min size (10) is larger than max size (5) (see dwunw memleak --help)'], 'values as given (0x5 is not parsed by dwunw)');
  const d = await dwunw(['--demo', '--rounds', '0']).done;
  tt.equal(d.status, 2, '--demo --rounds 0: exit status 2');
  tt.same(d.stderr.split('\n').filter(Boolean), ['dwunw: usage: --rounds: expected 1 to 60, got 0 (see dwunw memleak --help)'], '--demo: one-line usage error');
});

t.test('colorLine: colors text report lines, leaves others alone', async (tt) => {
  const c = new Chalk({ level: 1 });
  const lines = [
    'Attaching to pid 1234, Ctrl+C to quit.',
    '[13:8:3] Top 10 stacks with outstanding allocations:',
    '1500000 bytes in 5 allocations from stack',
    '\taddr = 0x7f58bd2b7010 size = 300000',
    '\t0 [<000055998ca2fc6e>] big_2+0xe [/work/main/fixtures/x86_64/build/leaky]',
    '\t1 [<00007f58bd2b7010>] [/usr/lib/x86_64-linux-gnu/libc.so.6]',
    '\t2 [<00007fffffffe660>] [unknown]',
    '\t3 [<0000000000000000>] [unwind stopped: no progress]',
    'dwarf: 17 stacks, 17 complete, 0 stopped early, 3 with frames read live after the event; 272 records, 0.9 us/unwind, 0 patched',
    '\t4 [<00007f58bd2b7010>] [unknown] [/usr/lib/x86_64-linux-gnu/libc.so.6] [fp]',
    '\t5 [<00007f3faf77e58d>] JS:~leakInner /tmp/leak.js:3+0x2d [jit]',
    '\t6 [<00007f3faf77e0e8>] [unknown] [anon] [fp]',
    '\t7 [<000055998ca2fc6e>] main+0x1e [/work/main/fixtures/x86_64/build/leaky] [live]',
    'frames marked [live] rests on stack memory read from the process after the event (it may have changed since); [fp] found by frame pointers (no CFI there)',
    'lost 3 records (ring buffer full)',
    'kernel: 17 stacks, 17 complete, 0 stopped early, 0 read beyond the window; 90 records, 41.4 us/unwind, 0 patched',
    'kernel walker: 186 events, 48.4% fell back to the snapshot (no-proc 90); tables 0.1 MiB of 10.4 MiB of maps, 4 modules',
  ];
  for (const l of lines) {
    const o = colorLine(c, l);
    tt.not(o, l, `colored: ${l.trim().slice(0, 40)}`);
    tt.equal(strip(o), l, '  same text without the colors');
  }
  tt.match(colorLine(c, lines[4]!), /\x1b\[36m\x1b\[1mbig_2\x1b/, 'symbol names highlighted');
  tt.match(colorLine(c, lines[7]!), /\x1b\[31m\[unwind stopped/, 'stop reasons in red');
  for (const l of ['{"time":"1:2:3","stacks":[]}', '_start;main;leaf 1003', '']) tt.equal(colorLine(c, l), l, `unchanged: ${l || '(empty)'}`);
  tt.equal(colorLine(new Chalk({ level: 0 }), lines[4]!), lines[4], 'no colors at level 0');
  tt.match(colorLine(c, lines[12]!), /\x1b\[31m \[live\]/, 'frames read live marked in red');
  tt.match(colorLine(c, lines[10]!), /\x1b\[36m\x1b\[1mJS:~leakInner \/tmp\/leak.js:3\x1b/, 'a JIT name without a module highlighted');
});

// ---- With BPF ---------------------------------------------------------------------------------------

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [leaky, 'make fixtures']]);

function gate(tt: Test, runs: Run[]): boolean {
  for (const r of runs) {
    const f = memleakBpfFailure(r.stderr);
    if (f) {
      requireOrSkip(tt, 'memleak', f);
      return false;
    }
  }
  return true;
}

const why = unavailable();
if (why) {
  requireOrSkip(t, 'the BPF checks', why);
} else {
  t.test('with BPF', { timeout: 600_000 }, async (tb) => {
    // all at once: two demos (four memleaks), a colored run, a run interrupted with SIGINT
    const demoJson = dwunw(['--demo', '--json', '--rounds', '2']);
    const demoText = dwunw(['--demo']);
    const colored = dwunw(['-T', '3', '-o', '0', '-c', `${leaky} 1`, '600'], { FORCE_COLOR: '1' });
    const intr = dwunw(['-o', '0', '-T', '3', '-c', `${leaky} 30`, '600']);
    const intrDone = (async () => {
      // wait until leaky ran its first round (the report will show it), then Ctrl+C
      const end = Date.now() + 300_000;
      let out = '';
      intr.child.stdout!.on('data', (d: string) => (out += d));
      while (!/Attaching to pid/.test(out) && Date.now() < end && intr.child.exitCode === null) await sleep(50);
      // leaky sleeps 1 s after each round: in that sleep, its first round is done
      const pid = Number(/Attaching to pid (\d+)/.exec(out)?.[1] ?? 0);
      await until(() => pid > 0 && inSleep(pid, 'leaky'), Math.max(0, end - Date.now()));
      const t0 = Date.now();
      intr.child.kill('SIGINT');
      const r = await intr.done;
      return { r, ms: Date.now() - t0 };
    })();
    // the two ways of attaching the uprobes (multi-uprobe links where the kernel has them)
    const multi = dwunw(['-v', '--json', '-o', '0', '-T', '100', '-c', `${leaky} 1`, '600']);
    const single = dwunw(['-v', '--no-uprobe-multi', '--json', '-o', '0', '-T', '100', '-c', `${leaky} 1`, '600']);
    const [dj, dt, col, it, mu, si] = await Promise.all([demoJson.done, demoText.done, colored.done, intrDone, multi.done, single.done]);
    if (!gate(tb, [dj, dt, col, it.r, mu, si])) return;

    tb.test('multi-uprobe links and one link per probe: the same stacks', async (tt) => {
      tt.equal(mu.status, 0, 'default: exit status 0', { stderr: mu.stderr.slice(-2000) });
      tt.equal(si.status, 0, '--no-uprobe-multi: exit status 0', { stderr: si.stderr.slice(-2000) });
      const how = /^memleak: uprobes attached in [\d.]+ ms \((.*)\)$/m;
      tt.equal(how.exec(si.stderr)?.[1], 'one link per probe', '--no-uprobe-multi: one link per probe (-v)');
      // uprobe_multi links filtering by process: Linux 6.9 and later here (older ones: per-probe links)
      const [maj, min] = (/^(\d+)\.(\d+)/.exec((await import('node:os')).release()) ?? []).slice(1).map(Number);
      const want = maj! > 6 || (maj === 6 && min! >= 9) ? 'two multi-uprobe links' : undefined;
      const got = how.exec(mu.stderr)?.[1];
      if (want) tt.equal(got, want, `default on ${maj}.${min}: ${want} (-v)`);
      else tt.ok(got, `default: ${got} (-v)`);
      type Rep = { lost: number; stacks: { bytes: number; allocations: number; frames: { symbol: string | null }[] }[] };
      const lastRep = (out: string): Rep => {
        const reps = out.split('\n').filter((l) => l.startsWith('{'));
        return reps.length ? (JSON.parse(reps[reps.length - 1]!) as Rep) : { lost: 0, stacks: [] };
      };
      const sig = (r: Rep): string[] => r.stacks.map((x) => `${x.bytes}/${x.allocations}: ${x.frames.map((f) => f.symbol ?? '?').join(' <- ')}`).sort();
      const [rm, rs] = [lastRep(mu.stdout), lastRep(si.stdout)];
      tt.ok(sig(rm).length >= 15, `${sig(rm).length} stacks with the multi-uprobe links`);
      // a record lost under load moves its allocation to a lost stack: compare lossless runs only
      if (rm.lost || rs.lost) tt.comment(`records lost (${rm.lost}, ${rs.lost}): stacks not compared`);
      else tt.same(sig(rm), sig(rs), 'the same stacks, bytes and counts either way');
    });

    tb.test('--demo --json: DWARF complete and exact for every site', async (tt) => {
      tt.equal(dj.status, 0, 'exit status 0', { stderr: dj.stderr });
      let d: { summary: Record<string, number>; sites: { site: string; dwarf: { complete: boolean }; fp: { complete: boolean } }[] } | null = null;
      try {
        d = JSON.parse(dj.stdout);
      } catch {
        return void tt.fail('not JSON', { stdout: dj.stdout.slice(0, 2000) });
      }
      const s = d!.summary;
      tt.ok(s.sites! >= 15, `${s.sites} sites`);
      tt.equal(s.dwarfComplete, s.sites, `DWARF: ${s.dwarfComplete}/${s.sites} complete to main or the thread start`);
      tt.equal(s.dwarfExact, s.sites, `DWARF: ${s.dwarfExact}/${s.sites} sites with exact bytes and counts`);
      tt.equal(s.bytes, s.expectedBytes, `${s.bytes} bytes outstanding, as leaked`);
      tt.equal(s.dwarfLost, 0, 'no lost records');
      tt.comment(`demo: FP ${s.fpComplete}/${s.sites} complete (${s.fpEndsEarly} end early, ${s.fpWrongFrames} through wrong frames, ${s.fpMissing} missing), ${s.fpStacks} stacks`);
    });

    tb.test('--demo (text, piped): both stacks per site, a summary, no colors', async (tt) => {
      tt.equal(dt.status, 0, 'exit status 0', { stderr: dt.stderr });
      tt.notMatch(dt.stdout, ANSI, 'no escape sequences when piped');
      tt.match(dt.stdout, /^own_d12 {2}malloc\(1,212\) x 3 = 3,636 bytes/m, 'a site header');
      tt.match(dt.stdout, /^ {2}DWARF: complete \(3\/3 allocs\)$/m, 'its DWARF stack, complete');
      tt.match(dt.stdout, /^ {2}FP: (complete|BROKEN)/m, 'its FP stack');
      tt.match(dt.stdout, /^ {3}9 d12_1\+0x[0-9a-f]+$/m, 'frames listed');
      const m = /^DWARF: (\d+)\/(\d+) stacks complete to main \(or the thread start\), (\d+)\/\2 sites with exact bytes and counts/m.exec(dt.stdout);
      tt.ok(m && m[1] === m[2] && m[3] === m[2], `summary: ${m?.[0]}`);
      tt.match(dt.stdout, /^FP: {4}\d+\/\d+ stacks complete/m, 'FP summary line');
      tt.match(dt.stdout, /^Outstanding: [\d,]+ bytes in [\d,]+ allocations \(as leaky leaked them\); lost records: dwarf 0, fp \d+$/m, 'totals line');
    });

    tb.test('FORCE_COLOR: the text report colored, the same text underneath', async (tt) => {
      tt.equal(col.status, 0, 'exit status 0', { stderr: col.stderr });
      tt.match(col.stdout, ANSI, 'escape sequences');
      const plain = strip(col.stdout).split('\n').filter(Boolean);
      tt.match(plain[0], /^Attaching to pid \d+, Ctrl\+C to quit\.$/, 'Attaching line');
      tt.ok(plain.some((l) => /^\t\d+ \[<[0-9a-f]{16}>\] big_2\+0x[0-9a-f]+ \[\/.*leaky\]$/.test(l)), 'frame lines in memleak\'s format');
      tt.match(col.stderr, /^memleak: target pid \d+ exited$/m, 'stderr untouched');
    });

    tb.test('SIGINT: memleak prints a last report and exits 0', async (tt) => {
      const r = it.r;
      tt.equal(r.status, 0, 'exit status 0', { stderr: r.stderr });
      tt.match(r.stdout, /Top 3 stacks with outstanding allocations:\n8392704 bytes in 1 allocations from stack\n/, 'a last report');
      tt.notMatch(r.stderr, /target pid \d+ exited/, 'ended by the signal, not by the target');
      // it ended by itself (not killed at the hang guard); detaching its uprobes takes the kernel
      // 2-3 s, longer while other tracers detach theirs: the time is a comment, not a bound
      tt.equal(r.signal, null, 'ended by itself after SIGINT, not killed');
      tt.comment(`ended ${it.ms} ms after SIGINT`);
    });
  });
}
