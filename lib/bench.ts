// The work of `dwunw bench` (commands/bench.ts parses its options and prints): run the C harness
// build/bench/dwunw-bench (bench/dwunw-bench.c; it times libdwunw, libunwind and libdwfl on the
// reference snapshots and prints JSON), runs framehop (crates.io, bench/framehop) on the same
// snapshots dumped by that process (lib/framehop-bench.ts), then adds what needs no timing: gdb's frames as an oracle
// for snapshot files, the speedups, callgrind's instruction counts, the targets
// (bench/targets.json) and the in-kernel walker against its peer (lib/kernel-bench.ts).
// doc/bench.md explains the figures.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FRAMEHOP_VERSION, framehopBench, framehopCallgrindArgs } from './framehop-bench.js';
import { type KernelBench, kernelBench } from './kernel-bench.js';
import { type PythonBench, pythonBench } from './python-bench.js';
import { CliError, ExitCode } from './output.js';
import { packageRoot } from './root.js';
import { runCommand as run } from './run-command.js';

// ---- the harness's JSON ----------------------------------------------------------------------

export const UNWINDERS = ['dwunw', 'libunwind', 'libdwfl', 'framehop'] as const;
export type UnwinderName = (typeof UNWINDERS)[number];

interface DiffEntry {
  index: number;
  dwunw: string | null;
  dwunw_symbol?: string;
  peer: string | null;
  peer_symbol?: string;
}

export interface UnwinderResult {
  status: 'ok' | 'n/a' | 'error';
  reason?: string;
  stop?: string;
  complete?: boolean;
  frames: number | null;
  agrees: boolean | null;
  median_ns: number | null;
  p90_ns: number | null;
  min_ns?: number;
  ns_per_frame?: number;
  cold_ns?: number;
  ratio_to_dwunw?: number;
  unstable?: number;
  pcs?: string[];
  differs?: DiffEntry[];
  /** framehop: its frames are the first ones of libdwunw's (it stopped early, it did not go astray) */
  stops_early?: boolean;
  /** framehop: pcs evicting each other in its direct-mapped rule cache, per unwind */
  cache_collisions_per_unwind?: number;
  /** libdwunw only: how many times faster than each peer that applies (peer median / libdwunw's) */
  speedup?: Partial<Record<UnwinderName, number>>;
  /** --callgrind */
  ir_per_unwind?: number;
  /** --callgrind: instructions per warm unwind (the same figure as ir_per_unwind). */
  instructions?: number;
  callgrind_top?: { function: string; ir_per_unwind: number; percent: number }[];
}

export interface SnapshotResult {
  name: string;
  arch: string;
  source: string;
  stack_bytes: number;
  frames: number;
  unwinders: Record<UnwinderName, UnwinderResult>;
  /** gdb's frames for a snapshot file, when a NAME.frames.json is beside it. */
  oracle?: { source: string; file: string; frames: number; agrees: Partial<Record<UnwinderName, boolean>> };
}

export interface TableResult {
  name: string;
  file: string;
  error?: string;
  build_ms?: number;
  open_build_ms?: number;
  rows?: number;
  rules?: number;
  bytes?: number;
  bytes_per_row?: number;
  fdes?: number;
  fdes_dropped?: number;
  runs?: number;
}

export interface Target {
  name: string;
  value: number | null;
  limit: number;
  unit: string;
  /** value <= limit ("max") or value >= limit ("min") */
  kind: 'max' | 'min';
  met: boolean | null;
}

export interface BenchReport {
  bench: string;
  versions: Record<UnwinderName, string>;
  config: { quick: boolean; iterations: number; batches: number; cold_runs: number; table_runs: number };
  snapshots: SnapshotResult[];
  tables: TableResult[];
  cache: { contexts: number; hits: number; misses: number; evictions: number; slots: number; active: number; warm: number };
  reference?: string;
  targets?: Target[];
  callgrind?: { iterations: number };
  /** the in-kernel walker against the binary-search peer (lib/kernel-bench.ts) */
  kernel?: KernelBench;
  /** reading CPython frames (lib/python-bench.ts) */
  python?: PythonBench;
}

// ---- running programs ---------------------------------------------------------------------------

const lastLine = (s: string): string => s.trim().split('\n').pop() ?? '';

function harnessPath(): string {
  const p = process.env.DWUNW_BENCH ?? join(packageRoot(), 'build', 'bench', 'dwunw-bench');
  if (!existsSync(p)) throw new CliError('bench', `${p} is not built (run make)`);
  return p;
}

/** The reference snapshots taken at build time (bench/Makefile), sorted. */
function builtSnapshots(): string[] {
  const dir = join(packageRoot(), 'build', 'bench', 'snapshots');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.snapshot.json'))
    .sort()
    .map((f) => join(dir, f));
}

