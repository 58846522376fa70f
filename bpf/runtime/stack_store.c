// SPDX-License-Identifier: GPL-2.0-only
/* Interned user stacks: see stack_store.h. */
#include <stdlib.h>
#include <string.h>
#include "intern.h"
#include "stack_store.h"
#include "tool_util.h"

void stack_store_init(struct stack_store *st, size_t max)
{
	*st = (struct stack_store){ .max = max ? max : STACK_STORE_MAX };
}

static bool stack_same(const struct ustack *s, uint64_t space, uint32_t kind, int32_t stop,
		       const char *label, const uint64_t *pcs, const uint64_t *ids, uint32_t n)
{
	if (s->space != space || s->kind != kind || s->stop != stop || s->nframes != n ||
	    s->label != label || !s->ids != !ids)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (s->frames[i].pc != pcs[i] || (ids && s->ids[i] != ids[i]))
			return false;
	return true;
}

static void index_put(struct stack_store *st, uint64_t hash, uint32_t idx)
{
	size_t i = hash & (st->index_cap - 1);

	while (st->index[i])
		i = (i + 1) & (st->index_cap - 1);
	st->index[i] = idx + 1;
}

static void index_grow(struct stack_store *st)
{
	size_t ncap = st->index_cap ? st->index_cap * 2 : 1024;

	free(st->index);
	st->index = xcalloc(ncap, sizeof(*st->index));
	st->index_cap = ncap;
	for (size_t k = 0; k < st->n; k++)
		index_put(st, st->v[k].hash, (uint32_t)k);
}

int64_t pseudo_stack(struct stack_store *st, const char *label)
{
	return stack_get(st, SK_PSEUDO, 0, intern(label), NULL, NULL, 0, NULL, NULL);
}

int64_t stack_get_in(struct stack_store *st, uint64_t space, uint32_t kind, int32_t stop, const char *label,
		     const char *stop_name, const uint64_t *pcs, uint32_t n, fill_fn fill, void *arg)
{
	return stack_get_ids(st, space, kind, stop, label, stop_name, pcs, NULL, n, fill, arg);
}

int64_t stack_get_ids(struct stack_store *st, uint64_t space, uint32_t kind, int32_t stop, const char *label,
		      const char *stop_name, const uint64_t *pcs, const uint64_t *ids, uint32_t n,
		      fill_fn fill, void *arg)
{
	uint64_t h = hash64(hash64(hash64(space, kind), (uint64_t)(uint32_t)stop),
			    (uint64_t)(uintptr_t)label);
	struct ustack *s;
	size_t i;

	for (uint32_t k = 0; k < n; k++)
		h = hash64(h, ids ? pcs[k] ^ ids[k] : pcs[k]);
	if (st->index_cap)
		for (i = h & (st->index_cap - 1); st->index[i]; i = (i + 1) & (st->index_cap - 1)) {
			s = &st->v[st->index[i] - 1];
			if (s->hash == h && stack_same(s, space, kind, stop, label, pcs, ids, n))
				return st->index[i] - 1;
		}
	/* pseudo stacks always fit: the table keeps room for them */
	if (kind != SK_PSEUDO && st->n >= st->max) {
		st->full++;
		return pseudo_stack(st, "[stack table full]");
	}
	if (st->n == st->cap) {
		st->cap = st->cap ? st->cap * 2 : 256;
		st->v = xrealloc(st->v, st->cap * sizeof(*st->v));
	}
	if ((st->n + 1) * 2 > st->index_cap)
		index_grow(st);
	s = &st->v[st->n];
	memset(s, 0, sizeof(*s));
	s->hash = h;
	s->space = space;
	s->kind = kind;
	s->stop = stop;
	s->label = label;
	s->stop_name = stop_name;
	s->nframes = n;
	s->frames = xcalloc(n, sizeof(*s->frames));
	st->bytes += n * (sizeof(*s->frames) + (ids ? sizeof(*s->ids) : 0));
	for (uint32_t k = 0; k < n; k++)
		s->frames[k].pc = pcs[k];
	if (ids && n) {
		s->ids = xcalloc(n, sizeof(*s->ids));
		memcpy(s->ids, ids, n * sizeof(*ids));
	}
	if (fill && n)
		fill(arg, s->frames, n);
	index_put(st, h, (uint32_t)st->n);
	return (int64_t)st->n++;
}

size_t stack_store_compact(struct stack_store *st, const bool *keep, int64_t *remap)
{
	size_t m = 0, freed = 0;

	for (size_t k = 0; k < st->n; k++) {
		struct ustack *s = &st->v[k];

		if (!keep[k]) {
			st->bytes -= s->nframes * (sizeof(*s->frames) + (s->ids ? sizeof(*s->ids) : 0));
			free(s->frames);
			free(s->ids);
			remap[k] = -1;
			freed++;
			continue;
		}
		remap[k] = (int64_t)m;
		if (m != k)
			st->v[m] = *s;
		m++;
	}
	st->n = m;
	st->freed += freed;
	if (st->index_cap) {
		memset(st->index, 0, st->index_cap * sizeof(*st->index));
		for (size_t k = 0; k < st->n; k++)
			index_put(st, st->v[k].hash, (uint32_t)k);
	}
	return freed;
}
