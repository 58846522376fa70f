/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libdwunw: DWARF call-frame unwinding of user stacks captured by eBPF tools.
 *
 * The data path: capture (registers + a window of the stack, from a BPF record or a frozen thread)
 * -> module (the ELF mapped at the pc, from the module cache) -> table row (compiled once from
 * .eh_frame/.debug_frame) -> step (recover the caller's registers) -> frame -> symbol.
 *
 * Versioning: the ABI is that of DWUNW_VERSION_MAJOR. Structures the caller allocates and the
 * library reads (struct dwunw_config) start with a size field, so they can grow at the end.
 * Every call returns DWUNW_OK (0) or a negative DWUNW_ERR_* code; dwunw_strerror() names it.
 *
 * What may block ("I/O": file reads or /proc; "lock": waits for the context's lock, which a
 * module load holds while it opens and reads the file):
 *  - never: dwunw_version, dwunw_strerror, dwunw_errname, dwunw_arch_*, dwunw_module_path,
 *    _build_id, _arch, dwunw_module_memory, dwunw_module_cache_release, dwunw_module_put,
 *    dwunw_stack_reader_init;
 *    dwunw_capture(_sampled) with DWUNW_REGS_NOWAIT (no file I/O, no context lock: what is not
 *    loaded yet gives DWUNW_ERR_WOULDBLOCK; it still reads the target's memory beyond the
 *    snapshot with process_vm_readv, a system call, unless DWUNW_CFG_NO_REMOTE_READS, and may
 *    wait while another thread compiles the same block of a big module's table, in memory);
 *  - I/O and lock: dwunw_init (preloaded modules), dwunw_capture(_sampled) without NOWAIT (the
 *    maps of a new pid, each module's first load, its table, symbols for the prologue
 *    analyser, /proc/PID/mem when process_vm_readv is refused), dwunw_load_for,
 *    dwunw_module_open*, dwunw_maps_refresh, dwunw_core_load;
 *  - I/O and the module's own lock: dwunw_table_*, dwunw_symbolize* and dwunw_source_line (the
 *    table, the symbol index and debug files, the line table, built on a module's first use;
 *    after such a build, the context's lock once, to count the cache's bytes);
 *  - lock, no I/O: dwunw_maps_set, _pin, _forget, dwunw_memory_add, dwunw_cache_stats,
 *    dwunw_cache_trim, dwunw_shutdown;
 *  - ptrace waits: dwunw_stack_reader_attach (up to attach_timeout_ms), _detach.
 */
#ifndef DWUNW_H
#define DWUNW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DWUNW_VERSION_MAJOR 0
#define DWUNW_VERSION_MINOR 1
#define DWUNW_VERSION_PATCH 0
#define DWUNW_VERSION_NUMBER \
	((DWUNW_VERSION_MAJOR << 16) | (DWUNW_VERSION_MINOR << 8) | DWUNW_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
const char *dwunw_version(void);

/* ---- Error codes ------------------------------------------------------------------------ */

#define DWUNW_OK                    0
#define DWUNW_ERR_NO_DWARF         -1  /* no call-frame information (for the module, or for the pc) */
#define DWUNW_ERR_UNSUPPORTED_ARCH -2  /* ELF machine or register set this build cannot unwind */
#define DWUNW_ERR_NOMEM            -3  /* out of memory */
#define DWUNW_ERR_CORRUPT          -4  /* malformed ELF or DWARF data (truncated, out of bounds, bad value) */
#define DWUNW_ERR_IO               -5  /* a read failed (file, or target memory) */
#define DWUNW_ERR_INVALID_ARG      -6  /* bad argument, or an address outside what can be read */
#define DWUNW_ERR_CACHE_FULL       -7  /* every module-cache slot is active */
#define DWUNW_ERR_PERM             -8  /* not allowed (ptrace, process_vm_readv, /proc/PID/mem, file) */
#define DWUNW_ERR_NO_MODULE        -9  /* no module is mapped at the pc */
#define DWUNW_ERR_UNSUPPORTED_CFI  -10 /* valid CFI that this library does not evaluate */
#define DWUNW_ERR_NOT_FOUND        -11 /* no such file, process or thread */
#define DWUNW_ERR_NOT_ELF          -12 /* the file is not an ELF file */
#define DWUNW_ERR_NO_PROGRESS      -13 /* the walk stopped: the stack pointer did not move outward */
#define DWUNW_ERR_DEPTH            -14 /* the walk stopped: the frame buffer or max_frames is full */
#define DWUNW_ERR_EXPR             -15 /* a DWARF expression failed (stack under/overflow, loop, bad op) */
#define DWUNW_ERR_NO_PROCESS       -16 /* the target process or thread exited */
#define DWUNW_ERR_UNSUPPORTED      -17 /* a feature this build does not provide */
#define DWUNW_ERR_PROLOGUE         -18 /* no CFI, and code the prologue analyser does not understand */
#define DWUNW_ERR_LIVE_END         -19 /* the walk stopped: a return address read from the live process
                                        * after the event is zero; that memory may have changed since,
                                        * so this is not taken as the outermost frame */
#define DWUNW_ERR_STALE            -20 /* the walk stopped: stack memory above the snapshot, read from the
                                        * live process, changed since the event: it differs from what was
                                        * sampled then (dwunw_capture_sampled), or a return address read
                                        * there points into no mapping (that frame is not returned) */
#define DWUNW_ERR_WOULDBLOCK       -21 /* DWUNW_REGS_NOWAIT: the walk needs something not loaded yet
                                        * (maps, module, table, symbols) or a busy lock; the caller
                                        * loads it with dwunw_load_for and tries again */
#define DWUNW_ERR_MIN              -21

/* One line naming the error ("no call-frame information", ...). Never NULL. */
const char *dwunw_strerror(int err);
/* The code's short name without prefix ("NO_DWARF", "OK", ...), for machine-readable output. */
const char *dwunw_errname(int err);

/* ---- Files named after a process --------------------------------------------------------- */

/*
 * Open a file that a process writes under its pid in a shared directory (/tmp/perf-PID.map), so
 * that nobody else can plant it: it must be a regular file, not a symbolic link, owned by root or
 * by pid's real or effective user. Returns an fd open for reading (close it), DWUNW_ERR_NOT_FOUND
 * when there is no such file, or DWUNW_ERR_PERM / _IO with one line naming the file and why it is
 * not used in `why` (may be NULL).
 */
int dwunw_pid_file_open(int32_t pid, const char *path, char *why, size_t whylen);

/*
 * JIT symbols from a process's perf map, /tmp/perf-PID.map ("START SIZE name" per line, hex: what
 * node --perf-basic-prof or perf-map-agent write for perf), the one parser the tools and the CLI
 * share. The file is looked for in the process's own /tmp (/proc/PID/root/tmp) first, and opened
 * by dwunw_pid_file_open's rule; a refused file is named in info.rejected. Needs no context; one
 * map is not for concurrent use. File I/O in _open and _read_on only.
 *
 *  - dwunw_perf_map_open: reads the file as it is now (no file is not an error: an empty map).
 *  - dwunw_perf_map_read_on: reads the lines appended since (the runtime names code as it
 *    compiles it; a line still being written is left for the next read; a new or shorter file is
 *    read from the start). Returns the entries added (>= 0) or a DWUNW_ERR_*.
 *  - dwunw_perf_map_find: the name covering addr (the latest line wins where code was re-JITed at
 *    the same address), valid until the next _read_on or _free; DWUNW_ERR_NOT_FOUND.
 */
struct dwunw_perf_map;
struct dwunw_perf_map_info {
	uint64_t entries;           /* entries known now */
	uint64_t reads;             /* times the file was read or read on */
	char path[64];              /* the file read, "" when there is none */
	char rejected[512];         /* the line naming a file found but refused, "" when none */
};
int dwunw_perf_map_open(int32_t pid, struct dwunw_perf_map **out);
int dwunw_perf_map_read_on(struct dwunw_perf_map *map);
int dwunw_perf_map_find(const struct dwunw_perf_map *map, uint64_t addr, const char **name, uint64_t *start);
int dwunw_perf_map_info(const struct dwunw_perf_map *map, struct dwunw_perf_map_info *out);
void dwunw_perf_map_free(struct dwunw_perf_map *map);

/* ---- Architectures ---------------------------------------------------------------------- */

enum dwunw_arch {
	DWUNW_ARCH_UNKNOWN = 0,
	DWUNW_ARCH_X86_64 = 1,
	DWUNW_ARCH_ARM64 = 2,
	DWUNW_ARCH_MIPS32 = 3, /* little-endian, o32 */
};

/* Registers are indexed by their DWARF number; the pc has its own field. */
#define DWUNW_MAX_REGS 64

struct dwunw_regs {
	uint32_t arch;             /* enum dwunw_arch */
	uint32_t flags;            /* DWUNW_REGS_* */
	int32_t pid;               /* process whose maps locate modules (read from /proc, or given with
	                            * dwunw_maps_set for offline use) and whose memory is read beyond
	                            * the snapshot; 0 = no maps: only the fallbacks can step */
	int32_t tid;
	uint64_t pc;
	uint64_t valid;            /* bit n set: regs[n] holds a value */
	uint64_t regs[DWUNW_MAX_REGS];
	/* Optional copy of the stack, taken at the same instant as the registers. */
	uint64_t stack_start;      /* address of stack[0] */
	const void *stack;
	uint64_t stack_size;
};

/* pc is a return address (a uretprobe's resume point): look up pc-1 for frame 0 too. */
#define DWUNW_REGS_PC_IS_RETADDR  (1u << 0)
/* Capture without file I/O and without waiting for the context's lock: what the walk needs must
 * be loaded already (dwunw_load_for); else it stops there with DWUNW_ERR_WOULDBLOCK. */
#define DWUNW_REGS_NOWAIT         (1u << 1)

struct dwunw_frame;
struct dwunw_ctx;

/*
 * What differs between architectures, and only that. The unwinder calls these; nothing else in
 * the library tests for an architecture.
 */
struct dwunw_arch_ops {
	const char *name;               /* "x86_64", "arm64", "mips32" */
	uint32_t arch;                  /* enum dwunw_arch */
	uint16_t elf_machine;           /* EM_* */
	uint8_t elf_class;              /* ELFCLASS32 / ELFCLASS64 */
	uint8_t addr_size;              /* bytes in a pointer */
	uint16_t nregs;                 /* DWARF registers 0..nregs-1 are tracked */
	uint16_t sp_reg;                /* DWARF number of the stack pointer */
	uint16_t fp_reg;                /* frame pointer register */
	uint16_t ra_reg;                /* default return-address column */
	uint16_t lr_reg;                /* register holding the return address at a call (arm64, mips), or 0xffff */
	uint16_t pc_reg;                /* DWARF number that names the pc in expressions (x86_64 rip), or 0xffff */
	/* Registers that keep their value in the caller when the CFI gives no rule (callee-saved);
	 * the others become unknown after a step. Bit n = DWARF register n. */
	uint64_t callee_saved;
	/* readelf's name for a DWARF register ("rbx", "x29", ...), or NULL when readelf prints rN. */
	const char *(*reg_name)(unsigned reg);
	/* The CFI's raw return address -> the caller's pc (strips arm64 pointer authentication);
	 * NULL = identity. The identity for addresses below 2^48 (no tag bits): the unwinder's fast
	 * path calls it only for others. */
	uint64_t (*ra_to_pc)(uint64_t ra, int ra_signed);
	/*
	 * A signal trampoline at pc (recognised by its code, read through `read`)? If so, fill
	 * `out` with the interrupted context's registers and return 1; 0 if not a trampoline;
	 * a DWUNW_ERR_* when it is one but its frame cannot be read.
	 */
	int (*sigframe)(const struct dwunw_regs *in, struct dwunw_regs *out,
			int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);
	/* Frame-pointer step for code without CFI: 1 and `out` filled, or 0 when it cannot. */
	int (*fp_step)(const struct dwunw_regs *in, struct dwunw_regs *out,
		       int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);
	/* Leaf without CFI: the return address is still in the link register (arm64, mips). */
	int (*lr_step)(const struct dwunw_regs *in, struct dwunw_regs *out);
	/* Frame 0 in a linker stub (PLT, .MIPS.stubs) without CFI: the caller's frame as the call
	 * left it (x86_64: return address at [sp]; arm64: in x30; mips stubs: in t7). */
	int (*stub_step)(const struct dwunw_regs *in, struct dwunw_regs *out,
			 int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);
	/* Registers from a ptrace NT_PRSTATUS register set (also what a core file holds). */
	int (*regs_from_prstatus)(const void *buf, size_t len, struct dwunw_regs *out);
	/*
	 * Code without CFI (arm64, mips): decode the function's prologue from `func_start` up to pc
	 * (func_start 0: unknown, found by a bounded backward scan) and the epilogue ahead of pc, and
	 * fill `out` with the caller's frame. `exact`: pc is the interrupted instruction (frame 0,
	 * after a signal), else a return address. 1 = stepped; 0 = not applicable (no function
	 * found); DWUNW_ERR_PROLOGUE = code the analyser does not understand (the walk stops there).
	 */
	int (*prologue_step)(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t func_start, int exact,
			     int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);
};

/* The backend for an architecture, or NULL when this build has none. */
const struct dwunw_arch_ops *dwunw_arch_get(enum dwunw_arch arch);
/* The backend for an ELF e_machine/e_ident[EI_CLASS] pair, or NULL. */
const struct dwunw_arch_ops *dwunw_arch_for_elf(unsigned machine, unsigned elf_class);

/* ---- Context ------------------------------------------------------------------------------ */

/* An ELF supplied by the caller: used for every mapping of `path` instead of the file there. */
struct dwunw_module_source {
	const char *path;           /* file to open, or the name shown for `image` */
	const void *image;          /* if non-NULL: the whole ELF file in memory, kept valid until shutdown */
	uint64_t image_size;
};

struct dwunw_config {
	uint32_t size;              /* sizeof(struct dwunw_config) */
	uint32_t flags;             /* DWUNW_CFG_* */
	uint32_t cache_slots;       /* module-cache slots; 0 = 16 */
	uint32_t max_frames;        /* stop after this many frames; 0 = the caller's buffer size */
	const char *sysroot;        /* prefix for module paths (cross-arch and core files); NULL = "/" */
	const char *debug_dirs;     /* ':'-separated roots for separate debug files; NULL = "/usr/lib/debug" */
	/* Stack-reader audit log: one line per attach/detach/fallback. NULL = no log. The audit and
	 * warn sinks may be called with internal locks held: they must not call into libdwunw. */
	void (*audit)(void *arg, const char *line);
	void *audit_arg;
	/* Warnings (non-dumpable target, module file changed on disk). NULL = silent. */
	void (*warn)(void *arg, const char *line);
	void *warn_arg;
	/* Modules to load now (dwunw_init), e.g. from a caller's buffer. */
	const struct dwunw_module_source *modules;
	uint32_t nmodules;
	uint32_t pad;
	/* Stack reader: how long dwunw_stack_reader_attach waits for the thread to stop (a vfork
	 * parent or a thread in uninterruptible I/O cannot stop); then DWUNW_ERR_IO, ETIMEDOUT. */
	uint32_t attach_timeout_ms; /* 0 = 2000 */
	uint32_t pad2;              /* 0 */
	/* Module cache: bytes its modules may hold (tables, symbol index, line table, ELF bytes
	 * read); past it the warm modules used least recently are freed. 0 = DWUNW_CACHE_BYTES_DEFAULT,
	 * UINT64_MAX = no bound. Modules in use are never freed: they may hold more. */
	uint64_t cache_bytes;
};

#define DWUNW_CACHE_BYTES_DEFAULT (256ull << 20)

#define DWUNW_CFG_NO_FP_FALLBACK   (1u << 0) /* never use frame pointers where CFI is missing */
#define DWUNW_CFG_NO_REMOTE_READS  (1u << 1) /* never read target memory beyond the snapshot */
#define DWUNW_CFG_NO_DEBUG_FILES   (1u << 2) /* do not look for separate debug files */
/* Fetch the debug files of modules that lack .symtab and have no local debug file from the
 * debuginfod servers of DEBUGINFOD_URLS (libdebuginfod, loaded with dlopen; its cache and
 * timeouts), on a worker thread: nothing else waits on the network. Names appear as the files
 * come; dwunw_debuginfod_wait before a report. */
#define DWUNW_CFG_DEBUGINFOD       (1u << 3)
/* dwunw_symbolize(_frame) gives names only (file "", line 0): no line table is built for them. For
 * callers that want file:line for some frames only, later (dwunw_source_line). */
#define DWUNW_CFG_NO_LINES         (1u << 4)

/* The warn line of a module file that cannot be loaded, said once per mapping; callers that
 * gather these (bpf/runtime/module_warn.c, lib/warnings.ts) read it by these parts:
 * PRE path MID dwunw_strerror(err) POST */
#define DWUNW_WARN_NO_MODULE_PRE   "dwunw: "
#define DWUNW_WARN_NO_MODULE_MID   ": cannot load the module ("
#define DWUNW_WARN_NO_MODULE_POST  "): its frames cannot be unwound"

struct dwunw_ctx_impl;

/* Caller-allocated handle; dwunw_init fills it. Concurrent dwunw_capture calls on one ctx are safe. */
struct dwunw_ctx {
	uint32_t magic;
	uint32_t version;           /* DWUNW_VERSION_NUMBER the context was created by */
	struct dwunw_ctx_impl *impl;
};

int dwunw_init(struct dwunw_ctx *ctx, const struct dwunw_config *cfg);
void dwunw_shutdown(struct dwunw_ctx *ctx);

/* ---- debuginfod (DWUNW_CFG_DEBUGINFOD) ----------------------------------------------------- */

/*
 * Wait at most timeout_ms for the fetches asked so far. Returns how many are still pending (0:
 * all answered), DWUNW_ERR_UNSUPPORTED when libdebuginfod cannot be loaded; 0 when the context
 * fetches nothing (no flag, DEBUGINFOD_URLS unset).
 */
int dwunw_debuginfod_wait(struct dwunw_ctx *ctx, uint32_t timeout_ms);

#define DWUNW_DEBUGINFOD_PENDING 0  /* asked, no answer yet */
#define DWUNW_DEBUGINFOD_LOCAL   1  /* a local debug file serves: nothing fetched */
#define DWUNW_DEBUGINFOD_FETCHED 2  /* in the debuginfod cache (fetched now or before) */
#define DWUNW_DEBUGINFOD_FAILED  3  /* err and why say why */

/* One module whose debug file was looked for, in the order asked. */
struct dwunw_debuginfod_result {
	int32_t state;              /* DWUNW_DEBUGINFOD_* */
	int32_t err;                /* errno of a failed fetch (ENOENT: the servers do not have it) */
	char build_id[136];         /* hex */
	char why[128];              /* a failed fetch's cause, one line */
	char module[512];           /* the module's path */
	char file[512];             /* the debug file in the cache, when fetched */
};

/* The i-th module asked for (from 0); DWUNW_ERR_NOT_FOUND past the last. */
int dwunw_debuginfod_result(struct dwunw_ctx *ctx, uint32_t i, struct dwunw_debuginfod_result *out);

/* ---- Unwinding ---------------------------------------------------------------------------- */

/* How a frame's registers were recovered. */
enum dwunw_how {
	DWUNW_HOW_INITIAL = 0,      /* frame 0: the captured registers */
	DWUNW_HOW_CFI = 1,          /* call-frame information */
	DWUNW_HOW_SIGNAL = 2,       /* from a signal frame's saved context */
	DWUNW_HOW_FP = 3,           /* frame-pointer fallback (no CFI) */
	DWUNW_HOW_LR = 4,           /* no CFI, return address where the call left it: link register, or [sp] in a stub */
	DWUNW_HOW_PROLOGUE = 5,     /* no CFI: the function's prologue (and epilogue) decoded */
};

/*
 * Where a frame came from, as every dwunw output names it (JSON "origin"): what its registers rest
 * on, so a reader knows which frames to trust. Only window, signal, kernel and kernel-walk rest on
 * nothing but the state at the event and the CFI or the ABI.
 */
enum dwunw_origin {
	DWUNW_ORIGIN_WINDOW = 0,      /* registers and stack captured at the event, stepped by CFI */
	DWUNW_ORIGIN_FP,              /* frame pointers (no CFI at the callee) */
	DWUNW_ORIGIN_PROLOGUE,        /* the callee's prologue decoded (no CFI) */
	DWUNW_ORIGIN_LR,              /* the return address where the call leaves it (no CFI) */
	DWUNW_ORIGIN_SIGNAL,          /* a signal frame's saved context */
	DWUNW_ORIGIN_KERNEL,          /* a kernel frame (the kernel's own unwinder, at the event) */
	DWUNW_ORIGIN_KERNEL_WALK,     /* a user frame walked in the kernel at the event */
	DWUNW_ORIGIN_PYTHON,          /* a Python function from CPython's frame chain */
	DWUNW_ORIGIN_FROZEN,          /* stepped by CFI over memory read from the thread stopped at the
	                               * event (the tools' --unwind=freeze): event-time state */
	DWUNW_ORIGIN_LIVE,            /* rests on memory read from the process after the event */
	DWUNW_ORIGIN_COUNT
};
/* "window", "fp", ...; NULL past the last. */
const char *dwunw_origin_name(uint32_t origin);
/* The origin of a frame stepped by libdwunw (enum dwunw_how); memory read live makes it LIVE,
 * which the caller decides (DWUNW_FRAME_BEYOND_SNAPSHOT). */
uint32_t dwunw_how_origin(uint32_t how);

/*
 * The text markers ("[live]") a frame printed as text carries, and the legend line that explains
 * the ones shown ("frames marked [live] <legend>; [fp] <legend>"), in this order.
 */
enum dwunw_mark {
	DWUNW_MARK_LIVE = 0,
	DWUNW_MARK_FP,
	DWUNW_MARK_PROLOGUE,
	DWUNW_MARK_LR,
	DWUNW_MARK_JIT,               /* named from the JIT's perf map */
	DWUNW_MARK_UPROBE,            /* pc is the kernel's uretprobe trampoline */
	DWUNW_MARK_PY,
	DWUNW_MARK_COUNT
};
/* The origin's marker (enum dwunw_mark), or -1 for an origin that needs none. */
int dwunw_origin_mark(uint32_t origin);
/* "live" (printed "[live]"), and its legend text; NULL past the last. */
const char *dwunw_mark_name(uint32_t mark);
const char *dwunw_mark_legend(uint32_t mark);

/* dwunw_frame.flags */
#define DWUNW_FRAME_BEYOND_SNAPSHOT (1u << 0) /* needed memory read from the live process, not the snapshot */
#define DWUNW_FRAME_EXACT_PC        (1u << 1) /* pc is exact (frame 0, after a signal frame): not a return address */
#define DWUNW_FRAME_JIT             (1u << 2) /* anonymous executable memory */
#define DWUNW_FRAME_VDSO            (1u << 3)
#define DWUNW_FRAME_HOLDS_REF       (1u << 4) /* this frame holds the module reference for its module */
#define DWUNW_FRAME_UPROBE_TRAMP    (1u << 5) /* pc is the kernel's uretprobe trampoline */
#define DWUNW_FRAME_SIGTRAMP        (1u << 6) /* pc is a signal trampoline: nothing called it, so it
						    * is symbolized as is, not as pc-1 */
/* Bookkeeping of dwunw_capture for dwunw_module_cache_release, cleared by it: frame 0 carries
 * REF_LIST, and frame 0 and each HOLDS_REF frame carry in bits 16-31 the distance to the next
 * HOLDS_REF frame (0: none), so a release visits only the frames that hold references. */
#define DWUNW_FRAME_REF_LIST        (1u << 15)
#define DWUNW_FRAME_REF_NEXT_SHIFT  16
#define DWUNW_FRAME_REF_NEXT_MAX    0xffffu
#define DWUNW_FRAME_REF_BITS        (DWUNW_FRAME_HOLDS_REF | DWUNW_FRAME_REF_LIST | \
				     (DWUNW_FRAME_REF_NEXT_MAX << DWUNW_FRAME_REF_NEXT_SHIFT))

struct dwunw_module;

struct dwunw_frame {
	uint64_t pc;                /* for frames > 0 the return address; look-ups use pc-1 */
	uint64_t sp;                /* the frame's stack pointer */
	uint64_t cfa;               /* its canonical frame address, 0 if not computed */
	uint64_t module_addr;       /* pc as an address of the module's ELF file (pc - load bias) */
	struct dwunw_module *module;/* NULL when no module maps the pc */
	uint32_t how;               /* enum dwunw_how */
	uint32_t flags;             /* DWUNW_FRAME_* */
};

/*
 * Unwind from `regs`. On entry *frame_cnt is the capacity of `frames`; on return it is the number
 * of frames written (always at least frame 0 when regs are valid), also when an error is returned.
 * Returns DWUNW_OK when the walk reached the outermost frame, otherwise the reason it stopped
 * (DWUNW_ERR_NO_DWARF, _IO, _NO_PROGRESS, _DEPTH, _NO_MODULE, ...). Memory is read from the
 * snapshot, then from the pid's offline memory (dwunw_memory_add), then from the live process
 * (regs->pid) through the stack reader, then from read-only module data.
 * Frames with a module hold a reference on it: give them back with dwunw_module_cache_release().
 */
int dwunw_capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
		  struct dwunw_frame *frames, size_t *frame_cnt);

