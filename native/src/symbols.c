// SPDX-License-Identifier: GPL-2.0-only
/* A module's symbol index (its .symtab/.dynsym, debug file, MiniDebugInfo), file:line, dwunw_symbolize. */
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "debuginfo.h"
#include "fetch_queue.h"
#include "demangle.h"
#include "dwarf_line.h"
#include "plt_syms.h"
#include "internal.h"
#include "module.h"
#include "symbols.h"

/* Sources in order of preference for the name at an address shared by several symbols. */
enum src {
	SRC_SYMTAB,      /* the module's own .symtab */
	SRC_DEBUG,       /* the separate debug file's .symtab */
	SRC_DEBUGDATA,   /* MiniDebugInfo's .symtab */
	SRC_DYNSYM,      /* the module's .dynsym */
	SRC_PLT,         /* a synthetic name@plt for a PLT stub */
};

static const uint32_t src_flags[] = {
	[SRC_SYMTAB] = 0,
	[SRC_DEBUG] = DWUNW_SYM_FROM_DEBUG_FILE,
	[SRC_DEBUGDATA] = DWUNW_SYM_FROM_DEBUGDATA,
	[SRC_DYNSYM] = DWUNW_SYM_DYNSYM,
	[SRC_PLT] = DWUNW_SYM_PLT,
};

#define MAX_WALK_BACK 256   /* symbols examined below the candidate when symbols nest */

/* A symbol while the index is built. */
struct cand {
	uint64_t addr;
	uint64_t size;
	uint64_t sec_end;        /* end of its section (0 = unknown): bounds a size-0 symbol */
	const char *name;
	uint8_t bind_rank;       /* 2 GLOBAL, 1 WEAK, 0 LOCAL */
	uint8_t src;             /* enum src */
	uint8_t is_func;
	uint8_t pad;
	uint32_t name_rank;      /* leading underscores: fewer wins a tie */
};

/* A symbol in the final index, sorted by addr. */
struct sym {
	uint64_t addr;
	uint64_t end;            /* exclusive */
	uint64_t max_end;        /* greatest end of this and every earlier symbol */
	const char *name;        /* into a string table of one of the ELFs the symtab keeps */
	uint32_t flags;          /* DWUNW_SYM_* */
	uint32_t pad;
};

struct dw_symtab {
	struct sym *syms;
	size_t nsyms;
	struct dw_elf *elf;      /* the module's: lives longer than the symtab */
	struct dw_elf dbg;       /* separate debug file, when have_dbg */
	int have_dbg;
	struct dw_elf mdi;       /* MiniDebugInfo image, when have_mdi */
	int have_mdi;
	void *mdi_buf;
	char dbg_path[PATH_MAX];
	char *plt_names;         /* the name@plt strings */
	struct dw_symtab *older;  /* the index this one replaced (a debug file came later): its
				   * names may still be held by a reader until the module unloads */
	uint32_t gen;            /* the module's generation when built */
	uint64_t build_ns;
	uint64_t line_ns;

	pthread_mutex_t lock;    /* line table build */
	_Atomic int lines_state; /* 0 not built, 1 built (lines may be NULL: none), < 0 error */
	struct dw_lines *lines;
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cands_push(struct cands *c, const struct cand *x)
{
	if (c->n == c->cap) {
		size_t n = c->cap ? c->cap * 2 : 1024;
		struct cand *v = realloc(c->v, n * sizeof(*v));
		if (!v)
			return DWUNW_ERR_NOMEM;
		c->v = v;
		c->cap = n;
	}
	c->v[c->n++] = *x;
	return DWUNW_OK;
}

/* ---- reading one symbol table ---------------------------------------------------------------- */

struct secinfo {
	uint64_t addr, end;
	uint64_t flags;
};

/* Section flags and ranges, indexed by section number, to place each symbol. */
static struct secinfo *section_infos(struct dw_elf *e, size_t *n)
{
	Elf *elf = e->elf;
	size_t shnum;
	struct secinfo *v;

