// SPDX-License-Identifier: GPL-2.0-only
/* Places of a capture and the module references they hold (place.h). */
#include <string.h>
#include "live_read.h"
#include "place.h"
#include "place_memo.h"

const struct dw_shape dw_no_shapes[1 << DW_SHAPE_BITS] = {
	[0 ... (1 << DW_SHAPE_BITS) - 1] = { .key = DW_SHAPE_EMPTY },
};

/* A place for the mapping holding `lookup`, in slot pl (frame_place). */
static void place_fill(struct walk *w, struct place *pl, uint64_t lookup, uint32_t fi)
{
	struct dw_map *m;
	struct dwunw_module *mod = NULL;
	int err;

	memset(pl, 0, sizeof(*pl));
	if (!w->proc) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	m = (struct dw_map *)dw_proc_find(w->proc, lookup);
	if (!m && w->nowait && !w->refreshed && !w->proc->offline && !w->proc->pinned &&
	    !w->proc->from_miss) {
		/* maybe a library loaded after the maps were read: dwunw_load_for reads them again */
		pl->err = DWUNW_ERR_WOULDBLOCK;
		return;
	}
	if (!m && !w->nowait && !w->refreshed && !w->proc->offline && !w->proc->pinned) {
		/* a library loaded after the maps were read */
		struct dw_proc *old = w->proc;
		w->refreshed = 1;
		if (dw_proc_refresh(w->c, &w->proc) == DWUNW_OK) {
			/* the old maps are gone with the old snapshot (a reader still, this capture
			 * keeps them alive until it ends) */
			if (w->proc_ref)
				dw_proc_put(w->c, old);
			w->proc_ref = 1;
			memset(w->places, 0, DW_MEMO_PLACES * sizeof(*w->places));
			w->filled = (uint8_t)((1u << DW_MEMO_PLACES) - 1);
			m = (struct dw_map *)dw_proc_find(w->proc, lookup);
		}
	}
	pl->shapes = (struct dw_shape *)dw_no_shapes;
	pl->map = m;
	if (!m) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	pl->start = m->start;
	pl->len = m->end - m->start;
	if (pl->len) {
		pl->start1 = pl->start + 1;
		pl->len1 = pl->len - 1;
	}
	if (m->kind == DW_MAP_UPROBES)
		pl->fflags = DWUNW_FRAME_UPROBE_TRAMP;
	else if (m->kind == DW_MAP_ANON && (m->prot & DW_PROT_X))
		pl->fflags = DWUNW_FRAME_JIT;
	else if (m->kind == DW_MAP_VDSO)
		pl->fflags = DWUNW_FRAME_VDSO;
	{
		struct dwunw_frame hf = { .how = DWUNW_HOW_CFI, .flags = pl->fflags };
		memcpy(&pl->howflags, &hf.how, sizeof(pl->howflags));
	}
	if (m->kind != DW_MAP_FILE && m->kind != DW_MAP_VDSO) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	if (w->nheld == DW_HELD_MAX) {
		pl->err = DWUNW_ERR_CACHE_FULL;
		return;
	}
	err = w->nowait ? dw_map_module_cached(w->c, m, &mod) : dw_map_module(w->c, w->proc, m, dw_walk_image_read, w, &mod);
	if (err) {
		pl->err = err;
		return;
	}
	for (unsigned i = 0; i < w->nheld; i++)
		if (w->held[i].m == mod) {
			dw_module_put(mod); /* already held (maybe by a place from the memo, no frame yet) */
			if (w->held[i].frame > fi)
				w->held[i].frame = fi;
			goto found;
		}
	w->held[w->nheld].m = mod;
	w->held[w->nheld].frame = fi;
	w->nheld++;
found:
	pl->mod = mod;
	pl->bias = atomic_load_explicit(&m->bias, memory_order_relaxed);
	/* a built table (the common case) without the call */
	if (atomic_load_explicit(&mod->table_state, memory_order_acquire) == 1)
		pl->table = &mod->table;
	else if (w->nowait && atomic_load_explicit(&mod->table_state, memory_order_acquire) == 0) {
		pl->table = NULL;
		pl->err = DWUNW_ERR_WOULDBLOCK; /* built by dwunw_load_for */
		return;
	} else if (dw_module_table(mod, &pl->table) != DWUNW_OK) {
		pl->table = NULL;
		return;
	}
	pl->tbias = pl->bias + pl->table->base;
	/* walk_fast only below 4 GiB: the shape caches' keys are offsets in the mapping + 1, in
	 * 32 bits and never 0 (an empty entry) */
	pl->rcache = pl->len < UINT32_MAX - 1 ? pl->table->rcache : NULL;
	pl->rshift = 64 - pl->table->rcache_bits;
	pl->rules = pl->table->rules;
	pl->regrules = pl->table->regrules;
}