/** Fixture binaries whose tables are measured besides the system libraries. */
function fixtureTables(): string[] {
  const b = join(packageRoot(), 'fixtures', 'x86_64', 'build');
  return ['verify_zoo-pie', 'unwind_zoo-pie', 'unwind_zoo-static', 'cfi_zoo-static-g'].map((f) => join(b, f)).filter((f) => existsSync(f));
}

function checkSnapshotArg(arg: string): void {
  const file = arg.replace(/@\d+$/, '');
  if (!existsSync(file)) throw new CliError(file, 'no such file or directory');
}

// ---- additions to the harness's report ----------------------------------------------------------

/** gdb's frames beside a snapshot file (NAME.frames.json, as test/oracle/gdb_snapshot.py writes). */
function addOracle(s: SnapshotResult): void {
  if (s.source === 'self') return;
  const file = s.source.replace(/@\d+$/, '').replace(/(\.snapshot)?\.json$/, '.frames.json');
  if (file === s.source || !existsSync(file)) return;
  let pcs: bigint[];
  try {
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { threads?: Record<string, { pc: string }[]> };
    const tid = /@(\d+)$/.exec(s.source)?.[1];
    const threads = doc.threads ?? {};
    const frames = (tid !== undefined ? threads[tid] : Object.values(threads)[0]) ?? [];
    pcs = frames.map((f) => BigInt(f.pc));
  } catch {
    return; // not gdb's frames: no oracle
  }
  const agrees: Partial<Record<UnwinderName, boolean>> = {};
  for (const u of UNWINDERS) {
    const r = s.unwinders[u];
    if (r.status !== 'ok' || !r.pcs) continue;
    agrees[u] = r.pcs.length === pcs.length && r.pcs.every((p, i) => BigInt(p) === pcs[i]);
  }
  s.oracle = { source: 'gdb', file, frames: pcs.length, agrees };
}

/** The targets, from bench/targets.json (one file, so the check and the docs agree). */
interface TargetSpec {
  name: string;
  metric: 'warm_ns' | 'speedup_libunwind' | 'speedup_libdwfl' | 'instructions' | 'libc_build_ms' | 'libc_bytes_per_row';
  limit: number;
  unit: string;
  kind: 'max' | 'min';
}

function targetSpecs(): TargetSpec[] {
  const file = join(packageRoot(), 'bench', 'targets.json');
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { targets: TargetSpec[] }).targets;
  } catch (e) {
    throw new CliError('bench', `${file}: ${(e as Error).message}`);
  }
}

/** What the issues ask of libdwunw, measured in this run on the reference snapshot (null: not measured). */
function targets(r: BenchReport): Target[] {
  const ref = r.snapshots.find((s) => s.name === 'callbacks');
  const libc = r.tables.find((t) => t.name === 'libc');
  const speedup = (u: UnwinderName) => {
    const x = ref?.unwinders[u];
    return x?.status === 'ok' && x.ratio_to_dwunw !== undefined ? x.ratio_to_dwunw : null;
  };
  const value = (m: TargetSpec['metric']): number | null | undefined => {
    switch (m) {
      case 'warm_ns': return ref?.unwinders.dwunw.median_ns;
      case 'speedup_libunwind': return speedup('libunwind');
      case 'speedup_libdwfl': return speedup('libdwfl');
      case 'instructions': return ref?.unwinders.dwunw.instructions;
      case 'libc_build_ms': return libc?.build_ms;
      case 'libc_bytes_per_row': return libc?.bytes_per_row;
    }
  };
  return targetSpecs().map(({ name, metric, limit, unit, kind }) => {
    const v = value(metric) ?? null;
    return { name, value: v, limit, unit, kind, met: v === null ? null : kind === 'max' ? v <= limit : v >= limit };
  });
}

