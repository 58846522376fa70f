// SPDX-License-Identifier: GPL-2.0-only
/* The context: configuration, the module cache's slots, and the public module/table calls. */
#include <stdlib.h>
#include <string.h>
#include "core_keep.h"
#include "debuginfod.h"
#include "internal.h"
#include "module.h"
#include "proc.h"
#include "symbols.h"

DWUNW_API int dwunw_init(struct dwunw_ctx *ctx, const struct dwunw_config *cfg)
{
	struct dwunw_ctx_impl *c;
	int err = DWUNW_OK;

	if (!ctx)
		return DWUNW_ERR_INVALID_ARG;
	memset(ctx, 0, sizeof(*ctx));
	if (cfg && (cfg->size < offsetof(struct dwunw_config, modules) || cfg->size > 4096))
		return DWUNW_ERR_INVALID_ARG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return DWUNW_ERR_NOMEM;
	if (cfg)
		memcpy(&c->cfg, cfg, cfg->size < sizeof(c->cfg) ? cfg->size : sizeof(c->cfg));
	c->cfg.size = sizeof(c->cfg);
	if (!c->cfg.cache_slots)
		c->cfg.cache_slots = 16;
	if (c->cfg.cache_slots > 4096) {
		free(c);
		return DWUNW_ERR_INVALID_ARG;
	}
	c->sysroot = c->cfg.sysroot ? strdup(c->cfg.sysroot) : NULL;
	c->debug_dirs = strdup(c->cfg.debug_dirs ? c->cfg.debug_dirs : "/usr/lib/debug");
	c->cfg.sysroot = c->sysroot;
	c->cfg.debug_dirs = c->debug_dirs;
	c->nslots = c->cfg.cache_slots;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	c->bound_scratch = calloc(c->nslots, sizeof(*c->bound_scratch));
	if (!c->cfg.cache_bytes)
		c->cfg.cache_bytes = DWUNW_CACHE_BYTES_DEFAULT;
	c->bytes_bound = c->cfg.cache_bytes;
	if (!c->debug_dirs || (cfg && cfg->sysroot && !c->sysroot) || !c->slots || !c->bound_scratch) {
		free(c->sysroot);
		free(c->debug_dirs);
		free(c->slots);
		free(c->bound_scratch);
		free(c);
		return DWUNW_ERR_NOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	/* the memo's shape caches: every set to be emptied before first use (dw_memo_fill) */
	memset(c->memo_dirty, 0xff, sizeof(c->memo_dirty));
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		m->slot = i;
		m->ctx = c;
		atomic_init(&m->gen, 1);
		pthread_mutex_init(&m->lock, NULL);
	}
	if (c->cfg.flags & DWUNW_CFG_DEBUGINFOD)
		dw_fetcher_start(c);
	ctx->magic = DWUNW_CTX_MAGIC;
	ctx->version = DWUNW_VERSION_NUMBER;
	ctx->impl = c;

	/* Preloaded modules stay warm in the cache. */
	for (uint32_t i = 0; i < c->cfg.nmodules && !err; i++) {
		const struct dwunw_module_source *src = &c->cfg.modules[i];
		struct dwunw_module *m;
		err = dw_module_acquire(c, src->path, NULL, src->image, src->image_size, &m);
		if (!err)
			dw_module_put(m);
	}
	c->cfg.modules = NULL;
	c->cfg.nmodules = 0;
	if (err)
		dwunw_shutdown(ctx);
	return err;
}



DWUNW_API void dwunw_shutdown(struct dwunw_ctx *ctx)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c)
		return;
	dw_fetcher_stop(c);
	dw_procs_free(c);
	dw_core_forget_all(c);
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		if (m->loaded) {
			dw_table_free(&m->table);
			dw_table_free(&m->full);
			dw_symtab_free(m->syms);
			dw_elf_close(&m->elf);
			free(m->path);
		}
		pthread_mutex_destroy(&m->lock);
	}
	pthread_mutex_destroy(&c->lock);
	free(atomic_load(&c->live_spare));
	free(c->slots);
	free(c->bound_scratch);
	free(c->sysroot);
	free(c->debug_dirs);
	free(c);
	memset(ctx, 0, sizeof(*ctx));
}

DWUNW_API int dwunw_module_open(struct dwunw_ctx *ctx, const char *path, struct dwunw_module **out)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c || !path || !out)
		return DWUNW_ERR_INVALID_ARG;
	return dw_module_acquire(c, path, NULL, NULL, 0, out);
}

DWUNW_API int dwunw_module_open_image(struct dwunw_ctx *ctx, const char *name, const void *image,
				      size_t size, struct dwunw_module **out)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c || !name || !image || !size || !out)
		return DWUNW_ERR_INVALID_ARG;
	return dw_module_acquire(c, name, NULL, image, size, out);
}

DWUNW_API void dwunw_module_put(struct dwunw_ctx *ctx, struct dwunw_module *mod)
{
	if (dw_ctx(ctx) && mod)
		dw_module_put(mod);
}