/*
 * Change detection for reads beyond the snapshot. A capture can sample a few pieces of the stack
 * above its copy at the event (cheap: a few small reads); the memory the walk then reads from the
 * live process is checked against them. `data` holds `len` bytes as they were at `addr`.
 */
struct dwunw_stack_sample {
	uint64_t addr;
	const void *data;
	uint64_t len;
};

/*
 * dwunw_capture with samples of the stack above the snapshot. The first time the walk needs memory
 * beyond the snapshot, the live stack is read in one batch (up to 64 KiB, within its mapping) and
 * every sample in the same system call (at most 4 KiB of samples are checked; the rest are
 * ignored). If any sample differs, or is no longer readable, the stack changed since the event:
 * the walk stops at the last frame recovered without live memory and returns DWUNW_ERR_STALE.
 * Samples inside the snapshot are ignored. With nsamples 0 it is dwunw_capture.
 */
int dwunw_capture_sampled(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
			  const struct dwunw_stack_sample *samples, size_t nsamples,
			  struct dwunw_frame *frames, size_t *frame_cnt);

/*
 * Load what an unwind of `regs` needs, so that a DWUNW_REGS_NOWAIT capture of it does not return
 * DWUNW_ERR_WOULDBLOCK: the pid's maps, each module the walk reaches, its table and (arm64, mips)
 * its symbols. A blocking walk whose frames are dropped; call it off the hot path (a loader
 * thread). DWUNW_OK, or what keeps it from loading: DWUNW_ERR_NO_PROCESS (maps unreadable),
 * _CACHE_FULL, _NOMEM, _INVALID_ARG, _UNSUPPORTED_ARCH. A module evicted between this call and
 * the capture is loaded again by the next call.
 */
