// SPDX-License-Identifier: GPL-2.0-only
/*
 * dwunw_capture: the walk. Per frame: find the mapping (binary search), the module (held once
 * per capture), the table row (block index + binary search), then one step that computes the
 * CFA and the caller's registers. Memory comes from the snapshot, then from the live process,
 * then from read-only module data. No allocation, no lock and no system call per frame while
 * everything needed is in the snapshot.
 */
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

#define DW_LIVE_PAGE 4096

struct walk {
	struct dwunw_ctx_impl *c;
	const struct dwunw_arch_ops *arch;
	const struct dwunw_regs *in;
	const uint8_t *snap;
	uint64_t snap_lo, snap_len;
	struct dw_proc *proc;
	struct place {
		struct dw_map *map;
		struct dwunw_module *mod;
		const struct dw_table *table;
		uint64_t bias;
		int err;
	} places[4];               /* recent ones (frame_place), most recent first */
	struct dw_remote remote;
	uint8_t remote_on;
	uint8_t refreshed;
	uint8_t beyond;            /* the current step read beyond the snapshot */
	unsigned asz;
	uint64_t lr_bit;           /* the arch's link register as a mask, 0 if none */
	uint8_t fast_flag;         /* DW_RULEF_SIMPLE where step_fast applies (8-byte words), else 0 */
	uint8_t live_ok;           /* live_page holds the process's page at live_lo */
	uint64_t live_lo;
	struct {
		struct dwunw_module *m;
		uint32_t frame;    /* first frame using it: it carries the reference */
	} held[DW_HELD_MAX];
	unsigned nheld;
	uint8_t live_page[DW_LIVE_PAGE]; /* not cleared per capture: live_ok says what it holds */
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

/* Memory beyond the snapshot, read from the live process a page at a time: a deep walk past the
 * window costs one read per page, not one per word. A read across a page edge goes straight. */
static int live_read(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	uint64_t page = addr & ~(uint64_t)(DW_LIVE_PAGE - 1);

	if (len > DW_LIVE_PAGE || addr - page > DW_LIVE_PAGE - len)
		return dw_remote_read(&w->remote, addr, buf, len);
	if (!w->live_ok || w->live_lo != page) {
		w->live_ok = 0;
		if (dw_remote_read(&w->remote, page, w->live_page, DW_LIVE_PAGE) != DWUNW_OK)
			return dw_remote_read(&w->remote, addr, buf, len); /* its own error */
		w->live_ok = 1;
		w->live_lo = page;
	}
	memcpy(buf, w->live_page + (addr - page), len);
	return DWUNW_OK;
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
		err = live_read(w, addr, buf, len);
		if (!err) {
			w->beyond = 1;
			return DWUNW_OK;
		}
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

/*
 * The common step, in place: a simple rule (see DW_RULEF_SIMPLE) whose slots all lie in the
 * snapshot. Returns -1 when it does not apply (the general step_cfi then runs), else as step_cfi.
 */
static inline int step_fast(struct walk *w, const struct dw_table *t, const struct dw_rule *r,
			    struct state *s, uint64_t *cfa_out)
{
	const struct dwunw_arch_ops *arch = w->arch;
	uint64_t cfa, valid, ra;
	const uint8_t *base;

	if (!(r->flags & w->fast_flag) || !(s->valid & (1ull << r->cfa_reg)))
		return -1;
	cfa = s->regs[r->cfa_reg] + (uint64_t)(int64_t)r->cfa_off;
	/* every slot in [cfa + off_min, cfa + off_max + 8) inside the snapshot (off_min > off_max:
	 * no slot, and the unsigned span check below is then skipped by the first test) */
	if (r->off_min <= r->off_max &&
	    (cfa + (uint64_t)(int64_t)r->off_min - w->snap_lo >
	     w->snap_len - ((uint64_t)((int64_t)r->off_max - r->off_min) + 8) ||
	     w->snap_len < (uint64_t)((int64_t)r->off_max - r->off_min) + 8))
		return -1;
	/* Only dereferenced at the offsets checked above (a simple rule's rules are all slots). */
	base = r->nregs ? w->snap + (cfa - w->snap_lo) : NULL;
	valid = s->valid;
	s->valid = (valid & (arch->callee_saved | w->lr_bit)) | (1ull << arch->sp_reg) | r->set_mask;
	s->regs[arch->sp_reg] = cfa;
	{
		const struct dw_regrule *rr = &t->regrules[r->reg_first], *end = rr + r->nregs;
		for (; rr < end; rr++)
			memcpy(&s->regs[rr->reg], base + rr->val, 8);
	}
	*cfa_out = cfa;
	if (!(s->valid & (1ull << r->ra_reg)))
		return 1;
	ra = s->regs[r->ra_reg];
	if (!(r->flags & DW_RULEF_RA_RULE) && r->ra_reg == arch->lr_reg)
		s->valid &= ~(1ull << r->ra_reg); /* the caller's own link register is not known */
	s->pc = arch->ra_to_pc ? arch->ra_to_pc(ra, !!(r->flags & DW_RULEF_RA_SIGNED)) : ra;
	return 0;
}

/* Where a pc is, when it is not where the previous frame was (frame_place). */
static __attribute__((noinline)) const struct place *frame_place_slow(struct walk *w, uint64_t lookup,
								      uint32_t fi)
{
	struct place *pl = &w->places[0];
	struct dw_map *m;
	struct dwunw_module *mod = NULL;
	int err;

	/* Callbacks bounce between a few modules: look at the recent places before searching
	 * (a hit swaps with the front: two modules in turn stay in the first two places). */
	for (unsigned i = 1; i < DW_ARRAY_SIZE(w->places); i++) {
		m = w->places[i].map;
		if (m && lookup >= m->start && lookup < m->end) {
			struct place hit = w->places[i];
			w->places[i] = w->places[0];
			w->places[0] = hit;
			return pl;
		}
	}
	memmove(&w->places[1], &w->places[0], (DW_ARRAY_SIZE(w->places) - 1) * sizeof(w->places[0]));
	memset(pl, 0, sizeof(*pl));
	if (!w->proc) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return pl;
	}
	m = (struct dw_map *)dw_proc_find(w->proc, lookup);
	if (!m && !w->refreshed && !w->proc->offline) {
		/* a library loaded after the maps were read */
		w->refreshed = 1;
		if (dw_proc_refresh(w->c, &w->proc) == DWUNW_OK) {
			/* the old maps are gone with the old snapshot */
			memset(&w->places[1], 0, (DW_ARRAY_SIZE(w->places) - 1) * sizeof(w->places[0]));
			m = (struct dw_map *)dw_proc_find(w->proc, lookup);
		}
	}
	pl->map = m;
	if (!m || (m->kind != DW_MAP_FILE && m->kind != DW_MAP_VDSO)) {
		pl->err = DWUNW_ERR_NO_MODULE;
		return pl;
	}
	{
		struct dwunw_module *cached = atomic_load_explicit(&m->mod, memory_order_acquire);
		for (unsigned i = 0; cached && i < w->nheld; i++)
			if (w->held[i].m == cached &&
			    atomic_load_explicit(&m->mod_gen, memory_order_relaxed) == atomic_load_explicit(&cached->gen, memory_order_relaxed)) {
				mod = cached;
				goto found;
			}
	}
	if (w->nheld == DW_HELD_MAX) {
		pl->err = DWUNW_ERR_CACHE_FULL;
		return pl;
	}
	err = dw_map_module(w->c, w->proc, m, image_read, w, &mod);
	if (err) {
		pl->err = err;
		return pl;
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
	if (dw_module_table(mod, &pl->table) != DWUNW_OK)
		pl->table = NULL;
	return pl;
}

/* Where a pc is: its mapping, and (for files and the vDSO) its module, held once per capture,
 * with the module's load bias and table. Consecutive frames mostly share it: checked inline. */
static inline const struct place *frame_place(struct walk *w, uint64_t lookup, uint32_t fi)
{
	const struct dw_map *m = w->places[0].map;

	if (DW_LIKELY(m && lookup >= m->start && lookup < m->end))
		return &w->places[0];
	return frame_place_slow(w, lookup, fi);
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

DWUNW_API int dwunw_capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
			    struct dwunw_frame *frames, size_t *frame_cnt)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct walk w;
	struct state sa, sb, *cur = &sa, *next = &sb, *tmp;
	size_t cap, nf = 0;
	uint32_t how = DWUNW_HOW_INITIAL;
	int exact, ret = DWUNW_OK, proc_err = DWUNW_OK;
	uint64_t regmask;
	unsigned spr;

	if (!frame_cnt)
		return DWUNW_ERR_INVALID_ARG;
	cap = *frame_cnt;
	*frame_cnt = 0;
	if (!c || !regs || !frames || !cap)
		return DWUNW_ERR_INVALID_ARG;
	if (c->cfg.max_frames && c->cfg.max_frames < cap)
		cap = c->cfg.max_frames;

	memset(&w, 0, offsetof(struct walk, held));
	w.nheld = 0;
	w.c = c;
	w.in = regs;
	w.arch = dwunw_arch_get((enum dwunw_arch)regs->arch);
	if (!w.arch)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	w.asz = w.arch->addr_size;
	w.lr_bit = w.arch->lr_reg < DWUNW_MAX_REGS ? 1ull << w.arch->lr_reg : 0;
	w.fast_flag = w.asz == 8 ? DW_RULEF_SIMPLE : 0;
	if (regs->stack && regs->stack_size) {
		w.snap = regs->stack;
		w.snap_lo = regs->stack_start;
		w.snap_len = regs->stack_size;
	}
	if (regs->pid > 0) {
		proc_err = dw_proc_get(c, regs->pid, &w.proc);
		if (proc_err && proc_err != DWUNW_ERR_NO_PROCESS)
			return proc_err;
		/* A process gone since the event and not cached: frame 0 only, and say why. */
	}

	regmask = w.arch->nregs >= 64 ? ~0ull : (1ull << w.arch->nregs) - 1;
	spr = w.arch->sp_reg;
	from_regs_n(regs, cur, w.arch->nregs);
	exact = !(regs->flags & DWUNW_REGS_PC_IS_RETADDR);

	for (;;) {
		struct dwunw_frame *f = &frames[nf];
		const struct place *pl;
		uint64_t lookup = exact ? cur->pc : cur->pc - 1;
		const uint64_t osp = cur->regs[spr], opc = cur->pc;
		uint64_t cfa = 0;
		const struct dw_table *t;
		int64_t row = -1;
		uint32_t nhow = DWUNW_HOW_CFI;
		int r, err;

		pl = frame_place(&w, lookup, (uint32_t)nf);
		if (DW_UNLIKELY(!exact && (!pl->map || opc >= pl->map->end))) {
			/* A return address at the very start of a mapping: no call precedes it there, so
			 * it is a trampoline's (qemu's signal page); it belongs to pc's own mapping. */
			const struct dw_map *own = w.proc ? dw_proc_find(w.proc, opc) : NULL;
			if (own && own != pl->map) {
				lookup = opc;
				pl = frame_place(&w, lookup, (uint32_t)nf);
			}
		}
		f->pc = opc;
		f->sp = (cur->valid >> spr) & 1 ? osp : 0;
		f->cfa = 0;
		f->module = pl->mod;
		f->module_addr = pl->mod ? opc - pl->bias : 0;
		f->how = how;
		f->flags = (exact ? DWUNW_FRAME_EXACT_PC : 0) | (w.beyond ? DWUNW_FRAME_BEYOND_SNAPSHOT : 0);
		if (DW_UNLIKELY(pl->map && pl->map->kind != DW_MAP_FILE)) {
			if (pl->map->kind == DW_MAP_UPROBES)
				f->flags |= DWUNW_FRAME_UPROBE_TRAMP;
			if (pl->map->kind == DW_MAP_ANON && (pl->map->prot & DW_PROT_X))
				f->flags |= DWUNW_FRAME_JIT;
			if (pl->map->kind == DW_MAP_VDSO)
				f->flags |= DWUNW_FRAME_VDSO;
		}
		w.beyond = 0;
		nf++;
		err = pl->err;
		if (DW_UNLIKELY(err)) {
			/* A pending uretprobe's return address is the start of [uprobes]: pc-1 is outside it. */
			if (!exact && w.proc) {
				const struct dw_map *um = dw_proc_find(w.proc, opc);
				if (um && um->kind == DW_MAP_UPROBES)
					f->flags |= DWUNW_FRAME_UPROBE_TRAMP;
			}
			if (err == DWUNW_ERR_CACHE_FULL || err == DWUNW_ERR_NOMEM || (f->flags & DWUNW_FRAME_UPROBE_TRAMP)) {
				ret = err;
				break;
			}
		}

		/* The step: the caller's registers end up in cur. */
		t = pl->table;
		if (t)
			row = dw_table_find_cached(t, lookup - pl->bias);
		if (row >= 0 && dw_table_rule(t, (uint32_t)row)->cfa_kind != DW_CFA_KIND_END &&
		    !((dw_table_rule(t, (uint32_t)row)->flags & DW_RULEF_SIGNAL) && is_sigtramp(&w, cur))) {
			const struct dw_rule *rule = dw_table_rule(t, (uint32_t)row);
			r = step_fast(&w, t, rule, cur, &cfa); /* in place, when it can */
			if (r < 0) {
				r = step_cfi(&w, t, rule, cur, next, &cfa);
				if (r == 0) {
					tmp = cur;
					cur = next;
					next = tmp;
				}
			}
			if (r < 0) {
				ret = r;
				break;
			}
			if (r == 1) {
				ret = DWUNW_OK; /* return address undefined: the outermost frame */
				break;
			}
			f->cfa = cfa;
			if (rule->flags & DW_RULEF_SIGNAL) {
				nhow = DWUNW_HOW_SIGNAL;
				f->flags |= DWUNW_FRAME_SIGTRAMP;
			}
		} else {
			err = step_fallback(&w, cur, next, (uint32_t)nf - 1, exact, pl, &nhow);
			if (err) {
				ret = err == DWUNW_ERR_NO_MODULE && !w.proc && proc_err ? proc_err : err;
				break;
			}
			if (nhow == DWUNW_HOW_SIGNAL)
				f->flags |= DWUNW_FRAME_SIGTRAMP;
			tmp = cur;
			cur = next;
			next = tmp;
		}
		if (cur->pc == 0) {
			/* A zero return address ends the chain, unless it was read from the live process
			 * after the event: that memory may hold other frames by now. */
			ret = w.beyond ? DWUNW_ERR_LIVE_END : DWUNW_OK;
			break;
		}
		/* The stack grows down: a caller's frame is above its callee's; equal is fine for a
		 * frameless leaf, as long as the pc moves. */
		if (nhow != DWUNW_HOW_SIGNAL && how != DWUNW_HOW_SIGNAL &&
		    (!((cur->valid >> spr) & 1) || cur->regs[spr] < osp || (cur->regs[spr] == osp && cur->pc == opc))) {
			ret = DWUNW_ERR_NO_PROGRESS;
			break;
		}
		/* Only now, with a caller to show, is a full buffer a truncation. */
		if (nf >= cap) {
			ret = DWUNW_ERR_DEPTH;
			break;
		}
		exact = nhow == DWUNW_HOW_SIGNAL;
		how = nhow;
		cur->valid &= regmask;
	}
	/* The frames keep one reference per module; a module held for a frame that was not
	 * returned (none today) would be dropped here. */
	for (unsigned i = 0; i < w.nheld; i++) {
		if (w.held[i].frame < nf)
			frames[w.held[i].frame].flags |= DWUNW_FRAME_HOLDS_REF;
		else
			dw_module_put(w.held[i].m);
	}
	if (w.remote_on)
		dw_remote_end(&w.remote);
	dw_proc_put(c, w.proc);
	*frame_cnt = nf;
	return ret;
}
