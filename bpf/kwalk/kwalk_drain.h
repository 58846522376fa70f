/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * In-kernel aggregation (kwalk_agg.h), user side: the counts drained. A drain flips kw_agg_gen,
 * waits until no program is counting into the old map, reads and empties it, and hands each key
 * to the tool as the walker event its walk would have sent (pcs, how, pid, tid; the tool sets its
 * cookie) with its count and sum. A tool drains per interval, before an exec, exit or mapping-change
 * record of a process with counts (those events are named with the maps they were taken in), and
 * at the end. After each poll of the ring, kw_drain_sweep ends the holds (kwalk_hold.bpf.h) whose
 * records that poll applied.
 */
#ifndef DWUNW_KWALK_DRAIN_H
#define DWUNW_KWALK_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kwalk_agg.h"

struct bpf_object;
struct kw_event;
struct kwalk_seen;

/* One drained key: ev is the walker event made of it (the tool may change its cookie and aux). */
typedef void (*kw_drain_fn)(void *arg, struct kw_event *ev, const struct kw_agg_key *k,
			    const struct kw_agg_val *v);

struct kw_drain {
	bool on;
	int stacks_fd, counts_fd[2], pids_fd, inflight_fd, hold_fd;
	volatile uint32_t *gen, *pids_full;  /* the object's kw_agg_gen, kw_agg_pids_full (.bss) */
	volatile uint32_t *hold_all;         /* its kw_agg_hold_all: 1 once counting ended (hold_full) */
	uint64_t swept_poll_ns;              /* the start of the last poll that consumed the ring */
	kw_drain_fn fn;
	void *arg;
	struct kw_event *ev;
	struct kw_agg_key *keys;             /* one drain's keys and values */
	struct kw_agg_val *vals;
	size_t n, cap;
	uint64_t events;                     /* counted events drained */
	uint64_t keys_drained, drains;
	uint64_t bytes;                      /* read from the maps (keys, values, stacks) */
	uint64_t no_stack;                   /* events under a stack key not found (never expected) */
};

/* Before load: the maps one entry each when the tool does not aggregate. */
int kw_drain_shrink(struct bpf_object *obj);
/* After load: d drains obj's maps into fn. 0, or a negative errno (a map missing). */
int kw_drain_open(struct kw_drain *d, struct bpf_object *obj, volatile uint32_t *gen,
		  volatile uint32_t *pids_full, volatile uint32_t *hold_all, kw_drain_fn fn, void *arg);
/* Drain every count (a no-op when not on). */
void kw_drain_all(struct kw_drain *d);
/* Before pid's exec or exit record: drain when pid has counts not yet drained. */
void kw_drain_pid(struct kw_drain *d, uint32_t pid);
/* Before a mapping-change record (runtime/mmap_ev.h) is applied: its process's counts drained
 * first, so that they are named with the mappings they were walked in. */
void kw_drain_mapev(struct kw_drain *d, const void *data, size_t size);
/* After a poll that started at poll_ns consumed the ring (returned >= 0): the holds whose records
 * were sent before the previous such poll started are ended (their records are applied; two polls:
 * the other programs at the same event send theirs within that). A no-op when not on. */
void kw_drain_sweep(struct kw_drain *d, uint64_t poll_ns);
/* hold_full: 1 when the hold map could not take a process (counting in the kernel ended then). */
static inline uint64_t kw_drain_hold_full(const struct kw_drain *d)
{
	return d->on && *d->hold_all;
}
void kw_drain_free(struct kw_drain *d);
/* After the tool took a drained key's event as one (kw_record_stack): the walker's figures as if
 * each of its count events had come as its record. */
void kw_drain_seen(struct kwalk_seen *seen, const struct kw_agg_key *k, uint64_t count);

#endif /* DWUNW_KWALK_DRAIN_H */
