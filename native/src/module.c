// SPDX-License-Identifier: GPL-2.0-only
/*
 * The module cache: a fixed number of slots, each active (refcnt > 0) or warm (refcnt == 0, ELF and
 * table kept). A reference is taken without a lock (an atomic on the slot's refcnt, checked
 * against the slot's generation); loading and reclaiming a slot happen under the context lock.
 * Reclaim takes the warm slot released longest ago (LRU: its warm_seq is stamped when its last
 * reference goes, once per capture). Slot structs live as long as the context, so a stale
 * pointer can never touch freed memory: it only fails the generation check. The byte bound
 * (its byte bound, below) frees warm slots the same way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "internal.h"
#include "fetch_queue.h"
#include "module.h"
#include "symbols.h"
#include "bytes.h"
#include "table_lazy.h"

/* Empty a slot we own exclusively (refcnt == DW_REF_EVICTING). */
static void unload(struct dwunw_module *m)
{
	atomic_fetch_add_explicit(&m->gen, 1, memory_order_release); /* now odd: empty */
	if (m->loaded) {
		dw_table_free(&m->table);
		dw_table_free(&m->full);
		dw_symtab_free(m->syms);
		m->syms = NULL;
		dw_elf_close(&m->elf);
		free(m->path);
		m->path = NULL;
	}
	m->loaded = 0;
	m->stale = 0;
	atomic_store_explicit(&m->table_state, 0, memory_order_relaxed);
	atomic_store_explicit(&m->full_state, 0, memory_order_relaxed);
	atomic_store_explicit(&m->syms_state, 0, memory_order_relaxed);
	atomic_store_explicit(&m->py_none, 0, memory_order_relaxed);
}

static int same_file(const struct dwunw_module *m, const struct stat *st)
{
	return m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
	       m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       m->ctime.tv_sec == st->st_ctim.tv_sec && m->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* A slot to load into: a never-used one, else the warm slot released first. Locked. */
static struct dwunw_module *claim_slot(struct dwunw_ctx_impl *c)
{
	struct dwunw_module *best = NULL;

	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		uint32_t zero = 0;
		if (!m->loaded && atomic_compare_exchange_strong(&m->refcnt, &zero, DW_REF_EVICTING))
			return m;
	}
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		if (!m->loaded || atomic_load(&m->refcnt) != 0)
			continue;
		/* A stale file goes first; then the least recently used (released longest ago). */
		if (!best || (m->stale && !best->stale) ||
		    (m->stale == best->stale && atomic_load(&m->warm_seq) < atomic_load(&best->warm_seq)))
			best = m;
	}
	if (best) {
		uint32_t zero = 0;
		if (!atomic_compare_exchange_strong(&best->refcnt, &zero, DW_REF_EVICTING))
			return claim_slot(c); /* taken meanwhile: look again */
		atomic_fetch_add(&c->evictions, 1);
		unload(best);
	}
	return best;
}

void dw_module_evict(struct dwunw_module *m)
{
	unload(m);
	atomic_store_explicit(&m->refcnt, 0, memory_order_release); /* an empty slot */
	atomic_fetch_add(&m->ctx->evictions, 1);
}

int dw_module_trim(struct dwunw_ctx_impl *c, uint32_t *freed)
{
	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		uint32_t zero = 0;

		/* warm since before the mark (a use since would have moved its warm_seq past it) */
		if (!m->loaded || m->is_image || atomic_load(&m->refcnt) != 0 ||
		    atomic_load(&m->warm_seq) > c->trim_mark)
			continue; /* an image given by the caller could not be loaded again */
		if (!atomic_compare_exchange_strong(&m->refcnt, &zero, DW_REF_EVICTING))
			continue; /* taken meanwhile: in use */
		dw_module_evict(m);
		n++;
	}
	c->trim_mark = atomic_load(&c->warm_clock);
	dw_cache_bound_locked(c); /* what lazy tables added since the last count */
	pthread_mutex_unlock(&c->lock);
	if (freed)
		*freed = n;
	return DWUNW_OK;
}

static int load(struct dwunw_module *m, const char *name, const char *open_path, const void *image,
		size_t size, const struct stat *st)
{
	int err = image ? dw_elf_open_image(&m->elf, image, size) : dw_elf_open_path(&m->elf, open_path);

	if (err)
		return err;
	m->path = strdup(name);
	if (!m->path) {
		dw_elf_close(&m->elf);
		return DWUNW_ERR_NOMEM;
	}
	m->is_image = image != NULL;
	if (st) {
		m->dev = st->st_dev;
		m->ino = st->st_ino;
		m->size = st->st_size;
		m->mtime = st->st_mtim;
		m->ctime = st->st_ctim;
	}
	m->loaded = 1;
	return DWUNW_OK;
}