	*n = 0;
	if (!elf || elf_getshdrnum(elf, &shnum) != 0 || shnum == 0 || shnum > 1u << 20)
		return NULL;
	v = calloc(shnum, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 1; i < shnum; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_getscn(elf, i);
		if (!scn || !gelf_getshdr(scn, &sh))
			continue;
		v[i].addr = sh.sh_addr;
		v[i].end = sh.sh_size > UINT64_MAX - sh.sh_addr ? UINT64_MAX : sh.sh_addr + sh.sh_size;
		v[i].flags = sh.sh_flags;
	}
	*n = shnum;
	return v;
}

/* The string table a symbol section links to: data and size, or -1. */
static int linked_strtab(struct dw_elf *e, const struct dw_section *symsec, enum dw_sec_id usual,
			 const char **data, uint64_t *size)
{
	GElf_Shdr sh;
	Elf_Scn *scn = elf_getscn(e->elf, symsec->index);
	const struct dw_section *s;

	if (!scn || !gelf_getshdr(scn, &sh))
		return -1;
	uint32_t link = sh.sh_link;
	if (link == e->sec[usual].index) {
		if (dw_elf_section(e, usual, &s))
			return -1;
		*data = (const char *)s->data;
		*size = s->size;
		return 0;
	}
	/* Some other table: read it raw (string tables are never compressed in practice). */
	scn = elf_getscn(e->elf, link);
	const uint8_t *raw;
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB || (sh.sh_flags & SHF_COMPRESSED) ||
	    dw_elf_raw(e, sh.sh_offset, sh.sh_size, &raw))
		return -1;
	*data = (const char *)raw;
	*size = sh.sh_size;
	return 0;
}

static int skip_notype_name(const char *name)
{
	/* Mapping symbols ($x, $d), local labels (.L), annobin notes (.annobin_*): not functions. */
	return name[0] == '$' || name[0] == '.';
}

static uint32_t underscores(const char *s)
{
	uint32_t n = 0;
	while (s[n] == '_')
		n++;
	return n;
}

/* Function symbols of one table into c (and untyped code labels into notype). */
static int collect(struct dw_elf *e, enum dw_sec_id id, enum src src, struct cands *funcs,
		   struct cands *notype)
{
	const struct dw_section *ss;
	const char *str;
	uint64_t strsize;
	struct secinfo *secs;
	size_t nsecs, entsize = e->elf_class == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	int rc = DWUNW_OK;

	if (!e->elf || dw_elf_section(e, id, &ss) || !ss->index)
		return DWUNW_OK;
	if (linked_strtab(e, ss, id == DW_SEC_DYNSYM ? DW_SEC_DYNSTR : DW_SEC_STRTAB, &str, &strsize) ||
	    strsize == 0)
		return DWUNW_OK;
	int str_terminated = str[strsize - 1] == 0;
	secs = section_infos(e, &nsecs);

	uint64_t n = ss->size / entsize;
	for (uint64_t i = 1; i < n && !rc; i++) {
		const uint8_t *p = ss->data + i * entsize;
		uint64_t value, size;
		uint32_t name_off;
		uint16_t shndx;
		uint8_t info;

		if (e->elf_class == ELFCLASS64) {
			Elf64_Sym s;
			memcpy(&s, p, sizeof(s));
			value = s.st_value, size = s.st_size, name_off = s.st_name;
			shndx = s.st_shndx, info = s.st_info;
		} else {
			Elf32_Sym s;
			memcpy(&s, p, sizeof(s));
			value = s.st_value, size = s.st_size, name_off = s.st_name;
			shndx = s.st_shndx, info = s.st_info;
		}
		unsigned type = GELF_ST_TYPE(info), bind = GELF_ST_BIND(info);
		int func = type == STT_FUNC || type == STT_GNU_IFUNC;
		if ((!func && type != STT_NOTYPE) || shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
			continue;
		if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_LOCAL && bind != STB_GNU_UNIQUE)
			continue;
		if (name_off >= strsize)
			continue;
		const char *name = str + name_off;
		if (!*name || (!str_terminated && !memchr(name, 0, strsize - name_off)))
			continue;
		const struct secinfo *sec = shndx < nsecs ? &secs[shndx] : NULL;
		if (!func) {
			/* An untyped label counts only inside code. */
			if (!sec || !(sec->flags & SHF_EXECINSTR) || !(sec->flags & SHF_ALLOC) ||
			    skip_notype_name(name))
				continue;
		}
		struct cand c = {
			.addr = value,
			.size = size,
			.sec_end = sec && (sec->flags & SHF_ALLOC) && value >= sec->addr && value < sec->end ?
				   sec->end : 0,
			.name = name,
			.bind_rank = bind == STB_LOCAL ? 0 : bind == STB_WEAK ? 1 : 2,
			.src = (uint8_t)src,
			.is_func = (uint8_t)func,
			.name_rank = underscores(name),
		};
		rc = cands_push(func ? funcs : notype, &c);
	}
	free(secs);
	return rc;
}

