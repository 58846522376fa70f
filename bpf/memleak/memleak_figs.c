// SPDX-License-Identifier: GPL-2.0-only
/* A stack's figures in a report interval: see memleak_figs.h. */
#include "memleak_figs.h"
#include "memleak_state.h"
#include "runtime/tool_util.h"

struct ml_stack_fig *ml_fig(struct memleak_ctx *ml, int64_t idx)
{
	if ((size_t)idx >= ml->nfigs) {
		size_t n = ml->st.n > (size_t)idx ? ml->st.n : (size_t)idx + 1;

		ml->figs = xrealloc(ml->figs, n * sizeof(*ml->figs));
		for (size_t k = ml->nfigs; k < n; k++)
			ml->figs[k] = (struct ml_stack_fig){ .first_alloc = -1 };
		ml->nfigs = n;
	}
	return &ml->figs[idx];
}
