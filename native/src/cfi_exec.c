// SPDX-License-Identifier: GPL-2.0-only
/* The DW_CFA_* interpreter: runs a CIE's or FDE's program and reports one row per location. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "cfi.h"
#include "internal.h"

enum {
	CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
	CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
	CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09,
	CFA_remember_state = 0x0a, CFA_restore_state = 0x0b, CFA_def_cfa = 0x0c,
	CFA_def_cfa_register = 0x0d, CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f,
	CFA_expression = 0x10, CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12,
	CFA_def_cfa_offset_sf = 0x13, CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15,
	CFA_val_expression = 0x16, CFA_MIPS_advance_loc8 = 0x1d,
	CFA_GNU_window_save = 0x2d, /* DW_CFA_AARCH64_negate_ra_state on arm64 */
	CFA_GNU_args_size = 0x2e, CFA_GNU_negative_offset_extended = 0x2f,
	CFA_advance_loc = 0x40, CFA_offset = 0x80, CFA_restore = 0xc0,
};

/* Copy only what is live: the header and the columns marked in `set` (a state is 3 KiB). */
static void state_copy(struct dw_frame_state *dst, const struct dw_frame_state *src)
{
	memcpy(dst, src, offsetof(struct dw_frame_state, col));
	for (unsigned w = 0; w < DW_MAX_COLS / 64; w++) {
		uint64_t bits = src->set[w];
		while (bits) {
			unsigned r = w * 64 + (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			dst->col[r] = src->col[r];
		}
	}
}

static inline int col_set(struct dw_frame_state *st, uint64_t reg, uint8_t kind, int64_t val)
{
	if (reg >= DW_MAX_COLS)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	st->col[reg].kind = kind;
	st->col[reg].val = val;
	st->col[reg].expr = NULL;
	st->col[reg].expr_len = 0;
	st->set[reg / 64] |= 1ull << (reg % 64);
	return DWUNW_OK;
}

/* DW_CFA_restore: back to the CIE's rule, or to no rule at all when the CIE sets none. */
static inline int col_restore(struct dw_frame_state *st, const struct dw_frame_state *initial,
			      uint64_t reg)
{
	uint64_t bit;

	if (reg >= DW_MAX_COLS)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	/* Inside the CIE the rule "assigned by the initial instructions" is the one it has so
	 * far: a no-op, as readelf reads it. */
	if (!initial)
		return DWUNW_OK;
	bit = 1ull << (reg % 64);
	if (initial->set[reg / 64] & bit) {
		st->col[reg] = initial->col[reg];
		st->set[reg / 64] |= bit;
	} else {
		st->set[reg / 64] &= ~bit;
	}
	return DWUNW_OK;
}

/* A factored operand times its alignment factor. A product beyond 64 bits (undefined in C) is
 * corrupt CFI, as an overrun is (the cursor stops); so is -2^63, which callers may negate. */
static inline int64_t factored(struct dw_cursor *c, int64_t v, int64_t factor)
{
	int64_t r;

	if (__builtin_mul_overflow(v, factor, &r) || r == INT64_MIN) {
		c->err = DWUNW_ERR_CORRUPT;
		c->p = c->end;
		return 0;
	}
	return r;
}

static int read_block(struct dw_cursor *c, const uint8_t **p, uint32_t *len)
{
	uint64_t n = cur_uleb(c);

	if (c->err || n > cur_left(c) || n > UINT32_MAX)
		return DWUNW_ERR_CORRUPT;
	*p = c->p;
	*len = (uint32_t)n;
	c->p += n;
	return DWUNW_OK;
}

int dw_cfi_cie_state(const struct dw_cfi_section *s, const struct dw_cie *cie,
		     struct dw_frame_state *st)
{
	memset(st, 0, offsetof(struct dw_frame_state, col));
	return dw_cfi_exec(s, cie, NULL, cie->insns, cie->insns_end, 0, 0, st, NULL, NULL);
}

int dw_cfi_run_fde(const struct dw_cfi_section *s, const struct dw_cie *cie,
		   const struct dw_frame_state *initial, const struct dw_fde *fde,
		   dw_row_fn row, void *arg)
{
	struct dw_frame_state st;

	state_copy(&st, initial);
	st.changed = 0;
	return dw_cfi_exec(s, cie, initial, fde->insns, fde->insns_end, fde->pc_begin, fde->pc_end,
			   &st, row, arg);
}

int dw_cfi_exec(const struct dw_cfi_section *s, const struct dw_cie *cie,
		const struct dw_frame_state *initial, const uint8_t *insns, const uint8_t *end,
		uint64_t pc_begin, uint64_t pc_end, struct dw_frame_state *st, dw_row_fn row, void *arg)
{
	struct dw_cursor c;
	/* DW_CFA_remember_state: two levels here (most programs need one), deeper ones allocated */
	struct dw_frame_state local[2];
	struct dw_frame_state *stack = local;
	unsigned depth = 0, cap = 2;
	uint32_t gen = st->cols_gen;
	uint64_t loc = pc_begin;
	int err = DWUNW_OK;
	const uint64_t caf = cie->code_align;
	const int64_t daf = cie->data_align;

	cur_init(&c, insns, (size_t)(end - insns));
	while (cur_left(&c) && !err) {
		uint8_t op = cur_u8(&c);

		uint64_t reg, delta = 0, newloc;
		int64_t off;
		const uint8_t *ep;
		uint32_t elen;

		switch (op & 0xc0) {
		case CFA_advance_loc:
			delta = (op & 0x3f) * caf;
			goto advance;
		case CFA_offset:
			off = factored(&c, (int64_t)cur_uleb(&c), daf);
			err = col_set(st, op & 0x3f, DW_RULE_OFFSET, off);
			st->changed = 1;
			st->cols_gen = ++gen;
			continue;
		case CFA_restore:
			err = col_restore(st, initial, op & 0x3f);
			st->changed = 1;
			st->cols_gen = ++gen;
			continue;
		}

		switch (op) {
		case CFA_nop:
			continue;
		case CFA_set_loc:
			if (s->is_eh)
				err = dw_read_encoded(s, &c, cie->fde_enc, 0, &newloc);
			else
				newloc = cur_addr(&c, cie->addr_size);
			if (err)
				break;
			if (newloc < loc) {
				err = DWUNW_ERR_CORRUPT;
				break;
			}
			delta = newloc - loc;
			goto advance;
		case CFA_advance_loc1:
			delta = cur_u8(&c) * caf;
			goto advance;
		case CFA_advance_loc2:
			delta = cur_u16(&c) * caf;
			goto advance;
		case CFA_advance_loc4:
			delta = cur_u32(&c) * caf;
			goto advance;
		case CFA_MIPS_advance_loc8:
			delta = cur_u64(&c) * caf;
			goto advance;
		case CFA_offset_extended:
			reg = cur_uleb(&c);
			off = factored(&c, (int64_t)cur_uleb(&c), daf);
			err = col_set(st, reg, DW_RULE_OFFSET, off);
			break;
		case CFA_offset_extended_sf:
			reg = cur_uleb(&c);
			off = factored(&c, cur_sleb(&c), daf);
			err = col_set(st, reg, DW_RULE_OFFSET, off);
			break;
		case CFA_GNU_negative_offset_extended:
			reg = cur_uleb(&c);
			off = -factored(&c, (int64_t)cur_uleb(&c), daf);
			err = col_set(st, reg, DW_RULE_OFFSET, off);
			break;
		case CFA_val_offset:
			reg = cur_uleb(&c);
			off = factored(&c, (int64_t)cur_uleb(&c), daf);
			err = col_set(st, reg, DW_RULE_VAL_OFFSET, off);
			break;
		case CFA_val_offset_sf:
			reg = cur_uleb(&c);
			off = factored(&c, cur_sleb(&c), daf);
			err = col_set(st, reg, DW_RULE_VAL_OFFSET, off);
			break;
		case CFA_restore_extended:
			err = col_restore(st, initial, cur_uleb(&c));
			break;
		case CFA_undefined:
			err = col_set(st, cur_uleb(&c), DW_RULE_UNDEF, 0);
			break;
		case CFA_same_value:
			err = col_set(st, cur_uleb(&c), DW_RULE_SAME, 0);
			break;
		case CFA_register:
			reg = cur_uleb(&c);
			err = col_set(st, reg, DW_RULE_REG, (int64_t)cur_uleb(&c));
			break;
		case CFA_expression:
		case CFA_val_expression:
			reg = cur_uleb(&c);
			err = read_block(&c, &ep, &elen);
			if (!err)
				err = col_set(st, reg, op == CFA_expression ? DW_RULE_EXPR : DW_RULE_VAL_EXPR, 0);
			if (!err) {
				st->col[reg].expr = ep;
				st->col[reg].expr_len = elen;
			}
			break;
		case CFA_remember_state:
			if (depth == DW_MAX_REMEMBER) {
				err = DWUNW_ERR_CORRUPT;
				break;
			}
			if (depth == cap) {
				unsigned ncap = cap * 2;
				void *p = realloc(stack == local ? NULL : stack, ncap * sizeof(*stack));
				if (!p) {
					err = DWUNW_ERR_NOMEM;
					break;
				}
				if (stack == local)
					for (unsigned i = 0; i < depth; i++)
						state_copy(&((struct dw_frame_state *)p)[i], &local[i]);
				stack = p;
				cap = ncap;
			}
			state_copy(&stack[depth++], st);
			break;
		case CFA_restore_state:
			if (!depth) {
				err = DWUNW_ERR_CORRUPT;
				break;
			}
			state_copy(st, &stack[--depth]);
			break;
		case CFA_def_cfa:
			st->cfa_reg = (uint32_t)cur_uleb(&c);
			st->cfa_off = (int64_t)cur_uleb(&c);
			st->cfa_kind = DW_CFA_KIND_REG;
			break;
		case CFA_def_cfa_sf:
			st->cfa_reg = (uint32_t)cur_uleb(&c);
			st->cfa_off = factored(&c, cur_sleb(&c), daf);
			st->cfa_kind = DW_CFA_KIND_REG;
			break;
		case CFA_def_cfa_register:
			st->cfa_reg = (uint32_t)cur_uleb(&c);
			st->cfa_kind = DW_CFA_KIND_REG;
			break;
		case CFA_def_cfa_offset:
			/* Only meaningful for a register-based CFA; an expression CFA stays. */
			st->cfa_off = (int64_t)cur_uleb(&c);
			if (st->cfa_kind == DW_CFA_KIND_NONE)
				st->cfa_kind = DW_CFA_KIND_REG;
			break;
		case CFA_def_cfa_offset_sf:
			st->cfa_off = factored(&c, cur_sleb(&c), daf);
			if (st->cfa_kind == DW_CFA_KIND_NONE)
				st->cfa_kind = DW_CFA_KIND_REG;
			break;
		case CFA_def_cfa_expression:
			err = read_block(&c, &ep, &elen);
			if (!err) {
				st->cfa_kind = DW_CFA_KIND_EXPR;
				st->cfa_expr = ep;
				st->cfa_expr_len = elen;
			}
			break;
		case CFA_GNU_window_save:
			if (s->machine != EM_AARCH64) {
				err = DWUNW_ERR_UNSUPPORTED_CFI; /* SPARC register windows */
				break;
			}
			st->ra_signed ^= 1;
			break;
		case CFA_GNU_args_size:
			st->args_size = cur_uleb(&c);
			break;
		default:
			err = DWUNW_ERR_UNSUPPORTED_CFI;
			break;
		}
		/* every opcode that gets here (not an advance, not a nop) may change the state */
		st->changed = 1;
		/* all but the CFA's own rules and args_size may touch a column (restore_state
		 * brings back an older generation: a new one is given here) */
		if (op != CFA_def_cfa && op != CFA_def_cfa_sf && op != CFA_def_cfa_register &&
		    op != CFA_def_cfa_offset && op != CFA_def_cfa_offset_sf &&
		    op != CFA_def_cfa_expression && op != CFA_GNU_args_size)
			st->cols_gen = ++gen;
		if (c.err && !err)
			err = c.err;
		continue;

advance:
		if (c.err) {
			err = c.err;
			break;
		}
		if (delta > UINT64_MAX - loc) {
			err = DWUNW_ERR_CORRUPT;
			break;
		}
		newloc = loc + delta;
		if (newloc > loc) {
			if (row && loc < pc_end && (err = row(arg, loc, st)))
				break;
			loc = newloc;
		}
		if (row && loc >= pc_end)
			break; /* the rest cannot apply inside this FDE */
	}
	if (!err && c.err)
		err = c.err;
	if (!err && row && loc < pc_end)
		err = row(arg, loc, st);
	if (stack != local)
		free(stack);
	return err;
}
