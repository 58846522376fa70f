// SPDX-License-Identifier: GPL-2.0-only
/* What one module holds, by kind (dwunw_module_memory: "no whole-file copy" can be checked), and
 * in all (the module cache's byte bound, module.c). Built parts only: asking must not
 * build them. */
#include <stdatomic.h>
#include <string.h>
#include "internal.h"
#include "module.h"
#include "symbols.h"
#include "table_lazy.h"

/* Bytes held by the module's tables (built ones only). */
static uint64_t table_bytes(struct dwunw_module *m)
{
	uint64_t n = 0;

	if (atomic_load_explicit(&m->table_state, memory_order_acquire) == 1)
		n += m->table.lazy ? dw_lazy_bytes(&m->table) : m->table.bytes;
	if (atomic_load_explicit(&m->full_state, memory_order_acquire) == 1)
		n += m->full.bytes;
	return n;
}

static void module_memory(struct dwunw_module *mod, struct dwunw_module_memory *out)
{
	memset(out, 0, sizeof(*out));
	out->table = table_bytes(mod);
	if (atomic_load_explicit(&mod->syms_state, memory_order_acquire) == 1)
		out->symbols = dw_symtab_bytes(__atomic_load_n(&mod->syms, __ATOMIC_ACQUIRE));
	/* A caller's image is the caller's memory; a file's is what was read of it. */
	out->elf = mod->is_image ? 0 : __atomic_load_n(&mod->elf.held, __ATOMIC_RELAXED);
	out->elf += (uint64_t)mod->elf.nphdrs * sizeof(mod->elf.phdrs[0]);
	out->file_size = mod->elf.size;
}

uint64_t dw_module_bytes(struct dwunw_module *mod)
{
	struct dwunw_module_memory mm;
	uint64_t n;

	module_memory(mod, &mm);
	n = mm.table + mm.symbols + mm.elf;
	if (atomic_load_explicit(&mod->syms_state, memory_order_acquire) == 1)
		n += dw_symtab_lines_bytes(__atomic_load_n(&mod->syms, __ATOMIC_ACQUIRE));
	return n;
}

DWUNW_API int dwunw_module_memory(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_module_memory *out)
{
	if (!dw_ctx(ctx) || !mod || !out)
		return DWUNW_ERR_INVALID_ARG;
	module_memory(mod, out);
	return DWUNW_OK;
}
