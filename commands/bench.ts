// dwunw bench [--json] [--quick] [--iterations N] [--batches N] [--snapshot FILE]... [--callgrind]:
// libdwunw against libunwind (remote API, UNW_CACHE_GLOBAL) and libdwfl (warm Dwfl) on reference
// snapshots, in one process, through one memory reader. The loops run in C: this command runs
// build/bench/dwunw-bench (bench/dwunw-bench.c), which prints JSON, then adds what needs no
// timing (gdb's frames as an oracle for snapshot files, the targets, callgrind's instruction
// counts) and prints it as tables, or as JSON with --json. doc/bench.md explains the figures.
//
// Snapshots: three of the harness's own process (x86_64: ~30 frames through glibc's qsort,
// bsearch and dl_iterate_phdr callbacks; ~200 frames of recursion; inside a signal handler), the
// reference snapshots of the arm64/mips32 verify fixtures taken at build time
// (build/bench/snapshots/*.snapshot.json), and any dwunw-snapshot-1 file given with --snapshot.
//
// Exit status 1 when the unwinders (or gdb, for a file with a NAME.frames.json beside it) do not
// all return the same frames; a missed target is reported, not an error.
import { type SpawnOptions, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChalkInstance } from 'chalk';
import Table from 'cli-table3';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type KernelBench, kernelBench } from '../lib/kernel-bench.js';
import { type PythonBench, pythonBench } from '../lib/python-bench.js';
import { packageRoot } from '../lib/root.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor, reportError } from '../lib/output.js';

interface Args {
  json: boolean;
  quick: boolean;
  check: boolean;
  iterations?: number;
  batches?: number;
  snapshot?: string[];
  callgrind: boolean;
}

export const command = 'bench';
export const describe = 'Time libdwunw against libunwind and libdwfl on reference snapshots';

export function builder(y: Argv): Argv<Args> {
  return y
    .option('json', { type: 'boolean', default: false, describe: 'Print the results as JSON (doc/bench.md)' })
    .option('quick', { type: 'boolean', default: false, describe: 'Few iterations: checks that it runs and the frames agree (seconds)' })
    .option('check', {
      type: 'boolean',
      default: false,
      describe: 'Exit 1 naming each target of bench/targets.json that was missed (instructions need --callgrind)',
    })
    .option('iterations', { type: 'number', requiresArg: true, describe: 'Unwinds per timed batch (default 100; --quick 10)' })
    .option('batches', { type: 'number', requiresArg: true, describe: 'Timed batches per unwinder (default 200; --quick 10)' })
    .option('snapshot', {
      type: 'string',
      array: true,
      requiresArg: true,
      describe: 'Also unwind this dwunw-snapshot-1 file (FILE or FILE@TID; repeatable)',
    })
    .option('callgrind', {
      type: 'boolean',
      default: false,
      describe: 'Also count instructions per unwind with valgrind --tool=callgrind (slow)',
    })
    .example('$0 bench', 'the full run (about 10 s)')
    .example('$0 bench --quick --json', 'a short run, as JSON')
    .example('$0 bench --snapshot snap.json', 'also unwind a saved snapshot');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await bench({
    json: argv.json,
    quick: argv.quick,
    check: argv.check,
    iterations: argv.iterations,
    batches: argv.batches,
    snapshots: argv.snapshot ?? [],
    callgrind: argv.callgrind,
  });
}

// ---- the harness's JSON ----------------------------------------------------------------------

export const UNWINDERS = ['dwunw', 'libunwind', 'libdwfl'] as const;
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

