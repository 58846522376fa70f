// SPDX-License-Identifier: GPL-2.0-only
/*
 * The module cache (spec "模块缓存策略"): active slots (refcnt > 0) and warm slots (refcnt == 0,
 * ELF and table kept); a warm module found again is reused without reloading; a new module takes
 * a free slot, else the warm slot released first (FIFO by release, not by open); CACHE_FULL when
 * every slot is active; a file rebuilt at the same path is never served its old table; 16 slots
 * by default; dwunw_module_cache_release() turns the modules held by captured frames warm;
 * dwunw_cache_trim() frees the warm modules not used since its previous call, never an active one.
 *
 * The modules are copies of small system libraries in a private directory, so the test controls
 * their identity (path, inode, size, mtime) and their contents.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tap.h"
#include "testutil.h"
#include "dwunw.h"


static char dir[64];
static char lib_a[PATH_MAX], lib_b[PATH_MAX]; /* two different real ELF files: the originals */
static size_t size_a, size_b;

/* ---- files ------------------------------------------------------------------------------- */

static size_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* Copy src to dst. in_place: rewrite dst's existing inode (as `cp` does); else a new file renamed
 * over it. */
static int copy_file(const char *src, const char *dst, int in_place)
{
	char tmp[600];

	if (in_place)
		return copy_file_mode(src, dst, 0644);
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	return copy_file_mode(src, tmp, 0644) || rename(tmp, dst) ? -1 : 0;
}

/* Move dst's mtime `secs` into the future, so no timestamp granularity can hide a rewrite. */
static void bump_mtime(const char *path, int secs)
{
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec += secs;
	ts[1] = ts[0];
	utimensat(AT_FDCWD, path, ts, 0);
}

/* dir/<name>.so, a fresh copy of lib_a. */
static const char *mod(const char *name)
{
	static char paths[64][128];
	static unsigned n;
	char *p = paths[n++ % 64];

	snprintf(p, 128, "%s/%s.so", dir, name);
	return p;
}

static void make_copies(void)
{
	static const char *names[] = { "A", "B", "C", "D", "E", "F" };
	char n[16];

	for (unsigned i = 0; i < 6; i++)
		copy_file(lib_a, mod(names[i]), 0);
	for (unsigned i = 0; i < 17; i++) {
		snprintf(n, sizeof(n), "m%02u", i);
		copy_file(lib_a, mod(n), 0);
	}
}

static void cleanup_dir(void)
{
	remove_dir(dir);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static int init_slots(struct dwunw_ctx *ctx, uint32_t slots)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = slots, .flags = DWUNW_CFG_NO_DEBUG_FILES };
	return dwunw_init(ctx, &cfg);
}

static struct dwunw_cache_stats stats(struct dwunw_ctx *ctx)
{
	return cache_stats_of(ctx);
}

/* Open a module, expecting success; NULL on failure (and a failed check). */
static struct dwunw_module *open_ok(struct dwunw_ctx *ctx, const char *path)
{
	struct dwunw_module *m = NULL;
	int err = dwunw_module_open(ctx, path, &m);
	if (err) {
		ok(0, "open %s: %s", path, dwunw_errname(err));
		return NULL;
	}
	return m;
}

static void put(struct dwunw_ctx *ctx, struct dwunw_module *m)
{
	if (m)
		dwunw_module_put(ctx, m);
}

/* Open and release at once: the module becomes warm. */
static struct dwunw_module *open_put(struct dwunw_ctx *ctx, const char *path)
{
	struct dwunw_module *m = open_ok(ctx, path);
	put(ctx, m);
	return m;
}

static uint64_t table_rows(struct dwunw_ctx *ctx, struct dwunw_module *m, uint64_t *build_ns)
{
	struct dwunw_table_info ti;
	if (!m || dwunw_table_info(ctx, m, &ti))
		return 0;
	if (build_ns)
		*build_ns = ti.build_ns;
	return ti.rows;
}

#define STATS_ARE(s, act, wrm, h, mi, ev, what) \
	ok((s).active == (act) && (s).warm == (wrm) && (s).hits == (h) && (s).misses == (mi) && (s).evictions == (ev), \
	   "%s: active %u warm %u hits %llu misses %llu evictions %llu", what, (s).active, (s).warm, \
	   (unsigned long long)(s).hits, (unsigned long long)(s).misses, (unsigned long long)(s).evictions)

