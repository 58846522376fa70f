// SPDX-License-Identifier: GPL-2.0-only
/*
 * dwunw_capture: the walk. Per frame: find the mapping (binary search), the module (held once
 * per capture), the table row (block index + binary search), then one step that computes the
 * CFA and the caller's registers. Memory comes from the snapshot, then from the live process,
 * then from read-only module data. No allocation, no lock and no system call per frame while
 * everything needed is in the snapshot.
 */
#include <stdlib.h>
#include <string.h>
#include "expr.h"
#include "internal.h"
#include "proc.h"
#include "symbols.h"
#include "table.h"
#include "utils/stack_reader.h"

#define DW_HELD_MAX 32
#define DW_STEP_REGS 34  /* registers copied per step: at least every backend's nregs (x86_64 17, arm64 and mips32 32) */

/* The register state of one frame: only the arch's registers are copied between steps. */
struct state {
	uint64_t pc;
	uint64_t valid;
	uint64_t regs[DWUNW_MAX_REGS];
};

/* Where a pc is: a mapping, its module (held once per capture), load bias and table. */
struct place {
	uint64_t start, len;       /* the mapping: lookup - start < len */
	uint64_t bias;
	const struct dw_table *table;
	/* the table's look-up, unpacked for walk_fast (rcache NULL: no table) */
	uint64_t tbias;            /* bias + table base: lookup - tbias is the table offset */
	_Atomic uint64_t *rcache;
	unsigned rshift;
	const struct dw_rule *rules;
	const struct dw_regrule *regrules;
	struct dwunw_module *mod;
	struct dw_map *map;
	uint32_t fflags;           /* DWUNW_FRAME_* every frame here carries (JIT, vDSO, uprobes) */
	int err;
	uint8_t unused;            /* taken from the memo, no frame yet: held[hidx] has no frame */
	uint8_t hidx;
};

#define DW_LIVE_PAGE 4096
#define DW_LIVE_SPAN (64u << 10)   /* bytes of live stack read in one batch */
#define DW_SAMPLE_MAX 4096u        /* bytes of samples checked per capture */
#define DW_SAMPLE_IOV 64           /* samples checked per capture */

struct walk {
	struct dwunw_ctx_impl *c;
	const struct dwunw_arch_ops *arch;
	const struct dwunw_regs *in;
	const uint8_t *snap;
	uint64_t snap_lo, snap_len;
	struct dw_proc *proc;
	int proc_ref;              /* the capture holds a reference on proc (else it is a reader) */
	unsigned nplaces;          /* places filled so far */
	uint8_t remote_on;
	uint8_t refreshed;
	uint8_t beyond;            /* the current step read beyond the snapshot */
	uint8_t checked;           /* the samples were compared with the live process */
	uint8_t stale;             /* ... and one differed: live memory is not trusted */
	unsigned asz;
	uint64_t live_lo, live_len; /* live_buf holds the process's bytes [live_lo, +live_len) */
	uint8_t *live_buf;         /* DW_LIVE_SPAN + DW_SAMPLE_MAX bytes, allocated on first need */
	const struct dwunw_stack_sample *samples;
	size_t nsamples;
	/* not cleared at the start of a capture: */
	struct dw_remote remote;   /* set up on first use (remote_on) */
	struct place places[4];    /* recent ones (frame_place); empty: len 0, no rcache */
	struct {
		struct dwunw_module *m;
		uint32_t frame;    /* first frame using it: it carries the reference */
	} held[DW_HELD_MAX];
	unsigned nheld;
};

static const struct place no_place; /* empty: len 0, no table */

/* The first frame in a place taken from the memo carries its module's reference. */
static inline void place_use(struct walk *w, const struct place *pl, uint32_t fi)
{
	if (DW_UNLIKELY(pl->unused)) {
		if (w->held[pl->hidx].frame > fi)
			w->held[pl->hidx].frame = fi;
		((struct place *)pl)->unused = 0;
	}
}

static int read_module_data(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	struct dw_map *m;
	struct dwunw_module *mod;
	int err;

	if (!w->proc)
		return DWUNW_ERR_IO;
	m = (struct dw_map *)dw_proc_find(w->proc, addr);
	/* Only data the process cannot have changed: read-only file mappings. */
	if (!m || m->kind != DW_MAP_FILE || (m->prot & DW_PROT_W) || addr + len > m->end)
		return DWUNW_ERR_IO;
	err = dw_map_module(w->c, w->proc, m, NULL, NULL, &mod);
	if (err)
		return err;
	err = dw_elf_read_vaddr(&mod->elf, addr - atomic_load_explicit(&m->bias, memory_order_relaxed), buf, len);
	dw_module_put(mod);
	return err ? DWUNW_ERR_IO : DWUNW_OK;
}

/*
 * The first read beyond the snapshot: every sample (dwunw_capture_sampled) read back in the same
 * system call as the span; any difference, or a sample no longer readable, marks the capture
 * stale. Returns DWUNW_OK with the span read, or the span's error.
 */
static int live_fill(struct walk *w, uint64_t lo, uint64_t len, int check)
{
	struct dw_remote_iov iov[1 + DW_SAMPLE_IOV];
	const struct dwunw_stack_sample *smp[DW_SAMPLE_IOV];
	unsigned n = 1, ns = 0;
	uint64_t used = 0;
	int err;

	w->live_len = 0; /* the buffer is rewritten: nothing cached until the read succeeds */
	iov[0] = (struct dw_remote_iov){ lo, w->live_buf, len };
	for (size_t i = 0; check && i < w->nsamples && ns < DW_SAMPLE_IOV; i++) {
		const struct dwunw_stack_sample *sm = &w->samples[i];

		if (!sm->data || !sm->len || sm->len > DW_SAMPLE_MAX - used)
			continue;
		/* inside the snapshot: nothing is read live there */
		if (sm->addr >= w->snap_lo && sm->addr - w->snap_lo < w->snap_len)
			continue;
		iov[n++] = (struct dw_remote_iov){ sm->addr, w->live_buf + DW_LIVE_SPAN + used, sm->len };
		smp[ns++] = sm;
		used += sm->len;
	}
	err = dw_remote_readv(&w->remote, iov, n);
	if (err && n > 1) {
		/* the span alone: a sample that cannot be read any more is memory gone since */
		err = dw_remote_read(&w->remote, lo, w->live_buf, len);
		if (!err)
			w->stale = 1;
	}
	if (err)
		return err;
	for (unsigned i = 0; i < ns && !w->stale; i++)
		if (memcmp(iov[i + 1].buf, smp[i]->data, smp[i]->len))
			w->stale = 1;
	if (check)
		w->checked = 1;
	w->live_lo = lo;
	w->live_len = len;
	return DWUNW_OK;
}

/*
 * Memory beyond the snapshot, read from the live process in batches: the rest of the stack's
 * mapping from the page of the first miss, up to DW_LIVE_SPAN, in one system call (a deep walk
 * past the window costs one read, not one per page or word). A miss outside the known mappings
 * (a main stack grown since the maps were read) tries the whole span, then one page. Once a
 * sample showed a change, nothing more is read: DWUNW_ERR_STALE.
 */
