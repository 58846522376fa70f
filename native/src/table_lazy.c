// SPDX-License-Identifier: GPL-2.0-only
/*
 * Tables built by range, on first use: for big modules (node: 76 k FDEs, 465 k rows) the first
 * unwind must not wait for every row. The directory is .eh_frame_hdr's sorted table (no scan);
 * a block of DW_LAZY_BLOCK_FDES consecutive FDEs is compiled when a pc in it is first looked up,
 * under the table's lock, and published with a release store: a warm look-up reads one pointer
 * more than an eager table's (and only on a look-up cache miss).
 *
 * The rule dictionary is shared by all blocks (so the look-up cache keeps holding rule ids) and
 * lives in fixed reservations that never move: readers keep pointers into it while blocks are
 * added. A reader that takes a rule id from the look-up cache reaches the rule through that id
 * (an address dependency), which orders it after the rule was written.
 *
 * The CFI bytes are the module's private copy read when the directory was built: a file
 * rewritten since is never parsed as if it were the old one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "bytes.h"
#include "internal.h"
#include "table.h"
#include "table_build.h"
#include "table_lazy.h"

#define DW_LAZY_BLOCK_FDES 64
#define DW_LAZY_MAX_RULES  65536       /* ids stay 16-bit */
#define DW_LAZY_MAX_REGS   (1u << 20)
#define DW_LAZY_MAX_EXPRS  16384

struct dw_lblock {
	uint32_t nrows;
	uint32_t *pcs;             /* offsets from the table's base */
	uint16_t *ids;
};

/* A block whose build failed: no CFI there, and no second try. */
static struct dw_lblock failed_block;

struct dw_lazy {
	pthread_mutex_t lock;
	struct builder b;          /* the dictionary and the rows of the block being built */
	struct dw_table_input in;
	struct dw_cfi_section eh;
	uint64_t ranges[16][2];
	struct dw_cfi_scan cies;   /* CIEs parsed so far */
	int64_t cie_off;           /* the CIE whose state is cached, -1 = none */
	int cie_err;
	struct dw_frame_state cie_st;
	const uint8_t *tab;        /* .eh_frame_hdr's pairs (initial_loc, FDE), datarel sdata4 */
	uint64_t hdr_vaddr;
	uint32_t nfdes, nblocks;
	_Atomic(struct dw_lblock *) *blocks;
	void *res;                 /* the dictionary's reservation */
	size_t res_size;
	_Atomic uint64_t built_bytes;
	_Atomic uint32_t built_blocks;
};

static int32_t le32s(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4); /* dwunw reads little-endian ELF only */
	return (int32_t)v;
}

static uint64_t tab_pc(const struct dw_lazy *z, uint32_t i)
{
	return z->hdr_vaddr + (uint64_t)(int64_t)le32s(z->tab + (size_t)i * 8);
}

static uint64_t tab_fde(const struct dw_lazy *z, uint32_t i)
{
	return z->hdr_vaddr + (uint64_t)(int64_t)le32s(z->tab + (size_t)i * 8 + 4);
}

