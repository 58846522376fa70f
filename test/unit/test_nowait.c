// SPDX-License-Identifier: GPL-2.0-only
/*
 * DWUNW_REGS_NOWAIT: a capture that never does file I/O nor waits for the context's lock, and
 * dwunw_load_for, the call that loads what it found missing.
 *
 * Targets: a few children blocked in system calls (sleep, cat, tail, sort), each frozen once to
 * take its registers and 32 KiB of stack (the snapshots). The oracle for each is a blocking capture
 * in a context of its own: it must be complete (DWUNW_OK).
 *
 *  1. One thread: NOWAIT on a fresh context gives WOULDBLOCK and no frame (maps not cached);
 *     after dwunw_load_for the same NOWAIT capture is the oracle's stack.
 *  2. Threads: 4 threads capture every snapshot with NOWAIT while loader threads call
 *     dwunw_load_for on them and forget one pid's maps now and then, with fewer cache slots
 *     than modules (4 for 5), so slots are evicted and reloaded under the captures. Every NOWAIT
 *     result is the oracle's stack (pcs and modules), or WOULDBLOCK with a prefix of it; never
 *     anything else. Two loaders resolve the same mappings at once. The environment raises the
 *     pressure (test/tsan.test.ts's stress run): DWUNW_NOWAIT_SLOTS, _CAPTURERS, _LOADERS, _ROUNDS,
 *     _FORGET_EVERY (a forget every that many rounds per loader) and _CHURN (modules of other
 *     files opened after each load: evictions).
 *  3. Inside NOWAIT captures, no call the library makes to open, read, pread, stat, fstat,
 *     access, realpath, pthread_mutex_lock, nanosleep, waitpid or ptrace (the test is linked
 *     with -Wl,--wrap for each: see the Makefile), counted per thread.
 *
 * Built with clang -fsanitize=thread (make tsan: build/tsan/test/test_nowait), it is the race
 * detector's workload for the NOWAIT paths (test/tsan.test.ts).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tap.h"
#include "dwunw.h"

#define MAXF 64
#define WINDOW (32 * 1024)
#define NTARGETS 4
#define MAX_CAPTURERS 16

/* ---- the calls a NOWAIT capture must not make ---------------------------------------------- */

static __thread int in_nowait;
static _Atomic unsigned violations;
static char first_violation[64];

static void forbidden(const char *what)
{
	if (!in_nowait)
		return;
	if (atomic_fetch_add(&violations, 1) == 0)
		snprintf(first_violation, sizeof(first_violation), "%s", what);
}

int __real_open(const char *path, int flags, ...);
ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
int __real_stat(const char *path, struct stat *st);
int __real_fstat(int fd, struct stat *st);
int __real_access(const char *path, int mode);
char *__real_realpath(const char *path, char *out);
int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_nanosleep(const struct timespec *req, struct timespec *rem);
pid_t __real_waitpid(pid_t pid, int *status, int options);
long __real_ptrace(int req, ...);

int __wrap_open(const char *path, int flags, ...)
{
	va_list ap;
	int mode;

	va_start(ap, flags);
	mode = va_arg(ap, int);
	va_end(ap);
	forbidden("open");
	return __real_open(path, flags, mode);
}
ssize_t __wrap_read(int fd, void *buf, size_t n) { forbidden("read"); return __real_read(fd, buf, n); }
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off) { forbidden("pread"); return __real_pread(fd, buf, n, off); }
int __wrap_stat(const char *path, struct stat *st) { forbidden("stat"); return __real_stat(path, st); }
int __wrap_fstat(int fd, struct stat *st) { forbidden("fstat"); return __real_fstat(fd, st); }
int __wrap_access(const char *path, int mode) { forbidden("access"); return __real_access(path, mode); }
char *__wrap_realpath(const char *path, char *out) { forbidden("realpath"); return __real_realpath(path, out); }
int __wrap_pthread_mutex_lock(pthread_mutex_t *m) { forbidden("pthread_mutex_lock"); return __real_pthread_mutex_lock(m); }
int __wrap_nanosleep(const struct timespec *req, struct timespec *rem) { forbidden("nanosleep"); return __real_nanosleep(req, rem); }
pid_t __wrap_waitpid(pid_t pid, int *status, int options) { forbidden("waitpid"); return __real_waitpid(pid, status, options); }
long __wrap_ptrace(int req, ...)
{
	va_list ap;
	pid_t pid;
	void *addr, *data;

	va_start(ap, req);
	pid = va_arg(ap, pid_t);
	addr = va_arg(ap, void *);
	data = va_arg(ap, void *);
	va_end(ap);
	forbidden("ptrace");
	return __real_ptrace(req, pid, addr, data);
}

