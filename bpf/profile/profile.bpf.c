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
#include "runtime/python.bpf.h"
#include "runtime/freeze.bpf.h"
#include "kwalk/kwalk.bpf.h"
#include "kwalk/kwalk_hybrid.bpf.h"
#include "profile.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 unwind_mode = PR_UNWIND_DWARF;
const volatile __u32 want_user = 1;          /* not -K */
const volatile __u32 want_kernel = 1;        /* not -U */
const volatile __u32 include_idle = 0;       /* -I */
const volatile __u32 filter_tgid = 0;        /* -p / -- COMMAND: only tgids in `tgids` */
const volatile __u32 filter_tid = 0;         /* -L: only tids in `tids` */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PR_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PR_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tids SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PR_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} pr_counters SEC(".maps");

static __always_inline void pr_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&pr_counters, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline int selected(__u32 tgid, __u32 tid)
{
	if (!include_idle && tid == 0)
		return 0;
	if (filter_tgid && !bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	if (filter_tid && !bpf_map_lookup_elem(&tids, &tid))
		return 0;
	return 1;
}

/* the mapping tracker's consumers: -p / -- COMMAND, mapping changes in order with the samples
 * (mappings.h); --unwind=kernel: executable mappings of the selected processes */
#define MMAP_EV_TRACED(tgid) (filter_tgid && bpf_map_lookup_elem(&tgids, &(__u32){ (tgid) }))
#include "runtime/mmap_ev.bpf.h"
#define KW_TRACK_SELECTED(tgid, tid) selected(tgid, tid)
#include "kwalk/kwalk_track.bpf.h"
#define MT_CONSUMERS(X) X(mmap_ev) X(kw_track)
#include "runtime/mmap_track.bpf.h"

/*
 * Inside execve the new program's memory is installed before its registers (the loader sets
 * them, then sched_process_exec fires): a sample there may pair the old program's pc and sp
 * with the new one's maps and stack, or the new entry point with maps not yet told to user
 * space. No user stack is taken then; the sample says why.
 */
static __always_inline int in_exec(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->in_execve))
		return 0;
	return BPF_CORE_READ_BITFIELD_PROBED(t, in_execve);
}

SEC("perf_event")
int sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pr_sample_rec r = {};
	char comm[PR_COMM_LEN];
	int kid = PR_STACK_NONE, uid = PR_STACK_NONE;
	int has_user = task->mm != NULL, exec = has_user && in_exec(task);

	pr_count(PR_CNT_SAMPLES);
	if (!selected(tgid, tid)) {
		pr_count(PR_CNT_FILTERED);
		return 0;
	}
	bpf_get_current_comm(comm, sizeof(comm));
	bpf_map_update_elem(&comms, &tid, comm, BPF_ANY);
	if (want_kernel)
		kid = bpf_get_stackid(ctx, &stack_traces, 0);
	if (exec) {
		r.flags |= PR_S_IN_EXEC;
		has_user = 0;
	}
	if (want_user && has_user)
		uid = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);

	if (want_user && has_user && unwind_mode == PR_UNWIND_DWARF) {
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		struct cap_thread *t = cap_thread_get(tid, 1);

		if (py_emit(ctx, tgid, tid) < 0)
			pr_count(PR_CNT_PY_LOST);
		__u64 cookie = PR_COOKIE(kid, bpf_get_smp_processor_id());
		/* --unwind=freeze: the thread stopped at its return to user mode (irq_work) */
		__u32 cflags = frz_enabled && frz_claim(tgid, cookie) ? CAP_F_FROZEN : 0;
		long err = cap_snapshot(ctx, uregs, cookie, uid, cflags, t);

		if (cflags)
			frz_finish(tgid, err);
		if (!err)
			return 0;
		pr_count(PR_CNT_SNAP_LOST);
		r.flags |= PR_S_LOST_SNAP;
	}
	if (want_user && has_user && unwind_mode == PR_UNWIND_KERNEL) {
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		struct cap_thread *t = cap_thread_get(tid, 1);

		if (py_emit(ctx, tgid, tid) < 0)
			pr_count(PR_CNT_PY_LOST);
		if (kw_hybrid(ctx, uregs, PR_COOKIE(kid, bpf_get_smp_processor_id()), uid, t) == 0)
			return 0;
		pr_count(PR_CNT_SNAP_LOST);
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
		pr_count(PR_CNT_REC_LOST);
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

	r.h.kind = PR_REC_EXEC;
	r.h.hdr_size = sizeof(r);
	r.pid = bpf_get_current_pid_tgid() >> 32;
	cap_emit(ctx, &r, sizeof(r));
	return 0;
}

/* forget the thread's cached stack VMA when it exits; --unwind=kernel: the process's tables */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(pr_thread_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);

	cap_thread_exit(tid);
	if (unwind_mode == PR_UNWIND_KERNEL && tid == tgid && selected(tgid, tid))
		kw_track_exit(ctx, tgid);
	return 0;
}