static int live_read(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	uint64_t page = addr & ~(uint64_t)(DW_LIVE_PAGE - 1), span = DW_LIVE_SPAN;
	const struct dw_map *m;
	int err;

	if (w->stale)
		return DWUNW_ERR_STALE;
	if (w->live_len && addr >= w->live_lo && addr - w->live_lo <= w->live_len &&
	    len <= w->live_len - (addr - w->live_lo)) {
		memcpy(buf, w->live_buf + (addr - w->live_lo), len);
		return DWUNW_OK;
	}
	if (!w->live_buf)
		w->live_buf = atomic_exchange_explicit(&w->c->live_spare, NULL, memory_order_acquire);
	if (!w->live_buf && !(w->live_buf = malloc(DW_LIVE_SPAN + DW_SAMPLE_MAX)))
		return dw_remote_read(&w->remote, addr, buf, len);
	if (w->proc && (m = dw_proc_find(w->proc, addr)) && m->end > addr && m->end - page < span)
		span = m->end - page;
	if (len > span || addr - page > span - len) {
		/* across the mapping's end or a page edge: read it alone, once the samples are checked */
		if (!w->checked && live_fill(w, page, DW_LIVE_PAGE, 1) == DWUNW_OK && w->stale)
			return DWUNW_ERR_STALE;
		return dw_remote_read(&w->remote, addr, buf, len);
	}
	err = live_fill(w, page, span, !w->checked);
	if (err && span > DW_LIVE_PAGE)
		err = live_fill(w, page, DW_LIVE_PAGE, !w->checked);
	if (err) {
		w->live_len = 0;
		return dw_remote_read(&w->remote, addr, buf, len); /* its own error */
	}
	if (w->stale)
		return DWUNW_ERR_STALE;
	memcpy(buf, w->live_buf + (addr - page), len);
	return DWUNW_OK;
}

/* Code (read to recognise a signal trampoline where no CFI covers the pc, e.g. JIT code) is not
 * stack memory that may hold other frames since the event: read straight, without the mark. The
 * stack's own mapping is never code here, even when it is executable. */
static int code_at(const struct walk *w, uint64_t addr)
{
	const struct dw_map *m;

	if (!w->proc || !(m = dw_proc_find(w->proc, addr)) || !(m->prot & DW_PROT_X))
		return 0;
	return m != dw_proc_find(w->proc, w->snap_lo);
}

static int wread(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct walk *w = arg;
	int err = DWUNW_ERR_IO;

	if (addr >= w->snap_lo && addr - w->snap_lo <= w->snap_len && len <= w->snap_len - (addr - w->snap_lo)) {
		memcpy(buf, w->snap + (addr - w->snap_lo), len);
		return DWUNW_OK;
	}
	if (w->proc && w->proc->nmem && dw_proc_read_mem(w->proc, addr, buf, len) == DWUNW_OK)
		return DWUNW_OK;
	if (w->in->pid > 0 && !(w->c->cfg.flags & DWUNW_CFG_NO_REMOTE_READS) &&
	    !(w->proc && w->proc->offline)) {
		if (!w->remote_on) {
			dw_remote_begin(&w->remote, w->in->pid, w->c->cfg.audit, w->c->cfg.audit_arg);
			w->remote_on = 1;
		}
		if (code_at(w, addr) && dw_remote_read(&w->remote, addr, buf, len) == DWUNW_OK)
			return DWUNW_OK;
		err = live_read(w, addr, buf, len);
		if (!err) {
			w->beyond = 1;
			return DWUNW_OK;
		}
		if (err == DWUNW_ERR_STALE)
			return err;
	}
	return read_module_data(w, addr, buf, len) == DWUNW_OK ? DWUNW_OK : err;
}

/* Reading a module image out of the process (the vDSO) is not a read beyond the snapshot. */
static int image_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct walk *w = arg;

	if (w->in->pid <= 0)
		return DWUNW_ERR_IO;
	if (!w->remote_on) {
		dw_remote_begin(&w->remote, w->in->pid, w->c->cfg.audit, w->c->cfg.audit_arg);
		w->remote_on = 1;
	}
	return dw_remote_read(&w->remote, addr, buf, len);
}

static inline uint64_t wrap(const struct walk *w, uint64_t v)
{
	return w->asz == 4 ? (uint32_t)v : v;
}

static inline int read_word(struct walk *w, uint64_t addr, uint64_t *v)
{
	if (DW_LIKELY(addr >= w->snap_lo && w->snap_len >= w->asz && addr - w->snap_lo <= w->snap_len - w->asz)) {
		const uint8_t *p = w->snap + (addr - w->snap_lo);
		if (w->asz == 8) {
			memcpy(v, p, 8);
		} else {
			uint32_t x;
			memcpy(&x, p, 4);
			*v = x;
		}
		return DWUNW_OK;
	}
	*v = 0;
	return wread(w, addr, v, w->asz);
}

/* Callbacks for the expression machine and the arch ops. */
struct expr_arg {
	struct walk *w;
	const struct state *s;
};

static int expr_reg(void *arg, unsigned reg, uint64_t *val)
{
	struct expr_arg *a = arg;

	if (reg == a->w->arch->pc_reg) {
		*val = a->s->pc;
		return DWUNW_OK;
	}
	if (reg >= DWUNW_MAX_REGS || !(a->s->valid & (1ull << reg)))
		return DWUNW_ERR_UNSUPPORTED_CFI; /* the register was not recovered */
	*val = a->s->regs[reg];
	return DWUNW_OK;
}

static int expr_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	return wread(((struct expr_arg *)arg)->w, addr, buf, len);
}

static int eval(struct walk *w, const struct state *s, const struct dw_table *t, int32_t idx,
		int push, uint64_t initial, uint64_t *out)
{
	struct expr_arg a = { w, s };
	struct dw_expr_env env = { (uint8_t)w->asz, expr_reg, expr_mem, &a };
	const struct dw_expr_ref *e;

	if (idx < 0 || (uint32_t)idx >= t->nexprs)
		return DWUNW_ERR_CORRUPT;
	e = &t->exprs[idx];
	if (e->check)
		return e->check;
	if (e->shape && (s->valid & (1ull << e->shape_reg)) && e->shape_reg != w->arch->pc_reg) {
		/* the value pushed first (the CFA) lies under the result: it does not matter */
		uint64_t a = wrap(w, s->regs[e->shape_reg] + (uint64_t)e->shape_off);
		if (e->shape == DW_SHAPE_BREG) {
			*out = a;
			return DWUNW_OK;
		}
		return read_word(w, a, out);
	}
	return dw_expr_eval(&env, e->p, e->len, push, initial, out);
}

/*
 * One CFI step: from the frame in `s` with rule `r`, the caller's registers into `n`.
 * Returns 1 when the return address is undefined (the outermost frame), 0 on a step, or an error.
 */
