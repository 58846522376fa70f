// SPDX-License-Identifier: GPL-2.0-only
/*
 * dwunw-bench: libdwunw, libunwind and libdwfl unwinding the same snapshots in one process.
 *
 *   dwunw-bench [--quick] [--iterations N] [--batches B] [--cold-runs K] [--table-runs K]
 *               [--snapshot FILE[@TID]]... [--table FILE]... [--no-self]
 *   dwunw-bench --profile NAME --unwinder dwunw|libunwind|libdwfl [--iterations N] [...]
 *
 * Prints one JSON document on stdout (doc/bench.md describes it; `dwunw bench` formats it).
 * Per snapshot and unwinder: the frames' pcs, whether they are the same as libdwunw's (and
 * where not), the cold first unwind (fresh context: tables built, files parsed), and the warm
 * time per unwind: batches of N unwinds, the unwinders taking turns batch by batch so that the
 * machine's noise hits them alike; median and p90 over the batches. Then the build time and
 * size of libdwunw's tables for the system libraries and the given files, and the module-cache
 * counters. --dump DIR also writes the snapshots for bench/framehop (dump.c). --profile runs N warm unwinds of one snapshot inside profile_loop() and nothing
 * else timed, for `valgrind --tool=callgrind --toggle-collect=profile_loop`.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elfutils/libdwfl.h>
#include <libunwind.h>
#include "bench.h"

#define MAX_SNAPS 64
#define MAX_TABLES 64
#define NU 3                     /* unwinders: dwunw, libunwind, libdwfl */
#define MAX_DIFFS 12

static const char *const unames[NU] = { "dwunw", "libunwind", "libdwfl" };
static const struct peer_ops *const peer_of[NU] = { NULL, &peer_libunwind, &peer_libdwfl };

