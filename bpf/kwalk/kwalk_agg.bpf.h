/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * In-kernel aggregation of complete walks (kwalk_agg.h), BPF side: included after kwalk.bpf.h by
 * a tool that counts its walked stacks here instead of sending one event each. The tool stores
 * the walk (kw_agg_stack_put, from its KW_HYBRID_TAKE) and counts it under its key when it has
 * its amount (kw_agg_count: at once for a sample, at the switch-in for a span). While a process's
 * image or executable mappings change, its walks go as records (kwalk_hold.bpf.h).
 */
#ifndef DWUNW_KWALK_AGG_BPF_H
#define DWUNW_KWALK_AGG_BPF_H

#include "kwalk_agg.h"

#ifndef EEXIST
#define EEXIST 17
#endif

volatile __u32 kw_agg_gen = 0;        /* the count map BPF writes: kw_agg_counts(gen & 1) */
volatile __u32 kw_agg_pids_full = 0;  /* a pid could not be flagged in kw_agg_pids */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, KW_AGG_STACKS);
	__type(key, struct kw_agg_skey);
	__type(value, struct kw_agg_stack);
} kw_agg_stacks SEC(".maps");

struct kw_agg_counts {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, KW_AGG_KEYS);
	__type(key, struct kw_agg_key);
	__type(value, struct kw_agg_val);
};
struct kw_agg_counts kw_agg_counts0 SEC(".maps");
struct kw_agg_counts kw_agg_counts1 SEC(".maps");

/* pids with counts not yet drained: an exec or exit of theirs drains first (user space clears it) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} kw_agg_pids SEC(".maps");

/* per CPU: 1 while a program counts (user space waits for 0 after flipping kw_agg_gen) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} kw_agg_inflight SEC(".maps");

struct kw_agg_hash_ctx {
	struct kw_scratch *s;
	__u64 h;
};

static long kw_agg_hash_frame(__u64 i, void *arg)
{
	struct kw_agg_hash_ctx *x = arg;
	__u32 k = (__u32)i & (KW_MAX_FRAMES - 1);

	x->h = (x->h ^ x->s->pcs[k] ^ ((__u64)x->s->how[k] << 56)) * 0x9e3779b97f4a7c15ull;
	x->h ^= x->h >> 31;
	return 0;
}

/* The complete walk in s stored under its key (*key): 0, or -1 (no frames, the map full). */
static __always_inline int kw_agg_stack_put(struct kw_walk *w, struct kw_scratch *s, struct kw_agg_skey *key)
{
	struct kw_agg_hash_ctx x = { .s = s, .h = w->n };
	long err;

	if (w->n == 0 || w->n > KW_MAX_FRAMES)
		return -1;
	bpf_loop(w->n, kw_agg_hash_frame, &x, 0);
	key->hash = x.h;
	key->n = w->n;
	key->status = w->status;
	err = bpf_map_update_elem(&kw_agg_stacks, key, s->pcs, BPF_NOEXIST);
	return err && err != -EEXIST ? -1 : 0;
}

static __always_inline int kw_agg_add(void *map, struct kw_agg_key *k, __u64 sum)
{
	struct kw_agg_val one = { .count = 1, .sum = sum }, *v = bpf_map_lookup_elem(map, k);

	if (!v) {
		if (!bpf_map_update_elem(map, k, &one, BPF_NOEXIST))
			return 1;
		v = bpf_map_lookup_elem(map, k); /* another CPU made it first */
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->sum, sum);
	return 1;
}

/* One event of k (its stack stored), sum its amount: 1 counted, 0 not (a map full). */
static __always_inline int kw_agg_count(struct kw_agg_key *k, __u64 sum)
{
	__u32 zero = 0, pid = k->pid;
	__u64 *busy = bpf_map_lookup_elem(&kw_agg_inflight, &zero);
	int ok;

	if (!busy)
		return 0;
	__sync_fetch_and_add(busy, 1); /* before reading kw_agg_gen (a full barrier) */
	if (kw_agg_gen & 1)
		ok = kw_agg_add(&kw_agg_counts1, k, sum);
	else
		ok = kw_agg_add(&kw_agg_counts0, k, sum);
	__sync_fetch_and_sub(busy, 1);
	if (ok && !bpf_map_lookup_elem(&kw_agg_pids, &pid)) {
		__u8 one = 1;

		if (bpf_map_update_elem(&kw_agg_pids, &pid, &one, BPF_ANY))
			kw_agg_pids_full = 1; /* then every exec and exit drains */
	}
	return ok;
}

#include "kwalk_hold.bpf.h"

#endif /* DWUNW_KWALK_AGG_BPF_H */
