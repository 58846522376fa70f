// memleak (bpf/memleak/memleak.c, built into build/bpf/memleak) from TypeScript: where the binaries are,
// its --json report, running it next to a target, and the workload fixtures/x86_64/leaky with
// its manifest of known leaks (site, allocator, size, count per round, expected call chain).
// Used by `dwunw memleak` (commands/memleak.ts), its --demo, and scripts/memleak-cost.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError } from './errors.js';
import { packageRoot } from './root.js';
import type { KernelWalk } from './profile.js';

// ---- Paths ---------------------------------------------------------------------------------------

export const memleakPath = (): string => join(packageRoot(), 'build', 'bpf', 'memleak');
export const leakyPath = (): string => join(packageRoot(), 'fixtures', 'x86_64', 'build', 'leaky');

// ---- memleak --json (one document per report; bpf/README.md) ------------------------------------

export interface MlFrame {
  pc: string;
  symbol: string | null;
  offset: number;
  module: string | null;
  /** Where the frame came from (bpf/README.md): window, live, fp, prologue, lr, signal. */
  origin?: 'window' | 'live' | 'fp' | 'prologue' | 'lr' | 'signal' | 'kernel-walk' | 'kernel' | 'frozen';
  /** --lines: the source file and line (null: the row has none), when the debug info has them */
  file?: string;
  line?: number | null;
}

export interface MlAlloc {
  addr: string;
  size: number;
}

export interface MlStack {
  bytes: number;
  allocations: number;
  /** following a tree (-c, -- PROG): the stack's process */
  pid?: number;
  comm?: string;
  frames: MlFrame[];
  /** dwarf: unwound by libdwunw; fp: frame-pointer stack; none: a pseudo-stack (reason). */
  kind: 'dwarf' | 'fp' | 'none';
  complete: boolean | null;
  stop: string;
  beyond_window?: boolean;
  /** dwarf: frames that rest on memory read after the event (origin "live"). */
  live_frames?: number;
  reason?: string;
  /** -a */
  allocs?: MlAlloc[];
  /** --allocated: bytes and allocations made since the last report, freed or not */
  alloc_bytes?: number;
  alloc_allocations?: number;
}

export interface MlReport {
  time: string;
  timestamp: number;
  pid: number;
  unwind_mode: 'dwarf' | 'fp' | 'kernel' | 'freeze';
  stacks: MlStack[];
  lost: number;
  untracked: { allocs_full: number; no_pending: number; combined_full: number; stack_table_full: number };
  /** outstanding allocations of images replaced by exec (gone with their memory, not shown), since the start */
  exec_gone?: { allocations: number; bytes: number };
  /** --allocated: allocations not counted as made (their record lost), since the start */
  allocated_lost?: number;
  unwind: {
    stacks: number;
    complete: number;
    stopped: number;
    fp: number;
    pseudo: number;
    beyond_window: number;
    records: number;
    patched: number;
    fallback: number;
    unwind_ns_avg: number;
    reasons: Record<string, number>;
  };
  /** --unwind=kernel */
  kernel_walk?: KernelWalk;
}

/** The JSON documents of memleak --json output (lines starting with '{'). */
export function parseReports(text: string): MlReport[] {
  const out: MlReport[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as MlReport);
    } catch {
      // a line cut short (memleak killed while writing): ignore it
    }
  }
  return out;
}

/** A frame's name as the manifest writes it: the symbol, else [module], else ?. */
export function frameName(f: MlFrame): string {
  if (f.symbol) return f.symbol;
  if (f.module) return `[${f.module.slice(f.module.lastIndexOf('/') + 1)}]`;
  return '?';
}

export const frameNames = (s: MlStack): string[] => s.frames.map(frameName);

/** `sym+0xoff`, `[unknown] [module]` (base name) or `[unknown]`, as memleak's text output. */
export function frameLabel(f: MlFrame): string {
  if (f.symbol) return `${f.symbol}+0x${f.offset.toString(16)}`;
  if (f.module) return `[unknown] [${f.module.slice(f.module.lastIndexOf('/') + 1)}]`;
  return '[unknown]';
}

// ---- leaky's manifest --------------------------------------------------------------------------

export interface Site {
  name: string;
  allocator: string;
  /** The allocator's size argument (bytes per allocation). */
  size: number;
  /** Per round; for the incidental sites (glibc's own, once per process) the total. */
  count: number;
  /** From the allocator's caller to main (or the thread start); each entry: accepted names. */
  chain: string[][];
  incidental: boolean;
}

