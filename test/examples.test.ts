// examples/ (built by `make examples` into build/examples/):
//  - bpf_memleak: the example memleak before its patch (frame-pointer stacks, bpf_get_stackid)
//    and after it (memleak-dwarf.patch: capture.bpf.h snapshots unwound by libdwunw), each on its
//    own run of fixtures/x86_64/leaky (-O2 -fomit-frame-pointer), against `leaky --manifest`:
//    after the patch every site's stack is complete to main (or to the thread's start), with the
//    exact bytes and count; the frame-pointer stacks of the same sites are shown, and fewer of
//    them are complete (measured: none).
//  - api: doc/api_usage.md §6's programs: unwind_pid on a blocked leaky against `gdb -p`, and
//    unwind_core on a gcore of it against gdb on that core, pc for pc.
// memleak needs root, BPF and the kernel's BTF; the API programs need root (ptrace) and gdb.
// Without them the checks are skipped with the reason, unless DWUNW_REQUIRE_BPF=1.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, REQUIRE_BPF, root, skipOrFail, start } from './helpers.js';
import { type GdbFrame, gdbCore, gdbFrames, killAll, run, startTarget, waitBlocked } from './oracle/harness.js';

const out = join(root, 'build', 'examples');
const before = join(out, 'bpf_memleak', 'memleak');
const after = join(out, 'bpf_memleak', 'memleak-dwarf');
const leaky = join(root, 'fixtures', 'x86_64', 'build', 'leaky');
const ROUNDS = 2;

t.teardown(killAll);

// ---- the report ---------------------------------------------------------------------------------

interface Group {
  bytes: number;
  count: number;
  frames: { pc: bigint; name: string | null; module: string | null }[];
  incomplete: string | null;
  noStack: string | null;
}

/** The last report of a memleak run: its stacks. */
function lastReport(text: string): Group[] {
  const at = text.lastIndexOf('stacks with outstanding allocations:');
  const groups: Group[] = [];
  if (at < 0) return groups;
  for (const line of text.slice(at).split('\n').slice(1)) {
    let m: RegExpExecArray | null;
    if ((m = /^(\d+) bytes in (\d+) allocations from stack$/.exec(line)))
      groups.push({ bytes: Number(m[1]), count: Number(m[2]), frames: [], incomplete: null, noStack: null });
    else if (!groups.length) continue;
    else if ((m = /^\t\d+ \[<([0-9a-f]+)>\] (?:(\S+)\+0x[0-9a-f]+ \[(.*)\]|\[(.*)\]|<null sym>)$/.exec(line)))
      groups.at(-1)!.frames.push({ pc: BigInt(`0x${m[1]}`), name: m[2] ?? null, module: m[3] ?? m[4] ?? null });
    else if ((m = /^\t\[incomplete: (.*)\]$/.exec(line))) groups.at(-1)!.incomplete = m[1]!;
    else if ((m = /^\t\[no stack: (.*)\]$/.exec(line))) groups.at(-1)!.noStack = m[1]!;
  }
  return groups;
}

interface Site {
  name: string;
  size: number;
  count: number;
  /** the chain's functions that are leaky's own (the others are glibc's, named or not by .dynsym) */
  own: string[][];
  mainThread: boolean;
}

