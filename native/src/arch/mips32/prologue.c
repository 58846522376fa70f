// SPDX-License-Identifier: GPL-2.0-only
/*
 * mips32 o32: the caller of a frame whose code has no CFI, from the code itself.
 *
 * Two scans of the function's instructions (read through the walk's reader: snapshot, live
 * process, then the module file):
 *   ahead   from pc to the first `jr ra` (and its delay slot) with no other branch between: pc is
 *           in an epilogue, and what is still to run says where everything is. The sp increments
 *           not yet run are the frame still allocated; a `lw r,off(sp)` not yet run means r is
 *           still in its slot, otherwise r already holds the caller's value.
 *   behind  otherwise (the body), from the function's start (its symbol, or after the previous
 *           function's `jr ra` found by a bounded backward scan) to pc: every sp decrement
 *           (`addiu sp,sp,-N`, `addu/subu sp,sp,rK` with rK from lui/ori/li), the first store of
 *           each callee-saved register and ra (`sw r,off(sp)`, or off(fp) after the frame
 *           pointer is set), `move fp,sp` / `addiu fp,sp,K`, `.cpload` (gp changes). Increments
 *           seen there belong to another path's epilogue and are skipped: the layout gcc emits
 *           with shrink-wrapping has the allocation before every block that runs inside it.
 *   paths   no symbol (a static function of a stripped library): the function's start is not
 *           known, and a `jr ra` found behind pc may be one of its own early returns. So the
 *           code from pc is followed instead, through branches (both ways), jumps and calls, to
 *           every return reached within a bound: at a `jr ra` the caller's sp is sp at pc plus
 *           the increments on the way, and each register the caller sees is what its last
 *           write on the way left there (a `lw r,off(sp)`: the slot; none: the value at pc). All
 *           returns reached must agree; a path into the next function (an sp decrement, after a
 *           call that does not return) or through a computed jump is dropped; an sp moved
 *           any other way ends the scan (the other scans then decide). fp (s8) is one more
 *           saved register here: a frame kept in fp moves sp from it, which ends the scan.
 * A frame of unknown size (sp moved by a register, alloca) needs the frame pointer; an
 * instruction that writes sp or fp in a way not listed, a frame above the CFA, a call made
 * without ra saved, or no function start: DWUNW_ERR_PROLOGUE, never a guess.
 */
#include <string.h>
#include "internal.h"
#include "arch/mips32/prologue.h"
#include "arch/code_reader.h"

enum { R_ZERO = 0, R_GP = 28, R_SP = 29, R_FP = 30, R_RA = 31, R_T9 = 25 };

#define BIT(n) (1u << (n))
/* What a frame saves for its caller: s0-s7, fp, ra (gp is the callee's own, see below). */
#define SAVED_SET (0x00ff0000u | BIT(R_FP) | BIT(R_RA))
#define SCAN_MAX  4096 /* instructions from the function start to pc, at most */
#define BACK_MAX  4096 /* backward scan for the previous function's return */
#define AHEAD_MAX 64   /* instructions from pc to an epilogue's jr ra */

#define INSN_JR_RA 0x03e00008u

#define OP(i)    ((i) >> 26)
#define RS(i)    (((i) >> 21) & 31)
#define RT(i)    (((i) >> 16) & 31)
#define RD(i)    (((i) >> 11) & 31)
#define FUNCT(i) ((i) & 63)
#define IMM(i)   ((int32_t)(int16_t)((i) & 0xffff))

enum { OP_SPECIAL = 0, OP_REGIMM = 1, OP_J = 2, OP_JAL = 3, OP_ADDIU = 9, OP_ORI = 13, OP_LUI = 15,
       OP_LW = 0x23, OP_SW = 0x2b };
enum { F_JR = 8, F_JALR = 9, F_ADDU = 0x21, F_SUBU = 0x23, F_OR = 0x25 };

/* Branches and jumps (their delay slot runs with them). */
static int is_branch(uint32_t i)
{
	unsigned op = OP(i);

	if (op == OP_SPECIAL)
		return FUNCT(i) == F_JR || FUNCT(i) == F_JALR;
	return op == OP_REGIMM || op == OP_J || op == OP_JAL || (op >= 4 && op <= 7) || (op >= 0x14 && op <= 0x17);
}

