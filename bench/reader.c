// SPDX-License-Identifier: GPL-2.0-only
/*
 * The memory every peer reads through: the snapshot's stack bytes, then the bytes of file
 * mappings, served from the module files (mapped once for the run). Nothing else: the heap and
 * anonymous memory are not in a snapshot. Writable file mappings are served with their on-disk
 * (unrelocated) bytes, as perf's accessors do: libunwind dereferences the GOT slot of a CIE's
 * indirect personality pointer while it parses an FDE (glibc's dl_iterate_phdr has one), and
 * fails the step when that read fails, though it never uses the value. libdwunw reads the stack
 * snapshot, then read-only file mappings, through its own code.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench.h"

/* Files stay mapped for the process lifetime: snapshots share them. */
static struct bfile *files[256];
static size_t nfiles;

static struct bfile *file_get(const char *path)
{
	struct stat st;
	struct bfile *f;
	void *p;
	int fd;

	for (size_t i = 0; i < nfiles; i++)
		if (!strcmp(files[i]->path, path))
			return files[i]->data ? files[i] : NULL;
	if (nfiles == sizeof(files) / sizeof(files[0]))
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	snprintf(f->path, sizeof(f->path), "%s", path);
	files[nfiles++] = f;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	f->data = p;
	f->size = (size_t)st.st_size;
	return f;
}

/* ELF program headers (either class, little- or big-endian). */
static uint64_t rd(const uint8_t *p, unsigned size, int big)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < size; i++)
		v |= (uint64_t)p[big ? size - 1 - i : i] << (8 * i);
	return v;
}

struct phdr {
	uint32_t type, flags;
	uint64_t off, vaddr, filesz, memsz;
};

static int elf_phdrs(const struct bfile *f, struct bmod *m, struct phdr *ph, size_t max, size_t *nph)
{
	const uint8_t *e = f->data;
	int big, c64;
	uint64_t phoff;
	unsigned phentsize, phnum;

	if (f->size < 52 || memcmp(e, ELFMAG, SELFMAG))
		return -1;
	c64 = e[EI_CLASS] == ELFCLASS64;
	big = e[EI_DATA] == ELFDATA2MSB;
	m->elf_class = e[EI_CLASS];
	m->elf_type = (unsigned)rd(e + 16, 2, big);
	m->machine = (unsigned)rd(e + 18, 2, big);
	phoff = c64 ? rd(e + 32, 8, big) : rd(e + 28, 4, big);
	phentsize = (unsigned)rd(e + (c64 ? 54 : 42), 2, big);
	phnum = (unsigned)rd(e + (c64 ? 56 : 44), 2, big);
	*nph = 0;
	for (unsigned i = 0; i < phnum && *nph < max; i++) {
		const uint8_t *p = e + phoff + (uint64_t)i * phentsize;
		struct phdr *h = &ph[(*nph)++];
		if (phoff + (uint64_t)(i + 1) * phentsize > f->size)
			return -1;
		h->type = (uint32_t)rd(p, 4, big);
		if (c64) {
			h->flags = (uint32_t)rd(p + 4, 4, big);
			h->off = rd(p + 8, 8, big);
			h->vaddr = rd(p + 16, 8, big);
			h->filesz = rd(p + 32, 8, big);
			h->memsz = rd(p + 40, 8, big);
		} else {
			h->off = rd(p + 4, 4, big);
			h->vaddr = rd(p + 8, 4, big);
			h->filesz = rd(p + 16, 4, big);
			h->memsz = rd(p + 20, 4, big);
			h->flags = (uint32_t)rd(p + 24, 4, big);
		}
	}
	return 0;
}

