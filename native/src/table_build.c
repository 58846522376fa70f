// SPDX-License-Identifier: GPL-2.0-only
/* The table builder: CFI rows compiled into rows and a deduplicated rule dictionary, for the
 * eager build (table.c) and for blocks built by range (table_lazy.c). */
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "expr.h"
#include "internal.h"
#include "table.h"
#include "table_build.h"

_Static_assert(sizeof(struct dw_rule) == 32 && offsetof(struct dw_rule, reg_first) == 12, "rule layout");
_Static_assert(sizeof(struct dw_regrule) == 8, "register rule layout");


/* Growing the rule dictionary: a fixed one is full at its capacity. */
static int grow_dict(struct builder *b, void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (b->fixed)
		return need <= *cap ? DWUNW_OK : DWUNW_ERR_UNSUPPORTED_CFI;
	return dw_grow(p, cap, need, elem);
}

int dw_grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	uint64_t ncap;
	void *np;

	if (need <= *cap)
		return DWUNW_OK;
	ncap = *cap ? (uint64_t)*cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		return DWUNW_ERR_NOMEM;
	np = realloc(*p, ncap * elem);
	if (!np)
		return DWUNW_ERR_NOMEM;
	*p = np;
	*cap = (uint32_t)ncap;
	return DWUNW_OK;
}

/* Hash a key and its register rules a word at a time: the rules first (rule_id hashes them
 * while packing them), then the key. */
static uint64_t hash_key(const struct rkey *k, uint64_t h)
{
	uint64_t w0;

	memcpy(&w0, k, 8);
	h = (h ^ w0) * 0xff51afd7ed558ccdull;
	h = (h ^ (uint32_t)k->cfa_off) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 32);
}

static uint64_t hash_rule(const struct rkey *k, const struct dw_regrule *regs, uint32_t n)
{
	uint64_t h = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t x;
		memcpy(&x, &regs[i], 8);
		h = (h ^ x) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	return hash_key(k, h);
}

static int same_rule(const struct rkey *a, const struct dw_regrule *ra, const struct rkey *b,
		     const struct dw_regrule *rb)
{
	uint64_t x, y;

	memcpy(&x, a, 8);
	memcpy(&y, b, 8);
	if (x != y || a->cfa_off != b->cfa_off)
		return 0;
	for (uint32_t i = 0; i < a->nregs; i++) {
		memcpy(&x, &ra[i], 8);
		memcpy(&y, &rb[i], 8);
		if (x != y)
			return 0;
	}
	return 1;
}

/* Recognise "DW_OP_bregN off [DW_OP_deref]" (signal frames are made of these). */
static void expr_shape(struct dw_expr_ref *e)
{
	struct dw_cursor c;
	uint8_t op;
	int64_t off;

	if (e->check || e->len < 2)
		return;
	cur_init(&c, e->p, e->len);
	op = cur_u8(&c);
	if (op < 0x70 || op > 0x8f) /* DW_OP_breg0 .. DW_OP_breg31 */
		return;
	off = cur_sleb(&c);
	if (c.err)
		return;
	if (!cur_left(&c))
		e->shape = DW_SHAPE_BREG;
	else if (cur_left(&c) == 1 && *c.p == 0x06) /* DW_OP_deref */
		e->shape = DW_SHAPE_BREG_DEREF;
	else
		return;
	e->shape_reg = (uint8_t)(op - 0x70);
	e->shape_off = off;
}

static int intern_expr(struct builder *b, const uint8_t *p, uint32_t len, int32_t *out)
{
	for (uint32_t i = 0; i < b->nexprs; i++)
		if (b->exprs[i].len == len && (b->exprs[i].p == p || memcmp(b->exprs[i].p, p, len) == 0)) {
			*out = (int32_t)i;
			return DWUNW_OK;
		}
	if (b->nexprs >= INT32_MAX)
		return DWUNW_ERR_NOMEM;
	if (grow_dict(b, (void **)&b->exprs, &b->cap_exprs, b->nexprs + 1, sizeof(*b->exprs)))
		return b->fixed ? DWUNW_ERR_UNSUPPORTED_CFI : DWUNW_ERR_NOMEM;
	b->exprs[b->nexprs] = (struct dw_expr_ref){ p, len, dw_expr_check(p, len, b->in->addr_size), 0, 0, 0 };
	expr_shape(&b->exprs[b->nexprs]);
	*out = (int32_t)b->nexprs++;
	return DWUNW_OK;
}

static int fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

