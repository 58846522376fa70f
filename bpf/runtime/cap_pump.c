// SPDX-License-Identifier: GPL-2.0-only
/* The drain thread between the capture buffers and the record queue (cap_pump.h). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "cap_pump.h"
#include "mapped_files.h"
#include "rec_queue.h"

/* The largest record the producers send: a snapshot with the largest stack window. */
#define MAX_REC (sizeof(struct cap_record) + CAP_MAX_STACK + 64)
#define MIN_QUEUE ((size_t)16 * MAX_REC)

struct cap_pump {
	struct rec_queue q;
	struct dwunw_cap_reader *r;
	pthread_t th;
	bool started;
	int wake_fd;           /* consumer -> drain thread: a fence, room in the queue, stop */
	int ready_fd;          /* drain thread -> consumer: records queued, a fence passed */
	int stop;              /* atomics from here on */
	int want_room;         /* the drain thread waits for room in the queue */
	uint64_t fence_req, fence_done, fence_pushed;
	uint64_t dropped, reader_lost, peak;
	/* drain thread only */
	bool pass_pushed, pass_short;
	/* consumer only */
	bool in_process;
	pthread_mutex_t mu;    /* the dropped cookies */
	uint64_t *drops;
	size_t ndrops, drops_cap;
};

static void kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the reader wakes up anyway */
	}
}

static void unkick(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

struct cap_pump *cap_pump_new(size_t queue_bytes)
{
	struct cap_pump *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (queue_bytes < MIN_QUEUE)
		queue_bytes = MIN_QUEUE;
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->wake_fd < 0 || p->ready_fd < 0 || rq_init(&p->q, queue_bytes)) {
		if (p->wake_fd >= 0)
			close(p->wake_fd);
		if (p->ready_fd >= 0)
			close(p->ready_fd);
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	return p;
}

int cap_pump_record(void *ctx, const void *data, size_t size)
{
	struct cap_pump *p = ctx;
	const struct cap_rec_hdr *h = data;

	/* a library's file held open as soon as its mapping is seen, before it can be deleted */
	if (size >= sizeof(*h) && h->kind == CAP_KIND_MAPEV)
		mapped_files_tap_drain(data, size);
	if (!rq_push(&p->q, data, size)) {
		/* consumed from the buffer already: a pass stops when the queue is nearly full, so
		 * only a record larger than the room left after that ends here */
		const struct cap_record *rec = data;

		__atomic_fetch_add(&p->dropped, 1, __ATOMIC_RELAXED);
		if (size >= offsetof(struct cap_record, cookie) + sizeof(rec->cookie) &&
		    rec->h.kind == CAP_KIND_SNAPSHOT) {
			uint64_t cookie;

			memcpy(&cookie, (const char *)data + offsetof(struct cap_record, cookie),
			       sizeof(cookie));
			pthread_mutex_lock(&p->mu);
			if (p->ndrops == p->drops_cap) {
				size_t nc = p->drops_cap ? p->drops_cap * 2 : 1024;
				uint64_t *nd = realloc(p->drops, nc * sizeof(*nd));

				if (nd) {
					p->drops = nd;
					p->drops_cap = nc;
				}
			}
			if (p->ndrops < p->drops_cap)
				p->drops[p->ndrops++] = cookie;
			pthread_mutex_unlock(&p->mu);
		}
		p->pass_short = true;
		return -EAGAIN;
	}
	p->pass_pushed = true;
	uint64_t depth = rq_pushed(&p->q) - rq_popped(&p->q);
	if (depth > __atomic_load_n(&p->peak, __ATOMIC_RELAXED))
		__atomic_store_n(&p->peak, depth, __ATOMIC_RELAXED);
	/* no room for one more: leave the rest in the kernel's buffer (ring buffer: stops here) */
	if (!rq_fits(&p->q, MAX_REC)) {
		p->pass_short = true;
		return -EAGAIN;
	}
	return 0;
}

static void *drain_main(void *arg)
{
	struct cap_pump *p = arg;
	struct pollfd fds[2] = {
		{ .fd = dwunw_cap_reader_fd(p->r), .events = POLLIN },
		{ .fd = p->wake_fd, .events = POLLIN },
	};

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		uint64_t req = __atomic_load_n(&p->fence_req, __ATOMIC_ACQUIRE);

		if (!rq_fits(&p->q, MAX_REC)) {
			/* full: the consumer kicks wake_fd once it has made room */
			__atomic_store_n(&p->want_room, 1, __ATOMIC_SEQ_CST);
			if (!rq_fits(&p->q, MAX_REC))
				poll(&fds[1], 1, 10);
			__atomic_store_n(&p->want_room, 0, __ATOMIC_SEQ_CST);
			unkick(p->wake_fd);
			continue;
		}
		p->pass_pushed = p->pass_short = false;
		/* a fence wants every record taken until now, the youngest too (perf buffer) */
		dwunw_cap_reader_read(p->r, req > __atomic_load_n(&p->fence_done, __ATOMIC_RELAXED));
		__atomic_store_n(&p->reader_lost, dwunw_cap_reader_lost(p->r), __ATOMIC_RELAXED);
		bool fenced = !p->pass_short && req > __atomic_load_n(&p->fence_done, __ATOMIC_RELAXED);
		if (fenced) {
			/* a whole pass begun after the request: all it asked for is queued */
			__atomic_store_n(&p->fence_pushed, rq_pushed(&p->q), __ATOMIC_RELAXED);
			__atomic_store_n(&p->fence_done, req, __ATOMIC_RELEASE);
		}
		if (p->pass_pushed || fenced)
			kick(p->ready_fd);
		if (p->pass_short)
			continue;
		if (__atomic_load_n(&p->fence_req, __ATOMIC_ACQUIRE) > req)
			continue;
		/* the producers wake us in batches; a short timeout picks up the rest */
		if (poll(fds, 2, 10) > 0 && (fds[1].revents & POLLIN))
			unkick(p->wake_fd);
	}
	return NULL;
}

