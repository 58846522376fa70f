// SPDX-License-Identifier: GPL-2.0
/*
 * offcputime: time threads spend off CPU, by stack. At each sched_switch the thread switched out
 * (still `current`) is stamped in `start` with its kernel stack id and, by --unwind mode, its
 * user stack: fp: bpf_get_stackid(BPF_F_USER_STACK); dwarf: a snapshot of its user registers and
 * stack window (capture.bpf.h) sent now, unwound by libdwunw in user space; kernel: walked here
 * from the kwalk tables (kwalk_hybrid.bpf.h, the dwarf snapshot when the walk stops short). The
 * thread switched in gets its span (now - stamp) sent as one oc_off_rec, paired with the
 * switch-out's record by `seq`; user space sums the spans per (pid, comm, stacks). --aggregate
 * (kernel mode): a complete walk is stored once and its spans summed in maps here (kwalk_agg.bpf.h),
 * drained by user space; a walk that fell back still comes as records.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "runtime/capture.bpf.h"
#include "kwalk/kwalk.bpf.h"
#include "runtime/follow.bpf.h"
#define FRZ_TASK_SIGNAL 1
#include "runtime/freeze.bpf.h"
#include "offcputime.h"
#include "runtime/select.bpf.h"   /* -p: tgids (or the command's tree); -t: tids */
#include "runtime/task.bpf.h"

char LICENSE[] SEC("license") = "GPL";

PERCPU_COUNTERS(tool_counters, tool_count, OC_CNT_MAX) /* enum oc_counter */

const volatile __u32 aggregate = 0;          /* --aggregate: complete walks' spans counted in maps */

#define KW_AGG_ENABLED aggregate
#define KW_HOLD_ON(tgid, tid) sel_tgid(tgid)
#include "kwalk/kwalk_agg.bpf.h"

/*
 * --aggregate: a switch-out's complete walk is stored (kw_agg_stacks) instead of sent; its key
 * waits in the thread's stamp, and the span is counted under it at the switch-in. Per CPU: the
 * switch-out arms it, the walk's KW_HYBRID_TAKE fills it, the switch-out reads it back.
 */
struct oc_take {
	__u32 armed;
	__u32 taken;
	struct kw_agg_skey k;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oc_take);
} oc_takes SEC(".maps");

static __always_inline int oc_agg_take(struct kw_walk *w, struct kw_scratch *s, __u32 pid)
{
	__u32 zero = 0;
	struct oc_take *t = bpf_map_lookup_elem(&oc_takes, &zero);

	/* held: its image or mappings changed, user space has not applied the records yet */
	if (!t || !t->armed || kw_held(pid))
		return 0;
	if (kw_agg_stack_put(w, s, &t->k)) {
		tool_count(OC_CNT_AGG_FULL);
		return 0;
	}
	t->taken = 1;
	return 1;
}
#define KW_HYBRID_TAKE(w, s, pid, tid, cookie, aux) oc_agg_take(w, s, pid)
#include "kwalk/kwalk_hybrid.bpf.h"

#define PF_KTHREAD 0x00200000

const volatile __u32 unwind_mode = OC_UNWIND_DWARF;
const volatile __u32 want_user = 1;          /* not -K */
const volatile __u32 want_kernel = 1;        /* not -U */
const volatile __u32 user_threads_only = 0;  /* -u */
const volatile __u32 kernel_threads_only = 0; /* -k */
const volatile __s64 state_filter = -1;      /* --state, -1: any */
const volatile __u32 want_waker = 0;         /* --waker */
const volatile __u64 min_ns = 1000;          /* -m */
const volatile __u64 max_ns = ~0ull;         /* -M */

__u32 oc_seq;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OC_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct oc_start);
} start SEC(".maps");

/* --waker: wakee tid -> its waker, from the wakeup until the wakee's switch-in */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OC_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct oc_waker);
} wakers SEC(".maps");

