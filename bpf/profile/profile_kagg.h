/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile --aggregate (kernel mode): the walked stacks counted in the BPF maps (profile.h,
 * agg_stacks / agg_counts0/1) drained into the tool's counts. A drain flips agg_gen, waits until
 * no program is counting into the old map, reads and empties it; each (pid, tid, kernel stack,
 * walked stack) goes through the walker-record path once with its count. Drained per interval,
 * before an exec or exit record (those samples are named with the maps they were taken in) and
 * at the end.
 */
#ifndef DWUNW_PROFILE_KAGG_H
#define DWUNW_PROFILE_KAGG_H

#include <stddef.h>
#include <stdint.h>

struct profile_ctx;

#ifdef HAVE_KWALK
/* Drain the counts (a no-op without --aggregate). */
void pr_kagg_drain(struct profile_ctx *pr);
/* Before pid's exec or exit record: drain when pid has counts not yet drained. */
void pr_kagg_drain_pid(struct profile_ctx *pr, uint32_t pid);
#endif

#endif /* DWUNW_PROFILE_KAGG_H */
