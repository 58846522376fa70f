// SPDX-License-Identifier: GPL-2.0-only
/*
 * The module cache's byte bound (config cache_bytes, module_bound.c): more modules loaded than
 * the bound holds keep the bytes held (dwunw_cache_stats.bytes, the sum of what each module's
 * table, symbol index, line table and ELF reads hold) at or under it after every load; the warm
 * module used least recently goes first; a module in use is never freed; a module freed and
 * needed again is loaded again and unwinds to the same frames as the first time, also while
 * another thread loads modules that push it out between captures.
 *
 * The modules are copies of a system library (libz, which this binary links) in a private
 * directory: each copy is another file (inode) of the same size and contents.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tap.h"
#include "testutil.h"
#include "dwunw.h"

#define NCOPIES 12

static char dir[64];
static char lib[PATH_MAX];
static char copies[NCOPIES][600];

static void cleanup_dir(void)
{
	remove_dir(dir);
}

static int init_bound(struct dwunw_ctx *ctx, uint32_t slots, uint64_t bytes)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = slots, .cache_bytes = bytes,
				    .flags = DWUNW_CFG_NO_DEBUG_FILES };
	return dwunw_init(ctx, &cfg);
}

static struct dwunw_cache_stats stats(struct dwunw_ctx *ctx)
{
	return cache_stats_of(ctx);
}

/* Open path and build what a tool builds (the table, the symbol index); the module stays held. */
static struct dwunw_module *load_full(struct dwunw_ctx *ctx, const char *path, uint64_t *build_ns)
{
	struct dwunw_module *m = NULL;
	struct dwunw_table_info ti;
	struct dwunw_symbol sym;
	int err = dwunw_module_open(ctx, path, &m);

	if (err) {
		ok(0, "open %s: %s", path, dwunw_errname(err));
		return NULL;
	}
	err = dwunw_table_info(ctx, m, &ti);
	if (err || !ti.rows)
		ok(0, "table of %s: %s, %llu rows", path, dwunw_errname(err), (unsigned long long)ti.rows);
	if (build_ns)
		*build_ns = ti.build_ns;
	dwunw_symbolize(ctx, m, 0x1000, &sym); /* builds the index; the address need not be a symbol's */
	return m;
}

/* ---- what a module holds ---------------------------------------------------------------- */

/* Bytes of one module built as a tool builds it (the figure the bound counts), printed for the
 * record with libc's and python3's. */
static uint64_t module_bytes(const char *path)
{
	struct dwunw_ctx ctx;
	struct dwunw_module *m;
	struct dwunw_module_memory mm;
	struct dwunw_cache_stats s;

	if (init_bound(&ctx, 4, UINT64_MAX))
		return 0;
	m = load_full(&ctx, path, NULL);
	if (!m) {
		dwunw_shutdown(&ctx);
		return 0;
	}
	dwunw_module_memory(&ctx, m, &mm);
	s = stats(&ctx);
	printf("# %s: %llu bytes held (table %llu, symbols %llu, elf %llu; file %llu)\n", path,
	       (unsigned long long)s.bytes, (unsigned long long)mm.table, (unsigned long long)mm.symbols,
	       (unsigned long long)mm.elf, (unsigned long long)mm.file_size);
	ok(s.bytes >= mm.table + mm.symbols + mm.elf && mm.table > 0,
	   "%s: stats.bytes counts the module's table, symbols and ELF bytes (%llu)", path, (unsigned long long)s.bytes);
	dwunw_module_put(&ctx, m);
	dwunw_shutdown(&ctx);
	return s.bytes;
}

/* ---- cases ------------------------------------------------------------------------------- */

