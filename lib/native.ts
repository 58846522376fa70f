// The koffi binding of libdwunw (native/include/dwunw.h). Only declarations live here: the struct
// layouts (checked against the C header by test/abi-layout.test.ts) and the functions the CLI uses.
// The shared library is loaded lazily, so the types can be inspected without it.
import { existsSync } from 'node:fs';
import { endianness } from 'node:os';
import { join, resolve } from 'node:path';
import koffi from 'koffi';
import { CliError } from './errors.js';
import { setLibLoader } from './native-handle.js';
import { DWUNW_MAX_REGS, DWUNW_ROW_MAX_REGS } from './native-consts.js';
import { packageRoot } from './root.js';

// The constants of dwunw.h, without koffi (commands import them before the library is needed).
export * from './native-consts.js';

// ---- Types -----------------------------------------------------------------------------------
// Function-pointer members the CLI never sets are declared as plain pointers; the log sinks of
// dwunw_config and dwunw_stack_reader have their prototype (the CLI registers JS callbacks there).

export const ModuleT = koffi.opaque('dwunw_module');
export const PerfMapT = koffi.opaque('dwunw_perf_map');

export const PerfMapInfoT = koffi.struct('dwunw_perf_map_info', {
  entries: 'uint64_t',
  reads: 'uint64_t',
  path: koffi.array('char', 64, 'String'),
  rejected: koffi.array('char', 512, 'String'),
});

/** void (*)(void *arg, const char *line): the audit and warn sinks. */
export const LogFnT = koffi.proto('dwunw_log_fn', 'void', ['void *', 'const char *']);
export const LogFnP = koffi.pointer(LogFnT);

export const ModuleSourceT = koffi.struct('dwunw_module_source', {
  path: 'const char *',
  image: 'const void *',
  image_size: 'uint64_t',
});

export const ConfigT = koffi.struct('dwunw_config', {
  size: 'uint32_t',
  flags: 'uint32_t',
  cache_slots: 'uint32_t',
  max_frames: 'uint32_t',
  sysroot: 'const char *',
  debug_dirs: 'const char *',
  audit: LogFnP,
  audit_arg: 'void *',
  warn: LogFnP,
  warn_arg: 'void *',
  modules: koffi.pointer(ModuleSourceT),
  nmodules: 'uint32_t',
  pad: 'uint32_t',
  attach_timeout_ms: 'uint32_t',
  pad2: 'uint32_t',
  cache_bytes: 'uint64_t',
});

export const DebuginfodResultT = koffi.struct('dwunw_debuginfod_result', {
  state: 'int32_t',
  err: 'int32_t',
  build_id: koffi.array('char', 136, 'String'),
  why: koffi.array('char', 128, 'String'),
  module: koffi.array('char', 512, 'String'),
  file: koffi.array('char', 512, 'String'),
});

export const CtxT = koffi.struct('dwunw_ctx', {
  magic: 'uint32_t',
  version: 'uint32_t',
  impl: 'void *',
});

export const ArchOpsT = koffi.struct('dwunw_arch_ops', {
  name: 'const char *',
  arch: 'uint32_t',
  elf_machine: 'uint16_t',
  elf_class: 'uint8_t',
  addr_size: 'uint8_t',
  nregs: 'uint16_t',
  sp_reg: 'uint16_t',
  fp_reg: 'uint16_t',
  ra_reg: 'uint16_t',
  lr_reg: 'uint16_t',
  pc_reg: 'uint16_t',
  callee_saved: 'uint64_t',
  reg_name: 'void *',
  ra_to_pc: 'void *',
  sigframe: 'void *',
  fp_step: 'void *',
  lr_step: 'void *',
  stub_step: 'void *',
  regs_from_prstatus: 'void *',
  prologue_step: 'void *',
});

export const CacheStatsT = koffi.struct('dwunw_cache_stats', {
  hits: 'uint64_t',
  misses: 'uint64_t',
  evictions: 'uint64_t',
  slots: 'uint32_t',
  active: 'uint32_t',
  warm: 'uint32_t',
  pad: 'uint32_t',
  bytes: 'uint64_t',
  bytes_bound: 'uint64_t',
  bytes_evictions: 'uint64_t',
});