/* ---- cases ------------------------------------------------------------------------------- */

static void test_warm_reuse(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *a, *a2, *a3;
	uint64_t rows, ns0 = 0, ns1 = 1;
	const char *A = mod("A");

	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "warm: init with 4 slots"))
		return;
	s = stats(&ctx);
	ok(s.slots == 4 && s.active == 0 && s.warm == 0 && s.hits == 0 && s.misses == 0 && s.evictions == 0,
	   "warm: empty cache of 4 slots");
	a = open_ok(&ctx, A);
	s = stats(&ctx);
	STATS_ARE(s, 1, 0, 0, 1, 0, "warm: opened A is active (a miss)");
	is_str(dwunw_module_path(a), A, "warm: module path");
	rows = table_rows(&ctx, a, &ns0);
	ok(rows > 0, "warm: A's table built (%llu rows, %llu ns)", (unsigned long long)rows, (unsigned long long)ns0);
	put(&ctx, a);
	s = stats(&ctx);
	STATS_ARE(s, 0, 1, 0, 1, 0, "warm: put A -> warm, not closed");
	is_str(dwunw_module_path(a), A, "warm: a warm slot keeps its path");

	a2 = open_ok(&ctx, A);
	ok(a2 == a, "warm: re-opening A reuses its slot (same pointer)");
	s = stats(&ctx);
	STATS_ARE(s, 1, 0, 1, 1, 0, "warm: re-open is a hit, no new miss");
	table_rows(&ctx, a2, &ns1);
	is_int(ns1, ns0, "warm: table not rebuilt (build_ns unchanged)");

	/* Opened twice: active until both references are given back. */
	a3 = open_ok(&ctx, A);
	ok(a3 == a, "warm: a second reference to an active module, same slot");
	put(&ctx, a3);
	s = stats(&ctx);
	ok(s.active == 1 && s.warm == 0, "warm: one reference left -> still active");
	put(&ctx, a2);
	s = stats(&ctx);
	STATS_ARE(s, 0, 1, 2, 1, 0, "warm: last reference -> warm");

	/* Argument checks. */
	is_int(dwunw_cache_stats(&ctx, NULL), DWUNW_ERR_INVALID_ARG, "stats: NULL out -> INVALID_ARG");
	is_int(dwunw_cache_stats(NULL, &s), DWUNW_ERR_INVALID_ARG, "stats: NULL ctx -> INVALID_ARG");
	is_int(dwunw_module_open(&ctx, NULL, &a), DWUNW_ERR_INVALID_ARG, "open: NULL path -> INVALID_ARG");
	{
		char missing[128];
		snprintf(missing, sizeof(missing), "%s/does-not-exist.so", dir);
		a = (struct dwunw_module *)1;
		is_int(dwunw_module_open(&ctx, missing, &a), DWUNW_ERR_NOT_FOUND, "open: missing file -> NOT_FOUND");
		ok(a == NULL, "open: *out NULL on failure");
	}
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == 1, "warm: failed opens leave no slot taken");
	dwunw_shutdown(&ctx);
}

static void test_fifo(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *pa, *pb, *pc, *pd, *m;

	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "fifo: init with 4 slots"))
		return;
	pa = open_put(&ctx, mod("A"));
	pb = open_put(&ctx, mod("B"));
	pc = open_put(&ctx, mod("C"));
	pd = open_put(&ctx, mod("D"));
	s = stats(&ctx);
	STATS_ARE(s, 0, 4, 0, 4, 0, "fifo: A B C D opened and put: 4 warm");
	ok(pa && pb && pc && pd && pa != pb && pb != pc && pc != pd && pa != pd, "fifo: four distinct slots");

	m = open_ok(&ctx, mod("E"));
	ok(m == pa, "fifo: E takes A's slot (A released first)");
	s = stats(&ctx);
	STATS_ARE(s, 1, 3, 0, 5, 1, "fifo: E is a miss that evicted one warm slot");
	is_str(dwunw_module_path(m), mod("E"), "fifo: the reclaimed slot now holds E");
	put(&ctx, m);

	m = open_ok(&ctx, mod("B"));
	ok(m == pb, "fifo: B still cached (same slot)");
	s = stats(&ctx);
	ok(s.hits == 1 && s.misses == 5 && s.evictions == 1, "fifo: B is a hit");
	put(&ctx, m); /* B is now the most recently released */

	/* Warm order now: C, D, E, B. A is a miss and evicts C. */
	m = open_ok(&ctx, mod("A"));
	s = stats(&ctx);
	ok(s.misses == 6 && s.evictions == 2, "fifo: A was evicted: re-opening it is a miss");
	ok(m == pc, "fifo: A reloaded into C's slot (C released before D, E, B)");
	put(&ctx, m);
	m = open_ok(&ctx, mod("D"));
	s = stats(&ctx);
	ok(m == pd && s.hits == 2 && s.misses == 6, "fifo: D still cached");
	put(&ctx, m);
	m = open_ok(&ctx, mod("C"));
	s = stats(&ctx);
	ok(s.misses == 7 && s.evictions == 3, "fifo: C was evicted by A");
	ok(m == pa, "fifo: C takes E's slot (order E, B, A, D)");
	put(&ctx, m);
	dwunw_shutdown(&ctx);
}

