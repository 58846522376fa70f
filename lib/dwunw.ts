// A small typed wrapper over the koffi binding: a context (Dwunw) that opens modules (Module),
// freezes and reads threads (StackReader) and unwinds (Dwunw.unwind, Dwunw.captureThread).
// Every failing call throws a DwunwError carrying the library's code, short name and text, except
// where a result carries the code (attach, a walk's stop reason).
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_MAX_FRAMES, DEFAULT_STACK_SIZE, MAX_VDSO_SIZE } from './defaults.js';
import * as N from './native.js';
import { type PyRuntime, type PyStack, findPython, pythonStack } from './python.js';

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
  /** Bytes the loaded modules hold (tables, symbol index, line tables, ELF bytes read). */
  bytes: number;
  /** The bound on them (config cache_bytes in effect). */
  bytesBound: number;
  /** Evictions made to keep within the bound. */
  bytesEvictions: number;
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

  /** @internal the struct dwunw_module pointer, for a frame the library is handed */
  get ptr(): N.Pointer {
    return this.h;
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

  /**
   * The whole table rendered by the library (N.DWUNW_DUMP_*), a buffer at a time: one call per
   * megabyte instead of one per row. Text starts with the column line. Each buffer yielded is
   * reused for the next: write it out (and wait for the write) before going on.
   */
  *dump(format: number): Generator<Buffer> {
    const buf = Buffer.allocUnsafe(1 << 20);
    const row: [number | bigint] = [0];
    for (;;) {
      const n = Number(N.lib().dwunw_table_dump(this.owner.ctx, this.h, format, row, buf, buf.length));
      if (n < 0) throw new DwunwError(n);
      if (n === 0) return;
      // One buffer, refilled by the next call: the caller is done with it before asking for more.
      yield buf.subarray(0, n);
    }
  }

  /** Memory the module holds now, by kind (bytes). */
  memory(): { table: number; symbols: number; elf: number; fileSize: number } {
    const out: Record<string, unknown> = {};
    check(N.lib().dwunw_module_memory(this.owner.ctx, this.h, out));
    const r = out as Record<string, number | bigint>;
    return { table: num(r.table!), symbols: num(r.symbols!), elf: num(r.elf!), fileSize: num(r.file_size!) };
  }

  /**
   * The symbol holding a module address, looked up as it is (for a return address pass pc - 1),
   * or null when none does. With debuginfod on, a first look-up may ask for the debug file.
   */
  symbolize(addr: bigint): FrameSymbol | null {
    const sym = new N.CMem(SYMBOL_SIZE);
    try {
      return N.lib().dwunw_symbolize(this.owner.ctx, this.h, addr, sym.buf) === N.DWUNW_OK ? elfSymbol(sym.buf) : null;
    } finally {
      sym.free();
    }
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
  /** Bytes the module cache's warm modules may hold (LRU beyond); 0 = the library's default (256 MiB). */
  cacheBytes?: number;
  /** DWUNW_CFG_* flags. */
  flags?: number;
  /** Prefix for module paths (offline snapshots of another root); null = "/". */
  sysroot?: string | null;
  /** The stack reader's audit log (one line per attach, detach, fallback); none when absent. */
  audit?: (line: string) => void;
  /** Warnings (non-dumpable target, a thread that did not stop, ...); none when absent. */
  warn?: (line: string) => void;
  /**
   * How long a stack reader's attach waits for the thread to stop, in ms (0 = the library's
   * 2000). A thread that cannot stop (a vfork parent, uninterruptible I/O) is then not unwound:
   * attach fails with IO and errno ETIMEDOUT.
   */
  attachTimeoutMs?: number;
  /** ':'-separated roots of separate debug files; null = the library's /usr/lib/debug. */
  debugDirs?: string | null;
  /**
   * Fetch missing debug files from DEBUGINFOD_URLS on the library's worker thread
   * (DWUNW_CFG_DEBUGINFOD); debuginfodWait() before naming frames for a report.
   */
  debuginfod?: boolean;
}

/** One module whose debug file was looked for (dwunw_debuginfod_result). */
export interface DebuginfodResult {
  state: 'pending' | 'local' | 'fetched' | 'failed';
  err: number;
  buildId: string;
  why: string;
  module: string;
  file: string;
}

// ---- Unwinding: registers, frames, symbols ---------------------------------------------------

export { FRAME_FLAGS, HOW_NAMES, frameFlagNames, howName } from './frame-names.js';

/**
 * A symbol name without its ELF version suffix ("clock_nanosleep@@GLIBC_2.17" ->
 * "clock_nanosleep", "memcpy@GLIBC_2.2.5" -> "memcpy"): the library returns .symtab/.dynsym
 * names as they are.
 */
/** A struct dwunw_symbol the library filled, or null when it has no name. */
function elfSymbol(buf: Buffer): FrameSymbol | null {
  const s = N.decodeAt(buf, 0, N.SymbolT) as unknown as N.RawSymbol;
  if (s.name === '') return null;
  return {
    name: stripSymbolVersion(s.name),
    rawName: s.name,
    offset: BigInt(s.offset),
    file: s.file === '' ? null : s.file,
    line: s.line === 0 ? null : s.line,
    flags: s.flags,
    source: 'elf',
  };
}

export function stripSymbolVersion(name: string): string {
  // a PLT stub's synthetic name@plt is no version
  return name.replace(/@@?(?!plt$)[A-Za-z_][A-Za-z0-9_.]*$/, '');
}

/** Registers by DWARF number (only those with a value), as the library or a snapshot file has them. */
export interface Registers {
  /** enum dwunw_arch */
  arch: number;
  /** DWUNW_REGS_* */
  flags: number;
  pc: bigint;
  regs: Map<number, bigint>;
}

/** A copy of target memory (the stack window), taken with the registers. */
export interface MemWindow {
  start: bigint;
  bytes: Buffer;
}

export interface FrameSymbol {
  /** Without the ELF version suffix. */
  name: string;
  /** As the library returned it. */
  rawName: string;
  /** pc - symbol start (for a return address: of the call, plus one, as gdb shows it). */
  offset: bigint;
  file: string | null;
  line: number | null;
  /** DWUNW_SYM_* */
  flags: number;
  /** Where the name comes from: the module's ELF symbols, or the JIT's /tmp/perf-PID.map (lib/perf-map.ts). */
  source: 'elf' | 'perf-map';
}

export interface Frame {
  pc: bigint;
  sp: bigint;
  /** 0 when not computed. */
  cfa: bigint;
  /** Path of the module mapped at pc, null when none. */
  module: string | null;
  /** pc as an address of the module's ELF file; null without a module. */
  moduleAddr: bigint | null;
  /** enum dwunw_how */
  how: number;
  /** DWUNW_FRAME_* */
  flags: number;
  symbol: FrameSymbol | null;
}

export interface Unwind {
  frames: Frame[];
  /** DWUNW_OK when the walk reached the outermost frame, else why it stopped (DWUNW_ERR_*). */
  stop: number;
  /** "OK", "NO_DWARF", ... */
  stopName: string;
  /** dwunw_strerror(stop) */
  stopText: string;
}

export interface UnwindInput {
  /** Process whose maps (and, live, memory beyond the stack window) are used; must be > 0. */
  pid: number;
  tid: number;
  regs: Registers;
  stack: MemWindow | null;
}

export interface ThreadCapture extends Unwind {
  tid: number;
  /** The thread was frozen (attach succeeded). */
  attached: boolean;
  /** The thread exited before it could be attached, read or resumed (stop is then NO_PROCESS). */
  exited: boolean;
  /** errno of the reader's failed system call when attaching failed, else null. */
  attachErrno: number | null;
  /** Registers and stack window read while the thread was frozen; null when attach or regs failed. */
  regs: Registers | null;
  stack: MemWindow | null;
  /** /proc/PID/maps read while the thread was frozen (CaptureOptions.readMaps), else null. */
  maps: string | null;
  /** The bytes of the [vdso] mapping, read while the thread was frozen (CaptureOptions.readVdso), else null. */
  vdso: Buffer | null;
  /** The thread's Python frames, read while it was frozen (CaptureOptions.python), else null. */
  python: PyStack | null;
}

export interface CaptureOptions {
  /** Bytes of stack copied from the stack pointer up (fewer when the mapping ends sooner). */
  stackSize?: number;
  maxFrames?: number;
  /** Also read /proc/PID/maps while the thread is frozen. */
  readMaps?: boolean;
  /** Also copy the process's [vdso] mapping (found in the maps read with readMaps). */
  readVdso?: boolean;
  /**
   * Test hook: stay attached this many milliseconds after reading, before resuming the thread.
   * The wait is asynchronous, so signal handlers run meanwhile (and may detach: detachAll()).
   */
  holdMs?: number;
  /** Also read the thread's Python frames while it is frozen (the process's CPython: Dwunw.findPython). */
  python?: PyRuntime;
}

// ---- Core files (dwunw_core_load) ----------------------------------------------------------------

export interface CoreLoadOptions {
  /** The process's maps (/proc/PID/maps text), for a core without NT_FILE (qemu's guest cores). */
  maps?: string;
  /** File for the main executable's mappings, instead of the path the maps give. */
  exe?: string;
  /** Offline pid to register the process under; 0 or absent = the core's. */
  pid?: number;
}

export interface CoreThread {
  tid: number;
  /** pr_cursig of the thread's NT_PRSTATUS (a kernel core repeats the fatal one in every thread). */
  signo: number;
  regs: Registers;
}

export interface CoreLoad {
  /** DWUNW_OK, or DWUNW_ERR_CORRUPT: part of the core could not be read (the rest is loaded). */
  status: number;
  /** enum dwunw_arch */
  arch: number;
  /** The offline pid the process is registered under (0: no maps at all); use it for unwind(). */
  pid: number;
  /** The process id the core records. */
  corePid: number;
  comm: string | null;
  /** The main executable's path as the maps name it, null when unknown. */
  exe: string | null;
  /** DWUNW_CORE_* */
  flags: number;
  nmaps: number;
  nsegments: number;
  /** Threads with readable registers in the core. */
  nthreads: number;
  /** In the core's order (the thread that took the fatal signal first). */
  threads: CoreThread[];
}

export { DEFAULT_ATTACH_TIMEOUT_MS, DEFAULT_MAX_FRAMES, DEFAULT_STACK_SIZE, MAX_VDSO_SIZE, VDSO_NAME } from './defaults.js';
const PAGE = 4096n;

// Offsets of the structs this file reads and writes by hand (from the koffi declarations,
// which test/abi-layout.test.ts checks against the C header).
const REGS = {
  size: N.sizeOf(N.RegsT),
  arch: N.offsetOf(N.RegsT, 'arch'),
  flags: N.offsetOf(N.RegsT, 'flags'),
  pid: N.offsetOf(N.RegsT, 'pid'),
  tid: N.offsetOf(N.RegsT, 'tid'),
  pc: N.offsetOf(N.RegsT, 'pc'),
  valid: N.offsetOf(N.RegsT, 'valid'),
  regs: N.offsetOf(N.RegsT, 'regs'),
  stackStart: N.offsetOf(N.RegsT, 'stack_start'),
  stack: N.offsetOf(N.RegsT, 'stack'),
  stackSize: N.offsetOf(N.RegsT, 'stack_size'),
};
const FRAME_SIZE = N.sizeOf(N.FrameT);
const CORE_THREAD = {
  size: N.sizeOf(N.CoreThreadT),
  tid: N.offsetOf(N.CoreThreadT, 'tid'),
  signo: N.offsetOf(N.CoreThreadT, 'signo'),
  regs: N.offsetOf(N.CoreThreadT, 'regs'),
};
const SYMBOL_SIZE = N.sizeOf(N.SymbolT);
const MAP_SIZE = N.sizeOf(N.MapT);
const READER = {
  size: N.sizeOf(N.StackReaderT),
  flags: N.offsetOf(N.StackReaderT, 'flags'),
  lastErrno: N.offsetOf(N.StackReaderT, 'last_errno'),
};

/** One mapping of a process (struct dwunw_map). */
export interface MapEntry {
  start: bigint;
  end: bigint;
  offset: bigint;
  inode: bigint;
  devMajor: number;
  devMinor: number;
  /** DWUNW_MAP_* bits. */
  flags: number;
  /** A file, "[vdso]", "[stack]", ...; "" for anonymous memory; " (deleted)" cut (DWUNW_MAP_DELETED). */
  path: string;
}

/** The mappings of a /proc/PID/maps text, by the library's parser (dwunw_maps_parse). */
export function parseMaps(text: string): MapEntry[] {
  const lib = N.lib();
  const bytes = Buffer.from(text, 'utf8');
  const t = new N.CMem(bytes.length + 1); // zeroed: text[len] is the last path's end
  let out: N.CMem | null = null;
  try {
    bytes.copy(t.buf);
    const n: [number | bigint] = [0];
    if (lib.dwunw_maps_parse(t.buf, bytes.length, null, n) !== N.DWUNW_OK) return [];
    out = new N.CMem(Number(n[0]) * MAP_SIZE);
    check(lib.dwunw_maps_parse(t.buf, bytes.length, out.buf, n));
    const maps: MapEntry[] = [];
    for (let i = 0; i < Number(n[0]); i++) {
      const m = N.decodeAt(out.buf, i * MAP_SIZE, N.MapT);
      maps.push({
        start: BigInt(m.start as number | bigint),
        end: BigInt(m.end as number | bigint),
        offset: BigInt(m.offset as number | bigint),
        inode: BigInt(m.inode as number | bigint),
        devMajor: m.dev_major as number,
        devMinor: m.dev_minor as number,
        flags: m.flags as number,
        path: (m.path as string | null) ?? '',
      });
    }
    return maps;
  } finally {
    out?.free();
    t.free();
  }
}

/** [start, end) of the [vdso] mapping in a /proc/PID/maps text, or null. */
export function vdsoRange(maps: string): [bigint, bigint] | null {
  const m = parseMaps(maps).find((e) => e.path === '[vdso]');
  return m ? [m.start, m.end] : null;
}

const u32 = (b: Buffer, o: number): number => (LE ? b.readUInt32LE(o) : b.readUInt32BE(o));
const i32 = (b: Buffer, o: number): number => (LE ? b.readInt32LE(o) : b.readInt32BE(o));
const u64 = (b: Buffer, o: number): bigint => (LE ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o));
function setU32(b: Buffer, o: number, v: number): void {
  if (LE) b.writeUInt32LE(v >>> 0, o);
  else b.writeUInt32BE(v >>> 0, o);
}
function setI32(b: Buffer, o: number, v: number): void {
  if (LE) b.writeInt32LE(v | 0, o);
  else b.writeInt32BE(v | 0, o);
}
function setU64(b: Buffer, o: number, v: bigint): void {
  if (LE) b.writeBigUInt64LE(BigInt.asUintN(64, v), o);
  else b.writeBigUInt64BE(BigInt.asUintN(64, v), o);
}

