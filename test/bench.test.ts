// `dwunw bench --quick` as a user runs it, so the bench never rots: it runs, every reference
// snapshot is there, and every unwinder that applies returns the same frames as libdwunw:
// libunwind and libdwfl are the oracles for the x86_64 snapshots, gdb (its frames beside the
// cross-arch snapshot files) for arm64 and mips32; framehop (crates.io, its own process on the
// same snapshots) for x86_64 and arm64. No timing is asserted: the figures are for people
// (doc/bench.md).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { valgrindFailure } from '../lib/bench.js';
import { dwunwSync, onPath, requireOrSkip, root, type Run } from './helpers.js';

const snapDir = join(root, 'build', 'bench', 'snapshots');

interface Unwinder {
  status: string;
  reason?: string;
  stop?: string;
  frames: number | null;
  agrees: boolean | null;
  median_ns: number | null;
  p90_ns: number | null;
  cold_ns?: number;
  pcs?: string[];
  differs?: unknown[];
  stops_early?: boolean;
}
interface Snapshot {
  name: string;
  arch: string;
  source: string;
  frames: number;
  unwinders: Record<string, Unwinder>;
  oracle?: { source: string; frames: number; agrees: Record<string, boolean> };
}
interface Report {
  snapshots: Snapshot[];
  tables: { name: string; file: string; build_ms?: number; rows?: number; bytes_per_row?: number; error?: string }[];
  cache: { hits: number; misses: number; evictions: number };
  targets: { name: string; met: boolean | null }[];
  kernel?: Record<string, unknown> & { unavailable?: string; walker?: Record<string, number>; peer?: Record<string, number> };
}

const dwunw = (args: string[]): Run => dwunwSync(args, { timeoutMs: 120_000 });

