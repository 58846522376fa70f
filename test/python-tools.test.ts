// Python frames read in the BPF program at the event (runtime/python.bpf.h, py_merge.c), in the
// tools' own stacks, against the program's own view:
//   profile (--unwind=dwarf and kernel) on fixtures/python/cpu_chains.py: five threads, one known
//   chain each (plain calls, methods, recursion 24 deep, a generator, a key= callback called by
//   sorted() in C). Of the worker threads' samples >= 95 % carry their chain exactly (every
//   fixture frame's function and call line, in order, from the thread's root on) with the native
//   root frame; each chain's share of the samples is within 5 points of the thread's own
//   time.thread_time() share.
//   memleak on fixtures/python/leaks.py: every leak site's function and line, holding exactly the
//   bytes it leaked (40 blocks of size + 1: bytearray's terminating NUL).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { bpfDir, bpfUnavailable, root, run, skipOrFail } from './helpers.js';

const PY = '/usr/bin/python3.11';
const CHAINS = join(root, 'fixtures', 'python', 'cpu_chains.py');
const LEAKS = join(root, 'fixtures', 'python', 'leaks.py');
const profileBin = join(bpfDir, 'profile');
const memleakBin = join(bpfDir, 'memleak');

const why = bpfUnavailable('BPF tools', [
  [profileBin, 'make'],
  [memleakBin, 'make'],
  [PY, 'scripts/ensure-deps'],
]);

/** The 1-based line of the first line of `file` holding `text`. */
function lineOf(file: string, text: string): number {
  const i = readFileSync(file, 'utf8').split('\n').findIndex((l) => l.includes(text));
  if (i < 0) throw new Error(`${text} not in ${file}`);
  return i + 1;
}

interface PyF {
  name: string;
  file: string;
  line: number | null;
}
/** A folded frame "func (file:line)" (a Python one), else null. */
function pyFrame(f: string): PyF | null {
  const m = /^(.*) \((.*?)(?::(\d+))?\)$/.exec(f);
  return m ? { name: m[1]!, file: m[2]!, line: m[3] ? Number(m[3]) : null } : null;
}

/** folded line -> frames (comm first) and count */
function parseFolded(out: string): { frames: string[]; count: number }[] {
  return out
    .split('\n')
    .filter((l) => /\s\d+$/.test(l) && l.includes(';'))
    .map((l) => {
      const sp = l.lastIndexOf(' ');
      return { frames: l.slice(0, sp).split(';'), count: Number(l.slice(sp + 1)) };
    });
}

// The chains, root first: [function, line it calls the next from] (the last: any line).
const L = (s: string): number => lineOf(CHAINS, s);
const call = (fn: string, at: string): [string, number] => [fn, L(at)];
const chains: Record<string, [string, number | null][]> = {
  plain: [call('timed', '    fn()'), call('run_plain', '        plain_a()'), call('plain_a', 'return plain_b()'), ['plain_b', null], ['spin', null]],
  method: [call('timed', '    fn()'), call('run_method', 'w.outer()'), call('Worker.outer', 'return self.inner()'), ['Worker.inner', null], ['spin', null]],
  recurse: [
    call('timed', '    fn()'),
    call('run_recurse', 'recurse(24)'),
    ...Array.from({ length: 24 }, (): [string, number] => call('recurse', 'return recurse(d - 1)')),
    ['recurse', null],
    ['spin', null],
  ],
  gen: [call('timed', '    fn()'), call('run_gen', 'for _ in produce():'), call('produce', 'yield spin(3000)'), ['spin', null]],
  sorted: [call('timed', '    fn()'), call('run_sorted', 'sorted(data, key=key_of)'), call('key_of', 'return spin(300) + x'), ['spin', null]],
};
// plain_b, Worker.inner and recurse's last call the leaf from the line after their first
chains.plain![3] = ['plain_b', lineOf(CHAINS, 'def plain_b') + 1];
chains.method![3] = ['Worker.inner', lineOf(CHAINS, 'def inner') + 1];
chains.recurse![26] = ['recurse', lineOf(CHAINS, 'if d == 0') + 1];

