/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's report: the outstanding allocations walked and counted by stack, then written as
 * libbpf-tools text, folded stacks or one JSON document, with what was lost and why.
 */
#ifndef DWUNW_MEMLEAK_REPORT_H
#define DWUNW_MEMLEAK_REPORT_H

struct memleak_ctx;

#include <stdint.h>

/* One report on stdout (every record received until now counted first). */
void ml_report(struct memleak_ctx *ml);

#endif /* DWUNW_MEMLEAK_REPORT_H */
