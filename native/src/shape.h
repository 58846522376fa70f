/* SPDX-License-Identifier: GPL-2.0-only */
/* A LEAN rule (table.h) pre-decoded for walk_fast: what its step reads, next to its key, so that
 * a warm frame needs one probe and no rule look-up. The context's memo keeps a small cache of them
 * per memo place (place_memo.h), owned by the capture holding the memo. */
#ifndef DWUNW_SHAPE_H
#define DWUNW_SHAPE_H

#include <stdint.h>

#define DW_SHAPE_BITS 8            /* entries per cache: 1 << DW_SHAPE_BITS */
#define DW_MEMO_PLACES 4           /* a capture's places (walk.h), each with a shape cache */
#define DW_SHAPE_WAYS 4            /* entries per set, the newest first: a few pcs that hash
				    * alike (it depends on the layout) do not evict each other */

#define DW_SHAPE_EMPTY UINT32_MAX  /* no key: a mapping with a shape cache is below 4 GiB - 2 */

struct dw_shape {
	uint32_t key;              /* the look-up's offset in the place's mapping; DW_SHAPE_EMPTY */
	int32_t cfa_off;
	int32_t off_min;           /* the slots: [cfa + off_min, + span) */
	uint32_t span;
	int8_t ra_slot, fp_slot;   /* in words from the CFA (fp_slot 0: not saved) */
	uint8_t flags;             /* the rule's DW_RULEF_* (LEAN) */
	uint8_t pad;
	int32_t lo_off;            /* cfa_off + off_min: the slots from the register (64-bit) */
	uint64_t step_mask;        /* registers the step sets */
};

/* The set of a key (a mapping offset): its first entry, the newest; the other ways follow. Bits
 * 2.. of the offset pick the set (arm64 and mips32 pcs are 4-byte aligned; return addresses in
 * one module spread over them evenly enough): one AND, no multiply. */
static inline uint32_t dw_shape_slot(uint32_t key)
{
	return key & ((1u << DW_SHAPE_BITS) - 1) & ~(uint32_t)(DW_SHAPE_WAYS - 1);
}

_Static_assert(DW_SHAPE_WAYS == 4, "dw_shape_slot: the ways are the offset's low 2 bits");
_Static_assert((1 << DW_SHAPE_BITS) / DW_SHAPE_WAYS <= 64, "a cache's sets fit a 64-bit dirty mask");

_Static_assert(sizeof(struct dw_shape) == 32, "a shape is 32 bytes: 2 per cache line");

#endif
