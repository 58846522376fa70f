/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Small helpers shared by the tools (memleak, profile): fatal errors naming the tool, allocation
 * that cannot fail, a monotonic clock, hashing, number parsing, privilege check, libbpf logging.
 */
#ifndef DWUNW_TOOL_UTIL_H
#define DWUNW_TOOL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <bpf/libbpf.h>

/* Prefix of every message ("memleak", "profile"): set by main() first ("dwunw" before). */
void tool_set_name(const char *name);
const char *tool_name(void);
/* -v: libbpf info/debug lines and unwinder warnings. */
void tool_set_verbose(bool on);
bool tool_verbose(void);

/* "TOOL: message" on stderr, exit status 1. */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t sz);

uint64_t mono_ns(void);

uint64_t hash64(uint64_t h, uint64_t v);
uint64_t hash_str(const char *s);

/* Unsigned number (0x.., k/K and m/M suffixes); dies naming `what` when malformed. */
uint64_t parse_u64(const char *s, const char *what);

/* The last path component (NULL stays NULL). */
const char *base_name(const char *p);

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN), plus CAP_SYS_PTRACE when `ptrace`. */
bool have_privileges(bool ptrace);

/* libbpf print callback: warnings always, info and debug with tool_verbose(). */
int tool_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args);

/* The selection lists (select.bpf.h): pids into `tgids`, tids into `tids`; dies when one fails. */
void tool_select_set(struct bpf_object *obj, const uint32_t *pids, size_t npids,
		     const uint32_t *tids, size_t ntids);

#endif /* DWUNW_TOOL_UTIL_H */