/* max_entries set by user space (--stack-storage-size) */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, OC_MAX_STACK_DEPTH * sizeof(__u64));
} stack_traces SEC(".maps");


/* the mapping tracker's consumers: -p / -- COMMAND, mapping changes in order with the records
 * (mappings.h); --unwind=kernel: executable mappings of the selected processes */
#define MMAP_EV_TRACED(tgid) sel_tgid_named(tgid)
#include "runtime/mmap_ev.bpf.h"
#define KW_TRACK_SELECTED(tgid, tid) sel_tgid(tgid)
#define KW_TRACK_CHILD_SELECTED(ptgid) (follow_tree && sel_tgid(ptgid))
#include "kwalk/kwalk_track.bpf.h"
/* --aggregate: kw_hold (kwalk_agg.bpf.h) last: it holds a process for the calls the others record */
#define MT_CONSUMERS(X) X(mmap_ev) X(kw_track) X(kw_hold)
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

/* the thread is one of those asked for (not its wait state: on-CPU samples have none) */
static __always_inline int thread_selected(struct task_struct *t, __u32 tgid, __u32 tid)
{
	int kthread = BPF_CORE_READ(t, flags) & PF_KTHREAD;

	if (tid == 0) /* the idle task */
		return 0;
	if ((user_threads_only && kthread) || (kernel_threads_only && !kthread))
		return 0;
	return sel_thread(tgid, tid);
}

/* inside execve the registers and the memory may be two programs' (profile.bpf.c) */
static __always_inline int in_exec(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->in_execve))
		return 0;
	return BPF_CORE_READ_BITFIELD_PROBED(t, in_execve);
}

/* t is `current`: its kernel stack id, and its user stack by --unwind (in dwarf/kernel mode a
 * record sent now, paired with the span's by s->seq) */
static __always_inline void take_stacks(void *ctx, struct task_struct *t, __u32 tid,
					struct oc_start *s, __u32 seq_bit, int agg)
{
	int has_user = t->mm != NULL && !(t->flags & PF_KTHREAD);

	s->kstack = OC_STACK_NONE;
	s->ustack = OC_STACK_NONE;
	s->seq = (__sync_fetch_and_add(&oc_seq, 1) & ~OC_SEQ_WAKER) | seq_bit;
	if (want_kernel)
		s->kstack = bpf_get_stackid(ctx, &stack_traces, 0);
	if (!has_user)
		s->flags |= OC_F_KTHREAD;
	else if (in_exec(t))
		s->flags |= OC_F_IN_EXEC;
	if (!want_user || !has_user || (s->flags & OC_F_IN_EXEC))
		return;
	s->ustack = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);
	if (unwind_mode != OC_UNWIND_FP) {
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(t);
		struct cap_thread *ct = cap_thread_get(tid, 1);
		__u64 cookie = OC_COOKIE(s->kstack, s->seq);
		long err;

		/* --unwind=freeze (a switch-out, not a waker's stacks): the slot taken now, the
		 * signal sent at the switch-in */
		__u32 cflags = !seq_bit && unwind_mode == OC_UNWIND_DWARF && frz_enabled &&
			       frz_claim(t->tgid, cookie) ? CAP_F_FROZEN : 0;

		if (unwind_mode == OC_UNWIND_KERNEL) {
			__u32 zero = 0;
			struct oc_take *tk = agg ? bpf_map_lookup_elem(&oc_takes, &zero) : NULL;

			if (tk) {
				tk->armed = 1;
				tk->taken = 0;
			}
			err = kw_hybrid(ctx, uregs, cookie, s->ustack, ct);
			if (tk) {
				tk->armed = 0;
				if (!err && tk->taken) {
					s->skey = tk->k;
					s->flags |= OC_F_AGG;
				}
			}
		} else
			err = cap_snapshot(ctx, uregs, cookie, s->ustack, cflags, ct);
		if (err) {
			tool_count(OC_CNT_SNAP_LOST);
			s->flags |= OC_F_LOST_SNAP;
			if (cflags)
				frz_release(t->tgid);
		} else {
			s->flags |= OC_F_SENT | (cflags ? OC_F_FROZEN : 0);
		}
	}
}

