// memleak's reports as export intervals: each --json report (the outstanding allocations at that
// moment, by stack) is one interval with two measures, inuse_space (bytes) and inuse_objects
// (allocations): a snapshot, as pprof's heap profiles are. With memleak's --allocated (dwunw
// memleak --export -a) two more, alloc_space and alloc_objects: what was allocated since the last
// report, freed or not (per interval, where Go's heap profiles count since the start). Stacks of a
// followed tree carry their process; a -p report's stacks are all of its pid.
import { hostname } from 'node:os';
import { basename } from 'node:path';
import type { MlReport } from './memleak.js';
import type { PrEntry } from './profile.js';
import { type Interval, type Measure, ProcCache, procsOf } from './export-interval.js';

export interface MlEntry extends PrEntry {
  /** count is the outstanding bytes; this the outstanding allocations */
  allocations: number;
  /** --allocated: bytes and allocations made in the interval (0 without) */
  allocBytes: number;
  allocAllocations: number;
}

export const MEMLEAK_MEASURES: Measure[] = [
  { type: 'inuse_space', unit: 'bytes', value: (e) => e.count },
  { type: 'inuse_objects', unit: 'count', value: (e) => (e as MlEntry).allocations },
];

/** memleak --allocated: also what was allocated in the interval. */
export const MEMLEAK_ALLOC_MEASURES: Measure[] = [
  ...MEMLEAK_MEASURES,
  { type: 'alloc_space', unit: 'bytes', value: (e) => (e as MlEntry).allocBytes },
  { type: 'alloc_objects', unit: 'count', value: (e) => (e as MlEntry).allocAllocations },
];

/** A report's stacks as entries (frames leaf first, as memleak prints them; the reason is the pseudo-frame). */
export function memleakEntries(r: MlReport): MlEntry[] {
  return r.stacks.map((s) => {
    return {
      pid: s.pid ?? r.pid,
      comm: s.comm ?? '',
      count: s.bytes,
      allocations: s.allocations,
      allocBytes: s.alloc_bytes ?? 0,
      allocAllocations: s.alloc_allocations ?? 0,
      user: { frames: s.frames, kind: s.kind, reason: s.reason },
      kernel: null,
    };
  });
}

/** Turns memleak's reports into intervals, one per report. */
export class ReportReader {
  private procs = new ProcCache();
  private host = hostname();
  private seq = 0;
  private last: number | null = null;

  constructor(private intervalS: number) {}

  report(r: MlReport): Interval {
    const entries = memleakEntries(r);
    const end = r.timestamp * 1e9;
    const start = this.last ?? end - this.intervalS * 1e9;
    this.last = end;
    const allocations = entries.reduce((a, e) => a + e.allocations, 0);
    const procs = procsOf(entries, this.procs);
    // -p: the report names no comm; the thread name is the executable's
    for (const e of entries) if (!e.comm) e.comm = basename(procs.get(e.pid)?.exe ?? String(e.pid));
    return {
      line: { seq: this.seq++, start_unix_ns: start, duration_ns: end - start, samples: allocations, keys: entries.length, frequency: 0, period: 0, records_lost: r.lost, keys_overflow: 0, stack_table_full: r.untracked.stack_table_full, modules: [] },
      entries,
      host: this.host,
      procs,
      // memleak prints no module addresses: its mappings carry no build id (a backend would take
      // the runtime pcs for file addresses); its frames are named
      buildIds: new Map(),
      // --allocated says so in every report, stacks or not
      measures: r.allocated_lost !== undefined ? MEMLEAK_ALLOC_MEASURES : MEMLEAK_MEASURES,
      period: { type: 'space', unit: 'bytes', value: 1 },
    };
  }
}