/* More copies than fit: bytes held <= bound after each load, LRU order, the evicted reload. */
static void test_bound(uint64_t one)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	uint64_t bound = 3 * one + one / 2, worst = 0, ns0 = 0, ns1 = 0;
	int within = 1;
	struct dwunw_module *m;

	if (!ok(init_bound(&ctx, 32, bound) == DWUNW_OK, "bound: init, 32 slots, %llu bytes (3.5 modules)",
		(unsigned long long)bound))
		return;
	s = stats(&ctx);
	is_int(s.bytes_bound, bound, "bound: stats say the bound");
	for (unsigned i = 0; i < NCOPIES; i++) {
		m = load_full(&ctx, copies[i], i == 0 ? &ns0 : NULL);
		dwunw_module_put(&ctx, m);
		s = stats(&ctx);
		if (s.bytes > worst)
			worst = s.bytes;
		if (s.bytes > bound) {
			within = 0;
			ok(0, "bound: after load %u: %llu bytes held > %llu", i, (unsigned long long)s.bytes,
			   (unsigned long long)bound);
		}
		/* copy 0 used again after each load: it stays, the others go in turn */
		if (i >= 1) {
			struct dwunw_module *a = NULL;
			if (dwunw_module_open(&ctx, copies[0], &a) == DWUNW_OK)
				dwunw_module_put(&ctx, a);
		}
	}
	s = stats(&ctx);
	ok(within, "bound: bytes held <= bound after each of %u loads (most %llu of %llu)", NCOPIES,
	   (unsigned long long)worst, (unsigned long long)bound);
	ok(s.warm == 3 && s.active == 0, "bound: 3 modules warm at the end (%u), none active", s.warm);
	ok(s.bytes_evictions == NCOPIES - 3 && s.evictions == s.bytes_evictions,
	   "bound: %llu evicted for bytes (%u loads - 3 kept), no other eviction (%llu)",
	   (unsigned long long)s.bytes_evictions, NCOPIES, (unsigned long long)s.evictions);
	/* LRU: copy 0, used after every load, was never the one to go */
	{
		uint64_t misses = s.misses;
		m = load_full(&ctx, copies[0], &ns1);
		s = stats(&ctx);
		ok(s.misses == misses && ns1 == ns0, "bound: the module used most recently was kept (a hit, table not rebuilt)");
		dwunw_module_put(&ctx, m);
	}
	/* an evicted one comes back whole */
	{
		uint64_t misses = s.misses;
		struct dwunw_table_info a, b;
		struct dwunw_module *x;
		int ea, eb;

		x = load_full(&ctx, copies[1], NULL);
		s = stats(&ctx);
		ok(x && s.misses == misses + 1, "bound: an evicted module is loaded again (a miss)");
		ea = dwunw_table_info(&ctx, x, &a);
		dwunw_module_put(&ctx, x);
		x = load_full(&ctx, copies[0], NULL);
		eb = dwunw_table_info(&ctx, x, &b);
		ok(!ea && !eb && a.rows == b.rows && a.fdes == b.fdes,
		   "bound: its table is the same as a copy's (%llu rows, %llu FDEs)", (unsigned long long)a.rows,
		   (unsigned long long)a.fdes);
		dwunw_module_put(&ctx, x);
	}
	dwunw_shutdown(&ctx);
}

/* A bound smaller than one module: the module held is never freed, the others go as they warm. */
static void test_in_use(uint64_t one)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *held, *m;
	uint64_t ns0 = 0, ns1 = 1;
	int kept = 1;

	if (!ok(init_bound(&ctx, 8, one / 2) == DWUNW_OK, "in use: init, bound half a module"))
		return;
	held = load_full(&ctx, copies[0], &ns0);
	for (unsigned i = 1; i < NCOPIES; i++) {
		m = load_full(&ctx, copies[i], NULL);
		dwunw_module_put(&ctx, m);
		s = stats(&ctx);
		kept &= s.active == 1 && dwunw_module_path(held) && !strcmp(dwunw_module_path(held), copies[0]);
	}
	s = stats(&ctx);
	ok(kept, "in use: the held module stayed through %u loads past the bound", NCOPIES - 1);
	ok(s.active == 1 && s.warm <= 1, "in use: 1 active, %u warm (the last one, freed at the next count)", s.warm);
	ok(s.bytes_evictions >= NCOPIES - 2, "in use: the others were freed (%llu)", (unsigned long long)s.bytes_evictions);
	m = load_full(&ctx, copies[0], &ns1);
	ok(m == held && ns1 == ns0, "in use: the same module, its table never rebuilt");
	dwunw_module_put(&ctx, m);
	dwunw_module_put(&ctx, held);
	/* released: now it may go */
	m = load_full(&ctx, copies[1], NULL);
	dwunw_module_put(&ctx, m);
	s = stats(&ctx);
	ok(s.active == 0 && s.warm <= 1 && s.bytes <= one + one / 8,
	   "in use: once released it is freed like the others (%u warm, %llu bytes)", s.warm, (unsigned long long)s.bytes);
	dwunw_shutdown(&ctx);
}

