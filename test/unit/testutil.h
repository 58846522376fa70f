/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the C tests share (the unit tests of test/unit, bench/, fuzz/): one copy each of
 *  - the chain attributes (CHAIN, BARRIER) and the frame shapes (PLAIN, ARRAY, ALLOCA, SAVED);
 *  - CAPTURE_REGS: this function's x86_64 registers at one instruction, and capture_to_regs;
 *  - CALLBACKS_CHAIN: the "callbacks" chain (~30 frames through glibc's qsort, bsearch and
 *    dl_iterate_phdr callbacks), the bench's reference stack and the unit tests' self snapshot;
 *  - sleep_ms, read_text, linked_lib, copy_file_mode, mapping_end_of, self_stack_copy (a self snapshot's
 *    stack), self_snapshot (registers and stack, taken in itself), and the SIGALRM timeout (on_timeout, with a cleanup hook).
 * Header-only (static inline): each includer compiles what it uses. bench/ and fuzz/ include it
 * by its path from the repository root.
 */
#ifndef DWUNW_TESTUTIL_H
#define DWUNW_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <unistd.h>
#include "dwunw.h"

/* ---- chains ----------------------------------------------------------------------------- */

/* Functions of the chains: never inlined, cloned or turned into tail calls. */
#if defined(__clang__)
#define CHAIN __attribute__((noinline, used))
#else
#define CHAIN __attribute__((noinline, noipa, used))
#endif
#define BARRIER() __asm__ volatile("" ::: "memory")

static volatile int chain_sink __attribute__((unused));

/* Frame shapes: no locals; a fixed array; alloca (the CFA moves to rbp); values live across the
 * call in every callee-saved register (rbp among them: an alloca frame above needs it restored). */
#define PLAIN(name, next) \
	CHAIN static int name(int x) { int r = next(x + 1); BARRIER(); return r + 1; }
#define ARRAY(name, next) \
	CHAIN static int name(int x) { volatile int a[20]; a[x % 20] = x; int r = next(x + 1); return r + a[x % 20]; }
#define ALLOCA(name, next) \
	CHAIN static int name(int x) { volatile char *p = __builtin_alloca((size_t)(x & 15) + 32); p[0] = (char)x; \
		int r = next(x + 1); return r + p[0]; }
#define SAVED(name, next) \
	CHAIN static int name(int x) { int a = chain_sink + x, b = chain_sink * x, c = chain_sink ^ x, d = chain_sink - x, \
		e = chain_sink | x, f = chain_sink & x; int r = next(x + 1); return r + a + b + c + d + e + f; }

/* ---- registers ---------------------------------------------------------------------------- */

#define CAPTURE_RBX 3
#define CAPTURE_RBP 6
#define CAPTURE_RSP 7

/* r[0..7] = rip (here), rsp, rbp, rbx, r12..r15 of the function this expands in (x86_64 only). */
#define CAPTURE_REGS(r)                                   \
	__asm__ volatile("lea 0(%%rip), %%rax\n\t"        \
			 "mov %%rax, 0(%0)\n\t"           \
			 "mov %%rsp, 8(%0)\n\t"           \
			 "mov %%rbp, 16(%0)\n\t"          \
			 "mov %%rbx, 24(%0)\n\t"          \
			 "mov %%r12, 32(%0)\n\t"          \
			 "mov %%r13, 40(%0)\n\t"          \
			 "mov %%r14, 48(%0)\n\t"          \
			 "mov %%r15, 56(%0)\n\t"          \
			 : : "r"(r) : "rax", "memory")

/* An x86_64 register set from a CAPTURE_REGS array (pid, tid and the stack left to the caller). */
static inline void capture_to_regs(struct dwunw_regs *regs, const uint64_t r[8])
{
	memset(regs, 0, sizeof(*regs));
	regs->arch = DWUNW_ARCH_X86_64;
	regs->pc = r[0];
	regs->regs[CAPTURE_RSP] = r[1];
	regs->regs[CAPTURE_RBP] = r[2];
	regs->regs[CAPTURE_RBX] = r[3];
	for (unsigned i = 0; i < 4; i++)
		regs->regs[12 + i] = r[4 + i];
	regs->valid = (1ull << CAPTURE_RBX) | (1ull << CAPTURE_RBP) | (1ull << CAPTURE_RSP) | (0xfull << 12);
}