/* The order of release decides, not the order of opening. */
static void test_release_order(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *pa, *pb, *pc, *pd, *m;

	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "release order: init with 4 slots"))
		return;
	pa = open_ok(&ctx, mod("A"));
	pb = open_ok(&ctx, mod("B"));
	pc = open_ok(&ctx, mod("C"));
	pd = open_ok(&ctx, mod("D"));
	s = stats(&ctx);
	ok(s.active == 4 && s.warm == 0, "release order: A B C D active");
	put(&ctx, pc);
	put(&ctx, pa);
	put(&ctx, pd);
	put(&ctx, pb);
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == 4, "release order: released C, A, D, B");
	m = open_ok(&ctx, mod("E"));
	ok(m == pc, "release order: E evicts C (released first), not A (opened first)");
	put(&ctx, m);
	m = open_ok(&ctx, mod("F"));
	ok(m == pa, "release order: F evicts A (released second)");
	put(&ctx, m);
	m = open_ok(&ctx, mod("D"));
	ok(m == pd, "release order: D still cached");
	put(&ctx, m);
	m = open_ok(&ctx, mod("B"));
	ok(m == pb, "release order: B still cached");
	put(&ctx, m);
	s = stats(&ctx);
	STATS_ARE(s, 0, 4, 2, 6, 2, "release order: counters");
	dwunw_shutdown(&ctx);
}

static void test_cache_full(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *m[4], *e = (struct dwunw_module *)1, *again;
	int err;

	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "full: init with 4 slots"))
		return;
	m[0] = open_ok(&ctx, mod("A"));
	m[1] = open_ok(&ctx, mod("B"));
	m[2] = open_ok(&ctx, mod("C"));
	m[3] = open_ok(&ctx, mod("D"));
	err = dwunw_module_open(&ctx, mod("E"), &e);
	is_int(err, DWUNW_ERR_CACHE_FULL, "full: a 5th module with 4 active slots -> CACHE_FULL");
	ok(e == NULL, "full: *out NULL");
	s = stats(&ctx);
	ok(s.active == 4 && s.warm == 0 && s.evictions == 0, "full: nothing evicted, 4 active");
	is_int(dwunw_module_open(&ctx, mod("E"), &e), DWUNW_ERR_CACHE_FULL, "full: again CACHE_FULL");

	again = open_ok(&ctx, mod("B"));
	ok(again == m[1], "full: an active module can still be shared while the cache is full");
	put(&ctx, again);
	s = stats(&ctx);
	ok(s.active == 4 && s.warm == 0, "full: B still active (its first reference)");

	put(&ctx, m[2]);
	e = open_ok(&ctx, mod("E"));
	ok(e == m[2], "full: after C is released, E loads into C's slot");
	s = stats(&ctx);
	ok(s.active == 4 && s.warm == 0 && s.evictions == 1, "full: 4 active again, one eviction");
	put(&ctx, e);
	put(&ctx, m[0]);
	put(&ctx, m[1]);
	put(&ctx, m[3]);
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == 4, "full: all released -> 4 warm");
	dwunw_shutdown(&ctx);
}

/* Open a module of a path and return its build-id (hex) in id. */
static int build_id_of(struct dwunw_module *m, char *id, size_t len)
{
	id[0] = 0;
	return m ? dwunw_module_build_id(m, id, len) : -1;
}

