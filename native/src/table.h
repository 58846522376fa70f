/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The compiled unwind table of one module, built once from its CFI.
 *
 * Rows are two parallel arrays sorted by pc: a 16-bit pc relative to the row's index block
 * (blocks span at most 64 KiB) and a rule id. Rules are deduplicated (libc.so.6 has 28.5 k rows
 * but only 396 distinct rules), so a row costs 4 bytes (6 with 32-bit ids). A block index maps
 * pc >> shift to the first candidate row.
 * Rule id 0 is the END rule: no CFI from that pc on (the gap after an FDE).
 */
#ifndef DWUNW_TABLE_H
#define DWUNW_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "cfi.h"
#include "internal.h"

#define DW_RCACHE_BITS 9           /* at most 512 entries, 4 KiB per table */

#define DW_RULEF_SIGNAL    0x01    /* CIE augmentation 'S': the frame is a signal frame */
#define DW_RULEF_RA_SIGNED 0x02    /* arm64: the return address is signed */
#define DW_RULEF_SIMPLE    0x04    /* CFA = reg + off, and only DW_RULE_OFFSET rules on tracked
				    * registers: the step loads them in place */
#define DW_RULEF_RA_RULE   0x08    /* some rule names the return-address column */
#define DW_RULEF_FAST      0x10    /* SIMPLE, RA_RULE and not SIGNAL: the whole step is slot loads */
#define DW_RULEF_OUTERMOST 0x20    /* CFA = reg + off and every rule, the return address's too,
				    * "undefined": the outermost frame (_start) */
#define DW_RULEF_LEAN      0x40    /* FAST, CFA = sp or fp + off, the return address's and the frame
				    * pointer's slots in ra_slot/fp_slot: the walk loads only those two
				    * and restores the other registers when it needs them */
#define DW_RULEF_CFA_FP    0x80    /* LEAN with the frame pointer as the CFA's register */
#define DW_LEAN_SPAN_MAX   512     /* a LEAN rule's slots span at most this many bytes */

/* What the step function needs for one row. 32 bytes. */
struct dw_rule {
	uint8_t cfa_kind;          /* enum dw_cfa_kind */
	uint8_t flags;             /* DW_RULEF_* */
	uint8_t nregs;             /* register rules at regrules[reg_first ..] */
	uint8_t ra_reg;            /* return-address column */
	uint16_t cfa_reg;
	int8_t ra_slot;            /* LEAN: the return address at CFA + ra_slot words */
	int8_t fp_slot;            /* LEAN: the frame pointer at CFA + fp_slot words, 0 = not saved */
	int32_t cfa_off;           /* CFA_KIND_REG: offset; CFA_KIND_EXPR: index into exprs */
	uint32_t reg_first;
	/* Derived, not part of the key: the shape a simple rule's step needs. Its slots lie in
	 * [cfa + off_min, cfa + off_min + span): one bounds check covers them all (span 0: none). */
	int32_t off_min;
	uint32_t span;
	/* FAST rules: the registers a step sets, those of its slots the backend tracks plus the
	 * stack pointer */
	uint64_t step_mask;
};

/* One register's rule. 8 bytes. */
struct dw_regrule {
	uint16_t reg;
	uint8_t kind;              /* enum dw_rule_kind, never UNSET */
	uint8_t pad;
	int32_t val;               /* OFFSET/VAL_OFFSET: offset from CFA; REG: register; *EXPR: exprs index */
};

/* Expression shapes the step evaluates without the stack machine (same result). */
enum dw_expr_shape {
	DW_SHAPE_NONE = 0,
	DW_SHAPE_BREG,             /* DW_OP_bregN off: regN + off */
	DW_SHAPE_BREG_DEREF,       /* DW_OP_bregN off; DW_OP_deref: *(regN + off) */
};

struct dw_expr_ref {
	const uint8_t *p;
	uint32_t len;
	int32_t check;             /* dw_expr_check() result: evaluating a bad expression is refused */
	uint8_t shape;             /* enum dw_expr_shape */
	uint8_t shape_reg;
	int64_t shape_off;
};

struct dw_lazy;