t.test('bench --quick --json: every snapshot, every applicable unwinder agrees', async (t) => {
  const r = dwunw(['bench', '--quick', '--json']);
  t.equal(r.status, 0, `exit status 0 (stderr: ${r.stderr.trim()})`);
  let rep: Report;
  try {
    rep = JSON.parse(r.stdout) as Report;
  } catch (e) {
    t.fail(`JSON on stdout: ${(e as Error).message}`);
    return;
  }
  const byName = new Map(rep.snapshots.map((s) => [s.name, s]));

  // The harness's own x86_64 stacks: their depth is known from the code (bench/snapshot.c).
  const self: [string, number, number][] = [
    ['callbacks', 25, 45],
    ['deep', 180, 230],
    ['signal', 12, 30],
  ];
  for (const [name, lo, hi] of self) {
    const s = byName.get(name);
    if (!t.ok(s, `snapshot ${name} present`) || !s) continue;
    t.equal(s.arch, 'x86_64', `${name}: x86_64`);
    t.ok(s.frames >= lo && s.frames <= hi, `${name}: ${s.frames} frames, between ${lo} and ${hi}`);
    for (const u of ['dwunw', 'libunwind', 'libdwfl']) {
      const x = s.unwinders[u]!;
      t.equal(x.status, 'ok', `${name}: ${u} applies on x86_64 (${x.reason ?? ''})`);
      t.equal(x.stop, 'OK', `${name}: ${u} reached the end of the stack`);
    }
    t.equal(s.unwinders.libunwind!.agrees, true, `${name}: libunwind returns libdwunw's frames`);
    t.equal(s.unwinders.libdwfl!.agrees, true, `${name}: libdwfl returns libdwunw's frames`);
    t.equal(s.unwinders.dwunw!.agrees, true, `${name}: libdwunw agrees with both peers`);
  }

  // The cross-arch reference snapshots taken at build time (bench/Makefile), each with gdb's frames.
  const files = existsSync(snapDir) ? readdirSync(snapDir).filter((f) => f.endsWith('.snapshot.json')) : [];
  for (const arch of ['arm64', 'mips32']) {
    const fixture = join(root, 'fixtures', arch, 'build');
    const qemu = arch === 'arm64' ? 'qemu-aarch64' : 'qemu-mipsel';
    const missing = [...(existsSync(fixture) ? [] : [`${fixture} (make fixtures)`]), ...[qemu, 'gdb-multiarch'].filter((c) => !onPath(c))];
    if (missing.length) {
      requireOrSkip(t, `the ${arch} reference snapshots`, `missing: ${missing.join(', ')} (scripts/ensure-deps)`);
      continue;
    }
    // two per architecture (bench/take-snapshots.py: qsort and recurse), each checked below against gdb
    t.equal(files.filter((f) => f.startsWith(`${arch}-`)).length, 2, `${arch}: its two reference snapshots were taken (build/bench/snapshots)`);
  }
  for (const f of files) {
    const name = `${f.split('-')[0]}/${f.slice(f.indexOf('-') + 1).replace(/\.snapshot\.json$/, '')}`;
    const s = byName.get(name);
    if (!t.ok(s, `snapshot ${name} present`) || !s) continue;
    t.equal(s.unwinders.dwunw!.status, 'ok', `${name}: libdwunw unwinds ${s.arch}`);
    t.ok(s.oracle, `${name}: gdb's frames beside the file`);
    t.equal(s.oracle?.agrees.dwunw, true, `${name}: libdwunw's ${s.frames} frames are gdb's ${s.oracle?.frames}`);
    t.equal(s.unwinders.libunwind!.status, 'n/a', `${name}: libunwind does not apply (x86_64 only)`);
    t.ok(s.unwinders.libunwind!.median_ns === null, `${name}: no figure for an unwinder that does not apply`);
    if (s.arch === 'arm64') t.equal(s.unwinders.libdwfl!.agrees, true, `${name}: libdwfl returns libdwunw's frames`);
    if (s.arch === 'mips32') t.equal(s.unwinders.libdwfl!.status, 'n/a', `${name}: libdwfl cannot unwind mips`);
  }

  // framehop, frame for frame (bench/framehop, built wherever cargo is): the same pcs as
  // libdwunw on every snapshot it can unwind, except the signal one, where it stops at glibc's
  // __restore_rt (a CFA expression it does not evaluate; doc/bench.md §8.7): there its frames
  // must be the first ones of libdwunw's, and the stop is named.
  const cargo = onPath('cargo');
  for (const s of rep.snapshots) {
    const f = s.unwinders.framehop;
    if (!t.ok(f, `${s.name}: a framehop entry`) || !f) continue;
    if (s.arch === 'mips32') {
      t.equal(f.status, 'n/a', `${s.name}: framehop has no mips32 unwinder`);
      continue;
    }
    if (!cargo && f.status === 'n/a') {
      t.comment(`${s.name}: framehop not built (no cargo): ${f.reason}`);
      continue;
    }
    t.equal(f.status, 'ok', `${s.name}: framehop unwinds ${s.arch} (${f.reason ?? ''})`);
    if (s.name === 'signal' && f.agrees === false) {
      t.equal(f.stops_early, true, `signal: framehop's ${f.frames} frames are the first of libdwunw's ${s.frames}`);
      t.ok((f.frames ?? 0) >= 5, `signal: framehop reaches the handler's caller chain (${f.frames} frames)`);
    } else {
      t.equal(f.agrees, true, `${s.name}: framehop returns libdwunw's ${s.frames} frames`);
      t.equal(f.frames, s.frames, `${s.name}: framehop ${f.frames} frames`);
      if (s.oracle) t.equal(s.oracle.agrees.framehop, true, `${s.name}: framehop's frames are gdb's`);
    }
  }

  // Whatever applies agrees, everywhere (framehop's early stop above aside).
  for (const s of rep.snapshots)
    for (const [u, x] of Object.entries(s.unwinders)) {
      if (x.status !== 'ok') continue;
      if (!(u === 'framehop' && x.stops_early)) t.not(x.agrees, false, `${s.name}: ${u} does not disagree`);
      t.ok(typeof x.median_ns === 'number' && typeof x.p90_ns === 'number', `${s.name}: ${u} has median and p90`);
    }

  const libc = rep.tables.find((x) => x.name === 'libc');
  t.ok(libc && !libc.error && (libc.rows ?? 0) > 1000, `libc's table built (${libc?.rows} rows)`);
  for (const name of ['ld.so', 'libstdc++', 'libgcc_s'])
    t.ok(rep.tables.some((x) => x.name === name && !x.error), `table of ${name} built`);
  t.ok(rep.cache.misses > 0, 'module-cache counters reported');
  const specs = (JSON.parse(readFileSync(join(root, 'bench', 'targets.json'), 'utf8')) as { targets: unknown[] }).targets;
  t.equal(rep.targets.length, specs.length, 'every target of bench/targets.json reported');

  // The in-kernel walker beside its binary-search peer (issue 11): figures from a real run, or
  // one reason; never a failure of bench. No timing is asserted, only that the figures exist.
  const k = rep.kernel;
  if (!t.ok(k, '"kernel" object present') || !k) return;
  const fields = ['ns_per_frame', 'ns_per_sample', 'frames_per_sample', 'bytes_per_row', 'map_bytes', 'verifier_insns', 'fallback_pct'];
  if (k.unavailable !== undefined) {
    t.ok(typeof k.unavailable === 'string' && k.unavailable.length > 0, `kernel: not measured: ${k.unavailable}`);
    if (process.env.DWUNW_REQUIRE_BPF === '1') t.fail(`DWUNW_REQUIRE_BPF=1 but the kernel figures are missing: ${k.unavailable}`);
    return;
  }
  for (const w of ['walker', 'peer'] as const)
    for (const f of fields) t.ok(typeof k[w]?.[f] === 'number' && k[w]![f]! >= 0, `kernel.${w}.${f} = ${k[w]?.[f]}`);
  for (const f of fields) t.equal(k[f], k.walker?.[f], `kernel.${f} is the walker's`);
  t.ok((k.walker?.ns_per_frame ?? 0) > 0 && (k.peer?.ns_per_frame ?? 0) > 0, 'both walkers were timed (bpf_stats)');
  t.ok((k.walker?.bytes_per_row ?? 99) <= 4, `${k.walker?.bytes_per_row} B per row (<= 4)`);
  t.equal(k.differences, 0, 'the walked samples match libdwunw frame for frame');
  // The floor measured beside it (issue 28): each cost a number, on samples of the same run.
  const fl = k.floor as Record<string, number> | undefined;
  t.ok(fl && fl.samples > 0, `kernel.floor measured on ${fl?.samples} samples`);
  for (const f of ['entry_ns', 'loop_iter_ns', 'read_user_8_ns', 'read_user_16_ns', 'hash_lookup_ns', 'cold_line_ns', 'chunk_read_ns', 'ns_per_frame', 'walker_x'])
    t.ok(typeof fl?.[f] === 'number' && Number.isFinite(fl[f]), `kernel.floor.${f} = ${fl?.[f]}`);
  t.ok((fl?.entry_ns ?? 0) > 0 && (fl?.ns_per_frame ?? 0) > 0, 'the empty program and the per-frame floor were timed');
});

