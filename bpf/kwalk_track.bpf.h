/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --unwind=kernel process tracking (kwalk_track.h), included by a tool's X.bpf.c after
 * capture.bpf.h, with KW_TRACK_SELECTED(tgid, tid) defined: which processes it follows.
 *
 * mmap: the entry of an mmap(PROT_EXEC) of a file notes the thread (bounded LRU), its exit sends
 * one small record when the call succeeded, so the new module's table is loaded before the
 * samples in it rather than after the first of them fell back. The raw syscall tracepoints are
 * used (BTF; no tracefs, kprobes or syscall events needed, which kernels often lack); they run
 * for every system call, so the first test is the call number, and a tool attaches them in
 * kernel mode only. Exit: kw_track_exit() from the tool's sched_process_exit program.
 */
#ifndef DWUNW_KWALK_TRACK_BPF_H
#define DWUNW_KWALK_TRACK_BPF_H

#include "kwalk_track.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} kw_mmap_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KW_TC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} kw_track_counters SEC(".maps");

#define KW_PROT_EXEC 0x4
#if defined(__TARGET_ARCH_arm64)
#define KW_NR_MMAP 222
#define KW_SYSCALL_NR(r) ((r)->syscallno)
#define KW_MMAP_PROT(r)  ((r)->regs[2])
#define KW_MMAP_FD(r)    ((int)(r)->regs[4])
#else
#define KW_NR_MMAP 9
#define KW_SYSCALL_NR(r) ((r)->orig_ax)
#define KW_MMAP_PROT(r)  ((r)->dx)
#define KW_MMAP_FD(r)    ((int)(r)->r8)
#endif

static __always_inline void kw_track_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&kw_track_counters, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void kw_track_rec(void *ctx, __u32 kind, __u32 pid)
{
	struct kw_track_rec r = {};

	r.h.kind = kind;
	r.h.hdr_size = sizeof(r);
	r.pid = pid;
	if (cap_emit(ctx, &r, sizeof(r)) && kind == KW_KIND_MMAP)
		kw_track_count(KW_TC_LOST);
}

/* From the tool's exit program, for a followed process's last thread (its leader). */
static __always_inline void kw_track_exit(void *ctx, __u32 tgid)
{
	kw_track_rec(ctx, KW_KIND_EXIT, tgid);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(kw_mmap_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid;
	__u32 tid;
	__u8 one = 1;

	if (id != KW_NR_MMAP || !(KW_MMAP_PROT(regs) & KW_PROT_EXEC) || KW_MMAP_FD(regs) < 0)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	if (!(KW_TRACK_SELECTED((__u32)(pid_tgid >> 32), tid)))
		return 0;
	if (bpf_map_update_elem(&kw_mmap_pending, &tid, &one, BPF_ANY))
		kw_track_count(KW_TC_LOST);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(kw_mmap_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid;
	__u32 tid;

	if (KW_SYSCALL_NR(regs) != KW_NR_MMAP)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	if (!bpf_map_lookup_elem(&kw_mmap_pending, &tid))
		return 0;
	bpf_map_delete_elem(&kw_mmap_pending, &tid);
	if (ret < 0 && ret >= -4095)
		return 0;
	kw_track_count(KW_TC_MMAP);
	kw_track_rec(ctx, KW_KIND_MMAP, pid_tgid >> 32);
	return 0;
}

#endif /* DWUNW_KWALK_TRACK_BPF_H */
