// SPDX-License-Identifier: GPL-2.0-only
/* The context's place memo (place_memo.h). */
#include <string.h>
#include "place_memo.h"

_Static_assert(sizeof(struct place) <= sizeof(((struct dwunw_ctx_impl *)0)->memo_place[0]),
	       "a place fits the context's memo");
_Static_assert(sizeof(((struct walk *)0)->own) / sizeof(struct place) == DW_MEMO_PLACES,
	       "a capture has as many places as the memo");
_Static_assert(DW_MEMO_PLACES <= 8, "walk.filled has a bit per place");

/* A place filled by this capture into slot i of the memo (place.c): its shape cache starts empty. */
void dw_memo_fill(struct walk *w, struct place *pl)
{
	struct dwunw_ctx_impl *c = w->c;
	unsigned i = (unsigned)(pl - (struct place *)c->memo_place);
	uint64_t d = c->memo_dirty[i];

	if (!pl->rcache || !pl->mod)
		return; /* not kept: dw_no_shapes, as place_fill left it */
	pl->shapes = c->memo_shapes[i];
	pl->dirty = &c->memo_dirty[i];
	pl->shapes_w = 1;
	/* every key DW_SHAPE_EMPTY: only the sets written since (a capture through more modules
	 * than places refills them often) */
	for (; d; d &= d - 1)
		memset(&pl->shapes[__builtin_ctzll(d) * DW_SHAPE_WAYS], 0xff, DW_SHAPE_WAYS * sizeof(*pl->shapes));
	c->memo_dirty[i] = 0;
	c->memo_gen[i] = atomic_load_explicit(&pl->mod->gen, memory_order_relaxed);
}