t.test('bench --quick, piped: plain aligned text', async (t) => {
  const r = dwunw(['bench', '--quick']);
  t.equal(r.status, 0, `exit status 0 (stderr: ${r.stderr.trim()})`);
  // eslint-disable-next-line no-control-regex
  t.notMatch(r.stdout, /\x1b\[/, 'no color codes when piped');
  for (const s of ['callbacks', 'deep', 'signal', 'libunwind', 'libdwfl', 'framehop', 'Unwind tables', 'Targets', 'Module cache'])
    t.match(r.stdout, s, `mentions ${s}`);
});

// A missing file is a failure (exit 1); a bad option value is a usage error (exit 2).
t.test('bench: argument errors are one line, exit 1 or 2', async (t) => {
  for (const [args, what, status] of [
    [['bench', '--snapshot', '/nonexistent/x.snapshot.json'], '/nonexistent/x.snapshot.json: no such file', 1],
    [['bench', '--iterations', '0'], '--iterations', 2],
  ] as [string[], string, number][]) {
    const r = dwunw(args);
    t.equal(r.status, status, `${args.join(' ')}: exit ${status}`);
    t.match(r.stderr, new RegExp(`^dwunw: ${what.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), `${args.join(' ')}: says ${what}`);
    t.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line`);
  }
});

// --callgrind under a uprobe: valgrind's own summary ("I refs: 0") is its last line; the failure
// names the signal, where it hit and the cause (stderr as valgrind 3.19 printed it here while
// another process's memleak had uprobes on libc's malloc).
t.test('bench --callgrind: a harness killed under valgrind is named in one line', async (t) => {
  const trapped = [
    '==16586== Callgrind, a call-graph generating cache profiler',
    '==16586== Command: build/bench/dwunw-bench --profile deep --unwinder dwunw --iterations 200',
    '==16586== ',
    '==16586== Process terminating with default action of signal 5 (SIGTRAP)',
    '==16586==    at 0x4ACB931: malloc (malloc.c:3281)',
    '==16586==    by 0x114DE8: read_file (json.c:26)',
    '==16586== Events    : Ir',
    '==16586== Collected : 0',
    '==16586== ',
    '==16586== I   refs:      0',
    'Trace/breakpoint trap',
  ].join('\n');
  const m = valgrindFailure(trapped, null);
  t.notMatch(m, /I\s+refs/, 'not the summary line');
  t.match(m, /SIGTRAP in malloc \(malloc\.c:3281\)/, 'the signal and where');
  t.match(m, /uprobe/, 'the cause');
  t.notMatch(m, /\n/, 'one line');
  const own = ['==1== Command: x', 'dwunw-bench: --profile: no snapshot named arm64/qsort', '==1== ', '==1== I   refs:      0'].join('\n');
  t.equal(valgrindFailure(own, null), 'dwunw-bench: --profile: no snapshot named arm64/qsort', "the harness's own message");
});