static int rehash(struct builder *b)
{
	uint32_t size = b->hash_mask ? (b->hash_mask + 1) * 2 : 1024;
	uint32_t *h = calloc(size, sizeof(*h));

	if (!h)
		return DWUNW_ERR_NOMEM;
	free(b->hash);
	b->hash = h;
	b->hash_mask = size - 1;
	for (uint32_t id = 1; id < b->nrules; id++) {
		const struct dw_rule *r = &b->rules[id];
		uint64_t k = hash_rule(&b->keys[id], &b->regrules[r->reg_first], r->nregs);
		uint32_t i = (uint32_t)k & b->hash_mask;
		while (h[i])
			i = (i + 1) & b->hash_mask;
		h[i] = id + 1;
	}
	return DWUNW_OK;
}

/* The rule id of a state: an existing one when equal, else a new one. */
/* A FAST rule's two slots the walk needs at every frame (return address, frame pointer), in
 * words from the CFA: DW_RULEF_LEAN when the CFA is sp or fp based and both fit. */
static void lean_shape(struct dw_rule *r, const struct dw_regrule *rr, uint32_t n,
		       const struct dwunw_arch_ops *a)
{
	int64_t ra = 0, fp = 0;

	if (r->cfa_reg != a->sp_reg && r->cfa_reg != a->fp_reg)
		return;
	for (uint32_t i = 0; i < n; i++) {
		int64_t v = rr[i].val;
		if (rr[i].reg != r->ra_reg && rr[i].reg != a->fp_reg)
			continue;
		if (v % a->addr_size || v / a->addr_size < INT8_MIN || v / a->addr_size > INT8_MAX || !v)
			return;
		*(rr[i].reg == r->ra_reg ? &ra : &fp) = v / a->addr_size;
	}
	if (!ra || r->ra_reg == a->fp_reg || r->span > DW_LEAN_SPAN_MAX)
		return;
	r->ra_slot = (int8_t)ra;
	r->fp_slot = (int8_t)fp;
	r->flags |= DW_RULEF_LEAN | (r->cfa_reg == a->fp_reg && r->cfa_reg != a->sp_reg ? DW_RULEF_CFA_FP : 0);
}