/** struct dwunw_regs (in a Buffer) -> Registers. */
function decodeRegs(b: Buffer): Registers {
  const valid = u64(b, REGS.valid);
  const regs = new Map<number, bigint>();
  for (let i = 0; i < N.DWUNW_MAX_REGS; i++) if ((valid >> BigInt(i)) & 1n) regs.set(i, u64(b, REGS.regs + 8 * i));
  return { arch: u32(b, REGS.arch), flags: u32(b, REGS.flags), pc: u64(b, REGS.pc), regs };
}

// ---- Stack reader ------------------------------------------------------------------------------

/** Readers currently holding a thread, for detachAll(). */
const attachedReaders = new Set<StackReader>();

/**
 * Resume every thread a StackReader of this process holds. For signal and exit handlers: they
 * run on the main thread, which is the tracer (every reader call here is synchronous, on it).
 * Returns how many threads were held.
 */
export function detachAll(): number {
  let n = 0;
  for (const r of [...attachedReaders]) {
    r.detach();
    n++;
  }
  return n;
}

/**
 * One thread frozen at a time (dwunw_stack_reader_*). ptrace binds a tracee to the tracing
 * thread, so every call is synchronous on the JS main thread (never a koffi async call).
 */
export class StackReader {
  private mem: N.CMem | null;

