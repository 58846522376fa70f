/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The stack of one in-kernel walker event (struct kw_event), whichever path produced it: the
 * walker's pcs when its walk completed, else the snapshot carried in the same event, unwound by
 * libdwunw (the hybrid's fallback). What a tool's --unwind=kernel consumer calls per record.
 */
#ifndef DWUNW_KWALK_EVENT_H
#define DWUNW_KWALK_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include "kwalk_format.h"

struct kw_loader;
struct dwunw_ctx;

/* Where the stack came from. */
#define KW_FROM_KERNEL   1
#define KW_FROM_SNAPSHOT 2

struct kw_event_scratch {
	void *buf;                 /* dwunw_cap_prepare's copy (free() when done) */
	size_t size;
};

/*
 * Fill pcs[0 .. *n) (capacity *n on entry) for the event `data` of `size` bytes. Returns
 * KW_FROM_KERNEL or KW_FROM_SNAPSHOT, or a negative DWUNW_ERR_* / -errno when the event is
 * malformed or carries neither. When the walk stopped for want of tables (kw_wants_reload),
 * the process is reloaded into the maps (l may be NULL: no reload).
 */
int kw_event_stack(struct kw_loader *l, struct dwunw_ctx *ctx, const void *data, size_t size,
		   uint64_t *pcs, size_t *n, struct kw_event_scratch *scratch);

#endif
