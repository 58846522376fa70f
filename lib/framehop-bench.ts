// framehop (samply's DWARF unwinder, from crates.io) as a peer in `dwunw bench` (issue 28):
// build/bench/dwunw-framehop (bench/framehop/) unwinds the snapshots dwunw-bench dumped in the
// same run (--dump DIR: the self snapshots' addresses are that process's), with the stack bytes
// as its only memory, and its frames are compared with libdwunw's. Under --callgrind its warm
// unwinds are counted the way dwunw-bench's are (profile_loop only, same iterations).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './root.js';
import { runCommand } from './run-command.js';

/** One snapshot as dwunw-framehop prints it. */
interface FramehopSnap {
  name: string;
  status: 'ok' | 'n/a';
  reason?: string;
  stop?: string;
  complete?: boolean;
  frames?: number;
  median_ns?: number;
  p90_ns?: number;
  min_ns?: number;
  cold_ns?: number;
  cache_collisions_per_unwind?: number;
  pcs?: string[];
}

/** What the bench report keeps per snapshot for framehop (the fields of the other unwinders, and why it differs). */
export interface FramehopResult {
  status: 'ok' | 'n/a' | 'error';
  reason?: string;
  stop?: string;
  complete?: boolean;
  frames: number | null;
  agrees: boolean | null;
  /** its frames are the first `frames` of libdwunw's: it stopped early, it did not go astray */
  stops_early?: boolean;
  median_ns: number | null;
  p90_ns: number | null;
  min_ns?: number;
  ns_per_frame?: number;
  cold_ns?: number;
  ratio_to_dwunw?: number;
  /** pcs sharing a slot of framehop's direct-mapped rule cache (509 slots, by address): re-looked-up every unwind */
  cache_collisions_per_unwind?: number;
  pcs?: string[];
  differs?: { index: number; dwunw: string | null; peer: string | null }[];
  ir_per_unwind?: number;
  instructions?: number;
}

export const FRAMEHOP_VERSION = '0.16.0';

export function framehopPath(): string {
  return process.env.DWUNW_FRAMEHOP ?? join(packageRoot(), 'build', 'bench', 'dwunw-framehop');
}

const na = (reason: string): FramehopResult => ({ status: 'n/a', reason, frames: null, agrees: null, median_ns: null, p90_ns: null });

/** Compare framehop's pcs with libdwunw's: the same, a prefix (stopped early), or the indices where they differ. */
export function compareFrames(dwunw: string[], peer: string[]): Pick<FramehopResult, 'agrees' | 'stops_early' | 'differs'> {
  const same = (i: number) => dwunw[i] !== undefined && peer[i] !== undefined && BigInt(dwunw[i]!) === BigInt(peer[i]!);
  const n = Math.max(dwunw.length, peer.length);
  const idx: number[] = [];
  for (let i = 0; i < n; i++) if (!same(i)) idx.push(i);
  if (!idx.length) return { agrees: true };
  const differs = idx.slice(0, 12).map((i) => ({ index: i, dwunw: dwunw[i] ?? null, peer: peer[i] ?? null }));
  return { agrees: false, stops_early: peer.length < dwunw.length && idx[0] === peer.length, differs };
}

/**
 * framehop's result per snapshot name, from the snapshots dumped in `dumpDir`. `dwunwPcs` and
 * `dwunwNs` are libdwunw's frames and warm median per snapshot, to compare against.
 */
export async function framehopBench(
  dumpDir: string,
  names: string[],
  dwunw: Map<string, { pcs?: string[]; median_ns: number | null }>,
  iterations: number,
  batches: number,
): Promise<Map<string, FramehopResult>> {
  const res = new Map<string, FramehopResult>();
  const bin = framehopPath();
  if (!existsSync(bin)) {
    for (const n of names) res.set(n, na(`${bin} is not built (make, with cargo: bench/framehop)`));
    return res;
  }
  const ran = await runCommand(bin, [dumpDir, '--iterations', String(iterations), '--batches', String(batches)]);
  let doc: { snapshots: FramehopSnap[] };
  try {
    if (ran.code !== 0) throw new Error(ran.stderr.trim().split('\n').pop() ?? `exit status ${ran.code}`);
    doc = JSON.parse(ran.stdout) as { snapshots: FramehopSnap[] };
  } catch (e) {
    for (const n of names) res.set(n, { ...na((e as Error).message), status: 'error' });
    return res;
  }
  for (const n of names) {
    const f = doc.snapshots.find((s) => s.name === n);
    if (!f) {
      res.set(n, na('not in the dump'));
      continue;
    }
    if (f.status !== 'ok') {
      res.set(n, na(f.reason ?? 'n/a'));
      continue;
    }
    const d = dwunw.get(n);
    const cmp = d?.pcs ? compareFrames(d.pcs, f.pcs ?? []) : { agrees: null };
    const frames = f.frames ?? 0;
    res.set(n, {
      status: 'ok',
      stop: f.stop,
      complete: f.complete,
      frames,
      ...cmp,
      median_ns: f.median_ns ?? null,
      p90_ns: f.p90_ns ?? null,
      min_ns: f.min_ns,
      ns_per_frame: frames && f.median_ns !== undefined ? Math.round((f.median_ns / frames) * 100) / 100 : undefined,
      cold_ns: f.cold_ns,
      cache_collisions_per_unwind: f.cache_collisions_per_unwind,
      ratio_to_dwunw: d?.median_ns && f.median_ns !== undefined ? Math.round((f.median_ns / d.median_ns) * 100) / 100 : undefined,
      pcs: f.pcs,
    });
  }
  return res;
}

/** The valgrind arguments counting framehop's warm unwinds of one snapshot (profile_loop only). */
export function framehopCallgrindArgs(dumpDir: string, snapshot: string, iterations: number): string[] {
  return [framehopPath(), dumpDir, '--profile', snapshot, '--iterations', String(iterations)];
}