interface Target {
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

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
    );
  });
}

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
async function addCallgrind(r: BenchReport, harness: string, fileArgs: string[], iterations: number): Promise<void> {
  for (const tool of ['valgrind', 'callgrind_annotate']) {
    const probe = await run('sh', ['-c', `command -v ${tool}`]).catch(() => null);
    if (!probe || probe.code !== 0) throw new CliError('--callgrind', `${tool} is not installed (Debian package valgrind)`);
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
          harness,
          '--profile',
          s.name,
          '--unwinder',
          u,
          '--iterations',
          String(iterations),
          ...fileArgs,
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

export async function bench(o: BenchOptions): Promise<void> {
  checkCount('--iterations', o.iterations, 10_000_000);
  checkCount('--batches', o.batches, 100_000);
  o.snapshots.forEach(checkSnapshotArg);
  const harness = harnessPath();

  const files = [...builtSnapshots(), ...o.snapshots];
  const fileArgs = files.flatMap((f) => ['--snapshot', f]);
  const args = [
    ...(o.quick ? ['--quick'] : []),
    ...(o.iterations !== undefined ? ['--iterations', String(o.iterations)] : []),
    ...(o.batches !== undefined ? ['--batches', String(o.batches)] : []),
    ...fileArgs,
    ...fixtureTables().flatMap((f) => ['--table', f]),
  ];
  progress(o, `running the harness (${o.quick ? "a few seconds" : "10-30 s"})`);
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
    progress(o, 'callgrind: counting instructions (one valgrind run per snapshot and unwinder, ~1 min)');
    await addCallgrind(report, harness, fileArgs, o.iterations ?? (o.quick ? 20 : 200));
  }
  report.targets = targets(report);
  progress(o, 'the in-kernel walker and its peer on a python3 workload (BPF, a few seconds)');
  report.kernel = await kernelBench(o.quick);
  progress(o, 'reading Python frames (fixtures/python/chains.py, a few seconds)');
  report.python = await pythonBench(o.quick);
  if (progressOn(o)) process.stderr.write('\r\x1b[K');

  const out = new ChunkedWriter();
  if (o.json) await out.write(`${JSON.stringify(report, null, 1)}\n`);
  else await out.write(text(report, colorsFor(process.stdout), process.stdout.isTTY === true));
  await out.flush();

  const bad = disagreements(report);
  if (bad.length) reportError('bench', `the unwinders do not return the same frames: ${bad.join(', ')}`);
  if (o.check) {
    for (const t of report.targets ?? [])
      if (t.met === false) reportError('bench --check', `missed: ${t.name}: ${t.value} ${t.unit} (limit ${t.kind === 'max' ? '≤' : '≥'} ${t.limit})`);
  }
}

/** Progress goes to stderr only when it is a terminal, and never with --json. */
function progressOn(o: { json: boolean }): boolean {
  return !o.json && process.stderr.isTTY === true;
}

function progress(o: { json: boolean }, what: string): void {
  if (progressOn(o)) process.stderr.write(`\r\x1b[Kdwunw bench: ${what}`);
}

/** "snapshot (unwinder)" for each unwinder that differs from libdwunw or from gdb. */
export function disagreements(r: BenchReport): string[] {
  const bad: string[] = [];
  for (const s of r.snapshots) {
    for (const u of UNWINDERS) if (s.unwinders[u].agrees === false && u !== 'dwunw') bad.push(`${s.name} (${u})`);
    for (const [u, ok] of Object.entries(s.oracle?.agrees ?? {})) if (!ok) bad.push(`${s.name} (${u} vs gdb)`);
  }
  return bad;
}

// ---- text output ----------------------------------------------------------------------------------

const ns = (v: number | null | undefined): string => {
  if (v === null || v === undefined) return '-';
  if (v < 1000) return `${v.toFixed(0)} ns`;
  if (v < 1e6) return `${(v / 1e3).toFixed(v < 1e4 ? 2 : 1)} µs`;
  return `${(v / 1e6).toFixed(2)} ms`;
};
const num = (v: number | undefined, digits = 0): string => (v === undefined ? '-' : v.toFixed(digits));

type Align = 'left' | 'right';

/** A table: cli-table3 with borders on a terminal, aligned plain columns otherwise. */
function table(head: string[], rows: string[][], align: Align[], c: ChalkInstance, tty: boolean): string {
  if (tty) {
    const t = new Table({
      head: head.map((h) => c.bold(h)),
      colAligns: align,
      style: { head: [], border: [] },
      // no rule between rows: a rule under the head only
      chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    });
    for (const r of rows) t.push(r);
    return `${t.toString()}\n`;
  }
  // eslint-disable-next-line no-control-regex
  const width = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '').length;
  const w = head.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ''))));
  const line = (r: string[]) =>
    r
      .map((cell, i) => {
        const pad = ' '.repeat(w[i]! - width(cell));
        return align[i] === 'right' ? pad + cell : cell + pad;
      })
      .join('  ')
      .trimEnd();
  return `${[c.bold(line(head)), ...rows.map(line)].join('\n')}\n`;
}

function framesCell(s: SnapshotResult, u: UnwinderName, c: ChalkInstance): string {
  const r = s.unwinders[u];
  const parts: string[] = [String(r.frames)];
  if (u === 'dwunw') {
    if (r.agrees === true) parts.push(c.green('= peers'));
    if (r.agrees === false) parts.push(c.red('≠ peers'));
  } else if (r.agrees === true) parts.push(c.green('same'));
  else if (r.agrees === false) {
    const first = r.differs?.[0]?.index;
    parts.push(c.red(first === undefined ? 'differ' : `differ from #${first}`));
  }
  const g = s.oracle?.agrees[u];
  if (g !== undefined) parts.push(g ? c.green('= gdb') : c.red('≠ gdb'));
  return parts.join(' ');
}