  /** @internal use Dwunw.reader */
  constructor(
    readonly pid: number,
    cfg: Record<string, unknown>,
  ) {
    this.mem = new N.CMem(READER.size);
    const rc = N.lib().dwunw_stack_reader_init(this.mem.buf, pid, cfg);
    if (rc !== N.DWUNW_OK) {
      this.mem.free();
      this.mem = null;
      throw new DwunwError(rc);
    }
  }

  private get b(): Buffer {
    if (this.mem === null) throw new Error('stack reader is closed');
    return this.mem.buf;
  }

  get attached(): boolean {
    return this.mem !== null && (u32(this.mem.buf, READER.flags) & N.DWUNW_READER_ATTACHED) !== 0;
  }

  /** errno of the last failed system call. */
  get lastErrno(): number {
    return i32(this.b, READER.lastErrno);
  }

  /** Freeze thread tid; DWUNW_OK or the error (PERM, NO_PROCESS, ...). */
  attach(tid: number): number {
    const rc = N.lib().dwunw_stack_reader_attach(this.b, tid);
    if (rc === N.DWUNW_OK) attachedReaders.add(this);
    return rc;
  }

  /** Registers of the frozen thread. */
  regs(): Registers {
    const out = new N.CMem(REGS.size);
    try {
      check(N.lib().dwunw_stack_reader_regs(this.b, out.buf));
      return decodeRegs(out.buf);
    } finally {
      out.free();
    }
  }

