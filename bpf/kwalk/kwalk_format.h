/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * In-kernel unwind tables: the layout shared by the BPF walker (kwalk.bpf.h) and the loader that
 * fills its maps from libdwunw's tables (kwalk_user.c). Included from BPF (after vmlinux.h) and
 * from user space.
 *
 * Maps (all sized by user space before load, from a memory budget):
 *   kw_rows    ARRAY u32      every module's rows, one run per module, sorted by pc:
 *                             (pc & 0xffff) << 16 | global rule id. 4 bytes per row.
 *   kw_blocks  ARRAY u32      per module, one entry per 2^shift bytes of code (+1 sentinel): the
 *                             global index of the row covering the block's first byte. A look-up
 *                             is a direct index, then a binary search of the short run of rows
 *                             starting inside the block (16-bit pcs suffice: a block is <= 32 KiB).
 *   kw_rules   ARRAY kw_rule  rules deduplicated across every module and process (id 0 = END).
 *   kw_mods    ARRAY kw_mod   module slots (shared by every process mapping the same file).
 *   kw_procs   HASH pid -> kw_proc   executable mappings of a process, sorted by start: written by
 *                             user space from /proc/PID/maps, or entered by the BPF side from
 *                             exec, fork and mmap (kwalk_procmap.bpf.h), freed at exit.
 *   kw_files   HASH kw_file_key -> kw_file   a loaded module by the identity a mapping shows the
 *                             kernel (superblock dev, inode, size): how the BPF side finds the
 *                             module slot of a file a new process maps, with no load per process.
 *   kw_peer_pcs ARRAY u32     only for the peer walker (plain binary search over full pcs).
 */
#ifndef DWUNW_KWALK_FORMAT_H
#define DWUNW_KWALK_FORMAT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "runtime/capture.h"

#define KW_MAX_FRAMES      128     /* frames per walk (kw_max_frames may lower it) */
#define KW_MAX_MAPS        128     /* executable mappings per process */
#define KW_MAX_SHIFT       15      /* largest block: 32 KiB (16-bit row pcs stay unambiguous) */
#define KW_MAX_RULES       65536   /* rule ids are 16 bits */
#define KW_RUN_STEPS       16      /* binary-search steps inside a block (runs < 64 k rows) */
#define KW_MAP_STEPS       8       /* binary-search steps over a process's mappings */

#define KW_ROW(pc16, rule) ((__u32)(pc16) << 16 | (__u32)(rule))
#define KW_ROW_PC16(row)   ((row) >> 16)
#define KW_ROW_RULE(row)   ((row) & 0xffff)

/* kw_rule.cfa_type */
enum kw_cfa {
	KW_CFA_END = 0,            /* no CFI for this pc (the gap after an FDE) */
	KW_CFA_REG,                /* CFA = reg + cfa_off */
	KW_CFA_DEREF,              /* CFA = *(reg + cfa_off) + cfa_add */
	KW_CFA_PLT,                /* x86_64 PLT: CFA = rsp + cfa_off + ((rip & 15) >= cfa_add ? 8 : 0) */
	KW_CFA_UNSUP,              /* a rule the walker does not evaluate: why in cfa_reg (enum kw_why) */
};

/* Why a rule is KW_CFA_UNSUP (reported with the stop, for the differential test's output). */
enum kw_why {
	KW_WHY_NONE = 0,
	KW_WHY_CFA_EXPR,           /* a CFA expression other than breg, breg+deref(+const), the PLT's */
	KW_WHY_CFA_REG,            /* CFA register beyond the general registers */
	KW_WHY_RA_RULE,            /* return address not at CFA + 8k */
	KW_WHY_REG_RULE,           /* a callee-saved register rule other than offset/same/undefined */
	KW_WHY_OFFSET,             /* an offset that does not fit the packed rule */
	KW_WHY_NO_CFA,             /* no CFA rule at all */
};

