// memleak with plugins loaded and unloaded at reused addresses, with real BPF (issue 17): a
// library unloaded and another loaded at its address must not take over its blocks.
// plugswap loads libswapA.so then libswapB.so (another layout) or libswapC.so (A's layout, other
// names: the same pcs at the same address), leaks 10 blocks through each, and unloads it at once
// or after a delay; 20 rounds, so 400 blocks; the loader reuses the address almost every time
// (ring buffer, and once through the perf buffer).
// A control never unloads. The size of a block says which library allocated it (1111: A, 2222:
// the other). Each block counts as right (under a complete stack through its own library's
// swapX_3 <- swapX_2 <- swapX_1 <- swap_leak <- main, with its path), flagged (its stack is
// shown as not complete, with a reason) or wrong: 0 wrong, and no stack holds both sizes.
// Needs root, BTF and BPF: skipped with the reason, unless DWUNW_REQUIRE_BPF=1 (CI).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, root, skipOrFail } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const fx = join(root, 'fixtures', 'x86_64', 'build');
const ROUNDS = 20;
const BLOCKS = 10;

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], ...['plugswap', 'libswapA.so', 'libswapB.so', 'libswapC.so'].map((f): [string, string] => [join(fx, f), 'make fixtures'])]);

interface JFrame { symbol: string | null; module: string | null }
interface JStack {
  allocations: number;
  bytes: number;
  frames: JFrame[];
  complete: boolean | null;
  stop?: string;
  reason?: string;
  allocs?: { addr: string; size: number }[];
}
interface JReport { stacks: JStack[]; untracked: Record<string, number>; maps?: Record<string, number> }

async function trace(cmd: string, extra: string[]): Promise<{ code: number | null; last: JReport | null; stderr: string }> {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(memleakBin, [...extra, '--json', '-a', '-o', '0', '-T', '100000', '-c', cmd, '600'],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((res) => child.on('close', (c) => res(c)));
  clearTimeout(timer);
  const reps = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as JReport);
  return { code, last: reps[reps.length - 1] ?? null, stderr };
}

/** right / wrong / flagged blocks, and stacks holding blocks of both libraries. */
function score(r: JReport, other: string) {
  const bySize: Record<number, string> = { 1111: 'A', 2222: other };
  const out = { right: 0, wrong: 0, flagged: 0, merged: 0, total: 0 };
  for (const s of r.stacks) {
    const libs = new Set<string>();
    const names = s.frames.map((f) => f.symbol ?? '?');
    for (const a of s.allocs ?? []) {
      const lib = bySize[a.size];
      if (!lib) continue;
      libs.add(lib);
      out.total++;
      const file = `libswap${lib}.so`; // the library itself, or a copy DIR/N-libswapX.so
      const chain = [`swap${lib}_3`, `swap${lib}_2`, `swap${lib}_1`, 'swap_leak', 'main'];
      const k = names.indexOf(chain[0]!);
      const ours = k >= 0 && chain.every((c, i) => names[k + i] === c) &&
        s.frames.slice(k, k + 4).every((f) => f.module === join(fx, file) || (f.module ?? '').endsWith(`-${file}`));
      if (s.complete !== true) out.flagged++;
      else if (ours) out.right++;
      else out.wrong++;
    }
    if (libs.size > 1) out.merged++;
  }
  return out;
}

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'memleak map tests skipped');
} else {
  const variants = [
    { name: 'another layout (B), unloaded at once', other: 'B', opts: '', extra: [] as string[] },
    { name: 'the same layout, other names (C), unloaded at once', other: 'C', opts: '' },
    { name: 'another layout (B), unloaded after 20 ms', other: 'B', opts: '--delay 20' },
    { name: 'the same layout (C), unloaded after 20 ms', other: 'C', opts: '--delay 20' },
    { name: 'control: nothing unloaded (A and C)', other: 'C', opts: '--keep' },
    // the perf buffer orders records per CPU only: a record older than a mapping already applied
    // is flagged, never attributed to the newer library
    { name: 'perf buffer: the same layout (C), unloaded at once', other: 'C', opts: '', extra: ['--perf-buffer'] },
    // each load a fresh copy, deleted once unloaded: read late, its file is gone (flagged, and
    // never merged with the next copy, which may get the same inode number)
    { name: 'fresh copies deleted after dlclose (A and C)', other: 'C', opts: '--copy', extra: [] },
  ];
  for (const v of variants) {
    t.test(v.name, { timeout: 150_000 }, async (t) => {
      const dir = v.opts === '--copy' ? mkdtempSync(join(tmpdir(), 'plugswap-')) : '';
      t.teardown(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });
      const cmd = `${join(fx, 'plugswap')} ${v.opts} ${dir} ${ROUNDS} ${BLOCKS} ${join(fx, 'libswapA.so')} ${join(fx, `libswap${v.other}.so`)}`;
      const r = await trace(cmd, v.extra ?? []);
      t.equal(r.code, 0, `memleak exits 0${r.code ? `: ${r.stderr.trim().split('\n').pop()}` : ''}`);
      const m = /plugswap: (\d+) loads, (\d+) at an address used by the other library before/.exec(r.stderr);
      t.ok(m && r.last, 'plugswap and memleak finished');
      if (!m || !r.last) return;
      if (dir) t.same(readdirSync(dir), [], 'every copy deleted');
      if (v.opts !== '--keep')
        t.ok(Number(m[2]) > 0, `the loader reused the other library's address (${m[2]} of ${m[1]} loads)`);
      const s = score(r.last, v.other);
      const untracked = Object.values(r.last.untracked).reduce((a, b) => a + b, 0);
      t.equal(s.wrong, 0, 'no block under a complete stack of another library');
      t.equal(s.merged, 0, 'no stack holds blocks of both libraries');
      t.ok(s.right + s.flagged + untracked >= 2 * ROUNDS * BLOCKS,
        `every block accounted for: ${s.right} right + ${s.flagged} flagged + ${untracked} untracked of ${2 * ROUNDS * BLOCKS}`);
      t.ok(r.last.maps && r.last.maps.mmaps > 0, 'mapping changes were applied in record order (summary "maps")');
      t.comment(`${v.name}: ${JSON.stringify({ ...s, reused: Number(m[2]), loads: Number(m[1]), maps: r.last.maps })}`);
    });
  }
}