DWUNW_API int dwunw_module_cache_release(struct dwunw_ctx *ctx, struct dwunw_frame *frames,
					 size_t frame_cnt)
{
	if (!dw_ctx(ctx) || (!frames && frame_cnt))
		return DWUNW_ERR_INVALID_ARG;
	if (frame_cnt && (frames[0].flags & DWUNW_FRAME_REF_LIST)) {
		/* as dwunw_capture linked them: only the holders (little kept across the call; frames
		 * left counted down, not a pointer difference, which divides by the frame's size) */
		struct dwunw_frame *f = frames;
		for (size_t left = frame_cnt;;) {
			uint32_t fl = f->flags;
			size_t d = fl >> DWUNW_FRAME_REF_NEXT_SHIFT;
			f->flags = fl & ~DWUNW_FRAME_REF_BITS;
			if (f->module && (fl & DWUNW_FRAME_HOLDS_REF))
				dw_module_put(f->module);
			if (!d || d >= left)
				return DWUNW_OK;
			f += d;
			left -= d;
		}
	}
	for (size_t i = 0; i < frame_cnt; i++) {
		if (frames[i].module && (frames[i].flags & DWUNW_FRAME_HOLDS_REF))
			dw_module_put(frames[i].module);
		frames[i].flags &= ~DWUNW_FRAME_REF_BITS;
	}
	return DWUNW_OK;
}

DWUNW_API const char *dwunw_module_path(const struct dwunw_module *mod)
{
	return mod && mod->loaded ? mod->path : NULL;
}

DWUNW_API int dwunw_module_build_id(const struct dwunw_module *mod, char *buf, size_t buflen)
{
	if (!mod || !buf)
		return DWUNW_ERR_INVALID_ARG;
	return dw_elf_build_id_hex(&mod->elf, buf, buflen);
}

DWUNW_API const struct dwunw_arch_ops *dwunw_module_arch(const struct dwunw_module *mod)
{
	return mod ? mod->elf.arch : NULL;
}

DWUNW_API int dwunw_cache_trim(struct dwunw_ctx *ctx, uint32_t *freed)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c)
		return DWUNW_ERR_INVALID_ARG;
	return dw_module_trim(c, freed);
}

DWUNW_API int dwunw_cache_stats(struct dwunw_ctx *ctx, struct dwunw_cache_stats *out)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c || !out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	out->hits = atomic_load(&c->hits);
	out->misses = atomic_load(&c->misses);
	out->evictions = atomic_load(&c->evictions);
	out->slots = c->nslots;
	out->bytes_bound = c->bytes_bound;
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];
		uint32_t r = atomic_load(&m->refcnt);
		if (!m->loaded || r == DW_REF_EVICTING)
			continue;
		if (r)
			out->active++;
		else
			out->warm++;
		out->bytes += dw_module_bytes(m);
	}
	pthread_mutex_unlock(&c->lock);
	out->bytes_evictions = atomic_load(&c->bytes_evictions);
	return DWUNW_OK;
}

DWUNW_API int dwunw_table_info(struct dwunw_ctx *ctx, struct dwunw_module *mod,
			       struct dwunw_table_info *out)
{
	const struct dw_table *t;
	int err;

	if (!dw_ctx(ctx) || !mod || !out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	err = dw_module_full_table(mod, &t);
	if (err)
		return err;
	out->rows = t->nrows;
	out->rules = t->nrules;
	out->bytes = t->bytes;
	out->build_ns = t->build_ns;
	out->fdes = t->nfdes;
	out->fdes_dropped = t->fdes_dropped;
	out->sources = t->sources;
	out->first_error = t->first_err;
	out->first_error_offset = t->first_err_off;
	out->first_error_source = t->first_err_src;
	return DWUNW_OK;
}

DWUNW_API int dwunw_table_row(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t index,
			      struct dwunw_row_text *out)
{
	const struct dw_table *t;
	int err;

	if (!dw_ctx(ctx) || !mod || !out)
		return DWUNW_ERR_INVALID_ARG;
	err = dw_module_full_table(mod, &t);
	if (err)
		return err;
	if (index >= t->nrows)
		return DWUNW_ERR_INVALID_ARG;
	return dw_table_row_text(t, mod->elf.arch, (uint32_t)index, out);
}

DWUNW_API int64_t dwunw_table_lookup(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr)
{
	const struct dw_table *t;
	int64_t row;
	int err;

	if (!dw_ctx(ctx) || !mod)
		return DWUNW_ERR_INVALID_ARG;
	err = dw_module_full_table(mod, &t);
	if (err)
		return err;
	row = dw_table_find(t, addr);
	if (row < 0 || dw_table_rule(t, (uint32_t)row)->cfa_kind == DW_CFA_KIND_END)
		return DWUNW_ERR_NO_DWARF;
	return row;
}