export const TableInfoT = koffi.struct('dwunw_table_info', {
  rows: 'uint64_t',
  rules: 'uint64_t',
  bytes: 'uint64_t',
  build_ns: 'uint64_t',
  fdes: 'uint64_t',
  fdes_dropped: 'uint64_t',
  sources: 'uint32_t',
  first_error: 'int32_t',
  first_error_offset: 'uint64_t',
  first_error_source: 'uint32_t',
  pad: 'uint32_t',
});

export const ModuleMemoryT = koffi.struct('dwunw_module_memory', {
  table: 'uint64_t',
  symbols: 'uint64_t',
  elf: 'uint64_t',
  file_size: 'uint64_t',
});

// The anonymous element struct of dwunw_row_text.regs[].
export const RowRegT = koffi.struct({
  reg: 'uint16_t',
  is_ra: 'uint16_t',
  name: koffi.array('char', 12, 'String'),
  rule: koffi.array('char', 28, 'String'),
});

export const RowTextT = koffi.struct('dwunw_row_text', {
  pc: 'uint64_t',
  end: 'uint64_t',
  cfa: koffi.array('char', 48, 'String'),
  nregs: 'uint32_t',
  flags: 'uint32_t',
  regs: koffi.array(RowRegT, DWUNW_ROW_MAX_REGS),
});

export const RegsT = koffi.struct('dwunw_regs', {
  arch: 'uint32_t',
  flags: 'uint32_t',
  pid: 'int32_t',
  tid: 'int32_t',
  pc: 'uint64_t',
  valid: 'uint64_t',
  regs: koffi.array('uint64_t', DWUNW_MAX_REGS),
  stack_start: 'uint64_t',
  stack: 'const void *',
  stack_size: 'uint64_t',
});

export const FrameT = koffi.struct('dwunw_frame', {
  pc: 'uint64_t',
  sp: 'uint64_t',
  cfa: 'uint64_t',
  module_addr: 'uint64_t',
  module: koffi.pointer(ModuleT),
  how: 'uint32_t',
  flags: 'uint32_t',
});

export const SymbolT = koffi.struct('dwunw_symbol', {
  name: koffi.array('char', 256, 'String'),
  offset: 'uint64_t',
  sym_addr: 'uint64_t',
  file: koffi.array('char', 256, 'String'),
  line: 'uint32_t',
  flags: 'uint32_t',
});

export const StackReaderT = koffi.struct('dwunw_stack_reader', {
  pid: 'int32_t',
  tid: 'int32_t',
  flags: 'uint32_t',
  last_errno: 'int32_t',
  audit: LogFnP,
  audit_arg: 'void *',
  warn: LogFnP,
  warn_arg: 'void *',
  reads: 'uint64_t',
  fallback_reads: 'uint64_t',
  attach_timeout_ms: 'uint32_t',
  pad: 'uint32_t',
});

// One mapping of a process (dwunw_maps_parse writes them into CMem; decoded with decodeAt).
export const MapT = koffi.struct('dwunw_map', {
  start: 'uint64_t',
  end: 'uint64_t',
  offset: 'uint64_t',
  inode: 'uint64_t',
  dev_major: 'uint32_t',
  dev_minor: 'uint32_t',
  flags: 'uint32_t',
  pad: 'uint32_t',
  path: 'const char *',
});

// Core files (dwunw_core_load). The thread and info structs are written by the library into
// CMem buffers and decoded with decodeAt.
export const CoreOptionsT = koffi.struct('dwunw_core_options', {
  size: 'uint32_t',
  flags: 'uint32_t',
  maps_text: 'const char *',
  maps_len: 'uint64_t',
  exe: 'const char *',
  pid: 'int32_t',
  pad: 'uint32_t',
});

export const CoreThreadT = koffi.struct('dwunw_core_thread', {
  tid: 'int32_t',
  signo: 'int32_t',
  regs: RegsT,
});