int dwunw_load_for(struct dwunw_ctx *ctx, const struct dwunw_regs *regs);

/* ---- Module cache ------------------------------------------------------------------------- */

/*
 * A slot is active while referenced (refcnt > 0) and warm once released (refcnt == 0: ELF and
 * table kept, reused by the next look-up of the same file). A new module takes a free slot, else
 * the warm slot released longest ago (LRU); when every slot is active, DWUNW_ERR_CACHE_FULL.
 * The modules' bytes are bounded by config `cache_bytes`: when a module is loaded or builds a
 * table, symbol index or line table, and at dwunw_cache_trim, warm modules are freed, least
 * recently used first, until the bytes held fit (active ones are never freed).
 * Modules are keyed on path and file identity (device, inode, size, mtime, ctime): a file rebuilt
 * or rewritten at its path is never served a stale table. A module given as an image (config
 * `modules`, dwunw_module_open_image) is used for every mapping of its path.
 */

/* Release the module references held by frames from dwunw_capture (each once). */
int dwunw_module_cache_release(struct dwunw_ctx *ctx, struct dwunw_frame *frames, size_t frame_cnt);

/* Open (or find in the cache) a module by path; the reference is released with dwunw_module_put. */
int dwunw_module_open(struct dwunw_ctx *ctx, const char *path, struct dwunw_module **out);
int dwunw_module_open_image(struct dwunw_ctx *ctx, const char *name, const void *image, size_t size,
			    struct dwunw_module **out);
