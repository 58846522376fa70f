/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * In-kernel aggregation of complete walks (a tool's --aggregate): the keys and values of the maps
 * kwalk_agg.bpf.h keeps and kwalk_agg_user.c drains. Included from BPF (after vmlinux.h) and from
 * user space.
 *
 * A walked stack is stored once under its key (a 64-bit hash of its pcs and origins, its length
 * and end status): kw_agg_stacks. Counts per (pid, tid, kernel stack id, stack key, comm): a
 * count and a sum (what the tool adds per event: 1 a sample, the span's nanoseconds). Two count
 * maps: BPF counts into kw_agg_counts[kw_agg_gen & 1] while user space drains the other (flipped,
 * then waited out with kw_agg_inflight).
 */
#ifndef DWUNW_KWALK_AGG_H
#define DWUNW_KWALK_AGG_H

#include "kwalk_format.h"

struct kw_agg_skey {
	__u64 hash;
	__u32 n;             /* frames */
	__u32 status;        /* enum kw_status (a complete one) */
};

struct kw_agg_stack {        /* laid out as kw_scratch's pcs then how (copied from there at once) */
	__u64 pcs[KW_MAX_FRAMES];
	__u8 how[KW_MAX_FRAMES];
};

struct kw_agg_key {
	__u32 pid;
	__u32 tid;
	__s32 kstack;        /* the tool's kernel stack id */
	__u32 pad;
	struct kw_agg_skey s;
	char comm[16];       /* the thread's name when the tool keys by it (else zero) */
};

struct kw_agg_val {
	__u64 count;         /* events */
	__u64 sum;           /* the tool's amount summed over them */
};

#define KW_AGG_STACKS 16384  /* distinct walked stacks (~1.2 KB each, allocated as used) */
#define KW_AGG_KEYS 65536    /* distinct keys per drain, per count map */
#define KW_AGG_HOLDS 16384   /* processes held at once (kwalk_hold.bpf.h) */

#endif /* DWUNW_KWALK_AGG_H */
