// SPDX-License-Identifier: GPL-2.0-only
/*
 * memleak's per-allocation bookkeeping (memleak_allocs.h): the event-id -> stack table and the
 * chunked walk over the BPF allocs map.
 *
 * The BPF side hands out event ids in order, so the events of recent intervals live in a dense
 * window (win[evid - base] = stack + 1: one sequential write per record). A report looks up
 * every outstanding allocation's event: one before the previous report's window end (the mark)
 * moves to the table of old events, marked live. ml_ev_prune then cuts the window at the mark
 * and rebuilds the table with its live entries only. So the window holds about two intervals of
 * events and the table the old events still outstanding: nothing grows while the set of
 * outstanding allocations stays the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "memleak_allocs.h"

#define LIVE 0x80000000u
#define WIN_MIN 65536

static struct {
	uint32_t *win;         /* stack index + 1; 0: no record for that event */
	uint64_t base;         /* event id of win[0] */
	size_t len, wcap;
	uint64_t mark;         /* window end at the previous report */
	uint64_t max;          /* highest event id received */
	uint64_t *keys;        /* old events (0 = empty slot) */
	uint32_t *vals;        /* stack index | LIVE */
	size_t cap, n, live;
	int rebuilding;        /* tab_rebuild runs: tab_put_live defers to `later` */
	struct later { uint64_t evid; uint32_t stack; } *later;
	size_t nlater, later_cap;
} ev = { .base = 1, .mark = 1 };

static void (*yield_fn)(void *arg);
static void *yield_arg;

void ml_set_yield(void (*fn)(void *arg), void *arg)
{
	yield_arg = arg;
	yield_fn = fn;
}

#define YIELD_EVERY 65536

static void *ev_alloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);

	if (!p) {
		fprintf(stderr, "memleak: out of memory\n");
		exit(1);
	}
	return p;
}

static uint64_t mix(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	v *= 0xc4ceb9fe1a85ec53ull;
	return v ^ (v >> 33);
}

/* Slot of a hash in [0, cap) without a power-of-two capacity (multiply-shift). */
static size_t slot_of(uint64_t evid, size_t cap)
{
#ifdef __SIZEOF_INT128__
	return (size_t)(((unsigned __int128)mix(evid) * cap) >> 64);
#else
	/* 32-bit targets: cap < 2^32, the hash's high half scaled */
	return (size_t)(((mix(evid) >> 32) * (uint64_t)cap) >> 32);
#endif
}

static void tab_put_live(uint64_t evid, uint32_t stack);

static void tab_insert(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t evid, uint32_t v,
		       size_t *n)
{
	size_t i = slot_of(evid, cap);

	while (keys[i] && keys[i] != evid)
		i = i + 1 == cap ? 0 : i + 1;
	if (!keys[i])
		(*n)++;
	keys[i] = evid;
	vals[i] = v;
}

/* Rebuild the table for `want` entries at a load of 0.7; only live ones when `prune`. */
static void tab_rebuild(size_t want, int prune)
{
	size_t ncap = want * 10 / 7 + 1, n = 0;
	uint64_t *nk;
	uint32_t *nv;

	if (ncap < 1024)
		ncap = 1024;
	nk = ev_alloc(ncap, sizeof(*nk));
	nv = ev_alloc(ncap, sizeof(*nv));
	ev.rebuilding = 1;
	for (size_t i = 0; i < ev.cap; i++) {
		if (yield_fn && i % YIELD_EVERY == YIELD_EVERY - 1)
			yield_fn(yield_arg);
		if (!ev.keys[i] || (prune && !(ev.vals[i] & LIVE)))
			continue;
		tab_insert(nk, nv, ncap, ev.keys[i], prune ? ev.vals[i] & ~LIVE : ev.vals[i], &n);
	}
	free(ev.keys);
	free(ev.vals);
	ev.keys = nk;
	ev.vals = nv;
	ev.cap = ncap;
	ev.n = n;
	if (prune)
		ev.live = 0;
	ev.rebuilding = 0;
	/* events that arrived during the rebuild, for the table */
	for (size_t i = 0; i < ev.nlater; i++)
		tab_put_live(ev.later[i].evid, ev.later[i].stack);
	ev.nlater = 0;
}

static uint32_t *tab_find(uint64_t evid)
{
	if (!ev.cap)
		return NULL;
	for (size_t i = slot_of(evid, ev.cap); ev.keys[i]; i = i + 1 == ev.cap ? 0 : i + 1)
		if (ev.keys[i] == evid)
			return &ev.vals[i];
	return NULL;
}

/* Put an old event in the table, live (kept past the next prune). */
static void tab_put_live(uint64_t evid, uint32_t stack)
{
	if (ev.rebuilding) {
		if (ev.nlater == ev.later_cap) {
			size_t nc = ev.later_cap ? ev.later_cap * 2 : 64;
			struct later *nl = realloc(ev.later, nc * sizeof(*nl));

			if (!nl) {
				fprintf(stderr, "memleak: out of memory\n");
				exit(1);
			}
			ev.later = nl;
			ev.later_cap = nc;
		}
		ev.later[ev.nlater].evid = evid;
		ev.later[ev.nlater++].stack = stack;
		return;
	}
	uint32_t *v = tab_find(evid);

	if (v) {
		if (!(*v & LIVE))
			ev.live++;
		*v = stack | LIVE;
		return;
	}
	if ((ev.n + 1) * 10 > ev.cap * 8)
		tab_rebuild((ev.n + 1) * 3 / 2, 0);
	tab_insert(ev.keys, ev.vals, ev.cap, evid, stack | LIVE, &ev.n);
	ev.live++;
}

