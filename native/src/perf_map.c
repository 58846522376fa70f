// SPDX-License-Identifier: GPL-2.0-only
/*
 * /tmp/perf-PID.map, the file JIT runtimes write for perf ("START SIZE name" per line, hex): the
 * one parser, for the tools and the CLI (see dwunw_perf_map_open). Needs no context.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

struct pm_entry {
	uint64_t start, end;
	uint64_t seq;          /* line number: the latest entry for an address wins */
	char *name;
};

struct dwunw_perf_map {
	int32_t pid;
	off_t size;            /* bytes read so far (whole lines) */
	dev_t dev;             /* the file read (a new file at the path is read from the start) */
	ino_t ino;
	struct pm_entry *v;
	size_t n, cap;
	uint64_t seq, reads;
	char path[64];
	char rejected[512];
};

/* How far back from the binary search's place overlapping entries are looked for. */
#define PM_BACK 64

static int cmp_entry(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void pm_clear(struct dwunw_perf_map *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].name);
	m->n = 0;
	m->size = 0;
}

/* Through the process's root first (a container writes its map in its own /tmp), by
 * dwunw_pid_file_open's rule: a regular file of root or the process's user, not a link. */
static int pm_open(struct dwunw_perf_map *m)
{
	char why[sizeof(m->rejected)];
	int fd;

	snprintf(m->path, sizeof(m->path), "/proc/%d/root/tmp/perf-%d.map", (int)m->pid, (int)m->pid);
	fd = dwunw_pid_file_open(m->pid, m->path, why, sizeof(why));
	if (fd == DWUNW_ERR_NOT_FOUND) {
		snprintf(m->path, sizeof(m->path), "/tmp/perf-%d.map", (int)m->pid);
		fd = dwunw_pid_file_open(m->pid, m->path, why, sizeof(why));
	}
	if (fd < 0 && fd != DWUNW_ERR_NOT_FOUND && !m->rejected[0])
		snprintf(m->rejected, sizeof(m->rejected), "%s", why);
	if (fd < 0)
		m->path[0] = 0;
	return fd;
}

DWUNW_API int dwunw_perf_map_read_on(struct dwunw_perf_map *m)
{
	char line[4096];
	size_t old_n;
	struct stat sb;
	off_t at;
	FILE *f;
	int fd;

	if (!m)
		return DWUNW_ERR_INVALID_ARG;
	fd = pm_open(m);
	if (fd < 0)
		return fd == DWUNW_ERR_NOT_FOUND ? 0 : fd;
	if (fstat(fd, &sb)) {
		close(fd);
		return DWUNW_ERR_IO;
	}
	if (sb.st_dev != m->dev || sb.st_ino != m->ino || sb.st_size < m->size) {
		pm_clear(m);
		m->dev = sb.st_dev;
		m->ino = sb.st_ino;
	}
	if (sb.st_size <= m->size || !(f = fdopen(fd, "re"))) {
		close(fd);
		return 0;
	}
	if (m->size > 0 && fseeko(f, m->size, SEEK_SET)) {
		fclose(f);
		return DWUNW_ERR_IO;
	}
	m->reads++;
	old_n = m->n;
	at = m->size;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		uint64_t start, size;
		char *name;
		int off = 0;

		/* a line still being written is read next time, whole */
		if (!len || line[len - 1] != '\n')
			break;
		at += (off_t)len;
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %n", &start, &size, &off) < 2 || !off || !line[off] ||
		    line[off] == '\n')
			continue;
		line[len - 1] = 0;
		if (m->n == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 256;
			struct pm_entry *v = realloc(m->v, cap * sizeof(*v));
			if (!v)
				break;
			m->v = v;
			m->cap = cap;
		}
		if (!(name = strdup(line + off)))
			break;
		m->v[m->n++] = (struct pm_entry){ start, start + size, m->seq++, name };
	}
	fclose(f);
	m->size = at;
	if (m->n != old_n)
		qsort(m->v, m->n, sizeof(*m->v), cmp_entry);
	return (int)(m->n - old_n);
}

DWUNW_API int dwunw_perf_map_open(int32_t pid, struct dwunw_perf_map **out)
{
	struct dwunw_perf_map *m;

	if (!out || pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	if (!(m = calloc(1, sizeof(*m))))
		return DWUNW_ERR_NOMEM;
	m->pid = pid;
	m->dev = (dev_t)-1;
	m->ino = (ino_t)-1;
	dwunw_perf_map_read_on(m);
	*out = m;
	return DWUNW_OK;
}

DWUNW_API int dwunw_perf_map_find(const struct dwunw_perf_map *m, uint64_t addr, const char **name,
				  uint64_t *start)
{
	const struct pm_entry *best = NULL;
	size_t lo = 0, hi;

	if (!m || !name)
		return DWUNW_ERR_INVALID_ARG;
	hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the latest entry covering addr wins (code is re-JITed at the same address) */
	for (size_t i = lo; i-- > 0 && lo - i <= PM_BACK;)
		if (addr >= m->v[i].start && addr < m->v[i].end && (!best || m->v[i].seq > best->seq))
			best = &m->v[i];
	if (!best)
		return DWUNW_ERR_NOT_FOUND;
	*name = best->name;
	if (start)
		*start = best->start;
	return DWUNW_OK;
}

DWUNW_API int dwunw_perf_map_info(const struct dwunw_perf_map *m, struct dwunw_perf_map_info *out)
{
	if (!m || !out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	out->entries = m->n;
	out->reads = m->reads;
	snprintf(out->path, sizeof(out->path), "%s", m->path);
	snprintf(out->rejected, sizeof(out->rejected), "%s", m->rejected);
	return DWUNW_OK;
}

DWUNW_API void dwunw_perf_map_free(struct dwunw_perf_map *m)
{
	if (!m)
		return;
	pm_clear(m);
	free(m->v);
	free(m);
}
