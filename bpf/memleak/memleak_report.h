/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's report: the outstanding allocations walked and counted by stack, then written as
 * libbpf-tools text, folded stacks or one JSON document, with what was lost and why.
 */
#ifndef DWUNW_MEMLEAK_REPORT_H
#define DWUNW_MEMLEAK_REPORT_H

#include <stddef.h>

/* Entries of the allocs map at the last report. */
extern size_t report_outstanding;

/* One report on stdout (every record received until now counted first). */
void ml_report(void);

#endif /* DWUNW_MEMLEAK_REPORT_H */