static int step_cfi(struct walk *w, const struct dw_table *t, const struct dw_rule *r,
		    const struct state *s, struct state *n, uint64_t *cfa_out)
{
	const struct dwunw_arch_ops *arch = w->arch;
	uint64_t cfa, ra;
	int err, ra_set = 0;

	if (r->cfa_kind == DW_CFA_KIND_REG) {
		if (r->cfa_reg >= DWUNW_MAX_REGS || !(s->valid & (1ull << r->cfa_reg)))
			return DWUNW_ERR_UNSUPPORTED_CFI;
		cfa = wrap(w, s->regs[r->cfa_reg] + (uint64_t)(int64_t)r->cfa_off);
	} else if (r->cfa_kind == DW_CFA_KIND_EXPR) {
		if ((err = eval(w, s, t, r->cfa_off, 0, 0, &cfa)))
			return err;
		cfa = wrap(w, cfa);
	} else {
		return DWUNW_ERR_NO_DWARF;
	}
	*cfa_out = cfa;

	/* Callee-saved registers keep their values unless a rule says otherwise. A fixed-size
	 * copy compiles to a few vector moves; it covers every backend's registers. */
	n->valid = s->valid & arch->callee_saved;
	if (DW_LIKELY(arch->nregs <= DW_STEP_REGS))
		memcpy(n->regs, s->regs, DW_STEP_REGS * sizeof(n->regs[0]));
	else
		memcpy(n->regs, s->regs, arch->nregs * sizeof(n->regs[0]));
	n->regs[arch->sp_reg] = cfa;
	n->valid |= 1ull << arch->sp_reg;
	if (arch->lr_reg < DWUNW_MAX_REGS && (s->valid & (1ull << arch->lr_reg)))
		n->valid |= 1ull << arch->lr_reg; /* the return address column when no rule names it */

	for (uint32_t i = 0; i < r->nregs; i++) {
		const struct dw_regrule *rr = &t->regrules[r->reg_first + i];
		uint64_t v, addr;
		unsigned reg = rr->reg;

		if (reg >= DWUNW_MAX_REGS)
			continue; /* not tracked (vector registers) */
		/* The common rule, a slot in the snapshot: one bounds check, one load. */
		if (DW_LIKELY(rr->kind == DW_RULE_OFFSET)) {
			addr = wrap(w, cfa + (uint64_t)(int64_t)rr->val);
			if (DW_LIKELY(w->asz == 8 && addr >= w->snap_lo && addr - w->snap_lo <= w->snap_len - 8 &&
				      w->snap_len >= 8)) {
				memcpy(&v, w->snap + (addr - w->snap_lo), 8);
				n->regs[reg] = v;
				n->valid |= 1ull << reg;
				ra_set |= reg == r->ra_reg;
				continue;
			}
		}
		switch (rr->kind) {
		case DW_RULE_UNDEF:
			n->valid &= ~(1ull << reg);
			continue;
		case DW_RULE_SAME:
			if (s->valid & (1ull << reg))
				n->valid |= 1ull << reg;
			continue;
		case DW_RULE_OFFSET:
			addr = wrap(w, cfa + (uint64_t)(int64_t)rr->val);
			if ((err = read_word(w, addr, &v))) {
				/* A slot below the stack pointer (an epilogue, after the pop): the register
				 * already holds what was saved there, and a snapshot starting at sp does
				 * not have it. */
				if (addr < s->regs[arch->sp_reg] && (s->valid & (1ull << reg))) {
					n->valid |= 1ull << reg;
					continue;
				}
				return err;
			}
			break;
		case DW_RULE_VAL_OFFSET:
			v = wrap(w, cfa + (uint64_t)(int64_t)rr->val);
			break;
		case DW_RULE_REG:
			if (rr->val < 0 || rr->val >= DWUNW_MAX_REGS || !(s->valid & (1ull << rr->val))) {
				n->valid &= ~(1ull << reg);
				continue;
			}
			v = s->regs[rr->val];
			break;
		case DW_RULE_EXPR:
			if ((err = eval(w, s, t, rr->val, 1, cfa, &addr)) || (err = read_word(w, wrap(w, addr), &v)))
				return err;
			break;
		case DW_RULE_VAL_EXPR:
			if ((err = eval(w, s, t, rr->val, 1, cfa, &v)))
				return err;
			break;
		default:
			continue;
		}
		n->regs[reg] = v;
		n->valid |= 1ull << reg;
		if (reg == r->ra_reg)
			ra_set = 1;
	}
	if (r->ra_reg >= DWUNW_MAX_REGS)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	/* No rule for the return-address column: a real register (arm64 x30, mips $31) keeps its
	 * value, as in a leaf; a pseudo column (x86_64) has none and the chain ends. */
	if (!(n->valid & (1ull << r->ra_reg)))
		return 1;
	ra = n->regs[r->ra_reg];
	if (!ra_set && r->ra_reg == arch->lr_reg)
		n->valid &= ~(1ull << r->ra_reg); /* the caller's own link register is not known */
	n->pc = arch->ra_to_pc ? arch->ra_to_pc(ra, !!(r->flags & DW_RULEF_RA_SIGNED)) : ra;
	return 0;
}

/* A place for the mapping holding `lookup`, in slot pl (frame_place). */
static void place_fill(struct walk *w, struct place *pl, uint64_t lookup, uint32_t fi)
{
	struct dw_map *m;
	struct dwunw_module *mod = NULL;
	int err;

	memset(pl, 0, sizeof(*pl));
	if (!w->proc) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	m = (struct dw_map *)dw_proc_find(w->proc, lookup);
	if (!m && !w->refreshed && !w->proc->offline && !w->proc->pinned) {
		/* a library loaded after the maps were read */
		struct dw_proc *old = w->proc;
		w->refreshed = 1;
		if (dw_proc_refresh(w->c, &w->proc) == DWUNW_OK) {
			/* the old maps are gone with the old snapshot (a reader still, this capture
			 * keeps them alive until it ends) */
			if (w->proc_ref)
				dw_proc_put(w->c, old);
			w->proc_ref = 1;
			memset(w->places, 0, sizeof(w->places));
			m = (struct dw_map *)dw_proc_find(w->proc, lookup);
		}
	}
	pl->map = m;
	if (!m) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	pl->start = m->start;
	pl->len = m->end - m->start;
	if (m->kind == DW_MAP_UPROBES)
		pl->fflags = DWUNW_FRAME_UPROBE_TRAMP;
	else if (m->kind == DW_MAP_ANON && (m->prot & DW_PROT_X))
		pl->fflags = DWUNW_FRAME_JIT;
	else if (m->kind == DW_MAP_VDSO)
		pl->fflags = DWUNW_FRAME_VDSO;
	if (m->kind != DW_MAP_FILE && m->kind != DW_MAP_VDSO) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return;
	}
	if (w->nheld == DW_HELD_MAX) {
		pl->err = DWUNW_ERR_CACHE_FULL;
		return;
	}
	err = dw_map_module(w->c, w->proc, m, image_read, w, &mod);
	if (err) {
		pl->err = err;
		return;
	}
	for (unsigned i = 0; i < w->nheld; i++)
		if (w->held[i].m == mod) {
			dw_module_put(mod); /* already held (maybe by a place from the memo, no frame yet) */
			if (w->held[i].frame > fi)
				w->held[i].frame = fi;
			goto found;
		}
	w->held[w->nheld].m = mod;
	w->held[w->nheld].frame = fi;
	w->nheld++;
