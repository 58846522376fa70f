// SPDX-License-Identifier: GPL-2.0-only
/* dwunw_module_memory: what one module holds, by kind, so "no whole-file copy" can be checked. */
#include <stdatomic.h>
#include <string.h>
#include "internal.h"
#include "module.h"
#include "symbols.h"

DWUNW_API int dwunw_module_memory(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_module_memory *out)
{
	if (!dw_ctx(ctx) || !mod || !out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	/* Built parts only: asking must not build them. */
	out->table = dw_module_table_bytes(mod);
	if (atomic_load_explicit(&mod->syms_state, memory_order_acquire) == 1)
		out->symbols = dw_symtab_bytes(mod->syms);
	/* A caller's image is the caller's memory; a file's is what was read of it. */
	out->elf = mod->is_image ? 0 : __atomic_load_n(&mod->elf.held, __ATOMIC_RELAXED);
	out->elf += (uint64_t)mod->elf.nphdrs * sizeof(mod->elf.phdrs[0]);
	out->file_size = mod->elf.size;
	return DWUNW_OK;
}
