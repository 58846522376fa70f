// SPDX-License-Identifier: GPL-2.0-only
/*
 * Thread safety: one dwunw_ctx, 8 threads each capturing prepared snapshots 20,000 times (override:
 * DWUNW_STRESS_ITERS), every result compared with the frames computed single-threaded first. The
 * snapshots are of this process, taken inside callbacks from several modules: glibc (qsort),
 * libz (zalloc), liblzma (an lzma_allocator), libgcc_s (_Unwind_Backtrace) and private copies of
 * libz loaded with dlopen, so there are more modules than the 6 cache slots and slots move between
 * active and warm (phase 1: exactly 6 modules, no eviction possible) or are evicted and reloaded
 * (phase 2: 10 modules). Some captures are released at once, some later; threads also symbolize
 * frames and read the cache statistics meanwhile.
 *
 * Built with clang -fsanitize=thread (the library too), this is the race detector's workload.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <lzma.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>
#include <zlib.h>
#include "tap.h"
#include "testutil.h"
#include "dwunw.h"

#define MAXF 64
#define NTHREADS 8
/* ASan intercepts qsort: its interceptor sits between qsort's caller and the comparator, so
 * libasan.so is one more module in the qsort chains (phase 1 and 2 alike). */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_MODULES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_MODULES 1
#endif
#endif
#ifndef ASAN_MODULES
#define ASAN_MODULES 0
#endif
#define SLOTS (6 + ASAN_MODULES)
#define FAKE_PID 999999
#define NCOPIES 5        /* private copies of libz */
#define MAXSNAP 32

/* ---- snapshots --------------------------------------------------------------------------- */

struct expect {
	const char *what;
	struct dwunw_regs regs;
	uint8_t *stack;
	size_t nf;
	int err;
	struct dwunw_frame f[MAXF];
	char *path[MAXF];
	char *sym[MAXF];
	int phase;           /* 1: in the 6-module set; 2: also uses the extra copies */
	int twin;            /* index of the same snapshot used live/offline */
};

static struct expect snaps[MAXSNAP];
static unsigned nsnaps;
static struct expect *cur; /* the snapshot being taken */
static char *maps_text;
static size_t maps_len;

__attribute__((no_sanitize_address)) CHAIN static void take_snapshot(void)
{
	static uint64_t r[8];
	struct expect *s = cur;

	CAPTURE_REGS(r);
	if (!s || s->stack)
		return; /* one snapshot per callback chain */
	capture_to_regs(&s->regs, r);
	self_stack_copy(&s->regs, &s->stack);
}

static volatile int sink;

CHAIN static int c3(int x) { take_snapshot(); BARRIER(); return x; }
CHAIN static int c2(int x) { volatile int a[16]; a[x & 15] = x; int r = c3(x + 1); return r + a[x & 15]; }
CHAIN static int c1(int x) { volatile char *p = __builtin_alloca((size_t)(x & 31) + 16); p[0] = 1; int r = c2(x + 1); return r + p[0]; }
CHAIN static int c0(int x)
{
	int a = sink + x, b = sink * x, c = sink ^ x, d = sink - x, e = sink | x;
	int r = c1(x + 1);
	return r + a + b + c + d + e;
}

/* qsort -> cmp */
CHAIN static int cmp_q(const void *a, const void *b)
{
	c0(1);
	return *(const int *)a - *(const int *)b;
}

CHAIN static int via_qsort(int x)
{
	int arr[2] = { 2, 1 };
	qsort(arr, 2, sizeof(int), cmp_q);
	BARRIER();
	return arr[0] + x;
}

/* libz (the linked one, or a dlopen'd copy) -> zalloc */
typedef int (*inflate_init_fn)(z_streamp, int, const char *, int);
typedef int (*inflate_end_fn)(z_streamp);

CHAIN static voidpf my_zalloc(voidpf opaque, uInt items, uInt size)
{
	int (*after)(int) = (int (*)(int))opaque;
	if (after)
		after(2);
	else
		c0(2);
	return calloc(items, size);
}

static void my_zfree(voidpf opaque, voidpf p)
{
	(void)opaque;
	free(p);
}