export function text(r: BenchReport, c: ChalkInstance, tty: boolean): string {
  let o = '';
  o +=
    `${c.bold('dwunw bench')}: libdwunw ${r.versions.dwunw}, libunwind ${r.versions.libunwind} (remote API, UNW_CACHE_GLOBAL), ` +
    `libdwfl ${r.versions.libdwfl} (warm Dwfl)\n` +
    `warm: median and p90 per unwind over ${r.config.batches} batches of ${r.config.iterations}; ` +
    `cold: the first unwind in a fresh context, tables built (median of ${r.config.cold_runs})` +
    `${r.config.quick ? c.yellow(' [--quick: figures are rough]') : ''}\n\n`;

  const cg = r.callgrind !== undefined;
  const head = ['snapshot', 'arch', 'unwinder', 'median', 'p90', 'ns/frame', 'cold', 'vs dwunw', ...(cg ? ['instructions'] : []), 'frames', 'stop'];
  const align: Align[] = ['left', 'left', 'left', 'right', 'right', 'right', 'right', 'right', ...(cg ? ['right' as Align] : []), 'left', 'left'];
  const rows: string[][] = [];
  for (const s of r.snapshots) {
    UNWINDERS.forEach((u, i) => {
      const x = s.unwinders[u];
      const first = i === 0 ? [s.name, s.arch] : ['', ''];
      if (x.status !== 'ok') {
        const why = `${x.status}${x.reason ? `: ${x.reason}` : ''}`;
        rows.push([...first, u, '-', '-', '-', '-', '-', ...(cg ? ['-'] : []), '-', c.dim(why.length > 60 ? `${why.slice(0, 57)}...` : why)]);
        return;
      }
      const ratio = u === 'dwunw' ? '1×' : x.ratio_to_dwunw === undefined ? '-' : `${x.ratio_to_dwunw.toFixed(1)}×`;
      const stop = x.stop === 'OK' ? 'end' : x.stop ?? '';
      rows.push([
        ...first,
        u === 'dwunw' ? c.bold(u) : u,
        u === 'dwunw' ? c.cyan(ns(x.median_ns)) : ns(x.median_ns),
        ns(x.p90_ns),
        num(x.ns_per_frame, 1),
        ns(x.cold_ns),
        ratio,
        ...(cg ? [x.ir_per_unwind === undefined ? '-' : x.ir_per_unwind.toLocaleString('en-US')] : []),
        framesCell(s, u, c),
        stop.length > 40 ? `${stop.slice(0, 37)}...` : stop,
      ]);
    });
  }
  o += table(head, rows, align, c, tty);

  // Where frames differ
  const diffs: string[] = [];
  for (const s of r.snapshots)
    for (const u of UNWINDERS) {
      for (const d of s.unwinders[u].differs ?? [])
        diffs.push(
          `  ${s.name}, ${u} #${d.index}: dwunw ${d.dwunw ?? '(none)'}${d.dwunw_symbol ? ` ${d.dwunw_symbol}` : ''}, ` +
            `${u} ${d.peer ?? '(none)'}${d.peer_symbol ? ` ${d.peer_symbol}` : ''}`,
        );
      if (s.oracle?.agrees[u] === false) diffs.push(`  ${s.name}, ${u}: not gdb's ${s.oracle.frames} frames (${s.oracle.file})`);
    }
  if (diffs.length) o += `\n${c.red.bold('Frames that differ')}:\n${diffs.join('\n')}\n`;

  // Tables
  const trows = r.tables.map((t) =>
    t.error
      ? [t.name, c.red(t.error), '', '', '', '', t.file]
      : [t.name, num(t.build_ms, 3), num(t.open_build_ms, 3), String(t.rows), num(t.bytes_per_row, 2), `${t.fdes}${t.fdes_dropped ? ` (${t.fdes_dropped} dropped)` : ''}`, t.file],
  );
  o += `\n${c.bold('Unwind tables')} (libdwunw; median of ${r.config.table_runs} builds in fresh contexts)\n`;
  o += table(['table', 'build ms', 'open+build ms', 'rows', 'B/row', 'FDEs', 'file'], trows, ['left', 'right', 'right', 'right', 'right', 'right', 'left'], c, tty);
  const k = r.cache;
  o += `\nModule cache (${k.contexts} context${k.contexts === 1 ? '' : 's'}, ${k.slots} slots): ${k.hits} hits, ${k.misses} misses, ${k.evictions} evictions; ${k.warm} warm, ${k.active} active\n`;

  if (r.targets) {
    o += `\n${c.bold('Targets')} (the ${r.reference} snapshot and libc, this run)\n`;
    const fmt = (t: Target, v: number) => (t.unit === 'ns' ? ns(v) : t.unit === '×' ? `${v.toFixed(1)}×` : `${v.toFixed(2)} ${t.unit}`);
    const trows2 = r.targets.map((t) => [
      t.name,
      `${t.kind === 'max' ? '≤' : '≥'} ${fmt(t, t.limit)}`,
      t.value === null ? '-' : fmt(t, t.value),
      t.met === null ? c.dim('n/a') : t.met ? c.green('met') : c.red('missed'),
    ]);
    o += table(['target', 'goal', 'measured', ''], trows2, ['left', 'right', 'right', 'left'], c, tty);
  }

  if (r.kernel) o += kernelText(r.kernel, c, tty);
  if (r.python) o += pythonText(r.python, c);

  if (cg) {
    const ref = r.snapshots.find((s) => s.name === r.reference) ?? r.snapshots[0];
    const top = ref?.unwinders.dwunw.callgrind_top;
    if (ref && top?.length) {
      o += `\n${c.bold('libdwunw, warm')} ${ref.name}: ${ref.unwinders.dwunw.ir_per_unwind?.toLocaleString('en-US')} instructions per unwind (callgrind, self counts)\n`;
      o += table(
        ['function', 'Ir/unwind', '%'],
        top.map((f) => [f.function, f.ir_per_unwind.toLocaleString('en-US'), f.percent.toFixed(1)]),
        ['left', 'right', 'right'],
        c,
        tty,
      );
    }
  }
  return o;
}

