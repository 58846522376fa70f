/* SPDX-License-Identifier: GPL-2.0-only */
/* Places of a capture: the mapping, module (one reference per capture) and table of a pc. */
#ifndef DWUNW_PLACE_H
#define DWUNW_PLACE_H

#include "walk.h"

/* The place of the mapping holding *lookup (a recent one, else filled into the oldest slot); the
 * first frame using it is fi. *lookup may move to opc (a trampoline at a mapping's start). */
const struct place *dw_frame_place(struct walk *w, uint64_t *lookup, uint64_t opc, uint32_t fi);

/* The module references the capture holds go to the frames (dwunw_module_cache_release). */
void dw_hand_refs(struct walk *w, struct dwunw_frame *frames, size_t nf);

#endif
