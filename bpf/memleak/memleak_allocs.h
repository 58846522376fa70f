/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's per-allocation bookkeeping in user space, kept small because it scales with the
 * number of outstanding allocations (up to the BPF allocs map's 1 M entries):
 *
 *  - the event table (dwarf mode): event id -> stack index, for the events of the last two
 *    report intervals (a dense window, 4 bytes per event) and for older events whose
 *    allocation is still outstanding (an open-addressing table, 12 bytes per slot at a load
 *    of at most 0.8, sized exactly rather than to a power of two);
 *  - the walk over the BPF allocs map at report time, in chunks (no copy of the whole map).
 *
 * Memory per outstanding allocation at steady state: 12 / 0.7 ~ 17 bytes in the table, plus
 * as much again for a moment while the table is rebuilt at the end of a report.
 */
#ifndef DWUNW_MEMLEAK_ALLOCS_H
#define DWUNW_MEMLEAK_ALLOCS_H

#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

/* An allocation's key without its tag (ML_KEY_*): the stack id, event id, error or reason. */
static inline uint64_t ml_key_value(uint64_t key)
{
	return key & (ML_KEY_FPERR - 1);
}

/* Remember the stack of a received event (evid 0 is ignored). */
void ml_ev_put(uint64_t evid, uint32_t stack);
/*
 * The stack of an event whose allocation is outstanding (-1: no record for it), and keep it
 * past the next ml_ev_prune.
 */
int64_t ml_ev_lookup_live(uint64_t evid);
/* The stack of a received event (-1: none), left as it is (forgotten at its prune). */
int64_t ml_ev_lookup(uint64_t evid);
/* Highest event id received so far (0: none). */
uint64_t ml_ev_max(void);
/*
 * End of a report: forget the events before the previous report's window end that were not
 * looked up as live since then; the window restarts at that point.
 */
void ml_ev_prune(void);
/* Bytes held by the event table now: its window (per event of the last intervals), its table
 * of old outstanding events, and the entries of that table. */
size_t ml_ev_window_bytes(void);
size_t ml_ev_old_bytes(void);
size_t ml_ev_old_entries(void);
void ml_ev_free(void);

/*
 * Call fn for every entry of the BPF allocs map (fd), read in chunks with the batch API, key
 * by key when the kernel cannot. Returns the entries visited.
 */
typedef void (*ml_alloc_fn)(void *ctx, uint64_t addr, const struct ml_alloc_info *info);
size_t ml_allocs_walk(int fd, ml_alloc_fn fn, void *ctx);

/*
 * Called between chunks of long loops (the map walk, the table rebuild) so the caller can keep
 * consuming the ring buffer: a report over a million allocations must not stall the consumer
 * for longer than the buffer lasts. ml_ev_put may be called from it.
 */
void ml_set_yield(void (*fn)(void *arg), void *arg);

/* Kernel memory of a loaded BPF map (fdinfo "memlock"), 0 when unknown. */
uint64_t ml_map_memlock(int fd);

#endif /* DWUNW_MEMLEAK_ALLOCS_H */
