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
#include "live_read.h"
#include "place.h"
#include "place_memo.h"
#include "symbols.h"

static const struct place no_place; /* empty: len 0, no table */

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
	return dw_walk_read(((struct expr_arg *)arg)->w, addr, buf, len);
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


/* The arch's registers only (the others are never valid): a signal frame's two copies of all 64
 * were ~130 instructions. */
static inline size_t arch_regs_bytes(const struct dwunw_arch_ops *arch)
{
	return (arch->nregs < DWUNW_MAX_REGS ? arch->nregs : DWUNW_MAX_REGS) * sizeof(uint64_t);
}

static void to_regs(const struct walk *w, const struct state *s, struct dwunw_regs *r)
{
	r->arch = w->in->arch;
	r->pid = w->in->pid;
	r->tid = w->in->tid;
	r->pc = s->pc;
	r->valid = s->valid;
	memcpy(r->regs, s->regs, arch_regs_bytes(w->arch));
}

/* Frame 0's registers other than sp and fp (only the arch's are looked at), for the first slow
 * step: walk_fast kept s's pc, valid mask, sp and fp, and never touched the others. */
static __attribute__((noinline)) void full_regs(const struct dwunw_regs *r, struct state *s,
						const struct dwunw_arch_ops *arch)
{
	uint64_t sp = s->regs[arch->sp_reg], fp = s->regs[arch->fp_reg];

	memcpy(s->regs, r->regs, arch_regs_bytes(arch));
	s->regs[arch->sp_reg] = sp;
	s->regs[arch->fp_reg] = fp;
}

static void from_regs(const struct dwunw_regs *r, struct state *s, const struct dwunw_arch_ops *arch)
{
	s->pc = r->pc;
	s->valid = r->valid;
	memcpy(s->regs, r->regs, arch_regs_bytes(arch));
}

/*
 * A signal frame whose trampoline the arch recognises by its code: its saved context is the
 * truth, whatever the FDE says (the arm64 vDSO's FDE describes only a frame record). The step
 * itself then goes through step_fallback, which asks the arch first.
 */
static int is_sigtramp(struct walk *w, const struct state *s, struct dwunw_regs *out)
{
	struct dwunw_regs in;

	if (!w->arch->sigframe)
		return 0;
	to_regs(w, s, &in);
	return w->arch->sigframe(&in, out, dw_walk_read, w) > 0;
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
			 int exact, const struct place *pl, uint32_t *how, const struct dwunw_regs *sig)
{
	const struct dwunw_module *mod = pl->mod;
	const struct dwunw_arch_ops *arch = w->arch;
	struct dwunw_regs in, out;
	int r;

	if (sig) {
		/* is_sigtramp recognised it already: its caller's registers */
		*how = DWUNW_HOW_SIGNAL;
		from_regs(sig, n, arch);
		return DWUNW_OK;
	}
	to_regs(w, s, &in);
	memset(&out, 0, sizeof(out));
	if (arch->sigframe) {
		r = arch->sigframe(&in, &out, dw_walk_read, w);
		if (r < 0)
			return r;
		if (r > 0) {
			*how = DWUNW_HOW_SIGNAL;
			goto done;
		}
	}
	if (exact && mod && arch->stub_step) {
		uint64_t addr = s->pc - pl->bias;
		/* the entry of .init/.fini (x86_64's crti code, without CFI): nothing pushed yet. A
		 * frame-pointer step there would skip the caller (ld.so's _dl_fini keeps rbp as its
		 * own frame pointer: gdb shows _fini <- _dl_fini <- __run_exit_handlers). */
		if (addr && (addr == mod->elf.entries[0] || addr == mod->elf.entries[1]) &&
		    arch->stub_step(&in, &out, dw_walk_read, w) > 0) {
			*how = DWUNW_HOW_LR;
			goto done;
		}
		for (uint32_t i = 0; i < mod->elf.nstubs; i++)
			if (addr >= mod->elf.stubs[i][0] && addr < mod->elf.stubs[i][1]) {
				if (arch->stub_step(&in, &out, dw_walk_read, w) > 0) {
					*how = DWUNW_HOW_LR;
					goto done;
				}
				break;
			}
	}
	if (mod && arch->prologue_step) {
		/* no CFI for this pc: the prologue analyser, anchored on the function's symbol */
		uint64_t start = 0;
		if (w->nowait && atomic_load_explicit(&mod->syms_state, memory_order_acquire) == 0)
			return DWUNW_ERR_WOULDBLOCK; /* the symbol index: built by dwunw_load_for */
		if (dw_module_func_start(pl->mod, (exact ? s->pc : s->pc - 1) - pl->bias, &start) == DWUNW_OK)
			start += pl->bias;
		r = arch->prologue_step(&in, &out, start, exact, dw_walk_read, w);
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
	    arch->fp_step(&in, &out, dw_walk_read, w) > 0 && fp_plausible(w, &in, &out)) {
		*how = DWUNW_HOW_FP;
		goto done;
	}
	if (mod)
		return DWUNW_ERR_NO_DWARF;
	/* A file mapping whose file could not be opened says why (NOT_FOUND, PERM, ...). */
	return pl->err && pl->err != DWUNW_ERR_NO_MODULE ? pl->err : DWUNW_ERR_NO_MODULE;
done:
	from_regs(&out, n, arch);
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
	uint64_t snap_lean;        /* snap_len - DW_LEAN_SPAN_MAX: slots starting at or below fit */
	uint64_t keep;             /* registers a step keeps: callee-saved and link, < nregs */
	unsigned spr, fpr;         /* the frame pointer is callee-saved on every backend */
	unsigned lrr;              /* the link register (< 64), else 255 */
	uint64_t lr_val;           /* frame 0's link register */
	uint64_t (*ra_to_pc)(uint64_t ra, int ra_signed);
	const struct place *places, *places_end; /* every recent place */
};

