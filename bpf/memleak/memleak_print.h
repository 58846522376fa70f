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
#include "memleak_opts.h"
#include "runtime/stack_store.h"

/* -a: the outstanding allocations of this report, chained by stack (ustack.first_alloc). */
struct alloc_ent {
	uint64_t addr;
	struct ml_alloc_info info;
	int64_t next;          /* next allocation of the same stack (-a) */
};
extern struct alloc_ent *allocs_v;
extern size_t allocs_n;
void ml_allocs_push(uint64_t addr, const struct ml_alloc_info *info);

/* The markers shown in this report's text (their legend follows the stacks). */
extern uint32_t marks_seen;

/* "dwarf", "fp" or "kernel". */
const char *ml_unwind_name(void);

void ml_print_stack_text(const struct ustack *s);
void ml_print_stack_json(const struct ustack *s);
/* Stacks that fold to the same line (same names, other pcs) are one line, weights summed. */
void ml_print_folded(const uint32_t *order, size_t shown, bool by_process);
/* --unwind=kernel: what the walker's events were made of, and the tables' memory. */
void ml_print_kwalk(bool json);

#endif /* DWUNW_MEMLEAK_PRINT_H */