found:
	pl->mod = mod;
	pl->bias = atomic_load_explicit(&m->bias, memory_order_relaxed);
	/* a built table (the common case) without the call */
	if (atomic_load_explicit(&mod->table_state, memory_order_acquire) == 1)
		pl->table = &mod->table;
	else if (dw_module_table(mod, &pl->table) != DWUNW_OK) {
		pl->table = NULL;
		return;
	}
	pl->tbias = pl->bias + pl->table->base;
	pl->rcache = pl->table->rcache;
	pl->rshift = 64 - pl->table->rcache_bits;
	pl->rules = pl->table->rules;
	pl->regrules = pl->table->regrules;
}

/*
 * Where a frame is when it is not in the previous frame's place. Callbacks bounce between a few
 * modules: the recent places are looked at before searching. A return address at the very start
 * of a mapping has no call before it there: it is a trampoline's (qemu's signal page) and belongs
 * to its own mapping, whose place is then returned with *lookup set to the pc.
 */
static __attribute__((noinline)) const struct place *frame_place(struct walk *w, uint64_t *lookup,
								 uint64_t opc, uint32_t fi)
{
	struct place *pl = NULL;

	for (unsigned i = 0; i < DW_ARRAY_SIZE(w->places); i++)
		if (*lookup - w->places[i].start < w->places[i].len) {
			pl = &w->places[i];
			place_use(w, pl, fi);
			break;
		}
	if (!pl) {
		/* the oldest goes: places fill in order, so the victim rotates */
		unsigned v = w->nplaces++ % DW_ARRAY_SIZE(w->places);
		pl = &w->places[v];
		place_fill(w, pl, *lookup, fi);
	}
	if (DW_UNLIKELY(*lookup != opc && opc - pl->start >= pl->len && w->proc)) {
		const struct dw_map *own = dw_proc_find(w->proc, opc);
		if (own && own != pl->map) {
			*lookup = opc;
			return frame_place(w, lookup, opc, fi);
		}
	}
	return pl;
}

static void to_regs(const struct walk *w, const struct state *s, struct dwunw_regs *r)
{
	r->arch = w->in->arch;
	r->pid = w->in->pid;
	r->tid = w->in->tid;
	r->pc = s->pc;
	r->valid = s->valid;
	memcpy(r->regs, s->regs, sizeof(r->regs));
}

/* Frame 0's registers: only the arch's are looked at. */
static void from_regs_n(const struct dwunw_regs *r, struct state *s, unsigned nregs)
{
	s->pc = r->pc;
	s->valid = r->valid;
	memcpy(s->regs, r->regs, (nregs < DWUNW_MAX_REGS ? nregs : DWUNW_MAX_REGS) * sizeof(s->regs[0]));
}

static void from_regs(const struct dwunw_regs *r, struct state *s)
{
	s->pc = r->pc;
	s->valid = r->valid;
	memcpy(s->regs, r->regs, sizeof(s->regs));
}

/*
 * A signal frame whose trampoline the arch recognises by its code: its saved context is the
 * truth, whatever the FDE says (the arm64 vDSO's FDE describes only a frame record). The step
 * itself then goes through step_fallback, which asks the arch first.
 */
static int is_sigtramp(struct walk *w, const struct state *s)
{
	struct dwunw_regs in, out;

	if (!w->arch->sigframe)
		return 0;
	to_regs(w, s, &in);
	return w->arch->sigframe(&in, &out, wread, w) > 0;
}

/* A frame-pointer step is believed only when it is plausible against the maps: the return
 * address lies in executable memory, and the caller's stack pointer moves outward inside the
 * stack mapping of the callee's. Garbage in rbp/x29 then stops the walk instead of producing
 * frames at addresses nothing maps, or frames built from heap words. Without maps (a process gone
 * and never cached, pid 0) nothing can be checked: no step, the walk stops there with its reason
 * (a chain of unchecked words would be a guess, and would depend on how the target was built). */
static int fp_plausible(const struct walk *w, const struct dwunw_regs *in, const struct dwunw_regs *out)
{
	const struct dw_map *m;
	unsigned sp = w->arch->sp_reg;

	if (!w->proc)
		return 0;
	m = dw_proc_find(w->proc, out->pc);
	/* code mapped since the maps were read (a JIT's new code page): the next frame's look-up
	 * reads them again, and stops there if the pc is still in no mapping */
	if (!m && !w->refreshed && !w->proc->offline)
		m = dw_proc_find(w->proc, in->pc);
	if (!m || !(m->prot & DW_PROT_X))
		return 0;
	if (!((in->valid >> sp) & 1) || !((out->valid >> sp) & 1))
		return 1;
	m = dw_proc_find(w->proc, in->regs[sp]);
	return !m || (out->regs[sp] > in->regs[sp] && out->regs[sp] <= m->end);
}

/*
 * Steps without CFI, through the arch: a signal trampoline recognised by its code; at an exact pc
 * (frame 0, or after a signal) a linker stub; at frame 0 a leaf that still has its return address
 * in the link register (mips/arm64: the prologue analyser first); last, frame pointers, when
 * they look plausible (fp_plausible).
 */
