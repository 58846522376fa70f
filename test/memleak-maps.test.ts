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
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfDir, bpfUnavailable, cliEnv, fixturesX64 as fx, jsonLines, run, skipOrFail } from './helpers.js';

const memleakBin = join(bpfDir, 'memleak');
const ROUNDS = 20;
const BLOCKS = 10;

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], ...['plugswap', 'libswapA.so', 'libswapB.so', 'libswapC.so', 'jitleak'].map((f): [string, string] => [join(fx, f), 'make fixtures'])]);

interface JFrame { pc?: string; symbol: string | null; module: string | null; origin?: string; anon?: boolean }
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

async function trace(cmd: string, extra: string[], more: Record<string, string> = {}): Promise<{ code: number | null; last: JReport | null; stderr: string }> {
  const r = await run(memleakBin, ['--unwind=dwarf', ...extra, '--json', '-a', '-o', '0', '-T', '100000', '-c', cmd, '600'],
    { env: cliEnv(more), timeoutMs: 120_000 });
  return { code: r.status, last: jsonLines<JReport>(r.stdout).at(-1) ?? null, stderr: r.stderr };
}

/** right / wrong / flagged blocks, and stacks holding blocks of both libraries. */
function score(r: JReport, other: string) {
  const bySize: Record<number, string> = { 1111: 'A', 2222: other };
  const out = { right: 0, wrong: 0, flagged: 0, named: 0, merged: 0, total: 0 };
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
      // a copy unwound through its file held open after it was deleted: "PATH (deleted)"
      const mod = (f: JFrame) => (f.module ?? '').replace(/ \(deleted\)$/, '');
      const ours = k >= 0 && chain.every((c, i) => names[k + i] === c) &&
        s.frames.slice(k, k + 4).every((f) => mod(f) === join(fx, file) || mod(f).endsWith(`-${file}`));
      if (s.complete !== true) {
        out.flagged++;
        // flagged for a file gone before it could be held: the frame names it, as perf does
        if (s.stop === 'MODULE_UNKNOWN') {
          const last = s.frames[s.frames.length - 1];
          const named = !!last && last.symbol === null && new RegExp(`-${file} \\(deleted\\)$`).test(last.module ?? '') &&
            /deleted before it could be held open/.test(s.reason ?? '');
          if (named) out.named++;
        }
      }
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
    { name: 'another layout (B), unloaded at once', other: 'B', opts: '', extra: [] as string[], minRight: 0.9 },
    { name: 'the same layout, other names (C), unloaded at once', other: 'C', opts: '', minRight: 0.9 },
    { name: 'another layout (B), unloaded after 20 ms', other: 'B', opts: '--delay 20', minRight: 0.9 },
    { name: 'the same layout (C), unloaded after 20 ms', other: 'C', opts: '--delay 20', minRight: 0.9 },
    { name: 'control: nothing unloaded (A and C)', other: 'C', opts: '--keep' },
    // the perf buffer orders records per CPU only: a record older than a mapping already applied
    // is flagged, never attributed to the newer library
    { name: 'perf buffer: the same layout (C), unloaded at once', other: 'C', opts: '', extra: ['--perf-buffer'], minRight: 0.9 },
    // each load a fresh copy, deleted once unloaded: read late, its file is gone (flagged, and
    // never merged with the next copy, which may get the same inode number). The old 2-of-49
    // flake (wrong and merged, under load): copy k gone, libdwunw opened /proc/PID/map_files of
    // its range, by then copy k+1 with k's inode number; now such a module is not trusted
    { name: 'fresh copies deleted after dlclose (A and C)', other: 'C', opts: '--copy', extra: [], minRight: 0 },
    // the same, unloaded and deleted 20 ms after the leaks: the files are held open by identity
    // when their mapping is seen, so most copies are unwound and named though deleted
    { name: 'fresh copies deleted 20 ms after the leaks (A and C)', other: 'C', opts: '--copy', delay: '--delay 20', extra: [], minRight: 0.9 },
    // copies alive 300 ms after their leaks, so memleak unwinds them while their files exist:
    // each copy right under its own path (stacks are keyed by device, inode and path; a copy
    // never loaded frees its inode number, which ext4 gives the next copy at once)
    { name: 'fresh copies alive 300 ms, inode numbers reused (A and C)', other: 'C', opts: '--copy',
      delay: '--delay 300', extra: [], rounds: 4, minRight: 0.9 },
    // ... and memleak processing each record 300 ms after its event (a consumer fallen behind):
    // every copy is deleted by then, so a block is right only through its file held open
    // ("PATH (deleted)"), else flagged naming its copy
    { name: 'fresh copies deleted 20 ms after the leaks, records processed 300 ms late', other: 'C', opts: '--copy',
      delay: '--delay 20', extra: [], lag: '300', minRight: 0.9 },
  ];
  for (const v of variants) {
    t.test(v.name, { timeout: 150_000 }, async (t) => {
      const dir = v.opts === '--copy' ? mkdtempSync(join(tmpdir(), 'plugswap-')) : '';
      const delay = (v as { delay?: string }).delay ?? '';
      t.teardown(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });
      const rounds = (v as { rounds?: number }).rounds ?? ROUNDS;
      const cmd = `${join(fx, 'plugswap')} ${delay} ${v.opts} ${dir} ${rounds} ${BLOCKS} ${join(fx, 'libswapA.so')} ${join(fx, `libswap${v.other}.so`)}`;
      const lag = (v as { lag?: string }).lag;
      const r = await trace(cmd, v.extra ?? [], lag ? { DWUNW_TEST_LAG_MS: lag } : {});
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
      t.ok(s.right + s.flagged + untracked >= 2 * rounds * BLOCKS,
        `every block accounted for: ${s.right} right + ${s.flagged} flagged + ${untracked} untracked of ${2 * rounds * BLOCKS}`);
      // flagging is the exception, not a way out: the control (nothing unloaded) is right on every
      // block; the others on at least minRight (measured at load 9 on 2 cores: 400 of 400 right in
      // every variant but the copies deleted at once, 10 right + 390 flagged naming their copy)
      const minRight = (v as { minRight?: number }).minRight ?? 0;
      if (v.opts === '--keep') t.equal(s.right, 2 * rounds * BLOCKS - untracked, `control: every block right (${s.right} + ${untracked} untracked)`);
      else t.ok(s.right >= minRight * 2 * rounds * BLOCKS, `${s.right} of ${2 * rounds * BLOCKS} blocks right (>= ${100 * minRight} %)`);
      t.ok(r.last.maps && r.last.maps.mmaps > 0, 'mapping changes were applied in record order (summary "maps")');
      if (dir) {
        // every block flagged because its copy was gone is flagged under a frame naming that copy
        // "(deleted)", with the reason; each copy's executable mapping was held or counted missed
        const flaggedUnknown = r.last.stacks.filter((st) => st.stop === 'MODULE_UNKNOWN')
          .reduce((a, st) => a + (st.allocs ?? []).filter((x) => x.size === 1111 || x.size === 2222).length, 0);
        t.equal(s.named, flaggedUnknown, `every MODULE_UNKNOWN block names its deleted copy (${s.named} of ${flaggedUnknown})`);
        t.equal(s.right + s.named, 2 * rounds * BLOCKS - untracked, `each block right, or flagged naming its deleted copy (${s.right} + ${s.named} + ${untracked} untracked)`);
        if (lag) {
          const rightDeleted = r.last.stacks.filter((st) => st.complete === true &&
            st.frames.some((f) => / \(deleted\)$/.test(f.module ?? '') && /-libswap[AC]\.so/.test(f.module ?? '')))
            .reduce((a, st) => a + (st.allocs ?? []).filter((x) => x.size === 1111 || x.size === 2222).length, 0);
          t.equal(rightDeleted, s.right, `every right block was unwound through its deleted copy held open (${rightDeleted} of ${s.right})`);
        }
        const m2 = r.last.maps!;
        t.ok(m2.files_held! + m2.files_missed! >= Number(m[1]),
          `each loaded copy held open or counted as gone (${m2.files_held} held, ${m2.files_missed} missed, ${m[1]} loads)`);
        // read late, every copy is gone when its mapping is applied: named by its held file before
        // the walk (copies deleted while their records are being read may still need a second walk)
        if (lag) t.equal(m2.held_late, 0, `every held file used was pinned before a walk (${m2.held_pinned} pinned, ${m2.held_late} late)`);
      }
      const rw = r.last.maps?.rewalks;
      if (!dir || lag) t.equal(rw, 0, 'each record walked once (summary "maps".rewalks)');
      else t.comment(`records walked twice: ${rw} (a copy deleted between the look at its file and its records)`);
      t.comment(`${v.name}: ${JSON.stringify({ ...s, reused: Number(m[2]), loads: Number(m[1]), maps: r.last.maps })}`);
    });
  }

  // code made at run time (a JIT's way: mapped writable, made executable with mprotect, with
  // --move moved by mremap, with --rwx mapped executable at once), leaking through it, then
  // unmapped; memleak processes each record 300 ms late, when that code is gone: only the
  // mmap/mprotect/mremap events, applied in order, say that the caller of each block was
  // anonymous code, where it was then; the view knew it before the walk (no /proc read, no re-walk)
  for (const mode of ['', '--move', '--rwx'])
    t.test(`JIT code ${mode === '--rwx' ? 'mapped executable at once' : 'made executable by mprotect'}${mode === '--move' ? ', moved by mremap' : ''}, gone before processing`, { timeout: 60_000 }, async (t) => {
      const move = mode === '--move';
      const jit = join(fx, 'jitleak');
      const ROUNDS_JIT = 5;
      const r = await trace(`${jit} ${mode} ${ROUNDS_JIT} 3333`, [], { DWUNW_TEST_LAG_MS: '300' });
      t.equal(r.code, 0, `memleak exits 0${r.code ? `: ${r.stderr.trim().split('\n').pop()}` : ''}`);
      const places = [...r.stderr.matchAll(/jitleak: (0x[0-9a-f]+)/g)].map((m) => BigInt(m[1]!));
      t.equal(places.length, ROUNDS_JIT, 'jitleak ran its code each round');
      if (!r.last) return void t.fail('memleak printed no report', { stderr: r.stderr.slice(-2000) });
      let blocks = 0;
      let inJit = 0;
      for (const st of r.last.stacks)
        for (const a of st.allocs ?? []) {
          if (a.size !== 3333) continue;
          blocks++;
          const f0 = st.frames[0];
          const pc = f0?.pc ? BigInt(f0.pc) : 0n;
          if (f0?.anon === true && f0.module === null && places.some((p) => pc >= p && pc < p + 4096n)) inJit++;
        }
      t.equal(blocks, ROUNDS_JIT, `every block found (${blocks})`);
      t.equal(inJit, ROUNDS_JIT, `each block's caller shown in the anonymous code it ran in (${inJit} of ${blocks})`);
      const m = r.last.maps ?? {};
      if (mode === '--rwx') t.ok((m.anon_mmaps ?? 0) >= ROUNDS_JIT, `executable anonymous mmaps applied in record order (${m.anon_mmaps})`);
      else t.ok((m.mprotects ?? 0) >= ROUNDS_JIT, `mprotects applied in record order (${m.mprotects})`);
      if (move) t.ok((m.mremaps ?? 0) >= ROUNDS_JIT, `mremaps applied in record order (${m.mremaps})`);
      t.equal(m.rewalks, 0, `each record walked once (rewalks ${m.rewalks}, /proc re-reads ${m.hole_reads})`);
    });
}
