// SPDX-License-Identifier: GPL-2.0
/*
 * profile: CPU samples by stack. One perf event per CPU (cpu-clock, or cycles where the PMU has
 * it) runs sample(); the kernel stack comes from bpf_get_stackid (the kernel unwinds itself).
 * User stack, --unwind=dwarf: a snapshot of the thread's user registers and stack window
 * (capture.bpf.h) unwound by libdwunw in user space, with the frame-pointer stack id as
 * fallback; --unwind=fp: bpf_get_stackid(BPF_F_USER_STACK) only; --unwind=kernel: the user
 * stack walked here from the tables in the kwalk maps (kwalk.bpf.h), the event carrying the
 * dwarf-mode snapshot after a stop notice when the walk stops short (kwalk_hybrid.bpf.h). Every sample becomes one record;
 * counting is done in user space (nothing is aggregated or lost silently here).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "runtime/capture.bpf.h"
#include "runtime/task.bpf.h"
#include "runtime/python.bpf.h"
#include "runtime/freeze.bpf.h"
#include "kwalk/kwalk.bpf.h"
#include "profile.h"
#include "runtime/select.bpf.h"   /* -p / -- COMMAND: tgids; -L: tids */

char LICENSE[] SEC("license") = "GPL";

PERCPU_COUNTERS(tool_counters, tool_count, PR_CNT_MAX) /* enum pr_counter */

const volatile __u32 unwind_mode = PR_UNWIND_DWARF;
const volatile __u32 want_user = 1;          /* not -K */
const volatile __u32 want_kernel = 1;        /* not -U */
const volatile __u32 include_idle = 0;       /* -I */
const volatile __u32 follow_forks = 0;       /* -- COMMAND: its children join `tgids` (its tree) */
const volatile __u32 aggregate = 0;          /* --aggregate: complete walks counted here */

/* max_entries set by user space (--stack-storage-size) */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, PR_MAX_STACK_DEPTH * sizeof(__u64));
} stack_traces SEC(".maps");

/* tid -> comm of the thread at its latest sample (read by user space for each new key) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, char[PR_COMM_LEN]);
} comms SEC(".maps");

/* ---- --aggregate: walked stacks counted in the kwalk_agg maps (kwalk/kwalk_agg.h) ----------- */

#define KW_AGG_ENABLED aggregate
#define KW_HOLD_ON(tgid, tid) selected(tgid, tid)
#include "kwalk/kwalk_agg.bpf.h"

/* KW_HYBRID_TAKE: a complete walk counted (1), or 0 (not --aggregate, a map full, the process
 * held: the record goes) */
static __always_inline int pr_agg_take(struct kw_walk *w, struct kw_scratch *s, __u32 pid, __u32 tid,
				       __u64 cookie)
{
	struct kw_agg_key k = { .pid = pid, .tid = tid, .kstack = PR_COOKIE_KSTACK(cookie) };
	int ok;

	/* a Python process's record carries its chain (sent just before): not counted here */
	if (!aggregate || bpf_map_lookup_elem(&py_procs, &pid) || kw_held(pid))
		return 0;
	if (kw_agg_stack_put(w, s, &k.s)) {
		tool_count(PR_CNT_AGG_FULL);
		return 0;
	}
	ok = kw_agg_count(&k, 1);
	tool_count(ok ? PR_CNT_AGG : PR_CNT_AGG_FULL);
	return ok;
}
#define KW_HYBRID_TAKE(w, s, pid, tid, cookie, aux) pr_agg_take(w, s, pid, tid, cookie)
#include "kwalk/kwalk_hybrid.bpf.h"

static __always_inline int selected(__u32 tgid, __u32 tid)
{
	if (!include_idle && tid == 0)
		return 0;
	return sel_thread(tgid, tid);
}

/* the mapping tracker's consumers: dwarf mode, mapping changes in order with the samples
 * (mappings.h) of the selected processes (every process without -p); --unwind=kernel: executable
 * mappings of the selected processes */
