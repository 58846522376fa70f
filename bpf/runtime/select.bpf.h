/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which processes and threads a sampling tool records (profile, offcputime): -p PID... fills
 * `tgids`, -L/-t TID... fills `tids` (user space: tool_select_set in tool_util.h), and the
 * filter_* settings say whether each list applies. A tool that follows a command's process tree
 * (follow.bpf.h, included before this) checks follow_procs instead of `tgids` when following.
 */
#ifndef DWUNW_SELECT_BPF_H
#define DWUNW_SELECT_BPF_H

#include "select.h"

const volatile __u32 filter_tgid = 0;        /* only tgids in `tgids` */
const volatile __u32 filter_tid = 0;         /* only tids in `tids` */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SEL_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SEL_MAX_FILTER);
	__type(key, __u32);
	__type(value, __u8);
} tids SEC(".maps");

static __always_inline int sel_tgid(__u32 tgid)
{
#ifdef DWUNW_FOLLOW_BPF_H
	if (follow_tree)
		return follow_match(tgid, 0);
#endif
	return !filter_tgid || bpf_map_lookup_elem(&tgids, &tgid);
}

/* a process chosen by the user (-p, or in the command's tree), not "all processes": the mapping
 * tracker follows only those (mmap_ev.bpf.h's MMAP_EV_TRACED) */
static __always_inline int sel_tgid_named(__u32 tgid)
{
#ifdef DWUNW_FOLLOW_BPF_H
	if (follow_tree)
		return follow_match(tgid, 0);
#endif
	return filter_tgid && bpf_map_lookup_elem(&tgids, &tgid);
}

/* the process and the thread (not the idle task's tid 0: the tool decides on that) */
static __always_inline int sel_thread(__u32 tgid, __u32 tid)
{
	return sel_tgid(tgid) && (!filter_tid || bpf_map_lookup_elem(&tids, &tid));
}

#endif /* DWUNW_SELECT_BPF_H */