export const CoreInfoT = koffi.struct('dwunw_core_info', {
  arch: 'uint32_t',
  pid: 'int32_t',
  core_pid: 'int32_t',
  nthreads: 'uint32_t',
  flags: 'uint32_t',
  nmaps: 'uint32_t',
  nsegments: 'uint32_t',
  pad: 'uint32_t',
  comm: koffi.array('char', 32, 'String'),
  exe: koffi.array('char', 4096, 'String'),
});

// CPython frames (dwunw_py_find, dwunw_py_stack).
export const PyRuntimeT = koffi.struct('dwunw_py_runtime', {
  size: 'uint32_t',
  version: 'uint32_t',
  pid: 'int32_t',
  layout: 'uint32_t',
  runtime_addr: 'uint64_t',
  eval_lo: 'uint64_t',
  eval_hi: 'uint64_t',
  code_type: 'uint64_t',
  str_type: 'uint64_t',
  path: koffi.array('char', 256, 'String'),
  why: koffi.array('char', 160, 'String'),
});

export const PyFrameT = koffi.struct('dwunw_py_frame', {
  frame: 'uint64_t',
  code: 'uint64_t',
  line: 'int32_t',
  flags: 'uint32_t',
  name: koffi.array('char', 128, 'String'),
  file: koffi.array('char', 256, 'String'),
});

/** Every struct of the binding, keyed by its C name (the layout test walks this). */
export const STRUCTS = {
  dwunw_module_source: ModuleSourceT,
  dwunw_config: ConfigT,
  dwunw_ctx: CtxT,
  dwunw_arch_ops: ArchOpsT,
  dwunw_cache_stats: CacheStatsT,
  dwunw_table_info: TableInfoT,
  dwunw_module_memory: ModuleMemoryT,
  dwunw_row_text: RowTextT,
  dwunw_regs: RegsT,
  dwunw_frame: FrameT,
  dwunw_symbol: SymbolT,
  dwunw_stack_reader: StackReaderT,
  dwunw_map: MapT,
  dwunw_core_options: CoreOptionsT,
  dwunw_core_thread: CoreThreadT,
  dwunw_core_info: CoreInfoT,
  dwunw_py_runtime: PyRuntimeT,
  dwunw_py_frame: PyFrameT,
  dwunw_perf_map_info: PerfMapInfoT,
} as const;

/** Nested anonymous structs: C name of the container member, and its koffi type. */
export const NESTED = {
  'dwunw_row_text.regs[0]': RowRegT,
} as const;

// ---- JS shapes of the decoded structs ----------------------------------------------------------

export interface ArchOps {
  name: string;
  arch: number;
  elf_machine: number;
  elf_class: number;
  addr_size: number;
  nregs: number;
  sp_reg: number;
  fp_reg: number;
  ra_reg: number;
  lr_reg: number;
  pc_reg: number;
}

export interface RawTableInfo {
  rows: number | bigint;
  rules: number | bigint;
  bytes: number | bigint;
  build_ns: number | bigint;
  fdes: number | bigint;
  fdes_dropped: number | bigint;
  sources: number;
  first_error: number;
  first_error_offset: number | bigint;
  first_error_source: number;
}

export interface RawCacheStats {
  hits: number | bigint;
  misses: number | bigint;
  evictions: number | bigint;
  slots: number;
  active: number;
  warm: number;
  bytes: number | bigint;
  bytes_bound: number | bigint;
  bytes_evictions: number | bigint;
}

export interface RawSymbol {
  name: string;
  offset: number | bigint;
  sym_addr: number | bigint;
  file: string;
  line: number;
  flags: number;
}

export interface RawCoreInfo {
  arch: number;
  pid: number;
  core_pid: number;
  nthreads: number;
  flags: number;
  nmaps: number;
  nsegments: number;
  comm: string;
  exe: string;
}

/** An opaque C pointer as koffi hands it out. */
export type Pointer = unknown;

/** A registered JS callback (koffi.register), usable as a C function pointer. */
export type Callback = unknown;