static int step_fallback(struct walk *w, const struct state *s, struct state *n, uint32_t fi,
			 int exact, const struct place *pl, uint32_t *how)
{
	const struct dwunw_module *mod = pl->mod;
	const struct dwunw_arch_ops *arch = w->arch;
	struct dwunw_regs in, out;
	int r;

	to_regs(w, s, &in);
	memset(&out, 0, sizeof(out));
	if (arch->sigframe) {
		r = arch->sigframe(&in, &out, wread, w);
		if (r < 0)
			return r;
		if (r > 0) {
			*how = DWUNW_HOW_SIGNAL;
			goto done;
		}
	}
	if (exact && mod && arch->stub_step) {
		uint64_t addr = s->pc - pl->bias;
		for (uint32_t i = 0; i < mod->elf.nstubs; i++)
			if (addr >= mod->elf.stubs[i][0] && addr < mod->elf.stubs[i][1]) {
				if (arch->stub_step(&in, &out, wread, w) > 0) {
					*how = DWUNW_HOW_LR;
					goto done;
				}
				break;
			}
	}
	if (mod && arch->prologue_step) {
		/* no CFI for this pc: the prologue analyser, anchored on the function's symbol */
		uint64_t start = 0;
		if (dw_module_func_start(pl->mod, (exact ? s->pc : s->pc - 1) - pl->bias, &start) == DWUNW_OK)
			start += pl->bias;
		r = arch->prologue_step(&in, &out, start, exact, wread, w);
		if (r < 0)
			return r;
		if (r > 0) {
			*how = DWUNW_HOW_PROLOGUE;
			goto done;
		}
	}
	if (exact && fi == 0 && arch->lr_step && arch->lr_step(&in, &out) > 0) {
		*how = DWUNW_HOW_LR;
		goto done;
	}
	/* Frame pointers where no CFI covers the pc (JIT code, a module without tables, code its
	 * tables miss such as hand-written assembly or V8's builtins), one frame at a time: the next
	 * frame goes back to CFI when it has some. Marked DWUNW_HOW_FP. */
	if (!(w->c->cfg.flags & DWUNW_CFG_NO_FP_FALLBACK) && arch->fp_step &&
	    arch->fp_step(&in, &out, wread, w) > 0 && fp_plausible(w, &in, &out)) {
		*how = DWUNW_HOW_FP;
		goto done;
	}
	if (mod)
		return DWUNW_ERR_NO_DWARF;
	/* A file mapping whose file could not be opened says why (NOT_FOUND, PERM, ...). */
	return pl->err && pl->err != DWUNW_ERR_NO_MODULE ? pl->err : DWUNW_ERR_NO_MODULE;
done:
	from_regs(&out, n);
	return DWUNW_OK;
}

