// SPDX-License-Identifier: GPL-2.0-only
/* A tool's in-kernel walker record: stack, notices, table reloads (kwalk_record.h). */
#include <string.h>
#include "kwalk_record.h"
#include "kwalk_track_user.h"
#include "kwalk_user.h"

uint32_t kw_record_pid(const void *data, size_t size)
{
	uint32_t pid = 0;

	if (size >= offsetof(struct kw_event, snap))
		memcpy(&pid, (const char *)data + offsetof(struct kw_event, pid), sizeof(pid));
	return pid;
}

#ifdef HAVE_DWUNW
int64_t kw_record_stack(struct kw_track *t, const void *data, size_t size, uint32_t skip,
			uint64_t space, struct unwind_stats *stats, struct kwalk_seen *seen,
			struct kwalk_info *info)
{
	int64_t idx = frames_from_kwalk(t->fr, data, size, skip, space, stats, seen, info);

	if (idx == FRAMES_BAD)
		return idx;
	if (kw_wants_reload(info->status))
		kw_track_reload(t, info->pid, false);
	return idx;
}
#endif
