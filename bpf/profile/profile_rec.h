/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile: what its BPF program hands user space besides the records (profile.h): the stack-id
 * and cookie conventions of a sample (--aggregate's maps are the walker's: kwalk/kwalk_agg.h).
 * Included by profile.h (BPF and user side).
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

#endif /* DWUNW_PROFILE_REC_H */
