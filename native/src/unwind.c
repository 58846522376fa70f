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
 * past the window costs one read, not one per page or word). A miss outside a known mapping
 * reads one page. Once a sample showed a change, nothing more is read: DWUNW_ERR_STALE.
 */
static int live_read(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	uint64_t page = addr & ~(uint64_t)(DW_LIVE_PAGE - 1), span = DW_LIVE_PAGE;
	const struct dw_map *m;
	int err;

	if (w->stale)
		return DWUNW_ERR_STALE;
	if (w->live_len && addr >= w->live_lo && addr - w->live_lo <= w->live_len &&
	    len <= w->live_len - (addr - w->live_lo)) {
		memcpy(buf, w->live_buf + (addr - w->live_lo), len);
		return DWUNW_OK;
	}
	if (!w->live_buf && !(w->live_buf = malloc(DW_LIVE_SPAN + DW_SAMPLE_MAX)))
		return dw_remote_read(&w->remote, addr, buf, len);
	if (w->proc && (m = dw_proc_find(w->proc, addr)) && m->end > addr)
		span = m->end - page < DW_LIVE_SPAN ? m->end - page : DW_LIVE_SPAN;
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
			dw_module_put(mod); /* already held */
			goto found;
		}
	w->held[w->nheld].m = mod;
	w->held[w->nheld].frame = fi;
	w->nheld++;
