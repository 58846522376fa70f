// profile (bpf/profile/profile.c, built into build/bpf/profile) from TypeScript: where the binaries are,
// its --json output (one line per stack, with -f its folded lines, then a summary line), and the
// views built from it here: pprof (lib/profile-pprof.ts) and the HTML flame graph (lib/profile-html.ts).
// Used by `dwunw profile` (commands/profile.ts), the tests and scripts/profile-cost.
import { join } from 'node:path';
import { packageRoot } from './root.js';

export const profilePath = (): string => join(packageRoot(), 'build', 'bpf', 'profile');
export const hotPath = (): string => join(packageRoot(), 'fixtures', 'x86_64', 'build', 'hot');

// ---- profile --json ------------------------------------------------------------------------------

export interface PrFrame {
  pc: string;
  symbol: string | null;
  offset: number;
  module: string | null;
  /** where the frame came from (README "Frame origins"): kernel, window, live, fp, ... */
  origin?: string;
  /** in anonymous executable memory (JIT code) */
  anon?: boolean;
  /** with --lines: the source file and line (null: the row has none), when the debug info has
   * them; a Python frame's own file and line (null: unknown) */
  file?: string | null;
  line?: number | null;
}

export interface PrStack {
  frames: PrFrame[];
  /** user stacks only */
  kind?: 'dwarf' | 'fp' | 'none';
  complete?: boolean;
  stop?: string;
  /** module addresses (pc - load bias) of the frames, 0 when unknown (user stacks) */
  maddr?: number[];
  /** indices of frames recovered by frame pointers inside a DWARF walk */
  fp_frames?: number[];
  /** indices of frames whose pc is not a return address (the leaf, after a signal frame) */
  exact?: number[];
  /** pseudo-frame: why the stack is missing or stopped */
  reason?: string;
}

export interface PrEntry {
  pid: number;
  /** with --interval only */
  tid?: number;
  comm: string;
  /** profile: samples; offcputime: microseconds off CPU */
  count: number;
  /** offcputime: switch-outs summed in count */
  switches?: number;
  /** --wall: on-CPU samples summed in count (each its period) */
  samples?: number;
  /** --wall: on CPU (sampled) or off CPU (switch-out to switch-in); off-CPU stacks end in OFF_CPU_FRAME */
  state?: 'on' | 'off';
  /** offcputime --waker: the thread that woke it (comm "[interrupt]", pid 0: an interrupt did) */
  waker?: { pid: number; comm: string; user: PrStack | null; kernel: PrStack | null };
  user: PrStack | null;
  kernel: PrStack | null;
}

export interface PrSummary {
  /** offcputime: "microseconds" (count is time off CPU); profile: absent (count is samples) */
  unit?: 'microseconds';
  samples: number;
  event: string;
  frequency: number;
  period: number;
  cpus: number;
  duration_ns: number;
  start_unix_ns: number;
  unwind: 'dwarf' | 'fp' | 'kernel' | 'freeze';
  user_samples: number;
  user_complete: number;
  user_fp_stacks: number;
  fp_frames_in_dwarf: number;
  lost: Record<string, number>;
  stopped: Record<string, number>;
  kernel_lost: number;
  records_lost: number;
  stack_read_failed: number;
  keys: number;
  keys_overflow: number;
  stacks: number;
  stack_table_full: number;
  unwind_ns_avg: number;
  processes: number;
  /** bytes of records read from the ring/perf buffer (transient: nothing is written per sample) */
  buffer_bytes: number;
  self: { user_s: number; sys_s: number; max_rss_kib: number };
  modules: { path: string; build_id: string | null }[];
  /** offcputime --waker: wakeups recorded, lost to a full table, spans woken from interrupt context */
  waker?: { wakeups: number; table_full: number; from_interrupt: number };
  /** offcputime --wall (dwunw profile --wall): on-CPU samples beside the off-CPU spans, one unit */
  wall?: {
    on_cpu_us: number;
    off_cpu_us: number;
    period_ns: number;
    cpus: number;
    /** samples summed in the entries (state "on") */
    on_samples: number;
    /** samples of selected threads the BPF program took: on_records + on_lost */
    on_samples_bpf: number;
    on_lost: number;
    on_records: number;
  };
  /** --unwind=kernel: where the user stacks came from (the in-kernel walker or its fallback) */
  kernel_walk?: KernelWalk;
}

