// SPDX-License-Identifier: GPL-2.0-only
/* Compiling CFI into the sorted, deduplicated, indexed unwind table; and looking rows up. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bytes.h"
#include "expr.h"
#include "internal.h"
#include "table.h"
#include "table_build.h"
#include "table_lazy.h"

_Static_assert(sizeof(struct dw_rule) == 32 && offsetof(struct dw_rule, reg_first) == 12, "rule layout");
_Static_assert(sizeof(struct dw_regrule) == 8, "register rule layout");

/* One FDE chosen for the table, with the range it finally covers. */
struct fde_ref {
	uint64_t begin, end;
	uint32_t src;              /* 0 = .eh_frame, 1 = .debug_frame */
	uint32_t idx;              /* in its scan */
};

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem);

/* Growing the rule dictionary: a fixed one is full at its capacity. */
static int grow_dict(struct builder *b, void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (b->fixed)
		return need <= *cap ? DWUNW_OK : DWUNW_ERR_UNSUPPORTED_CFI;
	return grow(p, cap, need, elem);
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
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
	/* The register rules, hashed as they are packed (hash_rule's order and mixing). */
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
	    grow((void **)&b->keys, &b->cap_keys, b->nrules + 1, sizeof(*b->keys)) ||
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
	if (DW_UNLIKELY(b->nrows == b->cap_rows) && grow((void **)&b->rows, &b->cap_rows, b->nrows + 1, sizeof(*b->rows)))
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

static int cmp_fde_ref(const void *a, const void *b)
{
	const struct fde_ref *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* FDEs come in address order within a few ascending runs (one per group of linked objects):
 * merging the runs costs n per level and log(runs) levels. */
static int sort_refs(struct fde_ref *a, uint32_t n)
{
	struct fde_ref *tmp, *src = a, *dst;
	uint32_t *runs, nruns = 0;

	if (n < 2)
		return DWUNW_OK;
	for (uint32_t i = 1; i < n; i++)
		nruns += cmp_fde_ref(&a[i - 1], &a[i]) > 0;
	if (!nruns)
		return DWUNW_OK;
	nruns++;
	tmp = malloc((size_t)n * sizeof(*tmp));
	runs = malloc(((size_t)nruns + 1) * sizeof(*runs));
	if (!tmp || !runs) {
		free(tmp);
		free(runs);
		return DWUNW_ERR_NOMEM;
	}
	/* runs[k] = start of run k; runs[nruns] = n */
	nruns = 0;
	runs[nruns++] = 0;
	for (uint32_t i = 1; i < n; i++)
		if (cmp_fde_ref(&a[i - 1], &a[i]) > 0)
			runs[nruns++] = i;
	runs[nruns] = n;
	dst = tmp;
	while (nruns > 1) {
		uint32_t k, m = 0;
		for (k = 0; k + 1 < nruns; k += 2) {
			uint32_t i = runs[k], j = runs[k + 1], ie = runs[k + 1], je = runs[k + 2], o = runs[k];
			while (i < ie && j < je)
				dst[o++] = cmp_fde_ref(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
			while (i < ie)
				dst[o++] = src[i++];
			while (j < je)
				dst[o++] = src[j++];
			runs[m++] = runs[k];
		}
		if (k < nruns) { /* an odd run out: copied as is */
			memcpy(&dst[runs[k]], &src[runs[k]], (size_t)(runs[k + 1] - runs[k]) * sizeof(*dst));
			runs[m++] = runs[k];
		}
		runs[m] = n;
		nruns = m;
		struct fde_ref *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, (size_t)n * sizeof(*a));
	free(tmp);
	free(runs);
	return DWUNW_OK;
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

static void note_err(struct dw_table *t, int err, uint64_t off, uint32_t src)
{
	if (!t->first_err) {
		t->first_err = err;
		t->first_err_off = off;
		t->first_err_src = src;
	}
}

/* The CIE's initial state, cached: FDEs of one CIE are usually neighbours. */
struct cie_cache {
	int32_t src, cie;
	int err;
	struct dw_frame_state st;
};

static int finish(struct builder *b, struct dw_table *t)
{
	uint32_t n = b->nrows;
	uint64_t span, want;
	uint32_t shift = 4, nblocks;
	size_t sz_pcs, sz_ids, sz_rules, sz_regs, sz_exprs, sz_blocks;
	uint8_t *mem;

	/* Row 0 is at offset 0 (the 16-bit pcs below count from it) */
	if (n && b->rows[0].pc) {
		uint32_t d = b->rows[0].pc;
		for (uint32_t i = 0; i < n; i++)
			b->rows[i].pc -= d;
		b->base += d;
	}
	t->base = b->base;
	t->nrows = n;
	t->nrules = b->nrules;
	t->nregrules = b->nregrules;
	t->nexprs = b->nexprs;
	t->wide_ids = b->nrules > UINT16_MAX + 1u;
	/* About eight rows per index block keeps the index near half a byte per row; blocks of at
	 * most 64 KiB keep a row's pc within 16 bits of its block's start. */
	span = n ? (uint64_t)b->rows[n - 1].pc + 1 : 1;
	want = n / 8 ? n / 8 : 1;
	while (shift < 16 && (span >> shift) + 1 > want)
		shift++;
	nblocks = (uint32_t)((span >> shift) + 1);
	t->shift = shift;
	t->nblocks = nblocks;

	sz_pcs = (size_t)n * 2;
	sz_ids = (size_t)n * (t->wide_ids ? 4 : 2);
	sz_rules = (size_t)b->nrules * sizeof(struct dw_rule);
	sz_regs = (size_t)b->nregrules * sizeof(struct dw_regrule);
	sz_exprs = (size_t)b->nexprs * sizeof(struct dw_expr_ref);
	/* the look-up cache: about one entry per 4 rows, 64 to 512 entries (a stack touches a few
	 * dozen rows of a module; small tables need fewer entries than rows) */
	t->rcache_bits = 6;
	while (t->rcache_bits < DW_RCACHE_BITS && ((uint64_t)4 << t->rcache_bits) < n)
		t->rcache_bits++;
	sz_blocks = (size_t)nblocks * 4 + ((size_t)8 << t->rcache_bits);
#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
	t->bytes = ALIGN8(sz_pcs) + ALIGN8(sz_ids) + ALIGN8(sz_rules) + ALIGN8(sz_regs) +
		   ALIGN8(sz_exprs) + ALIGN8(sz_blocks);
	mem = malloc(t->bytes ? t->bytes : 8);
	if (!mem)
		return DWUNW_ERR_NOMEM;
	t->mem = mem;
	t->rules = (void *)mem;
	mem += ALIGN8(sz_rules);
	t->regrules = (void *)mem;
	mem += ALIGN8(sz_regs);
	t->exprs = (void *)mem;
	mem += ALIGN8(sz_exprs);
	t->rcache = (void *)mem;
	memset(mem, 0, (size_t)8 << t->rcache_bits);
	t->blocks = (void *)(mem + ((size_t)8 << t->rcache_bits));
	mem += ALIGN8(sz_blocks);
	t->pcs16 = (void *)mem;
	mem += ALIGN8(sz_pcs);
	t->ids16 = (void *)mem;
#undef ALIGN8
	memcpy(t->rules, b->rules, sz_rules);
	if (sz_regs)
		memcpy(t->regrules, b->regrules, sz_regs);
	if (sz_exprs)
		memcpy(t->exprs, b->exprs, sz_exprs);
	for (uint32_t i = 0; i < n; i++) {
		/* row i > 0 lies in (k << shift, (k + 1) << shift] for k = (pc - 1) >> shift */
		uint32_t pc = b->rows[i].pc;
		t->pcs16[i] = i ? (uint16_t)(pc - 1 - (((pc - 1) >> shift) << shift)) : 0;
		if (t->wide_ids)
			t->ids32[i] = b->rows[i].id;
		else
			t->ids16[i] = (uint16_t)b->rows[i].id;
	}
	/* blocks[k] = the last row starting at or before k << shift */
	for (uint32_t k = 0, r = 0; k < nblocks; k++) {
		uint64_t start = (uint64_t)k << shift;
		while (r + 1 < n && b->rows[r + 1].pc <= start)
			r++;
		t->blocks[k] = r;
	}
	return DWUNW_OK;
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
	    (err = grow((void **)&b->keys, &b->cap_keys, 1, sizeof(*b->keys))))
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

int dw_table_build(const struct dw_table_input *in, struct dw_table *t)
{
	const struct dw_cfi_section *secs[2] = { in->eh_frame, in->debug_frame };
	struct dw_cfi_scan scans[2];
	struct builder *b = NULL;
	struct fde_ref *refs = NULL;
	struct cie_cache *cc = NULL;
	uint32_t nrefs = 0, kept = 0;
	struct timespec t0, t1;
	int err = DWUNW_OK;

	memset(t, 0, sizeof(*t));
	memset(scans, 0, sizeof(scans));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t->addr_size = in->addr_size;
	t->machine = in->machine;

	for (int s = 0; s < 2; s++) {
		if (!secs[s])
			continue;
		err = dw_cfi_scan(secs[s], &scans[s]);
		if (err)
			goto out;
		if (scans[s].first_err)
			note_err(t, scans[s].first_err, scans[s].first_err_off,
				 s ? DWUNW_TABLE_SRC_DEBUG_FRAME : DWUNW_TABLE_SRC_EH_FRAME);
		t->fdes_dropped += scans[s].bad;
		t->nfdes += scans[s].nfdes + scans[s].bad;
	}
	refs = malloc(((size_t)scans[0].nfdes + scans[1].nfdes + 1) * sizeof(*refs));
	b = calloc(1, sizeof(*b));
	cc = calloc(1, sizeof(*cc));
	if (!refs || !b || !cc) {
		err = DWUNW_ERR_NOMEM;
		goto out;
	}
	for (uint32_t s = 0; s < 2; s++)
		for (uint32_t i = 0; i < scans[s].nfdes; i++) {
			const struct dw_fde *f = &scans[s].fdes[i];
			if (f->pc_begin >= f->pc_end || !dw_builder_in_ranges(in, f->pc_begin, f->pc_end)) {
				t->fdes_dropped++;
				continue;
			}
			refs[nrefs++] = (struct fde_ref){ f->pc_begin, f->pc_end, s, i };
		}
	if ((err = sort_refs(refs, nrefs)))
		goto out;

	/* Overlaps: .eh_frame beats .debug_frame; within one section the later FDE wins. */
	for (uint32_t i = 0; i < nrefs; i++) {
		struct fde_ref *r = &refs[i];
		while (kept) {
			struct fde_ref *p = &refs[kept - 1];
			if (r->begin >= p->end)
				break;
			if (r->src > p->src)
				goto drop; /* debug_frame under an eh_frame FDE */
			p->end = r->begin;
			if (p->end > p->begin)
				break;
			kept--; /* nothing left of it */
			t->fdes_dropped++;
		}
		refs[kept++] = *r;
		continue;
drop:
		t->fdes_dropped++;
	}

	if (!kept) {
		err = (t->first_err && !scans[0].nfdes && !scans[1].nfdes) ? t->first_err
									    : DWUNW_ERR_NO_DWARF;
		goto out;
	}
	/* libc and node have 6-8 rows per FDE */
	if ((err = grow((void **)&b->rows, &b->cap_rows, kept * 8 + 16, sizeof(*b->rows))))
		goto out;
	if ((err = dw_builder_start(b, in, refs[0].begin)))
		goto out;

	cc->src = -1;
	for (uint32_t i = 0; i < kept; i++) {
		const struct fde_ref *r = &refs[i];
		const struct dw_cfi_section *sec = secs[r->src];
		struct dw_cfi_scan *sc = &scans[r->src];
		struct dw_fde f = sc->fdes[r->idx];
		const struct dw_cie *cie = &sc->cies[f.cie];
		uint32_t src_flag = r->src ? DWUNW_TABLE_SRC_DEBUG_FRAME : DWUNW_TABLE_SRC_EH_FRAME;
		int ferr;

		if (cc->src != (int32_t)r->src || cc->cie != (int32_t)f.cie) {
			cc->src = (int32_t)r->src;
			cc->cie = (int32_t)f.cie;
			cc->err = dw_cfi_cie_state(sec, cie, &cc->st);
		}
		f.pc_end = r->end; /* clipped by a later FDE */
		if ((err = dw_builder_fde(b, sec, cie, &cc->st, cc->err, &f, &ferr)))
			goto out;
		if (ferr) {
			note_err(t, ferr, f.offset, src_flag);
			t->fdes_dropped++;
		}
		t->sources |= src_flag;
		if (i + 1 == kept || refs[i + 1].begin != r->end) {
			if ((err = add_row(b, r->end, 0)))
				goto out;
		}
	}
	err = finish(b, t);
out:
	if (b)
		dw_builder_free(b);
	free(b);
	free(cc);
	free(refs);
	dw_cfi_scan_free(&scans[0]);
	dw_cfi_scan_free(&scans[1]);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	t->build_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
	if (err && err != DWUNW_ERR_NO_DWARF) {
		int keep = t->first_err;
		uint64_t off = t->first_err_off;
		dw_table_free(t);
		t->first_err = keep;
		t->first_err_off = off;
	}
	return err;
}

void dw_table_free(struct dw_table *t)
{
	if (t->lazy) {
		dw_lazy_free(t->lazy);
		free(t->rcache);
	}
	free(t->mem);
	memset(t, 0, sizeof(*t));
}

int64_t dw_table_find(const struct dw_table *t, uint64_t addr)
{
	uint64_t off;
	uint32_t b, lo, hi, rel;

	if (!t->nrows || addr < t->base)
		return -1;
	off = addr - t->base;
	b = (uint32_t)(off >> t->shift);
	if (off > UINT32_MAX || b >= t->nblocks)
		return t->nrows - 1;
	lo = t->blocks[b];
	hi = b + 1 < t->nblocks ? t->blocks[b + 1] : t->nrows - 1;
	/* The last row in [lo, hi] starting at or before off. Row lo does; the rows after it start
	 * in (b << shift, (b + 1) << shift], at (b << shift) + 1 + pcs16. */
	rel = (uint32_t)(off - ((uint64_t)b << t->shift));
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (t->pcs16[mid] < rel)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

uint32_t dw_table_pc(const struct dw_table *t, uint32_t row)
{
	uint32_t lo = 1, hi = t->nblocks;

	if (!row)
		return 0;
	/* its block k: blocks[k] < row <= blocks[k + 1], or the last block */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->blocks[mid] >= row)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (uint32_t)(((uint64_t)(lo - 1) << t->shift) + 1 + t->pcs16[row]);
}

const struct dw_rule *dw_table_rule_slow(const struct dw_table *t, uint64_t addr)
{
	uint64_t off = addr - t->base, e, e2;
	int64_t row;
	uint32_t slot, id;

	if (addr < t->base || off >= UINT32_MAX) {
		if (t->lazy)
			return NULL; /* a lazy table spans less than 4 GiB from its first FDE */
		row = dw_table_find(t, addr);
		return row < 0 ? NULL : dw_table_rule(t, (uint32_t)row);
	}
	slot = (uint32_t)(((off + 1) * 0x9e3779b97f4a7c15ull) >> (64 - t->rcache_bits)) & ~1u;
	e2 = atomic_load_explicit(&t->rcache[slot + 1], memory_order_relaxed);
	if ((e2 >> 32) == off + 1)
		return &t->rules[(uint32_t)e2];
	if (t->lazy) {
		if (dw_lazy_rule_id(t, addr, &id))
			return NULL;
	} else {
		row = dw_table_find(t, addr);
		if (row < 0)
			return NULL;
		id = dw_table_id(t, (uint32_t)row);
	}
	e = atomic_load_explicit(&t->rcache[slot], memory_order_relaxed);
	atomic_store_explicit(&t->rcache[slot + 1], e, memory_order_relaxed);
	atomic_store_explicit(&t->rcache[slot], (off + 1) << 32 | id, memory_order_relaxed);
	return &t->rules[id];
}