enum { FAST_MORE, FAST_END, FAST_NO_PROGRESS, FAST_DEPTH };

/* A shape that is not a LEAN step: its flags have CFA_FP, so the common path tests nothing more,
 * and SIGNAL, which no LEAN rule has; pad says which (fast_frame's `other`). */
#define DW_SHAPE_OTHER (DW_RULEF_CFA_FP | DW_RULEF_SIGNAL)
enum { DW_SHAPE_LEAF = 1, DW_SHAPE_OUTERMOST };

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
	uint64_t dropped;          /* registers valid on entry that a step made unknown */
	struct dwunw_frame *f;
	struct dwunw_frame *f0;    /* the first frame of this walk_fast */
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
	const struct dw_shape *sh, *set;
	struct dw_shape tmp;
	uint64_t key, ent, cfa, lo, npc;
	uint32_t skey;
	const _Atomic uint64_t *slot;
	struct dwunw_frame *f = st->f;
	uintptr_t base;
	unsigned fl;

	/* lookup and pc (= lookup + dec) both in the place (never for pc 0 after a step); off:
	 * lookup's offset in the mapping, the shape cache's key */
	uint64_t off = dec ? pc - p->start1 : lookup - p->start;

	if (DW_UNLIKELY(off >= (dec ? p->len1 : p->len))) {
		const struct place *t = st->a;

		if (DW_UNLIKELY(!t->rcache || (dec ? pc - t->start1 >= t->len1 : lookup - t->start >= t->len))) {
			/* the step before read a zero return address: the chain's end (checked here,
			 * off the common path: no place holds pc 0 - 1) */
			if (DW_UNLIKELY(pc == 0) && f != st->f0)
				return FAST_END;
			/* a third module: the other recent places */
			for (t = e->places; t < e->places_end; t++)
				if (t->rcache && (dec ? pc - t->start1 < t->len1 : lookup - t->start < t->len))
					break;
			if (t == e->places_end) {
				/* not seen yet in this capture: its place, filled here */
				uint64_t lk = lookup;
				t = dw_frame_place(e->w, &lk, pc, (uint32_t)(f - frames));
				if (lk != lookup || (dec ? pc - t->start1 >= t->len1 : lookup - t->start >= t->len))
					return FAST_MORE;
			}
			if (!t->rcache)
				return FAST_MORE;
			place_use(e->w, t, (uint32_t)(f - frames));
		}
		/* (the other recent place was the current one of an earlier frame: in use already) */
		st->a = p;
		st->p = p = t;
		off = dec ? pc - p->start1 : lookup - p->start;
	}
	/* the rule, pre-decoded: one probe of the place's shape cache, else the table's look-up
	 * cache (filling the shape cache when the capture owns it) */
	skey = (uint32_t)off;
	sh = &p->shapes[dw_shape_slot(skey)];
	if (DW_UNLIKELY(sh->key != skey)) {
		set = sh;
		/* unrolled: a hit in another way costs a compare and a branch */
#pragma GCC unroll 8
		for (sh = set + 1; sh < set + DW_SHAPE_WAYS; sh++)
			if (sh->key == skey)
				goto shape_hit;
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
		if (rule->cfa_kind == DW_CFA_KIND_REG && rule->cfa_reg == e->spr && !rule->nregs &&
		    e->lrr < 64 && rule->ra_reg == e->lrr && !(fl & DW_RULEF_SIGNAL)) {
			/* a leaf's rule: CFA = sp + offset, nothing saved, the return address in the
			 * link register (frame 0 only, below) */
			tmp = (struct dw_shape){ .key = skey, .cfa_off = rule->cfa_off,
						 .flags = DW_SHAPE_OTHER | (fl & DW_RULEF_RA_SIGNED),
						 .pad = DW_SHAPE_LEAF };
		} else if (!(fl & DW_RULEF_LEAN)) {
			/* the last frame (below), else the slow path */
			if (!(fl & DW_RULEF_OUTERMOST) || rule->cfa_reg >= 64)
				return FAST_MORE;
			tmp = (struct dw_shape){ .key = skey, .span = rule->cfa_reg, .flags = DW_SHAPE_OTHER,
						 .pad = DW_SHAPE_OUTERMOST };
		} else {
			/* (slots from the register beyond 32 bits: the slow path) */
			if (DW_UNLIKELY((int64_t)rule->cfa_off + rule->off_min !=
					(int32_t)(rule->cfa_off + (int64_t)rule->off_min)))
				return FAST_MORE;
			tmp = (struct dw_shape){ .key = skey, .cfa_off = rule->cfa_off, .off_min = rule->off_min,
						 .span = rule->span, .ra_slot = rule->ra_slot, .fp_slot = rule->fp_slot,
						 .flags = (uint8_t)fl, .step_mask = rule->step_mask,
						 .lo_off = (int32_t)((int64_t)rule->cfa_off + rule->off_min) };
		}
		if (p->shapes_w) {
			/* the newest first, the oldest goes */
			struct dw_shape *ws = (struct dw_shape *)set;
			memmove(ws + 1, ws, (DW_SHAPE_WAYS - 1) * sizeof(*ws));
			ws[0] = tmp;
			*p->dirty |= 1ull << ((size_t)(ws - p->shapes) / DW_SHAPE_WAYS);
		}
		sh = &tmp;
	}