/* A span's or a sample's record: who, the stacks taken (s), the time, the waker (w: --waker). */
static __always_inline long send_span(void *ctx, __u32 kind, struct task_struct *t,
				      const struct oc_start *s, __u64 ns, const struct oc_waker *w)
{
	struct oc_off_rec r = {};
	/* without --waker the record ends before `waker`: 40 bytes less a span in the buffer */
	__u32 size = want_waker ? sizeof(r) : offsetof(struct oc_off_rec, waker);

	r.h.kind = kind;
	r.h.hdr_size = size;
	r.pid = t->tgid;
	r.tid = t->pid;
	r.seq = s->seq;
	r.flags = s->flags;
	r.kstack = s->kstack;
	r.ustack = s->ustack;
	r.delta_ns = ns;
	BPF_CORE_READ_STR_INTO(&r.comm, t, comm);
	if (w && want_waker)
		r.waker = *w;
	return cap_emit(ctx, &r, size);
}

#define TASK_DEAD_STATE 0x80 /* TASK_DEAD: the thread's last switch-out, it never runs again */

static __always_inline void switch_out(void *ctx, struct task_struct *prev, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid;
	struct oc_start s = { .ts = now };
	long state;

	if (!thread_selected(prev, tgid, tid))
		return;
	if (frz_enabled && frz_own_stop(tgid))
		return; /* not the program's wait: the freeze's */
	state = task_state(prev);
	if (state & TASK_DEAD_STATE)
		return; /* a stamp would stay until the tid is reused, then make a false span */
	if (state_filter != -1 && state != state_filter)
		return;
	tool_count(OC_CNT_SWITCHES);
	/* --aggregate: a switch-out's span (not with --waker: each span carries its waker's stacks) */
	take_stacks(ctx, prev, tid, &s, 0, aggregate && !want_waker);
	/* off CPU from the switch itself, after this program's own work (a walk in the kernel, a
	 * stack copy): that ran on the thread's CPU time, not in its wait */
	s.ts = bpf_ktime_get_ns();
	if (want_waker) /* a wakeup before this switch-out woke an earlier wait */
		bpf_map_delete_elem(&wakers, &tid);
	if (bpf_map_update_elem(&start, &tid, &s, BPF_ANY))
		tool_count(OC_CNT_START_FULL);
}

/* next runs again: its span off CPU (and --waker: who woke it) */
static __always_inline void switch_in(void *ctx, struct task_struct *next, __u64 now)
{
	__u32 tid = next->pid;
	struct oc_start *sp = bpf_map_lookup_elem(&start, &tid);
	struct oc_waker w = {}, *wp;
	struct oc_start s;

	if (!sp)
		return;
	s = *sp;
	bpf_map_delete_elem(&start, &tid);
	if (want_waker && (wp = bpf_map_lookup_elem(&wakers, &tid))) {
		w = *wp;
		s.flags |= OC_F_WOKEN;
		bpf_map_delete_elem(&wakers, &tid);
	}
	if (now - s.ts < min_ns || now - s.ts > max_ns) {
		tool_count(OC_CNT_OUT_OF_RANGE);
		if (s.flags & OC_F_FROZEN)
			frz_release(next->tgid);
		return;
	}
	/* --unwind=freeze: it has run no user code since its switch-out: stopped before it does */
	if (s.flags & OC_F_FROZEN)
		frz_send_task(next, next->tgid);
	if (s.flags & OC_F_AGG) {
		/* the key the record would have made in user space: (pid, comm, stacks), tid apart */
		struct kw_agg_key k = { .pid = next->tgid, .tid = tid, .kstack = s.kstack, .s = s.skey };

		BPF_CORE_READ_STR_INTO(&k.comm, next, comm);
		tool_count(kw_agg_count(&k, now - s.ts) ? OC_CNT_AGG : OC_CNT_AGG_LOST);
		return;
	}
	if (send_span(ctx, OC_REC_OFF, next, &s, now - s.ts, &w))
		tool_count(OC_CNT_REC_LOST);
}

