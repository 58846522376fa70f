// SPDX-License-Identifier: GPL-2.0
/*
 * offcputime: time threads spend off CPU, by stack. At each sched_switch the thread switched out
 * (still `current`) is stamped in `start` with its kernel stack id and, by --unwind mode, its
 * user stack: fp: bpf_get_stackid(BPF_F_USER_STACK); dwarf: a snapshot of its user registers and
 * stack window (capture.bpf.h) sent now, unwound by libdwunw in user space; kernel: walked here
 * from the kwalk tables (kwalk_hybrid.bpf.h, the dwarf snapshot when the walk stops short). The
 * thread switched in gets its span (now - stamp) sent as one oc_off_rec, paired with the
 * switch-out's record by `seq`; user space sums the spans per (pid, comm, stacks).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "runtime/capture.bpf.h"
#include "kwalk/kwalk.bpf.h"
#include "kwalk/kwalk_hybrid.bpf.h"
#include "runtime/follow.bpf.h"
#define FRZ_TASK_SIGNAL 1
#include "runtime/freeze.bpf.h"
#include "offcputime.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD 0x00200000

const volatile __u32 unwind_mode = OC_UNWIND_DWARF;
const volatile __u32 want_user = 1;          /* not -K */
const volatile __u32 want_kernel = 1;        /* not -U */
const volatile __u32 user_threads_only = 0;  /* -u */
const volatile __u32 kernel_threads_only = 0; /* -k */
const volatile __s64 state_filter = -1;      /* --state, -1: any */
const volatile __u32 filter_tgid = 0;        /* -p: only tgids in `tgids` */
const volatile __u32 filter_tid = 0;         /* -t: only tids in `tids` */
const volatile __u64 min_ns = 1000;          /* -m */
const volatile __u64 max_ns = ~0ull;         /* -M */

__u32 oc_seq;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OC_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OC_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OC_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct oc_start);
} start SEC(".maps");

/* max_entries set by user space (--stack-storage-size) */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, OC_MAX_STACK_DEPTH * sizeof(__u64));
} stack_traces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OC_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} oc_counters SEC(".maps");

static __always_inline void oc_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&oc_counters, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline int tgid_selected(__u32 tgid)
{
	if (follow_tree)
		return follow_match(tgid, 0);
	return !filter_tgid || bpf_map_lookup_elem(&tgids, &tgid);
}

/* the mapping tracker's consumers: -p / -- COMMAND, mapping changes in order with the records
 * (mappings.h); --unwind=kernel: executable mappings of the selected processes */
#define MMAP_EV_TRACED(tgid) ((filter_tgid || follow_tree) && tgid_selected(tgid))
#include "runtime/mmap_ev.bpf.h"
#define KW_TRACK_SELECTED(tgid, tid) tgid_selected(tgid)
#include "kwalk/kwalk_track.bpf.h"
#define MT_CONSUMERS(X) X(mmap_ev) X(kw_track)
#include "runtime/mmap_track.bpf.h"

struct task_struct___o {
	volatile long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___o *)t, state);
}

static __always_inline int selected(struct task_struct *t, __u32 tgid, __u32 tid)
{
	int kthread = BPF_CORE_READ(t, flags) & PF_KTHREAD;

	if (tid == 0) /* the idle task */
		return 0;
	if ((user_threads_only && kthread) || (kernel_threads_only && !kthread))
		return 0;
	if (state_filter != -1 && task_state(t) != state_filter)
		return 0;
	if (!tgid_selected(tgid))
		return 0;
	if (filter_tid && !bpf_map_lookup_elem(&tids, &tid))
		return 0;
	return 1;
}

/* inside execve the registers and the memory may be two programs' (profile.bpf.c) */
static __always_inline int in_exec(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->in_execve))
		return 0;
	return BPF_CORE_READ_BITFIELD_PROBED(t, in_execve);
}