shape_hit:
	fl = sh->flags;
	if (fl & DW_RULEF_CFA_FP) {
		if (DW_UNLIKELY(fl & DW_RULEF_SIGNAL))
			goto other;
		if (DW_UNLIKELY(!(((v0 | st->saved) >> e->fpr) & 1)))
			return FAST_MORE;
		cfa = st->fp;
	} else {
		cfa = sp;
	}
	/* the slots [lo, lo + span) inside the snapshot (snap_len >= DW_LEAN_SPAN_MAX >= span: no
	 * wrap; lo below the snapshot wraps to a large number) */
	if (asz == 4) {
		cfa = (uint32_t)(cfa + (uint64_t)(int64_t)sh->cfa_off);
		lo = cfa - e->snap_lo + (uint64_t)(int64_t)sh->off_min;
	} else {
		lo = cfa + (uint64_t)(int64_t)sh->lo_off - e->snap_lo;
		cfa += (uint64_t)(int64_t)sh->cfa_off;
	}
	if (DW_UNLIKELY(lo > e->snap_lean) && lo > e->snap_len - sh->span)
		return FAST_MORE;
	/* the step: from here on this frame is done */
	base = snap_base + cfa;
	npc = word_at((const uint8_t *)(base + (intptr_t)sh->ra_slot * asz), asz);
	if (sh->fp_slot)
		st->fp = word_at((const uint8_t *)(base + (intptr_t)sh->fp_slot * asz), asz);
	st->saved |= sh->step_mask;
	if (has_ra_to_pc && DW_UNLIKELY(npc >> 48)) /* (the identity below 2^48: dwunw.h) */
		npc = e->ra_to_pc(npc, !!(fl & DW_RULEF_RA_SIGNED));