int dw_module_acquire(struct dwunw_ctx_impl *c, const char *path, const char *open_path,
		      const void *image, size_t size, struct dwunw_module **out)
{
	struct stat st;
	struct dwunw_module *m;
	int err;

	*out = NULL;
	if (!path)
		return DWUNW_ERR_INVALID_ARG;
	if (!open_path)
		open_path = path;
	/* A caller's image registered under this path serves it even when no such file exists. */
	if (!image && dw_module_find_image(c, path, out) == DWUNW_OK)
		return DWUNW_OK;
	if (!image) {
		if (stat(open_path, &st))
			return dw_errno_to_err(errno);
		if (S_ISDIR(st.st_mode))
			return DWUNW_ERR_INVALID_ARG;
	}
	pthread_mutex_lock(&c->lock);
	/* A caller's image for this path wins over the file; a file must still be the same file. */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < c->nslots; i++) {
			m = &c->slots[i];
			if (!m->loaded || m->stale || m->is_image != (pass == 0) || strcmp(m->path, path))
				continue;
			if (m->is_image && image && (m->elf.image != image || m->elf.size != size)) {
				m->stale = 1; /* replaced by the new image */
				continue;
			}
			if (!m->is_image && image)
				continue;
			if (!m->is_image && !same_file(m, &st)) {
				/* Rebuilt or rewritten at its path: never serve its old table again. */
				m->stale = 1;
				if (c->cfg.warn) {
					char line[512];
					snprintf(line, sizeof(line), "dwunw: %s changed on disk since it was loaded; loading it again", path);
					c->cfg.warn(c->cfg.warn_arg, line);
				}
				continue;
			}
			if (dw_module_get(m, atomic_load(&m->gen)) == DWUNW_OK) {
				atomic_fetch_add(&c->hits, 1);
				pthread_mutex_unlock(&c->lock);
				*out = m;
				return DWUNW_OK;
			}
		}
	}
	atomic_fetch_add(&c->misses, 1);
	m = claim_slot(c);
	if (!m) {
		pthread_mutex_unlock(&c->lock);
		return DWUNW_ERR_CACHE_FULL;
	}
	err = load(m, path, open_path, image, size, image ? NULL : &st);
	if (err) {
		unload(m); /* back to empty */
		atomic_store_explicit(&m->refcnt, 0, memory_order_release);
		pthread_mutex_unlock(&c->lock);
		return err;
	}
	atomic_fetch_add_explicit(&m->gen, 1, memory_order_release); /* even: loaded */
	atomic_store_explicit(&m->refcnt, 1, memory_order_release);
	if (!m->is_image)
		dw_fetcher_module_loaded(c->fetcher, m, atomic_load_explicit(&m->gen, memory_order_acquire),
					 &m->elf, m->path);
	dw_cache_bound_locked(c); /* m is ours (refcnt 1): others make room for it */
	pthread_mutex_unlock(&c->lock);
	*out = m;
	return DWUNW_OK;
}