static void test_rebuilt(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s, s0;
	struct dwunw_module *pa, *pb, *m, *m2;
	char id_old[64], id_new[64], id_b[64];
	uint64_t rows_old, rows_new;
	const char *A = mod("R1"), *A2 = mod("R2");

	if (!lib_b[0]) {
		SKIP("rebuilt: no second library to rewrite with");
		return;
	}
	/* A reference for the new contents' table. */
	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "rebuilt: init with 4 slots"))
		return;
	m = open_ok(&ctx, lib_b);
	rows_new = table_rows(&ctx, m, NULL);
	build_id_of(m, id_b, sizeof(id_b));
	put(&ctx, m);
	dwunw_shutdown(&ctx);

	/* 1. Rewritten in place (same inode, new size and mtime) while warm: a fresh load, into
	 *    the stale slot even though older warm slots exist. */
	copy_file(lib_a, A, 0);
	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "rebuilt: init with 4 slots"))
		return;
	pb = open_put(&ctx, mod("B"));
	open_put(&ctx, mod("C"));
	open_put(&ctx, mod("D"));
	pa = open_ok(&ctx, A);
	rows_old = table_rows(&ctx, pa, NULL);
	build_id_of(pa, id_old, sizeof(id_old));
	put(&ctx, pa); /* warm order: B C D A */
	ok(copy_file(lib_b, A, 1) == 0, "rebuilt: rewrote %s in place with other contents", A);
	bump_mtime(A, 5);
	s0 = stats(&ctx);
	m = open_ok(&ctx, A);
	s = stats(&ctx);
	ok(s.misses == s0.misses + 1 && s.hits == s0.hits, "rebuilt: open after the rewrite is a miss (fresh load)");
	ok(m == pa, "rebuilt: the stale slot is reclaimed first (not B, released earlier)");
	ok(s.evictions == s0.evictions + 1, "rebuilt: one eviction");
	rows_old = rows_old ? rows_old : 1;
	is_int(table_rows(&ctx, m, NULL), rows_new, "rebuilt: the table is the new file's (%llu rows, was %llu)",
	       (unsigned long long)rows_new, (unsigned long long)rows_old);
	build_id_of(m, id_new, sizeof(id_new));
	ok(strcmp(id_new, id_old) != 0 && strcmp(id_new, id_b) == 0, "rebuilt: build-id is the new file's (%s)", id_new);
	put(&ctx, m);
	m = open_ok(&ctx, mod("B"));
	ok(m == pb, "rebuilt: B was not evicted");
	put(&ctx, m);
	dwunw_shutdown(&ctx);

	/* 2. Replaced by rename (new inode) while active: the holder keeps the old module, a new
	 *    open gets a fresh one; once released, the stale slot goes first. */
	copy_file(lib_a, A2, 0);
	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "replaced: init with 4 slots"))
		return;
	pb = open_put(&ctx, mod("B"));
	pa = open_ok(&ctx, A2);
	rows_old = table_rows(&ctx, pa, NULL);
	ok(copy_file(lib_b, A2, 0) == 0, "replaced: renamed other contents over %s", A2);
	m = open_ok(&ctx, A2);
	ok(m && m != pa, "replaced: open while the old one is held -> another slot");
	is_int(table_rows(&ctx, m, NULL), rows_new, "replaced: the new module has the new table");
	is_int(table_rows(&ctx, pa, NULL), rows_old, "replaced: the holder's module still has the old table");
	put(&ctx, pa); /* stale and warm; released after B */
	m2 = open_ok(&ctx, A2);
	ok(m2 == m, "replaced: a later open finds the new module, not the stale warm one");
	put(&ctx, m2);
	put(&ctx, m);
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == 3, "replaced: B, old A2, new A2 warm (one slot free)");
	m2 = open_put(&ctx, mod("C")); /* the free slot */
	s0 = stats(&ctx);
	is_int(s0.evictions, 0, "replaced: C took the free slot");
	m2 = open_put(&ctx, mod("D"));
	ok(m2 == pa, "replaced: D reclaims the stale slot first (B was released earlier)");
	m2 = open_ok(&ctx, mod("B"));
	ok(m2 == pb, "replaced: B still cached");
	put(&ctx, m2);
	dwunw_shutdown(&ctx);

	/* 3. Same size and mtime as before (rsync --inplace -t, cp -p of an equally long build):
	 *    the contents differ, the build-id says so. */
	{
		uint8_t *buf = NULL;
		size_t n = 0;
		struct stat st;
		int fd;
		const char *A3 = mod("R3");
		struct dwunw_module *old;

		copy_file(lib_a, A3, 0);
		fd = open(A3, O_RDWR | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, &st) == 0) {
			n = (size_t)st.st_size;
			buf = malloc(n);
			if (buf && pread(fd, buf, n, 0) != (ssize_t)n) {
				free(buf);
				buf = NULL;
			}
		}
		if (!ok(init_slots(&ctx, 4) == DWUNW_OK && buf, "same stat: init, copy read"))
			goto out3;
		old = open_ok(&ctx, A3);
		build_id_of(old, id_old, sizeof(id_old));
		put(&ctx, old);
		/* Flip the build-id's bytes in place; restore the mtime. */
		{
			char hex[3] = { 0 };
			size_t idlen = strlen(id_old) / 2;
			uint8_t idb[64];
			uint8_t *hit = NULL;
			for (size_t i = 0; i < idlen && i < sizeof(idb); i++) {
				hex[0] = id_old[2 * i];
				hex[1] = id_old[2 * i + 1];
				idb[i] = (uint8_t)strtoul(hex, NULL, 16);
			}
			if (idlen)
				hit = memmem(buf, n, idb, idlen);
			if (!ok(hit != NULL, "same stat: build-id found in the file"))
				goto out3;
			for (size_t i = 0; i < idlen; i++)
				hit[i] ^= 0x5a;
			if (pwrite(fd, buf, n, 0) != (ssize_t)n)
				ok(0, "same stat: rewrite");
			{
				struct timespec ts[2] = { st.st_atim, st.st_mtim };
				futimens(fd, ts);
			}
		}
		s0 = stats(&ctx);
		m = open_ok(&ctx, A3);
		s = stats(&ctx);
		build_id_of(m, id_new, sizeof(id_new));
		ok(s.misses == s0.misses + 1,
		     "same stat: a rewrite keeping size and mtime is a fresh load (misses %llu -> %llu; build-id now %s, was %s)",
		     (unsigned long long)s0.misses, (unsigned long long)s.misses, id_new, id_old);
		put(&ctx, m);
		dwunw_shutdown(&ctx);
	out3:
		if (fd >= 0)
			close(fd);
		free(buf);
	}
}