#define MMAP_EV_TRACED(tgid) sel_tgid(tgid)
#include "runtime/mmap_ev.bpf.h"
#define KW_TRACK_SELECTED(tgid, tid) selected(tgid, tid)
#define KW_TRACK_CHILD_SELECTED(ptgid) (follow_forks && selected(ptgid, ptgid))
#include "kwalk/kwalk_track.bpf.h"
/* --aggregate: kw_hold (kwalk_agg.bpf.h) last: it holds a process for the calls the others record */
#define MT_CONSUMERS(X) X(mmap_ev) X(kw_track) X(kw_hold)
#include "runtime/mmap_track.bpf.h"

/*
 * tgid -> the mm its image runs in, set at fork (the child's) and at exec (the new image's),
 * deleted at the process's exit: bounded by the live processes (not preallocated).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} pr_mms SEC(".maps");

/*
 * Inside execve the new program's memory is installed before its registers (the loader sets
 * them, then sched_process_exec fires): a sample there may pair the old program's pc and sp
 * with the new one's maps and stack. Until the new mm is installed, the registers and the memory
 * are the old image's, whose mappings user space still has (the exec record is not applied yet):
 * such a sample is taken like any other. After it, no user stack is taken; the sample says why:
 * PR_S_EXEC_NEW when the mm is known to be the new one, PR_S_IN_EXEC alone when the process's mm
 * was never seen (it started before profile).
 */
static __always_inline __u32 exec_state(struct task_struct *t, __u32 tgid)
{
	__u64 *mm;

	if (!bpf_core_field_exists(t->in_execve) || !BPF_CORE_READ_BITFIELD_PROBED(t, in_execve))
		return 0;
	mm = bpf_map_lookup_elem(&pr_mms, &tgid);
	if (mm && *mm == (__u64)t->mm)
		return 0; /* the old image still installed (or the new one complete: exec record sent) */
	return mm ? PR_S_IN_EXEC | PR_S_EXEC_NEW : PR_S_IN_EXEC;
}

SEC("perf_event")
int sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pr_sample_rec r = { .ts = bpf_ktime_get_ns() };
	char comm[PR_COMM_LEN];
	int kid = PR_STACK_NONE, uid = PR_STACK_NONE;
	int has_user = task->mm != NULL;
	__u32 exec = has_user ? exec_state(task, tgid) : 0;

	tool_count(PR_CNT_SAMPLES);
	if (!selected(tgid, tid)) {
		tool_count(PR_CNT_FILTERED);
		return 0;
	}
	bpf_get_current_comm(comm, sizeof(comm));
	bpf_map_update_elem(&comms, &tid, comm, BPF_ANY);
	if (want_kernel)
		kid = bpf_get_stackid(ctx, &stack_traces, 0);
	/* --unwind=kernel inside execve: walked while the old image is installed (its kw_procs
	 * entry stays until sched_process_exec), else counted with why */
	if (unwind_mode == PR_UNWIND_KERNEL && want_user && has_user && bpf_core_field_exists(task->in_execve) &&
	    BPF_CORE_READ_BITFIELD_PROBED(task, in_execve))
		kw_track_count(exec ? KW_TC_EXEC_GONE : KW_TC_EXEC_WALK);
	if (exec) {
		r.flags |= exec;
		has_user = 0;
	}
	if (want_user && has_user)
		uid = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);

	if (want_user && has_user && unwind_mode == PR_UNWIND_DWARF) {
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		struct cap_thread *t = cap_thread_get(tid, 1);

		if (py_emit(ctx, tgid, tid) < 0)
			tool_count(PR_CNT_PY_LOST);
		__u64 cookie = PR_COOKIE(kid, bpf_get_smp_processor_id());
		/* --unwind=freeze: the thread stopped at its return to user mode (irq_work) */
		__u32 cflags = frz_enabled && frz_claim(tgid, cookie) ? CAP_F_FROZEN : 0;
		long err = cap_snapshot(ctx, uregs, cookie, uid, cflags, t);

		if (cflags)
			frz_finish(tgid, err);
		if (!err)
			return 0;
		tool_count(PR_CNT_SNAP_LOST);
		r.flags |= PR_S_LOST_SNAP;
	}
	if (want_user && has_user && unwind_mode == PR_UNWIND_KERNEL) {
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		struct cap_thread *t = cap_thread_get(tid, 1);

		if (py_emit(ctx, tgid, tid) < 0)
			tool_count(PR_CNT_PY_LOST);
		if (kw_hybrid(ctx, uregs, PR_COOKIE(kid, bpf_get_smp_processor_id()), uid, t) == 0)
			return 0;
		tool_count(PR_CNT_SNAP_LOST);
		r.flags |= PR_S_LOST_SNAP;
	}
	r.h.kind = PR_REC_SAMPLE;
	r.h.hdr_size = sizeof(r);
	r.pid = tgid;
	r.tid = tid;
	r.kstack = kid;
	r.ustack = uid;
	r.cpu = bpf_get_smp_processor_id();
	if (!has_user && !exec)
		r.flags |= PR_S_KTHREAD;
	if (cap_emit(ctx, &r, sizeof(r)))
		tool_count(PR_CNT_REC_LOST);
	return 0;
}

