/* SPDX-License-Identifier: GPL-2.0-only */
/* offcputime: definitions shared by offcputime.bpf.c and its user space. */
#ifndef DWUNW_OFFCPUTIME_H
#define DWUNW_OFFCPUTIME_H

#include "runtime/capture.h"
#include "kwalk/kwalk_agg.h"
#include "runtime/select.h"

#define OC_MAX_STACK_DEPTH 127       /* frames in a bpf_get_stackid() stack */
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
	OC_REC_ON,                  /* --wall: an on-CPU sample (an oc_off_rec, delta_ns its period) */
};

/*
 * At the switch-in of a thread whose switch-out was recorded (OC_REC_OFF), or at an on-CPU
 * sample (OC_REC_ON, --wall: its stacks taken as a switch-out's, delta_ns the sampling period). In dwarf and kernel modes its user
 * stack went out at the switch-out (a snapshot or walker event whose cookie is OC_COOKIE(kstack,
 * seq)); `seq` pairs the two. In fp mode, or when that record was lost, the ids are here.
 */
/*
 * --waker: who woke the thread (sched_waking, in the waker's context), kept by wakee tid until
 * its switch-in and sent with its span. Its user stack as a switch-out's: in dwarf/kernel mode a
 * record with seq | OC_SEQ_WAKER sent at the wakeup, else a frame-pointer id.
 */
struct oc_waker {
	__u32 pid;
	__u32 seq;
	__u32 flags;         /* OC_F_* of its stacks */
	__s32 kstack;        /* taken with -U too: an interrupt's frames say there is no waker task */
	__s32 ustack;
	__u32 pad;
	char comm[OC_COMM_LEN];
};

#define OC_SEQ_WAKER (1u << 31) /* a waker's record (switch-outs' seqs have it clear) */

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
	struct oc_waker waker; /* --waker only (the record ends before it otherwise); OC_F_WOKEN */
};

struct oc_exec_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pad;
};

#define OC_F_SENT      (1u << 0) /* the user stack went out at the switch-out (seq) */
#define OC_F_KTHREAD   (1u << 1) /* no user context */
#define OC_F_LOST_SNAP (1u << 2) /* the switch-out record could not be sent */
#define OC_F_IN_EXEC   (1u << 3) /* switched out inside execve: no user stack taken */
#define OC_F_WOKEN     (1u << 4) /* --waker: the span's waker is in `waker` */
#define OC_F_FROZEN    (1u << 5) /* --unwind=freeze: stopped when switched in (runtime/freeze.h) */
#define OC_F_AGG       (1u << 6) /* --aggregate: the walk stored under skey, the span counted there */

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
	struct kw_agg_skey skey; /* OC_F_AGG */
};

enum oc_counter {
	OC_CNT_SWITCHES = 0,   /* switch-outs of selected threads */
	OC_CNT_OUT_OF_RANGE,   /* off-CPU spans outside -m/-M */
	OC_CNT_SNAP_LOST,      /* switch-out record not sent (buffer full) */
	OC_CNT_REC_LOST,       /* switch-in record not sent: that span is lost */
	OC_CNT_START_FULL,     /* `start` map full: that span is lost */
	OC_CNT_ON_SAMPLES,     /* --wall: on-CPU samples of selected threads */
	OC_CNT_ON_LOST,        /* --wall: on-CPU sample records not sent (buffer full) */
	OC_CNT_WAKEUPS,        /* --waker: wakeups of selected threads recorded */
	OC_CNT_WAKER_FULL,     /* --waker: `wakers` map full: that span shows no waker */
	OC_CNT_AGG,            /* --aggregate: spans counted in the kwalk_agg maps (no record) */
	OC_CNT_AGG_FULL,       /* --aggregate: the stack map full at the switch-out: the walk went as a record */
	OC_CNT_AGG_LOST,       /* --aggregate: the count map full at the switch-in: that span is lost */
	OC_CNT_MAX = 12,
};

#endif /* DWUNW_OFFCPUTIME_H */