  /** Exactly len bytes at addr, or the error code (DWUNW_ERR_*). */
  read(addr: bigint, len: number): Buffer | number {
    if (len <= 0) return Buffer.alloc(0);
    const mem = new N.CMem(len);
    try {
      const rc = this.readInto(addr, mem, len);
      return rc === N.DWUNW_OK ? Buffer.from(mem.buf) : rc;
    } finally {
      mem.free();
    }
  }

  /** len bytes at addr into dst (C memory); DWUNW_OK or the error. */
  private readInto(addr: bigint, dst: N.CMem, len: number): number {
    return N.lib().dwunw_stack_reader_read(this.b, addr, dst.buf, len);
  }

  /**
   * Up to `size` bytes from `start` up, shrunk (at page boundaries) to what is readable: a
   * window that ends where the stack mapping ends. Returns the window, null when not even the
   * first byte is readable, or a DwunwError code when reading failed otherwise.
   */
  readWindow(start: bigint, size: number): MemWindow | null | number {
    if (size <= 0) return null;
    const mem = new N.CMem(size);
    try {
      const full = this.readInto(start, mem, size);
      let len = size;
      if (full === N.DWUNW_ERR_INVALID_ARG) {
        // The largest readable prefix ending at a page boundary: binary search on the page count.
        const firstEnd = ((start + PAGE) / PAGE) * PAGE;
        const pages = Number((start + BigInt(size) - firstEnd + PAGE - 1n) / PAGE);
        let lo = -1; // a known-readable count (-1: none)
        let hi = pages; // a known-unreadable count (the full size failed)
        while (hi - lo > 1) {
          const mid = (lo + hi) >> 1;
          const n = Number(firstEnd + BigInt(mid) * PAGE - start);
          const rc = this.readInto(start, mem, n);
          if (rc === N.DWUNW_OK) lo = mid;
          else if (rc === N.DWUNW_ERR_INVALID_ARG) hi = mid;
          else return rc;
        }
        if (lo < 0) return null;
        len = Number(firstEnd + BigInt(lo) * PAGE - start);
        const rc = this.readInto(start, mem, len);
        if (rc !== N.DWUNW_OK) return rc;
      } else if (full !== N.DWUNW_OK) {
        return full;
      }
      return { start, bytes: Buffer.from(mem.buf.subarray(0, len)) };
    } finally {
      mem.free();
    }
  }