/*
 * --waker: a selected thread is being woken; `current` is its waker: its stacks as a switch-out's
 * (its user stack's record seq | OC_SEQ_WAKER). The kernel stack is always taken: user space
 * tells a wakeup from interrupt context (a timer, I/O completion; `current` is then whichever task
 * was interrupted, not a waker) by its interrupt frames. (__preempt_count would say it here, but
 * a kernel without CONFIG_KALLSYMS_ALL gives no address for it and the program would not load.)
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(oc_waking, struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 wtid = p->pid;
	struct oc_start s = {};
	struct oc_waker w = {};

	if (!thread_selected(p, p->tgid, wtid))
		return 0;
	tool_count(OC_CNT_WAKEUPS);
	take_stacks(ctx, cur, cur->pid, &s, OC_SEQ_WAKER, 0);
	w.seq = s.seq;
	w.flags = s.flags;
	w.kstack = want_kernel ? s.kstack : bpf_get_stackid(ctx, &stack_traces, 0);
	w.ustack = s.ustack;
	w.pid = cur->tgid;
	BPF_CORE_READ_STR_INTO(&w.comm, cur, comm);
	if (bpf_map_update_elem(&wakers, &wtid, &w, BPF_ANY))
		tool_count(OC_CNT_WAKER_FULL);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(oc_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	switch_out(ctx, prev, bpf_ktime_get_ns());
	/* next's wait ends at the switch, after the work done above for prev */
	switch_in(ctx, next, bpf_ktime_get_ns());
	return 0;
}

/*
 * --wall: the selected threads on CPU, sampled by cpu-clock at a fixed period (one perf event a
 * CPU); each sample counts as its period, the unit of the spans.
 */
const volatile __u64 sample_period_ns = 0;

SEC("perf_event")
int oc_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct oc_start s = {};

	if (!thread_selected(t, t->tgid, t->pid))
		return 0;
	tool_count(OC_CNT_ON_SAMPLES);
	take_stacks(ctx, t, t->pid, &s, 0, 0);
	if (send_span(ctx, OC_REC_ON, t, &s, sample_period_ns, NULL))
		tool_count(OC_CNT_ON_LOST);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(oc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct oc_exec_rec r = {};
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	int sel = sel_tgid(tgid);

	if (sel) /* --aggregate: the new image's walks go as records until this one is applied */
		kw_hold_begin(tgid);
	r.h.kind = OC_REC_EXEC;
	r.h.hdr_size = sizeof(r);
	r.pid = tgid;
	cap_emit(ctx, &r, sizeof(r));
	if (sel)
		kw_hold_end(tgid);
	return 0;
}

/* dwarf mode's mapping views: a forked child starts with its parent's (mappings_fork) */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(oc_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!mmap_ev_enabled || parent->tgid == child->tgid || !sel_tgid(parent->tgid))
		return 0;
	cap_emit_proc(ctx, CAP_PROC_FORK, child->tgid, parent->tgid);
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
	if (want_waker)
		bpf_map_delete_elem(&wakers, &tid);
	cap_thread_exit(tid);
	if (!task_last_thread(p) || !sel_tgid(tgid))
		return 0;
	/* the last thread (not the leader: it may pthread_exit first and the others go on): its
	 * view, held files and walker tables go after its last record */
	if (mmap_ev_enabled)
		cap_emit_proc(ctx, CAP_PROC_EXIT, tgid, 0);
	if (unwind_mode == OC_UNWIND_KERNEL)
		kw_track_exit(ctx, tgid);
	return 0;
}