/*
 * Where a frame is when it is not in the previous frame's place. Callbacks bounce between a few
 * modules: the recent places are looked at before searching. A return address at the very start
 * of a mapping has no call before it there: it is a trampoline's (qemu's signal page) and belongs
 * to its own mapping, whose place is then returned with *lookup set to the pc.
 */
const struct place *dw_frame_place(struct walk *w, uint64_t *lookup, uint64_t opc, uint32_t fi)
{
	struct place *pl = NULL;

	for (unsigned i = 0; i < DW_MEMO_PLACES; i++)
		if (*lookup - w->places[i].start < w->places[i].len) {
			pl = &w->places[i];
			place_use(w, pl, fi);
			break;
		}
	if (!pl) {
		/* the oldest goes: places fill in order, so the victim rotates */
		unsigned v = w->nplaces++ % DW_MEMO_PLACES;
		pl = &w->places[v];
		w->filled |= (uint8_t)(1u << v);
		place_fill(w, pl, *lookup, fi);
		if (w->places != w->own)
			dw_memo_fill(w, pl);
	}
	if (DW_UNLIKELY(*lookup != opc && opc - pl->start >= pl->len && w->proc)) {
		const struct dw_map *own = dw_proc_find(w->proc, opc);
		if (own && own != pl->map) {
			*lookup = opc;
			return dw_frame_place(w, lookup, opc, fi);
		}
	}
	return pl;
}


/* The general case (dw_hand_refs_in_order takes the common one inline): holders whose frame
 * shows another module, out of frame order, too far apart, or without a frame. */
void dw_hand_refs(struct walk *w, struct dwunw_frame *frames, size_t nf)
{
	size_t at = 0;
	int list = nf > 0, sorted = 1;
	unsigned i;

	/* A place handed over to the mapping of the pc itself (frame_place's trampoline case) left
	 * its module on a frame showing another one: the first frame that shows it holds it. */
	for (i = 0; i < w->nheld; i++) {
		size_t fr = w->held[i].frame;
		if (fr < nf && frames[fr].module != w->held[i].m) {
			while (fr < nf && frames[fr].module != w->held[i].m)
				fr++;
			w->held[i].frame = fr < nf ? (uint32_t)fr : UINT32_MAX;
		}
		if (i && w->held[i - 1].frame > w->held[i].frame)
			sorted = 0;
	}
	/* in frame order (places from the memo get their frame when first used; usually they
	 * come in order already) */
	for (unsigned i = 1; !sorted && i < w->nheld; i++)
		for (unsigned j = i; j > 0 && w->held[j - 1].frame > w->held[j].frame; j--) {
			struct dwunw_module *m = w->held[j].m;
			uint32_t fr = w->held[j].frame;
			w->held[j] = w->held[j - 1];
			w->held[j - 1].m = m;
			w->held[j - 1].frame = fr;
		}
	for (unsigned i = 0; i < w->nheld; i++) {
		size_t fr = w->held[i].frame;
		if (fr >= nf) {
			dw_module_put(w->held[i].m); /* a frame that was not returned (none today) */
			continue;
		}
		frames[fr].flags |= DWUNW_FRAME_HOLDS_REF;
		if (!list || fr == at)
			continue;
		if (fr - at > DWUNW_FRAME_REF_NEXT_MAX) {
			list = 0;
			continue;
		}
		frames[at].flags |= (uint32_t)(fr - at) << DWUNW_FRAME_REF_NEXT_SHIFT;
		at = fr;
	}
	if (list)
		frames[0].flags |= DWUNW_FRAME_REF_LIST;
	else
		for (size_t i = 0; i < nf; i++)
			frames[i].flags &= ~(DWUNW_FRAME_REF_NEXT_MAX << DWUNW_FRAME_REF_NEXT_SHIFT);
}