void dwunw_module_put(struct dwunw_ctx *ctx, struct dwunw_module *mod);

const char *dwunw_module_path(const struct dwunw_module *mod);
/* Hex build-id into buf (2 * length + 1 bytes; 129 fit any); returns its length in bytes, 0 when
 * there is none, DWUNW_ERR_INVALID_ARG when buf is too small. */
int dwunw_module_build_id(const struct dwunw_module *mod, char *buf, size_t buflen);
const struct dwunw_arch_ops *dwunw_module_arch(const struct dwunw_module *mod);

struct dwunw_cache_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint32_t slots;
	uint32_t active;
	uint32_t warm;
	uint32_t pad;
	uint64_t bytes;             /* held by the loaded modules (dwunw_module_memory's parts + lines) */
	uint64_t bytes_bound;       /* config cache_bytes in effect (UINT64_MAX: none) */
	uint64_t bytes_evictions;   /* of evictions: modules freed to keep within bytes_bound */
};
int dwunw_cache_stats(struct dwunw_ctx *ctx, struct dwunw_cache_stats *out);

/*
 * Free the warm modules (no reference held) that were not used again since the previous call:
 * a long-running tool calls it now and then, so the files of processes long gone leave memory
 * while those in use stay (a module trimmed and needed again is loaded again). *freed (may be
 * NULL): how many were freed. The first call only sets the mark. It also applies the byte bound
 * (config cache_bytes) to what tables built lazily since added.
 */
