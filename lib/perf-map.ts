// JIT names from /tmp/perf-PID.map ("START SIZE name" per line, hex), the file runtimes write for
// perf (node --perf-basic-prof, the JVM with perf-map-agent), read as perf and the tools read it:
// once per process, then, when a pc is not found, on from where the last read ended (the runtime
// names code as it compiles it; a new or shorter file is read from the start).
//
// Which file may be read is libdwunw's rule (dwunw_pid_file_open, also used by the tools): a
// regular file, not a symlink, owned by root or the process's user; anyone else could plant one.
// Why a second parser beside the tools' bpf/runtime/perf_map.c: that one is part of the tools'
// runtime (interned names, the tools' clock and allocator; memleak-fp is built without libdwunw),
// so the CLI keeps its own, with the same rules: sorted ranges, binary search, the latest line
// covering a pc wins, re-read on a miss.
import { closeSync, fstatSync, readSync } from 'node:fs';
import { lib } from './native.js';
import type { Frame } from './dwunw.js';
import { DWUNW_FRAME_EXACT_PC, DWUNW_FRAME_JIT } from './native-consts.js';

interface Entry {
  start: bigint;
  end: bigint;
  name: string;
  /** Line number: the latest entry for an address wins (code re-JITed at the same place). */
  seq: number;
}

/** How far back from the binary search's place overlapping entries are looked for (as the tools). */
const BACK = 64;

export class PerfMap {
  private v: Entry[] = [];
  private seq = 0;
  /** Bytes read so far (whole lines only). */
  private size = 0;
  private dev = -1;
  private ino = -1;
  /** The file read, or null when there is none. */
  path: string | null = null;
  /** Times the file was read or read on (for tests). */
  reads = 0;
  /** The line naming a file found but refused (planted: another owner, a symlink), once. */
  rejected: string | null = null;

  constructor(readonly pid: number) {
    this.load();
  }

  /** Entries known now. */
  get length(): number {
    return this.v.length;
  }

  /**
   * The name covering addr and addr's offset from its start, or null; a miss reads the lines
   * appended since the last read, then looks again.
   */
  lookup(addr: bigint): { name: string; start: bigint } | null {
    const hit = this.find(addr);
    if (hit || !this.load()) return hit;
    return this.find(addr);
  }

  private find(addr: bigint): { name: string; start: bigint } | null {
    let lo = 0;
    let hi = this.v.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.v[mid]!.start <= addr) lo = mid + 1;
      else hi = mid;
    }
    let best: Entry | null = null;
    for (let i = lo - 1; i >= 0 && lo - i <= BACK; i--) {
      const e = this.v[i]!;
      if (addr >= e.start && addr < e.end && (!best || e.seq > best.seq)) best = e;
    }
    return best ? { name: best.name, start: best.start } : null;
  }

  /** Open the map through libdwunw's rule, or null (none, or refused: `rejected` says why). */
  private open(path: string): number | null {
    const why = Buffer.alloc(512);
    const fd = lib().dwunw_pid_file_open(this.pid, path, why, why.length);
    if (fd >= 0) return fd;
    const line = why.toString('utf8', 0, Math.max(0, why.indexOf(0)));
    if (line && this.rejected === null) this.rejected = line;
    return null;
  }

  /** Read what was appended since the last read; true when entries were added. */
  private load(): boolean {
    // through the process's root first: a container writes its map in its own /tmp
    let path = `/proc/${this.pid}/root/tmp/perf-${this.pid}.map`;
    let fd = this.open(path);
    if (fd === null) {
      path = `/tmp/perf-${this.pid}.map`;
      fd = this.open(path);
      if (fd === null) return false;
    }
    this.path = path;
    const st = fstatSync(fd);
    if (st.dev !== this.dev || st.ino !== this.ino || st.size < this.size) {
      this.v = [];
      this.size = 0;
      this.dev = st.dev;
      this.ino = st.ino;
    }
    if (st.size <= this.size) {
      closeSync(fd);
      return false;
    }
    let text: string;
    try {
      const buf = Buffer.alloc(st.size - this.size);
      let got = 0;
      while (got < buf.length) {
        const n = readSync(fd, buf, got, buf.length - got, this.size + got);
        if (n <= 0) break;
        got += n;
      }
      // a line still being written is read next time, whole
      const last = buf.lastIndexOf(0x0a, got - 1);
      if (last < 0) return false;
      text = buf.toString('utf8', 0, last + 1);
      this.size += last + 1;
    } finally {
      closeSync(fd);
    }
    this.reads++;
    const before = this.v.length;
    for (const line of text.split('\n')) {
      const m = /^(?:0x)?([0-9a-fA-F]+)\s+(?:0x)?([0-9a-fA-F]+)\s+(.+)$/.exec(line);
      if (!m) continue;
      const start = BigInt(`0x${m[1]}`);
      this.v.push({ start, end: start + BigInt(`0x${m[2]}`), name: m[3]!, seq: this.seq++ });
    }
    if (this.v.length === before) return false;
    this.v.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.seq - b.seq));
    return true;
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