  /** Resume the thread (safe when not attached); DWUNW_OK, or NO_PROCESS when it has exited. */
  detach(): number {
    if (this.mem === null) return N.DWUNW_OK;
    const rc = N.lib().dwunw_stack_reader_detach(this.mem.buf);
    if (!this.attached) attachedReaders.delete(this);
    return rc;
  }

  /** Detach and free (idempotent). */
  close(): void {
    if (this.mem === null) return;
    this.detach();
    attachedReaders.delete(this);
    this.mem.free();
    this.mem = null;
  }
}

/** One library context (dwunw_init .. dwunw_shutdown). */
export class Dwunw {
  private ctxMem: N.Pointer | null;
  private readonly callbacks: N.Callback[] = [];
  /** The config given to dwunw_init, reused for dwunw_stack_reader_init (its log sinks). */
  private readonly cfg: Record<string, unknown>;
  private readonly readers = new Set<StackReader>();
  /** Images given to dwunw_module_open_image: the library uses them in place until shutdown. */
  private readonly images: N.CMem[] = [];
  private readonly pyRuntimes: PyRuntime[] = [];

  constructor(opts: DwunwOptions = {}) {
    const lib = N.lib();
    const sink = (fn?: (line: string) => void): N.Callback | null => {
      if (!fn) return null;
      const cb = N.registerLogFn(fn);
      this.callbacks.push(cb);
      return cb;
    };
    this.cfg = {
      size: N.sizeOf(N.ConfigT),
      flags: (opts.flags ?? 0) | (opts.debuginfod ? N.DWUNW_CFG_DEBUGINFOD : 0),
      cache_slots: opts.cacheSlots ?? 0,
      max_frames: 0,
      sysroot: opts.sysroot ?? null,
      debug_dirs: opts.debugDirs ?? null,
      audit: sink(opts.audit),
      audit_arg: null,
      warn: sink(opts.warn),
      warn_arg: null,
      modules: null,
      nmodules: 0,
      pad: 0,
      attach_timeout_ms: opts.attachTimeoutMs ?? 0,
      pad2: 0,
      cache_bytes: BigInt(opts.cacheBytes ?? 0),
    };
    this.ctxMem = N.allocCtx();
    const rc = lib.dwunw_init(this.ctxMem, this.cfg);
    if (rc !== N.DWUNW_OK) {
      N.freeCtx(this.ctxMem);
      this.ctxMem = null;
      this.unregister();
      throw new DwunwError(rc);
    }
  }

  private unregister(): void {
    for (const cb of this.callbacks.splice(0)) N.unregisterCallback(cb);
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

  /**
   * Open an ELF image held in memory (a copy is kept until close()) under `name`; it then serves
   * every mapping of that path, e.g. VDSO_NAME for the [vdso] mappings of offline maps. Keep the
   * Module open while it is needed: an open module is never evicted from the cache.
   */
  /** Offline memory of pid (dwunw_memory_add): copied, and kept until close(). */
  addMemory(pid: number, addr: bigint, bytes: Buffer): void {
    if (bytes.length === 0) return;
    const mem = new N.CMem(bytes.length);
    bytes.copy(mem.buf);
    const rc = N.lib().dwunw_memory_add(this.ctx, pid, addr, mem.buf, bytes.length);
    if (rc !== N.DWUNW_OK) {
      mem.free();
      throw new DwunwError(rc);
    }
    this.images.push(mem);
  }

  openImage(name: string, image: Buffer): Module {
    if (image.length === 0) throw new DwunwError(N.DWUNW_ERR_INVALID_ARG);
    const mem = new N.CMem(image.length);
    image.copy(mem.buf);
    const out: N.Pointer[] = [null];
    const rc = N.lib().dwunw_module_open_image(this.ctx, name, mem.buf, image.length, out);
    if (rc !== N.DWUNW_OK) {
      mem.free();
      throw new DwunwError(rc);
    }
    this.images.push(mem);
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
      bytes: num(r.bytes),
      bytesBound: num(r.bytes_bound),
      bytesEvictions: num(r.bytes_evictions),
    };
  }

