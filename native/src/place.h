/* SPDX-License-Identifier: GPL-2.0-only */
/* Places of a capture: the mapping, module (one reference per capture) and table of a pc. */
#ifndef DWUNW_PLACE_H
#define DWUNW_PLACE_H

#include "walk.h"

/* The place of the mapping holding *lookup (a recent one, else filled into the oldest slot); the
 * first frame using it is fi. *lookup may move to opc (a trampoline at a mapping's start). */
const struct place *dw_frame_place(struct walk *w, uint64_t *lookup, uint64_t opc, uint32_t fi);

/* The module references the capture holds go to the frames (dwunw_module_cache_release): one
 * per module, on the first frame using it; frame 0 and each holder link to the next holder, so
 * that the release visits only those. */
void dw_hand_refs(struct walk *w, struct dwunw_frame *frames, size_t nf);

/* dw_hand_refs in the common case, inline: each holder's frame shows its module, in frame order,
 * near enough to the one before. Returns 0 (nothing done) otherwise. */
static inline int dw_hand_refs_in_order(struct walk *w, struct dwunw_frame *frames, size_t nf)
{
	uint32_t at = 0;
	unsigned i, j;

	if (!nf)
		return 0;
	for (i = 0; i < w->nheld; i++) {
		uint32_t fr = w->held[i].frame;
		if (fr >= nf || frames[fr].module != w->held[i].m || (i && fr <= at) ||
		    fr - at > DWUNW_FRAME_REF_NEXT_MAX)
			goto undo;
		frames[fr].flags |= DWUNW_FRAME_HOLDS_REF;
		frames[at].flags |= (fr - at) << DWUNW_FRAME_REF_NEXT_SHIFT;
		at = fr;
	}
	frames[0].flags |= DWUNW_FRAME_REF_LIST;
	return 1;
undo:
	/* the bits set so far: on frame 0 and the holders before i (no frame had any before) */
	frames[0].flags &= ~DWUNW_FRAME_REF_BITS;
	for (j = 0; j < i; j++)
		frames[w->held[j].frame].flags &= ~DWUNW_FRAME_REF_BITS;
	return 0;
}

#endif