export interface Lib {
  path: string;
  dwunw_version(): string;
  dwunw_strerror(err: number): string;
  dwunw_errname(err: number): string;
  /** An fd (>= 0) or a DWUNW_ERR_*; why receives the line naming a refused file. */
  dwunw_pid_file_open(pid: number, path: string, why: Buffer, whylen: number): number;
  dwunw_origin_name(origin: number): string | null;
  dwunw_how_origin(how: number): number;
  dwunw_origin_mark(origin: number): number;
  dwunw_mark_name(mark: number): string | null;
  dwunw_mark_legend(mark: number): string | null;
  dwunw_perf_map_open(pid: number, out: Pointer[]): number;
  dwunw_perf_map_read_on(map: Pointer): number;
  dwunw_perf_map_find(map: Pointer, addr: bigint, name: (string | null)[], start: (number | bigint)[]): number;
  dwunw_perf_map_info(map: Pointer, out: Record<string, unknown>): number;
  dwunw_perf_map_free(map: Pointer): void;
  dwunw_debuginfod_wait(ctx: Pointer, timeoutMs: number): number;
  dwunw_debuginfod_result(ctx: Pointer, i: number, out: Record<string, unknown>): number;
  dwunw_init(ctx: Pointer, cfg: Record<string, unknown>): number;
  dwunw_shutdown(ctx: Pointer): void;
  dwunw_module_open(ctx: Pointer, path: string, out: Pointer[]): number;
  /** `image` must stay valid (and unmoved: CMem) until dwunw_shutdown. */
  dwunw_module_open_image(ctx: Pointer, name: string, image: Buffer, size: number, out: Pointer[]): number;
  dwunw_memory_add(ctx: Pointer, pid: number, addr: bigint, data: Buffer, len: number): number;
  dwunw_module_put(ctx: Pointer, mod: Pointer): void;
  dwunw_module_path(mod: Pointer): string | null;
  dwunw_module_build_id(mod: Pointer, buf: Buffer, buflen: number): number;
  dwunw_module_arch(mod: Pointer): Pointer | null;
  dwunw_table_info(ctx: Pointer, mod: Pointer, out: Record<string, unknown>): number;
  dwunw_table_row(ctx: Pointer, mod: Pointer, index: number | bigint, out: Buffer): number;
  dwunw_table_lookup(ctx: Pointer, mod: Pointer, addr: number | bigint): number | bigint;
  dwunw_table_dump(ctx: Pointer, mod: Pointer, format: number, row: [number | bigint], buf: Buffer, len: number): number | bigint;
  dwunw_module_memory(ctx: Pointer, mod: Pointer, out: Record<string, unknown>): number;
  dwunw_cache_stats(ctx: Pointer, out: Record<string, unknown>): number;
  dwunw_arch_get(arch: number): Pointer | null;
  // The struct arguments below are Buffers over CMem (memory that does not move): see CMem.
  dwunw_capture(ctx: Pointer, regs: Buffer, frames: Buffer, frameCnt: [number | bigint]): number;
  dwunw_module_cache_release(ctx: Pointer, frames: Buffer, frameCnt: number): number;
  dwunw_symbolize_frame(ctx: Pointer, frame: Buffer, out: Buffer): number;
  dwunw_symbolize(ctx: Pointer, mod: Pointer, addr: bigint, out: Buffer): number;
  dwunw_maps_set(ctx: Pointer, pid: number, text: Buffer, len: number): number;
  /** text and out: Buffers over CMem (the parser writes paths' ends into text). */
  dwunw_maps_parse(text: Buffer, len: number, out: Buffer | null, n: [number | bigint]): number;
  dwunw_maps_refresh(ctx: Pointer, pid: number): number;
  dwunw_maps_forget(ctx: Pointer, pid: number): void;
  /** threads and info: Buffers over CMem (dwunw_core_thread[n], dwunw_core_info). */
  dwunw_core_load(
    ctx: Pointer,
    path: string,
    opts: Record<string, unknown> | null,
    threads: Buffer | null,
    nthreads: [number | bigint],
    info: Buffer,
  ): number;
  dwunw_stack_reader_init(r: Buffer, pid: number, cfg: Record<string, unknown> | null): number;
  dwunw_stack_reader_attach(r: Buffer, tid: number): number;
  dwunw_stack_reader_read(r: Buffer, addr: bigint, buf: Buffer, len: number): number;
  dwunw_stack_reader_regs(r: Buffer, out: Buffer): number;
  dwunw_stack_reader_detach(r: Buffer): number;
  /** rt: a Buffer over CMem (struct dwunw_py_runtime), size set. */
  dwunw_py_find(ctx: Pointer, pid: number, rt: Buffer): number;
  dwunw_py_stack(ctx: Pointer, rt: Buffer, tid: number, frames: Buffer, n: [number | bigint]): number;
}