  /** The backend for an architecture (enum dwunw_arch), or null when this build has none. */
  static arch(arch: number): N.ArchOps | null {
    const p = N.lib().dwunw_arch_get(arch);
    return p ? N.decodeArchOps(p) : null;
  }

  /** The backend named "x86_64", "arm64", "mips32", or null. */
  static archByName(name: string): N.ArchOps | null {
    for (let a = N.DWUNW_ARCH_X86_64; a <= N.DWUNW_ARCH_MIPS32; a++) {
      const ops = Dwunw.arch(a);
      if (ops && ops.name === name) return ops;
    }
    return null;
  }

  /** A stack reader for pid, with this context's audit and warn sinks. Closed by close(). */
  reader(pid: number): StackReader {
    const r = new StackReader(pid, this.cfg);
    this.readers.add(r);
    return r;
  }

  /**
   * CPython in pid (live, or a core's offline pid): the runtime to read Python frames with, or why
   * not (an interpreter this build has no layout for: one line); both null when there is none.
   * The runtime is freed with the context.
   */
  findPython(pid: number): { rt: PyRuntime | null; why: string | null } {
    const found = findPython(this.ctx, pid);
    if (found.rt) this.pyRuntimes.push(found.rt);
    return found;
  }

  /** The Python frames of a thread (a core's, or a live one the caller holds stopped). */
  pythonStack(rt: PyRuntime, tid: number): PyStack {
    return pythonStack(this.ctx, rt, tid);
  }

  /** Read pid's maps now (the thread is frozen): a capture after detach keeps them if it exits. */
  refreshMaps(pid: number): number {
    return N.lib().dwunw_maps_refresh(this.ctx, pid);
  }

  /** Use this text (/proc/PID/maps format) as pid's maps: the pid is offline from now on. */
  setMaps(pid: number, text: string): void {
    const b = Buffer.from(text, 'utf8');
    check(N.lib().dwunw_maps_set(this.ctx, pid, b, b.length));
  }

  /**
   * Load a core file (dwunw_core_load): its process becomes an offline pid of this context (maps
   * from NT_FILE or `maps`, memory from the core) and its threads' registers are returned, for
   * unwind() with no stack window. Throws DwunwError unless the core was read, wholly (status
   * OK) or in part (status DWUNW_ERR_CORRUPT: malformed or truncated, what was read is loaded).
   */
  loadCore(path: string, opts: CoreLoadOptions = {}): CoreLoad {
    const lib = N.lib();
    const o = {
      size: N.sizeOf(N.CoreOptionsT),
      flags: 0,
      maps_text: opts.maps ?? null,
      maps_len: opts.maps !== undefined ? Buffer.byteLength(opts.maps, 'utf8') : 0,
      exe: opts.exe ?? null,
      pid: opts.pid ?? 0,
      pad: 0,
    };
    const info = new N.CMem(N.sizeOf(N.CoreInfoT));
    let cap = 64;
    try {
      for (;;) {
        const threads = new N.CMem(cap * CORE_THREAD.size);
        try {
          const cnt: [number | bigint] = [cap];
          const status = lib.dwunw_core_load(this.ctx, path, o, threads.buf, cnt, info.buf);
          if (status !== N.DWUNW_OK && status !== N.DWUNW_ERR_CORRUPT) throw new DwunwError(status);
          const inf = N.decodeAt(info.buf, 0, N.CoreInfoT) as unknown as N.RawCoreInfo;
          // More threads than fit: load it again with room for all (the pid is replaced).
          if (inf.nthreads > cap && cap < 1 << 16) {
            cap = Math.min(inf.nthreads, 1 << 16);
            continue;
          }
          const out: CoreThread[] = [];
          for (let i = 0; i < Number(cnt[0]); i++) {
            const at = i * CORE_THREAD.size;
            out.push({
              tid: i32(threads.buf, at + CORE_THREAD.tid),
              signo: i32(threads.buf, at + CORE_THREAD.signo),
              regs: decodeRegs(threads.buf.subarray(at + CORE_THREAD.regs, at + CORE_THREAD.regs + REGS.size)),
            });
          }
          return {
            status,
            arch: inf.arch,
            pid: inf.pid,
            corePid: inf.core_pid,
            comm: inf.comm === '' ? null : inf.comm,
            exe: inf.exe === '' ? null : inf.exe,
            flags: inf.flags,
            nmaps: inf.nmaps,
            nsegments: inf.nsegments,
            nthreads: inf.nthreads,
            threads: out,
          };
        } finally {
          threads.free();
        }
      }
    } finally {
      info.free();
    }
  }