struct dw_table {
	uint64_t base;             /* module address of pc offset 0 */
	uint32_t nrows;
	uint8_t wide_ids;          /* ids32 instead of ids16 */
	uint8_t addr_size;
	uint16_t machine;
	uint16_t *pcs16;           /* row r > 0 starts at (k << shift) + 1 + pcs16[r], k its block */
	union {
		uint16_t *ids16;
		uint32_t *ids32;
	};
	struct dw_rule *rules;
	uint32_t nrules;
	uint32_t nregrules;
	struct dw_regrule *regrules;
	struct dw_expr_ref *exprs;
	uint32_t nexprs;
	uint32_t shift;            /* block size is 1 << shift bytes of pc */
	uint32_t nblocks;
	uint32_t *blocks;          /* blocks[b] = last row starting at or before (b << shift) */
	/* 2-way set-associative cache of recent look-ups: (pc offset << 32 | row) in one word, so
	 * concurrent readers and writers never see a torn entry. */
	_Atomic uint64_t *rcache;
	uint32_t rcache_bits;      /* log2 of its entries: up to DW_RCACHE_BITS, fewer for small tables */
	/* Build facts */
	uint64_t build_ns;
	uint32_t nfdes;
	uint32_t fdes_dropped;
	uint32_t sources;          /* DWUNW_TABLE_SRC_* */
	int first_err;
	uint64_t first_err_off;
	uint32_t first_err_src;    /* DWUNW_TABLE_SRC_* of the section that had it */
	void *mem;                 /* one allocation holding every array */
	uint64_t bytes;
	/* Built by range on first use (table_lazy.c): then pcs, ids, blocks, nrows and nrules are
	 * unused, rules/regrules/exprs never move, and look-ups go through it. NULL: eager. */
	struct dw_lazy *lazy;
};

/* Where a table's CFI comes from: up to two sections. The .eh_frame wins where both cover a pc. */
struct dw_table_input {
	const struct dw_cfi_section *eh_frame;    /* may be NULL */
	const struct dw_cfi_section *debug_frame; /* may be NULL */
	/* Executable address ranges: FDEs outside every range are dropped (discarded sections,
	 * tombstoned .debug_frame entries). nranges == 0 accepts any FDE. */
	const uint64_t (*ranges)[2];
	uint32_t nranges;
	uint16_t machine;
	uint8_t addr_size;
	/* The backend, when known: a step's register mask is then precomputed (dw_rule.step_mask). */
	const struct dwunw_arch_ops *arch;
};

/* Build; on success the table may still carry first_err (entries that were skipped). */
int dw_table_build(const struct dw_table_input *in, struct dw_table *out);
void dw_table_free(struct dw_table *t);

static inline uint32_t dw_table_id(const struct dw_table *t, uint32_t row)
{
	return t->wide_ids ? t->ids32[row] : t->ids16[row];
}

/* Row `row`'s pc, as an offset from base (a search of the block index: for dumps, not look-ups). */
uint32_t dw_table_pc(const struct dw_table *t, uint32_t row);

/* Row covering module address `addr`, or -1 (before the first row / past the table). Eager
 * tables only. */
int64_t dw_table_find(const struct dw_table *t, uint64_t addr);

/* The rule covering module address `addr` (NULL: none) through the table's look-up cache, which
 * maps a pc straight to its rule id: one probe when warm. */
const struct dw_rule *dw_table_rule_slow(const struct dw_table *t, uint64_t addr);

static inline const struct dw_rule *dw_table_rule_at(const struct dw_table *t, uint64_t addr)
{
	uint64_t off = addr - t->base, e;
	uint32_t slot;

	/* Two ways per set, the newest in way 0. +1 keeps the empty entry (0) from matching offset 0. */
	slot = (uint32_t)(((off + 1) * 0x9e3779b97f4a7c15ull) >> (64 - t->rcache_bits)) & ~1u;
	e = atomic_load_explicit(&t->rcache[slot], memory_order_relaxed);
	if (DW_LIKELY((e >> 32) == off + 1 && off < UINT32_MAX))
		return &t->rules[(uint32_t)e];
	return dw_table_rule_slow(t, addr);
}

/* The rule of a row (id 0 = END). */
static inline const struct dw_rule *dw_table_rule(const struct dw_table *t, uint32_t row)
{
	return &t->rules[dw_table_id(t, row)];
}

/* Decode a row for display in readelf's notation. */
int dw_table_row_text(const struct dw_table *t, const struct dwunw_arch_ops *arch, uint32_t row,
		      struct dwunw_row_text *out);

#endif