// ---- Loading -----------------------------------------------------------------------------------

export { packageRoot };

/** Where the shared library is: $DWUNW_LIB, else build/libdwunw.so in the package root. */
export function libraryPath(): string {
  const env = process.env.DWUNW_LIB;
  if (env) return resolve(env);
  return join(packageRoot(), 'build', 'libdwunw.so');
}

let loaded: Lib | undefined;

/** Load libdwunw.so once; throws an Error naming the path when it cannot. */
export function lib(): Lib {
  if (loaded) return loaded;
  const path = libraryPath();
  let so: koffi.IKoffiLib;
  try {
    so = koffi.load(path);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new CliError('libdwunw', `cannot load ${path}: ${existsSync(path) ? why : 'no such file (run make)'}`);
  }
  const ctxP = koffi.pointer(CtxT);
  const modP = koffi.pointer(ModuleT);
  const f = (ret: koffi.TypeSpec, name: string, args: koffi.TypeSpec[]) => so.func(name, ret, args);
  const b = {
    path,
    dwunw_version: f('const char *', 'dwunw_version', []),
    dwunw_strerror: f('const char *', 'dwunw_strerror', ['int']),
    dwunw_errname: f('const char *', 'dwunw_errname', ['int']),
    dwunw_pid_file_open: f('int', 'dwunw_pid_file_open', ['int32_t', 'const char *', 'char *', 'size_t']),
    dwunw_origin_name: f('const char *', 'dwunw_origin_name', ['uint32_t']),
    dwunw_how_origin: f('uint32_t', 'dwunw_how_origin', ['uint32_t']),
    dwunw_origin_mark: f('int', 'dwunw_origin_mark', ['uint32_t']),
    dwunw_mark_name: f('const char *', 'dwunw_mark_name', ['uint32_t']),
    dwunw_mark_legend: f('const char *', 'dwunw_mark_legend', ['uint32_t']),
    dwunw_perf_map_open: f('int', 'dwunw_perf_map_open', ['int32_t', koffi.out(koffi.pointer(koffi.pointer(PerfMapT)))]),
    dwunw_perf_map_read_on: f('int', 'dwunw_perf_map_read_on', [koffi.pointer(PerfMapT)]),
    dwunw_perf_map_find: f('int', 'dwunw_perf_map_find', [
      koffi.pointer(PerfMapT),
      'uint64_t',
      koffi.out(koffi.pointer('const char *')),
      koffi.out(koffi.pointer('uint64_t')),
    ]),
    dwunw_perf_map_info: f('int', 'dwunw_perf_map_info', [koffi.pointer(PerfMapT), koffi.out(koffi.pointer(PerfMapInfoT))]),
    dwunw_perf_map_free: f('void', 'dwunw_perf_map_free', [koffi.pointer(PerfMapT)]),
    dwunw_init: f('int', 'dwunw_init', [ctxP, koffi.pointer(ConfigT)]),
    dwunw_debuginfod_wait: f('int', 'dwunw_debuginfod_wait', [ctxP, 'uint32_t']),
    dwunw_debuginfod_result: f('int', 'dwunw_debuginfod_result', [ctxP, 'uint32_t', koffi.out(koffi.pointer(DebuginfodResultT))]),
    dwunw_shutdown: f('void', 'dwunw_shutdown', [ctxP]),
    dwunw_module_open: f('int', 'dwunw_module_open', [ctxP, 'const char *', koffi.out(koffi.pointer(modP))]),
    dwunw_memory_add: f('int', 'dwunw_memory_add', [ctxP, 'int32_t', 'uint64_t', 'const void *', 'uint64_t']),
    dwunw_module_open_image: f('int', 'dwunw_module_open_image', [
      ctxP,
      'const char *',
      'const void *',
      'size_t',
      koffi.out(koffi.pointer(modP)),
    ]),
    dwunw_module_put: f('void', 'dwunw_module_put', [ctxP, modP]),
    dwunw_module_path: f('const char *', 'dwunw_module_path', [modP]),
    dwunw_module_build_id: f('int', 'dwunw_module_build_id', [modP, 'char *', 'size_t']),
    dwunw_module_arch: f(koffi.pointer(ArchOpsT), 'dwunw_module_arch', [modP]),
    dwunw_table_info: f('int', 'dwunw_table_info', [ctxP, modP, koffi.out(koffi.pointer(TableInfoT))]),
    // Called with a Buffer of sizeof(struct dwunw_row_text): the library writes into it directly.
    dwunw_table_row: f('int', 'dwunw_table_row', [ctxP, modP, 'uint64_t', koffi.pointer(RowTextT)]),
    dwunw_table_lookup: f('int64_t', 'dwunw_table_lookup', [ctxP, modP, 'uint64_t']),
    dwunw_table_dump: f('int64_t', 'dwunw_table_dump', [
      ctxP,
      modP,
      'uint32_t',
      koffi.inout(koffi.pointer('uint64_t')),
      'char *',
      'uint64_t',
    ]),
    dwunw_module_memory: f('int', 'dwunw_module_memory', [ctxP, modP, koffi.out(koffi.pointer(ModuleMemoryT))]),
    dwunw_cache_stats: f('int', 'dwunw_cache_stats', [ctxP, koffi.out(koffi.pointer(CacheStatsT))]),
    dwunw_arch_get: f(koffi.pointer(ArchOpsT), 'dwunw_arch_get', ['int']),
    dwunw_capture: f('int', 'dwunw_capture', [
      ctxP,
      koffi.pointer(RegsT),
      koffi.pointer(FrameT),
      koffi.inout(koffi.pointer('size_t')),
    ]),
    dwunw_module_cache_release: f('int', 'dwunw_module_cache_release', [ctxP, koffi.pointer(FrameT), 'size_t']),
    dwunw_symbolize_frame: f('int', 'dwunw_symbolize_frame', [ctxP, koffi.pointer(FrameT), koffi.pointer(SymbolT)]),
    dwunw_symbolize: f('int', 'dwunw_symbolize', [ctxP, modP, 'uint64_t', koffi.pointer(SymbolT)]),
    dwunw_maps_set: f('int', 'dwunw_maps_set', [ctxP, 'int32_t', 'const char *', 'size_t']),
    dwunw_maps_parse: f('int', 'dwunw_maps_parse', [
      'char *',
      'size_t',
      koffi.pointer(MapT),
      koffi.inout(koffi.pointer('size_t')),
    ]),
    dwunw_maps_refresh: f('int', 'dwunw_maps_refresh', [ctxP, 'int32_t']),
    dwunw_maps_forget: f('void', 'dwunw_maps_forget', [ctxP, 'int32_t']),
    dwunw_core_load: f('int', 'dwunw_core_load', [
      ctxP,
      'const char *',
      koffi.pointer(CoreOptionsT),
      koffi.pointer(CoreThreadT),
      koffi.inout(koffi.pointer('size_t')),
      koffi.pointer(CoreInfoT),
    ]),
    dwunw_stack_reader_init: f('int', 'dwunw_stack_reader_init', [
      koffi.pointer(StackReaderT),
      'int32_t',
      koffi.pointer(ConfigT),
    ]),
    dwunw_stack_reader_attach: f('int', 'dwunw_stack_reader_attach', [koffi.pointer(StackReaderT), 'int32_t']),
    dwunw_stack_reader_read: f('int', 'dwunw_stack_reader_read', [
      koffi.pointer(StackReaderT),
      'uint64_t',
      'void *',
      'size_t',
    ]),
    dwunw_stack_reader_regs: f('int', 'dwunw_stack_reader_regs', [koffi.pointer(StackReaderT), koffi.pointer(RegsT)]),
    dwunw_stack_reader_detach: f('int', 'dwunw_stack_reader_detach', [koffi.pointer(StackReaderT)]),
    dwunw_py_find: f('int', 'dwunw_py_find', [ctxP, 'int32_t', 'void *']),
    dwunw_py_stack: f('int', 'dwunw_py_stack', [ctxP, 'void *', 'int32_t', 'void *', koffi.inout(koffi.pointer('size_t'))]),
  };
  loaded = b as unknown as Lib;
  return loaded;
}

