/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's own memory, reported with every --json report and at exit with -v: resident set
 * (anonymous and file-backed: the ring buffer's pages count as file pages, twice, because the
 * kernel maps its data area twice), the event table, and each BPF map's kernel memory.
 */
#ifndef DWUNW_MEMLEAK_MEM_H
#define DWUNW_MEMLEAK_MEM_H

#include <stddef.h>
#include <stdio.h>

struct bpf_object;

/* ,"memory":{...} (to stdout, inside a report object); outstanding: entries of the allocs map
 * at the last report. */
void ml_mem_json(struct bpf_object *obj, size_t outstanding);
/* Lines for -v at exit. */
void ml_mem_text(FILE *f, struct bpf_object *obj, size_t outstanding);

#endif /* DWUNW_MEMLEAK_MEM_H */