/** Instruction counts of warm unwinds under callgrind: one valgrind run per snapshot and unwinder. */
async function addCallgrind(r: BenchReport, harness: string, fileArgs: string[], dumpDir: string, iterations: number): Promise<void> {
  for (const tool of ['valgrind', 'callgrind_annotate']) {
    const probe = await run('sh', ['-c', `command -v ${tool}`]);
    if (probe.code !== 0) throw new CliError('--callgrind', `${tool} is not installed (Debian package valgrind)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-callgrind-'));
  try {
    for (const s of r.snapshots) {
      for (const u of UNWINDERS) {
        const res = s.unwinders[u];
        if (res.status !== 'ok') continue;
        const out = join(dir, `${u}.out`);
        const args = [
          '--tool=callgrind',
          `--callgrind-out-file=${out}`,
          '--toggle-collect=profile_loop',
          ...(u === 'framehop'
            ? framehopCallgrindArgs(dumpDir, s.name, iterations)
            : [harness, '--profile', s.name, '--unwinder', u, '--iterations', String(iterations), ...fileArgs]),
        ];
        // A uprobe on a library the harness runs (another process's tracing) kills it under
        // valgrind: such probes come and go, so a run that died of SIGTRAP is tried again.
        let vg = await run('valgrind', args);
        for (let tries = 1; vg.code !== 0 && tries < CALLGRIND_TRIES && isTrapped(vg.stderr); tries++) {
          await new Promise((r) => setTimeout(r, 2000));
          vg = await run('valgrind', args);
        }
        if (vg.code !== 0) throw new CliError('--callgrind', `valgrind on ${s.name} (${u}): ${valgrindFailure(vg.stderr, vg.signal)}`);
        const ann = await run('callgrind_annotate', ['--inclusive=no', '--threshold=100', out]);
        if (ann.code !== 0) throw new CliError('--callgrind', `callgrind_annotate: ${lastLine(ann.stderr)}`);
        const { total, functions } = parseAnnotate(ann.stdout);
        if (total <= 0)
          throw new CliError('--callgrind', `valgrind on ${s.name} (${u}): no instructions counted in profile_loop (a harness built without symbols?)`);
        res.ir_per_unwind = Math.round(total / iterations);
        res.instructions = res.ir_per_unwind;
        if (u === 'dwunw')
          res.callgrind_top = functions.slice(0, 12).map((f) => ({
            function: f.name,
            ir_per_unwind: Math.round(f.ir / iterations),
            percent: total ? Math.round((f.ir / total) * 1000) / 10 : 0,
          }));
        rmSync(out, { force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  r.callgrind = { iterations };
}

const CALLGRIND_TRIES = 4;
const isTrapped = (stderr: string): boolean => /Process terminating with default action of signal 5 \(SIGTRAP\)/.test(stderr);

/**
 * Why a valgrind run failed, in one line. Its last line is its own summary ("I refs: 0") when the
 * harness died or exited early: the harness's own message, or the fatal signal and where it hit,
 * say more. A SIGTRAP in a library function is a uprobe (another process tracing that library,
 * e.g. memleak on libc's malloc): the kernel's breakpoint is in the code valgrind translates, and
 * under valgrind it is an int3 that kills the program.
 */
export function valgrindFailure(stderr: string, signal?: NodeJS.Signals | null): string {
  const lines = stderr.split('\n').map((l) => l.trimEnd());
  const own = lines.filter((l) => l && !/^==\d+==/.test(l) && !/^(Trace\/breakpoint trap|Killed|Segmentation fault)/.test(l));
  const strip = (l: string) => l.replace(/^==\d+==\s*/, '');
  const term = lines.findIndex((l) => /Process terminating with default action of signal/.test(l));
  if (term >= 0) {
    const sig = /signal \d+ \((\w+)\)/.exec(lines[term]!)?.[1] ?? 'a signal';
    const at = /^\s*at 0x[0-9A-Fa-f]+: (.*)$/.exec(strip(lines[term + 1] ?? ''))?.[1];
    const where = at ? ` in ${at}` : '';
    if (sig === 'SIGTRAP')
      return `the harness died of SIGTRAP${where}: a uprobe on that library (another process tracing it, e.g. memleak on libc) traps under valgrind (${CALLGRIND_TRIES} tries); run again when no uprobes are attached`;
    return `the harness died of ${sig}${where}`;
  }
  if (own.length) return own[own.length - 1]!;
  if (signal) return `valgrind was killed by ${signal}`;
  return lastLine(stderr.split('\n').map(strip).join('\n'));
}

/** callgrind_annotate's totals and per-function self counts ("1,005,000 (10.83%)  file:fn [obj]"). */
export function parseAnnotate(text: string): { total: number; functions: { name: string; ir: number }[] } {
  let total = 0;
  const functions: { name: string; ir: number }[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+)\s+(?:\([\d.]+%\)\s+)?(.*)$/.exec(line);
    if (!m) continue;
    const ir = Number(m[1]!.replace(/,/g, ''));
    const what = m[2]!.trim();
    if (what.startsWith('PROGRAM TOTALS')) total = ir;
    else if (what.includes(':') && !what.startsWith('Ir')) {
      // file:function [object] -> function (file), shortened
      const mm = /^(.*?):([^\s:]+)(?:\s+\[.*\])?$/.exec(what);
      const name = mm ? `${mm[2]} (${mm[1]!.split('/').pop()})` : what;
      functions.push({ name, ir });
    }
  }
  return { total, functions };
}

// ---- the command ----------------------------------------------------------------------------------

export interface BenchOptions {
  json: boolean;
  quick: boolean;
  check?: boolean;
  iterations?: number;
  batches?: number;
  snapshots: string[];
  callgrind: boolean;
}

function checkCount(name: string, v: number | undefined, max: number): void {
  if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > max))
    throw new CliError(name, `not a number from 1 to ${max}: ${v}`, ExitCode.USAGE);
}

/**
 * The whole bench: the harness's timings, gdb's frames beside snapshot files, the speedups, the
 * callgrind counts (o.callgrind), the targets and the in-kernel walker's figures, as one report.
 * `progress` is told what runs now (the command shows it on a terminal).
 */
export async function runBench(o: BenchOptions, progress: (what: string) => void = () => undefined): Promise<BenchReport> {
  checkCount('--iterations', o.iterations, 10_000_000);
  checkCount('--batches', o.batches, 100_000);
  o.snapshots.forEach(checkSnapshotArg);
  const harness = harnessPath();
  const tmp = mkdtempSync(join(tmpdir(), 'dwunw-bench-'));
  try {
    return await benchIn(o, harness, tmp, progress);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function benchIn(o: BenchOptions, harness: string, tmp: string, progress: (what: string) => void): Promise<BenchReport> {
  const dumpDir = join(tmp, 'snapshots');
  mkdirSync(dumpDir);
  const files = [...builtSnapshots(), ...o.snapshots];
  const fileArgs = files.flatMap((f) => ['--snapshot', f]);
  const args = [
    ...(o.quick ? ['--quick'] : []),
    ...(o.iterations !== undefined ? ['--iterations', String(o.iterations)] : []),
    ...(o.batches !== undefined ? ['--batches', String(o.batches)] : []),
    ...fileArgs,
    ...fixtureTables().flatMap((f) => ['--table', f]),
    '--dump',
    dumpDir,
  ];
  progress(`running the harness (${o.quick ? "a few seconds" : "10-30 s"})`);
  const ran = await run(harness, args);
  if (ran.code !== 0 || ran.signal) {
    const why = lastLine(ran.stderr).replace(/^dwunw-bench:\s*/, '') || (ran.signal ? `killed by ${ran.signal}` : `exit status ${ran.code}`);
    throw new CliError('bench', why);
  }
  let report: BenchReport;
  try {
    report = JSON.parse(ran.stdout) as BenchReport;
  } catch (e) {
    throw new CliError('bench', `the harness printed no valid JSON: ${(e as Error).message}`);
  }
  progress('framehop on the same snapshots');
  const quick = o.quick ? 10 : undefined;
  const fh = await framehopBench(
    dumpDir,
    report.snapshots.map((s) => s.name),
    new Map(report.snapshots.map((s) => [s.name, s.unwinders.dwunw])),
    o.iterations ?? quick ?? 100,
    o.batches ?? quick ?? 200,
  );
  for (const s of report.snapshots) s.unwinders.framehop = fh.get(s.name)!;
  report.versions.framehop = FRAMEHOP_VERSION;
  report.snapshots.forEach(addOracle);
  for (const s of report.snapshots) {
    const d = s.unwinders.dwunw;
    if (d.status !== 'ok') continue;
    d.speedup = {};
    for (const u of UNWINDERS) {
      const x = s.unwinders[u];
      if (u !== 'dwunw' && x.status === 'ok' && x.ratio_to_dwunw !== undefined) d.speedup[u] = x.ratio_to_dwunw;
    }
  }
  report.reference = 'callbacks';
  if (o.callgrind) {
    progress('callgrind: counting instructions (one valgrind run per snapshot and unwinder, ~1 min)');
    await addCallgrind(report, harness, fileArgs, dumpDir, o.iterations ?? (o.quick ? 20 : 200));
  }
  report.targets = targets(report);
  progress('the in-kernel walker and its peer on a python3 workload (BPF, a few seconds)');
  report.kernel = await kernelBench(o.quick);
  progress('reading Python frames (fixtures/python/chains.py, a few seconds)');
  report.python = await pythonBench(o.quick);
  return report;
}

/** "snapshot (unwinder)" for each unwinder that differs from libdwunw or from gdb. */
export function disagreements(r: BenchReport): string[] {
  const bad: string[] = [];
  for (const s of r.snapshots) {
    // framehop stopping early (its frames a prefix of the others') is its limit, shown, not an error
    for (const u of UNWINDERS)
      if (s.unwinders[u].agrees === false && u !== 'dwunw' && !s.unwinders[u].stops_early) bad.push(`${s.name} (${u})`);
    for (const [u, ok] of Object.entries(s.oracle?.agrees ?? {})) if (!ok) bad.push(`${s.name} (${u} vs gdb)`);
  }
  return bad;
}