static struct {
	unsigned iterations, batches, cold_runs, table_runs;
	int quick, self;
	const char *profile, *profile_unwinder, *dump;
	const char *files[MAX_SNAPS];
	unsigned nfiles;
	const char *tables[MAX_TABLES];
	unsigned ntables;
} opt = { 100, 200, 5, 7, 0, 1, NULL, NULL, NULL, { 0 }, 0, { 0 }, 0 };

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("dwunw-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* ---- libdwunw contexts ------------------------------------------------------------------------ */

static int dwunw_config_init(struct dwunw_ctx *ctx, const char *sysroot)
{
	struct dwunw_config cfg = {
		.size = sizeof(cfg),
		/* Offline snapshots, CFI from the module files only: what the peers get too. */
		.flags = DWUNW_CFG_NO_REMOTE_READS | DWUNW_CFG_NO_DEBUG_FILES,
		.sysroot = sysroot,
		.cache_slots = 32,
	};
	return dwunw_init(ctx, &cfg);
}

/*
 * A context set up for a snapshot: its maps for the snapshot's pid, its [vdso] image and its
 * extra memory. *vdso holds the image's module open (it must stay open to be used).
 */
static int dwunw_setup(struct dwunw_ctx *ctx, struct bsnap *s, struct dwunw_module **vdso)
{
	int err = dwunw_config_init(ctx, s->sysroot);

	*vdso = NULL;
	if (err)
		return err;
	err = dwunw_maps_set(ctx, s->pid, s->maps, s->maps_len);
	if (!err && s->vdso)
		err = dwunw_module_open_image(ctx, "[vdso]", s->vdso, s->vdso_len, vdso);
	for (size_t i = 0; !err && i < s->nmemory; i++)
		err = dwunw_memory_add(ctx, s->pid, s->memory[i].start, s->memory[i].data, s->memory[i].len);
	if (err) {
		if (*vdso)
			dwunw_module_put(ctx, *vdso);
		*vdso = NULL;
		dwunw_shutdown(ctx);
	}
	return err;
}

/* The warm contexts: the self snapshots share one (one process); each file has its own. */
struct dctx {
	const struct bsnap *owner;   /* NULL: the self snapshots' */
	struct dwunw_ctx ctx;
	struct dwunw_module *vdso;
};
static struct dctx dctxs[MAX_SNAPS];
static unsigned ndctx;

static struct dwunw_ctx *ctx_for(struct bsnap *s)
{
	const struct bsnap *owner = strcmp(s->source, "self") ? s : NULL;
	int err;

	for (unsigned i = 0; i < ndctx; i++)
		if (dctxs[i].owner == owner)
			return &dctxs[i].ctx;
	if (ndctx == MAX_SNAPS)
		die("too many contexts");
	err = dwunw_setup(&dctxs[ndctx].ctx, s, &dctxs[ndctx].vdso);
	if (err)
		die("%s: setting up libdwunw: %s", s->name, dwunw_errname(err));
	dctxs[ndctx].owner = owner;
	return &dctxs[ndctx++].ctx;
}

/* ---- one unwind by any of the three ------------------------------------------------------------ */

struct runner {
	struct bsnap *s;
	struct dwunw_ctx *ctx;       /* dwunw */
	struct dwunw_frame *frames;  /* dwunw's buffer */
	struct peer *peer;           /* the others */
	int state;                   /* 0 usable, 1 not applicable, -1 setup failed */
	char reason[256];
};

static int dwunw_unwind(struct dwunw_ctx *ctx, const struct bsnap *s, struct dwunw_frame *f, struct bresult *r)
{
	size_t nf = BENCH_MAXF;
	int err = dwunw_capture(ctx, &s->regs, f, &nf);

	r->n = nf;
	for (size_t i = 0; i < nf; i++)
		r->pcs[i] = f[i].pc;
	r->ok = err == DWUNW_OK;
	snprintf(r->stop, sizeof(r->stop), "%s", dwunw_errname(err));
	dwunw_module_cache_release(ctx, f, nf);
	return err;
}

static inline void run_once(struct runner *u, int which, struct bresult *r)
{
	if (which == 0) {
		size_t nf = BENCH_MAXF;
		int err = dwunw_capture(u->ctx, &u->s->regs, u->frames, &nf);
		r->n = nf;
		r->ok = err == DWUNW_OK;
		dwunw_module_cache_release(u->ctx, u->frames, nf);
	} else {
		peer_of[which]->unwind(u->peer, r);
	}
}

/* Set up an unwinder on a snapshot (warm state); state 1 = not applicable. */
static void runner_open(struct runner *u, int which, struct bsnap *s)
{
	memset(u, 0, sizeof(*u));
	u->s = s;
	if (which == 0) {
		if (!dwunw_arch_get((enum dwunw_arch)s->arch)) {
			u->state = 1;
			snprintf(u->reason, sizeof(u->reason), "this libdwunw build has no %s backend", s->arch_name);
			return;
		}
		u->ctx = ctx_for(s);
		u->frames = calloc(BENCH_MAXF, sizeof(*u->frames));
		if (!u->frames)
			die("out of memory");
		return;
	}
	u->state = peer_of[which]->open(&u->peer, s, u->reason, sizeof(u->reason));
}

static void runner_close(struct runner *u, int which)
{
	if (which == 0)
		free(u->frames);
	else if (u->peer)
		peer_of[which]->close(u->peer);
	u->frames = NULL;
	u->peer = NULL;
}

/* A cold first unwind: a fresh context / address space / Dwfl, everything built on the way. */
static uint64_t cold_unwind(int which, struct bsnap *s, struct bresult *r)
{
	uint64_t t0 = now_ns(), t;

	if (which == 0) {
		struct dwunw_ctx c;
		struct dwunw_module *vdso;
		static struct dwunw_frame f[BENCH_MAXF];
		if (dwunw_setup(&c, s, &vdso))
			return 0;
		dwunw_unwind(&c, s, f, r);
		t = now_ns() - t0;
		if (vdso)
			dwunw_module_put(&c, vdso);
		dwunw_shutdown(&c);
	} else {
		struct peer *p;
		char why[256];
		if (peer_of[which]->open(&p, s, why, sizeof(why)))
			return 0;
		peer_of[which]->unwind(p, r);
		t = now_ns() - t0;
		peer_of[which]->close(p);
	}
	return t;
}

/* ---- statistics ------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double quantile(const double *v, size_t n, double q)
{
	double *c, r;
	size_t i;
	if (!n)
		return 0;
	c = malloc(n * sizeof(*c));
	if (!c)
		die("out of memory");
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	i = (size_t)(q * (double)(n - 1) + 0.5);
	r = c[i < n ? i : n - 1];
	free(c);
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median_u64(uint64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

/* ---- symbols for the frames where unwinders differ -------------------------------------------- */

static void symbol_of(struct bsnap *s, uint64_t pc, int is_return, char *buf, size_t len)
{
	/* its own context: the measured ones' cache counters stay the unwinds' own */
	static struct dwunw_ctx symctx, *ctx;
	struct dwunw_module *mod;
	struct dwunw_symbol sym;
	char full[4200];
	int mi = bspace_module_at(&s->space, pc);

	snprintf(buf, len, "??");
	if (mi < 0 || !s->space.mods[mi].file)
		return;
	if (!ctx) {
		if (dwunw_config_init(&symctx, NULL))
			return;
		ctx = &symctx;
	}
	snprintf(full, sizeof(full), "%s", s->space.mods[mi].file->path);
	if (dwunw_module_open(ctx, full, &mod))
		return;
	if (!dwunw_symbolize(ctx, mod, pc - s->space.mods[mi].bias - (is_return ? 1 : 0), &sym) && sym.name[0])
		snprintf(buf, len, "%s+0x%llx", sym.name, (unsigned long long)(sym.offset + (is_return ? 1 : 0)));
	else {
		const char *b = strrchr(s->space.mods[mi].path, '/');
		snprintf(buf, len, "%.200s+0x%llx", b ? b + 1 : s->space.mods[mi].path,
			 (unsigned long long)(pc - s->space.mods[mi].bias));
	}
	dwunw_module_put(ctx, mod);
}

/* ---- one snapshot: agreement, cold, warm --------------------------------------------------------- */

struct uresult {
	int state;                   /* 0 ran, 1 n/a, -1 setup failed */
	char reason[256];
	struct bresult first;        /* the first warm unwind */
	double *batch_ns;            /* per unwind, per batch */
	uint64_t cold_ns;
	unsigned unstable;           /* warm unwinds whose frame count changed */
};

static void print_pcs(const struct bresult *r)
{
	printf("[");
	for (size_t i = 0; i < r->n; i++)
		printf("%s\"0x%llx\"", i ? "," : "", (unsigned long long)r->pcs[i]);
	printf("]");
}

static int same_pcs(const struct bresult *a, const struct bresult *b)
{
	return a->n == b->n && !memcmp(a->pcs, b->pcs, a->n * sizeof(a->pcs[0]));
}

/* The frames of `r` against the reference (libdwunw's): where they differ. */
static void print_differs(struct bsnap *s, const struct bresult *ref, const struct bresult *r)
{
	size_t n = ref->n > r->n ? ref->n : r->n, shown = 0;
	char a[300], b[300];

	printf("[");
	for (size_t i = 0; i < n && shown < MAX_DIFFS; i++) {
		int ha = i < ref->n, hb = i < r->n;
		if (ha && hb && ref->pcs[i] == r->pcs[i])
			continue;
		/* after frame 0, pcs are return addresses (except after a signal frame: close enough) */
		if (ha)
			symbol_of(s, ref->pcs[i], i > 0, a, sizeof(a));
		if (hb)
			symbol_of(s, r->pcs[i], i > 0, b, sizeof(b));
		printf("%s{\"index\":%zu,\"dwunw\":", shown ? "," : "", i);
		if (ha)
			printf("\"0x%llx\",\"dwunw_symbol\":", (unsigned long long)ref->pcs[i]), json_str(stdout, a);
		else
			printf("null");
		printf(",\"peer\":");
		if (hb)
			printf("\"0x%llx\",\"peer_symbol\":", (unsigned long long)r->pcs[i]), json_str(stdout, b);
		else
			printf("null");
		printf("}");
		shown++;
	}
	printf("]");
}

static void bench_snapshot(struct bsnap *s, int first_snapshot)
{
	struct runner u[NU];
	struct uresult res[NU];
	struct bresult tmp;
	unsigned order[NU] = { 0, 1, 2 };

	memset(res, 0, sizeof(res));
	/* Warm state: set up, then one unwind to fill the caches, which also gives the frames that
	 * are compared (and tells an unwinder that cannot do this architecture). */
	for (int w = 0; w < NU; w++) {
		runner_open(&u[w], w, s);
		res[w].state = u[w].state;
		snprintf(res[w].reason, sizeof(res[w].reason), "%s", u[w].reason);
		if (res[w].state)
			continue;
		if (w == 0)
			dwunw_unwind(u[w].ctx, s, u[w].frames, &res[w].first);
		else
			peer_of[w]->unwind(u[w].peer, &res[w].first);
		if (res[w].first.unsupported) {
			res[w].state = 1;
			snprintf(res[w].reason, sizeof(res[w].reason), "%s", res[w].first.stop);
			runner_close(&u[w], w);
		}
	}
	/* Cold: a fresh context / address space / Dwfl and its first unwind; the median of runs. */
	for (int w = 0; w < NU; w++) {
		uint64_t t[32];
		unsigned k = 0;
		if (res[w].state)
			continue;
		for (unsigned i = 0; i < opt.cold_runs && i < 32; i++) {
			uint64_t c = cold_unwind(w, s, &tmp);
			if (c)
				t[k++] = c;
		}
		res[w].cold_ns = median_u64(t, k);
	}
	/* Warm: one batch of warm-up, not counted; then the batches, the unwinders taking turns. */
	for (int w = 0; w < NU; w++) {
		if (res[w].state)
			continue;
		res[w].batch_ns = calloc(opt.batches, sizeof(double));
		if (!res[w].batch_ns)
			die("out of memory");
		for (unsigned i = 0; i < opt.iterations; i++)
			run_once(&u[w], w, &tmp);
	}
	for (unsigned b = 0; b < opt.batches; b++) {
		for (unsigned k = 0; k < NU; k++) {
			unsigned w = order[(b + k) % NU];
			uint64_t t0;
			size_t n0 = res[w].first.n;
			if (res[w].state)
				continue;
			t0 = now_ns();
			for (unsigned i = 0; i < opt.iterations; i++) {
				run_once(&u[w], (int)w, &tmp);
				res[w].unstable += tmp.n != n0;
			}
			res[w].batch_ns[b] = (double)(now_ns() - t0) / opt.iterations;
		}
	}

	/* Output */
	{
		double dmed = res[0].state ? 0 : quantile(res[0].batch_ns, opt.batches, 0.5);
		int peers_seen = 0, peers_agree = 1;

		for (int w = 1; w < NU; w++)
			if (!res[w].state && !res[0].state) {
				peers_seen++;
				peers_agree &= same_pcs(&res[0].first, &res[w].first);
			}
		printf("%s\n  {\"name\":", first_snapshot ? "" : ",");
		json_str(stdout, s->name);
		printf(",\"arch\":\"%s\",\"source\":", s->arch_name);
		json_str(stdout, s->source);
		printf(",\"stack_bytes\":%llu,\"frames\":%zu,\"unwinders\":{",
		       (unsigned long long)s->regs.stack_size, res[0].state ? (size_t)0 : res[0].first.n);
		for (int w = 0; w < NU; w++) {
			struct uresult *r = &res[w];
			printf("%s\n    \"%s\":{", w ? "," : "", unames[w]);
			if (r->state) {
				printf("\"status\":\"%s\",\"reason\":", r->state > 0 ? "n/a" : "error");
				json_str(stdout, r->reason);
				printf(",\"frames\":null,\"agrees\":null,\"median_ns\":null,\"p90_ns\":null}");
				continue;
			}
			{
				double med = quantile(r->batch_ns, opt.batches, 0.5);
				double p90 = quantile(r->batch_ns, opt.batches, 0.9);
				double mn = quantile(r->batch_ns, opt.batches, 0.0);
				printf("\"status\":\"ok\",\"stop\":");
				json_str(stdout, r->first.stop);
				printf(",\"complete\":%s,\"frames\":%zu", r->first.ok ? "true" : "false", r->first.n);
				if (w == 0)
					printf(",\"agrees\":%s", peers_seen ? (peers_agree ? "true" : "false") : "null");
				else
					printf(",\"agrees\":%s", res[0].state ? "null" : same_pcs(&res[0].first, &r->first) ? "true" : "false");
				printf(",\"median_ns\":%.1f,\"p90_ns\":%.1f,\"min_ns\":%.1f,\"ns_per_frame\":%.2f,\"cold_ns\":%llu",
				       med, p90, mn, r->first.n ? med / (double)r->first.n : 0.0, (unsigned long long)r->cold_ns);
				if (!res[0].state && dmed > 0)
					printf(",\"ratio_to_dwunw\":%.2f", med / dmed);
				printf(",\"unstable\":%u,\"pcs\":", r->unstable);
				print_pcs(&r->first);
				if (w > 0 && !res[0].state && !same_pcs(&res[0].first, &r->first)) {
					printf(",\"differs\":");
					print_differs(s, &res[0].first, &r->first);
				}
				printf("}");
			}
		}
		printf("}}");
	}
	for (int w = 0; w < NU; w++) {
		runner_close(&u[w], w);
		free(res[w].batch_ns);
	}
}

/* ---- tables ------------------------------------------------------------------------------------ */

struct tfile {
	char name[64];
	char path[PATH_MAX];
	const char *sysroot;
};

static void bench_table(const struct tfile *t, int first)
{
	uint64_t build[64], total[64];
	unsigned k = 0;
	struct dwunw_table_info ti;
	int err = 0;

	memset(&ti, 0, sizeof(ti));
	for (unsigned i = 0; i < opt.table_runs && i < 64; i++) {
		struct dwunw_ctx c;
		struct dwunw_module *m;
		uint64_t t0;
		if (dwunw_config_init(&c, NULL))
			die("dwunw_init failed");
		t0 = now_ns();
		err = dwunw_module_open(&c, t->path, &m);
		if (!err) {
			err = dwunw_table_info(&c, m, &ti);
			total[k] = now_ns() - t0;
			build[k] = ti.build_ns;
			if (!err)
				k++;
			dwunw_module_put(&c, m);
		}
		dwunw_shutdown(&c);
		if (err)
			break;
	}
	printf("%s\n  {\"name\":", first ? "" : ",");
	json_str(stdout, t->name);
	printf(",\"file\":");
	json_str(stdout, t->path);
	if (err) {
		printf(",\"error\":\"%s\"}", dwunw_errname(err));
		return;
	}
	printf(",\"build_ms\":%.3f,\"open_build_ms\":%.3f,\"rows\":%llu,\"rules\":%llu,\"bytes\":%llu,"
	       "\"bytes_per_row\":%.2f,\"fdes\":%llu,\"fdes_dropped\":%llu,\"runs\":%u}",
	       (double)median_u64(build, k) / 1e6, (double)median_u64(total, k) / 1e6, (unsigned long long)ti.rows,
	       (unsigned long long)ti.rules, (unsigned long long)ti.bytes,
	       ti.rows ? (double)ti.bytes / (double)ti.rows : 0.0, (unsigned long long)ti.fdes,
	       (unsigned long long)ti.fdes_dropped, k);
}

static unsigned ntf;
static struct tfile tfiles[MAX_TABLES + 64];

static void table_add(const char *name, const char *path)
{
	char real[PATH_MAX];
	if (!realpath(path, real) || access(real, R_OK))
		return;
	for (unsigned i = 0; i < ntf; i++)
		if (!strcmp(tfiles[i].path, real))
			return;
	if (ntf == sizeof(tfiles) / sizeof(tfiles[0]))
		return;
	snprintf(tfiles[ntf].name, sizeof(tfiles[ntf].name), "%s", name);
	snprintf(tfiles[ntf].path, sizeof(tfiles[ntf].path), "%s", real);
	ntf++;
}

/* libc, ld.so, libstdc++, libgcc_s of this machine (found beside this process's libc). */
static void system_tables(const struct bsnap *self)
{
	char dir[PATH_MAX] = "", p[PATH_MAX + 32];

	for (size_t i = 0; self && i < self->space.nmods; i++) {
		const char *path = self->space.mods[i].path, *b = strrchr(path, '/');
		if (!b)
			continue;
		if (!strncmp(b + 1, "libc.so", 7)) {
			table_add("libc", path);
			snprintf(dir, sizeof(dir), "%.*s", (int)(b - path), path);
		} else if (!strncmp(b + 1, "ld-linux", 8) || !strncmp(b + 1, "ld-", 3)) {
			table_add("ld.so", path);
		}
	}
	if (!dir[0])
		snprintf(dir, sizeof(dir), "/lib/x86_64-linux-gnu");
	snprintf(p, sizeof(p), "%s/libstdc++.so.6", dir);
	table_add("libstdc++", p);
	snprintf(p, sizeof(p), "%s/libgcc_s.so.1", dir);
	table_add("libgcc_s", p);
}

/* ---- profile mode --------------------------------------------------------------------------------- */

/* callgrind counts only inside this function (--toggle-collect=profile_loop). */
__attribute__((noinline)) static size_t profile_loop(struct runner *u, int which, unsigned n)
{
	struct bresult *r = malloc(sizeof(*r));
	size_t frames = 0;
	if (!r)
		die("out of memory");
	for (unsigned i = 0; i < n; i++) {
		run_once(u, which, r);
		frames += r->n;
	}
	free(r);
	return frames;
}

static int profile(struct bsnap *snaps, unsigned n)
{
	struct bsnap *s = NULL;
	struct runner u;
	struct bresult r;
	int which = -1;
	size_t frames;

	for (unsigned i = 0; i < n; i++)
		if (!strcmp(snaps[i].name, opt.profile))
			s = &snaps[i];
	for (int w = 0; w < NU; w++)
		if (opt.profile_unwinder && !strcmp(opt.profile_unwinder, unames[w]))
			which = w;
	if (!s)
		die("--profile: no snapshot named %s", opt.profile);
	if (which < 0)
		die("--unwinder: one of dwunw, libunwind, libdwfl");
	runner_open(&u, which, s);
	if (u.state)
		die("%s on %s: %s", unames[which], s->name, u.reason);
	if (which == 0) {
		dwunw_unwind(u.ctx, s, u.frames, &r);
	} else {
		peer_of[which]->unwind(u.peer, &r);
	}
	for (int i = 0; i < 10; i++)
		run_once(&u, which, &r);
	frames = profile_loop(&u, which, opt.iterations);
	printf("{\"profile\":");
	json_str(stdout, s->name);
	printf(",\"unwinder\":\"%s\",\"iterations\":%u,\"frames\":%zu}\n", unames[which], opt.iterations,
	       opt.iterations ? frames / opt.iterations : 0);
	runner_close(&u, which);
	return 0;
}

/* ---- main ---------------------------------------------------------------------------------------- */

static unsigned num_arg(const char *name, const char *v, unsigned lo, unsigned hi)
{
	char *e;
	unsigned long x;
	errno = 0;
	x = strtoul(v, &e, 10);
	if (errno || *e || !*v || x < lo || x > hi)
		die("%s: not a number from %u to %u: %s", name, lo, hi, v);
	return (unsigned)x;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: dwunw-bench [--quick] [--iterations N] [--batches B] [--cold-runs K] [--table-runs K]\n"
		"                   [--snapshot FILE[@TID]]... [--table FILE]... [--no-self]\n"
		"       dwunw-bench --profile NAME --unwinder dwunw|libunwind|libdwfl [--iterations N] [...]\n"
		"       any of them with --dump DIR: the snapshots also as files for bench/framehop\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "batches", required_argument, NULL, 'b' },
		{ "cold-runs", required_argument, NULL, 'c' },
		{ "table-runs", required_argument, NULL, 't' },
		{ "snapshot", required_argument, NULL, 's' },
		{ "table", required_argument, NULL, 'T' },
		{ "no-self", no_argument, NULL, 'N' },
		{ "profile", required_argument, NULL, 'p' },
		{ "unwinder", required_argument, NULL, 'u' },
		{ "dump", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct bsnap snaps[MAX_SNAPS];
	unsigned nsnaps = 0, nself = 0, set_n = 0, set_b = 0, set_c = 0, set_t = 0;
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'q': opt.quick = 1; break;
		case 'n': opt.iterations = num_arg("--iterations", optarg, 1, 10000000); set_n = 1; break;
		case 'b': opt.batches = num_arg("--batches", optarg, 1, 100000); set_b = 1; break;
		case 'c': opt.cold_runs = num_arg("--cold-runs", optarg, 1, 32); set_c = 1; break;
		case 't': opt.table_runs = num_arg("--table-runs", optarg, 1, 64); set_t = 1; break;
		case 's':
			if (opt.nfiles == MAX_SNAPS - 3)
				die("too many snapshots");
			opt.files[opt.nfiles++] = optarg;
			break;
		case 'T':
			if (opt.ntables == MAX_TABLES)
				die("too many tables");
			opt.tables[opt.ntables++] = optarg;
			break;
		case 'N': opt.self = 0; break;
		case 'p': opt.profile = optarg; break;
		case 'u': opt.profile_unwinder = optarg; break;
		case 'D': opt.dump = optarg; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	if (opt.quick) {
		if (!set_n)
			opt.iterations = 10;
		if (!set_b)
			opt.batches = 10;
		if (!set_c)
			opt.cold_runs = 1;
		if (!set_t)
			opt.table_runs = 1;
	}

	/* Self snapshots first: nothing else has touched the stack's depth yet. */
	if (opt.self) {
#ifdef __x86_64__
		if (snap_take_callbacks(&snaps[nsnaps], err, sizeof(err)) || snap_take_deep(&snaps[nsnaps + 1], err, sizeof(err)) ||
		    snap_take_signal(&snaps[nsnaps + 2], err, sizeof(err)))
			die("%s", err);
		nself = 3;
		if (snap_set_self_maps(snaps, nself, err, sizeof(err)))
			die("%s", err);
		nsnaps = nself;
#endif
	}
	for (unsigned i = 0; i < opt.nfiles; i++) {
		char path[PATH_MAX], *at;
		int32_t tid = 0;
		snprintf(path, sizeof(path), "%s", opt.files[i]);
		at = strrchr(path, '@');
		if (at && at[1] && strspn(at + 1, "0123456789") == strlen(at + 1)) {
			tid = (int32_t)atoi(at + 1);
			*at = 0;
		}
		if (snap_load_file(&snaps[nsnaps], path, tid, BENCH_SELF_PID + 1 + (int32_t)i, err, sizeof(err)))
			die("%s", err);
		nsnaps++;
	}

	/* Before the run, in this process: the self snapshots' addresses are this process's. */
	if (opt.dump && snap_dump(snaps, nsnaps, opt.dump, err, sizeof(err)))
		die("%s", err);
	if (opt.profile)
		return profile(snaps, nsnaps);

	printf("{\"bench\":\"dwunw-bench\",\"versions\":{\"dwunw\":\"%s\",\"libunwind\":\"%d.%d.%d\",\"libdwfl\":\"%s\"},",
	       dwunw_version(), UNW_VERSION_MAJOR, UNW_VERSION_MINOR, UNW_VERSION_EXTRA, dwfl_version(NULL));
	printf("\n\"config\":{\"quick\":%s,\"iterations\":%u,\"batches\":%u,\"cold_runs\":%u,\"table_runs\":%u},",
	       opt.quick ? "true" : "false", opt.iterations, opt.batches, opt.cold_runs, opt.table_runs);
	printf("\n\"snapshots\":[");
	for (unsigned i = 0; i < nsnaps; i++) {
		bench_snapshot(&snaps[i], i == 0);
		fflush(stdout);
	}
	printf("],\n\"tables\":[");
	system_tables(nself ? &snaps[0] : NULL);
	for (unsigned i = 0; i < opt.ntables; i++) {
		char *dup = strdup(opt.tables[i]);
		table_add(dup ? basename(dup) : opt.tables[i], opt.tables[i]);
		free(dup);
	}
	/* the code modules of the snapshot files (their executables and libraries) */
	for (unsigned i = nself; i < nsnaps; i++)
		for (size_t m = 0; m < snaps[i].space.nmods; m++) {
			const struct bmod *bm = &snaps[i].space.mods[m];
			char name[64];
			if (!bm->file || !bm->text_hi)
				continue;
			snprintf(name, sizeof(name), "%s:%.48s", snaps[i].arch_name,
				 strrchr(bm->path, '/') ? strrchr(bm->path, '/') + 1 : bm->path);
			table_add(name, bm->file->path);
		}
	for (unsigned i = 0; i < ntf; i++)
		bench_table(&tfiles[i], i == 0);
	printf("],\n\"cache\":");
	{
		struct dwunw_cache_stats t = { 0 };
		for (unsigned i = 0; i < ndctx; i++) {
			struct dwunw_cache_stats cs;
			if (dwunw_cache_stats(&dctxs[i].ctx, &cs) == DWUNW_OK) {
				t.hits += cs.hits;
				t.misses += cs.misses;
				t.evictions += cs.evictions;
				t.slots += cs.slots;
				t.active += cs.active;
				t.warm += cs.warm;
			}
		}
		printf("{\"contexts\":%u,\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu,\"slots\":%u,\"active\":%u,\"warm\":%u}",
		       ndctx, (unsigned long long)t.hits, (unsigned long long)t.misses, (unsigned long long)t.evictions,
		       t.slots, t.active, t.warm);
	}
	printf("\n}\n");
	for (unsigned i = 0; i < ndctx; i++) {
		if (dctxs[i].vdso)
			dwunw_module_put(&dctxs[i].ctx, dctxs[i].vdso);
		dwunw_shutdown(&dctxs[i].ctx);
	}
	for (unsigned i = 0; i < nsnaps; i++)
		snap_free(&snaps[i]);
	return 0;
}
