/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A bounded queue of variable-sized records between exactly one producer thread and one consumer
 * thread, without locks: a byte ring of [u32 size, u32 flags, data padded to 8] entries, with a
 * wrap entry where a record does not fit before the end. The producer owns `tail`, the consumer
 * `head`; each publishes its position with a release store and reads the other's with acquire.
 */
#ifndef DWUNW_REC_QUEUE_H
#define DWUNW_REC_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rec_queue {
	uint8_t *buf;
	size_t cap;            /* bytes, a multiple of 8 */
	uint64_t head;         /* bytes consumed (consumer) */
	uint64_t tail;         /* bytes produced (producer) */
	uint64_t pushed;       /* records produced (producer) */
	uint64_t popped;       /* records consumed (consumer) */
};

/* 0, or -ENOMEM / -EINVAL (fewer than 64 bytes). */
int rq_init(struct rec_queue *q, size_t bytes);
void rq_fini(struct rec_queue *q);

/* Producer: append a copy of the record; false when it does not fit now. */
bool rq_push(struct rec_queue *q, const void *data, size_t size);
/* Producer: whether a record of `size` bytes fits now. */
bool rq_fits(struct rec_queue *q, size_t size);

/* Consumer: the oldest record (valid until rq_pop), or NULL when the queue is empty. */
const void *rq_peek(struct rec_queue *q, size_t *size);
void rq_pop(struct rec_queue *q);

/* Either side: records produced / consumed so far. */
uint64_t rq_pushed(const struct rec_queue *q);
uint64_t rq_popped(const struct rec_queue *q);

#endif /* DWUNW_REC_QUEUE_H */
