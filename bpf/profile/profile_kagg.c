// SPDX-License-Identifier: GPL-2.0-only
/* profile --aggregate: the in-kernel counts drained (profile_kagg.h). */
#ifdef HAVE_KWALK
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "profile_rec.h"
#include "profile.skel.h"
#include "profile_kagg.h"
#include "profile_state.h"
#include "runtime/tool_util.h"

/* the programs counting into the old map: done within microseconds; give up after 100 ms */
static void wait_counters_out(struct profile_ctx *pr)
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(pr->skel->maps.agg_inflight);
	uint64_t *v = xcalloc((size_t)ncpu, sizeof(*v)), t0 = mono_ns();
	uint32_t zero = 0;

	for (;;) {
		int busy = 0;

		if (bpf_map_lookup_elem(fd, &zero, v))
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
static void clear_pids(struct profile_ctx *pr)
{
	int fd = bpf_map__fd(pr->skel->maps.agg_pids);
	uint32_t k, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (prev)
			bpf_map_delete_elem(fd, prev);
		k = next;
		prev = &k;
	}
	if (prev)
		bpf_map_delete_elem(fd, prev);
}

void pr_kagg_drain_pid(struct profile_ctx *pr, uint32_t pid)
{
	uint8_t v;

	if (!pr->kagg.on)
		return;
	/* flagged, or the flag map was full (then any pid may have counts) */
	if (pr->skel->bss->agg_pids_full || !bpf_map_lookup_elem(bpf_map__fd(pr->skel->maps.agg_pids), &pid, &v))
		pr_kagg_drain(pr);
}

void pr_kagg_drain(struct profile_ctx *pr)
{
	struct pr_kagg *a = &pr->kagg;
	struct pr_agg_ckey key, next, *prev = NULL;
	uint32_t g;
	int cfd, sfd;

	if (!a->on)
		return;
	__atomic_store_n(&pr->skel->bss->agg_pids_full, 0, __ATOMIC_SEQ_CST);
	clear_pids(pr);
	g = pr->skel->bss->agg_gen;
	__atomic_store_n(&pr->skel->bss->agg_gen, g + 1, __ATOMIC_SEQ_CST);
	wait_counters_out(pr);
	cfd = bpf_map__fd(g & 1 ? pr->skel->maps.agg_counts1 : pr->skel->maps.agg_counts0);
	sfd = bpf_map__fd(pr->skel->maps.agg_stacks);
	a->drains++;
	/* no program writes this map now: read every key, then empty it */
	a->n = 0;
	while (!bpf_map_get_next_key(cfd, prev, &next)) {
		uint64_t count;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(cfd, &key, &count))
			continue;
		if (a->n == a->cap) {
			a->cap = a->cap ? a->cap * 2 : 1024;
			a->keys = xrealloc(a->keys, a->cap * sizeof(*a->keys));
			a->counts = xrealloc(a->counts, a->cap * sizeof(*a->counts));
		}
		a->bytes += 2 * sizeof(key) + sizeof(count); /* the key read twice, its count */
		a->keys[a->n] = key;
		a->counts[a->n++] = count;
	}
	for (size_t i = 0; i < a->n; i++) {
		struct pr_agg_stack *st = (struct pr_agg_stack *)a->ev->pcs;
		const struct pr_agg_ckey *k = &a->keys[i];

		bpf_map_delete_elem(cfd, k);
		a->drained += a->counts[i];
		if (bpf_map_lookup_elem(sfd, &k->s, st)) { /* cannot be: stacks are never removed */
			a->no_stack += a->counts[i];
			continue;
		}
		a->bytes += sizeof(*st);
		/* the record the walk would have sent (kwalk_hybrid.bpf.h), counted counts[i] times */
		memset(a->ev, 0, offsetof(struct kw_event, pcs));
		a->ev->h.kind = KW_KIND_EVENT;
		a->ev->h.hdr_size = sizeof(struct kw_event);
		a->ev->pid = k->pid;
		a->ev->tid = k->tid;
		a->ev->cookie = PR_COOKIE(k->kstack, 0);
		a->ev->aux = PR_STACK_NONE;
		a->ev->nframes = (uint16_t)k->s.n;
		a->ev->status = (uint8_t)k->s.status;
		a->on_walk(pr, a->ev, offsetof(struct kw_event, snap), a->counts[i]);
		/* the walker's figures per sample, as if each had come as its record */
		pr->prs.kw.events += a->counts[i] - 1;
		pr->prs.kw.kernel += a->counts[i] - 1;
		if (k->s.status < KW_ST_MAX)
			pr->prs.kw.status[k->s.status] += a->counts[i] - 1;
	}
	a->keys_drained += a->n;
}
#endif
