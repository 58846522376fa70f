/* SPDX-License-Identifier: GPL-2.0-only */
/* offcputime: definitions shared by offcputime.bpf.c and its user space. */
#ifndef DWUNW_OFFCPUTIME_H
#define DWUNW_OFFCPUTIME_H

#include "runtime/capture.h"

#define OC_MAX_STACK_DEPTH 127       /* frames in a bpf_get_stackid() stack */
#define OC_MAX_FILTER 1024           /* -p / -t entries */
#define OC_COMM_LEN 16
#define OC_MAX_THREADS 65536         /* threads off CPU at once (the `start` map) */

enum oc_unwind {
	OC_UNWIND_FP = 0,    /* bpf_get_stackid(BPF_F_USER_STACK), as libbpf-tools offcputime */
	OC_UNWIND_DWARF = 1, /* registers + stack window at the switch-out, unwound by libdwunw */
	OC_UNWIND_KERNEL = 2, /* walked in the BPF program at the switch-out (kwalk) */
};

/* A stack id: >= 0 in stack_traces, < 0 a negative errno, OC_STACK_NONE not asked / no user. */
#define OC_STACK_NONE (-1000000)

enum oc_rec_kind {
	OC_REC_OFF = CAP_KIND_TOOL, /* a thread ran again: its time off CPU */
	OC_REC_EXEC,                /* a process exec'd: its maps and addresses changed */
	OC_REC_FORK,                /* a selected process forked: the child's maps are its copy */
};

/*
 * At the switch-in of a thread whose switch-out was recorded. In dwarf and kernel modes its user
 * stack went out at the switch-out (a snapshot or walker event whose cookie is OC_COOKIE(kstack,
 * seq)); `seq` pairs the two. In fp mode, or when that record was lost, the ids are here.
 */
struct oc_off_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 tid;
	__u32 seq;
	__u32 flags;         /* OC_F_* */
	__s32 kstack;
	__s32 ustack;        /* frame-pointer id */
	__u64 delta_ns;      /* switch-out -> switch-in */
	char comm[OC_COMM_LEN];
};

struct oc_exec_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pad;
};

struct oc_fork_rec {
	struct cap_rec_hdr h;
	__u32 parent;
	__u32 child;
};

#define OC_F_SENT      (1u << 0) /* the user stack went out at the switch-out (seq) */
#define OC_F_KTHREAD   (1u << 1) /* no user context */
#define OC_F_LOST_SNAP (1u << 2) /* the switch-out record could not be sent */
#define OC_F_IN_EXEC   (1u << 3) /* switched out inside execve: no user stack taken */
#define OC_F_FROZEN    (1u << 4) /* --unwind=freeze: stopped when switched in (runtime/freeze.h) */

#define OC_COOKIE(kid, seq) ((__u64)(__u32)(kid) | ((__u64)(seq) << 32))
#define OC_COOKIE_KSTACK(c) ((__s32)(__u32)(c))
#define OC_COOKIE_SEQ(c)    ((__u32)((c) >> 32))

/* The thread's switch-out, kept until it runs again. */
struct oc_start {
	__u64 ts;
	__u32 seq;
	__u32 flags;
	__s32 kstack;
	__s32 ustack;
};

enum oc_counter {
	OC_CNT_SWITCHES = 0,   /* switch-outs of selected threads */
	OC_CNT_OUT_OF_RANGE,   /* off-CPU spans outside -m/-M */
	OC_CNT_SNAP_LOST,      /* switch-out record not sent (buffer full) */
	OC_CNT_REC_LOST,       /* switch-in record not sent: that span is lost */
	OC_CNT_START_FULL,     /* `start` map full: that span is lost */
	OC_CNT_MAX = 8,
};

#endif /* DWUNW_OFFCPUTIME_H */