/* The register an instruction writes (0: none that matters here). */
static unsigned dest(uint32_t i)
{
	unsigned op = OP(i);

	if (op == OP_SPECIAL)
		return FUNCT(i) == F_JR ? 0 : RD(i);
	if ((op >= 8 && op <= 15) || (op >= 0x20 && op <= 0x26))
		return RT(i);
	if (op == OP_JAL || (op == OP_REGIMM && (RT(i) & 0x10)))
		return R_RA;
	return 0;
}

/* `move rd, rs` as gcc and gas write it: addu/or rd, rs, $0. */
static int is_move(uint32_t i, unsigned rd, unsigned rs)
{
	return OP(i) == OP_SPECIAL && (FUNCT(i) == F_ADDU || FUNCT(i) == F_OR) && RD(i) == rd &&
	       ((RS(i) == rs && RT(i) == R_ZERO) || (RT(i) == rs && RS(i) == R_ZERO));
}

/* Constants held in registers (lui/ori/li): for `addu/subu sp, sp, rK`. */
struct consts {
	uint32_t known;
	uint32_t val[32];
};

static void track_const(struct consts *k, uint32_t i)
{
	unsigned op = OP(i), rt = RT(i), rs = RS(i), d = dest(i);

	if (op == OP_LUI) {
		k->val[rt] = (uint32_t)(i & 0xffff) << 16;
		k->known |= BIT(rt);
		return;
	}
	if ((op == OP_ORI || op == OP_ADDIU) && (rs == R_ZERO || (k->known & BIT(rs))) && rt != R_ZERO) {
		uint32_t base = rs == R_ZERO ? 0 : k->val[rs];
		k->val[rt] = op == OP_ORI ? (base | (i & 0xffff)) : base + (uint32_t)IMM(i);
		k->known |= BIT(rt);
		return;
	}
	if (d)
		k->known &= ~BIT(d);
}

/* The caller's frame: sp = cfa, pc = ra, saved registers from their slots or kept. */
struct result {
	uint32_t cfa;
	uint32_t from_mem;          /* registers read from their slot... */
	uint32_t addr[32];          /* ...at these addresses */
	int gp_changed;
	int outermost;              /* the code cleared ra (the program's entry): no caller */
};

static int finish(const struct dwunw_regs *in, struct dwunw_regs *out, const struct result *res,
		  read_fn read, void *arg)
{
	uint64_t keep = in->valid & (SAVED_SET | BIT(R_GP)) & ~(uint64_t)BIT(R_RA);
	uint32_t ra;

	if (res->gp_changed)
		keep &= ~(uint64_t)BIT(R_GP);
	if (res->outermost) {
		/* pc 0 ends the walk without an error */
		dw_arch_frame_from(in, out, DWUNW_ARCH_MIPS32);
		memset(out->regs, 0, sizeof(out->regs));
		out->regs[R_SP] = (uint32_t)in->regs[R_SP];
		out->pc = 0;
		out->valid = BIT(R_SP);
		return 1;
	}
	if (res->cfa < (uint32_t)in->regs[R_SP])
		return DWUNW_ERR_PROLOGUE; /* a frame above its own CFA: not code we understood */
	dw_arch_frame_from(in, out, DWUNW_ARCH_MIPS32);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned r = 0; r < 32; r++)
		if (keep & BIT(r))
			out->regs[r] = (uint32_t)in->regs[r];
	for (unsigned r = 0; r < 32; r++) {
		uint8_t b[4];
		if (!(res->from_mem & BIT(r)))
			continue;
		if (read(arg, res->addr[r], b, 4) != DWUNW_OK)
			return DWUNW_ERR_IO;
		out->regs[r] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		keep |= BIT(r);
	}
	if (res->from_mem & BIT(R_RA))
		ra = (uint32_t)out->regs[R_RA];
	else if (in->valid & BIT(R_RA))
		ra = (uint32_t)in->regs[R_RA];
	else
		return DWUNW_ERR_PROLOGUE; /* ra neither saved nor known: a call made without saving it */
	if (ra & 3)
		return DWUNW_ERR_PROLOGUE;
	/* The caller's own link register is not known after the return. */
	keep &= ~(uint64_t)BIT(R_RA);
	out->regs[R_SP] = res->cfa;
	out->pc = ra;
	out->valid = keep | BIT(R_SP);
	return 1;
}