/* Load bias and eh_frame_hdr of a module, from the mapping with the lowest file offset. */
static void module_layout(struct bmod *m, uint64_t map_start, uint64_t map_off)
{
	struct phdr ph[64];
	size_t n;

	if (!m->file || elf_phdrs(m->file, m, ph, 64, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t pg = ph[i].off & ~(uint64_t)0xfff;
		if (ph[i].type == PT_LOAD && map_off >= pg && map_off < ph[i].off + (ph[i].filesz ? ph[i].filesz : 1)) {
			m->bias = map_start - (ph[i].vaddr + map_off - ph[i].off);
			break;
		}
	}
	if (m->elf_type == ET_EXEC)
		m->bias = 0;
	for (size_t i = 0; i < n; i++)
		if (ph[i].type == PT_GNU_EH_FRAME) {
			m->eh_hdr_vaddr = ph[i].vaddr;
			m->eh_hdr_size = ph[i].memsz;
		}
}

static int seg_cmp(const void *a, const void *b)
{
	const struct bseg *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int bspace_init(struct bspace *s, const char *maps, size_t len, const char *sysroot, char *err, size_t errlen)
{
	const char *p = maps, *end = maps + len;
	size_t capm = 0, caps = 0;

	memset(s, 0, sizeof(*s));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char line[4352], perms[8], path[4096];
		unsigned long long lo, hi, off, inode;
		int pos = 0, mi = -1;
		size_t l = (size_t)((nl ? nl : end) - p);

		if (l >= sizeof(line))
			l = sizeof(line) - 1;
		memcpy(line, p, l);
		line[l] = 0;
		p = nl ? nl + 1 : end;
		path[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &lo, &hi, perms, &off, &inode, &pos) < 5)
			continue;
		if (pos > 0)
			snprintf(path, sizeof(path), "%s", line + pos);
		if (!strcmp(path, "[vdso]")) {
			s->vdso_lo = lo;
			s->vdso_hi = hi;
		}
		if (path[0] != '/' || strstr(path, " (deleted)"))
			continue;
		for (size_t i = 0; i < s->nmods; i++)
			if (!strcmp(s->mods[i].path, path)) {
				mi = (int)i;
				break;
			}
		if (mi < 0) {
			char full[4200];
			struct bmod *m;
			if (s->nmods == capm) {
				void *n = realloc(s->mods, (capm = capm ? capm * 2 : 16) * sizeof(*s->mods));
				if (!n)
					goto nomem;
				s->mods = n;
			}
			m = &s->mods[s->nmods];
			memset(m, 0, sizeof(*m));
			snprintf(m->path, sizeof(m->path), "%s", path);
			snprintf(full, sizeof(full), "%s%s", sysroot && strcmp(sysroot, "/") ? sysroot : "", path);
			m->file = file_get(full);
			m->lo = lo;
			m->hi = hi;
			module_layout(m, lo, off);
			mi = (int)s->nmods++;
		}
		if (lo < s->mods[mi].lo)
			s->mods[mi].lo = lo;
		if (hi > s->mods[mi].hi)
			s->mods[mi].hi = hi;
		if (perms[2] == 'x') {
			struct bmod *m = &s->mods[mi];
			if (!m->text_lo || lo < m->text_lo)
				m->text_lo = lo;
			if (hi > m->text_hi)
				m->text_hi = hi;
		}
		if (!s->mods[mi].file)
			continue;
		if (s->nsegs == caps) {
			void *n = realloc(s->segs, (caps = caps ? caps * 2 : 32) * sizeof(*s->segs));
			if (!n)
				goto nomem;
			s->segs = n;
		}
		s->segs[s->nsegs++] = (struct bseg){ lo, hi, off, mi };
	}
	qsort(s->segs, s->nsegs, sizeof(*s->segs), seg_cmp);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	bspace_free(s);
	return -1;
}

int bspace_add_vdso(struct bspace *s, const uint8_t *image, size_t len)
{
	struct bfile *f;
	struct bmod *m;
	void *n;

	if (!s->vdso_lo || !image || !len)
		return -1;
	f = calloc(1, sizeof(*f));
	n = realloc(s->mods, (s->nmods + 1) * sizeof(*s->mods));
	if (!f || !n) {
		free(f);
		return -1;
	}
	s->mods = n;
	snprintf(f->path, sizeof(f->path), "[vdso]");
	f->data = image;
	f->size = len;
	m = &s->mods[s->nmods];
	memset(m, 0, sizeof(*m));
	snprintf(m->path, sizeof(m->path), "[vdso]");
	m->file = f;
	m->lo = m->text_lo = s->vdso_lo;
	m->hi = m->text_hi = s->vdso_hi;
	module_layout(m, s->vdso_lo, 0);
	n = realloc(s->segs, (s->nsegs + 1) * sizeof(*s->segs));
	if (!n)
		return -1;
	s->segs = n;
	s->segs[s->nsegs++] = (struct bseg){ s->vdso_lo, s->vdso_hi, 0, (int)s->nmods++ };
	qsort(s->segs, s->nsegs, sizeof(*s->segs), seg_cmp);
	return 0;
}

void bspace_free(struct bspace *s)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].file && s->mods[i].path[0] == '[')
			free(s->mods[i].file); /* the [vdso]'s: its bytes belong to the snapshot */
	free(s->mods);
	free(s->segs);
	memset(s, 0, sizeof(*s));
}

static const struct bseg *seg_find(struct bspace *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsegs;

	if (s->last < s->nsegs && addr >= s->segs[s->last].start && addr < s->segs[s->last].end)
		return &s->segs[s->last];
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (addr < s->segs[mid].start)
			hi = mid;
		else if (addr >= s->segs[mid].end)
			lo = mid + 1;
		else {
			s->last = mid;
			return &s->segs[mid];
		}
	}
	return NULL;
}

int bspace_read(struct bspace *s, uint64_t addr, void *buf, size_t len)
{
	const struct bseg *g;
	const struct bfile *f;
	uint64_t foff;

	s->reads++;
	if (addr >= s->stack_lo && addr - s->stack_lo <= s->stack_len && len <= s->stack_len - (addr - s->stack_lo)) {
		memcpy(buf, s->stack + (addr - s->stack_lo), len);
		return 0;
	}
	for (size_t i = 0; i < s->nregions; i++) {
		const struct bregion *r = &s->regions[i];
		if (addr >= r->start && addr - r->start <= r->len && len <= r->len - (addr - r->start)) {
			memcpy(buf, r->data + (addr - r->start), len);
			return 0;
		}
	}
	g = seg_find(s, addr);
	if (!g || len > g->end - addr)
		return -1;
	f = s->mods[g->mod].file;
	foff = g->off + (addr - g->start);
	if (foff > f->size || len > f->size - foff)
		return -1;
	memcpy(buf, f->data + foff, len);
	s->file_reads++;
	return 0;
}

int bspace_module_at(struct bspace *s, uint64_t addr)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (addr >= s->mods[i].lo && addr < s->mods[i].hi)
			return (int)i;
	return -1;
}
