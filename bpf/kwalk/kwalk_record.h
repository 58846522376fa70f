/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tool's in-kernel walker record (--unwind=kernel), handled the same in every tool: its stack
 * (kwalk_frames.h), nothing for a malformed event or a stop notice (the snapshot record that
 * follows a notice is the sample), and the process's tables reloaded when the walk asks for them.
 */
#ifndef DWUNW_KWALK_RECORD_H
#define DWUNW_KWALK_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "kwalk_frames.h"

struct kw_track;

/* The process of walker event `data` (0 when the record is too short to tell). */
uint32_t kw_record_pid(const void *data, size_t size);

#ifdef HAVE_DWUNW
/*
 * The interned stack of the sample in walker event `data`, FRAMES_FALLBACK (the caller takes
 * the frame-pointer stack of info->aux), or FRAMES_BAD / FRAMES_NOTICE: nothing to count.
 * `skip`, `space`, `stats`, `seen` as frames_from_kwalk's, walked with the tool's frames (t->fr).
 */
int64_t kw_record_stack(struct kw_track *t, const void *data, size_t size, uint32_t skip,
			uint64_t space, struct unwind_stats *stats, struct kwalk_seen *seen,
			struct kwalk_info *info);
#endif

#endif /* DWUNW_KWALK_RECORD_H */