/* ---- targets and their snapshots ------------------------------------------------------------ */

struct target {
	const char *argv[4];
	int stdin_pipe;          /* blocked reading a pipe nobody writes */
	pid_t pid;
	int in_fd;
	struct dwunw_regs regs;
	uint8_t *stack;
	size_t nf;               /* the oracle: a blocking capture */
	int err;
	uint64_t pc[MAXF];
	char *mod[MAXF];         /* the oracle's module path per frame (NULL: none) */
};

static struct target targets[NTARGETS] = {
	{ .argv = { "/bin/sleep", "1000", NULL } },
	{ .argv = { "/bin/cat", NULL }, .stdin_pipe = 1 },
	{ .argv = { "/usr/bin/tail", "-f", "/dev/null", NULL } },
	{ .argv = { "/usr/bin/sort", NULL }, .stdin_pipe = 1 },
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	__real_nanosleep(&ts, NULL);
}

/* Sleeping (state S) in the program itself, not in the fork child before exec. */
static int settled(struct target *t)
{
	char path[64], exe[PATH_MAX], stat[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", t->pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	if (!strstr(exe, strrchr(t->argv[0], '/')))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", t->pid);
	fd = __real_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	n = __real_read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	stat[n] = 0;
	return strstr(stat, ") S ") != NULL;
}

static int start(struct target *t)
{
	int p[2] = { -1, -1 };

	if (t->stdin_pipe && pipe(p))
		return -1;
	t->pid = fork();
	if (t->pid == 0) {
		if (p[0] >= 0) {
			dup2(p[0], 0);
			close(p[1]);
		}
		execv(t->argv[0], (char **)t->argv);
		_exit(127);
	}
	if (p[0] >= 0)
		close(p[0]);
	t->in_fd = p[1];
	for (int i = 0; i < 500 && !settled(t); i++)
		sleep_ms(10);
	sleep_ms(50); /* well inside its blocking call */
	return settled(t) ? 0 : -1;
}

static int snapshot(struct target *t)
{
	struct dwunw_stack_reader r;
	int err;

	t->stack = malloc(WINDOW);
	if (!t->stack || dwunw_stack_reader_init(&r, t->pid, NULL) || dwunw_stack_reader_attach(&r, t->pid))
		return -1;
	err = dwunw_stack_reader_regs(&r, &t->regs);
	if (!err) {
		uint64_t sp = t->regs.regs[dwunw_arch_get(t->regs.arch)->sp_reg];
		size_t got = 0;
		/* page by page up to the end of the stack's mapping */
		while (got < WINDOW) {
			size_t chunk = 4096 - (size_t)((sp + got) % 4096);
			if (dwunw_stack_reader_read(&r, sp + got, t->stack + got, chunk))
				break;
			got += chunk;
		}
		t->regs.stack_start = sp;
		t->regs.stack = t->stack;
		t->regs.stack_size = got;
	}
	dwunw_stack_reader_detach(&r);
	return err;
}

static void oracle(struct target *t)
{
	struct dwunw_config cfg = { .size = sizeof(cfg) };
	struct dwunw_frame f[MAXF];
	struct dwunw_ctx ctx;

	t->nf = MAXF;
	if (dwunw_init(&ctx, &cfg)) {
		t->nf = 0;
		t->err = DWUNW_ERR_NOMEM;
		return;
	}
	t->err = dwunw_capture(&ctx, &t->regs, f, &t->nf);
	for (size_t i = 0; i < t->nf; i++) {
		t->pc[i] = f[i].pc;
		t->mod[i] = f[i].module ? strdup(dwunw_module_path(f[i].module)) : NULL;
	}
	dwunw_module_cache_release(&ctx, f, t->nf);
	dwunw_shutdown(&ctx);
}