/* ---- merging ----------------------------------------------------------------------------------- */

/* By address, then the preferred name first. */
static int cmp_cand(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->is_func != b->is_func)
		return a->is_func ? -1 : 1;
	/* "malloc" over its versioned alias "malloc@@GLIBC_2.2.5" */
	if ((strchr(a->name, '@') != NULL) != (strchr(b->name, '@') != NULL))
		return strchr(a->name, '@') ? 1 : -1;
	if (a->bind_rank != b->bind_rank)
		return a->bind_rank > b->bind_rank ? -1 : 1;
	if (a->src != b->src)
		return a->src < b->src ? -1 : 1;
	if ((a->size != 0) != (b->size != 0))
		return a->size ? -1 : 1;
	if (a->name_rank != b->name_rank)
		return a->name_rank < b->name_rank ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Sort, keep one symbol per address (the preferred name, the largest size), in place. */
static void sort_unique(struct cands *c)
{
	size_t out = 0;

	if (!c->n)
		return;
	qsort(c->v, c->n, sizeof(*c->v), cmp_cand);
	for (size_t i = 0; i < c->n; i++) {
		if (out && c->v[out - 1].addr == c->v[i].addr) {
			struct cand *w = &c->v[out - 1];
			if (c->v[i].size > w->size)
				w->size = c->v[i].size;
			if (!w->sec_end)
				w->sec_end = c->v[i].sec_end;
			continue;
		}
		c->v[out++] = c->v[i];
	}
	c->n = out;
}

/* Index of the last candidate at or below addr, or -1. */
static ptrdiff_t cand_floor(const struct cands *c, uint64_t addr)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t)lo - 1;
}

/* Where symbol i stops covering: start + size, or (size 0) the next symbol or its section's end. */
static uint64_t cand_end(const struct cands *c, size_t i, uint64_t limit)
{
	const struct cand *s = &c->v[i];

	if (s->size)
		return s->size > UINT64_MAX - s->addr ? UINT64_MAX : s->addr + s->size;
	uint64_t end = i + 1 < c->n ? c->v[i + 1].addr : (limit > s->addr ? limit : s->addr + 1);
	if (s->sec_end && s->sec_end > s->addr && s->sec_end < end)
		end = s->sec_end;
	return end;
}

/* Untyped code labels that no function covers join the functions (sorted and unique). */
static int add_uncovered(struct cands *funcs, struct cands *notype, uint64_t limit)
{
	size_t keep = 0;

	sort_unique(notype);
	for (size_t i = 0; i < notype->n; i++) {
		const struct cand *x = &notype->v[i];
		ptrdiff_t j = cand_floor(funcs, x->addr);
		int covered = 0;
		/* Only a sized function covers: one of size 0 would just stop at the label. */
		for (ptrdiff_t k = j, steps = 0; k >= 0 && steps < 8 && !covered; k--, steps++)
			covered = funcs->v[k].addr == x->addr ||
				  (funcs->v[k].size && x->addr < cand_end(funcs, (size_t)k, limit));
		if (!covered)
			notype->v[keep++] = *x;
	}
	notype->n = keep;
	for (size_t i = 0; i < keep; i++) {
		int rc = cands_push(funcs, &notype->v[i]);
		if (rc)
			return rc;
	}
	if (keep)
		sort_unique(funcs);
	return DWUNW_OK;
}

