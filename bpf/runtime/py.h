/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Python frames read at the event (python.bpf.h) and described in user space (py_merge.h): the
 * per-process description user space loads (from libdwunw's dwunw_py_find / dwunw_py_offsets) and
 * the record the BPF program sends just before the event's stack record, for the same thread.
 */
#ifndef DWUNW_PY_H
#define DWUNW_PY_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define PY_MAX_FRAMES  96    /* frames read per event; more: PY_R_DEPTH */
#define PY_MAX_THREADS 64    /* thread states looked at to find the sampled thread's */
#define PY_MAX_PROCS   1024  /* python processes described at once */

/* map py_procs: tgid -> this */
struct py_proc {
	__u64 runtime_addr;  /* _PyRuntime */
	__u16 rt_interp_head, is_threads_head;
	__u16 ts_next, ts_cframe, ts_native_tid, cf_current_frame;
	__u16 fr_code, fr_previous, fr_prev_instr, fr_is_entry, fr_owner;
	__u8 entry_flag, owner_cstack;
};

/* map py_cost (per CPU): what reading the chains cost in the BPF program, summed */
struct py_cost {
	__u64 chains;        /* py_emit calls that read a chain */
	__u64 frames;        /* frames read */
	__u64 ns;            /* bpf_ktime_get_ns() around each read and send */
};

struct py_raw_frame {
	__u64 frame;
	__u64 code;
	__u64 prev_instr;
	__u8 is_entry, owner;
	__u8 pad[6];
};

/* struct py_rec.status */
enum py_status {
	PY_R_OK = 0,         /* the chain ended: frames[nframes - 1] is the thread's outermost */
	PY_R_NO_THREAD,      /* no thread state of this thread among the first PY_MAX_THREADS */
	PY_R_READ,           /* a read failed: the chain is cut after nframes */
	PY_R_DEPTH,          /* PY_MAX_FRAMES read and the chain goes on */
};

struct py_rec {
	struct cap_rec_hdr h;  /* kind CAP_KIND_PY, hdr_size = the bytes up to frames[nframes] */
	__u32 pid;
	__u32 tid;
	__u32 status;
	__u32 nframes;
	__u64 ts;              /* bpf_ktime_get_ns(), before its stack's (the perf buffer's order) */
	struct py_raw_frame frames[PY_MAX_FRAMES];
};

#endif /* DWUNW_PY_H */
