// A minimal ELF reader for `dwunw verify`: sections, symbols and PLT relocations of the fixture
// programs of any of the three architectures (ELF32/ELF64, little-endian), to place breakpoints
// (a function's entry, a PLT entry, a .MIPS.stubs entry) and to tell linker stubs apart from code
// without CFI. Host tools (nm, objdump) cannot be relied on for foreign architectures.
import { readFileSync } from 'node:fs';

export interface ElfSection {
  name: string;
  type: number;
  flags: bigint;
  addr: bigint;
  offset: number;
  size: number;
  link: number;
  entsize: number;
}

export interface ElfSymbol {
  name: string;
  value: bigint;
  size: bigint;
  /** STT_* */
  type: number;
  /** Index in its table (.dynsym indices are what .MIPS.stubs and PLT relocations name). */
  index: number;
}

const SHT_SYMTAB = 2;
const SHT_RELA = 4;
const SHT_REL = 9;
const SHT_DYNSYM = 11;
const SHF_EXECINSTR = 0x4n;
const STT_FUNC = 2;
const STT_GNU_IFUNC = 10;

export class ElfFile {
  readonly is64: boolean;
  readonly type: number;
  readonly machine: number;
  readonly entry: bigint;
  readonly sections: ElfSection[];
  private readonly buf: Buffer;

  constructor(readonly path: string) {
    const b = readFileSync(path);
    this.buf = b;
    if (b.length < 52 || b.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${path}: not an ELF file`);
    if (b[5] !== 1) throw new Error(`${path}: not little-endian`);
    this.is64 = b[4] === 2;
    this.type = b.readUInt16LE(16);
    this.machine = b.readUInt16LE(18);
    this.entry = this.is64 ? b.readBigUInt64LE(24) : BigInt(b.readUInt32LE(24));
    const shoff = this.is64 ? Number(b.readBigUInt64LE(40)) : b.readUInt32LE(32);
    const shentsize = b.readUInt16LE(this.is64 ? 58 : 46);
    const shnum = b.readUInt16LE(this.is64 ? 60 : 48);
    const shstrndx = b.readUInt16LE(this.is64 ? 62 : 50);
    const raw: Omit<ElfSection, 'name'>[] = [];
    const nameOff: number[] = [];
    for (let i = 0; i < shnum; i++) {
      const o = shoff + i * shentsize;
      if (this.is64) {
        nameOff.push(b.readUInt32LE(o));
        raw.push({
          type: b.readUInt32LE(o + 4),
          flags: b.readBigUInt64LE(o + 8),
          addr: b.readBigUInt64LE(o + 16),
          offset: Number(b.readBigUInt64LE(o + 24)),
          size: Number(b.readBigUInt64LE(o + 32)),
          link: b.readUInt32LE(o + 40),
          entsize: Number(b.readBigUInt64LE(o + 56)),
        });
      } else {
        nameOff.push(b.readUInt32LE(o));
        raw.push({
          type: b.readUInt32LE(o + 4),
          flags: BigInt(b.readUInt32LE(o + 8)),
          addr: BigInt(b.readUInt32LE(o + 12)),
          offset: b.readUInt32LE(o + 16),
          size: b.readUInt32LE(o + 20),
          link: b.readUInt32LE(o + 24),
          entsize: b.readUInt32LE(o + 36),
        });
      }
    }
    const strtab = raw[shstrndx];
    this.sections = raw.map((s, i) => ({ ...s, name: strtab ? this.cstr(strtab.offset + nameOff[i]!) : '' }));
  }

  private cstr(off: number): string {
    const end = this.buf.indexOf(0, off);
    return this.buf.toString('latin1', off, end < 0 ? this.buf.length : end);
  }

  section(name: string): ElfSection | undefined {
    return this.sections.find((s) => s.name === name);
  }

  /** The bytes of a section (empty for SHT_NOBITS). */
  bytes(s: ElfSection): Buffer {
    return s.type === 8 ? Buffer.alloc(0) : this.buf.subarray(s.offset, s.offset + s.size);
  }

  /** Symbols of .symtab (or .dynsym). */
  symbols(dynamic = false): ElfSymbol[] {
    const tab = this.sections.find((s) => s.type === (dynamic ? SHT_DYNSYM : SHT_SYMTAB));
    if (!tab) return [];
    const str = this.sections[tab.link];
    if (!str) return [];
    const ent = this.is64 ? 24 : 16;
    const out: ElfSymbol[] = [];
    for (let i = 0; i * ent < tab.size; i++) {
      const o = tab.offset + i * ent;
      const b = this.buf;
      const name = this.cstr(str.offset + b.readUInt32LE(o));
      if (this.is64) {
        out.push({ name, index: i, type: b[o + 4]! & 15, value: b.readBigUInt64LE(o + 8), size: b.readBigUInt64LE(o + 16) });
      } else {
        out.push({ name, index: i, type: b[o + 12]! & 15, value: BigInt(b.readUInt32LE(o + 4)), size: BigInt(b.readUInt32LE(o + 8)) });
      }
    }
    return out;
  }

  /** Defined functions of .symtab by name (the first definition wins). */
  functions(): Map<string, ElfSymbol> {
    const m = new Map<string, ElfSymbol>();
    for (const s of this.symbols())
      if ((s.type === STT_FUNC || s.type === STT_GNU_IFUNC) && s.value !== 0n && !m.has(s.name)) m.set(s.name, s);
    return m;
  }

  /** The .dynsym index of each symbol named by a PLT relocation (.rela.plt/.rel.plt), in order. */
  pltSymbols(): string[] {
    const rel = this.sections.find((s) => (s.type === SHT_RELA || s.type === SHT_REL) && /^\.rela?\.plt$/.test(s.name));
    if (!rel) return [];
    const dyn = this.symbols(true);
    const ent = rel.entsize || (this.is64 ? 24 : rel.type === SHT_RELA ? 12 : 8);
    const out: string[] = [];
    for (let o = rel.offset; o + ent <= rel.offset + rel.size; o += ent) {
      const sym = this.is64 ? Number(this.buf.readBigUInt64LE(o + 8) >> 32n) : this.buf.readUInt32LE(o + 4) >>> 8;
      out.push(dyn[sym]?.name ?? '');
    }
    return out;
  }

  /** Executable sections holding linker stubs without CFI: .plt, .iplt, .MIPS.stubs, ... */
  stubRanges(): Array<[bigint, bigint]> {
    return this.sections
      .filter((s) => (s.flags & SHF_EXECINSTR) !== 0n && /^\.(plt|plt\.sec|plt\.got|iplt|MIPS\.stubs)$/.test(s.name))
      .map((s) => [s.addr, s.addr + BigInt(s.size)]);
  }
}
