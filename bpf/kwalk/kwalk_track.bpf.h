/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --unwind=kernel process tracking (kwalk_track.h): one consumer of the mapping tracker
 * (mmap_track.bpf.h includes this header when the tool defines KW_TRACK_SELECTED(tgid, tid), which
 * processes it follows, and the tool sets kw_track_enabled).
 *
 * mmap: the tracker's entry notes an mmap(PROT_EXEC) of a file (kw_track_wants), its exit sends
 * one small record when the call succeeded (kw_track_mmap), so the new module's table is loaded
 * before the samples in it rather than after the first of them fell back. Exit: kw_track_exit()
 * from the tool's sched_process_exit program. With kw_pm_enabled the BPF side enters the
 * mappings itself (kwalk_procmap.bpf.h) and tells user space only of files it has not loaded.
 */
#ifndef DWUNW_KWALK_TRACK_BPF_H
#define DWUNW_KWALK_TRACK_BPF_H

#include "kwalk_track.h"
#include "runtime/counters.bpf.h"
#include "runtime/mmap_call.bpf.h"

const volatile __u32 kw_track_enabled = 0;   /* set by the tool before load */

PERCPU_COUNTERS(kw_track_counters, kw_track_count, KW_TC_MAX)

static __always_inline void kw_track_rec(void *ctx, __u32 kind, __u32 pid, __u32 flags)
{
	struct kw_track_rec r = {};

	r.h.kind = kind;
	r.h.hdr_size = sizeof(r);
	r.pid = pid;
	r.flags = flags;
	/* a new module: wake the consumer now, its table is wanted before the next events */
	if (cap_emit_wake(ctx, &r, sizeof(r), kind == KW_KIND_MMAP) && kind == KW_KIND_MMAP)
		kw_track_count(KW_TC_LOST);
}

#include "kwalk_procmap.bpf.h"

/* From the tool's exit program, for a followed process's last thread (its leader). */
static __always_inline void kw_track_exit(void *ctx, __u32 tgid)
{
	kw_pm_exit(tgid);
	kw_track_rec(ctx, KW_KIND_EXIT, tgid, 0);
}

/* At a call's entry: an mmap of a file made executable (its table may be new). */
static __always_inline bool kw_track_wants(const struct mmap_call *c)
{
	return c->nr == MC_NR_MMAP && (c->prot & MC_PROT_EXEC) && c->fd >= 0;
}

/* At the exit of a call kw_track_wants: told when it succeeded. */
static __always_inline void kw_track_mmap(void *ctx, __u64 ret, __u32 tgid)
{
	if (MC_FAILED(ret))
		return;
	if (kw_pm_mmap(ctx, ret, tgid))
		return; /* entered by the BPF side, or its file told: no load of the process */
	kw_track_count(KW_TC_MMAP);
	kw_track_rec(ctx, KW_KIND_MMAP, tgid, 0);
}

/* the mapping tracker's consumer interface (runtime/mmap_track.bpf.h): list it as X(kw_track) */
/* a child of ptgid is followed (the tool follows a process tree and ptgid is in it) */
#ifndef KW_TRACK_CHILD_SELECTED
#define KW_TRACK_CHILD_SELECTED(ptgid) 0
#endif
#ifndef KW_TRACK_SELECTED
#error "define KW_TRACK_SELECTED(tgid, tid) before including kwalk_track.bpf.h"
#endif
#define kw_track_mt_enabled kw_track_enabled
static __always_inline bool kw_track_mt_on(__u32 tgid, __u32 tid)
{
	return kw_track_enabled && KW_TRACK_SELECTED(tgid, tid);
}
#define kw_track_mt_enter(ctx, c) kw_track_wants(c)
#define kw_track_mt_exit(ctx, c, ret, tgid) kw_track_mmap(ctx, ret, tgid)
#define kw_track_mt_lost() kw_track_count(KW_TC_LOST)

/* exec and fork of a followed process, the BPF side's entries (kw_track_prepare loads these) */
SEC("?tp_btf/sched_process_exec")
int BPF_PROG(kw_track_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;

	if (!kw_track_enabled || !KW_TRACK_SELECTED(tgid, tgid))
		return 0;
	if (!kw_pm_exec(ctx, p, tgid))
		kw_track_rec(ctx, KW_KIND_MMAP, tgid, KW_TR_MISS); /* a module to load */
	return 0;
}

SEC("?tp_btf/sched_process_fork")
int BPF_PROG(kw_track_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;

	/* a tool following a tree adds the child on this same tracepoint, perhaps after this
	 * program runs (attach order): KW_TRACK_CHILD_SELECTED says the child will be followed */
	if (!kw_track_enabled || ptgid == ctgid ||
	    !(KW_TRACK_SELECTED(ctgid, ctgid) || KW_TRACK_CHILD_SELECTED(ptgid)))
		return 0;
	kw_pm_fork(ptgid, ctgid);
	return 0;
}

#endif /* DWUNW_KWALK_TRACK_BPF_H */