void dw_lazy_free(struct dw_lazy *z)
{
	if (!z)
		return;
	for (uint32_t k = 0; k < z->nblocks; k++) {
		struct dw_lblock *bl = atomic_load_explicit(&z->blocks[k], memory_order_relaxed);
		if (bl && bl != &failed_block)
			free(bl);
	}
	free(z->blocks);
	dw_builder_free(&z->b);
	dw_cfi_scan_free(&z->cies);
	if (z->res)
		munmap(z->res, z->res_size);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

/* The header's fields before the table: version 1, the encodings, eh_frame_ptr, fde_count. */
static int parse_hdr(struct dw_lazy *z, const uint8_t *hdr, uint64_t size, uint64_t vaddr)
{
	struct dw_cfi_section hs = { .data = hdr, .size = size, .vaddr = vaddr, .is_eh = 1,
				     .addr_size = z->eh.addr_size, .machine = z->eh.machine,
				     .data_vaddr = vaddr };
	struct dw_cursor c;
	uint64_t ptr, count;
	uint8_t ver, ptr_enc, cnt_enc, tab_enc;

	cur_init(&c, hdr, size);
	ver = cur_u8(&c);
	ptr_enc = cur_u8(&c);
	cnt_enc = cur_u8(&c);
	tab_enc = cur_u8(&c);
	if (c.err || ver != 1 || cnt_enc == DW_EH_PE_omit || tab_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return DWUNW_ERR_UNSUPPORTED_CFI;
	if ((ptr_enc & DW_EH_PE_indirect) || (cnt_enc & DW_EH_PE_indirect) ||
	    dw_read_encoded(&hs, &c, ptr_enc, 0, &ptr) || dw_read_encoded(&hs, &c, cnt_enc, 0, &count))
		return DWUNW_ERR_CORRUPT;
	if (ptr != z->eh.vaddr || !count || count > cur_left(&c) / 8 || count > UINT32_MAX / 2)
		return DWUNW_ERR_CORRUPT; /* another .eh_frame, or a truncated table */
	z->tab = c.p;
	z->hdr_vaddr = vaddr;
	z->nfdes = (uint32_t)count;
	/* Binary search needs the order the header promises: check it once (4 instructions a pair). */
	for (uint32_t i = 1; i < z->nfdes; i++)
		if (tab_pc(z, i) < tab_pc(z, i - 1))
			return DWUNW_ERR_CORRUPT;
	return DWUNW_OK;
}

int dw_table_lazy_init(const struct dw_table_input *in, const uint8_t *hdr, uint64_t hdr_size,
		       uint64_t hdr_vaddr, struct dw_table *t)
{
	struct dw_lazy *z;
	struct timespec t0, t1;
	size_t sz_rules = (size_t)DW_LAZY_MAX_RULES * sizeof(struct dw_rule);
	size_t sz_regs = (size_t)DW_LAZY_MAX_REGS * sizeof(struct dw_regrule);
	size_t sz_exprs = (size_t)DW_LAZY_MAX_EXPRS * sizeof(struct dw_expr_ref);
	int err;

	if (!in->eh_frame || in->debug_frame || in->nranges > 16)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	z = calloc(1, sizeof(*z));
	if (!z)
		return DWUNW_ERR_NOMEM;
	pthread_mutex_init(&z->lock, NULL);
	z->eh = *in->eh_frame;
	z->in = *in;
	z->in.eh_frame = &z->eh;
	memcpy(z->ranges, in->ranges, (size_t)in->nranges * sizeof(z->ranges[0]));
	z->in.ranges = (const uint64_t (*)[2])z->ranges;
	z->cie_off = -1;
	if ((err = parse_hdr(z, hdr, hdr_size, hdr_vaddr)))
		goto fail;
	z->nblocks = (z->nfdes + DW_LAZY_BLOCK_FDES - 1) / DW_LAZY_BLOCK_FDES;
	z->blocks = calloc(z->nblocks, sizeof(*z->blocks));
	/* Address space only: pages are touched as rules are added. */
	z->res_size = sz_rules + sz_regs + sz_exprs;
	z->res = mmap(NULL, z->res_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (z->res == MAP_FAILED)
		z->res = NULL;
	if (!z->blocks || !z->res) {
		err = DWUNW_ERR_NOMEM;
		goto fail;
	}
	z->b.fixed = 1;
	z->b.rules = z->res;
	z->b.cap_rules = DW_LAZY_MAX_RULES;
	z->b.regrules = (void *)((uint8_t *)z->res + sz_rules);
	z->b.cap_regrules = DW_LAZY_MAX_REGS;
	z->b.exprs = (void *)((uint8_t *)z->res + sz_rules + sz_regs);
	z->b.cap_exprs = DW_LAZY_MAX_EXPRS;
	if ((err = dw_builder_start(&z->b, &z->in, tab_pc(z, 0))))
		goto fail;

	memset(t, 0, sizeof(*t));
	t->base = z->b.base;
	t->addr_size = in->addr_size;
	t->machine = in->machine;
	t->rules = z->b.rules;
	t->regrules = z->b.regrules;
	t->exprs = z->b.exprs;
	t->nexprs = DW_LAZY_MAX_EXPRS; /* rules name only built ones */
	t->rcache_bits = DW_RCACHE_BITS;
	t->rcache = calloc((size_t)1 << t->rcache_bits, sizeof(*t->rcache));
	if (!t->rcache) {
		err = DWUNW_ERR_NOMEM;
		goto fail;
	}
	t->nfdes = z->nfdes;
	t->sources = DWUNW_TABLE_SRC_EH_FRAME;
	t->lazy = z;
	t->bytes = ((size_t)8 << t->rcache_bits) + (size_t)z->nblocks * sizeof(*z->blocks);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	t->build_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
	return DWUNW_OK;
fail:
	dw_lazy_free(z);
	return err;
}

/* The state after a CIE's instructions, for the CIE at `off` (cached: one CIE is the rule). */
static const struct dw_frame_state *cie_state(struct dw_lazy *z, const struct dw_cie *cie, int *err)
{
	if (z->cie_off != (int64_t)cie->offset) {
		z->cie_off = (int64_t)cie->offset;
		z->cie_err = dw_cfi_cie_state(&z->eh, cie, &z->cie_st);
	}
	*err = z->cie_err;
	return &z->cie_st;
}

/* Compile block k's FDEs into rows. Locked. */
static struct dw_lblock *build_block(struct dw_lazy *z, uint32_t k)
{
	struct builder *b = &z->b;
	uint32_t first = k * DW_LAZY_BLOCK_FDES, last = first + DW_LAZY_BLOCK_FDES;
	struct dw_lblock *bl;
	int err = DWUNW_OK;

	uint32_t rules_before = b->nrules, regs_before = b->nregrules;

	if (last > z->nfdes)
		last = z->nfdes;
	b->nrows = 0;
	for (uint32_t i = first; i < last && !err; i++) {
		uint64_t pc = tab_pc(z, i), next = i + 1 < z->nfdes ? tab_pc(z, i + 1) : UINT64_MAX;
		uint64_t fde_addr = tab_fde(z, i);
		struct dw_fde f;
		const struct dw_frame_state *st;
		int cerr, ferr;

		if (next == pc)
			continue; /* two FDEs for one address: the next one wins */
		if (fde_addr < z->eh.vaddr || fde_addr - z->eh.vaddr >= z->eh.size ||
		    dw_cfi_fde_at(&z->eh, &z->cies, fde_addr - z->eh.vaddr, &f) || f.pc_begin != pc ||
		    f.pc_begin >= f.pc_end || !dw_builder_in_ranges(&z->in, f.pc_begin, f.pc_end)) {
			err = dw_builder_row(b, pc, 0); /* no CFI here, not a guess */
			continue;
		}
		if (f.pc_end > next)
			f.pc_end = next; /* clipped by the next FDE */
		st = cie_state(z, &z->cies.cies[f.cie], &cerr);
		if ((err = dw_builder_fde(b, &z->eh, &z->cies.cies[f.cie], st, cerr, &f, &ferr)))
			break;
		if (f.pc_end != next)
			err = dw_builder_row(b, f.pc_end, 0);
	}
	if (err || !b->nrows)
		return &failed_block;
	bl = malloc(sizeof(*bl) + (size_t)b->nrows * 6);
	if (!bl)
		return &failed_block;
	bl->nrows = b->nrows;
	bl->pcs = (uint32_t *)(bl + 1);
	bl->ids = (uint16_t *)(bl->pcs + b->nrows);
	for (uint32_t r = 0; r < b->nrows; r++) {
		bl->pcs[r] = b->rows[r].pc;
		bl->ids[r] = (uint16_t)b->rows[r].id;
	}
	atomic_fetch_add_explicit(&z->built_bytes, sizeof(*bl) + (uint64_t)b->nrows * 6 +
				  (uint64_t)(b->nrules - rules_before) * sizeof(struct dw_rule) +
				  (uint64_t)(b->nregrules - regs_before) * sizeof(struct dw_regrule),
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&z->built_blocks, 1, memory_order_relaxed);
	return bl;
}

int dw_lazy_rule_id(const struct dw_table *t, uint64_t addr, uint32_t *id)
{
	struct dw_lazy *z = t->lazy;
	struct dw_lblock *bl;
	uint32_t lo = 0, hi = z->nfdes - 1, k;
	uint64_t off;

	if (addr < tab_pc(z, 0))
		return -1;
	/* the last FDE starting at or before addr */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (tab_pc(z, mid) <= addr)
			lo = mid;
		else
			hi = mid - 1;
	}
	k = lo / DW_LAZY_BLOCK_FDES;
	bl = atomic_load_explicit(&z->blocks[k], memory_order_acquire);
	if (!bl) {
		pthread_mutex_lock(&z->lock);
		bl = atomic_load_explicit(&z->blocks[k], memory_order_relaxed);
		if (!bl) {
			bl = build_block(z, k);
			atomic_store_explicit(&z->blocks[k], bl, memory_order_release);
		}
		pthread_mutex_unlock(&z->lock);
	}
	off = addr - t->base;
	if (!bl->nrows || off > UINT32_MAX || off < bl->pcs[0])
		return -1;
	lo = 0;
	hi = bl->nrows - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (bl->pcs[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	*id = bl->ids[lo];
	return 0;
}

uint64_t dw_lazy_bytes(const struct dw_table *t)
{
	const struct dw_lazy *z = t->lazy;

	return t->bytes + atomic_load_explicit(&z->built_bytes, memory_order_relaxed);
}