found:
	pl->mod = mod;
	pl->bias = atomic_load_explicit(&m->bias, memory_order_relaxed);
	if (dw_module_table(mod, &pl->table) != DWUNW_OK) {
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

/* A frame-pointer step is believed only when it is plausible where the maps are known: the
 * return address lies in executable memory, and the caller's stack pointer moves outward inside
 * the stack mapping of the callee's. Garbage in rbp/x29 then stops the walk instead of producing
 * frames at addresses nothing maps, or frames built from heap words. */
static int fp_plausible(const struct walk *w, const struct dwunw_regs *in, const struct dwunw_regs *out)
{
	const struct dw_map *m;
	unsigned sp = w->arch->sp_reg;

	if (!w->proc)
		return 1;
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
	const uint8_t *snap;
	uint64_t snap_lo, snap_len;
	uint64_t keep;             /* registers a step keeps: callee-saved and link, < nregs */
	unsigned spr;
	uint64_t (*ra_to_pc)(uint64_t ra, int ra_signed);
	const struct place *places, *places_end; /* every recent place */
};

enum { FAST_MORE, FAST_END, FAST_NO_PROGRESS, FAST_DEPTH };

/*
 * The common frames: a return address in one of two recent places, its rule in the look-up
 * cache, the rule a FAST one (CFA = register + offset, every other rule a slot, the return address
 * among them) whose slots lie in the snapshot. Steps in place and writes each frame's record; stops
 * (FAST_MORE) before the first frame that needs more, or at the end of the chain. Entered with a
 * known sp, after a CFI step (not exact, not a signal), nothing read beyond the snapshot.
 */
static inline __attribute__((always_inline)) int walk_fast(const struct fast_env *e, struct state *s,
							   const struct place **plp, const struct place **altp,
							   struct dwunw_frame *frames, size_t *nfp, size_t cap,
							   int exact, const unsigned asz, const int has_ra_to_pc)
{
	/* Locals: stores to the registers and frames cannot alias them. */
	const struct place *p = *plp, *a = *altp;
	const uint8_t *const snap = e->snap;
	const uint64_t snap_lo = e->snap_lo, snap_len = e->snap_len, keep = e->keep;
	const unsigned spr = e->spr;
	uint64_t (*const ra_to_pc)(uint64_t, int) = e->ra_to_pc;
	uint64_t valid = s->valid, pc = s->pc, dec = !exact;
	struct dwunw_frame *f = frames + *nfp, *const fend = frames + cap;
	int ret = FAST_MORE;

	for (;;) {
		const uint64_t lookup = pc - dec, sp = s->regs[spr];
		const struct dw_rule *rule;
		const struct dw_regrule *rr;
		uint64_t key, ent, cfa, rel, lo, npc;
		const _Atomic uint64_t *slot;
		const uint8_t *base;

		/* lookup and pc (= lookup + dec) both in the place */
		if (DW_UNLIKELY(lookup - p->start >= p->len - dec)) {
			const struct place *t = a;
			if (DW_UNLIKELY(lookup - a->start >= a->len - dec)) {
				/* a third module: the other recent places */
				for (t = e->places; t < e->places_end; t++)
					if (lookup - t->start < t->len - dec)
						break;
				if (t == e->places_end)
					break;
			}
			if (!t->rcache)
				break;
			a = p;
			p = t;
		}
		key = lookup - p->tbias + 1; /* 0 never matches: an entry's key is below 2^32 */
		slot = &p->rcache[((key * 0x9e3779b97f4a7c15ull) >> p->rshift) & ~1ull];
		ent = atomic_load_explicit(slot, memory_order_relaxed);
		if (DW_UNLIKELY((ent >> 32) != key)) {
			ent = atomic_load_explicit(slot + 1, memory_order_relaxed);
			if ((ent >> 32) != key)
				break;
		}
		rule = &p->rules[(uint32_t)ent];
		if (DW_UNLIKELY(!(rule->flags & DW_RULEF_FAST) || !((valid >> rule->cfa_reg) & 1))) {
			if ((rule->flags & DW_RULEF_OUTERMOST) && ((valid >> rule->cfa_reg) & 1)) {
				/* the last frame, as step_cfi would end it: no caller, no CFA shown */
				*f++ = (struct dwunw_frame){ .pc = pc, .sp = sp, .module_addr = pc - p->bias,
							     .module = p->mod, .how = DWUNW_HOW_CFI, .flags = p->fflags };
				ret = FAST_END;
			}
			break;
		}
		cfa = s->regs[rule->cfa_reg] + (uint64_t)(int64_t)rule->cfa_off;
		if (asz == 4)
			cfa = (uint32_t)cfa;
		rel = cfa - snap_lo; /* the CFA's offset in the snapshot (no pointer outside it is formed) */
		lo = rel + (uint64_t)(int64_t)rule->off_min;
		if (DW_UNLIKELY(lo > snap_len || rule->span > snap_len - lo))
			break;
		/* the step: from here on this frame is done */
		base = snap + rel;
		rr = &p->regrules[rule->reg_first];
		switch (rule->nregs) {
		default:
			for (unsigned i = 7; i < rule->nregs; i++)
				s->regs[rr[i].reg] = word_at(base + rr[i].val, asz);
			/* fall through */
		case 7: s->regs[rr[6].reg] = word_at(base + rr[6].val, asz); /* fall through */
		case 6: s->regs[rr[5].reg] = word_at(base + rr[5].val, asz); /* fall through */
		case 5: s->regs[rr[4].reg] = word_at(base + rr[4].val, asz); /* fall through */
		case 4: s->regs[rr[3].reg] = word_at(base + rr[3].val, asz); /* fall through */
		case 3: s->regs[rr[2].reg] = word_at(base + rr[2].val, asz); /* fall through */
		case 2: s->regs[rr[1].reg] = word_at(base + rr[1].val, asz); /* fall through */
		case 1: s->regs[rr[0].reg] = word_at(base + rr[0].val, asz); /* fall through */
		case 0: break;
		}
		s->regs[spr] = cfa;
		valid = (valid & keep) | rule->step_mask;
		npc = s->regs[rule->ra_reg];
		if (has_ra_to_pc)
			npc = ra_to_pc(npc, !!(rule->flags & DW_RULEF_RA_SIGNED));
		/* how and the first frame's EXACT_PC: set by the caller */
		*f++ = (struct dwunw_frame){ .pc = pc, .sp = sp, .cfa = cfa, .module_addr = pc - p->bias,
					     .module = p->mod, .how = DWUNW_HOW_CFI, .flags = p->fflags };
		dec = 1;
		if (DW_UNLIKELY(npc == 0)) {
			ret = FAST_END;
			pc = npc;
			break;
		}
		if (DW_UNLIKELY(cfa < sp || (cfa == sp && npc == pc))) {
			ret = FAST_NO_PROGRESS;
			pc = npc;
			break;
		}
		pc = npc;
		if (DW_UNLIKELY(f >= fend)) {
			ret = FAST_DEPTH;
			break;
		}
	}
	s->valid = valid;
	s->pc = pc;
	*nfp = (size_t)(f - frames);
	*plp = p;
	*altp = a;
	return ret;
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

/* The frames keep one reference per module, on the first frame using it; frame 0 and each holder
 * link to the next holder, so that dwunw_module_cache_release visits only those. */
static void hand_refs(struct walk *w, struct dwunw_frame *frames, size_t nf)
{
	size_t at = 0;
	int list = nf > 0;

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
	int exact, entered = 0, ret = DWUNW_OK, proc_err = DWUNW_OK;
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
	pl = alt = &w.places[0]; /* empty: the first frame looks its place up */
	fe = (struct fast_env){ .snap = snap, .snap_lo = snap_lo, .snap_len = snap_len, .keep = keep,
				.spr = spr, .ra_to_pc = arch->ra_to_pc,
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
		    ((cur->valid >> spr) & 1)) {
			size_t n0 = nf;
			int fr = asz == 4 ? walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, exact, 4, 1)
				 : fe.ra_to_pc ? walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, exact, 8, 1)
				 : walk_fast(&fe, cur, &pl, &alt, frames, &nf, cap, exact, 8, 0);
			if (nf != n0) {
				frames[n0].how = how;
				frames[n0].flags |= exact ? DWUNW_FRAME_EXACT_PC : 0;
			}
			if (DW_UNLIKELY(fr != FAST_MORE)) {
				ret = fr == FAST_END ? DWUNW_OK : fr == FAST_DEPTH ? DWUNW_ERR_DEPTH : DWUNW_ERR_NO_PROGRESS;
				break;
			}
			if (nf != n0) {
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
		/* A return address read after the event that points into no mapping at all was another
		 * value at the event: the stack changed since. Not shown as a frame. */
		if (r == DWUNW_ERR_NO_MODULE && (fl & DWUNW_FRAME_BEYOND_SNAPSHOT) && w.proc && !pl->map && nf > 0) {
			ret = DWUNW_ERR_STALE;
			break;
		}
		/* The last frame: no step from it (r = 1: the outermost, else the reason). */
		*f = (struct dwunw_frame){ .pc = opc, .sp = fsp, .cfa = 0,
					   .module_addr = pl->mod ? opc - pl->bias : 0, .module = pl->mod,
					   .how = how, .flags = fl };
		nf++;
		ret = r == 1 ? DWUNW_OK : r;
		break;
	}
	hand_refs(&w, frames, nf);
	if (w.remote_on)
		dw_remote_end(&w.remote);
	free(w.live_buf);
	if (entered)
		dw_proc_leave(c, w.proc, w.proc_ref);
	*frame_cnt = nf;
	return ret;
}
