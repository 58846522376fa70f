// SPDX-License-Identifier: GPL-2.0-only
/* Separate debug files (build-id path, .gnu_debuglink + CRC) and MiniDebugInfo (xz .gnu_debugdata). */
#include <limits.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "debuginfo.h"

#define XZ_MEMLIMIT (128ull << 20)  /* xz -9 needs 65 MiB of dictionary; refuse anything beyond */
#define DEFAULT_DEBUG_DIRS "/usr/lib/debug"

int dw_debuglink(struct dw_elf *e, const char **name, uint32_t *crc)
{
	const struct dw_section *s;
	const uint8_t *nul;
	uint64_t crc_off;

	if (dw_elf_section(e, DW_SEC_GNU_DEBUGLINK, &s))
		return -1;
	nul = memchr(s->data, 0, (size_t)s->size);
	if (!nul || nul == s->data)
		return -1;
	/* The name, NUL, padding to a multiple of 4, then the CRC in the file's byte order. */
	crc_off = ((uint64_t)(nul - s->data) + 1 + 3) & ~3ull;
	if (crc_off + 4 > s->size)
		return -1;
	memcpy(crc, s->data + crc_off, 4);
	*name = (const char *)s->data;
	/* A name with a directory in it could point anywhere: debuglinks are plain file names. */
	if (strchr(*name, '/') || strcmp(*name, ".") == 0 || strcmp(*name, "..") == 0)
		return -1;
	return 0;
}

struct search {
	struct dw_elf *e;           /* the module */
	struct stat mod_st;         /* the module file itself, never its own debug file */
	int have_mod_st;
	struct dw_elf *out;
	char *found;
	size_t foundlen;
	char *refused;              /* the first candidate refused for where it lies, and why */
	size_t refusedlen;
};

/* Owned by root (or by us: a user's own files cannot be planted by another). */
static int owner_ok(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid();
}

/*
 * Whether nobody but root (or we) could have put the file at path there: the file owned by root
 * and writable by no one else, and every directory above it owned by root and writable by no
 * one else, or sticky (/tmp). 0 when trusted; else why not, into why.
 */
static int untrusted(const char *path, char *why, size_t len)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(path, real) || stat(real, &st))
		return snprintf(why, len, "cannot be resolved"), -1;
	if (!owner_ok(&st))
		return snprintf(why, len, "owned by uid %u", (unsigned)st.st_uid), -1;
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return snprintf(why, len, "writable by group or others"), -1;
	for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
		*slash = 0;
		const char *dir = real[0] ? real : "/";
		if (stat(dir, &st))
			return snprintf(why, len, "%s cannot be read", dir), -1;
		if (!owner_ok(&st))
			return snprintf(why, len, "in %s, owned by uid %u", dir, (unsigned)st.st_uid), -1;
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
			return snprintf(why, len, "in %s, writable by group or others", dir), -1;
		if (!real[0])
			break;
	}
	return 0;
}

/* Open path as the debug file if it qualifies; 0 when it does (s->out is then open). */
static int try_candidate(struct search *s, const char *path, int check_crc, uint32_t crc)
{
	struct stat st;
	struct dw_elf *d = s->out;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return -1;
	if (s->have_mod_st && st.st_dev == s->mod_st.st_dev && st.st_ino == s->mod_st.st_ino)
		return -1;
	/* names that cannot be planted: a debug file only from where only root writes */
	char why[PATH_MAX + 64];
	if (untrusted(path, why, sizeof(why))) {
		if (s->refusedlen && !s->refused[0])
			snprintf(s->refused, s->refusedlen, "%s (%s)", path, why);
		return -1;
	}
	if (dw_elf_open_path(d, path))
		return -1;
	if ((s->e->machine && d->machine != s->e->machine) || d->elf_class != s->e->elf_class)
		goto reject;
	if (s->e->build_id_len && d->build_id_len &&
	    (s->e->build_id_len != d->build_id_len ||
	     memcmp(s->e->build_id, d->build_id, d->build_id_len) != 0))
		goto reject;
	uint32_t got;
	if (check_crc && (dw_elf_crc32(d, &got) || got != crc))
		goto reject;
	if (s->found && s->foundlen)
		snprintf(s->found, s->foundlen, "%s", path);
	return 0;
reject:
	dw_elf_close(d);
	return -1;
}

int dw_debug_file_at(struct dw_elf *e, const char *path, struct dw_elf *out)
{
	struct search s = { .e = e, .out = out };

	if (!e->build_id_len)
		return DWUNW_ERR_NOT_FOUND;
	if (try_candidate(&s, path, 0, 0))
		return DWUNW_ERR_NOT_FOUND;
	if (out->build_id_len != e->build_id_len) {
		dw_elf_close(out);
		return DWUNW_ERR_NOT_FOUND;
	}
	return DWUNW_OK;
}