int dwunw_cache_trim(struct dwunw_ctx *ctx, uint32_t *freed);

/* ---- Unwind tables ------------------------------------------------------------------------ */

/* The module's table, compiled on first use. */
struct dwunw_table_info {
	uint64_t rows;
	uint64_t rules;             /* distinct rules the rows share */
	uint64_t bytes;             /* memory of rows + rules + index */
	uint64_t build_ns;          /* time to build it */
	uint64_t fdes;
	uint64_t fdes_dropped;      /* FDEs ignored: outside executable code, or CFI we cannot evaluate */
	uint32_t sources;           /* DWUNW_TABLE_SRC_* present */
	int32_t first_error;        /* DWUNW_ERR_* of the first CFI entry that was skipped, 0 if none */
	uint64_t first_error_offset;/* its offset in the section */
	uint32_t first_error_source;/* DWUNW_TABLE_SRC_* of that section */
	uint32_t pad;
};
#define DWUNW_TABLE_SRC_EH_FRAME    (1u << 0)
#define DWUNW_TABLE_SRC_DEBUG_FRAME (1u << 1)

int dwunw_table_info(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_table_info *out);

/* One row decoded to readelf's notation, for display and diffing. */
#define DWUNW_ROW_MAX_REGS 48
struct dwunw_row_text {
	uint64_t pc;                /* module address where the row starts */
	uint64_t end;               /* where the next row starts */
	char cfa[48];               /* "rsp+8", "exp", or "end" for the gap after an FDE */
	uint32_t nregs;
	uint32_t flags;             /* DWUNW_ROW_* */
	struct {
		uint16_t reg;       /* DWARF number */
		uint16_t is_ra;     /* the return-address column: readelf labels it "ra" */
		char name[12];      /* readelf's register name */
		char rule[28];      /* "c-16", "u", "s", "r3 (rbx)", "exp", "vexp", "v+8" */
	} regs[DWUNW_ROW_MAX_REGS];
};
#define DWUNW_ROW_SIGNAL    (1u << 0)  /* from a CIE with augmentation 'S' */
#define DWUNW_ROW_RA_SIGNED (1u << 1)  /* arm64: return address signed (negate_ra_state) */

/* Row `index` (0 .. rows-1) of the module's table. */
int dwunw_table_row(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t index,
		    struct dwunw_row_text *out);
/* The row covering a module address: its index, or DWUNW_ERR_NO_DWARF. */
int64_t dwunw_table_lookup(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr);

