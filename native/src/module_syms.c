// SPDX-License-Identifier: GPL-2.0-only
/* A cached module's symbols: its index built once under the module's lock (symbols.c builds and
 * searches it), a debug file's index swapped in when one comes, and the public symbolize calls.
 * Above the module cache: an index or line table just built counts toward the cache's byte bound
 * (dw_module_grew), which symbols.c, below the cache, must not know of. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "internal.h"
#include "module.h"
#include "symbols.h"

static int module_symtab(const struct dwunw_ctx_impl *c, struct dwunw_module *m, struct dw_symtab **out)
{
	int st = atomic_load_explicit(&m->syms_state, memory_order_acquire);

	if (st == 0) {
		pthread_mutex_lock(&m->lock);
		st = atomic_load_explicit(&m->syms_state, memory_order_relaxed);
		if (st == 0) {
			struct dw_symtab *s = NULL;
			int err = dw_symtab_build(c, m, &s);
			if (!err)
				__atomic_store_n(&m->syms, s, __ATOMIC_RELEASE);
			st = err ? err : 1;
			atomic_store_explicit(&m->syms_state, st, memory_order_release);
		}
		pthread_mutex_unlock(&m->lock);
		if (st == 1)
			dw_module_grew(m); /* once per module load: its index counts toward the bound */
	}
	if (st < 0)
		return st;
	/* An index of the file a reloaded slot held before: its names point into a closed mapping.
	 * (module.c's unload must free m->syms and reset syms_state; this only refuses to crash.) */
	struct dw_symtab *cur = __atomic_load_n(&m->syms, __ATOMIC_ACQUIRE);
	if (cur && !dw_symtab_is_for(cur, atomic_load_explicit(&m->gen, memory_order_acquire)))
		return DWUNW_ERR_NO_MODULE;
	*out = __atomic_load_n(&m->syms, __ATOMIC_ACQUIRE);
	return DWUNW_OK;
}

void dw_symtab_upgrade(struct dwunw_ctx_impl *c, struct dwunw_module *m)
{
	struct dw_symtab *s;

	pthread_mutex_lock(&m->lock);
	if (atomic_load_explicit(&m->syms_state, memory_order_relaxed) == 1 &&
	    dw_symtab_with_debug(c, m, m->syms, &s) == DWUNW_OK)
		__atomic_store_n(&m->syms, s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&m->lock);
}

/* The symbol index of a loaded module of ctx (the public calls' checks, in one place). */
static int api_symtab(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_ctx_impl **cp,
		      struct dw_symtab **s)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);

	if (!c)
		return DWUNW_ERR_INVALID_ARG;
	if (!mod)
		return DWUNW_ERR_NO_MODULE;
	if (mod->ctx != c)
		return DWUNW_ERR_INVALID_ARG;
	if (!mod->loaded)
		return DWUNW_ERR_NO_MODULE;
	*cp = c;
	return module_symtab(c, mod, s);
}

DWUNW_API int dwunw_symbolize(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr,
			      struct dwunw_symbol *out)
{
	struct dwunw_ctx_impl *c;
	struct dw_symtab *s;
	int err;

	if (!out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	int lines_before;

	err = api_symtab(ctx, mod, &c, &s);
	if (err)
		return err;
	lines_before = dw_symtab_lines_done(s);
	err = dw_symtab_lookup(s, addr, out, !(c->cfg.flags & DWUNW_CFG_NO_LINES));
	if (!lines_before && dw_symtab_lines_done(s))
		dw_module_grew(mod); /* its line table was built just now */
	return err;
}

DWUNW_API int dwunw_source_line(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr, char *file,
				size_t filelen, uint32_t *line)
{
	struct dwunw_ctx_impl *c;
	struct dw_symtab *s;
	int err;

	if (!file || !line || !filelen)
		return DWUNW_ERR_INVALID_ARG;
	file[0] = 0;
	*line = 0;
	err = api_symtab(ctx, mod, &c, &s);
	if (err)
		return err;
	int lines_before = dw_symtab_lines_done(s);
	err = dw_symtab_line(s, addr, file, filelen, line);
	if (!lines_before && dw_symtab_lines_done(s))
		dw_module_grew(mod);
	return err;
}

DWUNW_API int dwunw_symbolize_frame(struct dwunw_ctx *ctx, const struct dwunw_frame *frame,
				    struct dwunw_symbol *out)
{
	int exact, err;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!frame || !out || !dw_ctx(ctx))
		return DWUNW_ERR_INVALID_ARG;
	if (!frame->module)
		return DWUNW_ERR_NO_MODULE;
	/* A return address points after the call: look up the call itself, as gdb does. */
	exact = (frame->flags & (DWUNW_FRAME_EXACT_PC | DWUNW_FRAME_SIGTRAMP)) || frame->module_addr == 0;
	err = dwunw_symbolize(ctx, frame->module, exact ? frame->module_addr : frame->module_addr - 1, out);
	if (err == DWUNW_OK && !exact)
		out->offset += 1;
	return err;
}


/* The start of the function symbol covering module address `addr` (the prologue analyser's
 * anchor): no names, no lines. DWUNW_ERR_NOT_FOUND when no symbol covers it. */
int dw_module_func_start(struct dwunw_module *m, uint64_t addr, uint64_t *start)
{
	struct dw_symtab *s;
	int err = module_symtab(m->ctx, m, &s);

	return err ? err : dw_symtab_func_start(s, addr, start);
}
