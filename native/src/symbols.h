/* SPDX-License-Identifier: GPL-2.0-only */
/* Symbols of a module: .symtab and .dynsym (sorted, binary search), a separate debug file found by
 * build-id or .gnu_debuglink, MiniDebugInfo (.gnu_debugdata), C++ demangling, and file:line from
 * .debug_line (DWARF 2-5). Built lazily per module; knows nothing of processes. */
#ifndef DWUNW_SYMBOLS_H
#define DWUNW_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include "dwunw.h"

struct dw_symtab;
struct dwunw_module;
struct dwunw_ctx_impl;

/* Build the index for module m (its ELF is m->elf; debug_dirs/sysroot/flags from the context). */
int dw_symtab_build(const struct dwunw_ctx_impl *c, const struct dwunw_module *m, struct dw_symtab **out);
void dw_symtab_free(struct dw_symtab *s);
/* m's index built again now that a debug file is there (old had none): *out keeps old for the
 * readers still holding it. DWUNW_ERR_NOT_FOUND when old has one already or the new has none. */
int dw_symtab_with_debug(const struct dwunw_ctx_impl *c, const struct dwunw_module *m, struct dw_symtab *old,
			 struct dw_symtab **out);
/* Whether s was built for the module generation gen (a reloaded slot's old index is not). */
int dw_symtab_is_for(const struct dw_symtab *s, uint32_t gen);
/* Start of the symbol covering module address `addr`; DWUNW_ERR_NOT_FOUND when none. */
int dw_symtab_func_start(struct dw_symtab *s, uint64_t addr, uint64_t *start);
/* Memory the index holds: its symbols and what it read of debug files (not the module's ELF). */
uint64_t dw_symtab_bytes(const struct dw_symtab *s);
/* Bytes of its line table, once built (0 before). */
uint64_t dw_symtab_lines_bytes(const struct dw_symtab *s);
/* Whether its line table was built (or found missing): dwunw_symbolize then applies the byte bound. */
int dw_symtab_lines_done(const struct dw_symtab *s);
/* Symbol covering module address `addr`, with its file:line when `lines` (thread-safe: the line
 * table is built on first use under the symtab's own lock). DWUNW_ERR_NOT_FOUND when no symbol
 * covers it (out->name is ""). */
int dw_symtab_lookup(struct dw_symtab *s, uint64_t addr, struct dwunw_symbol *out, bool lines);
/* The line-table row covering `addr` (file truncated to filelen); DWUNW_ERR_NOT_FOUND when none. */
int dw_symtab_line(struct dw_symtab *s, uint64_t addr, char *file, size_t filelen, uint32_t *line);

/* module_syms.c, above the module cache: a cached module's index. */
/* A debug file came (debuginfod.c) after m's index was built without one: rebuild, swap it in. */
void dw_symtab_upgrade(struct dwunw_ctx_impl *c, struct dwunw_module *m);
/* Start of the symbol covering module address `addr` (index built on first use). */
int dw_module_func_start(struct dwunw_module *m, uint64_t addr, uint64_t *start);

#endif