/*
 * Rows [*row, ...) of the module's table rendered in bulk, as whole lines into buf: one call per
 * buffer instead of one per row. DWUNW_DUMP_TEXT: readelf --debug-dump=frames-interp's columns
 * (the header line first when *row is 0; DWUNW_DUMP_COLOR adds ANSI colours); DWUNW_DUMP_JSON:
 * {"pc","cfa","regs"} objects, each preceded by "\n" (row 0) or ",\n". *row advances past the
 * rows written. Returns the bytes written (0 once *row is past the last row), or DWUNW_ERR_*
 * (DWUNW_ERR_INVALID_ARG when buf cannot hold the next line).
 */
#define DWUNW_DUMP_TEXT  0u
#define DWUNW_DUMP_JSON  1u
#define DWUNW_DUMP_COLOR 2u
int64_t dwunw_table_dump(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint32_t format,
			 uint64_t *row, char *buf, uint64_t len);

/* Memory a module holds, by kind (what is built or read so far). */
struct dwunw_module_memory {
	uint64_t table;             /* the compiled table: rows, rules, index, look-up cache */
	uint64_t symbols;           /* the symbol index (and its debug files' sections) */
	uint64_t elf;               /* file bytes read: headers, CFI, symbol and string tables */
	uint64_t file_size;         /* the file's size, for comparison */
};
int dwunw_module_memory(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_module_memory *out);

/* ---- Process maps ------------------------------------------------------------------------- */

/* One mapping of a process: a line of /proc/PID/maps. */
#define DWUNW_MAP_R       (1u << 0)
#define DWUNW_MAP_W       (1u << 1)
#define DWUNW_MAP_X       (1u << 2)
#define DWUNW_MAP_SHARED  (1u << 3)   /* 's' (else private, 'p') */
#define DWUNW_MAP_DELETED (1u << 4)   /* the path ended in " (deleted)", cut off from path */
struct dwunw_map {
	uint64_t start;             /* [start, end) */
	uint64_t end;
	uint64_t offset;            /* file offset of start */
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t flags;             /* DWUNW_MAP_* */
	uint32_t pad;
	const char *path;           /* NUL-terminated: a file, "[vdso]", "[stack]", ...; "" or NULL for
	                             * anonymous memory */
};

/*
 * The one parser of /proc/PID/maps text, in place: each mapping line becomes an entry of out[]
 * (in the text's order), its path NUL-terminated inside text (the byte after the path, or the
 * space of its " (deleted)", is overwritten: text[len] must be writable, as in a NUL-terminated
 * string). Lines that are not mappings are skipped. *n: out's capacity on entry, the mappings
 * found on return (out NULL: only count them, text unchanged). When out holds fewer, nothing
 * is written and DWUNW_ERR_INVALID_ARG is returned with *n the count needed. DWUNW_ERR_CORRUPT
 * when text holds no mapping. Parsed text is not maps text any more: parse it once. Needs no context (a tool without libdwunw's unwinder links only this).
 */
int dwunw_maps_parse(char *text, size_t len, struct dwunw_map *out, size_t *n);
/* Read /proc/PID/maps (pid 0: our own) into a malloc'ed, NUL-terminated text (*out; *len bytes
 * before the NUL; free() it): DWUNW_OK, DWUNW_ERR_NO_PROCESS when pid has exited or is a zombie.
 * A process whose main thread exited first is read through another of its threads. */
int dwunw_maps_read(int32_t pid, char **out, size_t *len);
/* Both: pid's mappings (pid 0: our own) as *n entries in one malloc'ed block (free(*out) frees
 * them and their paths). */
int dwunw_maps_load(int32_t pid, struct dwunw_map **out, size_t *n);

/*
 * The entries forms of dwunw_maps_set and dwunw_maps_pin below: the same, with the maps given as
 * entries (sorted here if they are not; paths are copied). DWUNW_ERR_INVALID_ARG for an entry
 * with end <= start.
 */
int dwunw_maps_set_entries(struct dwunw_ctx *ctx, int32_t pid, const struct dwunw_map *maps, size_t n);
int dwunw_maps_pin_entries(struct dwunw_ctx *ctx, int32_t pid, const struct dwunw_map *maps, size_t n);

/*
 * Use this text (in /proc/PID/maps format) as the maps of `pid` instead of reading /proc: for
 * offline snapshots and core files. The pid is then never refreshed from /proc.
 */
int dwunw_maps_set(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len);
/*
 * Use this text as the maps of the live process `pid`, kept up to date by the caller (e.g. from
 * mapping events applied in order with its records, so each capture sees the modules mapped
 * when it was taken). Never re-read from /proc; memory beyond the snapshot is still read live.
 * A mapping's file is opened only while it is the very file mapped (same device and inode, at
 * its path or through /proc/PID/map_files); else its frames have no module (never a guess).
 * Calling it again replaces the maps; captures in progress keep the ones they started with.
 */
int dwunw_maps_pin(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len);
/*
 * Offline memory of pid (a core file's segments): read when the snapshot does not cover an
 * address, before module files. The bytes are not copied: keep them valid until the pid is
 * forgotten or the context shut down. Requires maps set with dwunw_maps_set first (setting
 * them again drops the regions). Not to be called while captures of that pid run.
 */
int dwunw_memory_add(struct dwunw_ctx *ctx, int32_t pid, uint64_t addr, const void *data, uint64_t len);

/* Read /proc/PID/maps now (e.g. while the thread is frozen, so a capture after detach still has
 * them if the process exits meanwhile). The pid stays live: refreshed on unknown pcs. */
int dwunw_maps_refresh(struct dwunw_ctx *ctx, int32_t pid);
/* Forget what is cached for pid (maps, vDSO image). */
void dwunw_maps_forget(struct dwunw_ctx *ctx, int32_t pid);

/*
 * Core files (ELF ET_CORE: a kernel core, gdb's gcore, qemu-user's guest cores), unwound offline.
 * dwunw_core_load registers the core's process under an offline pid: its maps (built from the
 * NT_FILE note, or the caller's maps text: qemu's guest cores have no NT_FILE), its memory (every
 * PT_LOAD's file bytes, read in place: the core stays open, copied or mapped, until the pid is
 * forgotten or the context shut down), and the vDSO image the core holds (AT_SYSINFO_EHDR); and
 * returns each thread's registers from NT_PRSTATUS, ready for dwunw_capture (no stack copy: the
 * walk reads the core's memory, then the module files, opened under the config's sysroot).
 * Threads come in the core's order: the kernel and gdb put the thread that took the fatal signal
 * first. Loading another core under the same pid replaces the first.
 */
