// SPDX-License-Identifier: GPL-2.0-only
/* Small helpers shared by the tools: see tool_util.h. */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tool_util.h"

/* the process's identity as a tool: one per process, set once by main() */
static const char *name = "dwunw";
static bool verbose;

void tool_set_name(const char *n)
{
	name = n;
}

const char *tool_name(void)
{
	return name;
}

void tool_set_verbose(bool on)
{
	verbose = on;
}

bool tool_verbose(void)
{
	return verbose;
}

void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);

	if (!p)
		die("out of memory");
	return p;
}

void *xrealloc(void *p, size_t sz)
{
	p = realloc(p, sz ? sz : 1);
	if (!p)
		die("out of memory");
	return p;
}

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hash64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		die("invalid %s: %s", what, s);
	if (*end == 'k' || *end == 'K')
		v *= 1024, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1024 * 1024, end++;
	if (*end)
		die("invalid %s: %s", what, s);
	return v;
}

const char *base_name(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;

	return s ? s + 1 : p;
}

bool have_privileges(bool ptrace)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (geteuid() == 0)
		return true;
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return false;
#define HAS(c) ((d[(c) / 32].effective >> ((c) % 32)) & 1)
	bool bpf = (HAS(39) && HAS(38)) || HAS(CAP_SYS_ADMIN); /* CAP_BPF, CAP_PERFMON */
	return bpf && (!ptrace || HAS(CAP_SYS_PTRACE));
#undef HAS
}

int tool_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if ((level == LIBBPF_DEBUG || level == LIBBPF_INFO) && !tool_verbose())
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void select_fill(struct bpf_object *obj, const char *map, const uint32_t *ids, size_t n,
			const char *what)
{
	int fd = bpf_object__find_map_fd_by_name(obj, map);
	uint8_t one = 1;

	for (size_t i = 0; i < n; i++)
		if (fd < 0 || bpf_map_update_elem(fd, &ids[i], &one, BPF_ANY))
			die("cannot set the %s filter: %s", what, strerror(fd < 0 ? -fd : errno));
}

void tool_select_set(struct bpf_object *obj, const uint32_t *pids, size_t npids,
		     const uint32_t *tids, size_t ntids)
{
	select_fill(obj, "tgids", pids, npids, "pid");
	select_fill(obj, "tids", tids, ntids, "thread");
}
