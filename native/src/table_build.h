/* SPDX-License-Identifier: GPL-2.0-only */
/* The table builder's state, in table_build.c, shared by the eager build (table.c) and lazily
 * built blocks (table_lazy.c): rows being compiled and the deduplicated rule dictionary. */
#ifndef DWUNW_TABLE_BUILD_H
#define DWUNW_TABLE_BUILD_H

#include "cfi.h"
#include "table.h"

/* What identifies a rule: the rest of struct dw_rule is derived from it (and its register
 * rules), so it is computed once per distinct rule, not per row. */
struct rkey {
	uint8_t cfa_kind, flags, nregs, ra_reg;
	uint16_t cfa_reg, pad;
	int32_t cfa_off;
};
_Static_assert(sizeof(struct rkey) == 12, "rule key layout");

struct builder {
	const struct dw_table_input *in;
	uint64_t base;
	/* rows */
	struct brow { uint32_t pc, id; } *rows;
	uint32_t nrows, cap_rows;
	/* rules, deduplicated through an open-addressing hash of rule ids */
	struct dw_rule *rules;
	uint32_t nrules, cap_rules;
	struct rkey *keys;         /* keys[id]: rule id's key */
	uint32_t cap_keys;
	struct dw_regrule *regrules;
	uint32_t nregrules, cap_regrules;
	uint32_t *hash;            /* rule id + 1, 0 = empty */
	uint32_t hash_mask;
	struct dw_expr_ref *exprs;
	uint32_t nexprs, cap_exprs;
	/* the FDE being compiled */
	uint8_t cur_flags;
	uint8_t cur_ra;
	int cur_err;
	/* the rule dictionary lives in fixed reservations (lazy tables: readers hold pointers into
	 * it while blocks are added): it never moves, and is full at its capacity */
	uint8_t fixed;
	/* the rule id of the CIE state (sec, offset): rows before an FDE's first change have it */
	const struct dw_cfi_section *cur_sec, *memo_sec;
	uint64_t cur_cie, memo_cie;
	uint32_t memo_id;
	/* scratch for canonicalising one row; it still holds the last row's register rules, packed
	 * from columns of generation tmp_gen (valid in this FDE when tmp_ok): most rows only move
	 * the CFA, and those are not packed again */
	uint8_t tmp_ok;
	uint8_t tmp_n;
	uint32_t tmp_gen;
	uint64_t tmp_hash;
	struct dw_regrule tmp[DW_MAX_COLS];
};

/* Rule 0 (END) and the empty hash; rows and rule arrays may be preset by the caller. */
int dw_builder_start(struct builder *b, const struct dw_table_input *in, uint64_t base);
void dw_builder_free(struct builder *b);

/* A row at module address `pc` with rule `id` (0 = END). */
int dw_builder_row(struct builder *b, uint64_t pc, uint32_t id);

/* Compile one FDE (f->pc_end already clipped) from its CIE's state `cst` (or the error `cst_err`
 * that computing it met). A program that fails keeps none of its rows: END at its start instead,
 * and *ferr says why. Returns only hard errors (out of memory). */
int dw_builder_fde(struct builder *b, const struct dw_cfi_section *sec, const struct dw_cie *cie,
		   const struct dw_frame_state *cst, int cst_err, struct dw_fde *f, int *ferr);

int dw_builder_in_ranges(const struct dw_table_input *in, uint64_t begin, uint64_t end);

/* Grow *p (capacity *cap elements of elem bytes) to hold at least need. */
int dw_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);

#endif