/*
 * Ahead of pc: an epilogue? 1 and `res` filled when pc reaches `jr ra` (or a sibling call's `jr`
 * after a restore) with no other branch; 0 when pc is in the body, or the code ahead is not an
 * epilogue this scan understands (the body scan then decides, with its own checks).
 */
static int scan_ahead(struct code *c, const struct dwunw_regs *in, uint32_t pc, struct result *res)
{
	unsigned base = R_SP, pbase[32];
	int32_t delta = 0, poff[32];
	int restoring = 0, slot = 0;
	struct consts k = { 0 };
	uint32_t pending = 0;

	for (unsigned n = 0; n < AHEAD_MAX; n++) {
		uint32_t i, a = pc + 4 * n;
		if (fetch(c, a, &i))
			return 0;
		if (is_branch(i) && !slot) {
			int ret = i == INSN_JR_RA || (OP(i) == OP_SPECIAL && FUNCT(i) == F_JR && restoring);
			if (!ret)
				return 0;
			slot = 1; /* the delay slot still runs */
			continue;
		}
		if (OP(i) == OP_ADDIU && RT(i) == R_SP && (RS(i) == R_SP || RS(i) == R_FP)) {
			if (RS(i) == R_SP && IMM(i) < 0)
				return 0; /* an allocation: a prologue (the next function's, after a call
					   * that does not return), not an epilogue */
			if (RS(i) == R_FP) {
				base = R_FP;
				delta = 0;
			}
			delta += IMM(i);
			restoring = 1;
		} else if (OP(i) == OP_SPECIAL && RD(i) == R_SP && (FUNCT(i) == F_ADDU || FUNCT(i) == F_SUBU || FUNCT(i) == F_OR)) {
			if (is_move(i, R_SP, R_FP)) {
				if (pending & BIT(R_FP))
					return DWUNW_ERR_PROLOGUE; /* fp already reloaded */
				base = R_FP;
				delta = 0;
			} else if (RS(i) == R_SP && (k.known & BIT(RT(i)))) {
				int32_t v = FUNCT(i) == F_SUBU ? -(int32_t)k.val[RT(i)] : (int32_t)k.val[RT(i)];
				if (v < 0)
					return 0; /* an allocation: not an epilogue */
				delta += v;
			} else {
				return 0; /* sp moved by a run-time amount (alloca): the body */
			}
			restoring = 1;
		} else if (OP(i) == OP_LW && RS(i) == R_SP && (SAVED_SET & BIT(RT(i)))) {
			if (!(pending & BIT(RT(i)))) {
				/* the slot is sp-then + off, sp-then = base register (its value at pc) + delta */
				pending |= BIT(RT(i));
				pbase[RT(i)] = base;
				poff[RT(i)] = delta + IMM(i);
			}
			restoring = 1;
		} else if (dest(i) == R_SP || (dest(i) == R_FP && restoring)) {
			return 0; /* not an epilogue this scan understands: the body scan decides */
		}
		track_const(&k, i);
		if (slot) {
			/* the epilogue ran: the frame ends where sp ends */
			if (!(in->valid & BIT(base)))
				return DWUNW_ERR_PROLOGUE;
			memset(res, 0, sizeof(*res));
			res->cfa = (uint32_t)in->regs[base] + (uint32_t)delta;
			for (unsigned r = 0; r < 32; r++) {
				if (!(pending & BIT(r)))
					continue;
				if (!(in->valid & BIT(pbase[r])))
					return DWUNW_ERR_PROLOGUE;
				res->addr[r] = (uint32_t)in->regs[pbase[r]] + (uint32_t)poff[r];
				res->from_mem |= BIT(r);
			}
			return 1;
		}
	}
	return 0;
}

/*
 * Paths from pc to the function's returns (see the head comment). 1 and `res` filled when every
 * return reached agrees; 0 when none was reached or they disagree (the other scans decide).
 */