static int finalize(struct dw_symtab *s, struct cands *c, uint64_t limit)
{
	uint64_t max_end = 0;

	s->nsyms = 0;
	if (!c->n)
		return DWUNW_OK;
	s->syms = malloc(c->n * sizeof(*s->syms));
	if (!s->syms)
		return DWUNW_ERR_NOMEM;
	for (size_t i = 0; i < c->n; i++) {
		struct sym *y = &s->syms[i];
		y->addr = c->v[i].addr;
		y->end = cand_end(c, i, limit);
		if (y->end > max_end)
			max_end = y->end;
		y->max_end = max_end;
		y->name = c->v[i].name;
		y->flags = src_flags[c->v[i].src];
		y->pad = 0;
	}
	s->nsyms = c->n;
	return DWUNW_OK;
}

/* ---- building ----------------------------------------------------------------------------------- */

/* name@plt for each PLT stub, as perf and gdb name them (the stub sections have no symbols). */
static int collect_plt(struct dw_elf *e, struct dw_symtab *s, struct cands *funcs)
{
	struct dw_plt_sym *v;
	size_t n;
	int rc = dw_plt_syms(e, &v, &n, &s->plt_names);

	for (size_t i = 0; i < n && !rc; i++) {
		struct cand c = {
			.addr = v[i].addr,
			.sec_end = v[i].end,
			.name = v[i].name,
			.src = SRC_PLT,
			.is_func = 1,
		};
		rc = cands_push(funcs, &c);
	}
	free(v);
	return rc;
}

static int has_data(struct dw_elf *e, enum dw_sec_id id)
{
	return e->sec[id].index && !e->sec[id].nobits;
}

int dw_symtab_build(const struct dwunw_ctx_impl *c, const struct dwunw_module *m, struct dw_symtab **out)
{
	struct dw_symtab *s;
	struct cands funcs = { 0 }, notype = { 0 };
	/* The module's ELF loads sections lazily (under its own lock): not const in practice. */
	struct dw_elf *e = (struct dw_elf *)&m->elf;
	uint64_t t0 = now_ns();
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return DWUNW_ERR_NOMEM;
	s->elf = e;
	s->gen = atomic_load_explicit(&((struct dwunw_module *)m)->gen, memory_order_acquire);
	pthread_mutex_init(&s->lock, NULL);

	/* A separate debug file, when the module lacks symbols or line information. */
	if (!(c->cfg.flags & DWUNW_CFG_NO_DEBUG_FILES) &&
	    (!has_data(e, DW_SEC_SYMTAB) || !has_data(e, DW_SEC_DEBUG_LINE))) {
		const char *path = m->path && strchr(m->path, '/') ? m->path : NULL;
		char refused[PATH_MAX + 128];
		if (dw_debug_file_open(e, path, c->sysroot, c->debug_dirs, &s->dbg, s->dbg_path,
				       sizeof(s->dbg_path), refused, sizeof(refused)) == DWUNW_OK)
			s->have_dbg = 1;
		else if (refused[0] && c->cfg.warn) {
			char line[sizeof(refused) + 64];
			snprintf(line, sizeof(line), "dwunw: debug file refused: %s", refused);
			c->cfg.warn(c->cfg.warn_arg, line);
		}
	}
	/* One fetched from debuginfod (debuginfod.c), matched by build id. */
	if (!s->have_dbg && !has_data(e, DW_SEC_SYMTAB) &&
	    dw_fetcher_path(c->fetcher, e, s->dbg_path, sizeof(s->dbg_path)) == 0 &&
	    dw_debug_file_at(e, s->dbg_path, &s->dbg) == DWUNW_OK)
		s->have_dbg = 1;
	/* MiniDebugInfo, unless the debug file already has the full .symtab. */
	if (has_data(e, DW_SEC_GNU_DEBUGDATA) && !(s->have_dbg && has_data(&s->dbg, DW_SEC_SYMTAB)) &&
	    dw_debugdata_open(e, &s->mdi, &s->mdi_buf) == DWUNW_OK)
		s->have_mdi = 1;

	rc = collect(e, DW_SEC_SYMTAB, SRC_SYMTAB, &funcs, &notype);
	if (!rc && s->have_dbg)
		rc = collect(&s->dbg, DW_SEC_SYMTAB, SRC_DEBUG, &funcs, &notype);
	if (!rc && s->have_mdi)
		rc = collect(&s->mdi, DW_SEC_SYMTAB, SRC_DEBUGDATA, &funcs, &notype);
	if (!rc)
		rc = collect(e, DW_SEC_DYNSYM, SRC_DYNSYM, &funcs, &notype);
	if (!rc)
		rc = collect_plt(e, s, &funcs);

	uint64_t limit = e->exec_hi ? e->exec_hi : UINT64_MAX;
	if (!rc) {
		sort_unique(&funcs);
		if (notype.n)
			rc = add_uncovered(&funcs, &notype, limit);
	}
	if (!rc)
		rc = finalize(s, &funcs, limit);
	free(funcs.v);
	free(notype.v);
	if (rc) {
		dw_symtab_free(s);
		return rc;
	}
	s->build_ns = now_ns() - t0;
	*out = s;
	return DWUNW_OK;
}