/*
 * The old module's file rewritten in place while the module is held: the module maps the file,
 * so its bytes change (or vanish past the new end) under it. Run in a child: a SIGBUS must not
 * take the test down.
 */
static void test_rewrite_under_holder(void)
{
	pid_t p;
	int st = 0;
	const char *A = mod("R4");

	if (!lib_b[0] || size_b >= size_a) {
		SKIP("rewrite under holder: needs a shorter second library");
		return;
	}
	copy_file(lib_a, A, 0);
	fflush(stdout);
	p = fork();
	if (p == 0) {
		struct dwunw_ctx ctx;
		struct dwunw_module *m;
		struct dwunw_symbol sym;
		alarm(30);
		if (init_slots(&ctx, 4) || dwunw_module_open(&ctx, A, &m))
			_exit(10);
		/* table and symbols not built yet: the first use after the rewrite reads the file */
		if (copy_file(lib_b, A, 1))
			_exit(11);
		(void)dwunw_table_lookup(&ctx, m, 0x1000);
		(void)dwunw_symbolize(&ctx, m, 0x1000, &sym);
		dwunw_module_put(&ctx, m);
		dwunw_shutdown(&ctx);
		_exit(0);
	}
	if (p < 0 || waitpid(p, &st, 0) != p) {
		ok(0, "rewrite under holder: child");
		return;
	}
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "rewrite under holder: using a held module after its file was rewritten shorter in place does not crash (%s %d)",
	     WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static void test_default_slots(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *m[16], *x = NULL;
	char name[16];
	int opened = 0;

	if (ok(dwunw_init(&ctx, NULL) == DWUNW_OK, "default: init without config")) {
		s = stats(&ctx);
		is_int(s.slots, 16, "default: 16 slots without config");
		dwunw_shutdown(&ctx);
	}
	if (!ok(init_slots(&ctx, 0) == DWUNW_OK, "default: init with cache_slots 0"))
		return;
	s = stats(&ctx);
	is_int(s.slots, 16, "default: cache_slots 0 -> 16 slots");
	for (unsigned i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "m%02u", i);
		m[i] = NULL;
		opened += dwunw_module_open(&ctx, mod(name), &m[i]) == DWUNW_OK;
	}
	is_int(opened, 16, "default: 16 distinct modules held at once");
	is_int(dwunw_module_open(&ctx, mod("m16"), &x), DWUNW_ERR_CACHE_FULL, "default: the 17th -> CACHE_FULL");
	for (unsigned i = 0; i < 16; i++)
		put(&ctx, m[i]);
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == 16, "default: 16 warm after release");
	x = open_ok(&ctx, mod("m16"));
	ok(x == m[0], "default: the 17th then reclaims the first released");
	put(&ctx, x);
	dwunw_shutdown(&ctx);
}