// lib/marks.ts and lib/origin.ts load the library through this when they are first used
setLibLoader(lib);

// ---- Raw memory helpers --------------------------------------------------------------------------

/** Caller-allocated struct dwunw_ctx at a stable address (the library may keep pointers to it). */
export function allocCtx(): Pointer {
  return koffi.alloc(CtxT, 1);
}

export function freeCtx(p: Pointer): void {
  koffi.free(p);
}

export function decodeArchOps(p: Pointer): ArchOps {
  return koffi.decode(p, ArchOpsT) as ArchOps;
}

/**
 * C memory that never moves (koffi.alloc), seen from JS as a Buffer over the same bytes. Structs
 * the library writes, and buffers whose address is stored in another struct (dwunw_regs.stack),
 * live here: a JS Buffer may be moved by the garbage collector, which can run inside a call when
 * the library invokes a JS callback (audit, warn). Free it explicitly.
 */
export class CMem {
  private ptr: Pointer | null;
  /** The bytes, aliased (writes are seen by C and vice versa); invalid after free(). */
  readonly buf: Buffer;

  constructor(readonly size: number) {
    this.ptr = koffi.alloc('uint8_t', Math.max(size, 1));
    this.buf = Buffer.from(koffi.view(this.ptr, Math.max(size, 1)), 0, size);
    this.buf.fill(0);
  }

