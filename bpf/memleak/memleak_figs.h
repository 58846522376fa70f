/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's per-stack figures of a report interval (outstanding; --allocated: made in it), indexed
 * like the stack store: filled by the records (--allocated) and by the report's walk.
 */
#ifndef DWUNW_MEMLEAK_FIGS_H
#define DWUNW_MEMLEAK_FIGS_H

#include <stdint.h>

struct memleak_ctx;

/* The figures of stack idx, the table grown to hold it. */
struct ml_stack_fig *ml_fig(struct memleak_ctx *ml, int64_t idx);

#endif /* DWUNW_MEMLEAK_FIGS_H */
