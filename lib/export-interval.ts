// One interval of `profile --json --interval SEC` (bpf/profile/profile_out.c, pr_print_interval):
// the stacks counted in it (with thread ids), then its interval line; and what the exporters add
// to it: the processes' resource attributes, read from /proc while they may still run.
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename } from 'node:path';
import type { PrEntry } from './profile.js';

export interface IntervalLine {
  seq: number;
  start_unix_ns: number;
  duration_ns: number;
  samples: number;
  keys: number;
  frequency: number;
  period: number;
  records_lost: number;
  keys_overflow: number;
  stack_table_full: number;
  /** the modules of the interval's user stacks, each line naming its own (profile_out.c) */
  modules: { path: string; build_id: string | null }[];
}

export interface ProcInfo {
  pid: number;
  /** /proc/PID/exe, null when the process is gone or a kernel thread */
  exe: string | null;
  /** the id of its container (from /proc/PID/cgroup), null when none */
  container: string | null;
}

export interface Interval {
  line: IntervalLine;
  entries: PrEntry[];
  host: string;
  procs: Map<number, ProcInfo>;
  /** module path -> build id, of the modules of this interval's stacks */
  buildIds: Map<string, string | null>;
  /** what each sample's values are: one profile per measure */
  measures: Measure[];
  /** period_type and period (profile: cpu nanoseconds of one sample, 1e9/Hz or the -c period) */
  period: { type: string; unit: string; value: number };
}

/** A sample type (OTLP: one profile each) and how an entry gives its value. */
export interface Measure {
  type: string;
  unit: string;
  value(e: PrEntry): number;
}

/** profile's samples: each entry's count. */
export const CPU_MEASURES: Measure[] = [{ type: 'samples', unit: 'count', value: (e) => e.count }];

/** A container id in a cgroup path: 64 hex digits (docker, containerd, cri-o, podman). */
export function containerId(cgroup: string): string | null {
  for (const line of cgroup.split('\n')) {
    const m = /([0-9a-f]{64})(?:\.scope)?(?:\/|$)/.exec(line.slice(line.lastIndexOf(':') + 1));
    if (m) return m[1]!;
  }
  return null;
}

/**
 * Processes' attributes, cached by pid; those not seen for two intervals are forgotten (the cache
 * stays as large as the processes of the last intervals, however many come and go).
 */
export class ProcCache {
  private m = new Map<number, ProcInfo & { seen: number }>();
  private gen = 0;

  get(pid: number): ProcInfo {
    let p = this.m.get(pid);
    if (!p) {
      let exe: string | null = null;
      let container: string | null = null;
      try {
        exe = readlinkSync(`/proc/${pid}/exe`);
      } catch {
        // gone, or a kernel thread
      }
      try {
        container = containerId(readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
      } catch {
        // gone
      }
      p = { pid, exe: exe?.replace(/ \(deleted\)$/, '') ?? null, container, seen: this.gen };
      this.m.set(pid, p);
    }
    p.seen = this.gen;
    return p;
  }

  /** The end of an interval: forget the processes of neither this interval nor the last. */
  endInterval(): void {
    for (const [pid, p] of this.m) if (p.seen < this.gen - 1) this.m.delete(pid);
    this.gen++;
  }

  get size(): number {
    return this.m.size;
  }
}

/** The processes of an interval's entries (attributes read now), then the cache's interval ends. */
export function procsOf(entries: PrEntry[], cache: ProcCache): Map<number, ProcInfo> {
  const procs = new Map<number, ProcInfo>();
  for (const e of entries) if (!procs.has(e.pid)) procs.set(e.pid, cache.get(e.pid));
  cache.endInterval();
  return procs;
}

/**
 * Assembles intervals from profile's NDJSON lines. What it keeps across intervals is bounded by
 * the processes of the last two (ProcCache); modules come with each interval's line.
 */
export class IntervalReader {
  private entries: PrEntry[] = [];
  private procs = new ProcCache();
  private host = hostname();

  /** A line of profile's stdout: an Interval when it closes one, else null. */
  line(v: unknown): Interval | null {
    const o = v as { interval?: IntervalLine; count?: number; comm?: string };
    if (typeof o.count === 'number' && typeof o.comm === 'string') {
      const e = v as PrEntry;
      this.entries.push(e);
      return null;
    }
    if (!o.interval) return null;
    const line = o.interval;
    const procs = procsOf(this.entries, this.procs);
    const iv: Interval = {
      line,
      entries: this.entries,
      host: this.host,
      procs,
      buildIds: new Map(line.modules.map((m) => [m.path, m.build_id])),
      measures: CPU_MEASURES,
      period: { type: 'cpu', unit: 'nanoseconds', value: line.period || (line.frequency ? Math.round(1e9 / line.frequency) : 0) },
    };
    this.entries = [];
    return iv;
  }

  /** What it keeps across intervals: the processes of the last two (their attributes). */
  held(): { processes: number } {
    return { processes: this.procs.size };
  }
}

/** service.name of a process: --service, else its executable's name, else its comm. */
export function serviceName(p: ProcInfo, comm: string, service?: string): string {
  return service ?? (p.exe ? basename(p.exe) : comm);
}