int cap_pump_start(struct cap_pump *p, struct dwunw_cap_reader *r)
{
	sigset_t all, old;
	int err;

	p->r = r;
	/* signals go to the consumer's thread, which polls with short timeouts */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&p->th, NULL, drain_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	p->started = true;
	return 0;
}

int cap_pump_wait(struct cap_pump *p, int timeout_ms)
{
	struct pollfd f = { .fd = p->ready_fd, .events = POLLIN };
	size_t sz;

	if (rq_peek(&p->q, &sz))
		return 1;
	if (poll(&f, 1, timeout_ms) > 0)
		unkick(p->ready_fd);
	return rq_peek(&p->q, &sz) != NULL;
}

/* Process records until `upto` have been consumed in all, or `max` now, or fn asks to stop. */
static size_t process(struct cap_pump *p, dwunw_cap_record_fn fn, void *ctx, size_t max,
		      uint64_t upto)
{
	const void *d;
	size_t n = 0, sz;

	if (p->in_process)
		return 0;
	p->in_process = true;
	while (n < max && rq_popped(&p->q) < upto && (d = rq_peek(&p->q, &sz))) {
		int rc = fn(ctx, d, sz);

		rq_pop(&p->q);
		n++;
		if (rc < 0)
			break;
		/* the drain thread waits for room: tell it early, not only at the end */
		if ((n & 63) == 0 && __atomic_load_n(&p->want_room, __ATOMIC_SEQ_CST))
			kick(p->wake_fd);
	}
	if (n && __atomic_load_n(&p->want_room, __ATOMIC_SEQ_CST))
		kick(p->wake_fd);
	p->in_process = false;
	return n;
}

size_t cap_pump_process(struct cap_pump *p, dwunw_cap_record_fn fn, void *ctx, size_t max)
{
	return process(p, fn, ctx, max, UINT64_MAX);
}

int cap_pump_sync(struct cap_pump *p, dwunw_cap_record_fn fn, void *ctx, int timeout_ms)
{
	struct timespec t0, t;
	uint64_t req;

	if (p->in_process || !p->started)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	req = __atomic_add_fetch(&p->fence_req, 1, __ATOMIC_ACQ_REL);
	kick(p->wake_fd);
	while (__atomic_load_n(&p->fence_done, __ATOMIC_ACQUIRE) < req) {
		/* make room meanwhile: a full queue holds the pass back */
		size_t k = process(p, fn, ctx, 4096, rq_pushed(&p->q));

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms)
			return -ETIMEDOUT;
		if (!k) {
			struct pollfd f = { .fd = p->ready_fd, .events = POLLIN };

			if (poll(&f, 1, 10) > 0)
				unkick(p->ready_fd);
		}
	}
	process(p, fn, ctx, SIZE_MAX, __atomic_load_n(&p->fence_pushed, __ATOMIC_RELAXED));
	return 0;
}

uint64_t cap_pump_dropped(struct cap_pump *p)
{
	return __atomic_load_n(&p->dropped, __ATOMIC_RELAXED);
}

size_t cap_pump_take_dropped(struct cap_pump *p, uint64_t **out)
{
	size_t n;

	pthread_mutex_lock(&p->mu);
	n = p->ndrops;
	*out = p->drops;
	p->drops = NULL;
	p->ndrops = p->drops_cap = 0;
	pthread_mutex_unlock(&p->mu);
	return n;
}

uint64_t cap_pump_reader_lost(struct cap_pump *p)
{
	return __atomic_load_n(&p->reader_lost, __ATOMIC_RELAXED);
}

size_t cap_pump_queue_bytes(const struct cap_pump *p)
{
	return p->q.cap;
}

uint64_t cap_pump_queue_peak(struct cap_pump *p)
{
	return __atomic_load_n(&p->peak, __ATOMIC_RELAXED);
}

void cap_pump_free(struct cap_pump *p)
{
	if (!p)
		return;
	if (p->started) {
		__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
		kick(p->wake_fd);
		pthread_join(p->th, NULL);
	}
	close(p->wake_fd);
	close(p->ready_fd);
	rq_fini(&p->q);
	pthread_mutex_destroy(&p->mu);
	free(p->drops);
	free(p);
}
