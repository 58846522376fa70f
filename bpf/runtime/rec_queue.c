// SPDX-License-Identifier: GPL-2.0-only
/* Single-producer single-consumer record queue (rec_queue.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "rec_queue.h"

#define RQ_WRAP 1u     /* flags: nothing more before the end, go on at offset 0 */

struct rq_hdr {
	uint32_t size;
	uint32_t flags;
};

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

int rq_init(struct rec_queue *q, size_t bytes)
{
	memset(q, 0, sizeof(*q));
	bytes &= ~(size_t)7;
	if (bytes < 64)
		return -EINVAL;
	/* pages are only touched as the queue first goes round */
	q->buf = malloc(bytes);
	if (!q->buf)
		return -ENOMEM;
	q->cap = bytes;
	return 0;
}

void rq_fini(struct rec_queue *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* Bytes the record takes from the free space, with the unused end it skips; 0: never fits. */
static size_t rq_cost(const struct rec_queue *q, size_t size, size_t *skip)
{
	size_t need = sizeof(struct rq_hdr) + ALIGN8(size);
	size_t to_end = q->cap - (size_t)(q->tail % q->cap);

	*skip = need > to_end ? to_end : 0;
	return size > UINT32_MAX || need > q->cap ? 0 : *skip + need;
}

bool rq_fits(struct rec_queue *q, size_t size)
{
	uint64_t head = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
	size_t skip, cost = rq_cost(q, size, &skip);

	return cost && (size_t)(q->tail - head) + cost <= q->cap;
}

bool rq_push(struct rec_queue *q, const void *data, size_t size)
{
	uint64_t head = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
	size_t off = (size_t)(q->tail % q->cap), skip, cost = rq_cost(q, size, &skip);
	struct rq_hdr h = { (uint32_t)size, 0 };

	if (!cost || (size_t)(q->tail - head) + cost > q->cap)
		return false;
	if (skip) {
		struct rq_hdr w = { 0, RQ_WRAP };

		memcpy(q->buf + off, &w, sizeof(w)); /* to_end >= 8: offsets are multiples of 8 */
		off = 0;
	}
	memcpy(q->buf + off, &h, sizeof(h));
	memcpy(q->buf + off + sizeof(h), data, size);
	__atomic_store_n(&q->tail, q->tail + cost, __ATOMIC_RELEASE);
	/* after tail: who sees the count also sees the record */
	__atomic_store_n(&q->pushed, q->pushed + 1, __ATOMIC_RELEASE);
	return true;
}

const void *rq_peek(struct rec_queue *q, size_t *size)
{
	for (;;) {
		uint64_t tail = __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE);
		size_t off = (size_t)(q->head % q->cap);
		struct rq_hdr h;

		if (q->head == tail)
			return NULL;
		memcpy(&h, q->buf + off, sizeof(h));
		if (h.flags & RQ_WRAP) {
			__atomic_store_n(&q->head, q->head + (q->cap - off), __ATOMIC_RELEASE);
			continue;
		}
		*size = h.size;
		return q->buf + off + sizeof(h);
	}
}

void rq_pop(struct rec_queue *q)
{
	size_t off = (size_t)(q->head % q->cap);
	struct rq_hdr h;

	memcpy(&h, q->buf + off, sizeof(h));
	__atomic_store_n(&q->head, q->head + sizeof(h) + ALIGN8(h.size), __ATOMIC_RELEASE);
	__atomic_store_n(&q->popped, q->popped + 1, __ATOMIC_RELEASE);
}

uint64_t rq_pushed(const struct rec_queue *q)
{
	return __atomic_load_n(&q->pushed, __ATOMIC_ACQUIRE);
}

uint64_t rq_popped(const struct rec_queue *q)
{
	return __atomic_load_n(&q->popped, __ATOMIC_ACQUIRE);
}