/*
 * exec: user space forgets the process's maps (a pid keeps its number across exec, its samples
 * after it are another program's). Same channel as the samples, so it is seen in order.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(pr_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct pr_exec_rec r = {};
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u64 mm = (__u64)bpf_get_current_task_btf()->mm;

	if (selected(tgid, (__u32)pid_tgid)) {
		kw_hold_begin(tgid); /* the new image's walks go as records until these are applied */
		bpf_map_update_elem(&pr_mms, &tgid, &mm, BPF_ANY);
	}
	r.h.kind = PR_REC_EXEC;
	r.h.hdr_size = sizeof(r);
	r.pid = bpf_get_current_pid_tgid() >> 32;
	r.ts = bpf_ktime_get_ns();
	cap_emit(ctx, &r, sizeof(r));
	if (selected(tgid, (__u32)pid_tgid))
		kw_hold_end(tgid);
	return 0;
}

/*
 * A new process (not a thread): its mm, and in dwarf mode with mapping events a record so user
 * space starts its view as a copy of the parent's (mappings_fork): a child sampled before its
 * exec, or gone before its first sample is processed, is unwound against what it had mapped.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(pr_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ctgid = child->tgid;
	__u64 mm = (__u64)child->mm;

	if (parent->tgid == ctgid || !selected(parent->tgid, parent->pid))
		return 0;
	if (follow_forks && filter_tgid) {
		__u8 one = 1;

		if (bpf_map_update_elem(&tgids, &ctgid, &one, BPF_ANY))
			tool_count(PR_CNT_FOLLOW_FULL);
	}
	bpf_map_update_elem(&pr_mms, &ctgid, &mm, BPF_ANY);
	if (mmap_ev_enabled)
		cap_emit_proc(ctx, CAP_PROC_FORK, ctgid, parent->tgid);
	return 0;
}

/* forget the thread's cached stack VMA when it exits; --unwind=kernel: the process's tables; the
 * last thread's exit (task_last_thread): a record after the process's last sample, user space
 * frees what it held for it */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(pr_thread_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	int sel = selected(tgid, tgid);     /* before the follow filter forgets it */

	cap_thread_exit(tid);
	if (task_last_thread(p)) {
		/* --unwind=kernel: the process's tables (its last thread, whichever it is) */
		if (unwind_mode == PR_UNWIND_KERNEL && sel)
			kw_track_exit(ctx, tgid);
		if (follow_forks)
			bpf_map_delete_elem(&tgids, &tgid);
		if (bpf_map_delete_elem(&pr_mms, &tgid) == 0 || mmap_ev_enabled)
			cap_emit_proc(ctx, CAP_PROC_EXIT, tgid, 0);
	}
	return 0;
}
