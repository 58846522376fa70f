// SPDX-License-Identifier: GPL-2.0-only
/* /tmp/perf-PID.map reader: see perf_map.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dwunw.h>
#include "intern.h"
#include "perf_map.h"
#include "tool_util.h"

struct pm_sym {
	uint64_t start, end;
	const char *name;
	uint64_t seq;          /* line number: the latest entry for an address wins */
};

struct pm_proc {
	pid_t pid;
	off_t size;            /* bytes read so far */
	dev_t dev;             /* the file read (a new file at the path is read from the start) */
	ino_t ino;
	uint64_t checked_ns;   /* last look at the file */
	bool rejected_said;    /* a refused file (planted) was named once */
	struct pm_sym *v;
	size_t n, cap;
	uint64_t seq;
	struct pm_proc *next;
};

static struct pm_proc *procs;
static uint64_t reads;

uint64_t perf_map_reads(void)
{
	return reads;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct pm_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Read the lines appended since the last read (all of them for a new or shorter file). */
static void pm_load(struct pm_proc *p)
{
	char fn[64], line[4096], why[256];
	struct stat sb;
	FILE *f;
	int fd;

	p->checked_ns = mono_ns();
	/* through the process's root: a container writes its map in its own /tmp; opened by
	 * libdwunw's rule (a regular file of root or the process's user: nobody else plants one) */
	snprintf(fn, sizeof(fn), "/proc/%d/root/tmp/perf-%d.map", p->pid, p->pid);
	fd = dwunw_pid_file_open(p->pid, fn, why, sizeof(why));
	if (fd == DWUNW_ERR_NOT_FOUND) {
		snprintf(fn, sizeof(fn), "/tmp/perf-%d.map", p->pid);
		fd = dwunw_pid_file_open(p->pid, fn, why, sizeof(why));
	}
	if (fd < 0) {
		if (fd != DWUNW_ERR_NOT_FOUND && !p->rejected_said) {
			p->rejected_said = true;
			fprintf(stderr, "%s: %s\n", tool_name(), why);
		}
		return;
	}
	if (fstat(fd, &sb)) {
		close(fd);
		return;
	}
	if (sb.st_dev != p->dev || sb.st_ino != p->ino || sb.st_size < p->size) {
		p->n = 0;
		p->size = 0;
		p->dev = sb.st_dev;
		p->ino = sb.st_ino;
	}
	if (sb.st_size <= p->size || !(f = fdopen(fd, "re"))) {
		close(fd);
		return;
	}
	if (p->size > 0 && fseeko(f, p->size, SEEK_SET)) {
		fclose(f);
		return;
	}
	reads++;
	size_t old_n = p->n;
	off_t at = p->size;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		uint64_t start, size;
		int off = 0;

		/* a line still being written is read next time, whole */
		if (!len || line[len - 1] != '\n')
			break;
		at += (off_t)len;
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %n", &start, &size, &off) < 2 || !off)
			continue;
		line[len - 1] = 0;
		if (p->n == p->cap) {
			p->cap = p->cap ? p->cap * 2 : 256;
			p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
		}
		p->v[p->n++] = (struct pm_sym){ start, start + size, intern(line + off), p->seq++ };
	}
	fclose(f);
	p->size = at;
	if (p->n != old_n)
		qsort(p->v, p->n, sizeof(*p->v), cmp_sym);
}

static const char *pm_find(const struct pm_proc *p, uint64_t pc, uint64_t *off)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->v[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the latest entry covering pc wins (code is re-JITed at the same address) */
	const struct pm_sym *best = NULL;
	for (size_t i = lo; i-- > 0 && lo - i < 64;)
		if (pc >= p->v[i].start && pc < p->v[i].end && (!best || p->v[i].seq > best->seq))
			best = &p->v[i];
	if (!best)
		return NULL;
	*off = pc - best->start;
	return best->name;
}

const char *perf_map_lookup(pid_t pid, uint64_t pc, bool jit, uint64_t *off)
{
	struct pm_proc *p;
	const char *name;

	for (p = procs; p && p->pid != pid; p = p->next)
		;
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		p->next = procs;
		procs = p;
		pm_load(p);
	}
	if ((name = pm_find(p, pc, off)) || !jit)
		return name;
	/* code named since the last read: read on, at most once per PERF_MAP_RECHECK_NS */
	if (mono_ns() - p->checked_ns < PERF_MAP_RECHECK_NS)
		return NULL;
	pm_load(p);
	return pm_find(p, pc, off);
}
