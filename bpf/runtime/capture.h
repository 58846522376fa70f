/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Record layout shared by the BPF capture helpers (capture.bpf.h) and user space
 * (capture_user.c): a snapshot of the user registers and of a window of the user stack,
 * taken at a uprobe, uretprobe or perf event and sent through a ring buffer or a perf buffer.
 *
 * Included from BPF (after vmlinux.h, which defines __u8..__u64) and from user space.
 */
#ifndef DWUNW_CAPTURE_H
#define DWUNW_CAPTURE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Stack window: default and maximum (the per-CPU scratch buffer holds the maximum). */
#define CAP_DEF_STACK     16384
#define CAP_MAX_STACK     65536
/*
 * A perf-buffer sample is limited by the u16 size of its perf_event_header: header (8) +
 * raw size (4) + data, padded to 8. Records sent through the perf buffer are cut to this.
 */
#define CAP_PERF_MAX_DATA 65512

/* Registers kept per record, indexed by DWARF number (x86_64 uses 0..15, arm64 and mips 0..31). */
#define CAP_NREGS         32
/* Pending return probes carried in each record (see struct cap_thread). */
#define CAP_MAX_PENDING   8

/*
 * Change detection above the window: when the stack goes on past the window, CAP_NSAMPLES pieces
 * of CAP_SAMPLE_BYTES, spread evenly from the window's end to the stack's end, are copied at the
 * event too. User space checks them against the live memory it reads there later
 * (dwunw_capture_sampled): a difference means the frames read live may be other frames by then.
 */
#define CAP_NSAMPLES      8
#define CAP_SAMPLE_BYTES  64

/* Architectures: the values of enum dwunw_arch. */
#define CAP_ARCH_X86_64   1
#define CAP_ARCH_ARM64    2
#define CAP_ARCH_MIPS32   3

/* Every record starts with these 8 bytes; tools define kinds from CAP_KIND_TOOL up. */
struct cap_rec_hdr {
	__u16 kind;
	__u16 hdr_size;    /* sizeof the fixed part of this kind (the stack bytes follow it) */
	__u32 flags;
};

enum cap_kind {
	CAP_KIND_SNAPSHOT = 1, /* struct cap_record */
	CAP_KIND_MAPEV = 2,    /* struct mmap_ev_rec: a mapping change (mmap_ev.h) */
	CAP_KIND_PY = 3,       /* struct py_rec: the thread's Python frames, just before its stack (py.h) */
	CAP_KIND_PROC = 4,     /* struct cap_proc_rec: a process forked or gone, in order with its records */
	CAP_KIND_TOOL = 16,
};

/* A process's life as the tools' user sides need it (mapping views, what is held per process). */
enum cap_proc_op {
	CAP_PROC_FORK = 1,     /* pid is a new process forked by parent (its view: a copy of parent's) */
	CAP_PROC_EXIT,         /* pid's last thread exited: no record of pid follows */
};

struct cap_proc_rec {
	struct cap_rec_hdr h;  /* kind CAP_KIND_PROC */
	__u32 op;              /* enum cap_proc_op */
	__u32 pid;             /* tgid */
	__u32 parent;          /* CAP_PROC_FORK: the parent's tgid */
	__u32 pad;
	__u64 ts;              /* bpf_ktime_get_ns(): the perf buffer's reader orders by it */
};

/* struct cap_record.flags */
#define CAP_F_RETPROBE     (1u << 0) /* taken in a return probe: pc is a resume point in the caller */
#define CAP_F_VMA_CLAMPED  (1u << 1) /* the window was cut at the end of the stack's VMA */
#define CAP_F_VMA_UNKNOWN  (1u << 2) /* bpf_find_vma failed: the size was found by halving */
#define CAP_F_READ_FAILED  (1u << 3) /* no stack bytes could be read (stack_size is 0) */
#define CAP_F_PERF_CUT     (1u << 4) /* cut to fit a perf-buffer sample */
#define CAP_F_PENDING_FULL (1u << 5) /* more pending return probes than CAP_MAX_PENDING */
#define CAP_F_FROZEN       (1u << 6) /* --unwind=freeze: the thread was sent SIGSTOP at the event (freeze.h) */