export function parseManifest(text: string): Site[] {
  const sites: Site[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [name, allocator, size, count, chain] = line.split('\t');
    if (!name || !allocator || !size || !count || !chain) throw new Error(`leaky --manifest: bad line: ${line}`);
    sites.push({
      name,
      allocator,
      size: Number(size),
      count: Number(count),
      chain: chain.split(',').map((c) => c.split('|')),
      incidental: name.startsWith('incidental'),
    });
  }
  return sites;
}

/** `leaky --manifest`. */
export function readManifest(leaky = leakyPath()): Site[] {
  const r = spawnSync(leaky, ['--manifest'], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) throw new CliError(leaky, r.error ? r.error.message : `--manifest failed: ${r.stderr.trim()}`);
  return parseManifest(r.stdout);
}

export const expectedCount = (s: Site, rounds: number): number => s.count * (s.incidental ? 1 : rounds);
export const expectedBytes = (s: Site, rounds: number): number => expectedCount(s, rounds) * s.size;
export const chainText = (s: Site): string => s.chain.map((c) => c[0]).join(' ← ');

export interface ChainCheck {
  /** The stack starts with the whole chain (down to main or the thread start). */
  complete: boolean;
  /** Leading frames that match the chain. */
  matched: number;
  /** Why not, for a broken stack: "ends after 1 frame", "frame 2 is foo, expected bar". */
  why?: string;
}

export function checkChain(site: Site, names: string[]): ChainCheck {
  let k = 0;
  while (k < site.chain.length && k < names.length && site.chain[k]!.includes(names[k]!)) k++;
  if (k === site.chain.length) return { complete: true, matched: k };
  const want = site.chain[k]![0]!;
  if (k >= names.length) {
    return { complete: false, matched: k, why: `ends after ${names.length} frame${names.length === 1 ? '' : 's'}, before ${want}` };
  }
  return { complete: false, matched: k, why: `frame ${k} is ${names[k]}, expected ${want}` };
}

/** The site a stack belongs to: by its chain, else by the sizes of its allocations. */
export function siteOf(stack: MlStack, sites: Site[]): Site | undefined {
  const names = frameNames(stack);
  const byChain = sites.find((s) => checkChain(s, names).complete);
  if (byChain) return byChain;
  const sizes = stack.allocs?.length ? [...new Set(stack.allocs.map((a) => a.size))] : stack.allocations > 0 && stack.bytes % stack.allocations === 0 ? [stack.bytes / stack.allocations] : [];
  if (sizes.length !== 1) return undefined;
  const bySize = sites.filter((s) => s.size === sizes[0]);
  return bySize.length === 1 ? bySize[0] : undefined;
}

export interface SiteResult {
  site: Site;
  /** Stacks holding this site's allocations, by bytes. */
  stacks: MlStack[];
  bytes: number;
  allocations: number;
  expectedBytes: number;
  expectedAllocations: number;
  /** Every stack of the site starts with its whole chain (and, for DWARF, the walk ended OK). */
  complete: boolean;
  /** The first stack's check (the largest). */
  check: ChainCheck | null;
}

export interface Analysis {
  mode: 'dwarf' | 'fp' | 'kernel' | 'freeze';
  sites: SiteResult[];
  /** Stacks of no site (the workload has none: other allocations of glibc, or lost stacks). */
  extra: MlStack[];
  bytes: number;
  allocations: number;
  lost: number;
}

export function analyze(report: MlReport, sites: Site[], rounds: number): Analysis {
  const per = new Map<Site, MlStack[]>();
  const extra: MlStack[] = [];
  for (const st of report.stacks) {
    const s = siteOf(st, sites);
    if (s) per.set(s, [...(per.get(s) ?? []), st]);
    else extra.push(st);
  }
  const results = sites.map((site): SiteResult => {
    const stacks = (per.get(site) ?? []).sort((a, b) => b.bytes - a.bytes);
    const checks = stacks.map((st) => checkChain(site, frameNames(st)));
    return {
      site,
      stacks,
      bytes: stacks.reduce((n, st) => n + st.bytes, 0),
      allocations: stacks.reduce((n, st) => n + st.allocations, 0),
      expectedBytes: expectedBytes(site, rounds),
      expectedAllocations: expectedCount(site, rounds),
      complete: stacks.length > 0 && checks.every((c) => c.complete) && stacks.every((st) => st.kind !== 'dwarf' || st.complete === true),
      check: checks[0] ?? null,
    };
  });
  return {
    mode: report.unwind_mode,
    sites: results,
    extra,
    bytes: report.stacks.reduce((n, st) => n + st.bytes, 0),
    allocations: report.stacks.reduce((n, st) => n + st.allocations, 0),
    lost: report.lost,
  };
}