  /**
   * Wait at most timeoutMs for the debug files asked from debuginfod; how many are still pending
   * (0 when the context fetches nothing). Throws when libdebuginfod cannot be loaded.
   */
  debuginfodWait(timeoutMs: number): number {
    const rc = N.lib().dwunw_debuginfod_wait(this.ctx, timeoutMs);
    if (rc < 0) throw new DwunwError(rc);
    return rc;
  }

  /** Every module whose debug file was looked for, in the order asked. */
  debuginfodResults(): DebuginfodResult[] {
    const states = ['pending', 'local', 'fetched', 'failed'] as const;
    const out: DebuginfodResult[] = [];
    for (let i = 0; ; i++) {
      const r: Record<string, unknown> = {};
      if (N.lib().dwunw_debuginfod_result(this.ctx, i, r) !== N.DWUNW_OK) break;
      out.push({
        state: states[r.state as number] ?? 'pending',
        err: r.err as number,
        buildId: r.build_id as string,
        why: r.why as string,
        module: r.module as string,
        file: r.file as string,
      });
    }
    return out;
  }

  /**
   * Name module frames again (after debuginfodWait: a debug file may have come since they were
   * named): each frame's module is opened by path (the cached one when it is the same file).
   */
  renameFrames(frames: Frame[]): void {
    const lib = N.lib();
    const fb = Buffer.alloc(FRAME_SIZE);
    const sym = new N.CMem(SYMBOL_SIZE);
    const mods = new Map<string, Module | null>();
    try {
      for (const f of frames) {
        if (f.module === null || f.moduleAddr === null || f.symbol?.source === 'perf-map') continue;
        let m = mods.get(f.module);
        if (m === undefined) {
          try {
            m = this.open(f.module);
          } catch {
            m = null;
          }
          mods.set(f.module, m);
        }
        if (m === null) continue;
        N.encodeAt(fb, 0, N.FrameT, { pc: f.pc, sp: f.sp, cfa: f.cfa, module_addr: f.moduleAddr, module: m.ptr, how: f.how, flags: f.flags });
        if (lib.dwunw_symbolize_frame(this.ctx, fb, sym.buf) === N.DWUNW_OK) f.symbol = elfSymbol(sym.buf) ?? f.symbol;
      }
    } finally {
      for (const m of mods.values()) m?.close();
      sym.free();
    }
  }

  /**
   * Unwind from registers and a stack window (dwunw_capture), symbolize every frame
   * (dwunw_symbolize_frame) and give the module references back (dwunw_module_cache_release).
   * A walk that stops early is not an exception: see Unwind.stop.
   */
  unwind(input: UnwindInput, maxFrames = DEFAULT_MAX_FRAMES): Unwind {
    const lib = N.lib();
    const regs = new N.CMem(REGS.size);
    const stack = input.stack && input.stack.bytes.length > 0 ? new N.CMem(input.stack.bytes.length) : null;
    const frames = new N.CMem(maxFrames * FRAME_SIZE);
    const sym = new N.CMem(SYMBOL_SIZE);
    let n = 0;
    try {
      const b = regs.buf;
      setU32(b, REGS.arch, input.regs.arch);
      setU32(b, REGS.flags, input.regs.flags);
      setI32(b, REGS.pid, input.pid);
      setI32(b, REGS.tid, input.tid);
      setU64(b, REGS.pc, input.regs.pc);
      let valid = 0n;
      for (const [reg, v] of input.regs.regs) {
        if (!Number.isInteger(reg) || reg < 0 || reg >= N.DWUNW_MAX_REGS) continue;
        valid |= 1n << BigInt(reg);
        setU64(b, REGS.regs + 8 * reg, v);
      }
      setU64(b, REGS.valid, valid);
      if (stack && input.stack) {
        input.stack.bytes.copy(stack.buf);
        setU64(b, REGS.stackStart, input.stack.start);
        N.writePointer(b, REGS.stack, stack.address);
        setU64(b, REGS.stackSize, BigInt(input.stack.bytes.length));
      }

      const cnt: [number | bigint] = [maxFrames];
      const stop = lib.dwunw_capture(this.ctx, regs.buf, frames.buf, cnt);
      n = Number(cnt[0]);
      const out: Frame[] = [];
      for (let i = 0; i < n; i++) {
        const fb = frames.buf.subarray(i * FRAME_SIZE, (i + 1) * FRAME_SIZE);
        const f = N.decodeAt(frames.buf, i * FRAME_SIZE, N.FrameT);
        const mod = f.module ?? null;
        let symbol: FrameSymbol | null = null;
        if (mod !== null && lib.dwunw_symbolize_frame(this.ctx, fb, sym.buf) === N.DWUNW_OK) symbol = elfSymbol(sym.buf);
        out.push({
          pc: BigInt(f.pc as number | bigint),
          sp: BigInt(f.sp as number | bigint),
          cfa: BigInt(f.cfa as number | bigint),
          module: mod === null ? null : (lib.dwunw_module_path(mod) ?? null),
          moduleAddr: mod === null ? null : BigInt(f.module_addr as number | bigint),
          how: f.how as number,
          flags: f.flags as number,
          symbol,
        });
      }
      return { frames: out, stop, stopName: lib.dwunw_errname(stop), stopText: lib.dwunw_strerror(stop) };
    } finally {
      if (n > 0) lib.dwunw_module_cache_release(this.ctx, frames.buf, n);
      sym.free();
      frames.free();
      stack?.free();
      regs.free();
    }
  }