/* Load one word of `asz` bytes. */
static inline uint64_t word_at(const uint8_t *p, unsigned asz)
{
	if (asz == 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* What walk_fast needs of the walk, in one place the register stores cannot alias. */
struct fast_env {
	struct walk *w;
	const uint8_t *snap;
	uint64_t snap_lo, snap_len;
	uint64_t keep;             /* registers a step keeps: callee-saved and link, < nregs */
	unsigned spr, fpr;         /* the frame pointer is callee-saved on every backend */
	uint64_t (*ra_to_pc)(uint64_t ra, int ra_signed);
	const struct place *places, *places_end; /* every recent place */
};

enum { FAST_MORE, FAST_END, FAST_NO_PROGRESS, FAST_DEPTH };

/*
 * The common frames: a return address in one of two recent places (a module not seen yet in
 * this capture gets its place here), its rule in the look-up cache, the rule a LEAN one (CFA = sp
 * or fp + offset, every other rule a slot, the return address among them) whose slots lie in the
 * snapshot. Writes each frame's record; stops (FAST_MORE) before the first frame that needs more,
 * or at the end of the chain. Entered with a known sp, a snapshot of DW_LEAN_SPAN_MAX bytes or more,
 * nothing read beyond the snapshot.
 *
 * Only the pc, sp and fp go from frame to frame, and `saved`, the registers some step restored:
 * a LEAN step needs no other register. On FAST_MORE, fast_restore then sets the others and the
 * valid mask from the frames written, as the steps would have one by one.
 */
/* What goes from one walk_fast frame to the next (scalars once inlined). */
struct fast_st {
	const struct place *p, *a;
	uint64_t pc, sp, fp;
	uint64_t saved;            /* registers some step restored */
	struct dwunw_frame *f;
};

/* One frame of walk_fast, `dec` known at compile time (0 only for an exact frame 0): -1 after a
 * step, else FAST_* (FAST_MORE: this frame needs the slow path). */
static inline __attribute__((always_inline)) int fast_frame(const struct fast_env *e, struct fast_st *st,
							    struct dwunw_frame *frames,
							    struct dwunw_frame *const fend, const uint64_t v0,
							    const uintptr_t snap_base, const uint64_t dec,
							    const unsigned asz, const int has_ra_to_pc)
{
	const struct place *p = st->p;
	const uint64_t pc = st->pc, sp = st->sp, lookup = pc - dec;
	const struct dw_rule *rule;
	uint64_t key, ent, cfa, lo, npc;
	const _Atomic uint64_t *slot;
	struct dwunw_frame *f = st->f;
	uintptr_t base;
	unsigned fl;

	/* lookup and pc (= lookup + dec) both in the place */
	if (DW_UNLIKELY(lookup - p->start >= p->len - dec)) {
		const struct place *t = st->a;
		if (DW_UNLIKELY(!t->rcache || lookup - t->start >= t->len - dec)) {
			/* a third module: the other recent places */
			for (t = e->places; t < e->places_end; t++)
				if (t->rcache && lookup - t->start < t->len - dec)
					break;
			if (t == e->places_end) {
				/* not seen yet in this capture: its place, filled here */
				uint64_t lk = lookup;
				t = frame_place(e->w, &lk, pc, (uint32_t)(f - frames));
				if (lk != lookup || lookup - t->start >= t->len - dec)
					return FAST_MORE;
			}
		}
		if (!t->rcache)
			return FAST_MORE;
		place_use(e->w, t, (uint32_t)(f - frames));
		st->a = p;
		st->p = p = t;
	}
	key = lookup - p->tbias + 1; /* 0 never matches: an entry's key is below 2^32 */
	slot = &p->rcache[((key * 0x9e3779b97f4a7c15ull) >> p->rshift) & ~1ull];
	ent = atomic_load_explicit(slot, memory_order_relaxed);
	if (DW_UNLIKELY((ent >> 32) != key)) {
		ent = atomic_load_explicit(slot + 1, memory_order_relaxed);
		if ((ent >> 32) != key)
			return FAST_MORE;
	}
	rule = &p->rules[(uint32_t)ent];
	fl = rule->flags;
	if (DW_UNLIKELY(!(fl & DW_RULEF_LEAN))) {
		/* the last frame, as step_cfi would end it: no caller, no CFA shown (a CFA register
		 * that is not kept by a step: left to the slow path) */
		if ((fl & DW_RULEF_OUTERMOST) && (((v0 | st->saved) >> rule->cfa_reg) & 1)) {
			*f++ = (struct dwunw_frame){ .pc = pc, .sp = sp, .module_addr = pc - p->bias,
						     .module = p->mod, .how = DWUNW_HOW_CFI, .flags = p->fflags };
			st->f = f;
			return FAST_END;
		}
		return FAST_MORE;
	}
	if (fl & DW_RULEF_CFA_FP) {
		if (DW_UNLIKELY(!(((v0 | st->saved) >> e->fpr) & 1)))
			return FAST_MORE;
		cfa = st->fp;
	} else {
		cfa = sp;
	}
	cfa += (uint64_t)(int64_t)rule->cfa_off;
	if (asz == 4)
		cfa = (uint32_t)cfa;
	/* the slots [lo, lo + span) inside the snapshot (snap_len >= DW_LEAN_SPAN_MAX >= span: no
	 * wrap; lo below the snapshot wraps to a large number) */
	lo = cfa - e->snap_lo + (uint64_t)(int64_t)rule->off_min;
	if (DW_UNLIKELY(lo > e->snap_len - rule->span))
		return FAST_MORE;
	/* the step: from here on this frame is done */
	base = snap_base + cfa;
	npc = word_at((const uint8_t *)(base + (intptr_t)rule->ra_slot * asz), asz);
	if (rule->fp_slot)
		st->fp = word_at((const uint8_t *)(base + (intptr_t)rule->fp_slot * asz), asz);
	st->saved |= rule->step_mask;
	if (has_ra_to_pc)
		npc = e->ra_to_pc(npc, !!(fl & DW_RULEF_RA_SIGNED));
	/* how and the first frame's EXACT_PC: set by the caller */
	*f++ = (struct dwunw_frame){ .pc = pc, .sp = sp, .cfa = cfa, .module_addr = pc - p->bias,
				     .module = p->mod, .how = DWUNW_HOW_CFI, .flags = p->fflags };
	st->f = f;
	st->pc = npc;
	st->sp = cfa;
	if (DW_UNLIKELY(npc == 0))
		return FAST_END;
	if (DW_UNLIKELY(cfa < sp || (cfa == sp && npc == pc)))
		return FAST_NO_PROGRESS;
	if (DW_UNLIKELY(f >= fend))
		return FAST_DEPTH;
	return -1;
}

static inline __attribute__((always_inline)) int walk_fast(const struct fast_env *e, struct state *s,
							   const struct place **plp, const struct place **altp,
							   struct dwunw_frame *frames, size_t *nfp, size_t cap,
							   uint64_t *savedp, int exact, const unsigned asz,
							   const int has_ra_to_pc)
{
	const unsigned spr = e->spr, fpr = e->fpr;
	/* snapshot byte of address x: snap_base + x, formed only for x inside the snapshot */
	const uintptr_t snap_base = (uintptr_t)e->snap - (uintptr_t)e->snap_lo;
	/* valid on entry: registers kept by every step stay valid (sp is, always) */
	const uint64_t v0 = (s->valid & e->keep) | (1ull << spr);
	struct dwunw_frame *const fend = frames + cap;
	struct fast_st st = { .p = *plp, .a = *altp, .pc = s->pc, .sp = s->regs[spr], .fp = s->regs[fpr],
			      .saved = 0, .f = frames + *nfp };
	int ret = -1;

	if (exact)
		ret = fast_frame(e, &st, frames, fend, v0, snap_base, 0, asz, has_ra_to_pc);
	while (ret < 0)
		ret = fast_frame(e, &st, frames, fend, v0, snap_base, 1, asz, has_ra_to_pc);
	s->regs[spr] = st.sp;
	s->regs[fpr] = st.fp;
	s->pc = st.pc;
	*savedp = st.saved;
	*nfp = (size_t)(st.f - frames);
	*plp = st.p;
	*altp = st.a;
	return ret;
}

/* The LEAN rule a frame written by walk_fast was stepped with (the tables do not change while
 * the frames hold their modules; the look-up is the same). */
static const struct dw_rule *fast_rule(const struct dwunw_frame *f, int dec, const struct dw_table **t)
{
	if (!f->module || dw_module_table(f->module, t) != DWUNW_OK)
		return NULL;
	return dw_table_rule_at(*t, f->module_addr - (uint64_t)dec);
}

/*
 * After walk_fast stepped frames[n0 .. nf) (nf > n0) and stopped before a frame that needs a
 * slow step: the state the steps would have left. Valid: what the last step set, and what every
 * step keeps that was valid on entry or set by a step. Values: sp, fp and the pc are there; every
 * other register a step restored (`saved`) comes from the slot of the newest frame whose rule
 * has it (a LEAN rule's slots lie in the snapshot).
 */
static __attribute__((noinline)) void fast_restore(const struct walk *w, struct state *s,
						   const struct dwunw_frame *frames, size_t n0, size_t nf,
						   int exact0, uint64_t keep, uint64_t saved, unsigned fpr)
{
	const struct dw_table *t;
	const struct dw_rule *r = fast_rule(&frames[nf - 1], !(nf - 1 == n0 && exact0), &t);
	uint64_t need, sp_bit = 1ull << w->arch->sp_reg;

	s->valid = ((s->valid | saved) & keep) | (r ? r->step_mask : sp_bit);
	need = s->valid & saved & ~sp_bit & ~(1ull << fpr);
	for (size_t i = nf; i-- > n0 && need;) {
		const struct dwunw_frame *f = &frames[i];

		if (!(r = fast_rule(f, !(i == n0 && exact0), &t)))
			continue; /* not reached: walk_fast steps only in places with a table */
		for (uint32_t j = 0; j < r->nregs; j++) {
			const struct dw_regrule *rr = &t->regrules[r->reg_first + j];
			uint64_t v;
			if (rr->reg >= 64 || !((need >> rr->reg) & 1))
				continue;
			if (read_word((struct walk *)w, wrap(w, f->cfa + (uint64_t)(int64_t)rr->val), &v) == DWUNW_OK)
				s->regs[rr->reg] = v;
			need &= ~(1ull << rr->reg);
		}
	}
}

/*
 * The step that is not the common one: CFI rules other than slots in the snapshot, a signal
 * frame, no row (arch fallbacks). The caller's registers end up in *cur. Returns 0 on a step,
 * 1 at the outermost frame, or an error.
 */
static __attribute__((noinline)) int step_other(struct walk *w, const struct place *pl,
						const struct dw_rule *rule, struct state **cur,
						struct state **next, uint64_t *cfa, uint32_t *nhow,
						uint32_t *fl, int exact, uint32_t fi)
{
	struct state *tmp;
	int r;

	if (rule && rule->cfa_kind != DW_CFA_KIND_END &&
	    !((rule->flags & DW_RULEF_SIGNAL) && is_sigtramp(w, *cur))) {
		r = step_cfi(w, pl->table, rule, *cur, *next, cfa);
		if (r)
			return r;
		if (rule->flags & DW_RULEF_SIGNAL) {
			*nhow = DWUNW_HOW_SIGNAL;
			*fl |= DWUNW_FRAME_SIGTRAMP;
		}
	} else {
		*cfa = 0;
		r = step_fallback(w, *cur, *next, fi, exact, pl, nhow);
		if (r)
			return r;
		if (*nhow == DWUNW_HOW_SIGNAL)
			*fl |= DWUNW_FRAME_SIGTRAMP;
	}
	tmp = *cur;
	*cur = *next;
	*next = tmp;
	return 0;
}

/* A pending uretprobe's return address is the start of [uprobes]: pc-1 is outside it. */
static uint32_t uprobe_flag(const struct walk *w, uint64_t opc, int exact)
{
	const struct dw_map *um;

	if (exact || !w->proc)
		return 0;
	um = dw_proc_find(w->proc, opc);
	return um && um->kind == DW_MAP_UPROBES ? DWUNW_FRAME_UPROBE_TRAMP : 0;
}

_Static_assert(sizeof(struct place) <= sizeof(((struct dwunw_ctx_impl *)0)->memo_place[0]),
	       "a place fits the context's memo");

/* The places of the context's memo, when it is free and for this process: each one whose module
 * slot still holds the same load, with a reference (a frame takes it on first use). Returns
 * whether the capture owns the memo. */
static int memo_take(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;

	if (!w->proc || atomic_exchange_explicit(&c->memo_busy, 1, memory_order_acquire))
		return 0;
	if (c->memo_proc != w->proc || c->memo_proc_seq != w->proc->loaded_seq)
		return 1;
	for (uint32_t i = 0; i < c->memo_n; i++) {
		struct place *pl = &w->places[w->nplaces];
		memcpy(pl, c->memo_place[i], sizeof(*pl));
		if (dw_module_get(pl->mod, c->memo_gen[i]) != DWUNW_OK) {
			memset(pl, 0, sizeof(*pl));
			continue;
		}
		pl->unused = 1;
		pl->hidx = (uint8_t)w->nheld;
		w->nplaces++;
		if (w->nheld && w->held[0].m == pl->mod) {
			/* two mappings of one module: one reference */
			dw_module_put(pl->mod);
			pl->hidx = 0;
			continue;
		}
		w->held[w->nheld].m = pl->mod;
		w->held[w->nheld].frame = UINT32_MAX; /* released at the end unless a frame uses it */
		w->nheld++;
	}
	return 1;
}

/* The memo from this capture's places (the first two with a table), then free it. */
static void memo_give(struct walk *w)
{
	struct dwunw_ctx_impl *c = w->c;
	uint32_t n = 0;

	if (w->proc) {
		for (unsigned i = 0; i < DW_ARRAY_SIZE(w->places) && n < 2; i++) {
			const struct place *pl = &w->places[i];
			if (!pl->rcache || !pl->mod)
				continue;
			memcpy(c->memo_place[n], pl, sizeof(*pl));
			((struct place *)c->memo_place[n])->unused = 0;
			c->memo_gen[n++] = atomic_load_explicit(&pl->mod->gen, memory_order_relaxed);
		}
		c->memo_proc = w->proc;
		c->memo_proc_seq = w->proc->loaded_seq;
	}
	c->memo_n = n;
	atomic_store_explicit(&c->memo_busy, 0, memory_order_release);
}

/* The frames keep one reference per module, on the first frame using it; frame 0 and each holder
 * link to the next holder, so that dwunw_module_cache_release visits only those. */
static void hand_refs(struct walk *w, struct dwunw_frame *frames, size_t nf)
{
	size_t at = 0;
	int list = nf > 0;

	/* A place handed over to the mapping of the pc itself (frame_place's trampoline case) left
	 * its module on a frame showing another one: the first frame that shows it holds it. */
	for (unsigned i = 0; i < w->nheld; i++) {
		size_t fr = w->held[i].frame;
		if (fr >= nf || frames[fr].module == w->held[i].m)
			continue;
		while (fr < nf && frames[fr].module != w->held[i].m)
			fr++;
		w->held[i].frame = fr < nf ? (uint32_t)fr : UINT32_MAX;
	}
	/* in frame order (places from the memo get their frame when first used) */
	for (unsigned i = 1; i < w->nheld; i++)
		for (unsigned j = i; j > 0 && w->held[j - 1].frame > w->held[j].frame; j--) {
			struct dwunw_module *m = w->held[j].m;
			uint32_t fr = w->held[j].frame;
			w->held[j] = w->held[j - 1];
			w->held[j - 1].m = m;
			w->held[j - 1].frame = fr;
		}
	for (unsigned i = 0; i < w->nheld; i++) {
		size_t fr = w->held[i].frame;
		if (fr >= nf) {
			dw_module_put(w->held[i].m); /* a frame that was not returned (none today) */
			continue;
		}
		frames[fr].flags |= DWUNW_FRAME_HOLDS_REF;
		if (!list || fr == at)
			continue;
		if (fr - at > DWUNW_FRAME_REF_NEXT_MAX) {
			list = 0;
			continue;
		}
		frames[at].flags |= (uint32_t)(fr - at) << DWUNW_FRAME_REF_NEXT_SHIFT;
		at = fr;
	}
	if (list)
		frames[0].flags |= DWUNW_FRAME_REF_LIST;
	else
		for (size_t i = 0; i < nf; i++)
			frames[i].flags &= ~(DWUNW_FRAME_REF_NEXT_MAX << DWUNW_FRAME_REF_NEXT_SHIFT);
}

DWUNW_API int dwunw_capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
			    struct dwunw_frame *frames, size_t *frame_cnt)
{
	return dwunw_capture_sampled(ctx, regs, NULL, 0, frames, frame_cnt);
}

DWUNW_API int dwunw_capture_sampled(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
				    const struct dwunw_stack_sample *samples, size_t nsamples,
				    struct dwunw_frame *frames, size_t *frame_cnt)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	const struct dwunw_arch_ops *arch;
	struct walk w;
	struct state sa, sb, *cur = &sa, *next = &sb;
	const struct place *pl, *alt;
	struct fast_env fe;
	size_t cap, nf = 0;
	uint32_t how = DWUNW_HOW_INITIAL;
	int exact, entered = 0, memo, ret = DWUNW_OK, proc_err = DWUNW_OK;
	uint64_t regmask, keep, lr_bit, snap_lo, snap_len;
	const uint8_t *snap;
	unsigned spr, asz;

	if (!frame_cnt)
		return DWUNW_ERR_INVALID_ARG;
	cap = *frame_cnt;
	*frame_cnt = 0;
	if (!c || !regs || !frames || !cap)
		return DWUNW_ERR_INVALID_ARG;
	if (c->cfg.max_frames && c->cfg.max_frames < cap)
		cap = c->cfg.max_frames;

	arch = dwunw_arch_get((enum dwunw_arch)regs->arch);
	if (!arch)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	memset(&w, 0, offsetof(struct walk, remote));
	for (unsigned i = 0; i < DW_ARRAY_SIZE(w.places); i++) {
		w.places[i].start = w.places[i].len = 0;
		w.places[i].rcache = NULL;
	}
	w.nheld = 0;
	w.c = c;
	w.in = regs;
	w.samples = samples;
	w.nsamples = samples ? nsamples : 0;
	w.arch = arch;
	w.asz = asz = arch->addr_size;
	if (regs->stack && regs->stack_size) {
		w.snap = regs->stack;
		w.snap_lo = regs->stack_start;
		w.snap_len = regs->stack_size;
	}
	if (regs->pid > 0) {
		entered = 1;
		proc_err = dw_proc_enter(c, regs->pid, &w.proc, &w.proc_ref);
		if (proc_err && proc_err != DWUNW_ERR_NO_PROCESS) {
			dw_proc_leave(c, NULL, 0);
			return proc_err;
		}
		/* A process gone since the event and not cached: frame 0 only, and say why. */
		if (proc_err)
			w.proc_ref = 0;
	}
	memo = memo_take(&w);

	/* The walk's constants, in locals the stores to the register state cannot alias. */
	snap = w.snap;
	snap_lo = w.snap_lo;
	snap_len = w.snap_len;
	spr = arch->sp_reg;
	lr_bit = arch->lr_reg < DWUNW_MAX_REGS ? 1ull << arch->lr_reg : 0;
	regmask = arch->nregs >= 64 ? ~0ull : (1ull << arch->nregs) - 1;
	keep = (arch->callee_saved | lr_bit) & regmask;
	from_regs_n(regs, cur, arch->nregs);
	exact = !(regs->flags & DWUNW_REGS_PC_IS_RETADDR);
	pl = alt = &no_place; /* the first frame looks its place up */
	fe = (struct fast_env){ .w = &w, .snap = snap, .snap_lo = snap_lo, .snap_len = snap_len, .keep = keep,
				.spr = spr, .fpr = arch->fp_reg, .ra_to_pc = arch->ra_to_pc,
				.places = w.places, .places_end = w.places + DW_ARRAY_SIZE(w.places) };

	for (;;) {
		struct dwunw_frame *f = &frames[nf];
		const uint64_t opc = cur->pc, osp = cur->regs[spr];
		const uint64_t fsp = (cur->valid >> spr) & 1 ? osp : 0;
		uint64_t lookup = opc - !exact, cfa = 0;
		const struct dw_rule *rule = NULL;
		uint32_t nhow = DWUNW_HOW_CFI;
		uint32_t fl = (exact ? DWUNW_FRAME_EXACT_PC : 0) | (w.beyond ? DWUNW_FRAME_BEYOND_SNAPSHOT : 0);
		int r;

		if (DW_UNLIKELY(lookup - pl->start >= pl->len || opc - pl->start >= pl->len)) {
			const struct place *np = frame_place(&w, &lookup, opc, (uint32_t)nf);
			if (np != pl)
				alt = pl;
			pl = np;
		}
		/* The common frames first, from here as far as they go. */
		if (how != DWUNW_HOW_SIGNAL && !w.beyond && pl->rcache && lookup == opc - !exact &&
		    ((cur->valid >> spr) & 1) && snap_len >= DW_LEAN_SPAN_MAX) {
			size_t n0 = nf;
			uint64_t saved;
			int fr = asz == 4 ? walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, &saved, exact, 4, 1)
				 : fe.ra_to_pc ? walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, &saved, exact, 8, 1)
				 : walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, &saved, exact, 8, 0);
			if (nf != n0) {
				frames[n0].how = how;
				frames[n0].flags |= exact ? DWUNW_FRAME_EXACT_PC : 0;
			}
			if (DW_UNLIKELY(fr != FAST_MORE)) {
				ret = fr == FAST_END ? DWUNW_OK : fr == FAST_DEPTH ? DWUNW_ERR_DEPTH : DWUNW_ERR_NO_PROGRESS;
				break;
			}
			if (nf != n0) {
				fast_restore(&w, cur, frames, n0, nf, exact, keep, saved, arch->fp_reg);
				exact = 0;
				how = DWUNW_HOW_CFI;
				continue;
			}
		}
		fl |= pl->fflags;
		w.beyond = 0;
		if (DW_UNLIKELY(pl->err)) {
			fl |= uprobe_flag(&w, opc, exact);
			if (pl->err == DWUNW_ERR_CACHE_FULL || pl->err == DWUNW_ERR_NOMEM ||
			    (fl & DWUNW_FRAME_UPROBE_TRAMP)) {
				r = pl->err;
				goto stop;
			}
			/* A return address read after the event that points into no mapping at all was
			 * another value at the event: the stack changed since. Not shown as a frame, and
			 * no fallback steps from it. */
			if (pl->err == DWUNW_ERR_NO_MODULE && !pl->map && (fl & DWUNW_FRAME_BEYOND_SNAPSHOT) &&
			    w.proc && nf > 0) {
				ret = DWUNW_ERR_STALE;
				break;
			}
		}
		if (DW_LIKELY(pl->table != NULL))
			rule = dw_table_rule_at(pl->table, lookup - pl->bias);

		r = step_other(&w, pl, rule, &cur, &next, &cfa, &nhow, &fl, exact, (uint32_t)nf);
		/* a step that met changed memory is not used, whatever it fell back to */
		if (DW_UNLIKELY(w.stale))
			r = DWUNW_ERR_STALE;
		if (DW_UNLIKELY(r)) {
			if (r == DWUNW_ERR_NO_MODULE && !w.proc && proc_err)
				r = proc_err;
			goto stop;
		}
		/* The frame record, written once. */
		*f = (struct dwunw_frame){ .pc = opc, .sp = fsp, .cfa = cfa,
					   .module_addr = pl->mod ? opc - pl->bias : 0, .module = pl->mod,
					   .how = how, .flags = fl };
		nf++;
		if (DW_UNLIKELY(cur->pc == 0)) {
			/* A zero return address ends the chain, unless it was read from the live process
			 * after the event: that memory may hold other frames by now. */
			ret = w.beyond ? DWUNW_ERR_LIVE_END : DWUNW_OK;
			break;
		}
		/* The stack grows down: a caller's frame is above its callee's; equal is fine for a
		 * frameless leaf, as long as the pc moves. */
		if (DW_UNLIKELY((!((cur->valid >> spr) & 1) || cur->regs[spr] < osp ||
				 (cur->regs[spr] == osp && cur->pc == opc)) &&
				nhow != DWUNW_HOW_SIGNAL && how != DWUNW_HOW_SIGNAL)) {
			ret = DWUNW_ERR_NO_PROGRESS;
			break;
		}
		/* Only now, with a caller to show, is a full buffer a truncation. */
		if (DW_UNLIKELY(nf >= cap)) {
			ret = DWUNW_ERR_DEPTH;
			break;
		}
		exact = nhow == DWUNW_HOW_SIGNAL;
		how = nhow;
		cur->valid &= regmask;
		continue;
stop:
		/* The last frame: no step from it (r = 1: the outermost, else the reason). */
		*f = (struct dwunw_frame){ .pc = opc, .sp = fsp, .cfa = 0,
					   .module_addr = pl->mod ? opc - pl->bias : 0, .module = pl->mod,
					   .how = how, .flags = fl };
		nf++;
		ret = r == 1 ? DWUNW_OK : r;
		break;
	}
	if (memo)
		memo_give(&w);
	hand_refs(&w, frames, nf);
	if (w.remote_on)
		dw_remote_end(&w.remote);
	/* not free(NULL) nor free per capture: memleak's own free() is uprobed too, a trap (~1 us) */
	if (w.live_buf) {
		uint8_t *old = atomic_exchange_explicit(&c->live_spare, w.live_buf, memory_order_acq_rel);

		if (old)
			free(old);
	}
	if (entered)
		dw_proc_leave(c, w.proc, w.proc_ref);
	*frame_cnt = nf;
	return ret;
}