/* ---- captures ----------------------------------------------------------------------------- */

/* Taken in the comparator qsort calls: frames in this file and in libc. */
static struct self_snap sn;
static int snap_err = -1;

__attribute__((noinline)) static int cmp_snap(const void *a, const void *b)
{
	if (snap_err < 0 && !sn.stack)
		snap_err = self_snapshot(&sn);
	__asm__ volatile("" ::: "memory");
	return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void snap_in_qsort(void)
{
	int v[4] = { 3, 1, 2, 0 };

	qsort(v, 4, sizeof(v[0]), cmp_snap);
	__asm__ volatile("" ::: "memory");
}

#define MAXF 64

struct capture {
	struct dwunw_frame f[MAXF];
	char paths[MAXF][256];
	size_t n;
	int err;
};

static void capture(struct dwunw_ctx *ctx, struct capture *c)
{
	c->n = MAXF;
	c->err = dwunw_capture(ctx, &sn.regs, c->f, &c->n);
	for (size_t i = 0; i < c->n; i++) {
		const char *p = c->f[i].module ? dwunw_module_path(c->f[i].module) : NULL;
		snprintf(c->paths[i], sizeof(c->paths[i]), "%s", p ? p : "");
	}
}

/* Frames equal: pc, sp, cfa, module file and address, how; "" when they are, else the first
 * difference. */
static const char *same_frames(const struct capture *a, const struct capture *b, char *why, size_t len)
{
	if (a->err != b->err || a->n != b->n) {
		snprintf(why, len, "%zu frames (%s) vs %zu (%s)", a->n, dwunw_errname(a->err), b->n, dwunw_errname(b->err));
		return why;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct dwunw_frame *x = &a->f[i], *y = &b->f[i];
		if (x->pc != y->pc || x->sp != y->sp || x->cfa != y->cfa || x->module_addr != y->module_addr ||
		    x->how != y->how || strcmp(a->paths[i], b->paths[i])) {
			snprintf(why, len, "frame %zu: pc %llx/%llx module %s/%s", i, (unsigned long long)x->pc,
				 (unsigned long long)y->pc, a->paths[i], b->paths[i]);
			return why;
		}
	}
	why[0] = 0;
	return why;
}

static int has_module(const struct capture *c, const char *frag)
{
	for (size_t i = 0; i < c->n; i++)
		if (strstr(c->paths[i], frag))
			return 1;
	return 0;
}

/* The capture's modules freed by the bound while warm: the next capture loads them again and
 * gives the same frames. */
static void test_capture_reload(void)
{
	static struct capture first, again;
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s0, s1;
	char why[512];

	if (!ok(init_bound(&ctx, 8, 1) == DWUNW_OK, "reload: init, bound 1 byte (every warm module goes)"))
		return;
	capture(&ctx, &first);
	ok(first.err == DWUNW_OK && first.n >= 5 && has_module(&first, "libc"),
	   "reload: the first capture is complete through libc (%zu frames, %s)", first.n, dwunw_errname(first.err));
	s0 = stats(&ctx);
	ok(s0.active >= 2, "reload: its modules are active while its frames hold them (%u)", s0.active);
	dwunw_module_cache_release(&ctx, first.f, first.n);
	/* another module's load counts the bytes: the capture's modules, warm now, go */
	dwunw_module_put(&ctx, load_full(&ctx, copies[0], NULL));
	s1 = stats(&ctx);
	ok(s1.bytes_evictions >= s0.bytes_evictions + 2, "reload: released, they were freed (%llu evictions)",
	   (unsigned long long)(s1.bytes_evictions - s0.bytes_evictions));
	capture(&ctx, &again);
	s0 = stats(&ctx);
	ok(s0.misses >= s1.misses + 2, "reload: the next capture loaded them again (%llu misses)",
	   (unsigned long long)(s0.misses - s1.misses));
	same_frames(&first, &again, why, sizeof(why));
	ok(!*why, "reload: the same %zu frames as the first capture%s%s", again.n, *why ? ": " : "", why);
	dwunw_module_cache_release(&ctx, again.f, again.n);
	dwunw_shutdown(&ctx);
}

/* Captures on one thread while another loads copies past the bound: each capture's modules are
 * freed between captures (never during one: the frames would differ or point at freed tables). */
static struct dwunw_ctx race_ctx;
static struct capture race_first;
static atomic_int race_stop;
static unsigned race_captures, race_bad;
static char race_why[512];

static void *race_capturer(void *arg)
{
	static struct capture c;
	char why[512];

	(void)arg;
	while (!atomic_load(&race_stop) || race_captures < 50) {
		capture(&race_ctx, &c);
		if (*same_frames(&race_first, &c, why, sizeof(why)) && !race_bad++)
			snprintf(race_why, sizeof(race_why), "%s", why);
		dwunw_module_cache_release(&race_ctx, c.f, c.n);
		race_captures++;
	}
	return NULL;
}

static void test_capture_race(void)
{
	pthread_t th;
	struct dwunw_cache_stats s;
	unsigned loads = 0;

	if (!ok(init_bound(&race_ctx, 16, 1) == DWUNW_OK, "race: init, bound 1 byte"))
		return;
	capture(&race_ctx, &race_first);
	dwunw_module_cache_release(&race_ctx, race_first.f, race_first.n);
	if (!ok(race_first.err == DWUNW_OK, "race: first capture complete (%zu frames)", race_first.n)) {
		dwunw_shutdown(&race_ctx);
		return;
	}
	pthread_create(&th, NULL, race_capturer, NULL);
	for (unsigned r = 0; r < 50; r++)
		for (unsigned i = 0; i < NCOPIES; i++, loads++)
			dwunw_module_put(&race_ctx, load_full(&race_ctx, copies[i], NULL));
	atomic_store(&race_stop, 1);
	pthread_join(th, NULL);
	s = stats(&race_ctx);
	printf("# race: %u captures beside %u loads; %llu misses, %llu evictions for bytes\n", race_captures, loads,
	       (unsigned long long)s.misses, (unsigned long long)s.bytes_evictions);
	ok(race_bad == 0, "race: every one of %u captures gave the first capture's frames%s%s", race_captures,
	   race_bad ? ": " : "", race_why);
	ok(s.bytes_evictions >= loads, "race: modules were freed throughout (%llu)", (unsigned long long)s.bytes_evictions);
	ok(s.active == 0, "race: nothing left active");
	dwunw_shutdown(&race_ctx);
}

int main(void)
{
	uint64_t one;
	char path[PATH_MAX];

	arm_timeout(300, cleanup_dir);
	if (linked_lib("libz.so", lib, sizeof(lib))) {
		SKIP("no libz mapped");
		return done_testing();
	}
	snprintf(dir, sizeof(dir), "/tmp/dwunw-cache-bytes-XXXXXX");
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return done_testing();
	}
	atexit(cleanup_dir);
	for (unsigned i = 0; i < NCOPIES; i++) {
		snprintf(copies[i], sizeof(copies[i]), "%s/m%02u.so", dir, i);
		if (copy_file_mode(lib, copies[i], 0644)) {
			ok(0, "copy %s to %s", lib, copies[i]);
			return done_testing();
		}
	}
	one = module_bytes(copies[0]);
	if (!ok(one > 0, "one copy of %s holds %llu bytes", lib, (unsigned long long)one))
		return done_testing();
	if (!linked_lib("libc.so", path, sizeof(path)))
		module_bytes(path);
	if (realpath("/usr/bin/python3", path))
		module_bytes(path);

	test_bound(one);
	test_in_use(one);
	snap_in_qsort();
	if (ok(snap_err == 0, "a snapshot taken inside qsort")) {
		test_capture_reload();
		test_capture_race();
	}
	free(sn.stack);
	return done_testing();
}