/* ---- one NOWAIT capture, checked against the oracle ----------------------------------------- */

enum { R_COMPLETE, R_WOULDBLOCK, R_WRONG };

/* A frame's module path, "-" for none. */
static const char *mod_name(const char *path)
{
	return path ? path : "-";
}

static int nowait_capture(struct dwunw_ctx *ctx, struct target *t, char *why, size_t whylen)
{
	struct dwunw_regs regs = t->regs;
	struct dwunw_frame f[MAXF];
	size_t n = MAXF;
	int err, res;

	regs.flags |= DWUNW_REGS_NOWAIT;
	in_nowait = 1;
	err = dwunw_capture(ctx, &regs, f, &n);
	in_nowait = 0;
	res = err == DWUNW_ERR_WOULDBLOCK ? R_WOULDBLOCK : R_COMPLETE;
	if (err != DWUNW_ERR_WOULDBLOCK && (err != t->err || n != t->nf)) {
		snprintf(why, whylen, "%s: %s after %zu frames (the last in %s), the oracle %s after %zu",
			 t->argv[0], dwunw_errname(err), n, n ? mod_name(dwunw_module_path(f[n - 1].module)) : "-",
			 dwunw_errname(t->err), t->nf);
		res = R_WRONG;
	}
	for (size_t i = 0; res != R_WRONG && i < n; i++) {
		/* the module too: a frame credited to another file is wrong even at the right pc (the
		 * last frame of a WOULDBLOCK may have none: the module it waits for) */
		const char *mp = f[i].module ? dwunw_module_path(f[i].module) : NULL;
		int unloaded = !mp && err == DWUNW_ERR_WOULDBLOCK && i == n - 1;
		if (i >= t->nf || f[i].pc != t->pc[i] ||
		    (!unloaded && ((!mp != !t->mod[i]) || (mp && strcmp(mp, t->mod[i]))))) {
			snprintf(why, whylen, "%s: frame %zu pc %#llx in %s, the oracle's %#llx in %s (%s)", t->argv[0], i,
				 (unsigned long long)f[i].pc, mod_name(mp), (unsigned long long)(i < t->nf ? t->pc[i] : 0),
				 mod_name(i < t->nf ? t->mod[i] : NULL), dwunw_errname(err));
			res = R_WRONG;
		}
	}
	dwunw_module_cache_release(ctx, f, n);
	return res;
}

/* ---- phase 2: captures beside a loader ------------------------------------------------------ */

static struct dwunw_ctx shared;
static _Atomic int loader_done;  /* loaders finished */
static unsigned ncapturers = 4, nloaders = 2, load_rounds = 40, forget_every = 3, churn;
/* Files no target maps: a loader opens `churn` of them after each load, evicting the targets'
 * modules so that the next loads resolve their mappings again (coreutils, on every system). */
static const char *const churn_files[] = { "/bin/true", "/bin/ls", "/usr/bin/env", "/usr/bin/id" };
static _Atomic unsigned counts[3];
static _Atomic unsigned loads, load_errors, load_full, forgets;
static char wrong_why[256];
static _Atomic int wrong_once;

static void *capturer(void *arg)
{
	unsigned iters = (unsigned)(uintptr_t)arg;
	char why[256];

	/* at least `iters` captures, and on until the loader is done */
	for (unsigned i = 0; i < iters || atomic_load(&loader_done) < (int)nloaders; i++) {
		struct target *t = &targets[i % NTARGETS];
		int r = nowait_capture(&shared, t, why, sizeof(why));

		atomic_fetch_add(&counts[r], 1);
		if (r == R_WRONG && atomic_exchange(&wrong_once, 1) == 0)
			memcpy(wrong_why, why, sizeof(why));
	}
	return NULL;
}

