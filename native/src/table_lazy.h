/* SPDX-License-Identifier: GPL-2.0-only */
/* Tables of big modules built by range on first use (table_lazy.c). */
#ifndef DWUNW_TABLE_LAZY_H
#define DWUNW_TABLE_LAZY_H

#include <stdint.h>
#include "table.h"

/* Modules with fewer FDEs than this get an eager table (see doc/bench.md for the figures). */
#define DW_LAZY_MIN_FDES 16384

/* A lazy table from .eh_frame_hdr (`hdr`, at module address `hdr_vaddr`) over in->eh_frame:
 * only the directory now. DWUNW_ERR_UNSUPPORTED_CFI or _CORRUPT when the header cannot serve
 * (another encoding, truncated, unsorted, .debug_frame too): build eagerly then. */
int dw_table_lazy_init(const struct dw_table_input *in, const uint8_t *hdr, uint64_t hdr_size,
		       uint64_t hdr_vaddr, struct dw_table *t);

/* The rule id covering module address `addr`, its block built on first use (thread-safe).
 * 0 = found, -1 = no CFI there. */
int dw_lazy_rule_id(const struct dw_table *t, uint64_t addr, uint32_t *id);

void dw_lazy_free(struct dw_lazy *z);

/* Bytes held so far (directory, built blocks, rules). */
uint64_t dw_lazy_bytes(const struct dw_table *t);

#endif
