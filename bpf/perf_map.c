// SPDX-License-Identifier: GPL-2.0-only
/* /tmp/perf-PID.map reader: see perf_map.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "intern.h"
#include "perf_map.h"
#include "tool_util.h"

struct pm_sym {
	uint64_t start, end;
	const char *name;
};

struct pm_proc {
	pid_t pid;
	off_t size;            /* file size when read (-1: no file) */
	struct pm_sym *v;
	size_t n;
	struct pm_proc *next;
};

static struct pm_proc *procs;

static int cmp_sym(const void *a, const void *b)
{
	const struct pm_sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void pm_load(struct pm_proc *p)
{
	char fn[64], line[4096];
	size_t cap = 0;
	struct stat sb;
	FILE *f;

	/* through the process's root: a container writes its map in its own /tmp */
	snprintf(fn, sizeof(fn), "/proc/%d/root/tmp/perf-%d.map", p->pid, p->pid);
	if (stat(fn, &sb)) {
		snprintf(fn, sizeof(fn), "/tmp/perf-%d.map", p->pid);
		if (stat(fn, &sb)) {
			p->size = -1;
			return;
		}
	}
	if (sb.st_size == p->size)
		return;
	f = fopen(fn, "re");
	if (!f)
		return;
	p->size = sb.st_size;
	p->n = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, size;
		int off = 0;

		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %n", &start, &size, &off) < 2 || !off)
			continue;
		line[strcspn(line, "\n")] = 0;
		if (p->n == cap) {
			cap = cap ? cap * 2 : 256;
			p->v = xrealloc(p->v, cap * sizeof(*p->v));
		}
		p->v[p->n++] = (struct pm_sym){ start, start + size, intern(line + off) };
	}
	fclose(f);
	qsort(p->v, p->n, sizeof(*p->v), cmp_sym);
}

const char *perf_map_lookup(pid_t pid, uint64_t pc, uint64_t *off)
{
	struct pm_proc *p;

	for (p = procs; p && p->pid != pid; p = p->next)
		;
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		p->size = -2;
		p->next = procs;
		procs = p;
		pm_load(p);
	}
	for (int pass = 0; pass < 2; pass++) {
		size_t lo = 0, hi = p->n;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (p->v[mid].start <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* the latest entry covering pc wins (code is re-JITed at the same address) */
		for (size_t i = lo; i-- > 0 && lo - i < 64;)
			if (pc >= p->v[i].start && pc < p->v[i].end) {
				*off = pc - p->v[i].start;
				return p->v[i].name;
			}
		if (pass == 0)
			pm_load(p);
		else
			break;
	}
	return NULL;
}