/* ---- captured frames ------------------------------------------------------------------- */

__attribute__((noinline)) static int snap_outer(struct self_snap *s, int depth)
{
	int r = depth ? snap_outer(s, depth - 1) : self_snapshot(s);
	__asm__ volatile("" ::: "memory");
	return r;
}

static void test_capture_release(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s, s1;
	struct self_snap sn;
	struct dwunw_frame f[64], f2[64];
	size_t nf = 64, nf2 = 64, holders = 0, distinct = 0;
	struct dwunw_module *mods[64];
	int err, flags_ok = 1;

	memset(&sn, 0, sizeof(sn));
	if (!ok(snap_outer(&sn, 3) == 0, "capture: self snapshot"))
		return;
	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "capture: init with 4 slots")) {
		free(sn.stack);
		return;
	}
	err = dwunw_capture(&ctx, &sn.regs, f, &nf);
	ok(err == DWUNW_OK && nf >= 8, "capture: %zu frames, %s", nf, dwunw_errname(err));
	for (size_t i = 0; i < nf; i++) {
		size_t j;
		if (!f[i].module)
			continue;
		for (j = 0; j < distinct; j++)
			if (mods[j] == f[i].module)
				break;
		if (j == distinct) {
			mods[distinct++] = f[i].module;
			/* the first frame of each module carries its reference */
			flags_ok &= !!(f[i].flags & DWUNW_FRAME_HOLDS_REF);
		} else {
			flags_ok &= !(f[i].flags & DWUNW_FRAME_HOLDS_REF);
		}
		holders += !!(f[i].flags & DWUNW_FRAME_HOLDS_REF);
	}
	ok(distinct >= 2 && holders == distinct && flags_ok,
	   "capture: one HOLDS_REF frame per module (%zu modules, %zu holders)", distinct, holders);
	s = stats(&ctx);
	ok(s.active == distinct && s.warm == 0, "capture: the frames' modules are active (%u)", s.active);
	is_int(dwunw_module_cache_release(&ctx, f, nf), DWUNW_OK, "capture: release");
	s = stats(&ctx);
	ok(s.active == 0 && s.warm == distinct, "capture: released -> %u warm, %u active", s.warm, s.active);
	{
		int cleared = 1;
		for (size_t i = 0; i < nf; i++)
			cleared &= !(f[i].flags & DWUNW_FRAME_HOLDS_REF);
		ok(cleared, "capture: HOLDS_REF cleared by release");
	}
	is_int(dwunw_module_cache_release(&ctx, f, nf), DWUNW_OK, "capture: releasing twice is harmless");
	s1 = stats(&ctx);
	ok(s1.active == 0 && s1.warm == distinct, "capture: still %zu warm, none active", distinct);
	/* No reference went below zero: a module opened and put stays consistent. */
	{
		struct dwunw_module *m = open_ok(&ctx, dwunw_module_path(mods[0]));
		s1 = stats(&ctx);
		ok(m == mods[0] && s1.active == 1, "capture: the warm module re-opens as a hit, 1 active");
		put(&ctx, m);
		s1 = stats(&ctx);
		ok(s1.active == 0 && s1.warm == distinct, "capture: and goes warm again");
	}
	s = stats(&ctx);
	err = dwunw_capture(&ctx, &sn.regs, f2, &nf2);
	s1 = stats(&ctx);
	ok(err == DWUNW_OK && nf2 == nf, "capture: again, %zu frames", nf2);
	ok(s1.misses == s.misses && s1.evictions == s.evictions, "capture: warm modules reused (no miss, no eviction)");
	{
		int same = nf2 == nf;
		for (size_t i = 0; same && i < nf; i++)
			same = f2[i].module == f[i].module && f2[i].pc == f[i].pc;
		ok(same, "capture: same frames, same module slots");
	}
	dwunw_module_cache_release(&ctx, f2, nf2);
	is_int(dwunw_module_cache_release(&ctx, NULL, 0), DWUNW_OK, "release: no frames -> OK");
	is_int(dwunw_module_cache_release(&ctx, NULL, 1), DWUNW_ERR_INVALID_ARG, "release: NULL frames -> INVALID_ARG");
	is_int(dwunw_module_cache_release(NULL, f2, nf2), DWUNW_ERR_INVALID_ARG, "release: NULL ctx -> INVALID_ARG");

	/* Every slot held elsewhere: the capture stops at the first module it cannot load. */
	{
		struct dwunw_module *h[4];
		const char *names[4] = { "A", "B", "C", "D" };
		int held = 0;
		nf2 = 64;
		dwunw_shutdown(&ctx);
		if (init_slots(&ctx, 4) == DWUNW_OK) {
			for (unsigned i = 0; i < 4; i++)
				held += dwunw_module_open(&ctx, mod(names[i]), &h[i]) == DWUNW_OK;
			err = dwunw_capture(&ctx, &sn.regs, f2, &nf2);
			ok(held == 4 && err == DWUNW_ERR_CACHE_FULL && nf2 == 1 && !f2[0].module,
			   "capture with every slot active: 1 frame, CACHE_FULL (%zu, %s)", nf2, dwunw_errname(err));
			dwunw_module_cache_release(&ctx, f2, nf2);
			for (unsigned i = 0; i < 4; i++)
				put(&ctx, h[i]);
			nf2 = 64;
			err = dwunw_capture(&ctx, &sn.regs, f2, &nf2);
			ok(err == DWUNW_OK && nf2 == nf, "capture after the slots are released: %zu frames", nf2);
			dwunw_module_cache_release(&ctx, f2, nf2);
		}
	}
	dwunw_shutdown(&ctx);
	free(sn.stack);
}

