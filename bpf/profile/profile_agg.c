// SPDX-License-Identifier: GPL-2.0-only
/* profile's bounded sample counts: see profile_agg.h. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "profile_agg.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"


static uint64_t key_hash(const struct pr_key *k)
{
	uint64_t h = hash64(k->pid | (uint64_t)k->tid << 32, (uint64_t)(uintptr_t)k->comm);

	return hash64(hash64(h, (uint64_t)k->kstack), (uint64_t)k->ustack);
}

static bool key_eq(const struct pr_key *a, const struct pr_key *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->comm == b->comm && a->kstack == b->kstack &&
	       a->ustack == b->ustack;
}

static void index_put(struct pr_agg *agg, size_t e)
{
	size_t i = agg->v[e].hash & (agg->index_cap - 1);

	while (agg->index[i])
		i = (i + 1) & (agg->index_cap - 1);
	agg->index[i] = (uint32_t)e + 1;
}

static struct pr_entry *find(const struct pr_agg *agg, const struct pr_key *k, uint64_t h)
{
	if (!agg->index_cap)
		return NULL;
	for (size_t i = h & (agg->index_cap - 1); agg->index[i]; i = (i + 1) & (agg->index_cap - 1)) {
		struct pr_entry *e = &agg->v[agg->index[i] - 1];

		if (e->hash == h && key_eq(&e->k, k))
			return e;
	}
	return NULL;
}

static struct pr_entry *insert(struct pr_agg *agg, const struct pr_key *k, uint64_t h)
{
	if (agg->n == agg->cap) {
		agg->cap = agg->cap ? agg->cap * 2 : 1024;
		agg->v = xrealloc(agg->v, agg->cap * sizeof(*agg->v));
	}
	if ((agg->n + 1) * 2 > agg->index_cap) {
		free(agg->index);
		agg->index_cap = agg->index_cap ? agg->index_cap * 2 : 2048;
		agg->index = xcalloc(agg->index_cap, sizeof(*agg->index));
		for (size_t e = 0; e < agg->n; e++)
			index_put(agg, e);
	}
	agg->v[agg->n] = (struct pr_entry){ .k = *k, .hash = h };
	index_put(agg, agg->n);
	return &agg->v[agg->n++];
}

void pr_agg_add(struct pr_agg *agg, struct stack_store *st, const struct pr_key *k, uint64_t count)
{
	uint64_t h = key_hash(k);
	struct pr_entry *e = find(agg, k, h);

	agg->samples += count;
	if (!e && agg->n >= agg->max) {
		/* one overflow key per pid and comm (they may exceed max: they are few) */
		struct pr_key o = { .pid = k->pid, .tid = k->tid, .comm = k->comm, .kstack = -1,
				    .ustack = pseudo_stack(st, "[aggregation table full]") };

		agg->overflow += count;
		h = key_hash(&o);
		e = find(agg, &o, h);
		if (!e)
			e = insert(agg, &o, h);
	} else if (!e) {
		e = insert(agg, k, h);
	}
	e->count += count;
}

void pr_agg_reset(struct pr_agg *agg)
{
	agg->n = 0;
	if (agg->index_cap)
		memset(agg->index, 0, agg->index_cap * sizeof(*agg->index));
}
