/* SPDX-License-Identifier: GPL-2.0-only */
/* A minimal TAP producer for the C unit tests; tap runs each binary with t.spawn. */
#ifndef DWUNW_TEST_TAP_H
#define DWUNW_TEST_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count, tap_failed;

static inline int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	tap_count++;
	printf("%s %d - ", pass ? "ok" : "not ok", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("  ---\n  at: %s:%d\n  ...\n", file, line);
	}
	fflush(stdout);
	return pass;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...) do { \
	long long g_ = (long long)(got), w_ = (long long)(want); \
	if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__)) \
		printf("  # got %lld, want %lld\n", g_, w_); \
} while (0)

#define is_hex(got, want, ...) do { \
	unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want); \
	if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__)) \
		printf("  # got 0x%llx, want 0x%llx\n", g_, w_); \
} while (0)

#define is_str(got, want, ...) do { \
	const char *g_ = (got), *w_ = (want); \
	if (!tap_ok(g_ && w_ && strcmp(g_, w_) == 0, __FILE__, __LINE__, __VA_ARGS__)) \
		printf("  # got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
} while (0)

/*
 * A check that cannot run here: "ok N - # SKIP why", or under DWUNW_REQUIRE_BPF=1 (CI, as
 * test/helpers.ts's requireOrSkip) a failure: no reason a test gives holds on a CI machine.
 */
static inline void tap_skip(const char *file, int line, const char *fmt, ...)
{
	const char *req = getenv("DWUNW_REQUIRE_BPF");
	int required = req && strcmp(req, "1") == 0;
	va_list ap;

	tap_count++;
	printf(required ? "not ok %d - DWUNW_REQUIRE_BPF=1 but skipped: " : "ok %d - # SKIP ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (required) {
		tap_failed++;
		printf("  ---\n  at: %s:%d\n  ...\n", file, line);
	}
	fflush(stdout);
}

#define SKIP(...) tap_skip(__FILE__, __LINE__, __VA_ARGS__)

static inline int done_testing(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