/*
 * A capture whose cached mapping->module link has gone stale (the slot now holds another module)
 * must not change the FIFO position of that other module: the failed lookup takes and drops a
 * reference on it, and dw_module_put() stamps a new release time.
 */
static void test_stale_link_fifo(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[64];
	struct dwunw_cache_stats s0, s;
	struct dwunw_module *c, *d, *e, *x;
	struct self_snap sn;
	size_t nf = 64;
	int err;

	memset(&sn, 0, sizeof(sn));
	if (snap_outer(&sn, 1) || init_slots(&ctx, 4)) {
		ok(0, "stale link: setup");
		free(sn.stack);
		return;
	}
	err = dwunw_capture(&ctx, &sn.regs, f, &nf);       /* exe and libc in slots 0, 1 */
	dwunw_module_cache_release(&ctx, f, nf);
	c = open_ok(&ctx, mod("C"));                          /* slots 2, 3, held */
	d = open_ok(&ctx, mod("D"));
	e = open_put(&ctx, mod("E"));                         /* evicts the exe's slot */
	open_put(&ctx, mod("F"));                             /* evicts libc's slot */
	put(&ctx, c);
	put(&ctx, d);                                         /* released: E, F, C, D */
	s0 = stats(&ctx);
	ok(err == DWUNW_OK && s0.warm == 4 && s0.evictions == 2, "stale link: warm E, F, C, D; exe and libc evicted");
	nf = 64;
	err = dwunw_capture(&ctx, &sn.regs, f, &nf);          /* reloads exe and libc: evicts E, F */
	s = stats(&ctx);
	ok(err == DWUNW_OK && s.evictions == s0.evictions + 2, "stale link: the capture reloaded two modules (%s)", dwunw_errname(err));
	dwunw_module_cache_release(&ctx, f, nf);
	s0 = stats(&ctx);
	x = open_ok(&ctx, mod("C"));
	s = stats(&ctx);
	put(&ctx, x);
	ok(s.hits == s0.hits + 1 && x == c,
	     "stale link: C survived (E and F, released first, were evicted)");
	x = open_ok(&ctx, mod("E"));
	s0 = stats(&ctx);
	put(&ctx, x);
	ok(s0.misses == s.misses + 1 && x != e,
	     "stale link: E was evicted (released first)");
	dwunw_shutdown(&ctx);
	free(sn.stack);
}

