/* SPDX-License-Identifier: GPL-2.0-only */
/* profile: definitions shared by profile.bpf.c and profile.c. */
#ifndef DWUNW_PROFILE_H
#define DWUNW_PROFILE_H

#include "runtime/capture.h"

#define PR_MAX_STACK_DEPTH 127       /* frames in a bpf_get_stackid() stack */
#define PR_MAX_FILTER 1024           /* -p / -L entries */
#define PR_COMM_LEN 16

enum pr_unwind {
	PR_UNWIND_FP = 0,    /* bpf_get_stackid(BPF_F_USER_STACK), as libbpf-tools profile */
	PR_UNWIND_DWARF = 1, /* registers + stack window, unwound by libdwunw in user space */
	PR_UNWIND_KERNEL = 2, /* walked in the BPF program (kwalk.bpf.h); a walk that stops short
	                       * sends a stop notice, then the dwarf-mode snapshot */
};

/*
 * Stack ids carried by each sample: >= 0 an id in stack_traces, < 0 a negative errno from
 * bpf_get_stackid, PR_STACK_NONE when not asked for (-U, -K) or not applicable (a kernel
 * thread has no user stack).
 */
#define PR_STACK_NONE (-1000000)

/* Records of profile's own (besides CAP_KIND_SNAPSHOT, whose cookie/aux are in pr_cookie). */
enum pr_rec_kind {
	PR_REC_SAMPLE = CAP_KIND_TOOL, /* fp mode, or no user stack to capture */
	PR_REC_EXEC,                   /* a process exec'd: its maps and addresses changed */
};

struct pr_exec_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pad;
};

struct pr_sample_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 tid;
	__s32 kstack;        /* kernel stack id */
	__s32 ustack;        /* user stack id (fp) */
	__u32 cpu;
	__u32 flags;         /* PR_S_* */
};

#define PR_S_KTHREAD   (1u << 0) /* no user context (kernel thread) */
#define PR_S_LOST_SNAP (1u << 1) /* dwarf mode: the snapshot could not be sent; ustack is fp */
#define PR_S_IN_EXEC   (1u << 2) /* inside execve: the user registers and memory may be two programs' */
#define PR_S_EXEC_NEW  (1u << 3) /* ... the new image's memory installed, the registers still the old one's */

/*
 * A dwarf-mode snapshot's cookie: kernel stack id in the low 32 bits, cpu above; its aux: the
 * frame-pointer user stack id (fallback for code no unwinder table covers).
 */
#define PR_COOKIE(kid, cpu) ((__u64)(__u32)(kid) | ((__u64)(cpu) << 32))
#define PR_COOKIE_KSTACK(c) ((__s32)(__u32)(c))
#define PR_COOKIE_CPU(c)    ((__u32)((c) >> 32))

enum pr_counter {
	PR_CNT_SAMPLES = 0,     /* perf events that ran the program */
	PR_CNT_FILTERED,        /* not a selected process/thread, or idle */
	PR_CNT_SNAP_LOST,       /* snapshot not sent (buffer full); a small record went instead */
	PR_CNT_REC_LOST,        /* no record at all could be sent */
	PR_CNT_PY_LOST,         /* a Python chain could not be sent (its stack shows native frames only) */
	PR_CNT_FOLLOW_FULL,     /* -- COMMAND: a child not followed (the filter map full) */
	PR_CNT_MAX = 8,
};

#endif /* DWUNW_PROFILE_H */
