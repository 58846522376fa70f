// SPDX-License-Identifier: GPL-2.0-only
/*
 * --interval: what an interval's end frees (profile_out.h). Its keys were printed (and tallied):
 * they go. Its stacks go too, but those a key of a live process's current image used in the
 * interval (the next interval will likely see them again: not unwound and named anew), the
 * kernel stacks the interval used and the pseudo-stacks (reasons, a few).
 * A process that exited leaves nothing here after the interval of its last sample. The freed
 * memory goes back to the system right after (profile.c, pr_trim).
 */
#include <stdbool.h>
#include <stdlib.h>
#include "profile_state.h"
#include "runtime/tool_util.h"

void pr_interval_reset(struct profile_ctx *pr)
{
	struct stack_store *st = &pr->st;
	bool *keep = xcalloc(st->n + 1, sizeof(*keep));
	int64_t *remap = xcalloc(st->n + 1, sizeof(*remap));

	for (size_t i = 0; i < st->n; i++)
		keep[i] = st->v[i].kind == SK_PSEUDO;
	for (size_t i = 0; i < pr->agg.n; i++) {
		int64_t u = pr->agg.v[i].k.ustack, k = pr->agg.v[i].k.kstack;

		if (u >= 0 && !keep[u] && spaces_live(&pr->spaces, st->v[u].space))
			keep[u] = true;
		if (k >= 0)
			keep[k] = true;
	}
	pr_agg_reset(&pr->agg);
	if (stack_store_compact(st, keep, remap)) {
		/* the kernel stacks' cache: new indices; an id whose stack went is read again from
		 * the BPF stack map at its next sample */
		for (uint32_t id = 0; id < pr->kcache.n; id++)
			if (pr->kcache.map[id])
				pr->kcache.map[id] = (int32_t)(remap[pr->kcache.map[id] - 1] + 1);
		/* every stack left was looked at for --lines */
		pr->fr.lines_done = st->n;
	}
	free(keep);
	free(remap);
}