CHAIN static int via_zlib(inflate_init_fn init, inflate_end_fn end, int (*after)(int))
{
	z_stream z;
	int r;

	memset(&z, 0, sizeof(z));
	z.zalloc = my_zalloc;
	z.zfree = my_zfree;
	z.opaque = (voidpf)after;
	r = init(&z, MAX_WBITS, ZLIB_VERSION, (int)sizeof(z));
	if (r == Z_OK)
		end(&z);
	BARRIER();
	return r;
}

/* liblzma -> lzma_allocator.alloc */
CHAIN static void *my_lzalloc(void *opaque, size_t nmemb, size_t size)
{
	(void)opaque;
	c0(3);
	return calloc(nmemb ? nmemb : 1, size ? size : 1);
}

static void my_lzfree(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

CHAIN static int via_lzma(int x)
{
	lzma_allocator al = { my_lzalloc, my_lzfree, NULL };
	lzma_stream s = LZMA_STREAM_INIT;
	lzma_ret r;

	s.allocator = &al;
	r = lzma_easy_encoder(&s, 0, LZMA_CHECK_NONE);
	if (r == LZMA_OK)
		lzma_end(&s);
	BARRIER();
	return (int)r + x;
}

/* libgcc_s -> _Unwind_Backtrace's callback */
CHAIN static _Unwind_Reason_Code trace_cb(struct _Unwind_Context *uc, void *arg)
{
	(void)uc;
	(void)arg;
	c0(4);
	return _URC_NORMAL_STOP;
}

CHAIN static int via_gcc(int x)
{
	int r = (int)_Unwind_Backtrace(trace_cb, NULL);
	BARRIER();
	return r + x;
}

/* qsort -> cmp -> libz copy -> zalloc: three modules interleaved */
static inflate_init_fn nested_init;
static inflate_end_fn nested_end;

CHAIN static int cmp_nested(const void *a, const void *b)
{
	via_zlib(nested_init, nested_end, NULL);
	return *(const int *)a - *(const int *)b;
}

CHAIN static int via_nested(int x)
{
	int arr[2] = { 2, 1 };
	qsort(arr, 2, sizeof(int), cmp_nested);
	BARRIER();
	return arr[0] + x;
}

static struct expect *new_snap(const char *what, int phase)
{
	struct expect *s = &snaps[nsnaps++];
	memset(s, 0, sizeof(*s));
	s->what = what;
	s->phase = phase;
	cur = s;
	return s;
}

/* ---- copies of libz ------------------------------------------------------------------------ */

static char dir[64];
static void *copies[NCOPIES];
static inflate_init_fn copy_init[NCOPIES];
static inflate_end_fn copy_end[NCOPIES];

static void cleanup_dir(void)
{
	remove_dir(dir);
}

static int load_copies(void)
{
	char lib[PATH_MAX], path[128];

	if (linked_lib("libz.so", lib, sizeof(lib)))
		return -1;
	snprintf(dir, sizeof(dir), "/tmp/dwunw-stress-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	atexit(cleanup_dir);
	for (unsigned i = 0; i < NCOPIES; i++) {
		snprintf(path, sizeof(path), "%s/libz-copy%u.so", dir, i);
		if (copy_file_mode(lib, path, 0755))
			return -1;
		/* inflateInit2_ itself calls zalloc: through inflateInit_ the copy's call would be
		 * bound to the libz this binary links (and RTLD_DEEPBIND does not go with TSan) */
		copies[i] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!copies[i])
			return -1;
		copy_init[i] = (inflate_init_fn)dlsym(copies[i], "inflateInit2_");
		copy_end[i] = (inflate_end_fn)dlsym(copies[i], "inflateEnd");
		if (!copy_init[i] || !copy_end[i])
			return -1;
	}
	return 0;
}

/* Take every snapshot; each is used live (pid = this process) and offline (FAKE_PID). */
static int take_all(void)
{
	unsigned first = nsnaps;

	new_snap("qsort", 1);
	via_qsort(0);
	new_snap("libz", 1);
	via_zlib(inflateInit2_, inflateEnd, NULL);
	new_snap("liblzma", 1);
	via_lzma(0);
	new_snap("libgcc_s", 1);
	via_gcc(0);
	new_snap("libz copy 0", 1);
	via_zlib(copy_init[0], copy_end[0], NULL);
	nested_init = copy_init[0];
	nested_end = copy_end[0];
	new_snap("qsort -> libz copy 0", 1);
	via_nested(0);
	/* exe, libc, libz, liblzma, libgcc_s, copy 0: six modules */
	for (unsigned i = 1; i < NCOPIES; i++) {
		new_snap("libz copy", 2);
		via_zlib(copy_init[i], copy_end[i], (i & 1) ? NULL : c0);
	}
	nested_init = copy_init[NCOPIES - 1];
	nested_end = copy_end[NCOPIES - 1];
	new_snap("qsort -> libz copy 4", 2);
	via_nested(0);
	cur = NULL;
	for (unsigned i = first; i < nsnaps; i++)
		if (!snaps[i].stack)
			return -1;
	/* the offline twins */
	maps_text = read_text("/proc/self/maps", &maps_len);
	for (unsigned i = first, n = nsnaps; i < n; i++) {
		struct expect *o = &snaps[nsnaps];
		*o = snaps[i];
		o->regs.pid = o->regs.tid = FAKE_PID;
		o->twin = (int)i;
		snaps[i].twin = (int)nsnaps++;
		snaps[i].regs.pid = snaps[i].regs.tid = getpid();
	}
	return maps_text ? 0 : -1;
}

/* ---- expected frames, single-threaded ------------------------------------------------------ */

static struct dwunw_ctx ctx;

static int compute_expected(struct expect *e)
{
	struct dwunw_frame f[MAXF];
	size_t nf = MAXF;
	e->err = dwunw_capture(&ctx, &e->regs, f, &nf);
	e->nf = nf;
	memcpy(e->f, f, nf * sizeof(f[0])); /* with their HOLDS_REF flags */
	for (size_t i = 0; i < nf; i++) {
		struct dwunw_symbol s;
		e->path[i] = f[i].module ? strdup(dwunw_module_path(f[i].module)) : NULL;
		e->sym[i] = strdup(dwunw_symbolize_frame(&ctx, &f[i], &s) == DWUNW_OK ? s.name : "");
	}
	dwunw_module_cache_release(&ctx, f, nf);
	return e->err;
}

/* The links between holders depend on where a capture stopped (CACHE_FULL prefixes): not compared. */
#define LINK_BITS (DWUNW_FRAME_REF_BITS & ~DWUNW_FRAME_HOLDS_REF)

/* How a capture compares: 0 equal; 1 a CACHE_FULL prefix (allowed in phase 2); -1 different. */
static int compare(const struct expect *e, const struct dwunw_frame *f, size_t nf, int err, char *why, size_t wl)
{
	size_t n = nf;

	if (err == DWUNW_ERR_CACHE_FULL && nf >= 1 && nf <= e->nf)
		n = nf - 1; /* the last frame's module could not be loaded */
	else if (err != e->err || nf != e->nf) {
		snprintf(why, wl, "%s: %zu frames %s, expected %zu %s", e->what, nf, dwunw_errname(err), e->nf, dwunw_errname(e->err));
		return -1;
	}
	for (size_t i = 0; i < nf; i++) {
		const struct dwunw_frame *a = &f[i], *b = &e->f[i];
		const char *p = a->module ? dwunw_module_path(a->module) : NULL;
		if (a->pc != b->pc || a->sp != b->sp) {
			snprintf(why, wl, "%s: frame %zu pc/sp 0x%llx/0x%llx, expected 0x%llx/0x%llx", e->what, i,
				 (unsigned long long)a->pc, (unsigned long long)a->sp, (unsigned long long)b->pc, (unsigned long long)b->sp);
			return -1;
		}
		if (i >= n)
			break;
		if (a->cfa != b->cfa || a->module_addr != b->module_addr || a->how != b->how || ((a->flags ^ b->flags) & ~LINK_BITS) ||
		    !p != !e->path[i] || (p && strcmp(p, e->path[i]))) {
			snprintf(why, wl, "%s: frame %zu differs (cfa 0x%llx/0x%llx, module %s/%s, how %u/%u, flags 0x%x/0x%x)",
				 e->what, i, (unsigned long long)a->cfa, (unsigned long long)b->cfa, p ? p : "-",
				 e->path[i] ? e->path[i] : "-", a->how, b->how, a->flags, b->flags);
			return -1;
		}
	}
	return n == nf ? 0 : 1;
}

/* ---- the threads ----------------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	unsigned id;
	int phase;
	unsigned iters;
	unsigned pending_max;     /* captures held before release */
	/* results */
	unsigned done, mismatches, cache_full, sym_checks, sym_bad, stats_bad;
	char first_why[300];
};