/* The derived fields of a new rule: the shape its step takes (flags, slots, bounds, mask). */
static void derive_rule(const struct builder *b, struct dw_rule *r, const struct dw_regrule *rr, uint32_t n)
{
	const struct dwunw_arch_ops *a = b->in->arch;
	int64_t lo = INT32_MAX, hi = INT32_MIN;
	uint64_t set_mask = 0;

	if (r->cfa_kind == DW_CFA_KIND_REG && r->cfa_reg < DWUNW_MAX_REGS && r->ra_reg < DWUNW_MAX_REGS) {
		r->flags |= DW_RULEF_SIMPLE;
		if (!(r->flags & DW_RULEF_SIGNAL)) {
			int ra_undef = 0, all_undef = 1;
			for (uint32_t i = 0; i < n; i++) {
				all_undef &= rr[i].kind == DW_RULE_UNDEF;
				ra_undef |= rr[i].reg == r->ra_reg;
			}
			if (ra_undef && all_undef)
				r->flags |= DW_RULEF_OUTERMOST;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (rr[i].reg == r->ra_reg)
			r->flags |= DW_RULEF_RA_RULE;
		if (rr[i].reg >= DWUNW_MAX_REGS || rr[i].kind != DW_RULE_OFFSET)
			r->flags &= ~DW_RULEF_SIMPLE;
		if (rr[i].kind == DW_RULE_OFFSET) {
			lo = rr[i].val < lo ? rr[i].val : lo;
			hi = rr[i].val > hi ? rr[i].val : hi;
			if (rr[i].reg < 64)
				set_mask |= 1ull << rr[i].reg;
		}
	}
	if ((r->flags & (DW_RULEF_SIMPLE | DW_RULEF_RA_RULE | DW_RULEF_SIGNAL)) ==
	    (DW_RULEF_SIMPLE | DW_RULEF_RA_RULE) && a) {
		r->flags |= DW_RULEF_FAST;
		r->step_mask = (set_mask & (a->nregs >= 64 ? ~0ull : (1ull << a->nregs) - 1)) |
			       (a->sp_reg < 64 ? 1ull << a->sp_reg : 0);
	}
	/* slots one word wide: [lo, hi + word) */
	if (lo <= hi) {
		r->off_min = (int32_t)lo;
		r->span = (uint32_t)(hi - lo) + (b->in->addr_size ? b->in->addr_size : 8);
	}
	if (r->flags & DW_RULEF_FAST)
		lean_shape(r, rr, n, a);
}

/* The rule id of a state: an existing one when equal, else a new one. */
static int rule_id(struct builder *b, const struct dw_frame_state *st, uint32_t *out)
{
	struct rkey key = { 0 };
	struct dw_regrule *tmp = b->tmp;
	uint32_t n = 0;
	uint64_t k;
	int err;

	key.cfa_kind = st->cfa_kind;
	key.flags = b->cur_flags | (st->ra_signed ? DW_RULEF_RA_SIGNED : 0);
	key.ra_reg = b->cur_ra;
	if (st->cfa_kind == DW_CFA_KIND_REG) {
		if (st->cfa_reg > UINT16_MAX || !fits32(st->cfa_off))
			return DWUNW_ERR_UNSUPPORTED_CFI;
		key.cfa_reg = (uint16_t)st->cfa_reg;
		key.cfa_off = (int32_t)st->cfa_off;
	} else if (st->cfa_kind == DW_CFA_KIND_EXPR) {
		if ((err = intern_expr(b, st->cfa_expr, st->cfa_expr_len, &key.cfa_off)))
			return err;
	}
	/* The register rules, hashed as they are packed (hash_rule's order and mixing); the last
	 * row's when no column changed since. */
	if (b->tmp_ok && b->tmp_gen == st->cols_gen) {
		n = b->tmp_n;
		k = b->tmp_hash;
		goto packed;
	}
	b->tmp_ok = 0;
	k = 0;
	for (unsigned w = 0; w < DW_MAX_COLS / 64; w++) {
		uint64_t bits = st->set[w];
		while (bits) {
			unsigned reg = w * 64 + (unsigned)__builtin_ctzll(bits);
			const struct dw_col *c = &st->col[reg];
			uint8_t kind = c->kind;
			int32_t val = 0;
			uint64_t x;
			bits &= bits - 1;
			if (DW_LIKELY(kind == DW_RULE_OFFSET) || kind == DW_RULE_VAL_OFFSET || kind == DW_RULE_REG) {
				val = (int32_t)c->val;
				if (val != c->val)
					return DWUNW_ERR_UNSUPPORTED_CFI;
			} else if (kind == DW_RULE_EXPR || kind == DW_RULE_VAL_EXPR) {
				if ((err = intern_expr(b, c->expr, c->expr_len, &val)))
					return err;
			}
			tmp[n] = (struct dw_regrule){ (uint16_t)reg, kind, 0, val };
			memcpy(&x, &tmp[n], 8);
			n++;
			k = (k ^ x) * 0xff51afd7ed558ccdull;
			k ^= k >> 29;
		}
	}
	if (n > UINT8_MAX)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	b->tmp_ok = 1;
	b->tmp_n = (uint8_t)n;
	b->tmp_gen = st->cols_gen;
	b->tmp_hash = k;
packed:
	key.nregs = (uint8_t)n;
	k = hash_key(&key, k);

	for (uint32_t i = (uint32_t)k & b->hash_mask;; i = (i + 1) & b->hash_mask) {
		uint32_t id = b->hash[i];
		if (!id)
			break;
		/* (no register rules yet: regrules may still be NULL, and no index into it is made) */
		if (same_rule(&b->keys[id - 1], b->regrules ? b->regrules + b->rules[id - 1].reg_first : tmp, &key, tmp)) {
			*out = id - 1;
			return DWUNW_OK;
		}
	}
	if (grow_dict(b, (void **)&b->rules, &b->cap_rules, b->nrules + 1, sizeof(*b->rules)) ||
	    dw_grow((void **)&b->keys, &b->cap_keys, b->nrules + 1, sizeof(*b->keys)) ||
	    grow_dict(b, (void **)&b->regrules, &b->cap_regrules, b->nregrules + n, sizeof(*b->regrules)))
		return b->fixed ? DWUNW_ERR_UNSUPPORTED_CFI : DWUNW_ERR_NOMEM;
	struct dw_rule r = { .cfa_kind = key.cfa_kind, .flags = key.flags, .nregs = key.nregs,
			     .ra_reg = key.ra_reg, .cfa_reg = key.cfa_reg, .cfa_off = key.cfa_off,
			     .reg_first = b->nregrules };
	derive_rule(b, &r, tmp, n);
	if (n)
		memcpy(&b->regrules[b->nregrules], tmp, n * sizeof(struct dw_regrule));
	b->nregrules += n;
	b->rules[b->nrules] = r;
	b->keys[b->nrules] = key;
	*out = b->nrules++;
	if ((uint64_t)b->nrules * 2 > b->hash_mask)
		return rehash(b);
	/* insert */
	uint32_t i = (uint32_t)k & b->hash_mask;
	while (b->hash[i])
		i = (i + 1) & b->hash_mask;
	b->hash[i] = *out + 1;
	return DWUNW_OK;
}

static inline int add_row(struct builder *b, uint64_t pc, uint32_t id)
{
	uint64_t off;

	if (pc < b->base || (off = pc - b->base) > UINT32_MAX)
		return DWUNW_ERR_UNSUPPORTED_CFI; /* a module spanning more than 4 GiB of code */
	if (b->nrows && b->rows[b->nrows - 1].pc == off)
		b->nrows--; /* same start: the later rule wins */
	if (b->nrows && b->rows[b->nrows - 1].id == id)
		return DWUNW_OK; /* identical neighbour */
	if (DW_UNLIKELY(b->nrows == b->cap_rows) && dw_grow((void **)&b->rows, &b->cap_rows, b->nrows + 1, sizeof(*b->rows)))
		return DWUNW_ERR_NOMEM;
	b->rows[b->nrows++] = (struct brow){ (uint32_t)off, id };
	return DWUNW_OK;
}

static int on_row(void *arg, uint64_t pc, const struct dw_frame_state *st)
{
	struct builder *b = arg;
	uint32_t id;
	int err;

	/* Every FDE's first row is usually its CIE's state: its id is known after the first time. */
	if (!st->changed && b->memo_sec == b->cur_sec && b->memo_cie == b->cur_cie && b->memo_sec) {
		id = b->memo_id;
	} else {
		if ((err = rule_id(b, st, &id)))
			return err;
		if (!st->changed) {
			b->memo_sec = b->cur_sec;
			b->memo_cie = b->cur_cie;
			b->memo_id = id;
		}
	}
	return add_row(b, pc, id);
}

int dw_builder_in_ranges(const struct dw_table_input *in, uint64_t begin, uint64_t end)
{
	if (!in->nranges)
		return 1;
	for (uint32_t i = 0; i < in->nranges; i++)
		if (begin >= in->ranges[i][0] && end <= in->ranges[i][1])
			return 1;
	return 0;
}

int dw_builder_start(struct builder *b, const struct dw_table_input *in, uint64_t base)
{
	int err;

	b->in = in;
	b->base = base;
	if ((err = rehash(b)))
		return err;
	/* Rule 0: END */
	if ((err = grow_dict(b, (void **)&b->rules, &b->cap_rules, 1, sizeof(*b->rules))) ||
	    (err = dw_grow((void **)&b->keys, &b->cap_keys, 1, sizeof(*b->keys))))
		return err;
	memset(&b->rules[0], 0, sizeof(b->rules[0]));
	b->rules[0].cfa_kind = DW_CFA_KIND_END;
	memset(&b->keys[0], 0, sizeof(b->keys[0]));
	b->keys[0].cfa_kind = DW_CFA_KIND_END;
	b->nrules = 1;
	return DWUNW_OK;
}

void dw_builder_free(struct builder *b)
{
	free(b->rows);
	free(b->keys);
	free(b->hash);
	if (!b->fixed) {
		free(b->rules);
		free(b->regrules);
		free(b->exprs);
	}
}

int dw_builder_row(struct builder *b, uint64_t pc, uint32_t id)
{
	return add_row(b, pc, id);
}

int dw_builder_fde(struct builder *b, const struct dw_cfi_section *sec, const struct dw_cie *cie,
		   const struct dw_frame_state *cst, int cst_err, struct dw_fde *f, int *ferr)
{
	int e = cst_err;

	b->cur_flags = cie->signal ? DW_RULEF_SIGNAL : 0;
	b->cur_ra = (uint8_t)cie->ra_reg;
	b->cur_sec = sec;
	b->cur_cie = cie->offset;
	b->tmp_ok = 0; /* generations count within one program's run */
	if (!e && cie->ra_reg > UINT8_MAX)
		e = DWUNW_ERR_UNSUPPORTED_CFI;
	/* Rows are only kept from an FDE whose program ran to its end: a program that fails
	 * part-way is not trusted for any of its range. add_row may replace the last row
	 * before it, so that one is saved too. */
	uint32_t rows_before = b->nrows;
	struct brow last_before = rows_before ? b->rows[rows_before - 1] : (struct brow){ 0, 0 };
	if (!e)
		e = dw_cfi_run_fde(sec, cie, cst, f, on_row, b);
	*ferr = 0;
	if (e == DWUNW_ERR_NOMEM)
		return e;
	if (e) {
		*ferr = e;
		b->nrows = rows_before;
		if (rows_before)
			b->rows[rows_before - 1] = last_before;
		return add_row(b, f->pc_begin, 0);
	}
	return DWUNW_OK;
}

