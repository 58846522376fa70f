/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The option and error layer of the C tools (memleak, profile): one line per error naming the
 * cause, one exit status per kind of cause (the table in README.md), usage errors ending with
 * "(see dwunw TOOL --help)", and options shared by the tools (--max-frames).
 */
#ifndef DWUNW_TOOL_OPTS_H
#define DWUNW_TOOL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses (README.md, "Exit status"); also those of the dwunw front end. */
enum tool_exit {
	TOOL_EXIT_OK = 0,
	TOOL_EXIT_ERROR = 1,      /* runtime error: I/O, BPF load, out of memory */
	TOOL_EXIT_USAGE = 2,      /* bad option or argument */
	TOOL_EXIT_NO_PROCESS = 3, /* no such process, or it exited / is a zombie */
	TOOL_EXIT_KTHREAD = 4,    /* a kernel thread: no user stack */
	TOOL_EXIT_TRACED = 5,     /* already traced by another process */
	TOOL_EXIT_PTRACE_SCOPE = 6, /* ptrace refused by Yama ptrace_scope */
	TOOL_EXIT_PRIVILEGE = 7,  /* missing privileges (root, CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE) */
	TOOL_EXIT_TRUNCATED = 8,  /* input cut short (a truncated core) */
	TOOL_EXIT_NOEXEC = 126,   /* the command cannot be executed */
	TOOL_EXIT_NOTFOUND = 127, /* the command was not found */
};

/* Messages start with tool_util.h's tool_name() ("memleak", "profile"), set by main() first. */

/* "TOOL: message" on stderr, exit with `status`. */
void tool_fail(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* "TOOL: message (see dwunw TOOL --help)" on stderr, exit TOOL_EXIT_USAGE. */
void tool_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/*
 * The option getopt_long just refused (it returned c: '?' unknown, ':' missing value; the
 * optstring starts with ':' and opterr is 0): one line, exit TOOL_EXIT_USAGE.
 */
void tool_bad_option(int c, int argc, char **argv) __attribute__((noreturn));

/* An unsigned number (0x.., k/K, m/M, g/G suffixes) in [lo, hi], else a usage error naming opt. */
uint64_t tool_opt_u64(const char *s, const char *opt, uint64_t lo, uint64_t hi);

/*
 * "1,2,3" (opt's value: process or thread ids, what = "pid" / "tid") appended to out[n..max):
 * the new count. 0 or above INT_MAX: "WHAT N: no such process/thread", exit 3; more than max:
 * a usage error.
 */
size_t tool_opt_id_list(const char *s, uint32_t *out, size_t n, size_t max, const char *what,
			const char *opt);

/*
 * --cache-bytes=SIZE (profile, offcputime, memleak): the bytes libdwunw's module cache may hold
 * (config cache_bytes; past it the warm modules used least recently are freed). SIZE: N, Nk,
 * Nm or Ng, 1m .. 1024g. Not given: libdwunw's default (DWUNW_CACHE_BYTES_DEFAULT).
 */
uint64_t tool_opt_cache_bytes(const char *s);

/* --max-frames: the same name and limits as dwunw unwind-pid's. */
#define TOOL_MAX_FRAMES_DEFAULT 128
#define TOOL_MAX_FRAMES_LIMIT 65536

/*
 * --unwind=auto (the default of memleak, profile, offcputime): true when the in-kernel walker can
 * run here (a build with it, kernel BTF, bpf_loop: Linux 5.17 or later) and `conflict` is NULL;
 * else false, after one line on stderr saying why auto unwinds in user space (dwarf mode)
 * instead. `conflict`: why the tool wants dwarf mode here whatever the kernel (one phrase), or NULL.
 */
bool tool_unwind_auto(const char *conflict);

/* Why the privileges do not suffice, or NULL: root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN),
 * plus CAP_SYS_PTRACE when `ptrace`. */
const char *tool_missing_privileges(bool ptrace);

/*
 * Why pid cannot be traced, or NULL when it can: no such process, a kernel thread, a zombie.
 * *status gets the exit status to use.
 */
const char *tool_pid_problem(int pid, int *status);

#endif /* DWUNW_TOOL_OPTS_H */
