/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one tracker of mapping system calls (mmap, munmap, mprotect, mremap) for a tool's
 * consumers. It knows none of them by name: the tool lists them, before including this header,
 * in MT_CONSUMERS(X), one X(name) each, after including each consumer's header. A consumer
 * `name` provides
 *   name_mt_enabled                          its .rodata switch (set by the tool before load)
 *   bool name_mt_on(tgid, tid)               whether it follows this thread's process
 *   bool name_mt_enter(ctx, const mmap_call*) at the call's entry: whether it wants the exit
 *   void name_mt_exit(ctx, const mmap_call*, ret, tgid)  at the exit of a call it wanted
 *   void name_mt_lost(void)                  the call could not be kept until its exit
 * Consumers today: mmap_ev.bpf.h (mapping changes as records) and kwalk/kwalk_track.bpf.h
 * (executable mmaps for the in-kernel walker's tables). The call is decoded once
 * (mmap_call.bpf.h) and kept per thread from entry to exit with the consumers that want its
 * exit. Include after capture.bpf.h; attach mt_sys_enter and mt_sys_exit once for all consumers
 * (mmap_track.h).
 *
 * Why raw syscall tracepoints: sys_enter/sys_exit are stable by name on every kernel with BPF
 * raw tracepoints (4.17+), need no tracefs (syscalls:sys_exit_mmap does), no BTF and no kernel
 * function that may be inlined or renamed (the mmap internals differ between 6.1 and 6.18). They
 * run for every system call, so the first test is the call number.
 */
#ifndef DWUNW_MMAP_TRACK_BPF_H
#define DWUNW_MMAP_TRACK_BPF_H

#include "mmap_call.bpf.h"

#ifndef MT_CONSUMERS
#error "list the tracker's consumers in MT_CONSUMERS(X) before including mmap_track.bpf.h"
#endif

/* each consumer's bit in struct mmap_call.want, in the order the tool lists them */
#define MT_IDX(n) MT_IDX_##n,
enum { MT_CONSUMERS(MT_IDX) MT_NCONSUMERS };
#define MT_BIT(n) (1u << MT_IDX_##n)
#define MT_ANY_ENABLED(n) || n##_mt_enabled
#define MT_ON(n) if (n##_mt_on(tgid, tid)) on |= MT_BIT(n);
#define MT_ENTER(n) if ((on & MT_BIT(n)) && n##_mt_enter(ctx, &c)) c.want |= MT_BIT(n);
#define MT_LOST(n) if (c.want & MT_BIT(n)) n##_mt_lost();
#define MT_EXIT(n) if (c.want & MT_BIT(n)) n##_mt_exit(ctx, &c, ret, tgid);

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct mmap_call);
} mt_pending SEC(".maps");

/* The tracepoints' arguments as the u64 array they are (struct bpf_raw_tracepoint_args of the
 * host's vmlinux.h would be a CO-RE relocated access: builds for kernels without BTF have none) */
SEC("raw_tp/sys_enter")
int mt_sys_enter(__u64 *ctx)
{
	long id = (long)ctx[1];
	struct mmap_call c = {};
	__u64 pid_tgid;
	__u32 tgid, tid, on = 0;

	if (!mmap_call_nr(id) || !(0 MT_CONSUMERS(MT_ANY_ENABLED)))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	tgid = pid_tgid >> 32;
	tid = (__u32)pid_tgid;
	MT_CONSUMERS(MT_ON)
	if (!on)
		return 0;
	mmap_call_decode(&c, (struct pt_regs *)ctx[0], id);
	MT_CONSUMERS(MT_ENTER)
	if (c.want && bpf_map_update_elem(&mt_pending, &tid, &c, BPF_ANY)) {
		MT_CONSUMERS(MT_LOST)
	}
	return 0;
}

SEC("raw_tp/sys_exit")
int mt_sys_exit(__u64 *ctx)
{
	__u64 pid_tgid, ret = ctx[1];
	struct mmap_call *cp, c;
	__u32 tgid, tid;

	if (!(0 MT_CONSUMERS(MT_ANY_ENABLED)))
		return 0;
#ifdef MC_EXIT_NR
	if (!mmap_call_nr((long)MC_EXIT_NR((struct pt_regs *)ctx[0])))
		return 0;
#endif
	pid_tgid = bpf_get_current_pid_tgid();
	tgid = pid_tgid >> 32;
	tid = (__u32)pid_tgid;
	cp = bpf_map_lookup_elem(&mt_pending, &tid);
	if (!cp)
		return 0;
	c = *cp;
	bpf_map_delete_elem(&mt_pending, &tid);
	(void)tgid;            /* not every consumer's exit takes it */
	MT_CONSUMERS(MT_EXIT)
	return 0;
}

#endif /* DWUNW_MMAP_TRACK_BPF_H */
