// SPDX-License-Identifier: GPL-2.0-only
/* In-kernel aggregation drained: see kwalk_drain.h. */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kwalk_drain.h"
#include "kwalk_frames.h"
#include "runtime/mmap_ev.h"
#include "runtime/tool_util.h"

static const char *const maps[] = { "kw_agg_stacks", "kw_agg_counts0", "kw_agg_counts1", "kw_agg_hold" };

int kw_drain_shrink(struct bpf_object *obj)
{
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, maps[i]);
		int err = m ? bpf_map__set_max_entries(m, 1) : -ENOENT;

		if (err)
			return err;
	}
	return 0;
}

static int map_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
}

int kw_drain_open(struct kw_drain *d, struct bpf_object *obj, volatile uint32_t *gen,
		  volatile uint32_t *pids_full, volatile uint32_t *hold_all, kw_drain_fn fn, void *arg)
{
	d->stacks_fd = map_fd(obj, "kw_agg_stacks");
	d->counts_fd[0] = map_fd(obj, "kw_agg_counts0");
	d->counts_fd[1] = map_fd(obj, "kw_agg_counts1");
	d->pids_fd = map_fd(obj, "kw_agg_pids");
	d->inflight_fd = map_fd(obj, "kw_agg_inflight");
	d->hold_fd = map_fd(obj, "kw_agg_hold");
	if (d->stacks_fd < 0 || d->counts_fd[0] < 0 || d->counts_fd[1] < 0 || d->pids_fd < 0 ||
	    d->inflight_fd < 0 || d->hold_fd < 0)
		return -ENOENT;
	d->gen = gen;
	d->pids_full = pids_full;
	d->hold_all = hold_all;
	d->swept_poll_ns = 0;
	d->fn = fn;
	d->arg = arg;
	d->ev = xcalloc(1, sizeof(*d->ev));
	d->on = true;
	return 0;
}

void kw_drain_free(struct kw_drain *d)
{
	free(d->ev);
	free(d->keys);
	free(d->vals);
	d->ev = NULL;
	d->keys = NULL;
	d->vals = NULL;
	d->on = false;
}

/* the programs counting into the old map: done within microseconds; give up after 100 ms */
static void wait_counters_out(struct kw_drain *d)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = xcalloc((size_t)ncpu, sizeof(*v)), t0 = mono_ns();
	uint32_t zero = 0;

	for (;;) {
		int busy = 0;

		if (bpf_map_lookup_elem(d->inflight_fd, &zero, v))
			break;
		for (int c = 0; c < ncpu; c++)
			busy |= v[c] != 0;
		if (!busy || mono_ns() - t0 > 100000000ull)
			break;
		sched_yield();
	}
	free(v);
}

/* the pids flagged so far: cleared before the flip (a count after it flags its pid again) */
static void clear_pids(struct kw_drain *d)
{
	uint32_t k, next, *prev = NULL;

	while (!bpf_map_get_next_key(d->pids_fd, prev, &next)) {
		if (prev)
			bpf_map_delete_elem(d->pids_fd, prev);
		k = next;
		prev = &k;
	}
	if (prev)
		bpf_map_delete_elem(d->pids_fd, prev);
}

void kw_drain_pid(struct kw_drain *d, uint32_t pid)
{
	uint8_t v;

	if (!d->on)
		return;
	/* flagged, or the flag map was full (then any pid may have counts) */
	if (*d->pids_full || !bpf_map_lookup_elem(d->pids_fd, &pid, &v))
		kw_drain_all(d);
}

void kw_drain_mapev(struct kw_drain *d, const void *data, size_t size)
{
	const struct mmap_ev_rec *r = data;

	if (d->on && size >= offsetof(struct mmap_ev_rec, op))
		kw_drain_pid(d, r->pid);
}

void kw_drain_all(struct kw_drain *d)
{
	struct kw_agg_key key, next, *prev = NULL;
	struct kw_agg_stack *st = (struct kw_agg_stack *)d->ev->pcs;
	uint32_t g;
	int cfd;

	if (!d->on)
		return;
	__atomic_store_n(d->pids_full, 0, __ATOMIC_SEQ_CST);
	clear_pids(d);
	g = *d->gen;
	__atomic_store_n(d->gen, g + 1, __ATOMIC_SEQ_CST);
	wait_counters_out(d);
	cfd = d->counts_fd[g & 1];
	d->drains++;
	/* no program writes this map now: read every key, then empty it */
	d->n = 0;
	while (!bpf_map_get_next_key(cfd, prev, &next)) {
		struct kw_agg_val v;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(cfd, &key, &v))
			continue;
		if (d->n == d->cap) {
			d->cap = d->cap ? d->cap * 2 : 1024;
			d->keys = xrealloc(d->keys, d->cap * sizeof(*d->keys));
			d->vals = xrealloc(d->vals, d->cap * sizeof(*d->vals));
		}
		d->bytes += 2 * sizeof(key) + sizeof(v); /* the key read twice, its value */
		d->keys[d->n] = key;
		d->vals[d->n++] = v;
	}
	for (size_t i = 0; i < d->n; i++) {
		const struct kw_agg_key *k = &d->keys[i];

		bpf_map_delete_elem(cfd, k);
		d->events += d->vals[i].count;
		if (bpf_map_lookup_elem(d->stacks_fd, &k->s, st)) { /* cannot be: stacks are never removed */
			d->no_stack += d->vals[i].count;
			continue;
		}
		d->bytes += sizeof(*st);
		/* the event the walk would have sent (kwalk_hybrid.bpf.h) */
		memset(d->ev, 0, offsetof(struct kw_event, pcs));
		d->ev->h.kind = KW_KIND_EVENT;
		d->ev->h.hdr_size = sizeof(struct kw_event);
		d->ev->pid = k->pid;
		d->ev->tid = k->tid;
		d->ev->nframes = (uint16_t)k->s.n;
		d->ev->status = (uint8_t)k->s.status;
		d->fn(d->arg, d->ev, k, &d->vals[i]);
	}
	d->keys_drained += d->n;
}

void kw_drain_seen(struct kwalk_seen *seen, const struct kw_agg_key *k, uint64_t count)
{
	if (!count)
		return;
	seen->events += count - 1;
	seen->kernel += count - 1;
	if (k->s.status < KW_ST_MAX)
		seen->status[k->s.status] += count - 1;
}

void kw_drain_sweep(struct kw_drain *d, uint64_t poll_ns)
{
	uint32_t key, next, gone[64];
	uint64_t until, before = d->swept_poll_ns;
	size_t n = 0;
	bool more;

	if (!d->on)
		return;
	d->swept_poll_ns = poll_ns;
	more = !bpf_map_get_next_key(d->hold_fd, NULL, &next);
	/* deleted after the walk (a delete during it may restart it); the rest at the next poll */
	while (more && n < sizeof(gone) / sizeof(gone[0])) {
		key = next;
		more = !bpf_map_get_next_key(d->hold_fd, &key, &next);
		if (!bpf_map_lookup_elem(d->hold_fd, &key, &until) && until < before)
			gone[n++] = key;
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(d->hold_fd, &gone[i]);
}
