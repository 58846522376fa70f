// SPDX-License-Identifier: GPL-2.0-only
/* Minimal ELF symbolizer over /proc/PID/maps: see syms.h. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dwunw.h"
#include "module_warn.h"
#include "syms.h"

struct sym {
	uint64_t addr;
	uint64_t size;
	const char *name;
};

struct seg {
	uint64_t vaddr, off, filesz;
};

struct elf_syms {
	char *path;
	int ok;
	int is_dyn;         /* ET_DYN: addresses are relative to the load bias */
	struct sym *syms;
	size_t nsyms;
	char *strings;      /* all names, one allocation */
	struct seg *segs;
	size_t nsegs;
	struct elf_syms *next;
};

struct map {
	uint64_t start, end, off;
	struct elf_syms *elf; /* NULL: not a file mapping */
};

struct syms_proc {
	int pid;
	struct map *maps;
	size_t nmaps;
	struct elf_syms *elfs;
};

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void elf_load(struct elf_syms *e)
{
	int fd = open(e->path, O_RDONLY | O_CLOEXEC);
	size_t cap = 0, strcap = 0, strlen_total = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t nph;
	Elf *elf;

	if (fd < 0) {
		module_warn(e->path, strerror(errno));
		return;
	}
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || !gelf_getehdr(elf, &eh))
		goto out;
	e->is_dyn = eh.e_type == ET_DYN;
	if (elf_getphdrnum(elf, &nph) == 0) {
		e->segs = calloc(nph ? nph : 1, sizeof(*e->segs));
		for (size_t i = 0; e->segs && i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
				e->segs[e->nsegs].vaddr = ph.p_vaddr;
				e->segs[e->nsegs].off = ph.p_offset;
				e->segs[e->nsegs].filesz = ph.p_filesz;
				e->nsegs++;
			}
		}
	}
	/* two passes: count names, then copy them into one block */
	for (int pass = 0; pass < 2; pass++) {
		size_t soff = 0;

		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
				continue;
			d = elf_getdata(scn, NULL);
			if (!d || !sh.sh_entsize)
				continue;
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym s;
				const char *n;
				size_t l;

				if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
				    s.st_shndx == SHN_UNDEF || !s.st_value)
					continue;
				n = elf_strptr(elf, sh.sh_link, s.st_name);
				if (!n || !*n)
					continue;
				l = strlen(n) + 1;
				if (pass == 0) {
					cap++;
					strcap += l;
					continue;
				}
				memcpy(e->strings + soff, n, l);
				/* names like foo@@VERSION: keep foo */
				char *at = strchr(e->strings + soff, '@');
				if (at)
					*at = 0;
				e->syms[e->nsyms].addr = s.st_value;
				e->syms[e->nsyms].size = s.st_size;
				e->syms[e->nsyms].name = e->strings + soff;
				e->nsyms++;
				soff += l;
			}
		}
		if (pass == 0) {
			e->syms = calloc(cap ? cap : 1, sizeof(*e->syms));
			e->strings = malloc(strcap ? strcap : 1);
			if (!e->syms || !e->strings)
				goto out;
			strlen_total = strcap;
		}
	}
	(void)strlen_total;
	qsort(e->syms, e->nsyms, sizeof(*e->syms), cmp_sym);
	e->ok = 1;
out:
	if (elf)
		elf_end(elf);
	close(fd);
}

static struct elf_syms *elf_get(struct syms_proc *p, const char *path)
{
	struct elf_syms *e;

	for (e = p->elfs; e; e = e->next)
		if (!strcmp(e->path, path))
			return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->path = strdup(path);
	if (!e->path) {
		free(e);
		return NULL;
	}
	elf_load(e);
	e->next = p->elfs;
	p->elfs = e;
	return e;
}

void syms_proc_refresh(struct syms_proc *p)
{
	struct dwunw_map *e;
	struct map *maps;
	size_t ne, n = 0;

	if (dwunw_maps_load(p->pid, &e, &ne))
		return; /* keep the last good copy */
	maps = calloc(ne, sizeof(*maps));
	for (size_t i = 0; maps && i < ne; i++) {
		if (!(e[i].flags & DWUNW_MAP_X))
			continue;
		maps[n].start = e[i].start;
		maps[n].end = e[i].end;
		maps[n].off = e[i].offset;
		if (e[i].inode && e[i].path[0] == '/') {
			/* a deleted file is not opened at its path (another file may be there now): its
			 * name as the kernel gives it fails to open, and says why once */
			char name[4200];

			snprintf(name, sizeof(name), "%s%s", e[i].path,
				 e[i].flags & DWUNW_MAP_DELETED ? " (deleted)" : "");
			maps[n].elf = elf_get(p, name);
		} else {
			maps[n].elf = NULL;
		}
		n++;
	}
	free(e);
	if (n) {
		free(p->maps);
		p->maps = maps;
		p->nmaps = n;
	} else {
		free(maps);
	}
}

struct syms_proc *syms_proc_new(int pid)
{
	struct syms_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	syms_proc_refresh(p);
	return p;
}

void syms_proc_free(struct syms_proc *p)
{
	struct elf_syms *e, *nx;

	if (!p)
		return;
	for (e = p->elfs; e; e = nx) {
		nx = e->next;
		free(e->path);
		free(e->syms);
		free(e->strings);
		free(e->segs);
		free(e);
	}
	free(p->maps);
	free(p);
}

static const struct map *find_map(const struct syms_proc *p, uint64_t pc)
{
	for (size_t i = 0; i < p->nmaps; i++)
		if (pc >= p->maps[i].start && pc < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

void syms_resolve(struct syms_proc *p, uint64_t pc, int is_ret, struct syms_result *out)
{
	uint64_t look = is_ret && pc ? pc - 1 : pc, addr, foff;
	const struct map *m;
	const struct elf_syms *e;
	size_t lo, hi;

	memset(out, 0, sizeof(*out));
	m = find_map(p, look);
	if (!m) {
		syms_proc_refresh(p);
		m = find_map(p, look);
	}
	if (!m || !m->elf)
		return;
	e = m->elf;
	out->module = e->path;
	if (!e->ok)
		return;
	foff = look - m->start + m->off;
	addr = look;
	if (e->is_dyn) {
		addr = 0;
		for (size_t i = 0; i < e->nsegs; i++)
			if (foff >= e->segs[i].off && foff < e->segs[i].off + e->segs[i].filesz) {
				addr = foff - e->segs[i].off + e->segs[i].vaddr;
				break;
			}
		if (!addr)
			return;
	}
	/* last symbol starting at or below addr */
	lo = 0;
	hi = e->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (e->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return;
	const struct sym *s = &e->syms[lo - 1];
	/* prefer a sized symbol that covers addr among equal starts */
	if (s->size && addr >= s->addr + s->size)
		return;
	out->name = s->name;
	out->offset = addr - s->addr + (look != pc ? 1 : 0);
}
