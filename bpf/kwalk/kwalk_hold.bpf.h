/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * In-kernel aggregation's hold (included by kwalk_agg.bpf.h): while a process's image or an
 * executable mapping changes, its walks go as records, not counts.
 *
 * Why: user space names a drained count with the process's state as applied so far. The walker
 * walks a new image right after its exec (its tables are already here), while user space, behind
 * on the ring, drains at the exec record before applying it: a count made after the exec would be
 * named with the old image ("[unknown]", or another module's names). A record stays in order with
 * the change's records and is named after them.
 *
 * kw_agg_hold: tgid -> until: ~0 while the change is under way, then the time its records were
 * sent. User space deletes an entry once a poll that started after that time has consumed the
 * ring (kw_drain_sweep, kwalk_drain.h). When the map cannot take a process, counting ends for
 * the run (kw_agg_hold_all, reported as hold_full): every walk then goes as a record.
 *
 * The tool defines before including kwalk_agg.bpf.h:
 *   KW_AGG_ENABLED          its --aggregate switch (.rodata)
 *   KW_HOLD_ON(tgid, tid)   whether the mapping tracker's calls of this thread are followed
 * and calls kw_hold_begin/kw_hold_end around its exec record, kw_held in its KW_HYBRID_TAKE, and
 * lists X(kw_hold) last in MT_CONSUMERS (it holds a process from the entry of a mapping call the
 * consumers before it want to its exit).
 */
#ifndef DWUNW_KWALK_HOLD_BPF_H
#define DWUNW_KWALK_HOLD_BPF_H

#ifndef KW_AGG_ENABLED
#error "define KW_AGG_ENABLED (the tool's --aggregate switch) before including kwalk_agg.bpf.h"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KW_AGG_HOLDS);
	__type(key, __u32);
	__type(value, __u64);
} kw_agg_hold SEC(".maps");

volatile __u32 kw_agg_hold_all = 0;   /* kw_agg_hold could not take a process: no more counting */

static __always_inline void kw_hold(__u32 tgid, __u64 until)
{
	if (KW_AGG_ENABLED && bpf_map_update_elem(&kw_agg_hold, &tgid, &until, BPF_ANY))
		kw_agg_hold_all = 1;
}

/* Around the tool's exec record of a selected process: the new image's walks go as records until
 * user space has applied it. */
static __always_inline void kw_hold_begin(__u32 tgid)
{
	kw_hold(tgid, ~0ull);
}

static __always_inline void kw_hold_end(__u32 tgid)
{
	kw_hold(tgid, bpf_ktime_get_ns());
}

/* In KW_HYBRID_TAKE: the walk must go as a record (pid held, or counting ended for the run). */
static __always_inline int kw_held(__u32 pid)
{
	return kw_agg_hold_all || bpf_map_lookup_elem(&kw_agg_hold, &pid) != NULL;
}

/* the mapping tracker's consumer (runtime/mmap_track.bpf.h): listed last, the calls another
 * consumer records are the ones it holds for (c->want has only theirs when it is asked) */
static __always_inline bool kw_hold_enter(__u32 want)
{
	if (want)
		kw_hold_begin(bpf_get_current_pid_tgid() >> 32);
	return want != 0;
}
#define kw_hold_mt_enabled KW_AGG_ENABLED
#define kw_hold_mt_on(tgid, tid) KW_HOLD_ON(tgid, tid)
#define kw_hold_mt_enter(ctx, c) kw_hold_enter((c)->want)
#define kw_hold_mt_exit(ctx, c, ret, tgid) kw_hold_end(tgid)
#define kw_hold_mt_lost() kw_hold_end(bpf_get_current_pid_tgid() >> 32)

#endif /* DWUNW_KWALK_HOLD_BPF_H */
