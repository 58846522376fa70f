/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Record -> frames for --unwind=kernel: an in-kernel walker event (struct kw_event, kwalk.bpf.h)
 * becomes an interned stack like a dwarf-mode snapshot's. A complete walk gives its pcs (frames
 * marked HOW_KERNEL); a walk that stopped short is unwound from the snapshot carried in the same
 * event (KW_EMIT), exactly as in dwarf mode, or is a stop notice whose snapshot comes as the next
 * record (kwalk_hybrid.bpf.h). Counts both, and the stops by reason, for the summary.
 */
#ifndef DWUNW_KWALK_FRAMES_H
#define DWUNW_KWALK_FRAMES_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include "runtime/frames.h"
#include "kwalk_format.h"

/* frames_from_kwalk: a stop notice; the sample's snapshot record follows (count it there) */
#define FRAMES_NOTICE (-3)

/* What the events were made of (the summary's "fallback %"). */
struct kwalk_seen {
	uint64_t events;       /* walker events received */
	uint64_t kernel;       /* stacks from the walker itself */
	uint64_t snapshot;     /* fell back: unwound from the event's snapshot */
	uint64_t bad;          /* malformed */
	uint64_t status[KW_ST_MAX]; /* by why the walk ended */
};

/* The event's identity (valid unless FRAMES_BAD). */
struct kwalk_info {
	uint32_t pid, tid;
	uint32_t status;       /* enum kw_status */
	uint64_t cookie;
	int64_t aux;
};

#ifdef HAVE_DWUNW
/*
 * The interned stack of event `data` (frames after the first `skip`), or FRAMES_BAD /
 * FRAMES_FALLBACK as frames_from_snapshot, or FRAMES_NOTICE. `space` as there.
 */
int64_t frames_from_kwalk(struct frames *fr, const void *data, size_t size, uint32_t skip,
			  uint64_t space, struct unwind_stats *stats, struct kwalk_seen *seen,
			  struct kwalk_info *info);
#endif

/* The summary's figures of `s` as JSON members (events, from_kernel, fallback, fallback_pct, bad,
 * by_status: the stops by name), without the braces: the tool's own members may follow. */
void kwalk_seen_json(FILE *out, const struct kwalk_seen *s);

#endif /* DWUNW_KWALK_FRAMES_H */