static void *loader(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;

	for (unsigned round = 0; round < load_rounds; round++) {
		for (unsigned j = 0; j < NTARGETS; j++) {
			/* each loader in its own order: they meet on the same mappings */
			unsigned k = (j + id) % NTARGETS;
			int err = dwunw_load_for(&shared, &targets[k].regs);
			/* every slot active (held by the captures): documented, tried again next round */
			if (err == DWUNW_ERR_CACHE_FULL)
				atomic_fetch_add(&load_full, 1);
			else if (err)
				atomic_fetch_add(&load_errors, 1);
			atomic_fetch_add(&loads, 1);
			for (unsigned c = 0; c < churn; c++) {
				struct dwunw_module *mod;
				err = dwunw_module_open(&shared, churn_files[(round + j + c) % 4], &mod);
				if (!err)
					dwunw_module_put(&shared, mod);
				else if (err != DWUNW_ERR_CACHE_FULL)
					atomic_fetch_add(&load_errors, 1);
			}
		}
		if (round % forget_every == forget_every - 1) {
			dwunw_maps_forget(&shared, targets[(round + id) % NTARGETS].pid);
			atomic_fetch_add(&forgets, 1);
		}
	}
	atomic_fetch_add(&loader_done, 1);
	return NULL;
}

/* A knob from the environment, else its default. */
static unsigned knob(const char *name, unsigned def)
{
	const char *s = getenv(name);
	return s && atoi(s) > 0 ? (unsigned)atoi(s) : def;
}

#define MAX_LOADERS 8

