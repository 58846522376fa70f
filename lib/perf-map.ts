// JIT names from /tmp/perf-PID.map, the file runtimes write for perf (node --perf-basic-prof, the
// JVM with perf-map-agent). The parser is libdwunw's (dwunw_perf_map_*), the one the tools use:
// which file may be read (a regular file of root or the process's user, not a symlink: nobody
// else plants one), the latest line covering a pc wins, a miss reads on from where the last read
// ended, a new or shorter file is read from the start. This class holds one process's map.
import { lib, type Pointer } from './native.js';
import type { Frame } from './dwunw.js';
import { DWUNW_FRAME_EXACT_PC, DWUNW_FRAME_JIT } from './native-consts.js';

interface Info {
  entries: bigint | number;
  reads: bigint | number;
  path: string;
  rejected: string;
}

export class PerfMap {
  private map: Pointer | null;

  constructor(readonly pid: number) {
    const out: Pointer[] = [null];
    this.map = lib().dwunw_perf_map_open(pid, out) === 0 ? out[0]! : null;
  }

  private info(): Info {
    const i: Info = { entries: 0, reads: 0, path: '', rejected: '' };
    if (this.map) lib().dwunw_perf_map_info(this.map, i as unknown as Record<string, unknown>);
    return i;
  }

  /** Entries known now. */
  get length(): number {
    return Number(this.info().entries);
  }

  /** Times the file was read or read on (for tests). */
  get reads(): number {
    return Number(this.info().reads);
  }

  /** The file read, or null when there is none. */
  get path(): string | null {
    return this.info().path || null;
  }

  /** The line naming a file found but refused (planted: another owner, a symlink), or null. */
  get rejected(): string | null {
    return this.info().rejected || null;
  }

  /**
   * The name covering addr and its start, or null; a miss reads the lines appended since the
   * last read, then looks again.
   */
  lookup(addr: bigint): { name: string; start: bigint } | null {
    if (!this.map) return null;
    const hit = this.find(addr);
    if (hit || lib().dwunw_perf_map_read_on(this.map) <= 0) return hit;
    return this.find(addr);
  }

  private find(addr: bigint): { name: string; start: bigint } | null {
    const name: (string | null)[] = [null];
    const start: (number | bigint)[] = [0];
    if (lib().dwunw_perf_map_find(this.map, addr, name, start) !== 0 || name[0] === null) return null;
    return { name: name[0], start: BigInt(start[0]!) };
  }

  /** Free the C side (the object is not used after). */
  close(): void {
    if (this.map) lib().dwunw_perf_map_free(this.map);
    this.map = null;
  }
}

/**
 * Name the frames in no module (JIT code) from the process's perf map, in place: symbol from the
 * entry covering the frame's call site (a return address looks up pc - 1: the call may be the
 * code's last instruction), offset pc - start, source 'perf-map', and the frame is flagged jit.
 * Only for a live process: an offline snapshot or a core says nothing of the map at its time.
 */
export function nameJitFrames(frames: Frame[], map: PerfMap): number {
  let named = 0;
  for (const f of frames) {
    if (f.module !== null || f.symbol !== null) continue;
    const hit = map.lookup(f.flags & DWUNW_FRAME_EXACT_PC ? f.pc : f.pc - 1n);
    if (!hit) continue;
    f.symbol = { name: hit.name, rawName: hit.name, offset: f.pc - hit.start, file: null, line: null, flags: 0, source: 'perf-map' };
    f.flags |= DWUNW_FRAME_JIT;
    named++;
  }
  return named;
}