uint64_t dw_symtab_bytes(const struct dw_symtab *s)
{
	if (!s)
		return 0;
	/* The line table is left out: built only when file:line is asked for. */
	/* the debug file's bytes grow as its sections are read (a line table): read atomically, the
	 * byte bound counts them while other threads symbolize */
	return sizeof(*s) + s->nsyms * sizeof(s->syms[0]) +
	       (s->have_dbg ? __atomic_load_n(&s->dbg.held, __ATOMIC_RELAXED) : 0) + (s->have_mdi ? s->mdi.size : 0);
}

uint64_t dw_symtab_lines_bytes(const struct dw_symtab *s)
{
	struct dw_lines_stats st;

	if (!s || atomic_load_explicit(&s->lines_state, memory_order_acquire) != 1)
		return 0;
	dw_lines_stats(s->lines, &st);
	return st.bytes;
}

int dw_symtab_lines_done(const struct dw_symtab *s)
{
	return s && atomic_load_explicit(&s->lines_state, memory_order_relaxed) != 0;
}

void dw_symtab_free(struct dw_symtab *s)
{
	if (!s)
		return;
	dw_symtab_free(s->older);
	dw_lines_free(s->lines);
	free(s->syms);
	if (s->have_dbg)
		dw_elf_close(&s->dbg);
	if (s->have_mdi)
		dw_elf_close(&s->mdi);
	free(s->mdi_buf);
	free(s->plt_names);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- line information --------------------------------------------------------------------------- */

static const uint8_t *sec_data(struct dw_elf *e, enum dw_sec_id id, uint64_t *size)
{
	const struct dw_section *sec;

	*size = 0;
	if (dw_elf_section(e, id, &sec))
		return NULL;
	*size = sec->size;
	return sec->data;
}

static int get_info(void *arg, const uint8_t **info, uint64_t *info_size, const uint8_t **abbrev,
		    uint64_t *abbrev_size)
{
	struct dw_elf *e = arg;

	*info = sec_data(e, DW_SEC_DEBUG_INFO, info_size);
	*abbrev = sec_data(e, DW_SEC_DEBUG_ABBREV, abbrev_size);
	return *info && *abbrev ? 0 : -1;
}

static int build_lines(struct dw_symtab *s)
{
	struct dw_elf *le = s->have_dbg && has_data(&s->dbg, DW_SEC_DEBUG_LINE) ? &s->dbg : s->elf;
	struct dw_line_input in = { 0 };
	const struct dw_section *text = &s->elf->sec[DW_SEC_TEXT];

	in.line = sec_data(le, DW_SEC_DEBUG_LINE, &in.line_size);
	if (!in.line)
		return DWUNW_OK; /* no line information: lookups give none */
	in.line_str = sec_data(le, DW_SEC_DEBUG_LINE_STR, &in.line_str_size);
	in.str = sec_data(le, DW_SEC_DEBUG_STR, &in.str_size);
	in.addr_size = le->elf_class == ELFCLASS32 ? 4 : 8;
	/* Code the linker discarded sits at 0; keep 0 only when the code really starts there. */
	in.drop_zero = text->index ? text->addr != 0 : s->elf->exec_lo != 0;
	in.get_info = get_info;
	in.get_info_arg = le;
	return dw_lines_build(&in, &s->lines);
}

static int lines_get(struct dw_symtab *s, struct dw_lines **out)
{
	int st = atomic_load_explicit(&s->lines_state, memory_order_acquire);

	if (st == 0) {
		pthread_mutex_lock(&s->lock);
		st = atomic_load_explicit(&s->lines_state, memory_order_relaxed);
		if (st == 0) {
			uint64_t t0 = now_ns();
			int err = build_lines(s);
			s->line_ns = now_ns() - t0;
			st = err ? err : 1;
			atomic_store_explicit(&s->lines_state, st, memory_order_release);
		}
		pthread_mutex_unlock(&s->lock);
	}
	*out = st == 1 ? s->lines : NULL;
	return st < 0 ? st : DWUNW_OK;
}

/* ---- lookup ------------------------------------------------------------------------------------- */

static const struct sym *find_sym(const struct dw_symtab *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The nearest symbol below, or an earlier one that still covers addr (nested symbols). */
	for (size_t i = lo, steps = 0; i > 0 && steps < MAX_WALK_BACK; i--, steps++) {
		const struct sym *y = &s->syms[i - 1];
		if (addr < y->end)
			return y;
		if (y->max_end <= addr)
			break;
	}
	return NULL;
}

int dw_symtab_line(struct dw_symtab *s, uint64_t addr, char *file, size_t filelen, uint32_t *line)
{
	struct dw_lines *lines;

	if (filelen)
		file[0] = 0;
	*line = 0;
	if (lines_get(s, &lines) != DWUNW_OK || !lines || !dw_lines_lookup(lines, addr, file, filelen, line))
		return DWUNW_ERR_NOT_FOUND;
	return DWUNW_OK;
}

int dw_symtab_lookup(struct dw_symtab *s, uint64_t addr, struct dwunw_symbol *out, bool lines)
{
	const struct sym *y;

	if (!out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	if (!s)
		return DWUNW_ERR_INVALID_ARG;
	y = find_sym(s, addr);
	if (lines)
		dw_symtab_line(s, addr, out->file, sizeof(out->file), &out->line);
	if (!y)
		return DWUNW_ERR_NOT_FOUND;
	dw_demangle(y->name, out->name, sizeof(out->name));
	out->offset = addr - y->addr;
	out->sym_addr = y->addr;
	out->flags = y->flags;
	return DWUNW_OK;
}

void dw_symtab_stats(const struct dw_symtab *s, struct dw_symtab_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return;
	out->nsyms = s->nsyms;
	out->build_ns = s->build_ns;
	out->line_ns = s->line_ns;
	out->debug_file = s->have_dbg ? s->dbg_path : NULL;
	out->has_debugdata = s->have_mdi;
	if (atomic_load_explicit(&s->lines_state, memory_order_acquire) == 1)
		dw_lines_stats(s->lines, &out->lines);
}

int dw_symtab_func_start(struct dw_symtab *s, uint64_t addr, uint64_t *start)
{
	const struct sym *y;

	if (!s || !(y = find_sym(s, addr)))
		return DWUNW_ERR_NOT_FOUND;
	*start = y->addr;
	return DWUNW_OK;
}

int dw_symtab_with_debug(const struct dwunw_ctx_impl *c, const struct dwunw_module *m, struct dw_symtab *old,
			 struct dw_symtab **out)
{
	struct dw_symtab *s = NULL;

	if (!old || old->have_dbg || dw_symtab_build(c, m, &s) != DWUNW_OK)
		return DWUNW_ERR_NOT_FOUND;
	if (!s->have_dbg) {
		dw_symtab_free(s);
		return DWUNW_ERR_NOT_FOUND;
	}
	s->older = old; /* readers may still hold the old one: freed with the new */
	*out = s;
	return DWUNW_OK;
}

int dw_symtab_is_for(const struct dw_symtab *s, uint32_t gen)
{
	return s->gen == gen;
}
