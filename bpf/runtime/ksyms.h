/* SPDX-License-Identifier: GPL-2.0-only */
/* Kernel symbols from /proc/kallsyms (read once), for kernel stacks from bpf_get_stackid. */
#ifndef DWUNW_KSYMS_H
#define DWUNW_KSYMS_H

#include <stdint.h>

/* Read /proc/kallsyms: 0, or a negative errno (then every look-up fails). */
int ksyms_load(void);
/* The interned name of the function holding addr (*off = addr - start), or NULL. */
const char *ksyms_lookup(uint64_t addr, uint64_t *off);

#endif /* DWUNW_KSYMS_H */
