// SPDX-License-Identifier: GPL-2.0-only
/*
 * bpf/runtime/rec_queue.c under two threads: a producer pushes records of varied sizes (8 .. 70 KiB,
 * each a sequence number and bytes derived from it), retrying while the queue is full; a
 * consumer pops them and checks that every record arrives once, in order, intact. Small queues
 * make the wrap-around and the full case frequent. Prints "records N wraps-checked ok" or the
 * first error, exit 1.
 *
 *   rec_queue_stress QUEUE_BYTES RECORDS
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rec_queue.h"

static struct rec_queue q;
static uint64_t nrec;
static size_t max_size;

static size_t size_of(uint64_t seq)
{
	/* mostly small, sometimes near the largest the queue can take */
	uint64_t h = seq * 0x9e3779b97f4a7c15ull;

	h ^= h >> 29;
	return 8 + (size_t)(h % (h % 16 == 0 || max_size < 2000 ? max_size : 2000));
}

static uint8_t byte_of(uint64_t seq, size_t i)
{
	return (uint8_t)(seq * 131 + i * 7);
}

static void *producer(void *arg)
{
	uint8_t *buf = malloc(max_size + 8); /* size_of() <= max_size + 7 */

	(void)arg;
	for (uint64_t seq = 0; seq < nrec; seq++) {
		size_t n = size_of(seq);

		memcpy(buf, &seq, 8);
		for (size_t i = 8; i < n; i++)
			buf[i] = byte_of(seq, i);
		while (!rq_push(&q, buf, n))
			sched_yield();
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	uint64_t seq = 0;

	if (argc != 3)
		return 2;
	if (rq_init(&q, strtoull(argv[1], NULL, 0)))
		return 2;
	nrec = strtoull(argv[2], NULL, 0);
	max_size = q.cap / 3; /* fits wherever the tail stands */
	if (max_size > 70000)
		max_size = 70000;
	pthread_create(&th, NULL, producer, NULL);
	while (seq < nrec) {
		size_t n;
		const uint8_t *d = rq_peek(&q, &n);
		uint64_t got;

		if (!d) {
			sched_yield();
			continue;
		}
		memcpy(&got, d, 8);
		if (got != seq || n != size_of(seq)) {
			printf("record %llu: got sequence %llu, %zu bytes (want %zu)\n",
			       (unsigned long long)seq, (unsigned long long)got, n, size_of(seq));
			return 1;
		}
		for (size_t i = 8; i < n; i++)
			if (d[i] != byte_of(seq, i)) {
				printf("record %llu: byte %zu differs\n", (unsigned long long)seq, i);
				return 1;
			}
		rq_pop(&q);
		seq++;
	}
	pthread_join(th, NULL);
	if (rq_peek(&q, &(size_t){ 0 }) || rq_pushed(&q) != nrec || rq_popped(&q) != nrec) {
		printf("queue not empty at the end, or counts differ\n");
		return 1;
	}
	printf("records %llu ok\n", (unsigned long long)nrec);
	rq_fini(&q);
	return 0;
}
