// SPDX-License-Identifier: GPL-2.0-only
/* The eager build of a module's whole unwind table (sorted, indexed rows), and looking rows up. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bytes.h"
#include "expr.h"
#include "internal.h"
#include "table.h"
#include "table_build.h"
#include "table_lazy.h"


/* One FDE chosen for the table, with the range it finally covers. */
struct fde_ref {
	uint64_t begin, end;
	uint32_t src;              /* 0 = .eh_frame, 1 = .debug_frame */
	uint32_t idx;              /* in its scan */
};

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
	/* The rows' buffer becomes the table (no second block of the table's size, whose pages
	 * would be fresh ones): pcs and ids first, packed from the rows in place, then the rest. */
	size_t off_ids = ALIGN8(sz_pcs), off_rules = off_ids + ALIGN8(sz_ids);
	size_t off_regs = off_rules + ALIGN8(sz_rules), off_exprs = off_regs + ALIGN8(sz_regs);
	size_t off_blocks = off_exprs + ALIGN8(sz_exprs);
	t->bytes = off_blocks + ALIGN8(sz_blocks);
#undef ALIGN8
	/* the ids and the index blocks wait aside while the pcs are packed over the rows */
	uint8_t *aside = malloc(sz_ids + (size_t)nblocks * 4 + 8);
	uint32_t *blk;
	if (!aside)
		return DWUNW_ERR_NOMEM;
	blk = (uint32_t *)(void *)(aside + ((sz_ids + 3) & ~(size_t)3));
	/* blocks[k] = the last row starting at or before k << shift */
	for (uint32_t k = 0, r = 0; k < nblocks; k++) {
		uint64_t start = (uint64_t)k << shift;
		while (r + 1 < n && b->rows[r + 1].pc <= start)
			r++;
		blk[k] = r;
	}
	/* pcs16[i] (bytes 2i, 2i + 1) never lies past rows[i] (bytes 8i ..), read before it */
	uint16_t *pcs16 = (uint16_t *)(void *)b->rows;
	for (uint32_t i = 0; i < n; i++) {
		/* row i > 0 lies in (k << shift, (k + 1) << shift] for k = (pc - 1) >> shift */
		uint32_t pc = b->rows[i].pc, id = b->rows[i].id;
		if (t->wide_ids)
			((uint32_t *)(void *)aside)[i] = id;
		else
			((uint16_t *)(void *)aside)[i] = (uint16_t)id;
		pcs16[i] = i ? (uint16_t)(pc - 1 - (((pc - 1) >> shift) << shift)) : 0;
	}
	mem = realloc(b->rows, t->bytes ? t->bytes : 8);
	if (!mem) {
		free(aside);
		return DWUNW_ERR_NOMEM; /* (the rows' buffer is still the builder's) */
	}
	b->rows = NULL;
	b->cap_rows = 0;
	b->nrows = 0;
	t->mem = mem;
	t->pcs16 = (void *)mem;
	t->ids16 = (void *)(mem + off_ids);
	t->rules = (void *)(mem + off_rules);
	t->regrules = (void *)(mem + off_regs);
	t->exprs = (void *)(mem + off_exprs);
	t->rcache = (void *)(mem + off_blocks);
	t->blocks = (void *)(mem + off_blocks + ((size_t)8 << t->rcache_bits));
	if (sz_ids)
		memcpy(t->ids16, aside, sz_ids);
	memcpy(t->rules, b->rules, sz_rules);
	if (sz_regs)
		memcpy(t->regrules, b->regrules, sz_regs);
	if (sz_exprs)
		memcpy(t->exprs, b->exprs, sz_exprs);
	memset(t->rcache, 0, (size_t)8 << t->rcache_bits);
	memcpy(t->blocks, blk, (size_t)nblocks * 4);
	free(aside);
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
	if ((err = dw_grow((void **)&b->rows, &b->cap_rows, kept * 8 + 16, sizeof(*b->rows))))
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
			if ((err = dw_builder_row(b, r->end, 0)))
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
