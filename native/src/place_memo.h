/* SPDX-License-Identifier: GPL-2.0-only */
/* The context's place memo: the places of the last capture, in which the next capture of the same
 * process walks instead of looking its modules up again. */
#ifndef DWUNW_PLACE_MEMO_H
#define DWUNW_PLACE_MEMO_H

#include "walk.h"


/* Place pl was just filled in the memo w owns: its shape cache, emptied, and its module's load. */
void dw_memo_fill(struct walk *w, struct place *pl);


static inline void dw_place_empty(struct place *pl)
{
	pl->start = pl->len = 0;
	pl->start1 = pl->len1 = 0;
	pl->rcache = NULL;
	pl->mod = NULL;
	pl->unused = 0;
}

/* The capture's own places, empty. */
static inline void dw_own_places(struct walk *w)
{
	w->places = w->own;
	w->nplaces = 0;
	for (unsigned i = 0; i < DW_MEMO_PLACES; i++)
		dw_place_empty(&w->own[i]);
}

/* w's places: the memo's when it is free, else its own (empty). In the memo's, those of the same
 * process whose module slot still holds the same load keep their place and shapes, with a
 * reference (a frame takes it on first use); the others are emptied. Returns whether the
 * capture owns the memo. */
static inline int dw_memo_take(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;
	struct place *pls = (struct place *)c->memo_place;

	if (!w->proc || atomic_exchange_explicit(&c->memo_busy, 1, memory_order_acquire)) {
		dw_own_places(w);
		return 0;
	}
	w->places = pls;
	w->nplaces = c->memo_nplaces;
	if (c->memo_proc != w->proc || c->memo_proc_seq != w->proc->loaded_seq) {
		for (unsigned i = 0; i < DW_MEMO_PLACES; i++)
			dw_place_empty(&pls[i]);
		return 1;
	}
	for (unsigned i = 0; i < DW_MEMO_PLACES; i++) {
		struct place *pl = &pls[i];

		if (!pl->mod)
			continue; /* empty (dw_memo_give keeps only places with a module and a table) */
		DW_RACE_POINT();
		if (dw_module_get(pl->mod, c->memo_gen[i]) != DWUNW_OK) {
			dw_place_empty(pl);
			continue;
		}
		pl->unused = 1;
		for (unsigned h = 0; h < w->nheld; h++)
			if (w->held[h].m == pl->mod) {
				/* two mappings of one module: one reference */
				dw_module_put(pl->mod);
				pl->hidx = (uint8_t)h;
				goto next;
			}
		pl->hidx = (uint8_t)w->nheld;
		w->held[w->nheld].m = pl->mod;
		w->held[w->nheld].frame = UINT32_MAX; /* released at the end unless a frame uses it */
		w->nheld++;
next:;
	}
	return 1;
}

/* The memo keeps w's places that have a module and a table (those taken from it do: only the
 * ones this capture filled are looked at); frees it. */
static inline void dw_memo_give(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;
	struct place *pls = (struct place *)c->memo_place;

	for (unsigned d = w->filled; d; d &= d - 1) {
		struct place *pl = &pls[__builtin_ctz(d)];

		if (!pl->rcache || !pl->mod || pl->err)
			dw_place_empty(pl);
	}
	c->memo_proc = w->proc;
	c->memo_proc_seq = w->proc ? w->proc->loaded_seq : 0;
	c->memo_nplaces = w->nplaces;
	atomic_store_explicit(&c->memo_busy, 0, memory_order_release);
}

#endif
