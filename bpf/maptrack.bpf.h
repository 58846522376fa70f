/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one tracker of mapping system calls (mmap, munmap, mprotect, mremap) for a tool's
 * consumers, each enabled by the tool before load and filtered by its own process test:
 *  - mapev.bpf.h (mapev_enabled, MAPEV_TRACED(tgid)): mapping changes as records in order with
 *    the tool's records;
 *  - kwalk_track.bpf.h (kw_track_enabled, KW_TRACK_SELECTED(tgid, tid), included only when the
 *    tool defines the latter): notices of executable file mmaps for the in-kernel walker.
 * The call is decoded once (mapcall.bpf.h) and kept per thread from entry to exit with the
 * consumers that want its exit. Include after capture.bpf.h; attach mt_sys_enter and
 * mt_sys_exit once for all consumers (maptrack_user.h).
 *
 * Why raw syscall tracepoints: sys_enter/sys_exit are stable by name on every kernel with BPF
 * raw tracepoints (4.17+), need no tracefs (syscalls:sys_exit_mmap does), no BTF and no kernel
 * function that may be inlined or renamed (the mmap internals differ between 6.1 and 6.18). They
 * run for every system call, so the first test is the call number.
 */
#ifndef DWUNW_MAPTRACK_BPF_H
#define DWUNW_MAPTRACK_BPF_H

#include "mapcall.bpf.h"
#include "mapev.bpf.h"

#ifdef KW_TRACK_SELECTED
#include "kwalk_track.bpf.h"
#define MT_KW_ENABLED kw_track_enabled
#define MT_KW_ON(tgid, tid) (kw_track_enabled && KW_TRACK_SELECTED(tgid, tid))
#else
#define MT_KW_ENABLED 0
#define MT_KW_ON(tgid, tid) 0
#endif

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct map_call);
} mt_pending SEC(".maps");

SEC("raw_tp/sys_enter")
int mt_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long id = (long)ctx->args[1];
	struct map_call c = {};
	__u64 pid_tgid;
	__u32 tgid, tid;
	bool ev, kw;

	if (!map_call_nr(id) || (!mapev_enabled && !MT_KW_ENABLED))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	tgid = pid_tgid >> 32;
	tid = (__u32)pid_tgid;
	ev = mapev_enabled && MAPEV_TRACED(tgid);
	kw = MT_KW_ON(tgid, tid);
	if (!ev && !kw)
		return 0;
	map_call_decode(&c, (struct pt_regs *)ctx->args[0], id);
	if (ev && mapev_enter(ctx, &c))
		c.want |= MC_WANT_MAPEV;
#ifdef KW_TRACK_SELECTED
	if (kw && kw_track_wants(&c))
		c.want |= MC_WANT_KW;
#endif
	if (c.want && bpf_map_update_elem(&mt_pending, &tid, &c, BPF_ANY)) {
#ifdef KW_TRACK_SELECTED
		if (c.want & MC_WANT_KW)
			kw_track_count(KW_TC_LOST);
#endif
	}
	return 0;
}

SEC("raw_tp/sys_exit")
int mt_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 pid_tgid, ret = ctx->args[1];
	struct map_call *cp, c;
	__u32 tid;

	if (!mapev_enabled && !MT_KW_ENABLED)
		return 0;
#ifdef MC_EXIT_NR
	if (!map_call_nr((long)MC_EXIT_NR((struct pt_regs *)ctx->args[0])))
		return 0;
#endif
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	cp = bpf_map_lookup_elem(&mt_pending, &tid);
	if (!cp)
		return 0;
	c = *cp;
	bpf_map_delete_elem(&mt_pending, &tid);
	if (c.want & MC_WANT_MAPEV)
		mapev_exit(ctx, &c, ret);
#ifdef KW_TRACK_SELECTED
	if (c.want & MC_WANT_KW)
		kw_track_mmap(ctx, ret, pid_tgid >> 32);
#endif
	return 0;
}

#endif /* DWUNW_MAPTRACK_BPF_H */