void ml_ev_put(uint64_t evid, uint32_t stack)
{
	if (!evid)
		return;
	if (evid > ev.max)
		ev.max = evid;
	if (evid < ev.base) { /* late (perf buffers are per CPU) */
		tab_put_live(evid, stack);
		return;
	}
	uint64_t idx = evid - ev.base;
	if (idx >= (1ull << 28)) { /* far ahead of the window: keep it aside */
		tab_put_live(evid, stack);
		return;
	}
	if (idx >= ev.wcap) {
		size_t ncap = ev.wcap ? ev.wcap : WIN_MIN;

		while (ncap <= idx)
			ncap *= 2;
		uint32_t *nw = realloc(ev.win, ncap * sizeof(*nw));
		if (!nw) {
			fprintf(stderr, "memleak: out of memory\n");
			exit(1);
		}
		ev.win = nw;
		memset(ev.win + ev.wcap, 0, (ncap - ev.wcap) * sizeof(*ev.win));
		ev.wcap = ncap;
	}
	ev.win[idx] = stack + 1;
	if (idx >= ev.len)
		ev.len = idx + 1;
}

int64_t ml_ev_lookup_live(uint64_t evid)
{
	if (evid >= ev.base && evid - ev.base < ev.len) {
		uint32_t v = ev.win[evid - ev.base];

		if (!v)
			return -1;
		if (evid < ev.mark)
			tab_put_live(evid, v - 1); /* before the cut: move it aside */
		return v - 1;
	}
	uint32_t *v = tab_find(evid);
	if (!v)
		return -1;
	if (!(*v & LIVE))
		ev.live++;
	*v |= LIVE;
	return *v & ~LIVE;
}

int64_t ml_ev_lookup(uint64_t evid)
{
	if (evid >= ev.base && evid - ev.base < ev.len)
		return (int64_t)ev.win[evid - ev.base] - 1;
	uint32_t *v = tab_find(evid);

	return v ? (int64_t)(*v & ~LIVE) : -1;
}

uint64_t ml_ev_max(void)
{
	return ev.max;
}

void ml_ev_prune(void)
{
	uint64_t cut = ev.mark > ev.base ? ev.mark - ev.base : 0;

	if (cut > ev.len)
		cut = ev.len;
	memmove(ev.win, ev.win + cut, (ev.len - cut) * sizeof(*ev.win));
	memset(ev.win + (ev.len - cut), 0, cut * sizeof(*ev.win));
	ev.len -= cut;
	ev.base += cut;
	ev.mark = ev.base + ev.len;
	tab_rebuild(ev.live, 1);
	/* give back a window that grew for a burst */
	if (ev.wcap > WIN_MIN && ev.len < ev.wcap / 4) {
		size_t ncap = ev.wcap / 2;
		uint32_t *nw = realloc(ev.win, ncap * sizeof(*nw));

		if (nw) {
			ev.win = nw;
			ev.wcap = ncap;
		}
	}
}

size_t ml_ev_window_bytes(void)
{
	return ev.wcap * sizeof(*ev.win);
}

size_t ml_ev_old_bytes(void)
{
	return ev.cap * (sizeof(*ev.keys) + sizeof(*ev.vals));
}

size_t ml_ev_old_entries(void)
{
	return ev.n;
}

void ml_ev_free(void)
{
	free(ev.win);
	free(ev.keys);
	free(ev.vals);
	free(ev.later);
	memset(&ev, 0, sizeof(ev));
	ev.base = ev.mark = 1;
}

/* ---- The allocs map ------------------------------------------------------------------------ */

size_t ml_allocs_walk(int fd, ml_alloc_fn fn, void *ctx)
{
	uint32_t chunk = 4096;
	uint64_t *keys = ev_alloc(chunk, sizeof(*keys));
	struct ml_alloc_info *vals = ev_alloc(chunk, sizeof(*vals));
	uint64_t in = 0, out = 0;
	bool first = true;
	size_t seen = 0;

	for (;;) {
		LIBBPF_OPTS(bpf_map_batch_opts, o);
		uint32_t cnt = chunk;
		int err = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &cnt, &o);

		if (err && errno == ENOSPC && cnt == 0 && chunk < (1u << 22)) {
			/* a bucket larger than the chunk: retry the same step with room for it */
			chunk *= 4;
			free(keys);
			free(vals);
			keys = ev_alloc(chunk, sizeof(*keys));
			vals = ev_alloc(chunk, sizeof(*vals));
			continue;
		}
		if (err && errno != ENOENT) {
			if (!first)
				break; /* the map changed under us: what was seen is the report */
			/* no batch lookups on this kernel: key by key */
			uint64_t key, next;
			void *prev = NULL;

			while (bpf_map_get_next_key(fd, prev, &next) == 0) {
				struct ml_alloc_info v;

				key = next;
				prev = &key;
				if (bpf_map_lookup_elem(fd, &key, &v) == 0) {
					fn(ctx, key, &v);
					seen++;
				}
			}
			break;
		}
		for (uint32_t i = 0; i < cnt; i++)
			fn(ctx, keys[i], &vals[i]);
		seen += cnt;
		if (yield_fn)
			yield_fn(yield_arg);
		if (err) /* ENOENT: the last chunk */
			break;
		in = out;
		first = false;
	}
	free(keys);
	free(vals);
	return seen;
}

uint64_t ml_map_memlock(int fd)
{
	char fn[64], line[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/self/fdinfo/%d", fd);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "memlock: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}
