/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's report writers: one stack as libbpf-tools text (with -a's allocations), as JSON, the
 * folded lines of a flame graph, and the in-kernel walker's summary.
 */
#ifndef DWUNW_MEMLEAK_PRINT_H
#define DWUNW_MEMLEAK_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

struct memleak_ctx;

/* -a: one more outstanding allocation of this report (ml->allocs_v). */
void ml_allocs_push(struct memleak_ctx *ml, uint64_t addr, const struct ml_alloc_info *info);

/* "dwarf", "fp" or "kernel". */
const char *ml_unwind_name(const struct memleak_ctx *ml);

/* Stack `idx` of the store with its figures (ml->figs). */
void ml_print_stack_text(struct memleak_ctx *ml, uint32_t idx);
void ml_print_stack_json(const struct memleak_ctx *ml, uint32_t idx);
/* Stacks that fold to the same line (same names, other pcs) are one line, weights summed. */
void ml_print_folded(const struct memleak_ctx *ml, const uint32_t *order, size_t shown,
		     bool by_process);
/* --unwind=kernel: what the walker's events were made of, and the tables' memory. */
void ml_print_kwalk(const struct memleak_ctx *ml, bool json);

#endif /* DWUNW_MEMLEAK_PRINT_H */