/** The cost of reading Python frames, or why there are no figures. */
function pythonText(p: PythonBench, c: ChalkInstance): string {
  const o = `\n${c.bold('Python frames')} (issue 24)`;
  if (p.unavailable) return `${o}: ${c.dim(`not measured: ${p.unavailable}`)}\n`;
  return (
    `${o}: ${p.interpreter}, ${p.mode}: ${p.ns_per_frame} ns per frame, ${p.ns_per_stack} ns per stack of ${p.frames_per_stack} frames ` +
    `(${p.ns_shallow_stack} ns for 3 frames); OTel's eBPF profiler: ~${p.otel_ns_per_sample} ns per sample; BPF at the event: ${
      typeof p.bpf === 'string'
        ? p.bpf
        : Object.entries(p.bpf)
            .map(([m, b]) => `${m}: ${b.ns_per_sample} ns per sample of ${b.frames_per_sample} frames (${b.ns_per_frame} ns per frame), ${b.user_ns_per_sample} ns in user space`)
            .join('; ')
    }\n`
  );
}

/** The in-kernel walker beside its binary-search peer, or why there are no figures. */
function kernelText(k: KernelBench, c: ChalkInstance, tty: boolean): string {
  let o = `\n${c.bold('In-kernel walker')} (bpf_stats run_time_ns / run_cnt; issue 11)`;
  if (k.unavailable || !k.walker) return `${o}: ${c.dim(`not measured: ${k.unavailable ?? 'no figures'}`)}\n`;
  o += `: ${k.workload}; ${k.events} events unwound both ways, ${k.identical_pct?.toFixed(2)} % identical\n`;
  const row = (name: string, f: NonNullable<KernelBench['walker']>): string[] => [
    name,
    num(f.ns_per_frame, 1),
    num(f.ns_per_extra_frame, 1),
    ns(f.ns_first_frame),
    ns(f.ns_per_sample),
    num(f.frames_per_sample, 1),
    num(f.bytes_per_row, 2),
    String(f.verifier_insns),
    `${num(f.fallback_pct, 2)} %`,
  ];
  const rows = [row(c.bold('dwunw'), k.walker)];
  if (k.peer) rows.push(row('binary search', k.peer));
  o += table(
    ['walker', 'ns/frame', 'per extra frame', 'first frame', 'per sample', 'frames', 'B/row', 'verifier insns', 'fallback'],
    rows,
    ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    c,
    tty,
  );
  const met = k.met ? c.green('met') : c.red('missed');
  o += `target: ≤ ${k.target_ns_per_frame} ns/frame: ${met}; maps ${((k.walker.map_bytes ?? 0) / 1048576).toFixed(1)} MiB\n`;
  return o;
}
