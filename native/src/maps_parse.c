// SPDX-License-Identifier: GPL-2.0-only
/*
 * The one reader and parser of /proc/PID/maps text: the library's process maps (proc.c) and every
 * tool use it. Depends on nothing else of the library but the errno mapping, so a tool built
 * without the unwinder (memleak-fp) links only this.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "proc.h"

int dw_parse_hex(const char **s, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = *s;

	if (p >= end)
		return -1;
	for (; p < end; p++) {
		unsigned d;
		if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f') d = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F') d = (unsigned)(*p - 'A' + 10);
		else break;
		if (v >> 60)
			return -1;
		v = v << 4 | d;
	}
	if (p == *s)
		return -1;
	*s = p;
	*out = v;
	return 0;
}

static int decval(const char **s, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = *s;

	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == *s)
		return -1;
	*s = p;
	*out = v;
	return 0;
}

static int expect(const char **s, const char *end, char c)
{
	if (*s >= end || **s != c)
		return -1;
	(*s)++;
	return 0;
}

/* One line, [s, end) without its '\n': "start-end perms offset major:minor inode   path".
 * m->path is left unset; the path is [*path, *path + *plen), " (deleted)" already cut. */
static int parse_line(const char *s, const char *end, struct dwunw_map *m, const char **path, size_t *plen)
{
	static const char del[] = " (deleted)";
	uint64_t maj, min;

	memset(m, 0, sizeof(*m));
	if (dw_parse_hex(&s, end, &m->start) || expect(&s, end, '-') || dw_parse_hex(&s, end, &m->end) ||
	    expect(&s, end, ' ') || end - s < 5 || m->end <= m->start)
		return -1;
	m->flags = (s[0] == 'r' ? DWUNW_MAP_R : 0) | (s[1] == 'w' ? DWUNW_MAP_W : 0) |
		   (s[2] == 'x' ? DWUNW_MAP_X : 0) | (s[3] == 's' ? DWUNW_MAP_SHARED : 0);
	s += 4;
	if (expect(&s, end, ' ') || dw_parse_hex(&s, end, &m->offset) || expect(&s, end, ' ') ||
	    dw_parse_hex(&s, end, &maj) || expect(&s, end, ':') || dw_parse_hex(&s, end, &min) ||
	    expect(&s, end, ' ') || decval(&s, end, &m->inode) || maj > UINT32_MAX || min > UINT32_MAX)
		return -1;
	m->dev_major = (uint32_t)maj;
	m->dev_minor = (uint32_t)min;
	while (s < end && *s == ' ')
		s++;
	*path = s;
	*plen = (size_t)(end - s);
	if (*plen >= sizeof(del) - 1 && !memcmp(end - (sizeof(del) - 1), del, sizeof(del) - 1)) {
		m->flags |= DWUNW_MAP_DELETED;
		*plen -= sizeof(del) - 1;
	}
	return 0;
}

DWUNW_API int dwunw_maps_parse(char *text, size_t len, struct dwunw_map *out, size_t *n)
{
	const char *end;
	char *s;
	size_t cap, found = 0;

	if (!text || !n)
		return DWUNW_ERR_INVALID_ARG;
	cap = *n;
	if (out) {
		/* too few slots: nothing written, so the text can be parsed again */
		int err = dwunw_maps_parse(text, len, NULL, n);
		if (err || *n > cap)
			return err ? err : DWUNW_ERR_INVALID_ARG;
	}
	end = text + len;
	for (s = text; s < end;) {
		char *eol = memchr(s, '\n', (size_t)(end - s));
		struct dwunw_map m;
		const char *path;
		size_t plen;

		if (!eol)
			eol = (char *)end;
		if (eol > s && parse_line(s, eol, &m, &path, &plen) == 0) {
			if (out) {
				/* the byte after the path: '\n', text[len], or the space of " (deleted)" */
				((char *)path)[plen] = 0;
				m.path = path;
				out[found] = m;
			}
			found++;
		}
		s = eol + 1;
	}
	*n = found;
	return found ? DWUNW_OK : DWUNW_ERR_CORRUPT;
}

/* One maps file, whole (DWUNW_ERR_NO_PROCESS when empty: a task without an mm). */
static int read_maps(const char *path, char **out, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? DWUNW_ERR_NO_PROCESS : dw_errno_to_err(errno);
	buf = malloc(cap);
	for (;;) {
		ssize_t r;

		if (buf && n + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				free(buf);
			buf = nb;
			cap *= 2;
		}
		if (!buf) {
			close(fd);
			return DWUNW_ERR_NOMEM;
		}
		r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return e == ESRCH ? DWUNW_ERR_NO_PROCESS : dw_errno_to_err(e);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (!n) {
		free(buf);
		return DWUNW_ERR_NO_PROCESS; /* a zombie has no maps */
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return DWUNW_OK;
}

DWUNW_API int dwunw_maps_read(int32_t pid, char **out, size_t *len)
{
	char path[64];
	int err;
	DIR *d;
	struct dirent *de;

	if (!out || !len || pid < 0)
		return DWUNW_ERR_INVALID_ARG;
	if (!pid)
		return read_maps("/proc/self/maps", out, len);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	err = read_maps(path, out, len);
	if (err != DWUNW_ERR_NO_PROCESS)
		return err;
	/* a main thread that exited first (pthread_exit) is a zombie without maps while the other
	 * threads run on in the same mm: read it through one of them */
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return DWUNW_ERR_NO_PROCESS;
	while (err == DWUNW_ERR_NO_PROCESS && (de = readdir(d))) {
		int tid = atoi(de->d_name);

		if (tid <= 0 || tid == pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/maps", pid, tid);
		err = read_maps(path, out, len);
	}
	closedir(d);
	return err;
}

DWUNW_API int dwunw_maps_load(int32_t pid, struct dwunw_map **out, size_t *n)
{
	struct dwunw_map *e;
	char *text;
	size_t len, cnt = 0;
	int err;

	if (!out || !n)
		return DWUNW_ERR_INVALID_ARG;
	err = dwunw_maps_read(pid, &text, &len);
	if (err)
		return err;
	err = dwunw_maps_parse(text, len, NULL, &cnt);
	if (err) {
		free(text);
		return err;
	}
	/* one block: the entries, then the text their paths point into */
	e = malloc(cnt * sizeof(*e) + len + 1);
	if (!e) {
		free(text);
		return DWUNW_ERR_NOMEM;
	}
	memcpy((char *)(e + cnt), text, len + 1);
	free(text);
	err = dwunw_maps_parse((char *)(e + cnt), len, e, &cnt);
	if (err) {
		free(e);
		return err;
	}
	*out = e;
	*n = cnt;
	return DWUNW_OK;
}
