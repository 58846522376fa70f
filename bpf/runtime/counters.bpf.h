/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Loss and event counters on the BPF side: a per-CPU array (so counting on the hot path never
 * contends) and its increment, summed by user space (counters.h). PERCPU_COUNTERS(map, fn, n)
 * makes one set; the runtime's own (capture.bpf.h: cap_counters), the walker's tracker
 * (kwalk_track.bpf.h) and each tool's (memleak, profile, offcputime: tool_counters and
 * tool_count(), indexed by its own enum; tool_counters_read() in counters.h sums them).
 */
#ifndef DWUNW_COUNTERS_BPF_H
#define DWUNW_COUNTERS_BPF_H

#define PERCPU_COUNTERS(map, fn, n)						\
	struct {								\
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);			\
		__uint(max_entries, n);						\
		__type(key, __u32);						\
		__type(value, __u64);						\
	} map SEC(".maps");							\
										\
	static __always_inline void fn(__u32 idx)				\
	{									\
		__u64 *v = bpf_map_lookup_elem(&map, &idx);			\
										\
		if (v) /* atomic: the program can be preempted */		\
			__sync_fetch_and_add(v, 1);				\
	}

#endif /* DWUNW_COUNTERS_BPF_H */