/* ---- the callbacks chain -------------------------------------------------------------------- */

/*
 * CALLBACKS_CHAIN(bottom) defines callbacks_chain(): c1 .. c6 -> qsort -> cmp_q -> d1 .. d4 ->
 * bsearch -> cmp_b -> e1 .. e3 -> dl_iterate_phdr -> on_phdr -> f1, f2 -> bottom(int), the
 * includer's (CHAIN) function at the deepest frame. Each callback goes down once per call of
 * callbacks_chain(). The oracles know these names (test_unwind.c, bench.test.ts).
 */
#define CALLBACKS_CHAIN(bottom)                                                                          \
	static int chain_once_q, chain_once_b, chain_once_p;                                             \
	PLAIN(f2, bottom)                                                                                \
	SAVED(f1, f2)                                                                                    \
	CHAIN static int on_phdr(struct dl_phdr_info *info, size_t size, void *arg)                      \
	{                                                                                                \
		(void)info;                                                                              \
		(void)size;                                                                              \
		(void)arg;                                                                               \
		if (!chain_once_p++)                                                                     \
			f1(5);                                                                           \
		return 1;                                                                                \
	}                                                                                                \
	CHAIN static int walk_phdrs(int x)                                                               \
	{                                                                                                \
		int r = dl_iterate_phdr(on_phdr, NULL);                                                  \
		BARRIER();                                                                               \
		return r + x;                                                                            \
	}                                                                                                \
	ALLOCA(e3, walk_phdrs)                                                                           \
	SAVED(e2, e3)                                                                                    \
	ARRAY(e1, e2)                                                                                    \
	CHAIN static int cmp_b(const void *a, const void *b)                                             \
	{                                                                                                \
		if (!chain_once_b++)                                                                     \
			e1(4);                                                                           \
		return *(const int *)a - *(const int *)b;                                                \
	}                                                                                                \
	/* Called through a pointer: <stdlib.h> may inline bsearch. */                                   \
	static void *(*volatile bsearch_p)(const void *, const void *, size_t, size_t,                   \
					  int (*)(const void *, const void *)) = bsearch;                \
	CHAIN static int search_it(int x)                                                                \
	{                                                                                                \
		static const int arr[1] = { 3 };                                                         \
		int key = 3;                                                                             \
		void *r = bsearch_p(&key, arr, 1, sizeof(int), cmp_b);                                   \
		BARRIER();                                                                               \
		return (r != NULL) + x;                                                                  \
	}                                                                                                \
	SAVED(d4, search_it)                                                                             \
	PLAIN(d3, d4)                                                                                    \
	ALLOCA(d2, d3)                                                                                   \
	PLAIN(d1, d2)                                                                                    \
	CHAIN static int cmp_q(const void *a, const void *b)                                             \
	{                                                                                                \
		if (!chain_once_q++)                                                                     \
			d1(3);                                                                           \
		return *(const int *)a - *(const int *)b;                                                \
	}                                                                                                \
	CHAIN static int sort_it(int x)                                                                  \
	{                                                                                                \
		int arr[2] = { 2, 1 };                                                                   \
		qsort(arr, 2, sizeof(int), cmp_q);                                                       \
		BARRIER();                                                                               \
		return arr[0] + x;                                                                       \
	}                                                                                                \
	PLAIN(c6, sort_it)                                                                               \
	SAVED(c5, c6)                                                                                    \
	ALLOCA(c4, c5)                                                                                   \
	ARRAY(c3, c4)                                                                                    \
	SAVED(c2, c3)                                                                                    \
	ALLOCA(c1, c2)                                                                                   \
	static inline int callbacks_chain(void)                                                          \
	{                                                                                                \
		chain_once_q = chain_once_b = chain_once_p = 0;                                          \
		return c1(0);                                                                            \
	}

/* ---- time, files, timeouts ------------------------------------------------------------------ */

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A whole file (NUL-terminated; *len without the NUL), or NULL. */
static inline char *read_text(const char *path, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0 || !buf) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	for (;;) {
		if (n + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*len = n;
	return buf;
}

static inline int linked_lib_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char **want = arg; /* want[0]: name fragment, want[1]: result */
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, want[0])) {
		want[1] = info->dlpi_name;
		return 1;
	}
	return 0;
}