// ---- Running memleak -----------------------------------------------------------------------------

export interface Finished {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Running {
  child: ChildProcess;
  /** Resolves when memleak printed "Attaching to pid N" (its probes are in place). */
  attached: Promise<number>;
  done: Promise<Finished>;
  stdout(): string;
  stderr(): string;
}

/** Start memleak with args; stdout and stderr are collected. */
export function startMemleak(args: string[], opts: { bin?: string; env?: NodeJS.ProcessEnv; wrap?: string[] } = {}): Running {
  const bin = opts.bin ?? memleakPath();
  const argv = [...(opts.wrap ?? []), bin, ...args];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
  let out = '';
  let err = '';
  let onAttach: (pid: number) => void = () => {};
  let onFail: (e: Error) => void = () => {};
  const attached = new Promise<number>((resolve, reject) => {
    onAttach = resolve;
    onFail = reject;
  });
  attached.catch(() => {}); // a caller that only awaits `done` must not see an unhandled rejection
  const look = (): void => {
    const m = /Attaching to pid (\d+), Ctrl\+C to quit\./.exec(out + err);
    if (m) onAttach(Number(m[1]));
  };
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    look();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    look();
  });
  const done = new Promise<Finished>((resolve) => {
    child.on('error', (e) => {
      err += `${e.message}\n`;
    });
    child.on('close', (status, signal) => {
      const line = err.split('\n').find((l) => l.trim() && !l.startsWith('Attaching')) ?? `exited with status ${status ?? signal}`;
      onFail(new Error(line.trim()));
      resolve({ status, signal, stdout: out, stderr: err });
    });
  });
  return { child, attached, done, stdout: () => out, stderr: () => err };
}

/** Kill a child process unless it is gone. */
export function killChild(c: ChildProcess | undefined, sig: NodeJS.Signals = 'SIGKILL'): void {
  if (c && c.exitCode === null && c.signalCode === null) {
    try {
      c.kill(sig);
    } catch {
      // already gone
    }
  }
}

/** State letter of a process (R, S, T, Z, ...), '' when gone. */
export function procState(pid: number): string {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ')[0] ?? '';
  } catch {
    return '';
  }
}

export interface StoppedTarget {
  child: ChildProcess;
  pid: number;
  /** Let it run (SIGCONT): it then execs the program. */
  resume(): void;
  done: Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

/**
 * Start `program args` stopped: a shell that stops itself (SIGSTOP) and, once continued, execs
 * the program in the same process. Tracers attach with -p to the stopped shell (which maps the
 * same libc), then resume() lets the workload run with every probe in place: no race with its
 * first allocations, and several tracers can watch one run.
 */
export async function startStopped(program: string, args: string[], opts: { wrap?: string[] } = {}): Promise<StoppedTarget> {
  const argv = [...(opts.wrap ?? []), '/bin/sh', '-c', 'kill -STOP $$ && exec "$0" "$@"', program, ...args];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const done = new Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('close', (status, signal) => resolve({ status, signal, stderr })),
  );
  const pid = child.pid;
  if (pid === undefined) throw new CliError('/bin/sh', 'cannot start the target');
  const end = Date.now() + 60_000; // a hang guard: a loaded host may take seconds to start a shell
  while (procState(pid) !== 'T') {
    if (child.exitCode !== null || child.signalCode !== null) throw new CliError(program, `target exited before it stopped: ${stderr.trim()}`);
    if (Date.now() > end) {
      killChild(child);
      throw new CliError(program, 'target did not stop within 60 s');
    }
    await sleep(5);
  }
  return { child, pid, resume: () => process.kill(pid, 'SIGCONT'), done };
}

/** Resolve with p, or reject after ms. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${Math.round(ms / 1000)} s: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Why memleak cannot run here, or null: root, the kernel's BTF, the binaries. */
export function bpfUnavailable(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)';
  if (!existsSync('/sys/kernel/btf/vmlinux')) return 'no kernel BTF (/sys/kernel/btf/vmlinux)';
  if (!existsSync(memleakPath())) return `${memleakPath()} missing (make bpf)`;
  if (!existsSync(leakyPath())) return `${leakyPath()} missing (make fixtures)`;
  return null;
}
