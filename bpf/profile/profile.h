/* SPDX-License-Identifier: GPL-2.0-only */
/* profile: definitions shared by profile.bpf.c and profile.c. */
#ifndef DWUNW_PROFILE_H
#define DWUNW_PROFILE_H

#include "runtime/capture.h"
#include "kwalk/kwalk_format.h"
#include "profile_rec.h"
#include "runtime/select.h"

#define PR_MAX_STACK_DEPTH 127       /* frames in a bpf_get_stackid() stack */
#define PR_COMM_LEN 16

enum pr_unwind {
	PR_UNWIND_FP = 0,    /* bpf_get_stackid(BPF_F_USER_STACK), as libbpf-tools profile */
	PR_UNWIND_DWARF = 1, /* registers + stack window, unwound by libdwunw in user space */
	PR_UNWIND_KERNEL = 2, /* walked in the BPF program (kwalk.bpf.h); a walk that stops short
	                       * sends a stop notice, then the dwarf-mode snapshot */
};


/* Records of profile's own (besides CAP_KIND_SNAPSHOT, whose cookie/aux are in pr_cookie). */
enum pr_rec_kind {
	PR_REC_SAMPLE = CAP_KIND_TOOL, /* fp mode, or no user stack to capture */
	PR_REC_EXEC,                   /* a process exec'd: its maps and addresses changed */
};

struct pr_exec_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pad;
	__u64 ts;            /* bpf_ktime_get_ns(): the perf buffer's reader orders by it */
};

struct pr_sample_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 tid;
	__s32 kstack;        /* kernel stack id */
	__s32 ustack;        /* user stack id (fp) */
	__u32 cpu;
	__u32 flags;         /* PR_S_* */
	__u64 ts;            /* bpf_ktime_get_ns() at the event (the perf buffer's order) */
};

#define PR_S_KTHREAD   (1u << 0) /* no user context (kernel thread) */
#define PR_S_LOST_SNAP (1u << 1) /* dwarf mode: the snapshot could not be sent; ustack is fp */
#define PR_S_IN_EXEC   (1u << 2) /* inside execve: the user registers and memory may be two programs' */
#define PR_S_EXEC_NEW  (1u << 3) /* ... the new image's memory installed, the registers still the old one's */


enum pr_counter {
	PR_CNT_SAMPLES = 0,     /* perf events that ran the program */
	PR_CNT_FILTERED,        /* not a selected process/thread, or idle */
	PR_CNT_SNAP_LOST,       /* snapshot not sent (buffer full); a small record went instead */
	PR_CNT_REC_LOST,        /* no record at all could be sent */
	PR_CNT_PY_LOST,         /* a Python chain could not be sent (its stack shows native frames only) */
	PR_CNT_FOLLOW_FULL,     /* -- COMMAND: a child not followed (the filter map full) */
	PR_CNT_AGG,             /* --aggregate: complete walks counted in agg_counts (no record) */
	PR_CNT_AGG_FULL,        /* --aggregate: a map was full, the walk went as a record */
	PR_CNT_MAX = 8,
};


#endif /* DWUNW_PROFILE_H */
