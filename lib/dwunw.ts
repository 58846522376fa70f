// A small typed wrapper over the koffi binding: a context (Dwunw) that opens modules (Module).
// Every failing call throws a DwunwError carrying the library's code, short name and text.
import { endianness } from 'node:os';
import * as N from './native.js';

export class DwunwError extends Error {
  /** DWUNW_ERR_* (negative). */
  readonly code: number;
  /** The code's short name ("NO_DWARF", ...): also the Error's name. */
  override readonly name: string;

  /** The message is the library's one-line text for the code (dwunw_strerror). */
  constructor(code: number) {
    const lib = N.lib();
    super(lib.dwunw_strerror(code));
    this.code = code;
    this.name = lib.dwunw_errname(code);
  }
}

function check(rc: number): void {
  if (rc !== N.DWUNW_OK) throw new DwunwError(rc);
}

const num = (v: number | bigint): number => Number(v);

export interface TableInfo {
  rows: number;
  rules: number;
  bytes: number;
  buildNs: number;
  fdes: number;
  fdesDropped: number;
  /** DWUNW_TABLE_SRC_* bits present. */
  sources: number;
  /** DWUNW_ERR_* of the first skipped CFI entry, 0 when none was skipped. */
  firstError: number;
  firstErrorOffset: bigint;
  /** DWUNW_TABLE_SRC_* of the section holding the first skipped entry. */
  firstErrorSource: number;
}

export interface RowReg {
  /** DWARF register number. */
  reg: number;
  /** The return-address column. */
  isRa: boolean;
  /** readelf's register name. */
  name: string;
  /** What readelf prints as the column header: "ra" for the return-address column. */
  label: string;
  /** readelf's notation: "c-16", "u", "s", "r3 (rbx)", "exp", "vexp", "v+8". */
  rule: string;
}

export interface Row {
  index: number;
  pc: bigint;
  end: bigint;
  /** "rsp+8", "exp", or "end" for the gap after an FDE. */
  cfa: string;
  flags: number;
  regs: RowReg[];
}

export interface CacheStats {
  hits: number;
  misses: number;
  evictions: number;
  slots: number;
  active: number;
  warm: number;
}

/** Section name of a DWUNW_TABLE_SRC_* bit. */
export function sourceName(src: number): string {
  if (src === N.DWUNW_TABLE_SRC_EH_FRAME) return '.eh_frame';
  if (src === N.DWUNW_TABLE_SRC_DEBUG_FRAME) return '.debug_frame';
  return 'CFI';
}

// dwunw_row_text offsets, from the koffi declaration (itself checked against the C header).
const ROW = {
  size: N.sizeOf(N.RowTextT),
  pc: N.offsetOf(N.RowTextT, 'pc'),
  end: N.offsetOf(N.RowTextT, 'end'),
  cfa: N.offsetOf(N.RowTextT, 'cfa'),
  cfaLen: 48,
  nregs: N.offsetOf(N.RowTextT, 'nregs'),
  flags: N.offsetOf(N.RowTextT, 'flags'),
  regs: N.offsetOf(N.RowTextT, 'regs'),
  regSize: N.sizeOf(N.RowRegT),
  reg: N.offsetOf(N.RowRegT, 'reg'),
  isRa: N.offsetOf(N.RowRegT, 'is_ra'),
  name: N.offsetOf(N.RowRegT, 'name'),
  nameLen: 12,
  rule: N.offsetOf(N.RowRegT, 'rule'),
  ruleLen: 28,
};
const LE = endianness() === 'LE';

function cstr(buf: Buffer, off: number, max: number): string {
  let end = buf.indexOf(0, off);
  if (end < 0 || end > off + max) end = off + max;
  return buf.toString('utf8', off, end);
}

export class Module {
  readonly path: string;
  readonly arch: N.ArchOps;
  private handle: N.Pointer | null;
  private readonly rowBuf = Buffer.alloc(ROW.size);
  private info?: TableInfo;

  /** @internal use Dwunw.open */
  constructor(
    private readonly owner: Dwunw,
    handle: N.Pointer,
  ) {
    this.handle = handle;
    const lib = N.lib();
    this.path = lib.dwunw_module_path(handle) ?? '';
    const ops = lib.dwunw_module_arch(handle);
    if (!ops) throw new DwunwError(N.DWUNW_ERR_UNSUPPORTED_ARCH);
    this.arch = N.decodeArchOps(ops);
  }

  private get h(): N.Pointer {
    if (this.handle === null) throw new Error('module is closed');
    return this.handle;
  }

  /** Bytes in an address of this module (4 or 8). */
  get addrSize(): number {
    return this.arch.addr_size;
  }

  /** Hex build-id, or "" when the module has none. */
  get buildId(): string {
    const buf = Buffer.alloc(64);
    const n = N.lib().dwunw_module_build_id(this.h, buf, buf.length);
    return n > 0 ? cstr(buf, 0, buf.length) : '';
  }

