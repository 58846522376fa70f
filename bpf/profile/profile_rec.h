/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile: what its BPF program hands user space besides the records (profile.h): the stack-id
 * and cookie conventions of a sample, and the keys of the --aggregate maps (read by
 * profile_kagg.c). Included by profile.h (BPF and user side).
 */
#ifndef DWUNW_PROFILE_REC_H
#define DWUNW_PROFILE_REC_H

#include "kwalk/kwalk_format.h"

/*
 * Stack ids carried by each sample: >= 0 an id in stack_traces, < 0 a negative errno from
 * bpf_get_stackid, PR_STACK_NONE when not asked for (-U, -K) or not applicable (a kernel
 * thread has no user stack).
 */
#define PR_STACK_NONE (-1000000)

/*
 * A dwarf-mode snapshot's cookie: kernel stack id in the low 32 bits, cpu above; its aux: the
 * frame-pointer user stack id (fallback for code no unwinder table covers).
 */
#define PR_COOKIE(kid, cpu) ((__u64)(__u32)(kid) | ((__u64)(cpu) << 32))
#define PR_COOKIE_KSTACK(c) ((__s32)(__u32)(c))
#define PR_COOKIE_CPU(c)    ((__u32)((c) >> 32))

/*
 * --aggregate (kernel mode): complete walks counted in BPF maps, drained by user space per
 * interval and at exit, instead of one record per sample. A walked stack is stored once under
 * its key (a 64-bit hash of its pcs and origins, its length and end status); a count per
 * (pid, tid, kernel stack id, stack key). Two count maps: BPF counts into agg_counts[agg_gen & 1]
 * while user space drains the other (flipped, then waited out with agg_inflight).
 */
struct pr_agg_skey {
	__u64 hash;
	__u32 n;             /* frames */
	__u32 status;        /* enum kw_status (a complete one) */
};

struct pr_agg_stack {        /* laid out as kw_scratch's pcs then how (copied from there at once) */
	__u64 pcs[KW_MAX_FRAMES];
	__u8 how[KW_MAX_FRAMES];
};

struct pr_agg_ckey {
	__u32 pid;
	__u32 tid;
	__s32 kstack;
	__u32 pad;
	struct pr_agg_skey s;
};

#define PR_AGG_STACKS 16384  /* distinct walked stacks (~1.2 KB each, allocated as used) */
#define PR_AGG_KEYS 65536    /* distinct (pid, tid, stacks) per interval, per count map */

#endif /* DWUNW_PROFILE_REC_H */
