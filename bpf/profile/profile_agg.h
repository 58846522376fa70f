/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile's counts: samples keyed by (pid, comm, kernel stack, user stack), the stacks being
 * indices into the stack store. Bounded: once `max` keys exist, a new key's samples are
 * counted under its pid's overflow key (user and kernel stack "[aggregation table full]").
 */
#ifndef DWUNW_PROFILE_AGG_H
#define DWUNW_PROFILE_AGG_H

#include <stddef.h>
#include <stdint.h>

struct pr_key {
	uint32_t pid;
	uint32_t tid;          /* --interval only (0 otherwise) */
	const char *comm;      /* interned */
	int64_t kstack;        /* stack store index, -1: none */
	int64_t ustack;        /* stack store index, -1: none */
};

struct pr_entry {
	struct pr_key k;
	uint64_t hash;
	uint64_t count;
};

struct pr_agg {
	struct pr_entry *v;
	size_t n, cap;
	uint32_t *index;       /* open addressing: entry + 1 */
	size_t index_cap;
	size_t max;
	uint64_t overflow;     /* samples counted under an overflow key */
	uint64_t samples;
};

struct stack_store;

/* Count k (an overflow key's pseudo-stack interned in st when full). */
void pr_agg_add(struct pr_agg *agg, struct stack_store *st, const struct pr_key *k, uint64_t count);

/* --interval: the keys dropped once their interval is reported (samples and overflow stay the run's). */
void pr_agg_reset(struct pr_agg *agg);

#endif /* DWUNW_PROFILE_AGG_H */