int dw_module_find_file(struct dwunw_ctx_impl *c, const char *path, uint32_t maj, uint32_t min,
			uint64_t ino, struct dwunw_module **out)
{
	int err = DWUNW_ERR_NO_MODULE;

	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->nslots && err; i++) {
		struct dwunw_module *m = &c->slots[i];
		/* a stale one too: stale means its path names another file now, not that it is wrong */
		if (m->loaded && !m->is_image && (uint64_t)m->ino == ino && major(m->dev) == maj &&
		    minor(m->dev) == min && !strcmp(m->path, path) &&
		    dw_module_get(m, atomic_load(&m->gen)) == DWUNW_OK) {
			*out = m;
			err = DWUNW_OK;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int dw_module_find_image(struct dwunw_ctx_impl *c, const char *name, struct dwunw_module **out)
{
	int err = DWUNW_ERR_NO_MODULE;

	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->nslots && err; i++) {
		struct dwunw_module *m = &c->slots[i];
		if (m->loaded && !m->stale && m->is_image && !strcmp(m->path, name) &&
		    dw_module_get(m, atomic_load(&m->gen)) == DWUNW_OK) {
			*out = m;
			err = DWUNW_OK;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!err)
		atomic_fetch_add(&c->hits, 1);
	return err;
}

static void table_input_ranges(const struct dw_elf *e, uint64_t (*ranges)[2], uint32_t *n, uint32_t max)
{
	*n = 0;
	for (uint32_t i = 0; i < e->nphdrs && *n < max; i++) {
		const struct dw_phdr *p = &e->phdrs[i];
		if (p->type == 1 /* PT_LOAD */ && (p->flags & 1 /* PF_X */)) {
			ranges[*n][0] = p->vaddr;
			ranges[*n][1] = p->vaddr + p->memsz;
			(*n)++;
		}
	}
}

static int elf_read(void *arg, uint64_t vaddr, void *buf, size_t len)
{
	return dw_elf_read_vaddr(arg, vaddr, buf, len);
}

/* FDEs from which a table is built by range: DW_LAZY_MIN_FDES, or DWUNW_LAZY_MIN_FDES from the
 * environment (tests set 1 to send small modules through the lazy path). */
static uint32_t lazy_min_fdes(void)
{
	static _Atomic uint32_t v;
	uint32_t n = atomic_load_explicit(&v, memory_order_relaxed);

	if (!n) {
		const char *s = getenv("DWUNW_LAZY_MIN_FDES");
		char *end;
		unsigned long x = s ? strtoul(s, &end, 10) : 0;
		n = s && *s && !*end && x && x <= UINT32_MAX ? (uint32_t)x : DW_LAZY_MIN_FDES;
		atomic_store_explicit(&v, n, memory_order_relaxed);
	}
	return n;
}

static int build_table(struct dwunw_module *m, int whole, struct dw_table *out)
{
	struct dw_elf *e = &m->elf;
	const struct dw_section *eh = NULL, *dbg = NULL, *text = NULL, *got = NULL;
	struct dw_cfi_section seh, sdbg;
	uint64_t ranges[16][2];
	struct dw_table_input in = { 0 };
	int err_eh, err_dbg;

	if (!e->arch)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	err_eh = dw_elf_section(e, DW_SEC_EH_FRAME, &eh);
	err_dbg = dw_elf_section(e, DW_SEC_DEBUG_FRAME, &dbg);
	if (err_eh && err_dbg)
		return err_eh != DWUNW_ERR_NO_DWARF ? err_eh : err_dbg;
	/* Only their addresses (textrel/datarel bases): their bytes are never read. */
	if (e->sec[DW_SEC_TEXT].index)
		text = &e->sec[DW_SEC_TEXT];
	if (e->sec[DW_SEC_GOT].index)
		got = &e->sec[DW_SEC_GOT];
	in.machine = e->machine;
	in.addr_size = e->arch->addr_size;
	if (!err_eh) {
		seh = (struct dw_cfi_section){
			.data = eh->data, .size = eh->size, .vaddr = eh->addr, .is_eh = 1,
			.addr_size = in.addr_size, .machine = e->machine,
			.size_unknown = eh->index == 0, /* found through PT_GNU_EH_FRAME */
			.text_vaddr = text ? text->addr : 0, .data_vaddr = got ? got->addr : 0,
			.read_mem = elf_read, .arg = e,
		};
		in.eh_frame = &seh;
	}
	if (!err_dbg) {
		sdbg = (struct dw_cfi_section){
			.data = dbg->data, .size = dbg->size, .vaddr = 0, .is_eh = 0,
			.addr_size = in.addr_size, .machine = e->machine,
			.read_mem = elf_read, .arg = e,
		};
		in.debug_frame = &sdbg;
	}
	table_input_ranges(e, ranges, &in.nranges, 16);
	in.ranges = (const uint64_t (*)[2])ranges;
	in.arch = e->arch;
	/* A big module's table is built by range as pcs are first looked up: its directory is
	 * .eh_frame_hdr's sorted table. */
	if (!whole && in.eh_frame && !in.debug_frame) {
		const struct dw_section *hdr = NULL;
		struct dw_cursor c;
		if (dw_elf_section(e, DW_SEC_EH_FRAME_HDR, &hdr) == DWUNW_OK && hdr->size >= 12) {
			/* fde_count of the usual header (udata4): the size that decides */
			cur_init(&c, hdr->data + 8, 4);
			if (((hdr->data[1] & 0x0f) == DW_EH_PE_sdata4 || (hdr->data[1] & 0x0f) == DW_EH_PE_udata4) &&
			    hdr->data[2] == DW_EH_PE_udata4 && cur_u32(&c) >= lazy_min_fdes() &&
			    dw_table_lazy_init(&in, hdr->data, hdr->size, hdr->addr, out) == DWUNW_OK)
				return DWUNW_OK;
		}
	}
	return dw_table_build(&in, out);
}

/* Build *t once (state: 0 not built, 1 built, < 0 the error), under the module's lock. */
static int table_once(struct dwunw_module *m, _Atomic int *state, int whole, struct dw_table *t)
{
	int s = atomic_load_explicit(state, memory_order_acquire);

	if (s == 0) {
		int built = 0;
		pthread_mutex_lock(&m->lock);
		s = atomic_load_explicit(state, memory_order_relaxed);
		if (s == 0) {
			int err = build_table(m, whole, t);
			/* A table with skipped entries is still a table. */
			s = err ? err : 1;
			atomic_store_explicit(state, s, memory_order_release);
			built = s == 1;
		}
		pthread_mutex_unlock(&m->lock);
		if (built)
			dw_module_grew(m); /* once per table, not per frame */
	}
	return s < 0 ? s : DWUNW_OK;
}

int dw_module_table(struct dwunw_module *m, const struct dw_table **out)
{
	int err = table_once(m, &m->table_state, 0, &m->table);

	if (err)
		return err;
	*out = &m->table;
	return DWUNW_OK;
}

int dw_module_full_table(struct dwunw_module *m, const struct dw_table **out)
{
	int err = dw_module_table(m, out);

	if (err || !(*out)->lazy)
		return err;
	err = table_once(m, &m->full_state, 1, &m->full);
	if (err)
		return err;
	*out = &m->full;
	return DWUNW_OK;
}

/*
 * ---- The byte bound ----
 * The module cache's byte bound (config cache_bytes): the loaded modules' bytes are counted when
 * one is loaded or builds a table, symbol index or line table, and at dwunw_cache_trim; past the
 * bound the warm modules (refcnt 0) are freed, stale ones first, then the least recently used
 * (released longest ago: warm_seq). A module in use is never freed: a capture holds a reference
 * on every module its frames use, and a slot is emptied only by winning the CAS of its refcnt
 * from 0 to DW_REF_EVICTING, which a reader's lock-free get races against (module.c). The count
 * is a walk of the slots under the context lock: never on the unwinding path, whose only LRU
 * work stays dw_module_put's stamp when a module's last reference goes.
 */

/* The warm module to free first, or NULL: stale before fresh, then the oldest release. An image
 * the caller registered cannot be loaded again and stays (as dwunw_cache_trim leaves it). */
static struct dwunw_module *victim(struct dwunw_ctx_impl *c, const uint64_t *bytes)
{
	struct dwunw_module *best = NULL;

	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];

		if (!m->loaded || m->is_image || !bytes[i] || atomic_load(&m->refcnt) != 0)
			continue;
		if (!best || (m->stale && !best->stale) ||
		    (m->stale == best->stale && atomic_load(&m->warm_seq) < atomic_load(&best->warm_seq)))
			best = m;
	}
	return best;
}

void dw_cache_bound_locked(struct dwunw_ctx_impl *c)
{
	uint64_t total = 0, *bytes = c->bound_scratch; /* nslots of them, ours under the lock */
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];

		bytes[i] = m->loaded ? dw_module_bytes(m) : 0;
		total += bytes[i];
	}
	while (total > c->bytes_bound) {
		struct dwunw_module *m = victim(c, bytes);
		uint32_t zero = 0;

		if (!m)
			break; /* the rest is in use */
		if (!atomic_compare_exchange_strong(&m->refcnt, &zero, DW_REF_EVICTING)) {
			bytes[m->slot] = 0; /* taken meanwhile: in use, not counted as freeable */
			continue;
		}
		total -= bytes[m->slot];
		bytes[m->slot] = 0;
		dw_module_evict(m);
		atomic_fetch_add(&c->bytes_evictions, 1);
	}
}

void dw_module_grew(struct dwunw_module *m)
{
	struct dwunw_ctx_impl *c = m->ctx;

	pthread_mutex_lock(&c->lock);
	dw_cache_bound_locked(c);
	pthread_mutex_unlock(&c->lock);
}
