// The executable PT_LOAD segment of an ELF file (its address, size and file offset), read from the
// program headers only: pprof mappings are described by it, so that a symbolizer (`dwunw
// symbolize`, `pprof -symbolize`) turns a location's address back into the file's own address.
import { closeSync, openSync, readSync } from 'node:fs';

export interface ExecSegment {
  vaddr: bigint;
  memsz: bigint;
  offset: bigint;
}

const PT_LOAD = 1;
const PF_X = 1;

/** The first executable PT_LOAD of the file at path; null when it cannot be read or has none. */
export function execSegment(path: string): ExecSegment | null {
  let fd = -1;
  try {
    fd = openSync(path, 'r');
    const h = Buffer.alloc(64);
    if (readSync(fd, h, 0, 64, 0) < 52 || h.readUInt32BE(0) !== 0x7f454c46 || h[5] !== 1) return null;
    const is64 = h[4] === 2;
    const phoff = is64 ? Number(h.readBigUInt64LE(32)) : h.readUInt32LE(28);
    const phentsize = h.readUInt16LE(is64 ? 54 : 42);
    const phnum = h.readUInt16LE(is64 ? 56 : 44);
    if (phnum === 0 || phentsize < (is64 ? 56 : 32) || phnum > 4096) return null;
    const ph = Buffer.alloc(phentsize * phnum);
    if (readSync(fd, ph, 0, ph.length, phoff) !== ph.length) return null;
    for (let i = 0; i < phnum; i++) {
      const o = i * phentsize;
      if (ph.readUInt32LE(o) !== PT_LOAD) continue;
      const flags = ph.readUInt32LE(is64 ? o + 4 : o + 24);
      if (!(flags & PF_X)) continue;
      return is64
        ? { offset: ph.readBigUInt64LE(o + 8), vaddr: ph.readBigUInt64LE(o + 16), memsz: ph.readBigUInt64LE(o + 40) }
        : { offset: BigInt(ph.readUInt32LE(o + 4)), vaddr: BigInt(ph.readUInt32LE(o + 8)), memsz: BigInt(ph.readUInt32LE(o + 20)) };
    }
    return null;
  } catch {
    return null;
  } finally {
    if (fd >= 0) closeSync(fd);
  }
}