/*
 * A return probe pending on the thread when the record was taken. The kernel replaces the
 * return address of a probed function with its [uprobes] trampoline at function entry (after
 * the entry handlers ran): `ret` is the real one, `slot` where it lies on the stack (x86_64).
 * slot with CAP_SLOT_LR set (arm64, mips): the address was in the link register at entry, and
 * slot & ~CAP_SLOT_LR is the stack pointer at entry. The function's prologue may have stored
 * the trampoline's address anywhere in its frame, between the next inner pending call's entry
 * stack pointer (or the record's) and its own: dwunw_cap_patch replaces it there by value
 * (struct cap_record.tramp), and in the link register itself.
 */
#define CAP_SLOT_LR 1ull
struct cap_pending_slot {
	__u64 slot;
	__u64 ret;
};

struct cap_record {
	struct cap_rec_hdr h;  /* kind CAP_KIND_SNAPSHOT, hdr_size = sizeof(struct cap_record) */
	__u32 pid;             /* tgid */
	__u32 tid;
	__u64 ts;              /* bpf_ktime_get_ns() */
	__u64 cookie;          /* caller-defined (memleak: event id) */
	__s64 aux;             /* caller-defined (memleak: bpf_get_stackid() of the same event) */
	__u32 arch;            /* CAP_ARCH_* */
	__u32 stack_size;      /* bytes in stack[] */
	__u32 want;            /* window size asked for */
	__u32 npending;        /* entries used in pending[] */
	__u64 pc;
	__u64 valid;           /* bit n set: regs[n] holds a value */
	__u64 regs[CAP_NREGS];
	__u64 stack_start;     /* user address of stack[0] (the stack pointer) */
	__u64 tramp;           /* the uretprobe trampoline's address when a CAP_SLOT_LR entry is pending, else 0 */
	struct cap_pending_slot pending[CAP_MAX_PENDING];
	__u64 sample_lo;       /* address of sample 0 */
	__u32 sample_step;     /* bytes from one sample to the next */
	__u32 sample_ok;       /* bit i: samples[i] holds the bytes at sample_lo + i * sample_step */
	__u8 samples[CAP_NSAMPLES][CAP_SAMPLE_BYTES];
	__u8 stack[];
};

/*
 * Per-thread stack of pending calls (BPF hash map tid -> struct cap_thread), pushed at a
 * function's entry probe and popped at its return probe. `slot`/`ret` feed the records'
 * pending[] list; arg0/arg1/cookie/flags are the tool's (memleak: size, pointer argument,
 * event id, its flags).
 */
struct cap_pending {
	__u64 sp;              /* stack pointer at entry (matches the return: see cap_pending_match) */
	__u64 slot;
	__u64 ret;
	__u64 arg0;
	__u64 arg1;
	__u64 cookie;
	__u64 ts;
	__u32 flags;
	__u32 kind;
};

struct cap_thread {
	__u32 depth;
	__u32 overflow;        /* pushes refused because the stack was full */
	/* The VMA that held the thread's stack pointer at its last snapshot: bpf_find_vma costs
	 * microseconds, so it runs again only when sp leaves this range. */
	__u64 stack_lo;
	__u64 stack_hi;
	struct cap_pending e[CAP_MAX_PENDING];
};

/* Per-CPU counters (array map cap_counters), summed by user space. */
enum cap_counter {
	CAP_CNT_OUTPUT_FAILED = 0, /* ring buffer full / perf output error: record lost */
	CAP_CNT_READ_FAILED,       /* stack window unreadable */
	CAP_CNT_VMA_UNKNOWN,       /* bpf_find_vma failed, size found by halving */
	CAP_CNT_PENDING_FULL,      /* push refused: CAP_MAX_PENDING calls already pending */
	CAP_CNT_THREADS_FULL,      /* no room for a new thread in cap_threads */
	CAP_CNT_RET_UNMATCHED,     /* a return probe without its pending entry */
	CAP_CNT_MAX = 8,
};

#endif /* DWUNW_CAPTURE_H */