int main(void)
{
	unsigned iters = knob("DWUNW_NOWAIT_ITERS", 2000);
	/* DWUNW_NOWAIT_BYTES: the cache's byte bound (0: the default), so that loads free warm
	 * modules by bytes too while captures take them without a lock */
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = knob("DWUNW_NOWAIT_SLOTS", 4),
				    .cache_bytes = knob("DWUNW_NOWAIT_BYTES", 0) };
	pthread_t th[MAX_CAPTURERS + MAX_LOADERS];
	char why[256];
	int ready = 1;

	ncapturers = knob("DWUNW_NOWAIT_CAPTURERS", ncapturers);
	ncapturers = ncapturers > MAX_CAPTURERS ? MAX_CAPTURERS : ncapturers;
	nloaders = knob("DWUNW_NOWAIT_LOADERS", nloaders);
	nloaders = nloaders > MAX_LOADERS ? MAX_LOADERS : nloaders;
	load_rounds = knob("DWUNW_NOWAIT_ROUNDS", load_rounds);
	forget_every = knob("DWUNW_NOWAIT_FORGET_EVERY", forget_every);
	churn = knob("DWUNW_NOWAIT_CHURN", 0);
	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (ptrace of the children)\n");
		return 0;
	}
	for (unsigned k = 0; k < NTARGETS; k++) {
		struct target *t = &targets[k];
		int ok_ = start(t) == 0 && snapshot(t) == 0;

		ok(ok_, "%s: running, blocked in a system call, snapshot taken", t->argv[0]);
		if (!ok_) {
			ready = 0;
			continue;
		}
		oracle(t);
		is_int(t->err, DWUNW_OK, "%s: the blocking capture is complete (%zu frames)", t->argv[0], t->nf);
	}
	if (!ready)
		goto out;

	/* 1. one thread (4 slots: the walk's modules fit) */
	{
		struct dwunw_config cfg1 = { .size = sizeof(cfg1), .cache_slots = 4 };
		struct dwunw_ctx ctx;
		struct dwunw_regs regs = targets[0].regs;
		struct dwunw_frame f[MAXF];
		size_t n = MAXF;
		int err;

		dwunw_init(&ctx, &cfg1);
		regs.flags |= DWUNW_REGS_NOWAIT;
		in_nowait = 1;
		err = dwunw_capture(&ctx, &regs, f, &n);
		in_nowait = 0;
		is_int(err, DWUNW_ERR_WOULDBLOCK, "fresh context: NOWAIT says WOULDBLOCK (maps not cached)");
		is_int(n, 0, "... before frame 0");
		dwunw_module_cache_release(&ctx, f, n);
		is_int(dwunw_load_for(&ctx, &targets[0].regs), DWUNW_OK, "dwunw_load_for loads what it needs");
		is_int(nowait_capture(&ctx, &targets[0], why, sizeof(why)), R_COMPLETE,
		       "then NOWAIT gives the oracle's stack");
		/* maps cached, modules not: load one pid, capture another of the same context */
		dwunw_maps_forget(&ctx, targets[1].pid);
		dwunw_shutdown(&ctx);
		dwunw_init(&ctx, &cfg1);
		dwunw_load_for(&ctx, &targets[0].regs);
		{
			struct dwunw_regs r1 = targets[1].regs;
			n = MAXF;
			r1.flags |= DWUNW_REGS_NOWAIT;
			in_nowait = 1;
			err = dwunw_capture(&ctx, &r1, f, &n);
			in_nowait = 0;
			is_int(err, DWUNW_ERR_WOULDBLOCK, "another pid, its maps not read yet: WOULDBLOCK");
			dwunw_module_cache_release(&ctx, f, n);
		}
		dwunw_shutdown(&ctx);
		is_int(atomic_load(&violations), 0, "no I/O nor lock wait inside NOWAIT so far%s%s",
		       first_violation[0] ? ": first " : "", first_violation);
	}

	/* 2. threads */
	dwunw_init(&shared, &cfg);
	for (unsigned i = 0; i < ncapturers; i++)
		pthread_create(&th[i], NULL, capturer, (void *)(uintptr_t)iters);
	for (unsigned i = 0; i < nloaders; i++)
		pthread_create(&th[ncapturers + i], NULL, loader, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < ncapturers + nloaders; i++)
		pthread_join(th[i], NULL);
	printf("# %u NOWAIT captures: %u complete, %u WOULDBLOCK, %u wrong; %u loads (%u CACHE_FULL, %u failed), %u forgets; %u slots, %u loaders\n",
	       counts[R_COMPLETE] + counts[R_WOULDBLOCK] + counts[R_WRONG], counts[R_COMPLETE], counts[R_WOULDBLOCK], counts[R_WRONG], loads, load_full,
	       load_errors, forgets, cfg.cache_slots, nloaders);
	ok(counts[R_COMPLETE] + counts[R_WOULDBLOCK] + counts[R_WRONG] >= ncapturers * iters,
	   "every capture accounted for");
	ok(counts[R_WRONG] == 0, "every NOWAIT capture is the oracle's stack or a WOULDBLOCK prefix of it%s%s",
	   wrong_why[0] ? ": " : "", wrong_why);
	is_int(load_errors, 0, "dwunw_load_for failed only with CACHE_FULL");
	is_int(atomic_load(&violations), 0, "no I/O nor lock wait inside NOWAIT captures%s%s",
	       first_violation[0] ? ": first " : "", first_violation);
	{
		struct dwunw_cache_stats st;
		dwunw_cache_stats(&shared, &st);
		printf("# cache: %llu misses, %llu evictions (%llu for bytes, bound %llu)\n", (unsigned long long)st.misses,
		       (unsigned long long)st.evictions, (unsigned long long)st.bytes_evictions,
		       (unsigned long long)st.bytes_bound);
	}
	/* after the threads: each one loaded, then captured at once, is complete */
	for (unsigned k = 0; k < NTARGETS; k++) {
		dwunw_load_for(&shared, &targets[k].regs);
		is_int(nowait_capture(&shared, &targets[k], why, sizeof(why)), R_COMPLETE,
		       "%s: loaded, then NOWAIT is complete", targets[k].argv[0]);
	}
	dwunw_shutdown(&shared);
out:
	for (unsigned k = 0; k < NTARGETS; k++)
		if (targets[k].pid > 0) {
			kill(targets[k].pid, SIGKILL);
			__real_waitpid(targets[k].pid, NULL, 0);
			free(targets[k].stack);
			for (size_t i = 0; i < targets[k].nf; i++)
				free(targets[k].mod[i]);
		}
	return done_testing();
}