#define PATH_INSNS 1024 /* instructions followed, all paths together */
#define PATH_FORKS 64   /* branches whose other way waits */

struct path {
	uint32_t a;           /* next instruction */
	int32_t delta;        /* sp now - sp at pc */
	uint32_t written;     /* registers written since pc... */
	uint32_t from_slot;   /* ...by a `lw r, off(sp)`, at sp-at-pc + slot[r] */
	int32_t slot[32];
	int gp;               /* gp written */
};

static int is_likely(uint32_t i)
{
	unsigned op = OP(i);

	return (op >= 0x14 && op <= 0x17) || (op == OP_REGIMM && (RT(i) & 0x3) >= 2 && (RT(i) & 0xc) == 0);
}

/* A branch's target (conditional branches, b, bal: pc-relative; j/jal: in the 256 MB region). */
static uint32_t target(uint32_t a, uint32_t i)
{
	if (OP(i) == OP_J || OP(i) == OP_JAL)
		return ((a + 4) & 0xf0000000u) | ((i & 0x03ffffffu) << 2);
	return a + 4 + ((uint32_t)IMM(i) << 2);
}

/* One instruction's effect on a path; -1: the path cannot be followed (dropped), -2: give up. */
static int path_step(struct path *p, uint32_t i)
{
	unsigned d = dest(i);

	if (OP(i) == OP_ADDIU && RT(i) == R_SP && RS(i) == R_SP) {
		if (IMM(i) < 0)
			return -1; /* an allocation: the next function's prologue */
		p->delta += IMM(i);
		return 0;
	}
	if (d == R_SP)
		return -2; /* sp moved some other way (from fp, by a register): not for this scan */
	if (OP(i) == OP_LW && RS(i) == R_SP && d) {
		p->written |= BIT(d);
		p->from_slot |= BIT(d);
		p->slot[d] = p->delta + IMM(i);
		return 0;
	}
	if (d) {
		p->written |= BIT(d);
		p->from_slot &= ~BIT(d);
		p->gp |= d == R_GP;
	}
	return 0;
}

static int scan_paths(struct code *c, const struct dwunw_regs *in, uint32_t pc, struct result *res)
{
	struct path todo[PATH_FORKS], p, done = { 0 };
	uint32_t seen[PATH_INSNS];
	unsigned ntodo = 0, nseen = 0, budget = PATH_INSNS;
	int found = 0;

	memset(&p, 0, sizeof(p));
	p.a = pc;
	todo[ntodo++] = p;
	while (ntodo) {
		p = todo[--ntodo];
		for (;;) {
			uint32_t i, s, a = p.a;
			unsigned k;
			int r;

			if (!budget--)
				return 0;
			for (k = 0; k < nseen && seen[k] != a; k++)
				;
			if (k < nseen)
				break; /* joined a path already followed */
			if (nseen < PATH_INSNS)
				seen[nseen++] = a;
			if (fetch(c, a, &i))
				break;
			if (OP(i) == OP_SPECIAL && FUNCT(i) == 0x0d)
				break; /* break: the path ends without a return */
			if (OP(i) == OP_REGIMM && RT(i) >= 8 && RT(i) <= 14) {
				p.a = a + 4; /* a conditional trap (teqi and the like): no delay slot */
				continue;
			}
			if (!is_branch(i)) {
				r = path_step(&p, i);
				if (r == -2)
					return 0;
				if (r == -1)
					break;
				p.a = a + 4;
				continue;
			}
			if (fetch(c, a + 4, &s) || is_branch(s))
				return 0;
			int call = dest(i) == R_RA, ret = i == INSN_JR_RA;
			int jr = OP(i) == OP_SPECIAL && FUNCT(i) == F_JR;
			int uncond = OP(i) == OP_J || (OP(i) == 4 && RS(i) == 0 && RT(i) == 0);
			/* the other way of a conditional branch (a likely one skips its delay slot) */
			if (!call && !jr && !uncond) {
				struct path q = p;
				int rq = is_likely(i) ? 0 : path_step(&q, s);
				if (rq == -2)
					return 0;
				q.a = a + 8;
				if (rq == 0) {
					if (ntodo == PATH_FORKS)
						return 0;
					todo[ntodo++] = q;
				}
			}
			r = path_step(&p, s);
			if (r == -2)
				return 0;
			if (r == -1)
				break;
			if (call) { /* the callee returns after the delay slot: sp and s0-s8 kept */
				p.written |= BIT(R_RA);
				p.from_slot &= ~BIT(R_RA);
				p.a = a + 8;
				continue;
			}
			if (jr && !ret) {
				/* a sibling call after the frame is gone, else a computed jump (a switch) */
				if (p.delta <= 0 || !(p.from_slot & BIT(R_RA)))
					break;
				ret = 1;
			}
			if (ret) {
				/* ra must be the caller's: restored from its slot */
				if (!(p.from_slot & BIT(R_RA)))
					break;
				uint32_t mask = SAVED_SET;
				if (found && (p.delta != done.delta || (p.written & mask) != (done.written & mask) ||
					      (p.from_slot & mask) != (done.from_slot & mask)))
					return 0;
				for (unsigned r2 = 0; found && r2 < 32; r2++)
					if ((p.from_slot & mask & BIT(r2)) && p.slot[r2] != done.slot[r2])
						return 0;
				if (!found)
					done = p;
				done.gp |= p.gp;
				found = 1;
				break;
			}
			p.a = target(a, i);
		}
	}
	if (!found || done.delta <= 0)
		return 0;
	/* a callee-saved register written on the way but not from a slot: not a return we understand */
	if ((done.written & ~done.from_slot) & SAVED_SET & ~BIT(R_RA))
		return 0;
	memset(res, 0, sizeof(*res));
	res->cfa = (uint32_t)in->regs[R_SP] + (uint32_t)done.delta;
	res->gp_changed = done.gp;
	for (unsigned r = 0; r < 32; r++)
		if ((done.from_slot & SAVED_SET) & BIT(r)) {
			res->from_mem |= BIT(r);
			res->addr[r] = (uint32_t)in->regs[R_SP] + (uint32_t)done.slot[r];
		}
	return 1;
}