  /**
   * Unwind one live thread: freeze it (attach), read its registers and a window of its stack
   * (and the maps, on request), resume it (detach), and only then unwind the copy: the thread
   * is held for the reads only. Memory the walk needs beyond the window is read from the running
   * process, and the frames that needed it are flagged DWUNW_FRAME_BEYOND_SNAPSHOT.
   * Never throws for the thread's own state: attach failures and exits are in the result.
   */
  async captureThread(pid: number, tid: number, opts: CaptureOptions = {}): Promise<ThreadCapture> {
    const lib = N.lib();
    const maxFrames = opts.maxFrames ?? DEFAULT_MAX_FRAMES;
    const result = (stop: number, extra: Partial<ThreadCapture> = {}): ThreadCapture => ({
      tid,
      frames: [],
      stop,
      stopName: lib.dwunw_errname(stop),
      stopText: lib.dwunw_strerror(stop),
      attached: true,
      exited: stop === N.DWUNW_ERR_NO_PROCESS,
      attachErrno: null,
      regs: null,
      stack: null,
      maps: null,
      vdso: null,
      python: null,
      ...extra,
    });

    const r = this.reader(pid);
    let regs: Registers;
    let stack: MemWindow | null = null;
    let maps: string | null = null;
    let vdso: Buffer | null = null;
    let python: PyStack | null = null;
    let exited = false;
    try {
      const rc = r.attach(tid);
      if (rc !== N.DWUNW_OK) return result(rc, { attached: false, attachErrno: r.lastErrno || null });
      try {
        regs = r.regs();
      } catch (e) {
        if (!(e instanceof DwunwError)) throw e;
        // Killed while stopped (regs: NO_PROCESS), or registers this build cannot read.
        const gone = r.detach() === N.DWUNW_ERR_NO_PROCESS || e.code === N.DWUNW_ERR_NO_PROCESS;
        return result(gone ? N.DWUNW_ERR_NO_PROCESS : e.code, { exited: gone });
      }
      const arch = Dwunw.arch(regs.arch);
      const sp = arch ? regs.regs.get(arch.sp_reg) : undefined;
      if (sp !== undefined) {
        const w = r.readWindow(sp, opts.stackSize ?? DEFAULT_STACK_SIZE);
        if (w === N.DWUNW_ERR_NO_PROCESS) exited = true;
        else if (typeof w === 'object') stack = w;
      }
      if (!exited) this.refreshMaps(pid);
      if (opts.readMaps && !exited) {
        try {
          maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
        } catch {
          maps = null;
        }
      }
      const vr = opts.readVdso && maps !== null ? vdsoRange(maps) : null;
      if (vr && vr[1] - vr[0] <= BigInt(MAX_VDSO_SIZE)) {
        // process_vm_readv, or /proc/PID/mem when that is refused (the reader falls back itself).
        const b = r.read(vr[0], Number(vr[1] - vr[0]));
        if (typeof b === 'object') vdso = b;
      }
      // the interpreter's frames, while the thread cannot change them
      if (opts.python && !exited) python = pythonStack(this.ctx, opts.python, tid);
      if (opts.holdMs && opts.holdMs > 0) await sleep(opts.holdMs);
      // A signal handler may have resumed it meanwhile (detachAll): then there is nothing to do.
      if (r.attached && r.detach() === N.DWUNW_ERR_NO_PROCESS) exited = true;
    } finally {
      r.close();
      this.readers.delete(r);
    }

    const u = this.unwind({ pid, tid, regs, stack }, maxFrames);
    // Killed while held: what was copied is unwound, but a walk cut short is reported as the exit.
    const stop = exited && u.stop !== N.DWUNW_OK ? N.DWUNW_ERR_NO_PROCESS : u.stop;
    return { ...result(stop, { regs, stack, maps, vdso, exited, python }), frames: u.frames };
  }

  /** Free everything (idempotent): resumes threads still held. Modules must be closed first. */
  close(): void {
    for (const r of this.readers) r.close();
    this.readers.clear();
    if (this.ctxMem === null) return;
    N.lib().dwunw_shutdown(this.ctxMem);
    N.freeCtx(this.ctxMem);
    this.ctxMem = null;
    for (const m of this.images.splice(0)) m.free();
    for (const p of this.pyRuntimes.splice(0)) p.mem.free();
    this.unregister();
  }
}
