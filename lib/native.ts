// The koffi binding of libdwunw (native/include/dwunw.h). Only declarations live here: the struct
// layouts (checked against the C header by test/abi-layout.test.ts) and the functions the CLI uses.
// The shared library is loaded lazily, so the types can be inspected without it.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { CliError } from './errors.js';

// ---- Constants of dwunw.h ------------------------------------------------------------------

export const DWUNW_OK = 0;
export const DWUNW_ERR_NO_DWARF = -1;
export const DWUNW_ERR_UNSUPPORTED_ARCH = -2;
export const DWUNW_ERR_NOMEM = -3;
export const DWUNW_ERR_CORRUPT = -4;
export const DWUNW_ERR_IO = -5;
export const DWUNW_ERR_INVALID_ARG = -6;
export const DWUNW_ERR_NOT_FOUND = -11;
export const DWUNW_ERR_NOT_ELF = -12;

export const DWUNW_TABLE_SRC_EH_FRAME = 1 << 0;
export const DWUNW_TABLE_SRC_DEBUG_FRAME = 1 << 1;

export const DWUNW_ROW_SIGNAL = 1 << 0;
export const DWUNW_ROW_RA_SIGNED = 1 << 1;

export const DWUNW_ROW_MAX_REGS = 48;

// ---- Types -----------------------------------------------------------------------------------
// Function-pointer members are declared as plain pointers: the CLI never calls them and passes NULL.

export const ModuleT = koffi.opaque('dwunw_module');

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
  audit: 'void *',
  audit_arg: 'void *',
  warn: 'void *',
  warn_arg: 'void *',
  modules: koffi.pointer(ModuleSourceT),
  nmodules: 'uint32_t',
  pad: 'uint32_t',
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
  regs_from_prstatus: 'void *',
});

export const CacheStatsT = koffi.struct('dwunw_cache_stats', {
  hits: 'uint64_t',
  misses: 'uint64_t',
  evictions: 'uint64_t',
  slots: 'uint32_t',
  active: 'uint32_t',
  warm: 'uint32_t',
  pad: 'uint32_t',
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

/** Every struct of the binding, keyed by its C name (the layout test walks this). */
export const STRUCTS = {
  dwunw_module_source: ModuleSourceT,
  dwunw_config: ConfigT,
  dwunw_ctx: CtxT,
  dwunw_arch_ops: ArchOpsT,
  dwunw_cache_stats: CacheStatsT,
  dwunw_table_info: TableInfoT,
  dwunw_row_text: RowTextT,
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
}

/** An opaque C pointer as koffi hands it out. */
export type Pointer = unknown;

export interface Lib {
  path: string;
  dwunw_version(): string;
  dwunw_strerror(err: number): string;
  dwunw_errname(err: number): string;
  dwunw_init(ctx: Pointer, cfg: Record<string, unknown>): number;
  dwunw_shutdown(ctx: Pointer): void;
  dwunw_module_open(ctx: Pointer, path: string, out: Pointer[]): number;
  dwunw_module_put(ctx: Pointer, mod: Pointer): void;
  dwunw_module_path(mod: Pointer): string | null;
  dwunw_module_build_id(mod: Pointer, buf: Buffer, buflen: number): number;
  dwunw_module_arch(mod: Pointer): Pointer | null;
  dwunw_table_info(ctx: Pointer, mod: Pointer, out: Record<string, unknown>): number;
  dwunw_table_row(ctx: Pointer, mod: Pointer, index: number | bigint, out: Buffer): number;
  dwunw_table_lookup(ctx: Pointer, mod: Pointer, addr: number | bigint): number | bigint;
  dwunw_cache_stats(ctx: Pointer, out: Record<string, unknown>): number;
}

// ---- Loading -----------------------------------------------------------------------------------

/** The package root: the nearest directory above this file whose package.json names "dwunw". */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'dwunw') return dir;
      } catch {
        // not ours: keep looking
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the dwunw package root');
    dir = up;
  }
}

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
    dwunw_init: f('int', 'dwunw_init', [ctxP, koffi.pointer(ConfigT)]),
    dwunw_shutdown: f('void', 'dwunw_shutdown', [ctxP]),
    dwunw_module_open: f('int', 'dwunw_module_open', [ctxP, 'const char *', koffi.out(koffi.pointer(modP))]),
    dwunw_module_put: f('void', 'dwunw_module_put', [ctxP, modP]),
    dwunw_module_path: f('const char *', 'dwunw_module_path', [modP]),
    dwunw_module_build_id: f('int', 'dwunw_module_build_id', [modP, 'char *', 'size_t']),
    dwunw_module_arch: f(koffi.pointer(ArchOpsT), 'dwunw_module_arch', [modP]),
    dwunw_table_info: f('int', 'dwunw_table_info', [ctxP, modP, koffi.out(koffi.pointer(TableInfoT))]),
    // Called with a Buffer of sizeof(struct dwunw_row_text): the library writes into it directly.
    dwunw_table_row: f('int', 'dwunw_table_row', [ctxP, modP, 'uint64_t', koffi.pointer(RowTextT)]),
    dwunw_table_lookup: f('int64_t', 'dwunw_table_lookup', [ctxP, modP, 'uint64_t']),
    dwunw_cache_stats: f('int', 'dwunw_cache_stats', [ctxP, koffi.out(koffi.pointer(CacheStatsT))]),
  };
  loaded = b as unknown as Lib;
  return loaded;
}

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

export const sizeOf = (t: koffi.TypeSpec): number => koffi.sizeof(t);
export const offsetOf = (t: koffi.TypeSpec, member: string): number => koffi.offsetof(t, member);