/* prev is `current`: its stacks, and the user stack's record in dwarf/kernel mode */
static __always_inline void switch_out(void *ctx, struct task_struct *prev, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct oc_start s = { .ts = now, .kstack = OC_STACK_NONE, .ustack = OC_STACK_NONE };
	int has_user = prev->mm != NULL && !(prev->flags & PF_KTHREAD);

	if (!selected(prev, tgid, tid))
		return;
	if (frz_enabled && frz_own_stop(tgid))
		return; /* not the program's wait: the freeze's */
	oc_count(OC_CNT_SWITCHES);
	s.seq = __sync_fetch_and_add(&oc_seq, 1);
	if (want_kernel)
		s.kstack = bpf_get_stackid(ctx, &stack_traces, 0);
	if (!has_user)
		s.flags |= OC_F_KTHREAD;
	else if (in_exec(prev))
		s.flags |= OC_F_IN_EXEC;
	if (want_user && has_user && !(s.flags & OC_F_IN_EXEC)) {
		s.ustack = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);
		if (unwind_mode != OC_UNWIND_FP) {
			struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(prev);
			struct cap_thread *t = cap_thread_get(tid, 1);
			__u64 cookie = OC_COOKIE(s.kstack, s.seq);
			long err;

			/* --unwind=freeze: the slot taken now, the signal sent at the switch-in */
			__u32 cflags = unwind_mode == OC_UNWIND_DWARF && frz_enabled && frz_claim(tgid, cookie)
					       ? CAP_F_FROZEN : 0;

			if (unwind_mode == OC_UNWIND_KERNEL)
				err = kw_hybrid(ctx, uregs, cookie, s.ustack, t);
			else
				err = cap_snapshot(ctx, uregs, cookie, s.ustack, cflags, t);
			if (err) {
				oc_count(OC_CNT_SNAP_LOST);
				s.flags |= OC_F_LOST_SNAP;
				if (cflags)
					frz_release(tgid);
			} else {
				s.flags |= OC_F_SENT | (cflags ? OC_F_FROZEN : 0);
			}
		}
	}
	if (bpf_map_update_elem(&start, &tid, &s, BPF_ANY))
		oc_count(OC_CNT_START_FULL);
}

/* next runs again: its span off CPU */
static __always_inline void switch_in(void *ctx, struct task_struct *next, __u64 now)
{
	__u32 tid = next->pid;
	struct oc_start *s = bpf_map_lookup_elem(&start, &tid);
	struct oc_off_rec r = {};

	if (!s)
		return;
	r.delta_ns = now - s->ts;
	r.seq = s->seq;
	r.flags = s->flags;
	r.kstack = s->kstack;
	r.ustack = s->ustack;
	bpf_map_delete_elem(&start, &tid);
	if (r.delta_ns < min_ns || r.delta_ns > max_ns) {
		oc_count(OC_CNT_OUT_OF_RANGE);
		if (r.flags & OC_F_FROZEN)
			frz_release(next->tgid);
		return;
	}
	/* it has run no user code since its switch-out: stopped before it does */
	if (r.flags & OC_F_FROZEN)
		frz_send_task(next, next->tgid);
	r.h.kind = OC_REC_OFF;
	r.h.hdr_size = sizeof(r);
	r.pid = next->tgid;
	r.tid = tid;
	BPF_CORE_READ_STR_INTO(&r.comm, next, comm);
	if (cap_emit(ctx, &r, sizeof(r)))
		oc_count(OC_CNT_REC_LOST);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(oc_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();

	switch_out(ctx, prev, now);
	switch_in(ctx, next, now);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(oc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct oc_exec_rec r = {};

	r.h.kind = OC_REC_EXEC;
	r.h.hdr_size = sizeof(r);
	r.pid = bpf_get_current_pid_tgid() >> 32;
	cap_emit(ctx, &r, sizeof(r));
	return 0;
}

/* dwarf mode's mapping views: a forked child starts with its parent's (mappings_fork) */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(oc_fork, struct task_struct *parent, struct task_struct *child)
{
	struct oc_fork_rec r = {};

	if (!mmap_ev_enabled || parent->tgid == child->tgid || !tgid_selected(parent->tgid))
		return 0;
	r.h.kind = OC_REC_FORK;
	r.h.hdr_size = sizeof(r);
	r.parent = parent->tgid;
	r.child = child->tgid;
	cap_emit(ctx, &r, sizeof(r));
	return 0;
}

/* a thread that exits never runs again: its stamp and cached stack VMA go */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(oc_thread_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);

	struct oc_start *s = bpf_map_lookup_elem(&start, &tid);

	if (s && (s->flags & OC_F_FROZEN))
		frz_release(tgid); /* it will not be switched in */
	bpf_map_delete_elem(&start, &tid);
	cap_thread_exit(tid);
	if (unwind_mode == OC_UNWIND_KERNEL && tid == tgid && tgid_selected(tgid))
		kw_track_exit(ctx, tgid);
	return 0;
}