/* kw_rule.flags */
#define KW_RF_SIGNAL   0x01        /* CIE 'S': a signal trampoline if its code is the restorer */
#define KW_RF_RA_UNDEF 0x02        /* no return address: the outermost frame */
#define KW_RF_WINDOW   0x04        /* the return address and every saved slot lie in [CFA-64, CFA) */
#define KW_RF_RA_LR    0x08        /* arm64: no rule for x30: the return address is still in x30 */

/*
 * Registers a rule may restore, by slot. x86_64: the callee-saved rbx rbp r12 r13 r14 r15.
 * arm64: x19 .. x29 and x30 (the link register, which a caller's CFA never needs but whose
 * saved value a signal frame's caller may). The same header is read by the BPF object and the
 * loader of one architecture (the cross build compiles both for arm64).
 */
#if defined(__TARGET_ARCH_arm64) || (!defined(__TARGET_ARCH_x86) && defined(__aarch64__))
#define KW_ARM64   1
#define KW_NSAVED  12
#define KW_NREGS   32              /* x0 .. x30, sp */
#define KW_SP      31
#define KW_LR      30
#else
#define KW_ARM64   0
#define KW_NSAVED  6
#define KW_NREGS   16              /* rax .. r15 */
#define KW_SP      7
#define KW_LR      16              /* the return-address column (not a register) */
#endif

struct kw_rule {
	__u8 cfa_type;             /* enum kw_cfa */
	__u8 cfa_reg;              /* DWARF register number (< KW_NREGS) */
	__u8 flags;                /* KW_RF_* */
	__s8 ra_off;               /* return address at CFA + 8 * ra_off (x86_64: -1) */
	__s32 cfa_off;
	__s16 cfa_add;
	__u16 saved;               /* bit i: slot i is at CFA + 8 * off[i] */
	__u32 undef_regs;          /* DWARF registers (bits) undefined in the caller */
	__s8 off[KW_NSAVED];
};                                 /* x86_64 24 bytes, arm64 28 */

struct kw_mod {
	__u32 gen;                 /* bumped when the slot is (re)filled; 0 = empty */
	__u32 row_base;            /* kw_rows index of row 0 */
	__u32 nrows;
	__u32 blk_base;            /* kw_blocks index of block 0 (nblocks + 1 entries) */
	__u32 nblocks;
	__u32 shift;               /* block = 2^shift bytes of module addresses */
	__u64 text_lo;             /* module address of block 0 (the first row's pc) */
	__u64 text_hi;             /* end of the last row */
};

struct kw_map {
	__u64 start;               /* process addresses [start, end) */
	__u64 end;
	__u64 bias;                /* module address = pc - bias */
	__u32 mod;                 /* kw_mods slot */
	__u32 gen;                 /* its gen when mapped: a reused slot is not used for this map */
};

/* A file as the kernel sees it in a mapping: dev is the kernel's encoding (major << 20 | minor),
 * the one /proc/PID/maps prints split; [vdso]: dev 0, ino 0, size = the mapping's length. */
struct kw_file_key {
	__u64 dev;
	__u64 ino;
	__u64 size;
};

#define KW_FILE_SEGS 4
struct kw_file {
	__u32 slot;                /* kw_mods index */
	__u32 gen;                 /* its gen (kw_map.gen of the mappings entered from this) */
	__u32 nsegs;
	__u32 pad;
	struct {
		__u64 off_lo;      /* file offsets [off_lo, off_hi) of a PT_LOAD (off_lo page-aligned) */
		__u64 off_hi;
		__s64 delta;       /* p_vaddr - p_offset: module address = file offset + delta */
	} segs[KW_FILE_SEGS];
};

struct kw_proc {
	__u32 nmaps;
	__u32 image;               /* which exec the mappings are of (the BPF side numbers them;
	                            * a fork's copy keeps its parent's; 0: loaded from /proc) */
	struct kw_map maps[KW_MAX_MAPS];
};

/* Why a walk stopped (struct kw_event.status). OK, DEPTH and NO_CODE are complete walks
 * (KW_ST_COMPLETE); the others make the event fall back to the snapshot. */