/* Behind pc: the prologue from the function's start. */
static int scan_behind(struct code *c, const struct dwunw_regs *in, uint32_t start, uint32_t pc,
		       struct result *res)
{
	int32_t size = 0, fp_off = 0, slot[32];
	uint32_t saved = 0;
	int fp_set = 0, dyn = 0, gp_changed = 0;
	struct consts k = { 0 };

	if (pc - start > 4 * SCAN_MAX)
		return DWUNW_ERR_PROLOGUE; /* too far from the start to trust a prologue */
	for (uint32_t a = start; a < pc; a += 4) {
		uint32_t i;
		unsigned op, rs, rt;
		if (fetch(c, a, &i))
			return DWUNW_ERR_IO;
		op = OP(i);
		rs = RS(i);
		rt = RT(i);
		if (is_move(i, R_RA, R_ZERO) && !(saved & BIT(R_RA))) {
			/* `move ra, zero`: glibc's __start marks the outermost frame */
			memset(res, 0, sizeof(*res));
			res->outermost = 1;
			return 1;
		}
		if (op == OP_ADDIU && rt == R_SP && rs == R_SP) {
			if (IMM(i) < 0)
				size -= IMM(i);
		} else if (op == OP_SPECIAL && RD(i) == R_SP && rs == R_SP && (FUNCT(i) == F_ADDU || FUNCT(i) == F_SUBU)) {
			if (!(k.known & BIT(rt))) {
				dyn = 1; /* alloca: sp moved by a run-time amount */
			} else {
				int32_t v = (int32_t)k.val[rt];
				if (FUNCT(i) == F_SUBU)
					v = -v;
				if (v < 0)
					size -= v;
			}
		} else if (is_move(i, R_FP, R_SP) || (op == OP_ADDIU && rt == R_FP && rs == R_SP)) {
			if (!fp_set && !dyn) {
				fp_set = 1;
				fp_off = size - (op == OP_ADDIU ? IMM(i) : 0);
			}
		} else if (op == OP_SW && (rs == R_SP || (rs == R_FP && fp_set)) && (SAVED_SET & BIT(rt)) &&
			   !(saved & BIT(rt))) {
			if (rs == R_SP && dyn)
				continue; /* below an alloca: not a save we can place */
			saved |= BIT(rt);
			slot[rt] = IMM(i) - (rs == R_SP ? size : fp_off);
		} else if (dest(i) == R_GP) {
			gp_changed = 1; /* .cpload: gp is the callee's from here */
		} else if (dest(i) == R_SP && !is_move(i, R_SP, R_FP)) {
			/* sp loaded or computed (a VLA's scope restored): fine once fp holds the frame,
			 * else not a frame we can describe. (A move from fp is another path's epilogue.) */
			if (!fp_set)
				return DWUNW_ERR_PROLOGUE;
			dyn = 1;
		}
		track_const(&k, i);
	}
	memset(res, 0, sizeof(*res));
	res->gp_changed = gp_changed;
	if (fp_set) {
		if (!(in->valid & BIT(R_FP)))
			return DWUNW_ERR_PROLOGUE;
		res->cfa = (uint32_t)in->regs[R_FP] + (uint32_t)fp_off;
	} else {
		if (dyn)
			return DWUNW_ERR_PROLOGUE; /* sp moved by a run-time amount, no frame pointer */
		res->cfa = (uint32_t)in->regs[R_SP] + (uint32_t)size;
	}
	for (unsigned r = 0; r < 32; r++)
		if (saved & BIT(r)) {
			res->from_mem |= BIT(r);
			res->addr[r] = res->cfa + (uint32_t)slot[r];
		}
	return 1;
}