/** --unwind=kernel's summary (profile and memleak): walker events and the tables' memory. */
export interface KernelWalk {
  events: number;
  /** stacks walked in the BPF program */
  from_kernel: number;
  /** walks that stopped short: unwound from the snapshot carried in the same event */
  fallback: number;
  fallback_pct: number;
  bad: number;
  /** events by why the walk ended (ok, depth, no-code: complete; the others fell back) */
  by_status: Record<string, number>;
  table_loads: number;
  mmaps: number;
  mmaps_lost: number;
  exits: number;
  /** profile -a: fallbacks of processes not (yet) sampled enough to load their tables */
  loads_deferred?: number;
  map_bytes: number;
  table_bytes: number;
  modules: number;
  evictions: number;
}

/** A folded line as profile made it (-f --json): the stacks that fold alike, merged, in bcc's order. */
export interface PrFolded {
  folded: string;
  count: number;
}

export interface PrOutput {
  entries: PrEntry[];
  /** with -f: profile's folded lines (the folding is profile's, never redone here) */
  folded: PrFolded[];
  summary: PrSummary | null;
}

/** profile --json output: entries and the summary (a line cut short is ignored). */
export function parseProfileJson(text: string): PrOutput {
  const out: PrOutput = { entries: [], folded: [], summary: null };
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    const o = v as { summary?: PrSummary; count?: number; comm?: string; folded?: string };
    if (o.summary) out.summary = o.summary;
    else if (typeof o.folded === 'string' && typeof o.count === 'number') out.folded.push(v as PrFolded);
    else if (typeof o.count === 'number' && typeof o.comm === 'string') out.entries.push(v as PrEntry);
    // anything else: the profiled command's own output on the same stdout
  }
  return out;
}

/** --wall: the leaf frame added to off-CPU stacks (as offcputime's folded lines show it). */
export const OFF_CPU_FRAME = '[off-CPU]';

/** A frame's name as the folded form shows it. */
export function frameName(f: PrFrame): string {
  if (f.symbol) return f.symbol;
  if (f.module) return `[unknown] (${f.module.slice(f.module.lastIndexOf('/') + 1)})`;
  return '[unknown]';
}

/** Frames of an entry root first: comm, [user stop/loss], user root..leaf, then kernel root..leaf
 * ([off-CPU] with --wall; "--" and the waker leaf..root, its comm, with --waker). */
export function rootFirst(e: PrEntry): { names: string[]; kernelFrom: number } {
  const names = [e.comm];
  if (e.user) {
    if (e.user.reason) names.push(e.user.reason);
    for (let i = e.user.frames.length - 1; i >= 0; i--) names.push(frameName(e.user.frames[i]!));
  }
  const kernelFrom = names.length;
  if (e.kernel) {
    if (e.kernel.reason) names.push(e.kernel.reason);
    for (let i = e.kernel.frames.length - 1; i >= 0; i--) names.push(frameName(e.kernel.frames[i]!));
  }
  if (e.state === 'off') names.push(OFF_CPU_FRAME);
  if (e.waker) {
    // as offwaketime's flame graphs: "--", then the waker's stacks leaf first, its comm on top
    names.push('--');
    for (const st of [e.waker.kernel, e.waker.user]) {
      for (const f of st?.frames ?? []) names.push(frameName(f));
      if (st?.reason) names.push(st.reason);
    }
    names.push(e.waker.comm);
  }
  return { names, kernelFrom };
}

/**
 * An entry's frames leaf first, as pprof and OTLP stacks want them: kernel frames, the kernel
 * pseudo-frame (why it is missing or stopped), user frames, the user pseudo-frame. `at` maps each
 * (a frame, or null and the pseudo-frame's label) with the user frame's module address (0: none)
 * and whether its pc is exact (not a return address: the address of its own instruction).
 */
export function leafFirst<T>(
  e: PrEntry,
  at: (f: PrFrame | null, label: string | null, maddr: number, kernel: boolean, exact: boolean) => T,
): T[] {
  const out: T[] = [];
  if (e.state === 'off') out.push(at(null, OFF_CPU_FRAME, 0, false, true));
  if (e.kernel) {
    e.kernel.frames.forEach((f, i) => out.push(at(f, null, 0, true, i === 0)));
    if (e.kernel.reason) out.push(at(null, e.kernel.reason, 0, true, true));
  }
  if (e.user) {
    const exact = new Set(e.user.exact ?? [0]);
    e.user.frames.forEach((f, i) => out.push(at(f, null, e.user!.maddr?.[i] ?? 0, false, exact.has(i))));
    if (e.user.reason) out.push(at(null, e.user.reason, 0, false, true));
  }
  return out;
}