/* The path (symlinks resolved when it can) of a library this process maps whose name contains
 * frag (libz and liblzma are linked through LDLIBS). 0, or -1 when none. */
static inline int linked_lib(const char *frag, char *out, size_t outlen)
{
	const char *want[2] = { frag, NULL };

	dl_iterate_phdr(linked_lib_cb, want);
	if (!want[1] || !want[1][0])
		return -1;
	if (outlen >= PATH_MAX && realpath(want[1], out))
		return 0;
	snprintf(out, outlen, "%s", want[1]);
	return 0;
}

/* Copy src to a new file dst (mode), or rewrite dst's existing inode in place (O_TRUNC: as `cp`
 * does). 0, or -1. */
static inline int copy_file_mode(const char *src, const char *dst, mode_t mode)
{
	static char buf[1 << 16];
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	ssize_t n = 0;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	close(in);
	return close(out) || n < 0 ? -1 : 0;
}

/* End of the mapping of pid that contains addr (0 if none). */
static inline uint64_t mapping_end_of(pid_t pid, uint64_t addr)
{
	char path[64], line[1024];
	uint64_t end = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi) {
			end = hi;
			break;
		}
	}
	fclose(f);
	return end;
}

/*
 * A self snapshot's stack: from regs' sp (CAPTURE_REGS of the caller's frame) to the end of its
 * mapping, copied into *buf (malloc'd) and set in regs. The live stack holds ASan's redzones:
 * copied byte by byte, uninstrumented. 0, or -1.
 */
__attribute__((noinline, no_sanitize_address, unused)) static int self_stack_copy(struct dwunw_regs *regs,
										  uint8_t **buf)
{
	uint64_t sp = regs->regs[CAPTURE_RSP], end = mapping_end_of(getpid(), sp);
	const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)sp;

	if (!end || !(*buf = malloc(end - sp)))
		return -1;
	for (uint64_t i = 0; i < end - sp; i++)
		(*buf)[i] = src[i];
	regs->stack = *buf;
	regs->stack_start = sp;
	regs->stack_size = end - sp;
	return 0;
}

/* A self snapshot: registers and the stack copy (malloc'd), as a capture takes them. */
struct self_snap {
	struct dwunw_regs regs;
	uint8_t *stack;
};

/* Registers of this function at one instruction and the stack from its sp to the mapping's end:
 * a capture of s->regs unwinds from here through the callers. 0, or -1. (test_unwind and
 * test_stress take theirs in a chain function of their own, beside their backtrace() oracle.) */
__attribute__((noinline, no_sanitize_address, unused)) static int self_snapshot(struct self_snap *s)
{
	static uint64_t r[8];

	CAPTURE_REGS(r);
	capture_to_regs(&s->regs, r);
	s->regs.pid = getpid();
	s->regs.tid = s->regs.pid;
	return self_stack_copy(&s->regs, &s->stack);
}

/* Run at a timeout before the process ends (async-signal-safe: kill children, remove files). */
static void (*timeout_cleanup)(void) __attribute__((unused));

/* The context's cache figures, all bits set when the call fails (so a check on them fails too). */
static inline struct dwunw_cache_stats cache_stats_of(struct dwunw_ctx *ctx)
{
	struct dwunw_cache_stats s;

	memset(&s, 0xff, sizeof(s));
	if (dwunw_cache_stats(ctx, &s))
		memset(&s, 0xff, sizeof(s));
	return s;
}

/* Remove a test's scratch directory (and forget it): for atexit and arm_timeout's cleanup. */
static inline void remove_dir(char *dir)
{
	char cmd[PATH_MAX + 16];

	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		dir[0] = 0;
	}
}

/* SIGALRM: "Bail out!" (TAP), the cleanup, exit 2. */
static inline void on_timeout(int sig)
{
	static const char msg[] = "Bail out! timed out\n";
	(void)sig;
	if (timeout_cleanup)
		timeout_cleanup();
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(2);
}

/* on_timeout after `seconds`, with `cleanup` (or NULL) run first. */
static inline void arm_timeout(unsigned seconds, void (*cleanup)(void))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_timeout;
	sigaction(SIGALRM, &sa, NULL);
	timeout_cleanup = cleanup;
	alarm(seconds);
}

#endif