enum kw_status {
	KW_ST_OK = 0,              /* outermost frame reached (return address undefined or 0) */
	KW_ST_DEPTH,               /* kw_max_frames reached */
	KW_ST_NO_CODE,             /* pc outside every executable VMA: the chain ends in garbage
	                            * (the snapshot path stops there too: DWUNW_ERR_NO_MODULE) */
	KW_ST_NO_PROC,             /* the process has no mappings loaded yet */
	KW_ST_NO_MAPPING,          /* pc outside every loaded executable mapping (JIT, new dlopen) */
	KW_ST_NO_TABLE,            /* the module's table is not loaded (budget, evicted, no CFI) */
	KW_ST_NO_DWARF,            /* the table has no row for the pc */
	KW_ST_UNSUP,               /* a rule the walker does not evaluate (stop_why says which) */
	KW_ST_REG_UNKNOWN,         /* the CFA needs a register whose value is not known */
	KW_ST_READ_FAULT,          /* a stack read failed (stop_addr) */
	KW_ST_NO_PROGRESS,         /* the stack pointer did not move outward */
	KW_ST_BUSY,                /* the per-CPU scratch was taken (nested program) */
	KW_ST_MAX,
};
#define KW_ST_COMPLETE(s) ((s) <= KW_ST_NO_CODE)

/* Per frame: how its registers were recovered (the library's enum dwunw_how values). */
#define KW_HOW_INITIAL 0
#define KW_HOW_CFI     1
#define KW_HOW_SIGNAL  2

#define KW_KIND_EVENT (CAP_KIND_TOOL + 8)  /* struct kw_event */

/* struct kw_event.flags */
#define KW_EV_SNAPSHOT 0x1         /* snap holds a snapshot (cap_record + stack bytes follow) */

/*
 * One sample: the walker's frames, and (when the walk did not complete, or always in the
 * differential test) the snapshot the user-space unwinder needs, in the same record.
 */
struct kw_event {
	struct cap_rec_hdr h;      /* kind KW_KIND_EVENT, hdr_size = sizeof(struct kw_event) */
	__u32 pid;
	__u32 tid;
	__u64 ts;
	__u64 cookie;              /* caller-defined, as cap_record's (profile: kernel stack id + cpu) */
	__s64 aux;                 /* caller-defined (profile: the frame-pointer stack id) */
	__u32 flags;               /* KW_EV_* */
	__u16 nframes;             /* pcs[] used */
	__u8 status;               /* enum kw_status */
	__u8 stop_why;             /* enum kw_why when status is KW_ST_UNSUP */
	__u32 stop_rule;           /* global rule id at the stop, ~0 if none */
	__u32 stop_frame;          /* frame whose step failed */
	__u64 stop_pc;             /* its pc */
	__u64 stop_addr;           /* module address (no row) or the address that faulted */
	__u64 pcs[KW_MAX_FRAMES];
	__u8 how[KW_MAX_FRAMES];   /* KW_HOW_* */
	struct cap_record snap;    /* valid with KW_EV_SNAPSHOT; its stack bytes follow */
};

/* Per-CPU counters (kw_counters: one value per CPU, counters by this index), summed by user space. */
enum kw_counter {
	KW_C_SAMPLES = 0,          /* walks */
	KW_C_FRAMES,               /* frames walked */
	KW_C_FALLBACK,             /* walks that stopped short (status not OK/DEPTH) */
	KW_C_LOST,                 /* events that could not be output */
	KW_C_PEER_SAMPLES,         /* the same for the peer walker */
	KW_C_PEER_FRAMES,
	KW_C_PEER_FALLBACK,
	KW_C_BENCH_SAMPLES,        /* the walk-only (timing) program */
	KW_C_BENCH_FRAMES,
	KW_C_BENCH1_SAMPLES,       /* one-frame walks (the fixed cost per sample) */
	KW_C_PEER1_SAMPLES,
	KW_C_CACHE_HITS,           /* frames whose rule came from the per-CPU cache (main and bench) */
	KW_C_CHUNK_READS,          /* stack chunk reads (main and bench) */
	KW_C_ST_BASE,              /* + status: walks per stop reason */
	KW_C_MAX = KW_C_ST_BASE + KW_ST_MAX,
};

#endif /* DWUNW_KWALK_FORMAT_H */