/* A caller's image registered under a path is what a look-up of that path gets. */
static void test_image_for_path(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = 4 };
	struct dwunw_module *img = NULL, *byp = NULL;
	FILE *f = fopen(lib_a, "rb");
	uint8_t *buf = malloc(size_a);

	if (!f || !buf || fread(buf, 1, size_a, f) != size_a) {
		ok(0, "image: read %s", lib_a);
		if (f)
			fclose(f);
		free(buf);
		return;
	}
	fclose(f);
	if (!ok(dwunw_init(&ctx, &cfg) == DWUNW_OK, "image: init"))
		return;
	is_int(dwunw_module_open_image(&ctx, lib_a, buf, size_a, &img), DWUNW_OK, "image: open_image under %s", lib_a);
	is_int(dwunw_module_open(&ctx, lib_a, &byp), DWUNW_OK, "image: open by the same path");
	ok(img && img == byp, "image: the path look-up gets the caller's image, not the file");
	dwunw_module_put(&ctx, byp);
	dwunw_module_put(&ctx, img);
	dwunw_shutdown(&ctx);
	free(buf);
}

static void test_trim(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_cache_stats s;
	struct dwunw_module *a, *b, *c;
	uint32_t freed = 99;

	if (!ok(init_slots(&ctx, 4) == DWUNW_OK, "trim: init with 4 slots"))
		return;
	open_put(&ctx, mod("A"));         /* warm before the first mark */
	a = open_ok(&ctx, mod("B"));      /* active throughout */
	is_int(dwunw_cache_trim(&ctx, &freed), DWUNW_OK, "trim: first call");
	is_int(freed, 0, "trim: the first call only sets the mark");
	b = open_ok(&ctx, mod("C"));
	put(&ctx, b);                     /* warm after the mark: kept by the next trim */
	c = open_put(&ctx, mod("A"));     /* A used again since the mark: kept */
	is_int(dwunw_cache_trim(&ctx, &freed), DWUNW_OK, "trim: second call");
	is_int(freed, 0, "trim: nothing warm since before the mark");
	s = stats(&ctx);
	ok(s.active == 1 && s.warm == 2, "trim: B active, A and C warm (active %u warm %u)", s.active, s.warm);
	is_int(dwunw_cache_trim(&ctx, &freed), DWUNW_OK, "trim: third call");
	is_int(freed, 2, "trim: A and C, unused since the last call, freed");
	s = stats(&ctx);
	ok(s.active == 1 && s.warm == 0, "trim: B still active, no warm slot (active %u warm %u)", s.active, s.warm);
	is_str(dwunw_module_path(a), mod("B"), "trim: the active module is untouched");
	c = open_ok(&ctx, mod("A"));
	ok(c && table_rows(&ctx, c, NULL) > 0, "trim: a trimmed module loads again, with its table");
	put(&ctx, c);
	put(&ctx, a);
	is_int(dwunw_cache_trim(NULL, &freed), DWUNW_ERR_INVALID_ARG, "trim: NULL ctx -> INVALID_ARG");
	dwunw_shutdown(&ctx);
}

int main(void)
{
	arm_timeout(120, cleanup_dir);
	if (linked_lib("libz.so", lib_a, sizeof(lib_a)) || !(size_a = file_size(lib_a))) {
		SKIP("no libz mapped");
		return done_testing();
	}
	if (linked_lib("liblzma.so", lib_b, sizeof(lib_b)) || !(size_b = file_size(lib_b)))
		lib_b[0] = 0;
	/* The rewrite-under-holder case wants the second file shorter than the first. */
	if (lib_b[0] && size_b > size_a) {
		char t[PATH_MAX];
		size_t ts = size_a;
		memcpy(t, lib_a, sizeof(t));
		memcpy(lib_a, lib_b, sizeof(t));
		memcpy(lib_b, t, sizeof(t));
		size_a = size_b;
		size_b = ts;
	}
	snprintf(dir, sizeof(dir), "/tmp/dwunw-cache-XXXXXX");
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return done_testing();
	}
	atexit(cleanup_dir);
	printf("# modules: copies of %s (%zu bytes); rewrites with %s (%zu bytes)\n", lib_a, size_a, lib_b, size_b);
	make_copies();

	test_warm_reuse();
	test_fifo();
	test_image_for_path();
	test_release_order();
	test_cache_full();
	test_rebuilt();
	test_rewrite_under_holder();
	test_default_slots();
	test_capture_release();
	test_stale_link_fifo();
	test_trim();
	return done_testing();
}