struct dwunw_core_options {
	uint32_t size;              /* sizeof(struct dwunw_core_options) */
	uint32_t flags;             /* 0 */
	const char *maps_text;      /* the process's maps (/proc/PID/maps format), e.g. saved beside
	                             * the core; NULL = build them from the core's NT_FILE */
	uint64_t maps_len;
	const char *exe;            /* file to use for the main executable's mappings instead of the
	                             * path the maps give it (a core from another machine); NULL = none */
	int32_t pid;                /* offline pid to register; 0 = the core's own (NT_PRPSINFO) */
	uint32_t pad;               /* 0 */
};

struct dwunw_core_thread {
	int32_t tid;
	int32_t signo;              /* pr_cursig (a kernel core repeats the fatal signal in every
	                             * thread's note: the first thread is the one that took it) */
	struct dwunw_regs regs;     /* pid: the registered pid; no stack copy */
};

struct dwunw_core_info {
	uint32_t arch;              /* enum dwunw_arch */
	int32_t pid;                /* pid registered; 0 when no maps could be built (regs.pid is 0) */
	int32_t core_pid;           /* process id the core records */
	uint32_t nthreads;          /* threads with readable registers (may exceed the buffer) */
	uint32_t flags;             /* DWUNW_CORE_* */
	uint32_t nmaps;             /* lines of the maps registered */
	uint32_t nsegments;         /* memory regions registered */
	uint32_t pad;
	char comm[32];              /* NT_PRPSINFO pr_fname, "" when absent */
	char exe[4096];             /* the main executable as the maps name it (before opts->exe), "" if unknown */
};
#define DWUNW_CORE_NT_FILE   (1u << 0) /* maps built from NT_FILE */
#define DWUNW_CORE_TRUNCATED (1u << 1) /* notes or segments extend past the end of the file */
#define DWUNW_CORE_VDSO      (1u << 2) /* the core's vDSO image serves "[vdso]" */
#define DWUNW_CORE_EXE       (1u << 3) /* opts->exe replaced the main executable's mappings */

/*
 * Load core_path (opts may be NULL). On entry *nthreads is the capacity of `threads` (may be 0);
 * on return the number written. Returns DWUNW_OK; DWUNW_ERR_CORRUPT when part of the core is
 * malformed or truncated: what could be read is registered and returned all the same (threads,
 * info); or, with nothing registered: DWUNW_ERR_NOT_FOUND/_PERM/_IO (opening or reading the file
 * or opts->exe), _NOT_ELF, _INVALID_ARG (not an ET_CORE file), _UNSUPPORTED_ARCH (machine, class
 * or byte order this build cannot unwind), _NOMEM.
 */
int dwunw_core_load(struct dwunw_ctx *ctx, const char *core_path, const struct dwunw_core_options *opts,
		    struct dwunw_core_thread *threads, size_t *nthreads, struct dwunw_core_info *info);

/* ---- Symbols ------------------------------------------------------------------------------ */

struct dwunw_symbol {
	char name[256];             /* demangled; "" when unknown */
	uint64_t offset;            /* pc - symbol start */
	uint64_t sym_addr;          /* module address of the symbol */
	char file[256];             /* source file, "" when no line information */
	uint32_t line;
	uint32_t flags;             /* DWUNW_SYM_* */
};
#define DWUNW_SYM_FROM_DEBUG_FILE  (1u << 0) /* found in a separate debug file */
#define DWUNW_SYM_FROM_DEBUGDATA   (1u << 1) /* found in .gnu_debugdata */
#define DWUNW_SYM_DYNSYM           (1u << 2) /* found in .dynsym only */
#define DWUNW_SYM_PLT              (1u << 3) /* a PLT stub: the synthetic name@plt of its target */

/*
 * Symbol for a module address. For a return address (frames > 0) pass addr = pc - 1 and then
 * add 1 to out->offset, as dwunw_symbolize_frame does.
 */
int dwunw_symbolize(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr,
		    struct dwunw_symbol *out);
int dwunw_symbolize_frame(struct dwunw_ctx *ctx, const struct dwunw_frame *frame, struct dwunw_symbol *out);
/*
 * The source file (full path, truncated to filelen) and line of a module address, from the
 * module's .debug_line (or its debug file's), whatever DWUNW_CFG_NO_LINES says: DWUNW_OK, or
 * DWUNW_ERR_NOT_FOUND when no row covers addr (file "", line 0). The line table is built on the
 * module's first call. Return addresses: pass pc - 1, as for dwunw_symbolize.
 */
int dwunw_source_line(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr, char *file,
		      size_t filelen, uint32_t *line);

/* ---- Python (CPython) frames -------------------------------------------------------------- */

/*
 * The Python functions a thread is running, read from the interpreter's own structures in the
 * process's memory (live: process_vm_readv, consistent only while the thread is stopped; offline: a
 * core's memory from dwunw_core_load). Only what .dynsym exports is needed (_PyRuntime, Py_Version,
 * PyCode_Type, PyUnicode_Type, _PyEval_EvalFrameDefault): a stripped python works. The layouts come
 * from one table per CPython minor version, checked against the interpreter's own objects when it is
 * found (PyCode_Type's size and member offsets, PyUnicode_Type's size); a version not in the table,
 * or one that fails the checks, is not read (DWUNW_ERR_UNSUPPORTED, `why` says which).
 */
struct dwunw_py_runtime {
	uint32_t size;              /* sizeof(struct dwunw_py_runtime), set by the caller */
	uint32_t version;           /* Py_Version (0x030b02f0: 3.11.2 final); 0 when not read */
	int32_t pid;
	uint32_t layout;            /* private: the table row + 1; 0 = none */
	uint64_t runtime_addr;      /* _PyRuntime */
	uint64_t eval_lo;           /* _PyEval_EvalFrameDefault: [eval_lo, eval_hi), runtime addresses */
	uint64_t eval_hi;
	uint64_t code_type;         /* PyCode_Type: every frame's code object must be one */
	uint64_t str_type;          /* PyUnicode_Type */
	char path[256];             /* the file that holds the interpreter (python3.x or libpython3.x.so) */
	char why[160];              /* why not: one line, "" on success */
};

/*
 * Find CPython in pid (the main executable, or a mapped file whose name holds "python"), read its
 * version and check its layout. DWUNW_OK; DWUNW_ERR_NOT_FOUND: no CPython in the process;
 * DWUNW_ERR_UNSUPPORTED: a CPython whose version is not in the table or whose objects disagree
 * with it (why, version and path say which); DWUNW_ERR_IO etc: its memory could not be read.
 */
int dwunw_py_find(struct dwunw_ctx *ctx, int32_t pid, struct dwunw_py_runtime *rt);

