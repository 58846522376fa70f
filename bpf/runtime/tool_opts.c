// SPDX-License-Identifier: GPL-2.0-only
/* The option and error layer of the C tools: see tool_opts.h. */
#include <errno.h>
#include <getopt.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "tool_opts.h"
#include "tool_util.h"

static void vline(const char *fmt, va_list ap, const char *tail)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* one line, whatever the message holds */
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(stderr, "%s: %s%s\n", tool_name(), buf, tail ? tail : "");
}

void tool_fail(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(fmt, ap, NULL);
	va_end(ap);
	exit(status);
}

void tool_usage_error(const char *fmt, ...)
{
	char tail[96];
	va_list ap;

	snprintf(tail, sizeof(tail), " (see dwunw %s --help)", tool_name());
	va_start(ap, fmt);
	vline(fmt, ap, tail);
	va_end(ap);
	exit(TOOL_EXIT_USAGE);
}

void tool_bad_option(int c, int argc, char **argv)
{
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
	int len = (int)strcspn(arg, "=");

	/* opterr is 0 in the tools: getopt has printed nothing */
	if (c == ':') {
		if (arg[0] == '-' && arg[1] == '-')
			tool_usage_error("option %.*s needs a value", len, arg);
		tool_usage_error("option -%c needs a value", optopt);
	}
	if (optopt && optopt < 256)
		tool_usage_error("unknown option -%c", optopt);
	tool_usage_error("unknown option %.*s", len, arg);
}

uint64_t tool_opt_u64(const char *s, const char *opt, uint64_t lo, uint64_t hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-' || *s == ' ')
		tool_usage_error("%s: not a number: %s", opt, s);
	unsigned long long mult = *end == 'k' || *end == 'K' ? 1ull << 10
				: *end == 'm' || *end == 'M' ? 1ull << 20
				: *end == 'g' || *end == 'G' ? 1ull << 30 : 1;

	if (mult > 1)
		end++;
	if (*end)
		tool_usage_error("%s: not a number: %s", opt, s);
	if (v > hi / mult || v * mult < lo) /* (v * mult cannot wrap then) */
		tool_usage_error("%s: %s out of range (%llu .. %llu)", opt, s, (unsigned long long)lo,
				 (unsigned long long)hi);
	return v * mult;
}

uint64_t tool_opt_cache_bytes(const char *s)
{
	return tool_opt_u64(s, "--cache-bytes", 1ull << 20, 1ull << 40);
}

size_t tool_opt_id_list(const char *s, uint32_t *out, size_t n, size_t max, const char *what,
			const char *opt)
{
	char *copy = strdup(s), *save = NULL, *tok;

	if (!copy)
		tool_fail(TOOL_EXIT_ERROR, "out of memory");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v = tool_opt_u64(tok, opt, 0, UINT64_MAX);

		if (!v || v > 0x7fffffff)
			tool_fail(TOOL_EXIT_NO_PROCESS, "%s %s: no such %s", what, tok,
				  !strcmp(what, "pid") ? "process" : "thread");
		if (n >= max)
			tool_usage_error("too many %ss (at most %zu)", what, max);
		out[n++] = (uint32_t)v;
	}
	free(copy);
	return n;
}

const char *tool_missing_privileges(bool ptrace)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	/* root without the capabilities (capsh --drop, a container) is refused like anyone else */
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return "need root (cannot read the capabilities)";
#define HAS(c) ((d[(c) / 32].effective >> ((c) % 32)) & 1)
	bool admin = HAS(CAP_SYS_ADMIN), bpf = HAS(39), perfmon = HAS(38); /* CAP_BPF, CAP_PERFMON */
	bool pt = !ptrace || HAS(CAP_SYS_PTRACE);
	if (!admin && !bpf && !perfmon && !pt)
		return ptrace ? "need root (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE)"
			      : "need root (CAP_BPF, CAP_PERFMON)";
	if (!admin && !bpf)
		return "missing CAP_BPF (run as root, or grant CAP_BPF and CAP_PERFMON)";
	if (!admin && !perfmon)
		return "missing CAP_PERFMON (run as root, or grant CAP_BPF and CAP_PERFMON)";
	if (!pt)
		return "missing CAP_SYS_PTRACE (run as root, or grant it)";
#undef HAS
	return NULL;
}

const char *tool_pid_problem(int pid, int *status)
{
	static char msg[128];
	char fn[64], buf[1024];
	unsigned long flags = 0;
	char state = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/stat", pid);
	f = fopen(fn, "re");
	if (!f) {
		*status = TOOL_EXIT_NO_PROCESS;
		snprintf(msg, sizeof(msg), "pid %d: no such process", pid);
		return msg;
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after "pid (comm) ": state, ppid, pgrp, session, tty_nr, tpgid, flags */
	char *p = strrchr(buf, ')');
	if (p && sscanf(p + 2, "%c %*d %*d %*d %*d %*d %lu", &state, &flags) == 2) {
		if (flags & 0x00200000) { /* PF_KTHREAD */
			*status = TOOL_EXIT_KTHREAD;
			snprintf(msg, sizeof(msg), "pid %d is a kernel thread: no user stack", pid);
			return msg;
		}
		if (state == 'Z' || state == 'X') {
			*status = TOOL_EXIT_NO_PROCESS;
			snprintf(msg, sizeof(msg), "pid %d is a zombie: it has exited", pid);
			return msg;
		}
	}
	return NULL;
}

bool tool_unwind_auto(const char *conflict)
{
	const char *why = conflict;

#ifndef HAVE_KWALK
	why = "this build has no in-kernel walker (x86_64 and arm64 only)";
#else
	struct utsname u;
	unsigned major = 0, minor = 0;
	char buf[64];

	if (!why && access("/sys/kernel/btf/vmlinux", R_OK))
		why = "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
	if (!why && !uname(&u) && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
	    (major < 5 || (major == 5 && minor < 17))) {
		snprintf(buf, sizeof(buf), "Linux %u.%u has no bpf_loop (5.17)", major, minor);
		why = buf;
	}
#endif
	if (!why)
		return true;
	if (tool_missing_privileges(false))
		return false; /* the tool stops at that with its own one line */
	fprintf(stderr, "%s: --unwind=auto: unwinding in user space (dwarf mode): %s\n", tool_name(), why);
	return false;
}