  /** The module's table (compiled on first use) and how it was built. */
  tableInfo(): TableInfo {
    if (this.info) return this.info;
    const out: Record<string, unknown> = {};
    check(N.lib().dwunw_table_info(this.owner.ctx, this.h, out));
    const r = out as unknown as N.RawTableInfo;
    this.info = {
      rows: num(r.rows),
      rules: num(r.rules),
      bytes: num(r.bytes),
      buildNs: num(r.build_ns),
      fdes: num(r.fdes),
      fdesDropped: num(r.fdes_dropped),
      sources: r.sources,
      firstError: r.first_error,
      firstErrorOffset: BigInt(r.first_error_offset),
      firstErrorSource: r.first_error_source,
    };
    return this.info;
  }

  /** Row `index` (0 .. rows-1) decoded to readelf's notation. */
  row(index: number): Row {
    const b = this.rowBuf;
    check(N.lib().dwunw_table_row(this.owner.ctx, this.h, index, b));
    const nregs = Math.min(LE ? b.readUInt32LE(ROW.nregs) : b.readUInt32BE(ROW.nregs), N.DWUNW_ROW_MAX_REGS);
    const regs: RowReg[] = [];
    for (let i = 0; i < nregs; i++) {
      const o = ROW.regs + i * ROW.regSize;
      const reg = LE ? b.readUInt16LE(o + ROW.reg) : b.readUInt16BE(o + ROW.reg);
      const isRa = (LE ? b.readUInt16LE(o + ROW.isRa) : b.readUInt16BE(o + ROW.isRa)) !== 0;
      const name = cstr(b, o + ROW.name, ROW.nameLen);
      regs.push({
        reg,
        isRa,
        name,
        label: isRa ? 'ra' : name || `r${reg}`,
        rule: cstr(b, o + ROW.rule, ROW.ruleLen),
      });
    }
    return {
      index,
      pc: LE ? b.readBigUInt64LE(ROW.pc) : b.readBigUInt64BE(ROW.pc),
      end: LE ? b.readBigUInt64LE(ROW.end) : b.readBigUInt64BE(ROW.end),
      cfa: cstr(b, ROW.cfa, ROW.cfaLen),
      flags: LE ? b.readUInt32LE(ROW.flags) : b.readUInt32BE(ROW.flags),
      regs,
    };
  }

  /** Every row, in pc order. */
  *rows(): Generator<Row> {
    const n = this.tableInfo().rows;
    for (let i = 0; i < n; i++) yield this.row(i);
  }

  /** Index of the row covering a module address, or null when no CFI covers it. */
  lookup(addr: bigint): number | null {
    const r = Number(N.lib().dwunw_table_lookup(this.owner.ctx, this.h, addr));
    if (r === N.DWUNW_ERR_NO_DWARF) return null;
    if (r < 0) throw new DwunwError(r);
    return r;
  }

  /** Give the module reference back (idempotent). */
  close(): void {
    if (this.handle === null) return;
    N.lib().dwunw_module_put(this.owner.ctx, this.handle);
    this.handle = null;
  }
}

export interface DwunwOptions {
  /** Module-cache slots; 0 = the library's default. */
  cacheSlots?: number;
  /** DWUNW_CFG_* flags. */
  flags?: number;
}

/** One library context (dwunw_init .. dwunw_shutdown). */
export class Dwunw {
  private ctxMem: N.Pointer | null;

  constructor(opts: DwunwOptions = {}) {
    const lib = N.lib();
    this.ctxMem = N.allocCtx();
    const cfg = {
      size: N.sizeOf(N.ConfigT),
      flags: opts.flags ?? 0,
      cache_slots: opts.cacheSlots ?? 0,
      max_frames: 0,
      sysroot: null,
      debug_dirs: null,
      audit: null,
      audit_arg: null,
      warn: null,
      warn_arg: null,
      modules: null,
      nmodules: 0,
      pad: 0,
    };
    const rc = lib.dwunw_init(this.ctxMem, cfg);
    if (rc !== N.DWUNW_OK) {
      N.freeCtx(this.ctxMem);
      this.ctxMem = null;
      throw new DwunwError(rc);
    }
  }

  /** "MAJOR.MINOR.PATCH" of the loaded library. */
  static libraryVersion(): string {
    return N.lib().dwunw_version();
  }

  /** @internal */
  get ctx(): N.Pointer {
    if (this.ctxMem === null) throw new Error('dwunw context is shut down');
    return this.ctxMem;
  }

  /** Open (or find in the cache) the module at `path`. */
  open(path: string): Module {
    const out: N.Pointer[] = [null];
    check(N.lib().dwunw_module_open(this.ctx, path, out));
    try {
      return new Module(this, out[0]);
    } catch (e) {
      N.lib().dwunw_module_put(this.ctx, out[0]);
      throw e;
    }
  }

  cacheStats(): CacheStats {
    const out: Record<string, unknown> = {};
    check(N.lib().dwunw_cache_stats(this.ctx, out));
    const r = out as unknown as N.RawCacheStats;
    return {
      hits: num(r.hits),
      misses: num(r.misses),
      evictions: num(r.evictions),
      slots: r.slots,
      active: r.active,
      warm: r.warm,
    };
  }

  /** Free everything (idempotent). Modules must be closed first. */
  close(): void {
    if (this.ctxMem === null) return;
    N.lib().dwunw_shutdown(this.ctxMem);
    N.freeCtx(this.ctxMem);
    this.ctxMem = null;
  }
}
