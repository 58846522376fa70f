// SPDX-License-Identifier: GPL-2.0-only
/* The context's place memo (place_memo.h). */
#include <string.h>
#include "place_memo.h"

_Static_assert(sizeof(struct place) <= sizeof(((struct dwunw_ctx_impl *)0)->memo_place[0]),
	       "a place fits the context's memo");

/* The places of the context's memo, when it is free and for this process: each one whose module
 * slot still holds the same load, with a reference (a frame takes it on first use). Returns
 * whether the capture owns the memo. */
int dw_memo_take(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;

	if (!w->proc || atomic_exchange_explicit(&c->memo_busy, 1, memory_order_acquire))
		return 0;
	if (c->memo_proc != w->proc || c->memo_proc_seq != w->proc->loaded_seq)
		return 1;
	for (uint32_t i = 0; i < c->memo_n; i++) {
		struct place *pl = &w->places[w->nplaces];
		memcpy(pl, c->memo_place[i], sizeof(*pl));
		DW_RACE_POINT();
		if (dw_module_get(pl->mod, c->memo_gen[i]) != DWUNW_OK) {
			memset(pl, 0, sizeof(*pl));
			continue;
		}
		pl->unused = 1;
		pl->hidx = (uint8_t)w->nheld;
		/* its pre-decoded rules (a memo place has walk_fast's look-up: a mapping below 4 GiB) */
		pl->shapes = c->memo_shapes[i];
		pl->memo_slot = (uint8_t)(i + 1);
		pl->shapes_w = 1;
		w->nplaces++;
		if (w->nheld && w->held[0].m == pl->mod) {
			/* two mappings of one module: one reference */
			dw_module_put(pl->mod);
			pl->hidx = 0;
			continue;
		}
		w->held[w->nheld].m = pl->mod;
		w->held[w->nheld].frame = UINT32_MAX; /* released at the end unless a frame uses it */
		w->nheld++;
	}
	return 1;
}

/* The memo from this capture's places (the first two with a table), then free it. */
void dw_memo_give(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;
	uint32_t n = 0;

	if (w->proc) {
		for (unsigned i = 0; i < DW_ARRAY_SIZE(w->places) && n < 2; i++) {
			const struct place *pl = &w->places[i];
			if (!pl->rcache || !pl->mod)
				continue;
			/* the memo place n itself: unchanged (its module, held all along, is the same
			 * load), and so is its shape cache */
			if (pl->memo_slot == n + 1) {
				n++;
				continue;
			}
			/* another mapping: its cache starts empty */
			memset(c->memo_shapes[n], 0, sizeof(c->memo_shapes[n]));
			memcpy(c->memo_place[n], pl, sizeof(*pl));
			((struct place *)c->memo_place[n])->unused = 0;
			c->memo_gen[n++] = atomic_load_explicit(&pl->mod->gen, memory_order_relaxed);
		}
		c->memo_proc = w->proc;
		c->memo_proc_seq = w->proc->loaded_seq;
	}
	c->memo_n = n;
	atomic_store_explicit(&c->memo_busy, 0, memory_order_release);
}