record:
	/* how and the first frame's EXACT_PC: set by the caller */
	f->pc = pc;
	f->sp = sp;
	f->cfa = cfa;
	f->module_addr = pc - p->bias;
	frame_modhow(f, p);
	st->f = ++f;
	st->pc = npc;
	st->sp = cfa;
	/* A zero return address ends the chain before any other check; when none of them stops
	 * the walk the next frame's place check sees it (no place holds pc 0 - 1). */
	if (DW_UNLIKELY(cfa <= sp)) {
		if (npc == 0)
			return FAST_END;
		if (cfa < sp || npc == pc)
			return FAST_NO_PROGRESS;
	}
	if (DW_UNLIKELY(f >= fend))
		return npc == 0 ? FAST_END : FAST_DEPTH;
	return -1;

other:
	if (sh->pad == DW_SHAPE_LEAF) {
		/* frame 0 in a leaf (arm64, mips32): the return address still in the link register;
		 * the caller's link register is not known (step_cfi's step, without the slow path's
		 * full register state). A return address there (pc - 1 at that offset): the slow path. */
		if (dec || !((v0 >> e->lrr) & 1))
			return FAST_MORE;
		cfa = sp + (uint64_t)(int64_t)sh->cfa_off;
		if (asz == 4)
			cfa = (uint32_t)cfa;
		npc = e->lr_val;
		if (has_ra_to_pc && DW_UNLIKELY(npc >> 48))
			npc = e->ra_to_pc(npc, !!(fl & DW_RULEF_RA_SIGNED));
		st->dropped |= 1ull << e->lrr;
		goto record;
	}
	/* the last frame, as step_cfi would end it: no caller, no CFA shown (a CFA register that
	 * is not kept by a step: left to the slow path) */
	if (!((((v0 & ~st->dropped) | st->saved) >> sh->span) & 1))
		return FAST_MORE;
	f->pc = pc;
	f->sp = sp;
	f->cfa = 0;
	f->module_addr = pc - p->bias;
	frame_modhow(f, p); /* how CFI, the place's flags */
	st->f = ++f;
	return FAST_END;
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
			      .saved = 0, .dropped = 0, .f = frames + *nfp, .f0 = frames + *nfp };
	int ret = -1;

	if (exact)
		ret = fast_frame(e, &st, frames, fend, v0, snap_base, 0, asz, has_ra_to_pc);
	while (ret < 0)
		ret = fast_frame(e, &st, frames, fend, v0, snap_base, 1, asz, has_ra_to_pc);
	s->regs[spr] = st.sp;
	s->regs[fpr] = st.fp;
	s->pc = st.pc;
	s->valid &= ~st.dropped;
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

	/* (a rule that is not FAST has no step_mask: frame 0's leaf step sets sp only) */
	s->valid = ((s->valid | saved) & keep) | (r && (r->flags & DW_RULEF_FAST) ? r->step_mask : sp_bit);
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
	struct dwunw_regs sig;
	int is_sig = 0;
	int r;

	if (rule && rule->cfa_kind != DW_CFA_KIND_END &&
	    !((rule->flags & DW_RULEF_SIGNAL) && (is_sig = is_sigtramp(w, *cur, &sig)))) {
		r = step_cfi(w, pl->table, rule, *cur, *next, cfa);
		if (r)
			return r;
		if (rule->flags & DW_RULEF_SIGNAL) {
			*nhow = DWUNW_HOW_SIGNAL;
			*fl |= DWUNW_FRAME_SIGTRAMP;
		}
	} else {
		*cfa = 0;
		r = step_fallback(w, *cur, *next, fi, exact, pl, nhow, is_sig ? &sig : NULL);
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
	int exact, entered = 0, memo, ret = DWUNW_OK, proc_err = DWUNW_OK, full = 0;
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
	w.nheld = 0;
	w.c = c;
	w.in = regs;
	w.nowait = !!(regs->flags & DWUNW_REGS_NOWAIT);
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
		proc_err = w.nowait ? dw_proc_enter_nowait(c, regs->pid, &w.proc, &w.proc_ref)
				    : dw_proc_enter(c, regs->pid, &w.proc, &w.proc_ref);
		if (proc_err && proc_err != DWUNW_ERR_NO_PROCESS) {
			dw_proc_leave(c, NULL, 0);
			return proc_err;
		}
		/* A process gone since the event and not cached: frame 0 only, and say why. */
		if (proc_err)
			w.proc_ref = 0;
	}
	memo = dw_memo_take(&w);

	/* The walk's constants, in locals the stores to the register state cannot alias. */
	snap = w.snap;
	snap_lo = w.snap_lo;
	snap_len = w.snap_len;
	spr = arch->sp_reg;
	lr_bit = arch->lr_reg < DWUNW_MAX_REGS ? 1ull << arch->lr_reg : 0;
	regmask = arch->nregs >= 64 ? ~0ull : (1ull << arch->nregs) - 1;
	keep = (arch->callee_saved | lr_bit) & regmask;
	/* Frame 0's registers: what walk_fast reads now, the others before the first slow step
	 * (full_regs); a capture that walk_fast completes never copies them. */
	cur->pc = regs->pc;
	cur->valid = regs->valid;
	cur->regs[spr] = regs->regs[spr];
	cur->regs[arch->fp_reg] = regs->regs[arch->fp_reg];
	exact = !(regs->flags & DWUNW_REGS_PC_IS_RETADDR);
	pl = alt = &no_place; /* the first frame looks its place up: a recent one inline */
	for (unsigned i = 0; i < DW_MEMO_PLACES; i++) {
		const struct place *rp = &w.places[i];
		if (regs->pc - !exact - rp->start < rp->len && regs->pc - rp->start < rp->len) {
			pl = rp;
			place_use(&w, rp, 0);
			break;
		}
	}
	fe = (struct fast_env){ .w = &w, .snap = snap, .snap_lo = snap_lo, .snap_len = snap_len,
				.snap_lean = snap_len - DW_LEAN_SPAN_MAX, .keep = keep,
				.spr = spr, .fpr = arch->fp_reg, .ra_to_pc = arch->ra_to_pc,
				.lrr = arch->lr_reg < 64 ? arch->lr_reg : 255,
				.lr_val = arch->lr_reg < DWUNW_MAX_REGS ? regs->regs[arch->lr_reg] : 0,
				.places = w.places, .places_end = w.places + DW_MEMO_PLACES };

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
			const struct place *np = dw_frame_place(&w, &lookup, opc, (uint32_t)nf);
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
			if (DW_UNLIKELY(!full)) {
				full_regs(regs, cur, arch);
				full = 1;
			}
			if (nf != n0) {
				fast_restore(&w, cur, frames, n0, nf, exact, keep, saved, arch->fp_reg);
				exact = 0;
				how = DWUNW_HOW_CFI;
				continue;
			}
		}
		if (DW_UNLIKELY(!full)) {
			full_regs(regs, cur, arch);
			full = 1;
		}
		fl |= pl->fflags;
		w.beyond = 0;
		if (DW_UNLIKELY(pl->err)) {
			fl |= uprobe_flag(&w, opc, exact);
			if (pl->err == DWUNW_ERR_CACHE_FULL || pl->err == DWUNW_ERR_NOMEM ||
			    pl->err == DWUNW_ERR_WOULDBLOCK || (fl & DWUNW_FRAME_UPROBE_TRAMP)) {
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
	if (DW_UNLIKELY(w.blocked))
		ret = DWUNW_ERR_WOULDBLOCK; /* some step went without a file read it needed */
	if (memo)
		dw_memo_give(&w);
	if (!dw_hand_refs_in_order(&w, frames, nf))
		dw_hand_refs(&w, frames, nf);
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

/* A blocking walk whose frames are dropped: it loads what the NOWAIT walk found missing. */
#define DW_LOAD_FRAMES 1024

DWUNW_API int dwunw_load_for(struct dwunw_ctx *ctx, const struct dwunw_regs *regs)
{
	struct dwunw_regs r;
	struct dwunw_frame *frames;
	size_t n = DW_LOAD_FRAMES;
	int err;

	if (!dw_ctx(ctx) || !regs)
		return DWUNW_ERR_INVALID_ARG;
	frames = malloc(n * sizeof(*frames));
	if (!frames)
		return DWUNW_ERR_NOMEM;
	r = *regs;
	r.flags &= ~DWUNW_REGS_NOWAIT;
	err = dwunw_capture(ctx, &r, frames, &n);
	dwunw_module_cache_release(ctx, frames, n);
	free(frames);
	switch (err) {
	case DWUNW_ERR_NO_PROCESS:
	case DWUNW_ERR_CACHE_FULL:
	case DWUNW_ERR_NOMEM:
	case DWUNW_ERR_INVALID_ARG:
	case DWUNW_ERR_UNSUPPORTED_ARCH:
		return err;
	default:
		return DWUNW_OK; /* the walk's other stops are not about loading */
	}
}
