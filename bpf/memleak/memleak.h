/* SPDX-License-Identifier: GPL-2.0-only */
/* memleak: definitions shared by memleak.bpf.c and memleak's user space (memleak*.c). */
#ifndef DWUNW_MEMLEAK_H
#define DWUNW_MEMLEAK_H

#include "runtime/capture.h"

#define ML_MAX_STACK_DEPTH 127       /* frames in a bpf_get_stackid() stack (as upstream) */
#define ML_STACK_MAP_ENTRIES 10240   /* stack map entries (as upstream) */
#define ML_ALLOCS_ENTRIES 1000000    /* outstanding allocations tracked (as upstream) */
#define ML_COMBINED_ENTRIES 10240

enum ml_unwind {
	ML_UNWIND_FP = 0,    /* bpf_get_stackid() at the return probe, as upstream */
	ML_UNWIND_DWARF = 1, /* snapshot at the entry probe, unwound by libdwunw */
	ML_UNWIND_KERNEL = 2, /* walked at the entry probe in BPF (kwalk.bpf.h); a walk that stops
	                       * short sends a stop notice, then the snapshot; keyed as dwarf mode's */
};

/* Allocator functions (the pending entry's kind). */
enum ml_fn {
	ML_FN_MALLOC = 0,
	ML_FN_CALLOC,
	ML_FN_REALLOC,
	ML_FN_REALLOCARRAY,
	ML_FN_ALIGNED_ALLOC,
	ML_FN_POSIX_MEMALIGN,
	ML_FN_MEMALIGN,
	ML_FN_VALLOC,
	ML_FN_PVALLOC,
	ML_FN_MMAP,
	ML_FN_FREE,
	ML_FN_MUNMAP,
	ML_FN_NR,
};

/*
 * struct ml_alloc_info.key: what identifies the allocation's stack.
 *  fp mode:    the bpf_get_stackid() id (0 .. 2^31), or ML_KEY_FPERR | -error
 *  dwarf and kernel modes: ML_KEY_DWARF | event id (the cookie of its snapshot / walker record)
 *  either:     ML_KEY_LOST | reason, when its stack could not be sent
 */
#define ML_KEY_DWARF (1ull << 63)
#define ML_KEY_LOST  (1ull << 62)
#define ML_KEY_FPERR (1ull << 61) /* the lowest tag: below it, the value (ml_key_value) */

enum ml_lost_reason {
	ML_LOST_OUTPUT = 1,  /* ring buffer full / perf output failed */
};

struct ml_alloc_info {
	__u64 size;
	__u64 ts;            /* bpf_ktime_get_ns() at the allocator's return */
	__u64 key;
};

struct ml_combined {
	__u64 total_size;
	__u64 count;
};

/* Flags of a pending allocator call (struct cap_pending.flags). */
#define ML_P_SKIP   (1u << 0) /* filtered out (size, sampling): not recorded */
#define ML_P_NESTED (1u << 1) /* called inside another pending allocator call */
#define ML_P_LOST   (1u << 2) /* its snapshot record was lost */

/* Records of memleak's own (besides CAP_KIND_SNAPSHOT). */
enum ml_rec_kind {
	ML_REC_TRACE = CAP_KIND_TOOL, /* -t: one allocation or free */
	ML_REC_ALLOC,                 /* --allocated: one allocation made, freed later or not */
};

/* --allocated: an allocation that returned, under the key its allocs entry has (freed or not).
 * No time of its own: it is counted in the report whose drain takes it (the report's fence takes
 * every record sent before it), its stack found by its event id whatever the order its snapshot
 * came in, and it names no mapping; the age filter (-o) reads the allocs entry's ts. On the perf
 * buffer it takes the time of the record before it on its CPU (mostly its call's snapshot). */
struct ml_alloc_rec {
	struct cap_rec_hdr h;
	__u32 pid;           /* tgid: the process whose stacks the key names, following a tree */
	__u32 pad;
	__u64 key;           /* as struct ml_alloc_info.key */
	__u64 size;
};

struct ml_trace_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 tid;
	__u64 ts;
	__u64 addr;
	__u64 size;
	__u32 fn;            /* enum ml_fn */
	__u32 pad;
};

enum ml_counter {
	ML_CNT_ALLOCS_FULL = 0, /* allocs map full: allocation not tracked */
	ML_CNT_NESTED,          /* allocator calls inside another one, not recorded */
	ML_CNT_STACKID_FAILED,  /* bpf_get_stackid() failed (fp mode: shown under its reason) */
	ML_CNT_COMBINED_FULL,   /* -C aggregate map full */
	ML_CNT_NO_PENDING,      /* no room to remember an allocator call (not recorded) */
	ML_CNT_ALLOC_LOST,      /* --allocated: an allocation's record lost (buffer full) */
	ML_CNT_MAX = 8,
};

#endif /* DWUNW_MEMLEAK_H */
