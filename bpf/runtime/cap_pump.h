/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A thread of its own that drains the capture buffers (capture_user.h) into a bounded queue
 * (rec_queue.h), so the thread that unwinds, symbolizes and prints never makes the producers
 * wait: while it is busy, records wait in the queue, and when the queue is full, in the kernel's
 * buffer (the drain thread stops reading), where the BPF side counts what no longer fits as lost
 * records and tags their allocations (nothing is dropped silently in between).
 *
 *   p = cap_pump_new(queue_bytes);
 *   r = dwunw_cap_reader_new(obj, perfbuf, perf_bytes, cap_pump_record, p);
 *   cap_pump_start(p, r);
 *   loop (one consumer thread): cap_pump_wait(p, ms); cap_pump_process(p, fn, ctx, limit);
 *   report: cap_pump_sync(p, fn, ctx, ms)   (every record submitted before the call is processed)
 *   cap_pump_free(p); dwunw_cap_reader_free(r);
 *
 * Records that arrive when they cannot fit at all (perf buffer: one more per CPU after the queue
 * filled) are counted as dropped, and the cookies of the snapshots among them are kept for the
 * consumer (cap_pump_take_dropped) so their allocations can be shown under a lost stack.
 */
#ifndef DWUNW_CAP_PUMP_H
#define DWUNW_CAP_PUMP_H

#include <stddef.h>
#include <stdint.h>
#include "capture_user.h"

struct cap_pump;

/* A pump with a queue of `queue_bytes` (at least 1 MiB); NULL when out of memory. */
struct cap_pump *cap_pump_new(size_t queue_bytes);
/* The reader's record callback (ctx: the pump); runs on the drain thread. */
int cap_pump_record(void *ctx, const void *data, size_t size);
/* Start the drain thread on reader r (which must call cap_pump_record). 0 or a negative errno. */
int cap_pump_start(struct cap_pump *p, struct dwunw_cap_reader *r);

/* Consumer: wait up to timeout_ms for records in the queue; 1: some are there, 0: none. */
int cap_pump_wait(struct cap_pump *p, int timeout_ms);
/*
 * Consumer: call fn for queued records, oldest first, at most `max` of them; stops early when fn
 * returns a negative value (that record is consumed). Returns the records processed. Not
 * reentrant: a call from inside fn processes nothing.
 */
size_t cap_pump_process(struct cap_pump *p, dwunw_cap_record_fn fn, void *ctx, size_t max);
/*
 * Consumer: make the drain thread read the buffers once more (everything the producers submitted
 * before this call goes into the queue, or stays in the buffers while the queue is full), then
 * process the queue up to there. 0, or -ETIMEDOUT when the drain thread could not finish such a
 * pass within timeout_ms (producers faster than the consumer: the queue never had room for all
 * the buffers held); what was queued meanwhile is processed either way.
 */
int cap_pump_sync(struct cap_pump *p, dwunw_cap_record_fn fn, void *ctx, int timeout_ms);

/* Records dropped because they did not fit in the queue. */
uint64_t cap_pump_dropped(struct cap_pump *p);
/* Cookies of dropped snapshot records since the last call (caller frees *out). */
size_t cap_pump_take_dropped(struct cap_pump *p, uint64_t **out);
/* Records lost by the perf buffer (dwunw_cap_reader_lost, read on the drain thread). */
uint64_t cap_pump_reader_lost(struct cap_pump *p);
/* Bytes of the queue. */
size_t cap_pump_queue_bytes(const struct cap_pump *p);
/* Most records waiting in the queue at once. */
uint64_t cap_pump_queue_peak(struct cap_pump *p);

/* Stop and join the drain thread (records still in the buffers stay there), free the pump. */
void cap_pump_free(struct cap_pump *p);

#endif /* DWUNW_CAP_PUMP_H */