struct held {
	struct dwunw_frame f[MAXF];
	size_t nf;
};

static atomic_int stop_stats;
static unsigned sel[MAXSNAP], nsel; /* the snapshots of the current phase */

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct held *pending = calloc(w->pending_max + 1, sizeof(*pending));
	unsigned npend = 0;
	uint32_t seed = 0x9e3779b9u * (w->id + 1);
	char why[300];

	if (!pending)
		return NULL;
	for (unsigned it = 0; it < w->iters; it++) {
		uint32_t r = rnd(&seed);
		unsigned k = sel[r % nsel];
		const struct expect *e = &snaps[k];
		struct held *h = &pending[npend];
		int err, c;

		h->nf = MAXF;
		err = dwunw_capture(&ctx, &e->regs, h->f, &h->nf);
		c = compare(e, h->f, h->nf, err, why, sizeof(why));
		if (c < 0 || (c > 0 && w->phase == 1)) {
			if (!w->mismatches++)
				snprintf(w->first_why, sizeof(w->first_why), "%s", why[0] ? why : "cache full in phase 1");
		}
		w->cache_full += c > 0;
		/* symbolize one frame while its module is held */
		if ((r >> 8) % 8 == 0 && h->nf) {
			size_t i = (r >> 12) % h->nf;
			struct dwunw_symbol s;
			if (c == 0 || i + 1 < h->nf) {
				int se = dwunw_symbolize_frame(&ctx, &h->f[i], &s);
				w->sym_checks++;
				if (h->f[i].module && (se != DWUNW_OK ? e->sym[i][0] != 0 : strcmp(s.name, e->sym[i]) != 0))
					w->sym_bad++;
			}
		}
		if ((r >> 16) % 64 == 0) {
			struct dwunw_cache_stats st;
			if (dwunw_cache_stats(&ctx, &st) || st.slots != SLOTS || st.active + st.warm > SLOTS)
				w->stats_bad++;
		}
		/* release at once, or keep it for a while */
		if (w->pending_max == 0 || (r >> 20) % 2 == 0) {
			dwunw_module_cache_release(&ctx, h->f, h->nf);
		} else {
			npend++;
			if (npend > w->pending_max) {
				dwunw_module_cache_release(&ctx, pending[0].f, pending[0].nf);
				memmove(&pending[0], &pending[1], (npend - 1) * sizeof(*pending));
				npend--;
			}
		}
		if ((r >> 24) % 128 == 0)
			sched_yield();
		w->done++;
	}
	for (unsigned i = 0; i < npend; i++)
		dwunw_module_cache_release(&ctx, pending[i].f, pending[i].nf);
	free(pending);
	return NULL;
}