/* "sysroot" + "root" (one entry of debug_dirs) into buf; -1 when it does not fit. */
static int root_path(char *buf, size_t len, const char *sysroot, const char *root, size_t rootlen)
{
	size_t slen = sysroot ? strlen(sysroot) : 0;

	/* "/" as a sysroot adds nothing; a trailing '/' would double the separator. */
	while (slen && sysroot[slen - 1] == '/')
		slen--;
	int n = snprintf(buf, len, "%.*s%.*s", (int)slen, slen ? sysroot : "", (int)rootlen, root);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Call fn(s, root) for each root of debug_dirs, prefixed by sysroot; stops at the first 0. */
static int each_root(struct search *s, const char *sysroot, const char *debug_dirs,
		     int (*fn)(struct search *s, const char *root, void *arg), void *arg)
{
	const char *p = debug_dirs ? debug_dirs : DEFAULT_DEBUG_DIRS;
	char root[PATH_MAX];

	while (*p) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		if (n && root_path(root, sizeof(root), sysroot, p, n) == 0 && fn(s, root, arg) == 0)
			return 0;
		if (!colon)
			break;
		p = colon + 1;
	}
	return -1;
}

static int by_build_id(struct search *s, const char *root, void *arg)
{
	const char *hex = arg;
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	return try_candidate(s, path, 0, 0);
}

struct link_arg {
	const char *name;
	uint32_t crc;
	const char *dirs[2];        /* the module's directory, and its real path when different */
	int ndirs;
};

static int link_in(struct search *s, const char *dir, const char *sub, const struct link_arg *la)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s%s%s/%s", dir, *dir && sub[0] ? "/" : "", sub, la->name);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	return try_candidate(s, path, 1, la->crc);
}

static int by_link_root(struct search *s, const char *root, void *arg)
{
	const struct link_arg *la = arg;

	for (int i = 0; i < la->ndirs; i++) {
		char dir[PATH_MAX];
		/* The module's directory is absolute: ROOT + /usr/lib/... */
		int n = snprintf(dir, sizeof(dir), "%s%s", root, la->dirs[i]);
		if (n < 0 || (size_t)n >= sizeof(dir))
			continue;
		if (link_in(s, dir, "", la) == 0)
			return 0;
	}
	return -1;
}

/* Directory part of path into buf ("/" for "/x", "" for "x"). */
static void dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (slash && n == 0)
		n = 1; /* "/file" */
	if (n >= len)
		n = 0;
	memcpy(buf, path, n);
	buf[n] = 0;
}

int dw_debug_file_open(struct dw_elf *e, const char *module_path, const char *sysroot,
		       const char *debug_dirs, struct dw_elf *out, char *found, size_t foundlen,
		       char *refused, size_t refusedlen)
{
	struct search s = { .e = e, .out = out, .found = found, .foundlen = foundlen,
			    .refused = refused, .refusedlen = refusedlen };
	char hex[2 * sizeof(e->build_id) + 1];
	struct link_arg la = { 0 };
	char dir[PATH_MAX], real[PATH_MAX], realdir[PATH_MAX], rel[2][PATH_MAX];
	int have_dir = module_path && strchr(module_path, '/');

	if (found && foundlen)
		found[0] = 0;
	if (refused && refusedlen)
		refused[0] = 0;
	else
		s.refusedlen = 0;
	if (sysroot && (!*sysroot || strcmp(sysroot, "/") == 0))
		sysroot = NULL;
	if (have_dir && stat(module_path, &s.mod_st) == 0)
		s.have_mod_st = 1;

	if (e->build_id_len >= 2 && dw_elf_build_id_hex(e, hex, sizeof(hex)) > 0 &&
	    each_root(&s, sysroot, debug_dirs, by_build_id, hex) == 0)
		return DWUNW_OK;

	if (!have_dir || dw_debuglink(e, &la.name, &la.crc))
		return DWUNW_ERR_NOT_FOUND;
	dir_of(module_path, dir, sizeof(dir));
	/* gdb looks next to the file's real path: /lib -> /usr/lib on a merged-/usr system. */
	realdir[0] = 0;
	if (!sysroot && realpath(module_path, real)) {
		dir_of(real, realdir, sizeof(realdir));
		if (strcmp(realdir, dir) == 0)
			realdir[0] = 0;
	}
	const char *local[2] = { dir, realdir };
	for (int i = 0; i < 2; i++) {
		if (!local[i][0])
			continue;
		if (link_in(&s, local[i], "", &la) == 0 || link_in(&s, local[i], ".debug", &la) == 0)
			return DWUNW_OK;
	}
	/* ROOT/<module's directory>: the directory as seen inside the sysroot. */
	for (int i = 0; i < 2; i++) {
		const char *d = local[i];
		if (!d[0])
			continue;
		if (sysroot) {
			size_t sl = strlen(sysroot);
			while (sl && sysroot[sl - 1] == '/')
				sl--;
			if (strncmp(d, sysroot, sl) == 0 && (d[sl] == '/' || d[sl] == 0))
				d += sl;
		}
		if (d[0] != '/')
			continue; /* a relative directory has no place under a root */
		snprintf(rel[la.ndirs], sizeof(rel[0]), "%s", d);
		la.dirs[la.ndirs] = rel[la.ndirs];
		la.ndirs++;
	}
	if (la.ndirs && each_root(&s, sysroot, debug_dirs, by_link_root, &la) == 0)
		return DWUNW_OK;
	return DWUNW_ERR_NOT_FOUND;
}

