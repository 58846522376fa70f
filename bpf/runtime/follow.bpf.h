/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Following a process tree from BPF (reusable: memleak, profile). The tool's probes call
 * follow_match(tgid, root): with follow_tree unset it is "root is 0 or tgid is root" (-p PID);
 * with it set, "tgid is in follow_procs". The set is kept by three tracepoint programs that the
 * tool attaches (follow_attach in command.c): a fork of a followed process adds the child, an exec
 * gives the process a fresh slot, the exit of its last thread removes it. User space puts the
 * command's process in the set before it execs, so the command is followed from its first
 * instruction.
 */
#ifndef DWUNW_FOLLOW_BPF_H
#define DWUNW_FOLLOW_BPF_H

#include "follow.h"
#include "task.bpf.h"

const volatile __u32 follow_tree = 0;
const volatile __u32 follow_records = 0; /* fork and exit records (CAP_KIND_PROC) in the capture channel */

__u32 follow_next_slot = FOLLOW_ROOT_SLOT + 1;
__u64 follow_full = 0;                   /* forks not followed: follow_procs full */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FOLLOW_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct follow_proc);
} follow_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FOLLOW_SLOTS);
	__type(key, __u32);
	__type(value, struct follow_slot);
} follow_slots SEC(".maps");

static __always_inline int follow_match(__u32 tgid, __u32 root)
{
	if (!follow_tree)
		return !root || tgid == root;
	return bpf_map_lookup_elem(&follow_procs, &tgid) != NULL;
}

/* The process's slot shifted into the upper bits of a user address (0 when not following). */
static __always_inline __u64 follow_tag(__u32 tgid)
{
	struct follow_proc *p;

	if (!follow_tree)
		return 0;
	p = bpf_map_lookup_elem(&follow_procs, &tgid);
	return p ? (__u64)p->slot << FOLLOW_SLOT_SHIFT : 0;
}

static __always_inline __u32 follow_new_slot(__u32 tgid)
{
	__u32 slot = __sync_fetch_and_add(&follow_next_slot, 1) % FOLLOW_SLOTS;
	struct follow_slot *s;

	if (slot == 0) /* 0 means "not following" */
		slot = __sync_fetch_and_add(&follow_next_slot, 1) % FOLLOW_SLOTS;
	s = bpf_map_lookup_elem(&follow_slots, &slot);
	if (s) {
		s->tgid = tgid;
		s->flags = 0;
		bpf_get_current_comm(s->comm, sizeof(s->comm));
	}
	return slot;
}

static __always_inline void follow_slot_flag(__u32 slot, __u32 flag)
{
	struct follow_slot *s = bpf_map_lookup_elem(&follow_slots, &slot);

	if (s) {
		__sync_fetch_and_or(&s->flags, flag);
		bpf_get_current_comm(s->comm, sizeof(s->comm));
	}
}

#ifdef DWUNW_NO_KERNEL_BTF
/*
 * Without kernel BTF (capture.bpf.h) the task_struct cannot be read: the new task comes from the
 * task:task_newtask tracepoint's record (its pid and clone flags, at the layout of a 32-bit kernel
 * as tracefs's format file gives it), run in the parent; a thread is counted in its process's
 * entry (follow_proc.threads), and the exit of a thread with none left over is the process's.
 */
struct follow_newtask {
	__u64 common;            /* struct trace_entry */
	__s32 pid;
	char comm[16];
	__u32 clone_flags;       /* unsigned long: 32 bits */
	__s16 oom_score_adj;
};

#define FOLLOW_CLONE_THREAD 0x00010000

SEC("tracepoint/task/task_newtask")
int follow_fork(struct follow_newtask *ctx)
#else
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent, struct task_struct *child)
#endif
{
#ifdef DWUNW_NO_KERNEL_BTF
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32, ctgid = (__u32)ctx->pid;
	int thread = !!(ctx->clone_flags & FOLLOW_CLONE_THREAD);
#else
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	int thread = ctgid == ptgid;
#endif
	struct follow_proc p = {}, *pp;

	if (!follow_tree)
		return 0;
	pp = bpf_map_lookup_elem(&follow_procs, &ptgid);
	if (!pp)
		return 0;
	if (thread) { /* a new thread: same process */
#ifdef DWUNW_NO_KERNEL_BTF
		__sync_fetch_and_add(&pp->threads, 1);
#endif
		return 0;
	}
	/* the comm is the parent's until the child execs: right for a forked copy */
	p.slot = follow_new_slot(ctgid);
	if (bpf_map_update_elem(&follow_procs, &ctgid, &p, BPF_ANY))
		__sync_fetch_and_add(&follow_full, 1);
	else if (follow_records)
		cap_emit_proc(ctx, CAP_PROC_FORK, ctgid, ptgid);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int follow_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct follow_proc *p;

	if (!follow_tree)
		return 0;
	p = bpf_map_lookup_elem(&follow_procs, &tgid);
	if (!p)
		return 0;
	follow_slot_flag(p->slot, FOLLOW_F_EXECED);
	p->slot = follow_new_slot(tgid); /* comm is the new image's by now */
	return 0;
}

/* The last thread's exit: the tgid may be reused by another process from now on. */
#ifdef DWUNW_NO_KERNEL_BTF
SEC("raw_tp/sched_process_exit")
int follow_exit(void *ctx)
#else
SEC("tp_btf/sched_process_exit")
int BPF_PROG(follow_exit, struct task_struct *task)
#endif
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct follow_proc *p;

	if (!follow_tree)
		return 0;
#ifndef DWUNW_NO_KERNEL_BTF
	if (!task_last_thread(task))
		return 0;
#endif
	p = bpf_map_lookup_elem(&follow_procs, &tgid);
	if (!p)
		return 0;
#ifdef DWUNW_NO_KERNEL_BTF
	/* a thread of several: one fewer (atomic: two may exit at once, the second is the last) */
	if ((__s32)__sync_fetch_and_sub(&p->threads, 1) > 0)
		return 0;
#endif
	follow_slot_flag(p->slot, FOLLOW_F_EXITED);
	bpf_map_delete_elem(&follow_procs, &tgid);
	if (follow_records)
		cap_emit_proc(ctx, CAP_PROC_EXIT, tgid, 0);
	return 0;
}

#endif /* DWUNW_FOLLOW_BPF_H */
