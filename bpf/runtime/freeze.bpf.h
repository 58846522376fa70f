/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF side of --unwind=freeze (freeze.h says the whole flow): the program stops the thread at
 * the event with bpf_send_signal_thread(SIGSTOP), so user space can read its stack as it was
 * then. At most one freeze per process in flight (SIGSTOP stops the whole thread group), at
 * most frz_inflight's max_entries processes at once: events beyond take the copy mode, counted.
 *
 *   if (frz_enabled && frz_claim(tgid, cookie)) flags |= CAP_F_FROZEN;
 *   err = cap_snapshot(..., flags, ...);
 *   if (flags & CAP_F_FROZEN) frz_finish(tgid, err);   (sends the signal, or gives the slot back)
 *
 * The kernel's rules (bpf_send_signal_common): not from a kernel thread, an exiting task or
 * init; from a uprobe (preemptible) the signal is queued at once, before the thread returns to
 * user mode; from a perf event or a tracepoint (irqs off) through a per-CPU irq_work (-EBUSY
 * while that CPU's previous one is pending). Either way the thread stops before it runs more
 * user code than the instruction in flight (a uprobe single-steps the probed instruction
 * first: uprobe_deny_signal).
 */
#ifndef DWUNW_FREEZE_BPF_H
#define DWUNW_FREEZE_BPF_H

#include "freeze.h"

#ifndef SIGSTOP
#define SIGSTOP 19
#endif
#define FRZ_SIGNAL_STOP_STOPPED 0x1 /* signal_struct.flags: the group is stopped */
#define FRZ_JOBCTL_STOP_PENDING (1ul << 17)

const volatile __u32 frz_enabled = 0;
/* Set by the tool once its command has exec'd: a command stopped before its exec would never
 * exec, and the tool waits for that exec (a deadlock). */
__u32 frz_armed = 0;

/* tgid -> cookie of the event it is frozen for; max_entries = processes frozen at once. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FRZ_MAX_DEFAULT);
	__type(key, __u32);
	__type(value, __u64);
} frz_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FRZ_BPF_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} frz_counters SEC(".maps");

static __always_inline void frz_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&frz_counters, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The slot given back without a signal (the event's thread will not be stopped). */
static __always_inline void frz_release(__u32 tgid)
{
	bpf_map_delete_elem(&frz_inflight, &tgid);
}

#ifdef DWUNW_NO_KERNEL_BTF
/* A build for kernels without BTF (mips32) has no task_struct layout to read: no freeze (the
 * tool refuses --unwind=freeze there) */
static __always_inline int frz_own_stop(__u32 tgid) { return 0; }
static __always_inline int frz_claim(__u32 tgid, __u64 cookie) { return 0; }
#else
/* A stop in progress or in effect for current's process (a group stop's signal taken). */
static __always_inline int frz_stopping(struct task_struct *task)
{
	return (BPF_CORE_READ(task, signal, flags) & FRZ_SIGNAL_STOP_STOPPED) ||
	       BPF_CORE_READ(task, signal, group_stop_count) ||
	       (BPF_CORE_READ(task, jobctl) & FRZ_JOBCTL_STOP_PENDING);
}

/*
 * current switched out into a stop of ours (its process holds a slot and is stopping, or the
 * thread is traced: seized by us): the time it then spends off CPU is the freeze's (counted).
 */
static __always_inline int frz_own_stop(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (!bpf_map_lookup_elem(&frz_inflight, &tgid))
		return 0;
	if (!frz_stopping(task) && !BPF_CORE_READ(task, ptrace))
		return 0;
	frz_count(FRZ_CNT_OWN_STOP);
	return 1;
}

/*
 * A freeze slot for this event: 1 taken, 0 not (counted: the process already frozen, the
 * limit reached, or a stop in progress, whose SIGCONT ours would have to send and cannot).
 */
static __always_inline int frz_claim(__u32 tgid, __u64 cookie)
{
	struct task_struct *task = bpf_get_current_task_btf();
	long err;

	if (!frz_armed)
		return 0;
	if (frz_stopping(task)) {
		frz_count(FRZ_CNT_STOPPING);
		return 0;
	}
	if (BPF_CORE_READ(task, ptrace)) {
		frz_count(FRZ_CNT_TRACED);
		return 0;
	}
	err = bpf_map_update_elem(&frz_inflight, &tgid, &cookie, BPF_NOEXIST);
	if (err == -17 /* EEXIST */) {
		frz_count(FRZ_CNT_BUSY);
		return 0;
	}
	if (err) {
		frz_count(FRZ_CNT_LIMIT);
		return 0;
	}
	return 1;
}
#endif

/* After the snapshot (emit_err: its result): stop the thread, or give the slot back. */
static __always_inline void frz_finish(__u32 tgid, long emit_err)
{
	long err = emit_err;

	if (!err)
		err = bpf_send_signal_thread(SIGSTOP);
	if (err) {
		frz_release(tgid);
		frz_count(emit_err ? FRZ_CNT_EMIT_FAILED : FRZ_CNT_SEND_FAILED);
		return;
	}
	frz_count(FRZ_CNT_SENT);
}

#ifdef FRZ_TASK_SIGNAL
/*
 * A thread other than `current` stopped (offcputime: the thread switched in, whose snapshot was
 * taken when it was switched out; no user code of its has run since). bpf_send_signal_task is a
 * kfunc of 6.13; without it the slot goes back, counted as refused.
 */
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym __weak;

static __always_inline void frz_send_task(struct task_struct *task, __u32 tgid)
{
	int err = -1;

	if ((unsigned long)&bpf_send_signal_task) /* a weak kfunc: 0 where the kernel lacks it */
		err = bpf_send_signal_task(task, SIGSTOP, PIDTYPE_PID, 0);
	if (err) {
		frz_release(tgid);
		frz_count(FRZ_CNT_SEND_FAILED);
		return;
	}
	frz_count(FRZ_CNT_SENT);
}
#endif

#endif /* DWUNW_FREEZE_BPF_H */