struct dwunw_py_frame {
	uint64_t frame;             /* the _PyInterpreterFrame's address */
	uint64_t code;              /* its code object */
	int32_t line;               /* source line; 0 when unknown */
	uint32_t flags;             /* DWUNW_PY_* */
	char name[128];             /* co_qualname ("Class.method", "<module>") */
	char file[256];             /* co_filename */
};
#define DWUNW_PY_ENTRY      (1u << 0) /* the first frame its native _PyEval_EvalFrameDefault call ran:
				       * the next frame out belongs to the next native eval call */
#define DWUNW_PY_NO_LINE    (1u << 1) /* the line could not be read (line 0) */
#define DWUNW_PY_TRUNCATED  (1u << 2) /* name or file cut to the buffer */
#define DWUNW_PY_GENERATOR  (1u << 3) /* a generator's or coroutine's frame */

/*
 * The Python frames of thread tid, innermost first. On entry *n is the capacity; on return the
 * frames written. DWUNW_OK: the chain ended (the thread's outermost Python frame is the last);
 * DWUNW_ERR_DEPTH: the buffer filled first; DWUNW_ERR_NOT_FOUND: the thread has no Python thread
 * state (not a Python thread, or not yet / no longer one), *n = 0; DWUNW_ERR_IO, _CORRUPT: a frame
 * could not be read or made no sense (a chain changing under the reader, a bad pointer): the
 * frames before it are returned, the chain is cut there.
 */
int dwunw_py_stack(struct dwunw_ctx *ctx, const struct dwunw_py_runtime *rt, int32_t tid,
		   struct dwunw_py_frame *frames, size_t *n);

/*
 * Frames read elsewhere (a BPF program at the event): per frame its address, code object, last
 * instruction and the two bytes that mark an eval call's entry, innermost first. Described like
 * dwunw_py_stack's (the same rules: entry marks, shims, frames not started), each code object read
 * from the live process now: a code object freed since fails the type check (DWUNW_ERR_CORRUPT /
 * _IO: the frames before it are returned, the chain is cut there).
 */
struct dwunw_py_raw {
	uint64_t frame, code, prev_instr;
	uint8_t is_entry, owner;
};
int dwunw_py_describe(struct dwunw_ctx *ctx, const struct dwunw_py_runtime *rt,
		      const struct dwunw_py_raw *raw, size_t nraw, struct dwunw_py_frame *frames,
		      size_t *n);

/* The offsets of the interpreter's row that a reader of the chain needs (thread list, frames). */
struct dwunw_py_offsets {
	uint16_t rt_interp_head, is_next, is_threads_head;
	uint16_t ts_next, ts_cframe, ts_native_tid, cf_current_frame;
	uint16_t fr_code, fr_previous, fr_prev_instr, fr_is_entry, fr_owner;
	uint8_t entry_flag;         /* 1: fr_is_entry holds the entry mark (3.11) */
	uint8_t owner_cstack;       /* owner value of a C-stack shim frame (3.12); 0xff: none */
};
int dwunw_py_offsets(const struct dwunw_py_runtime *rt, struct dwunw_py_offsets *o);

/* ---- Stack reader ------------------------------------------------------------------------- */

/*
 * Freezes a thread and reads its memory: ptrace(PTRACE_SEIZE) + PTRACE_INTERRUPT to stop it,
 * process_vm_readv to read, /proc/PID/mem (opened per read batch and closed) when that fails,
 * PTRACE_DETACH to resume it. dwunw_capture uses the same reader for memory beyond the snapshot.
 * Fields are private to the library (flags bits 8 and up hold reader state).
 *
 * ptrace binds a traced thread to the tracing thread: call attach, regs and detach from one
 * thread. Attach waits until the thread stops, at most attach_timeout_ms (config; 0 = 2000 ms);
 * do not reap children with waitpid(-1) meanwhile. A signal that arrives while the thread is held
 * is delivered at detach, never dropped. If the target exits during attach, its exit is collected
 * here (a parent's later waitpid gets ECHILD). A tracer that dies leaves its tracee running: the
 * kernel detaches it.
 *
 * A thread that cannot stop (a vfork parent, uninterruptible I/O: state D) is not unwound: attach
 * returns DWUNW_ERR_IO with last_errno ETIMEDOUT, and warns "dwunw: pid P tid T did not stop within
 * N ms (state D): not unwound". A thread already in state D is waited for before it is seized, so
 * usually nothing is left behind. If it entered D after the interrupt was sent, it stays seized
 * with the stop pending: detach waits a little for that stop and resumes the thread; if it still
 * has not stopped, the reader keeps it (a later detach or attach on this reader finishes the job)
 * and the kernel releases it, running, when the tracing thread exits (a seized thread has no
 * SIGSTOP pending). Until then, once it leaves state D it waits in that stop: call detach again.
 */
struct dwunw_stack_reader {
	int32_t pid;
	int32_t tid;                /* attached thread, 0 when none */
	uint32_t flags;
	int32_t last_errno;         /* errno of the last failed system call */
	void (*audit)(void *arg, const char *line);
	void *audit_arg;
	void (*warn)(void *arg, const char *line);
	void *warn_arg;
	uint64_t reads;             /* process_vm_readv calls */
	uint64_t fallback_reads;    /* /proc/PID/mem reads */
	uint32_t attach_timeout_ms; /* from the config (0 there: 2000) */
	uint32_t pad;
};
#define DWUNW_READER_ATTACHED     (1u << 0)
#define DWUNW_READER_NO_VM_READV  (1u << 1) /* process_vm_readv unavailable: use /proc/PID/mem */
#define DWUNW_READER_NOT_DUMPABLE (1u << 2)

/* Prepare a reader for pid; audit/warn sinks come from cfg (may be NULL). No system call is made. */
int dwunw_stack_reader_init(struct dwunw_stack_reader *r, int32_t pid, const struct dwunw_config *cfg);
/* Freeze thread tid of the reader's process; returns when it is stopped, or DWUNW_ERR_IO
 * (last_errno ETIMEDOUT) when it did not stop within attach_timeout_ms. */
int dwunw_stack_reader_attach(struct dwunw_stack_reader *r, int32_t tid);
/* Read len bytes at addr of the process: DWUNW_OK, or the error of the last path tried. */
int dwunw_stack_reader_read(struct dwunw_stack_reader *r, uint64_t addr, void *buf, size_t len);
/* Registers of the attached thread. */
int dwunw_stack_reader_regs(struct dwunw_stack_reader *r, struct dwunw_regs *out);
/* Resume the attached thread (safe to call when not attached). After an attach that timed out:
 * DWUNW_OK once the late stop was seen and the thread resumed, DWUNW_ERR_IO (ETIMEDOUT) while it
 * still has not stopped (see above). */
int dwunw_stack_reader_detach(struct dwunw_stack_reader *r);

#ifdef __cplusplus
}
#endif

#endif /* DWUNW_H */
