// JIT code, with real BPF: node (V8) run with --perf-basic-prof --interpreted-frames-native-stack
// (fixtures/node/jit_leak.js), traced in the default (dwarf) mode.
//  - memleak -p PID: JS functions leak Buffer.allocUnsafeSlow blocks (kept referenced) of sizes
//    only they use (-z/-Z keep the others out): every block accounted for; every stack names the
//    JS functions from /tmp/perf-PID.map (jitLeakInner above jitLeakOuter), goes on through V8's
//    frames without CFI to node::Start / __libc_start_main, complete, each frame with its origin;
//  - profile -p PID, node spinning: samples in JS name jitSpinOuter/jitSpinInner, marked [jit], with
//    the legend line, and reach node::Start / __libc_start_main; no frame is printed <null sym>.
// node's binary is large: the first unwind builds its table (seconds under load); the test
// asserts invariants only, never timings. Needs root, BTF, BPF and node: skipped with the
// reason, unless DWUNW_REQUIRE_BPF=1 (CI).
import type { ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { REQUIRE_BPF as REQUIRE, root, start as startProcess } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const profileBin = join(root, 'build', 'bpf', 'profile');
const fixture = join(root, 'fixtures', 'node', 'jit_leak.js');
const nodeBin = existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
const NODE_FLAGS = ['--perf-basic-prof', '--interpreted-frames-native-stack'];
const ORIGINS = ['window', 'live', 'fp', 'prologue', 'lr', 'signal'];
const BOTTOM = /^(node::Start\(|__libc_start_main$|__libc_start_call_main$)/;

function unavailable(): string | null {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'needs Linux on x86_64';
  if (process.getuid?.() !== 0) return 'not root (memleak and profile need CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)';
  if (!existsSync('/sys/kernel/btf/vmlinux')) return 'the kernel has no BTF (/sys/kernel/btf/vmlinux)';
  for (const b of [memleakBin, profileBin]) if (!existsSync(b)) return `${b} is not built (make bpf)`;
  return null;
}

interface JFrame {
  pc: string;
  symbol: string | null;
  module: string | null;
  origin?: string;
}
interface JStack {
  allocations: number;
  bytes: number;
  frames: JFrame[];
  kind: string;
  complete: boolean | null;
  stop: string;
  reason?: string;
}
interface JReport {
  stacks: JStack[];
  lost: number;
  untracked: Record<string, number>;
  maps?: Record<string, number>;
}

interface Proc {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  done: Promise<number | null>;
}

// node --perf-basic-prof writes isolate-*-v8.log files into its working directory: its own
const work = mkdtempSync(join(tmpdir(), 'dwunw-node-jit-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

/** helpers' start in the work directory, its output so far kept on the Proc. */
function start(cmd: string, args: string[], timeoutMs: number): Proc {
  const p = { stdout: '', stderr: '' } as Proc;
  const s = startProcess(cmd, args, { cwd: work, timeoutMs, onOutput: (o, e) => ((p.stdout = o), (p.stderr = e)) });
  p.child = s.child;
  p.done = s.done.then((r) => r.status);
  return p;
}

/** Resolves when `test` holds for the stream's text so far (polled), or rejects after ms. */
async function waitFor(p: Proc, test: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`${what}: the process ended first`);
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const names = (s: JStack): string[] => s.frames.map((f) => f.symbol ?? '');

const skip = unavailable();
if (skip && REQUIRE) t.fail(`DWUNW_REQUIRE_BPF=1 but: ${skip}`);

t.test('memleak -p: JS functions named from the perf map, stacks complete to node::Start', { skip: skip ?? false }, async (tt) => {
  const node = start(nodeBin, [...NODE_FLAGS, fixture, 'leak', '8'], 180_000);
  tt.teardown(() => void node.child.kill('SIGKILL'));
  await waitFor(node, () => /^ready \d+$/m.test(node.stdout), 60_000, 'node ready');
  const pid = Number(/^ready (\d+)$/m.exec(node.stdout)![1]);
  // node never removes its perf map: ours to remove once the test is done
  tt.teardown(() => rmSync(`/tmp/perf-${pid}.map`, { force: true }));
  // only the fixture's blocks: SIZE .. SIZE + PER_ROUND - 1 (jit_leak.js)
  const ml = start(memleakBin, ['--unwind=dwarf', '--json', '-o', '0', '-T', '100000', '-z', '70000', '-Z', '70019', '-p', String(pid), '1'], 170_000);
  tt.teardown(() => void ml.child.kill('SIGKILL'));
  await waitFor(ml, () => /^Attaching to pid \d+/m.test(ml.stderr), 60_000, 'memleak attached');
  process.kill(pid, 'SIGUSR2');
  await waitFor(node, () => /^\{"leaked"/m.test(node.stdout), 60_000, 'node leaked its blocks');
  const sum = JSON.parse(node.stdout.split('\n').find((l) => l.startsWith('{"leaked"'))!) as { leaked: number; bytes: number };
  // the process (and its maps) stays until a report (one a second) holds every block
  const reports = (): JReport[] => ml.stdout.split('\n').filter((l) => l.startsWith('{') && l.endsWith('}')).map((l) => JSON.parse(l) as JReport);
  const held = (r: JReport | undefined) => (r ? r.stacks.reduce((a, s) => a + s.allocations, 0) + (r.untracked.allocs_full ?? 0) + (r.untracked.no_pending ?? 0) : 0);
  await waitFor(ml, () => held(reports().at(-1)) >= sum.leaked, 120_000, 'a report with every block').catch((e: Error) => tt.comment(e.message));
  node.child.kill('SIGTERM');
  const [mlStatus] = await Promise.all([ml.done, node.done]);
  tt.equal(mlStatus, 0, 'memleak exits 0 when the target exits', { stderr: ml.stderr });
  const last = reports().at(-1);
  if (!last) return void tt.fail('no report from memleak', { ml: ml.stderr });

  const untracked = (last.untracked.allocs_full ?? 0) + (last.untracked.no_pending ?? 0);
  const count = last.stacks.reduce((a, s) => a + s.allocations, 0);
  const bytes = last.stacks.reduce((a, s) => a + s.bytes, 0);
  tt.equal(count + untracked, sum.leaked, `every block accounted for: ${count} outstanding + ${untracked} untracked = ${sum.leaked} leaked`);
  if (untracked === 0) tt.equal(bytes, sum.bytes, `their bytes: ${bytes}`);

  const unwound = last.stacks.filter((s) => s.kind === 'dwarf');
  const pseudo = last.stacks.filter((s) => s.kind !== 'dwarf');
  tt.comment(`${unwound.length} stacks unwound (${unwound.reduce((a, s) => a + s.allocations, 0)} blocks), ${pseudo.length} pseudo-stacks (${pseudo.map((s) => s.reason).join(', ')}), records lost: ${last.lost}`);
  tt.ok(unwound.length > 0, 'stacks were unwound');
  // V8's code made after attach comes as mapping events (mmap/mprotect executable): known before the walk
  const m = last.maps ?? {};
  tt.equal(m.rewalks, 0, `each record walked once (rewalks ${m.rewalks}, /proc re-reads ${m.hole_reads}, anonymous exec mmaps ${m.anon_mmaps}, mprotects ${m.mprotects})`);
  // a stack that needed memory above the window may be flagged (the stack changed since the
  // event): then never complete, and its reason says so
  const complete = unwound.filter((s) => s.complete);
  tt.comment(`complete: ${complete.length} stacks (${complete.reduce((a, s) => a + s.allocations, 0)} blocks); flagged: ${unwound.filter((s) => !s.complete).map((s) => s.stop).join(', ') || 'none'}`);
  // flagged stacks are the exception (memory above the window rewritten before the unwind): a
  // bounded share of the blocks (measured at load 30 on 2 cores: 140 of 160 complete, twice)
  const completeBlocks = complete.reduce((a, s) => a + s.allocations, 0);
  tt.ok(completeBlocks >= 0.6 * count, `blocks under complete stacks: ${completeBlocks} of ${count} (>= 60 %)`);
  for (const s of unwound) {
    const n = names(s);
    const inner = n.findIndex((x) => /jitLeakInner/.test(x));
    const outer = n.findIndex((x) => /jitLeakOuter/.test(x));
    const where = n.join(' <- ');
    tt.ok(inner >= 0 && outer > inner, 'the JS functions are named, jitLeakInner above jitLeakOuter', { where });
    if (s.complete) tt.ok(n.some((x) => BOTTOM.test(x)), 'a complete stack goes on to node::Start / __libc_start_main', { where });
    else tt.ok(['STALE', 'LIVE_END'].includes(s.stop) && s.reason, `not complete: flagged, memory above the window changed (${s.stop})`, { where });
    tt.equal(s.complete, s.stop === 'OK', `complete exactly when the walk reached the outermost frame (stop ${s.stop})`, { where });
    tt.ok(s.frames.every((f) => ORIGINS.includes(f.origin ?? '')), 'every frame says where it came from', { origins: s.frames.map((f) => f.origin) });
    const js = s.frames.filter((f) => /^JS:/.test(f.symbol ?? ''));
    tt.ok(js.length > 0 && js.every((f) => f.module === null), 'JS frames are in no file (anonymous code)');
    tt.ok(s.frames.some((f) => f.origin === 'fp'), 'V8 frames without CFI are stepped by frame pointers, and marked fp');
    if (tt.passing() === false) break;
  }
});

t.test('profile -p: JS names marked [jit], stacks to node::Start, no <null sym>', { skip: skip ?? false }, async (tt) => {
  // node spins until ended: it is alive while profile unwinds its samples (the first unwind
  // builds node's table, seconds under load)
  const node = start(nodeBin, [...NODE_FLAGS, fixture, 'spin', '150000'], 170_000);
  tt.teardown(() => void node.child.kill('SIGKILL'));
  await waitFor(node, () => /^ready \d+$/m.test(node.stdout), 60_000, 'node ready');
  const pid = Number(/^ready (\d+)$/m.exec(node.stdout)![1]);
  // node never removes its perf map: ours to remove once the test is done
  tt.teardown(() => rmSync(`/tmp/perf-${pid}.map`, { force: true }));
  const pr = start(profileBin, ['-U', '--unwind=dwarf', '-F', '199', '-p', String(pid), '3'], 160_000);
  tt.teardown(() => void pr.child.kill('SIGKILL'));
  const status = await pr.done;
  // SIGKILL: a signal node handles waits for its event loop, which the spin loop holds
  node.child.kill('SIGKILL');
  await node.done;
  tt.equal(status, 0, 'profile exits 0 after its duration', { stderr: pr.stderr });
  tt.notMatch(pr.stdout, /<null sym>/, 'no frame printed <null sym>');
  // text blocks: frames, "    -   comm (pid)", count, blank line
  const blocks = pr.stdout.split('\n\n').map((b) => b.split('\n').filter((l) => /^ {4}\S/.test(l) && !/^ {4}-\s/.test(l)).map((l) => l.slice(4)));
  const js = blocks.filter((b) => b.some((l) => /^JS:\S*jitSpin(Inner|Outer) /.test(l)));
  tt.comment(`${blocks.length} stacks, ${js.length} through jitSpinInner/jitSpinOuter`);
  tt.ok(js.length > 0, 'samples in the JS functions, named');
  for (const b of js) {
    const where = b.join(' <- ');
    tt.ok(b.filter((l) => l.startsWith('JS:')).every((l) => / \[jit\]$/.test(l)), 'each JS frame marked [jit]', { where });
    tt.ok(b.some((l) => BOTTOM.test(l)), 'the stack goes on to node::Start / __libc_start_main', { where });
    if (tt.passing() === false) break;
  }
  tt.match(pr.stdout, /^ {4}frames marked .*\[jit\] named from the JIT's \/tmp\/perf-PID\.map/m, 'the legend explains the markers once');
});

t.test('profile -p: a planted perf map (another owner, a symlink) names nothing and is said once', { skip: skip ?? false }, async (tt) => {
  // node without --perf-basic-prof writes no map of its own: the test plants one covering every address
  const node = start(nodeBin, ['--interpreted-frames-native-stack', fixture, 'spin', '150000'], 170_000);
  tt.teardown(() => void node.child.kill('SIGKILL'));
  await waitFor(node, () => /^ready \d+$/m.test(node.stdout), 60_000, 'node ready');
  const pid = Number(/^ready (\d+)$/m.exec(node.stdout)![1]);
  const mapPath = `/tmp/perf-${pid}.map`;
  const elsewhere = join(work, `planted-${pid}.map`);
  tt.teardown(() => rmSync(mapPath, { force: true }));
  const cases: [string, () => void, RegExp | null][] = [
    ['owned by root (the control: used)', () => writeFileSync(mapPath, '0 ffffffffffff planted\n'), null],
    [
      'owned by another user',
      () => {
        writeFileSync(mapPath, '0 ffffffffffff planted\n');
        chownSync(mapPath, 65534, 65534);
      },
      /perf-\d+\.map not used: owned by uid 65534, not by root or the process's user \(uid 0\)$/,
    ],
    [
      'a symbolic link',
      () => {
        writeFileSync(elsewhere, '0 ffffffffffff planted\n');
        symlinkSync(elsewhere, mapPath);
      },
      /perf-\d+\.map not used: a symbolic link$/,
    ],
  ];
  for (const [what, plant, refused] of cases) {
    rmSync(mapPath, { force: true });
    plant();
    const pr = start(profileBin, ['-U', '--unwind=dwarf', '-f', '-F', '199', '-p', String(pid), '2'], 160_000);
    tt.teardown(() => void pr.child.kill('SIGKILL'));
    tt.equal(await pr.done, 0, `${what}: profile exits 0`, { stderr: pr.stderr });
    const lines = pr.stderr.split('\n').filter((l) => /perf-\d+\.map/.test(l));
    if (refused === null) {
      tt.match(pr.stdout, /;planted/, `${what}: JIT frames named from it`);
      tt.equal(lines.length, 0, `${what}: nothing said`);
    } else {
      tt.notMatch(pr.stdout, /planted/, `${what}: no frame named from it`);
      tt.equal(lines.length, 1, `${what}: said once`);
      tt.match(lines[0] ?? '', refused, `${what}: the line names the file and why`);
    }
  }
});