#define INSN_ADDU_GP_T9 0x0399e021u /* addu gp,gp,t9: the last of .cpload's three */

/*
 * No symbol: the function starts after the previous one's `jr ra` and its delay slot (and any
 * nop padding), or at its own `.cpload` (`lui gp` / `addiu gp,gp` / `addu gp,gp,t9`, what gcc
 * puts first in a PIC function: it also marks a start after a function that ends without a
 * `jr ra`, in a sibling call or a call that does not return), whichever comes first searching
 * backwards from pc, at most BACK_MAX instructions.
 */
static int find_start(struct code *c, uint32_t pc, uint32_t *start)
{
	for (unsigned n = 1; n <= BACK_MAX && pc >= 4 * n; n++) {
		uint32_t i, a = pc - 4 * n, j;
		if (fetch(c, a, &i))
			return DWUNW_ERR_PROLOGUE; /* the mapping's start, no return before pc */
		if (i == INSN_ADDU_GP_T9 && a >= 8 && !fetch(c, a - 8, &j) && OP(j) == OP_LUI && RT(j) == R_GP &&
		    !fetch(c, a - 4, &j) && OP(j) == OP_ADDIU && RT(j) == R_GP && RS(j) == R_GP) {
			*start = a - 8;
			return DWUNW_OK;
		}
		if (i != INSN_JR_RA)
			continue;
		a += 8;
		while (a < pc && fetch(c, a, &i) == DWUNW_OK && i == 0)
			a += 4;
		*start = a;
		return DWUNW_OK;
	}
	return DWUNW_ERR_PROLOGUE;
}

int dw_mips32_prologue_step(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t func_start, int exact,
			    int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	struct code c = { .read = read, .arg = arg };
	struct result res;
	uint32_t pc, start;
	int r;

	if (!in || !out || !read)
		return DWUNW_ERR_INVALID_ARG;
	if ((in->pc & 3) || in->pc > UINT32_MAX || !(in->valid & BIT(R_SP)))
		return 0;
	pc = (uint32_t)in->pc;
	r = scan_ahead(&c, in, pc, &res);
	if (r < 0)
		return r;
	if (r == 0) {
		/* a return address: the call and its delay slot ran; look for the start before them */
		uint32_t from = exact ? pc : pc - 8;
		if (func_start && func_start <= from && from - func_start <= 4 * SCAN_MAX) {
			start = (uint32_t)func_start;
		} else if ((r = scan_paths(&c, in, pc, &res)) == 1) {
			return finish(in, out, &res, read, arg);
		} else if ((r = find_start(&c, from + 4, &start)) < 0) {
			return r;
		}
		r = scan_behind(&c, in, start, pc, &res);
		if (r < 0)
			return r;
	}
	return finish(in, out, &res, read, arg);
}