/* Reads the statistics and opens/puts a cached module, all the time. */
struct watcher {
	pthread_t th;
	const char *path;
	unsigned reads, bad, opens, open_err;
};

static void *watcher_main(void *arg)
{
	struct watcher *wt = arg;
	while (!atomic_load(&stop_stats)) {
		struct dwunw_cache_stats st;
		struct dwunw_module *m;
		if (dwunw_cache_stats(&ctx, &st) || st.slots != SLOTS || st.active + st.warm > SLOTS)
			wt->bad++;
		wt->reads++;
		if (wt->path) {
			int err = dwunw_module_open(&ctx, wt->path, &m);
			if (err == DWUNW_OK) {
				if (strcmp(dwunw_module_path(m), wt->path))
					wt->bad++;
				dwunw_module_put(&ctx, m);
				wt->opens++;
			} else if (err != DWUNW_ERR_CACHE_FULL) {
				wt->open_err++;
			}
		}
		sched_yield();
	}
	return NULL;
}

static void run_phase(int phase, unsigned iters, unsigned pending_max, const char *exe)
{
	struct worker w[NTHREADS];
	struct watcher wt = { .path = exe };
	struct dwunw_cache_stats s0, s1;
	unsigned done = 0, bad = 0, full = 0, symc = 0, symbad = 0, statbad = 0;
	struct timespec t0, t1;
	const char *first = NULL;

	dwunw_cache_stats(&ctx, &s0);
	atomic_store(&stop_stats, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&wt.th, NULL, watcher_main, &wt);
	for (unsigned i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i + 100 * (unsigned)phase;
		w[i].phase = phase;
		w[i].iters = iters;
		w[i].pending_max = pending_max;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			w[i].iters = 0;
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		pthread_join(w[i].th, NULL);
		done += w[i].done;
		bad += w[i].mismatches;
		full += w[i].cache_full;
		symc += w[i].sym_checks;
		symbad += w[i].sym_bad;
		statbad += w[i].stats_bad;
		if (w[i].mismatches && !first)
			first = w[i].first_why;
	}
	atomic_store(&stop_stats, 1);
	pthread_join(wt.th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dwunw_cache_stats(&ctx, &s1);

	printf("# phase %d: %u captures in %.2f s; %u stopped by CACHE_FULL; %llu hits, %llu misses, %llu evictions; watcher %u stats reads, %u opens\n",
	       phase, done, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, full,
	       (unsigned long long)(s1.hits - s0.hits), (unsigned long long)(s1.misses - s0.misses),
	       (unsigned long long)(s1.evictions - s0.evictions), wt.reads, wt.opens);
	is_int(done, NTHREADS * iters, "phase %d: %u threads x %u captures ran", phase, NTHREADS, iters);
	if (!ok(bad == 0, "phase %d: every capture equals its single-threaded result (%u mismatches)", phase, bad))
		printf("  # first: %s\n", first ? first : "?");
	ok(symc > 0 && symbad == 0, "phase %d: concurrent symbolize_frame, %u checks, %u wrong", phase, symc, symbad);
	ok(statbad == 0 && wt.bad == 0 && wt.open_err == 0, "phase %d: concurrent cache_stats/module_open consistent", phase);
	ok(s1.active == 0 && s1.warm <= SLOTS, "phase %d: afterwards nothing active (%u active, %u warm)", phase, s1.active, s1.warm);
	if (phase == 1)
		ok(s1.evictions == s0.evictions && s1.misses == s0.misses, "phase 1: %u modules in %u slots: no miss, no eviction",
		   SLOTS, SLOTS);
	else
		ok(s1.evictions > s0.evictions, "phase 2: slots were evicted and reloaded (%llu)",
		   (unsigned long long)(s1.evictions - s0.evictions));
}

int main(void)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = SLOTS, .flags = DWUNW_CFG_NO_DEBUG_FILES };
	const char *it = getenv("DWUNW_STRESS_ITERS");
	unsigned iters = it ? (unsigned)strtoul(it, NULL, 10) : 20000;
	unsigned n_live;
	char exe[512];
	ssize_t n;
	int good = 1;

	alarm(600);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	if (!ok(load_copies() == 0, "%u private copies of libz loaded", NCOPIES))
		return done_testing();
	if (!ok(take_all() == 0, "snapshots taken"))
		return done_testing();
	printf("# %u snapshots (live and offline)\n", nsnaps);
	if (!ok(dwunw_init(&ctx, &cfg) == DWUNW_OK, "init with %u slots", SLOTS))
		return done_testing();
	is_int(dwunw_maps_set(&ctx, FAKE_PID, maps_text, maps_len), DWUNW_OK, "maps of the offline twins");

	n_live = 0;
	for (unsigned i = 0; i < nsnaps; i++) {
		int err = compute_expected(&snaps[i]);
		n_live += snaps[i].regs.pid != FAKE_PID;
		if (err != DWUNW_OK || snaps[i].nf < 8) {
			good = 0;
			printf("  # %s (pid %d): %zu frames, %s\n", snaps[i].what, snaps[i].regs.pid, snaps[i].nf, dwunw_errname(err));
		}
		if (getenv("DWUNW_TEST_VERBOSE")) {
			printf("# %s (pid %d): %zu frames\n", snaps[i].what, snaps[i].regs.pid, snaps[i].nf);
			for (size_t j = 0; j < snaps[i].nf; j++)
				printf("#   %s  %s\n", snaps[i].sym[j], snaps[i].path[j] ? snaps[i].path[j] : "-");
		}
	}
	ok(good, "expected frames computed single-threaded: all complete (%u snapshots, %u live)", nsnaps, n_live);
	{
		/* phase 1's premise: its chains use exactly as many modules as there are slots */
		const char *seen[MAXSNAP * MAXF];
		unsigned nseen = 0;
		for (unsigned i = 0; i < nsnaps; i++)
			for (size_t j = 0; snaps[i].phase == 1 && j < snaps[i].nf; j++) {
				unsigned k = 0;
				while (k < nseen && snaps[i].path[j] && strcmp(seen[k], snaps[i].path[j]))
					k++;
				if (snaps[i].path[j] && k == nseen)
					seen[nseen++] = snaps[i].path[j];
			}
		is_int(nseen, SLOTS, "phase 1's snapshots use %u modules (the slots)", nseen);
	}
	{
		/* the live and offline twin of each snapshot agree (modules by the paths recorded
		 * then: the slots the frames pointed to may hold other modules by now) */
		int same = 1;
		for (unsigned i = 0; i < nsnaps; i++) {
			const struct expect *e = &snaps[i], *t = &snaps[snaps[i].twin];
			int eq = e->nf == t->nf && e->err == t->err;
			for (size_t j = 0; eq && j < e->nf; j++)
				eq = e->f[j].pc == t->f[j].pc && e->f[j].sp == t->f[j].sp && e->f[j].cfa == t->f[j].cfa &&
				     e->f[j].module_addr == t->f[j].module_addr && e->f[j].how == t->f[j].how &&
				     !((e->f[j].flags ^ t->f[j].flags) & ~LINK_BITS) && !e->path[j] == !t->path[j] &&
				     (!e->path[j] || !strcmp(e->path[j], t->path[j])) && !strcmp(e->sym[j], t->sym[j]);
			if (!eq) {
				same = 0;
				printf("  # %s: live and offline differ\n", e->what);
			}
		}
		ok(same, "live and offline captures of each snapshot agree");
	}
	{
		struct dwunw_cache_stats st;
		dwunw_cache_stats(&ctx, &st);
		ok(st.active == 0, "modules released after the expected captures (%u warm, %llu evictions)", st.warm,
		   (unsigned long long)st.evictions);
	}

	/* Phase 1: the six modules of the phase-1 snapshots; make them the cached ones first. */
	nsel = 0;
	for (unsigned i = 0; i < nsnaps; i++)
		if (snaps[i].phase == 1) {
			struct dwunw_frame f[MAXF];
			size_t nf = MAXF;
			sel[nsel++] = i;
			dwunw_capture(&ctx, &snaps[i].regs, f, &nf);
			dwunw_module_cache_release(&ctx, f, nf);
		}
	run_phase(1, iters, 4, exe);

	/* Phase 2: ten modules, six slots. */
	nsel = 0;
	for (unsigned i = 0; i < nsnaps; i++)
		sel[nsel++] = i;
	run_phase(2, iters, 1, exe);

	dwunw_shutdown(&ctx);
	for (unsigned i = 0; i < nsnaps; i++)
		for (size_t j = 0; j < snaps[i].nf; j++) {
			free(snaps[i].path[j]);
			free(snaps[i].sym[j]);
		}
	for (unsigned i = 0; i < nsnaps; i++)
		if (snaps[i].regs.pid != FAKE_PID)
			free(snaps[i].stack);
	free(maps_text);
	return done_testing();
}
