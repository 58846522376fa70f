// The constants of libdwunw's header (native/include/dwunw.h): plain numbers, loadable without
// koffi or the library (lib/native.ts re-exports them beside the binding).

export const DWUNW_OK = 0;
export const DWUNW_ERR_NO_DWARF = -1;
export const DWUNW_ERR_UNSUPPORTED_ARCH = -2;
export const DWUNW_ERR_NOMEM = -3;
export const DWUNW_ERR_CORRUPT = -4;
export const DWUNW_ERR_IO = -5;
export const DWUNW_ERR_INVALID_ARG = -6;
export const DWUNW_ERR_CACHE_FULL = -7;
export const DWUNW_ERR_PERM = -8;
export const DWUNW_ERR_NO_MODULE = -9;
export const DWUNW_ERR_UNSUPPORTED_CFI = -10;
export const DWUNW_ERR_NOT_FOUND = -11;
export const DWUNW_ERR_NOT_ELF = -12;
export const DWUNW_ERR_NO_PROGRESS = -13;
export const DWUNW_ERR_DEPTH = -14;
export const DWUNW_ERR_EXPR = -15;
export const DWUNW_ERR_NO_PROCESS = -16;
export const DWUNW_ERR_UNSUPPORTED = -17;
export const DWUNW_ERR_PROLOGUE = -18;
export const DWUNW_ERR_LIVE_END = -19;
export const DWUNW_ERR_STALE = -20;
export const DWUNW_ERR_WOULDBLOCK = -21;

// struct dwunw_map flags
export const DWUNW_MAP_R = 1 << 0;
export const DWUNW_MAP_W = 1 << 1;
export const DWUNW_MAP_X = 1 << 2;
export const DWUNW_MAP_SHARED = 1 << 3;
export const DWUNW_MAP_DELETED = 1 << 4;

export const DWUNW_ARCH_UNKNOWN = 0;
export const DWUNW_ARCH_X86_64 = 1;
export const DWUNW_ARCH_ARM64 = 2;
export const DWUNW_ARCH_MIPS32 = 3;

export const DWUNW_MAX_REGS = 64;
export const DWUNW_REGS_PC_IS_RETADDR = 1 << 0;
export const DWUNW_REGS_NOWAIT = 1 << 1;

export const DWUNW_CFG_NO_FP_FALLBACK = 1 << 0;
export const DWUNW_CFG_NO_REMOTE_READS = 1 << 1;
export const DWUNW_CFG_NO_DEBUG_FILES = 1 << 2;
export const DWUNW_CFG_DEBUGINFOD = 1 << 3;

// The warn line of a module file that cannot be loaded: PRE path MID reason POST (lib/warnings.ts)
export const DWUNW_WARN_NO_MODULE_PRE = 'dwunw: ';
export const DWUNW_WARN_NO_MODULE_MID = ': cannot load the module (';
export const DWUNW_WARN_NO_MODULE_POST = '): its frames cannot be unwound';

export const DWUNW_DEBUGINFOD_PENDING = 0;
export const DWUNW_DEBUGINFOD_LOCAL = 1;
export const DWUNW_DEBUGINFOD_FETCHED = 2;
export const DWUNW_DEBUGINFOD_FAILED = 3;

export const DWUNW_HOW_INITIAL = 0;
export const DWUNW_HOW_CFI = 1;
export const DWUNW_HOW_SIGNAL = 2;
export const DWUNW_HOW_FP = 3;
export const DWUNW_HOW_LR = 4;
export const DWUNW_HOW_PROLOGUE = 5;

export const DWUNW_FRAME_BEYOND_SNAPSHOT = 1 << 0;
export const DWUNW_FRAME_EXACT_PC = 1 << 1;
export const DWUNW_FRAME_JIT = 1 << 2;
export const DWUNW_FRAME_VDSO = 1 << 3;
export const DWUNW_FRAME_HOLDS_REF = 1 << 4;
export const DWUNW_FRAME_UPROBE_TRAMP = 1 << 5;
export const DWUNW_FRAME_SIGTRAMP = 1 << 6;

export const DWUNW_SYM_FROM_DEBUG_FILE = 1 << 0;
export const DWUNW_SYM_FROM_DEBUGDATA = 1 << 1;
export const DWUNW_SYM_DYNSYM = 1 << 2;
export const DWUNW_SYM_PLT = 1 << 3;

export const DWUNW_READER_ATTACHED = 1 << 0;
export const DWUNW_READER_NO_VM_READV = 1 << 1;
export const DWUNW_READER_NOT_DUMPABLE = 1 << 2;

export const DWUNW_TABLE_SRC_EH_FRAME = 1 << 0;
export const DWUNW_TABLE_SRC_DEBUG_FRAME = 1 << 1;

export const DWUNW_ROW_SIGNAL = 1 << 0;
export const DWUNW_DUMP_TEXT = 0;
export const DWUNW_DUMP_JSON = 1;
export const DWUNW_DUMP_COLOR = 2;
export const DWUNW_ROW_RA_SIGNED = 1 << 1;

export const DWUNW_ROW_MAX_REGS = 48;

export const DWUNW_CORE_NT_FILE = 1 << 0;
export const DWUNW_CORE_TRUNCATED = 1 << 1;
export const DWUNW_CORE_VDSO = 1 << 2;
export const DWUNW_CORE_EXE = 1 << 3;

// dwunw_py_frame.flags
export const DWUNW_PY_ENTRY = 1 << 0;
export const DWUNW_PY_NO_LINE = 1 << 1;
export const DWUNW_PY_TRUNCATED = 1 << 2;
export const DWUNW_PY_GENERATOR = 1 << 3;
