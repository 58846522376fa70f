/* SPDX-License-Identifier: GPL-2.0-only */
/* Memory for a capture beyond its registers: the snapshot, offline memory, the live process (read
 * in batches, with the samples compared to detect a stack changed since the event), read-only
 * module data. */
#ifndef DWUNW_LIVE_READ_H
#define DWUNW_LIVE_READ_H

#include <string.h>
#include "walk.h"

/* A dw_read_fn over the walk (arg): DWUNW_OK, DWUNW_ERR_STALE or another error. */
int dw_walk_read(void *arg, uint64_t addr, void *buf, size_t len);

/* A dw_read_fn reading a module image (the vDSO) out of the process: not a read beyond the snapshot. */
int dw_walk_image_read(void *arg, uint64_t addr, void *buf, size_t len);

static inline uint64_t wrap(const struct walk *w, uint64_t v)
{
	return w->asz == 4 ? (uint32_t)v : v;
}

static inline int read_word(struct walk *w, uint64_t addr, uint64_t *v)
{
	if (DW_LIKELY(addr >= w->snap_lo && w->snap_len >= w->asz && addr - w->snap_lo <= w->snap_len - w->asz)) {
		const uint8_t *p = w->snap + (addr - w->snap_lo);
		if (w->asz == 8) {
			memcpy(v, p, 8);
		} else {
			uint32_t x;
			memcpy(&x, p, 4);
			*v = x;
		}
		return DWUNW_OK;
	}
	*v = 0;
	return dw_walk_read(w, addr, v, w->asz);
}

#endif