/** The manifest's sites this example traces: not the incidental ones, not mmap (README.md). */
function sites(): Site[] {
  const names = new Set(
    spawnSync('nm', ['--defined-only', leaky], { encoding: 'utf8' })
      .stdout.split('\n')
      .map((l) => l.split(' ')[2])
      .filter((n): n is string => !!n),
  );
  return spawnSync(leaky, ['--manifest'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.trim())
    .map((l) => l.split('\t') as [string, string, string, string, string])
    .filter(([name, alloc]) => !name.startsWith('incidental') && alloc !== 'mmap')
    .map(([name, , size, count, chain]) => {
      const links = chain.split(',').map((c) => c.split('|'));
      return {
        name,
        size: Number(size),
        count: Number(count),
        own: links.filter((alts) => alts.some((a) => names.has(a))),
        mainThread: links.at(-1)!.includes('main'),
      };
    });
}

/** leaky's frames of a stack, as names (leaky's `_start` left out: it is past main). */
const ownFrames = (g: Group): string[] => g.frames.filter((f) => f.module === leaky && f.name !== '_start').map((f) => f.name ?? '?');

/** The stack holding the site, complete: leaky's frames are the chain's, and it ends outermost. */
function completeFor(site: Site, g: Group): boolean {
  const own = ownFrames(g);
  if (own.length !== site.own.length || !own.every((n, i) => site.own[i]!.includes(n))) return false;
  if (g.incomplete || g.noStack) return false;
  return site.mainThread ? g.frames.at(-1)?.name === '_start' && g.frames.at(-1)?.module === leaky : true;
}

const show = (g: Group): string =>
  [`${g.bytes} bytes in ${g.count} allocations`, ...g.frames.map((f, i) => `  ${i} ${f.name ?? (f.module ? `[${f.module}]` : '<null sym>')}`), ...(g.incomplete ? [`  [incomplete: ${g.incomplete}]`] : [])].join('\n');

// ---- bpf_memleak --------------------------------------------------------------------------------

const memleakWhy = bpfUnavailable('the example memleak needs CAP_BPF, CAP_PERFMON', [
  [before, 'make examples'],
  [after, 'make examples'],
  [leaky, 'make fixtures'],
]);

t.test('bpf_memleak: before and after memleak-dwarf.patch, on leaky -fomit-frame-pointer', { timeout: 240_000 }, async (t) => {
  if (memleakWhy) return skipOrFail(t, memleakWhy, 'example memleak skipped');
  const args = ['-o', '0', '-T', '1000', '-c', `${leaky} ${ROUNDS}`, '1'];
  const [b, a] = await Promise.all([start(before, args, { timeoutMs: 120_000 }).done, start(after, args, { timeoutMs: 120_000 }).done]);
  const list = sites();
  t.ok(list.length >= 12, `leaky --manifest: ${list.length} sites this example traces`);
  const result: Record<string, { complete: string[]; groups: Group[] }> = {};
  for (const [label, r] of [['before', b], ['after', a]] as const) {
    t.equal(r.status, 0, `${label}: exit 0`, { stderr: r.stderr.slice(-2000) });
    t.match(r.stdout, /^Attaching to pid \d+, Ctrl\+C to quit\.$/m, `${label}: attached`);
    t.match(r.stdout, /^memleak: pid \d+ has exited$/m, `${label}: saw leaky exit, reported after it`);
    const groups = lastReport(r.stdout);
    result[label] = { groups, complete: list.filter((s) => groups.some((g) => completeFor(s, g))).map((s) => s.name) };
  }
  const A = result.after!;
  const B = result.before!;
  await t.test('after: every site complete, exact bytes and count', async (t) => {
    for (const s of list) {
      const g = A.groups.find((x) => completeFor(s, x));
      if (!t.ok(g, `${s.name}: complete to ${s.mainThread ? 'main' : "the thread's start"}`, { stacks: A.groups.filter((x) => ownFrames(x)[0] && s.own[0]!.includes(ownFrames(x)[0]!)).map(show) })) continue;
      t.equal(g!.bytes, s.size * s.count * ROUNDS, `${s.name}: ${s.size} x ${s.count} x ${ROUNDS} bytes`);
      t.equal(g!.count, s.count * ROUNDS, `${s.name}: ${s.count * ROUNDS} allocations`);
    }
    t.notOk(A.groups.some((g) => g.noStack), 'no allocation without its stack');
  });
  await t.test('before: the frame-pointer stacks of the same sites', async (t) => {
    t.ok(B.complete.length < A.complete.length, `fewer complete stacks: ${B.complete.length} of ${list.length} (after the patch: ${A.complete.length})`);
    // the contrast, for whoever reads the log: each site's first frame found, and what follows it
    for (const s of list.slice(0, 6)) {
      const g = B.groups.find((x) => x.frames.length && s.own[0]!.includes(x.frames[0]!.name ?? ''));
      t.comment(`${s.name}: expected ${s.own.map((x) => x[0]).join(' <- ')}\n${g ? show(g) : '(no stack starts with it)'}`);
    }
  });
});

// ---- api ------------------------------------------------------------------------------------------

const apiWhy = ((): string | null => {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'needs Linux on x86_64';
  if (process.getuid?.() !== 0) return 'not root (ptrace)';
  for (const [p, how] of [[join(out, 'api', 'unwind_pid'), 'make examples'], [join(out, 'api', 'unwind_core'), 'make examples'], [leaky, 'make fixtures']] as const)
    if (!existsSync(p)) return `${p} is not built (${how})`;
  if (spawnSync('gdb', ['--version']).status !== 0) return 'no gdb';
  return null;
})();

/** `#N 0xPC ...` (unwind_pid) or `  #N 0xPC ...` (unwind_core) lines: the pcs. */
const pcsOf = (text: string): bigint[] => [...text.matchAll(/^\s*#\d+\s+0x([0-9a-f]+) /gm)].map((m) => BigInt(`0x${m[1]}`));
const gdbPcs = (frames: GdbFrame[] | undefined): bigint[] => (frames ?? []).map((f) => BigInt(f.pc));

function samePcs(t: Test, label: string, got: bigint[], want: bigint[], text: string): void {
  const hex = (v: bigint[]): string[] => v.map((x) => `0x${x.toString(16)}`);
  t.ok(want.length >= 4, `${label}: gdb finds ${want.length} frames`);
  t.same(hex(got), hex(want), `${label}: ${got.length} frames, pc for pc as gdb`, { output: text });
}

t.test('api: unwind_pid and unwind_core against gdb', { timeout: 180_000 }, async (t) => {
  if (apiWhy) {
    if (REQUIRE_BPF) t.fail(`DWUNW_REQUIRE_BPF=1 but ${apiWhy}`);
    else t.pass(`API examples skipped: ${apiWhy}`, { skip: apiWhy });
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-examples-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // leaky sleeping its --delay in main: the same stack for every look
  const target = await startTarget(leaky, ['--delay', '120', '1']);
  try {
    await waitBlocked(target.pid);
    const pid = await run(join(out, 'api', 'unwind_pid'), [String(target.pid)], { timeoutMs: 30_000 });
    const gdb = await gdbFrames(target.pid);
    t.equal(pid.code, 0, 'unwind_pid: exit 0 (stop OK)', { stderr: pid.stderr });
    t.match(pid.stdout, /^stop: OK \(success\)$/m, 'unwind_pid: complete');
    t.match(pid.stderr, /\[audit\] dwunw: attach pid \d+ tid \d+: ok/, 'unwind_pid: the audit log of its attach');
    samePcs(t, 'unwind_pid', pcsOf(pid.stdout), gdbPcs(gdb.result.threads[String(target.pid)]), pid.stdout);

    const g = await run('timeout', ['-k', '5', '60', 'gcore', '-o', join(dir, 'core'), String(target.pid)], { timeoutMs: 70_000 });
    const core = join(dir, `core.${target.pid}`);
    if (!t.ok(existsSync(core), 'gcore wrote a core', { stderr: g.stderr.slice(-500) })) return;
    const [uc, gc] = await Promise.all([run(join(out, 'api', 'unwind_core'), [core], { timeoutMs: 30_000 }), gdbCore(leaky, core)]);
    t.equal(uc.code, 0, 'unwind_core: exit 0', { stderr: uc.stderr });
    t.match(uc.stdout, new RegExp(`^pid ${target.pid} \\(leaky\\), 1 threads`, 'm'), 'unwind_core: the core of leaky, 1 thread');
    t.match(uc.stdout, /^ {2}stop: OK$/m, 'unwind_core: complete');
    samePcs(t, 'unwind_core', pcsOf(uc.stdout), gdbPcs(gc.threads[String(target.pid)]), uc.stdout);
    t.same(pcsOf(uc.stdout), pcsOf(pid.stdout), 'the core and the live process: the same stack');
  } finally {
    await target.kill();
  }
});