/* ---- MiniDebugInfo ------------------------------------------------------------------------ */

/* The uncompressed size an xz file's (last) index records, or 0 when it cannot be read. */
static uint64_t xz_size(const uint8_t *in, size_t size)
{
	lzma_stream_flags flags;
	lzma_index *idx = NULL;
	uint64_t memlimit = 16u << 20, usize = 0;
	size_t pos = 0;

	/* Stream padding: zero bytes in multiples of 4 after the footer. */
	while (size >= 4 && memcmp(in + size - 4, "\0\0\0\0", 4) == 0)
		size -= 4;
	if (size < 2 * LZMA_STREAM_HEADER_SIZE)
		return 0;
	if (lzma_stream_footer_decode(&flags, in + size - LZMA_STREAM_HEADER_SIZE) != LZMA_OK)
		return 0;
	if (flags.backward_size > size - 2 * LZMA_STREAM_HEADER_SIZE)
		return 0;
	size_t ioff = size - LZMA_STREAM_HEADER_SIZE - (size_t)flags.backward_size;
	if (lzma_index_buffer_decode(&idx, &memlimit, NULL, in + ioff, &pos,
				     (size_t)flags.backward_size) != LZMA_OK)
		return 0;
	usize = lzma_index_uncompressed_size(idx);
	lzma_index_end(idx, NULL);
	return usize;
}

int dw_xz_decode(const uint8_t *in, size_t in_size, size_t cap, uint8_t **out, size_t *out_size)
{
	uint64_t want = xz_size(in, in_size);
	size_t len;

	*out = NULL;
	*out_size = 0;
	if (want > cap)
		return DWUNW_ERR_CORRUPT;
	/* With the index's size one pass does; without it, grow until the stream fits. */
	if (want)
		len = (size_t)want;
	else
		len = in_size < cap / 8 ? (in_size * 8 > 65536 ? in_size * 8 : 65536) : cap;
	if (len > cap)
		len = cap;
	if (!len)
		return DWUNW_ERR_CORRUPT;
	for (;;) {
		uint8_t *buf = malloc(len);
		uint64_t memlimit = XZ_MEMLIMIT;
		size_t in_pos = 0, out_pos = 0;
		lzma_ret r;

		if (!buf)
			return DWUNW_ERR_NOMEM;
		r = lzma_stream_buffer_decode(&memlimit, 0, NULL, in, &in_pos, in_size, buf, &out_pos, len);
		if (r == LZMA_OK) {
			*out = buf;
			*out_size = out_pos;
			return DWUNW_OK;
		}
		free(buf);
		if (r == LZMA_MEM_ERROR)
			return DWUNW_ERR_NOMEM;
		if (r != LZMA_BUF_ERROR || len >= cap)
			return DWUNW_ERR_CORRUPT;
		len = len > cap / 2 ? cap : len * 2;
	}
}

int dw_debugdata_open(struct dw_elf *e, struct dw_elf *out, void **buf)
{
	const struct dw_section *s;
	uint8_t *img;
	size_t size;
	int rc;

	*buf = NULL;
	rc = dw_elf_section(e, DW_SEC_GNU_DEBUGDATA, &s);
	if (rc)
		return rc;
	rc = dw_xz_decode(s->data, (size_t)s->size, DW_DEBUGDATA_MAX, &img, &size);
	if (rc)
		return rc;
	rc = dw_elf_open_image(out, img, size);
	if (rc) {
		free(img);
		return rc;
	}
	*buf = img;
	return DWUNW_OK;
}