  /** The address, for a pointer member of another struct. */
  get address(): bigint {
    if (this.ptr === null) throw new Error('CMem used after free');
    return koffi.address(this.ptr);
  }

  free(): void {
    if (this.ptr === null) return;
    koffi.free(this.ptr);
    this.ptr = null;
  }
}

/** Store a pointer (an address) into a struct held in a Buffer, at the host's pointer size. */
export function writePointer(buf: Buffer, offset: number, address: bigint): void {
  const le = endianness() === 'LE';
  if (koffi.sizeof('void *') === 8) {
    if (le) buf.writeBigUInt64LE(address, offset);
    else buf.writeBigUInt64BE(address, offset);
  } else if (le) buf.writeUInt32LE(Number(address), offset);
  else buf.writeUInt32BE(Number(address), offset);
}

/** Decode a struct from a Buffer at an offset (pointer members come back as koffi externals). */
export function decodeAt(buf: Buffer, offset: number, type: koffi.TypeSpec): Record<string, unknown> {
  return koffi.decode(buf, offset, type) as Record<string, unknown>;
}

/** Encode a struct into a Buffer at an offset (the inverse of decodeAt). */
export function encodeAt(buf: Buffer, offset: number, type: koffi.TypeSpec, value: Record<string, unknown>): void {
  koffi.encode(buf, offset, type, value);
}

/** Register a JS function as a C log sink (void (*)(void *arg, const char *line)). */
export function registerLogFn(fn: (line: string) => void): Callback {
  return koffi.register((_arg: unknown, line: string | null) => fn(line ?? ''), LogFnP);
}

export function unregisterCallback(cb: Callback): void {
  koffi.unregister(cb as koffi.IKoffiRegisteredCallback);
}

export const sizeOf = (t: koffi.TypeSpec): number => koffi.sizeof(t);
export const offsetOf = (t: koffi.TypeSpec, member: string): number => koffi.offsetof(t, member);