/** The tag whose chain the fixture frames are a prefix of (at least up to run_X), or null. */
function chainOf(fx: PyF[]): string | null {
  for (const [tag, ch] of Object.entries(chains)) {
    if (fx.length < 2 || fx.length > ch.length) continue;
    const ok = fx.every((f, i) => f.name === ch[i]![0] && (i === fx.length - 1 || f.line === ch[i]![1]));
    if (ok) return tag;
  }
  return null;
}

const ROOTS = new Set(['clone3', 'clone', '__clone3', '__clone', 'start_thread']);

// perf: dwarf mode on the per-CPU perf buffer, where the reader orders the records by their kernel
// time (the Python record has its own, just before its stack's)
for (const mode of ['dwarf', 'kernel', 'perf']) {
  t.test(`profile --unwind=${mode}: each thread's Python chain, at the event`, { timeout: 240_000 }, async (tt) => {
    if (why) return skipOrFail(tt, why, 'profile Python frames');
    const how = mode === 'perf' ? ['--unwind=dwarf', '--perf-buffer'] : [`--unwind=${mode}`];
    const r = await run(profileBin, ['-U', '-F', '499', '-f', ...how, '-v', '--', PY, CHAINS, '4', '--cpu'], { timeoutMs: 180_000 });
    tt.equal(r.status, 0, `profile exits 0\n${r.stderr.slice(-2000)}`);
    const own = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{"pid"'))!) as { cpu: Record<string, number> };
    const lines = parseFolded(r.stdout);
    let workers = 0;
    let exact = 0;
    const per: Record<string, number> = {};
    const bad: string[] = [];
    for (const { frames, count } of lines) {
      // worker threads: their native root is the thread start
      if (!frames.includes('start_thread')) continue;
      workers += count;
      const fx = frames.map(pyFrame).filter((f): f is PyF => !!f && f.file === CHAINS);
      const tag = chainOf(fx);
      if (tag && ROOTS.has(frames[1]!)) {
        exact += count;
        per[tag] = (per[tag] ?? 0) + count;
      } else if (bad.length < 5) bad.push(`${count}: ${frames.slice(1).join(';')}`);
    }
    tt.ok(workers >= 200, `${workers} worker samples (>= 200)`);
    tt.ok(exact >= 0.95 * workers, `${exact} of ${workers} worker samples carry their exact chain (${((100 * exact) / workers).toFixed(1)} %)\n${bad.join('\n')}`);
    const cpuTotal = Object.values(own.cpu).reduce((a, b) => a + b, 0);
    for (const tag of Object.keys(chains)) {
      const mine = (100 * (per[tag] ?? 0)) / exact;
      const theirs = (100 * own.cpu[tag]!) / cpuTotal;
      tt.ok(Math.abs(mine - theirs) <= 5, `${tag}: ${mine.toFixed(1)} % of the samples, ${theirs.toFixed(1)} % of the program's own CPU time`);
    }
    tt.match(r.stderr, /python: 1 processes, \d+ chains: \d+ merged/, 'the Python chains are counted');
    if (mode === 'perf') tt.notMatch(r.stderr, /perf-buffer records without a time/, 'every record ordered by its own time (none said untimed)');
  });
}

t.test('memleak: the Python function and line holding each leaked block', { timeout: 240_000 }, async (tt) => {
  if (why) return skipOrFail(tt, why, 'memleak Python frames');
  const r = await run(memleakBin, ['-z', '30000', '--folded', '--unwind=dwarf', '8', '1', '--', PY, LEAKS], { timeoutMs: 180_000 });
  tt.equal(r.status, 0, `memleak exits 0\n${r.stderr.slice(-2000)}`);
  const lines = parseFolded(r.stdout);
  const sites: [string, string, number][] = [
    ['leak_small', 'bytearray(40000)', 40000],
    ['leak_large', 'bytearray(70000)', 70000],
    ['Cache.fill', 'bytearray(90000)', 90000],
  ];
  for (const [fn, text, size] of sites) {
    const line = lineOf(LEAKS, text);
    const frame = `${fn} (${LEAKS}:${line})`;
    const bytes = lines.filter((l) => l.frames.includes(frame)).reduce((a, l) => a + l.count, 0);
    tt.equal(bytes, 40 * (size + 1), `${frame}: holds 40 blocks of ${size + 1} bytes`);
  }
});
