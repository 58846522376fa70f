// SPDX-License-Identifier: GPL-2.0-only
/*
 * arm64: the caller of a frame whose code has no CFI, from the code itself. The same two scans
 * as mips32 (see arch/mips32/prologue.c):
 *   ahead   from pc to the first `ret` (or a `b` after a restore: a sibling call) with no other
 *           branch between: pc is in an epilogue; the sp increments (`add sp,sp,#N`, `ldp
 *           x29,x30,[sp],#N`, `mov sp,x29`) and the reloads (`ldp`/`ldr` from [sp]) not yet run
 *           say where the frame and the saved registers are.
 *   behind  otherwise, from the function's start to pc: `stp a,b,[sp,#-N]!`, `str x,[sp,#-N]!`,
 *           `sub sp,sp,#N[,lsl 12]`, `sub sp,sp,xK` with xK from movz/movk, `stp`/`str` of
 *           x19-x30 at [sp,#off] (or [x29,#off]), `mov x29,sp` / `add x29,sp,#K`;
 *           paciasp/pacibsp/bti are skipped (the saved x30 is signed: stripped like any other).
 * alloca and other run-time sp changes need x29; anything else that writes sp, a call made
 * without x30 saved, or no function start: DWUNW_ERR_PROLOGUE.
 */
#include <string.h>
#include "internal.h"
#include "arch/arm64/prologue.h"
#include "arch/code_reader.h"

enum { X19 = 19, X29 = 29, X30 = 30, SP = 31 };

#define BIT(n) (1ull << (n))
#define SAVED_SET (((BIT(31) - 1) & ~(BIT(X19) - 1))) /* x19-x30 */
#define SCAN_MAX  4096
#define BACK_MAX  4096
#define AHEAD_MAX 64

#define RD(i) ((i) & 31)
#define RN(i) (((i) >> 5) & 31)
#define RT2(i) (((i) >> 10) & 31)

/* The instructions the scans know, decoded. */
enum kind {
	K_OTHER,
	K_ADD_IMM,   /* add/sub xd, xn, #imm (val signed: sub is negative) */
	K_SUB_REG,   /* sub/add xd, xn, xm (extended register, 64-bit): m in `rm`, sign in val */
	K_PAIR,      /* ldp/stp of x registers: rt, rt2, rn, val = offset; idx 1 post, 2 offset, 3 pre */
	K_ONE,       /* ldr/str of an x register, same fields */
	K_MOVZ,      /* movz xd, #imm, lsl: val */
	K_MOVK,      /* movk xd, #imm16 at shift `rm` */
	K_RET,       /* ret / retaa / retab */
	K_B,         /* b (unconditional) */
	K_BRANCH,    /* any other branch, call or exception */
	K_WRITES_SP, /* another instruction that writes sp (logical immediate with rd = 31) */
};

struct insn {
	enum kind k;
	int load;
	unsigned rd, rn, rt, rt2, rm, idx;
	int64_t val;
};

static void decode(uint32_t i, struct insn *d)
{
	memset(d, 0, sizeof(*d));
	d->rd = RD(i);
	d->rn = RN(i);
	if ((i & 0x9f000000u) == 0x91000000u) { /* add/sub (immediate), 64-bit */
		int64_t v = (int64_t)((i >> 10) & 0xfff) << ((i >> 22) & 1 ? 12 : 0);
		if (i & (1u << 29))
			return; /* adds/subs: flags, rd is xzr when 31 */
		d->k = K_ADD_IMM;
		d->val = (i & (1u << 30)) ? -v : v;
	} else if ((i & 0x9fe00000u) == 0x8b200000u && !(i & (1u << 29))) {
		/* add/sub (extended register), 64-bit: sp forms */
		d->k = K_SUB_REG;
		d->rm = (i >> 16) & 31;
		d->val = (i & (1u << 30)) ? -1 : 1;
		if (((i >> 10) & 7) != 0 || ((i >> 13) & 7) != 3)
			d->k = RD(i) == 31 ? K_WRITES_SP : K_OTHER; /* a narrower extension: not a frame adjustment */
	} else if ((i & 0x3a000000u) == 0x28000000u && (i >> 30) == 2 && !(i & (1u << 26))) {
		/* ldp/stp of x registers; idx 1 post, 2 offset, 3 pre (0: no-allocate pair) */
		int64_t imm7 = (int64_t)((i >> 15) & 0x7f);
		if (imm7 & 0x40)
			imm7 -= 0x80;
		d->k = K_PAIR;
		d->load = (i >> 22) & 1;
		d->idx = (i >> 23) & 3;
		d->rt = i & 31;
		d->rt2 = RT2(i);
		d->val = imm7 * 8;
	} else if ((i & 0xffc00000u) == 0xf9000000u || (i & 0xffc00000u) == 0xf9400000u) {
		d->k = K_ONE; /* str/ldr x, [xn, #uimm12 * 8] */
		d->load = (i >> 22) & 1;
		d->idx = 2;
		d->rt = i & 31;
		d->val = (int64_t)((i >> 10) & 0xfff) * 8;
	} else if ((i & 0xffe00400u) == 0xf8000400u || (i & 0xffe00400u) == 0xf8400400u) {
		int64_t imm9 = (int64_t)((i >> 12) & 0x1ff);
		if (imm9 & 0x100)
			imm9 -= 0x200;
		d->k = K_ONE; /* str/ldr x, [xn, #simm9]! or [xn], #simm9 */
		d->load = (i >> 22) & 1;
		d->idx = (i & 0x800) ? 3 : 1;
		d->rt = i & 31;
		d->val = imm9;
	} else if ((i & 0xff800000u) == 0xd2800000u) {
		d->k = K_MOVZ;
		d->val = (int64_t)((uint64_t)((i >> 5) & 0xffff) << (16 * ((i >> 21) & 3)));
	} else if ((i & 0xff800000u) == 0xf2800000u) {
		d->k = K_MOVK;
		d->val = (i >> 5) & 0xffff;
		d->rm = 16 * ((i >> 21) & 3);
	} else if ((i & 0xfffffc1fu) == 0xd65f0000u || i == 0xd65f0bffu || i == 0xd65f0fffu) {
		d->k = K_RET;
	} else if ((i & 0xfc000000u) == 0x14000000u) {
		d->k = K_B;
	} else if ((i & 0x7c000000u) == 0x14000000u || (i & 0xff000010u) == 0x54000000u ||
		   (i & 0x7e000000u) == 0x34000000u || (i & 0x7e000000u) == 0x36000000u ||
		   (i & 0xfe000000u) == 0xd6000000u || (i & 0xff000000u) == 0xd4000000u) {
		d->k = K_BRANCH; /* bl, b.cond, cbz/cbnz, tbz/tbnz, br/blr/ret forms, svc/brk */
	} else if ((i & 0x1f800000u) == 0x12000000u && ((i >> 29) & 3) != 3 && RD(i) == 31) {
		d->k = K_WRITES_SP; /* and/orr/eor sp, xn, #imm */
	}
}

/* The register an instruction writes, for the constant tracker (31: none or sp). */
static unsigned dest_of(uint32_t i, const struct insn *d)
{
	if (d->k == K_PAIR || d->k == K_ONE)
		return d->load ? d->rt : 31;
	if ((i & 0x1c000000u) == 0x10000000u || (i & 0x0e000000u) == 0x0a000000u)
		return RD(i); /* data processing: immediate, register */
	return 31;
}

struct consts {
	uint32_t known;
	uint64_t val[32];
};

static void track_const(struct consts *k, uint32_t i, const struct insn *d)
{
	unsigned r = dest_of(i, d);

	if (d->k == K_MOVZ) {
		k->val[d->rd] = (uint64_t)d->val;
		k->known |= 1u << d->rd;
	} else if (d->k == K_MOVK) {
		if (k->known & (1u << d->rd))
			k->val[d->rd] = (k->val[d->rd] & ~(0xffffull << d->rm)) | ((uint64_t)d->val << d->rm);
	} else if (r < 31) {
		k->known &= ~(1u << r);
	}
	if (d->k == K_PAIR && d->load && d->rt2 < 31)
		k->known &= ~(1u << d->rt2);
}

struct result {
	uint64_t cfa;
	uint64_t from_mem;
	uint64_t addr[32];
};

static int finish(const struct dwunw_regs *in, struct dwunw_regs *out, const struct result *res,
		  read_fn read, void *arg)
{
	uint64_t keep = in->valid & (SAVED_SET & ~BIT(X30)), ra;

	if (res->cfa < in->regs[SP])
		return DWUNW_ERR_PROLOGUE;
	dw_arch_frame_from(in, out, DWUNW_ARCH_ARM64);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned r = 0; r < 31; r++)
		if (keep & BIT(r))
			out->regs[r] = in->regs[r];
	for (unsigned r = 0; r < 31; r++) {
		uint8_t b[8];
		if (!(res->from_mem & BIT(r)))
			continue;
		if (read(arg, res->addr[r], b, 8) != DWUNW_OK)
			return DWUNW_ERR_IO;
		memcpy(&out->regs[r], b, 8); /* little-endian host and target */
		keep |= BIT(r);
	}
	if (res->from_mem & BIT(X30))
		ra = out->regs[X30];
	else if (in->valid & BIT(X30))
		ra = in->regs[X30];
	else
		return DWUNW_ERR_PROLOGUE; /* x30 neither saved nor known */
	ra = dw_arch_arm64.ra_to_pc(ra, 1); /* signed by paciasp or not: the same strip */
	if (ra & 3)
		return DWUNW_ERR_PROLOGUE;
	keep &= ~BIT(X30);
	out->regs[SP] = res->cfa;
	out->pc = ra;
	out->valid = keep | BIT(SP);
	return 1;
}

/* Ahead of pc: an epilogue? As in mips32: 1 and `res`, or 0 (the body decides). */
static int scan_ahead(struct code *c, const struct dwunw_regs *in, uint64_t pc, struct result *res)
{
	unsigned base = SP, pbase[32];
	int64_t delta = 0, poff[32];
	int restoring = 0;
	uint64_t pending = 0;
	struct consts k = { 0 };

	for (unsigned n = 0; n < AHEAD_MAX; n++) {
		uint32_t i;
		struct insn d;
		if (fetch(c, pc + 4 * n, &i))
			return 0;
		decode(i, &d);
		if (d.k == K_RET || (d.k == K_B && restoring)) {
			if (!(in->valid & BIT(base)))
				return 0;
			memset(res, 0, sizeof(*res));
			res->cfa = in->regs[base] + (uint64_t)delta;
			for (unsigned r = 0; r < 31; r++) {
				if (!(pending & BIT(r)))
					continue;
				if (!(in->valid & BIT(pbase[r])))
					return 0;
				res->addr[r] = in->regs[pbase[r]] + (uint64_t)poff[r];
				res->from_mem |= BIT(r);
			}
			return 1;
		}
		if (d.k == K_BRANCH || d.k == K_B || d.k == K_WRITES_SP)
			return 0;
		if (d.k == K_ADD_IMM && d.rd == SP) {
			if (d.rn == X29) {
				if (pending & BIT(X29))
					return 0;
				base = X29;
				delta = 0;
			} else if (d.rn != SP || d.val < 0) {
				return 0; /* an allocation, or sp from elsewhere: not an epilogue */
			}
			delta += d.val;
			restoring = 1;
		} else if (d.k == K_SUB_REG && d.rd == SP) {
			return 0;
		} else if ((d.k == K_PAIR || d.k == K_ONE) && d.rn == SP) {
			int64_t at = delta + (d.idx == 1 ? 0 : d.val);
			if (d.load) {
				unsigned regs[2] = { d.rt, d.k == K_PAIR ? d.rt2 : 32 };
				for (unsigned j = 0; j < 2; j++)
					if (regs[j] < 31 && (SAVED_SET & BIT(regs[j])) && !(pending & BIT(regs[j]))) {
						pending |= BIT(regs[j]);
						pbase[regs[j]] = base;
						poff[regs[j]] = at + 8 * j;
					}
				restoring = 1;
			}
			if (d.idx == 1 || d.idx == 3) {
				if (d.val < 0)
					return 0; /* a push: a prologue */
				delta += d.val;
			}
		} else if (dest_of(i, &d) == X29 && restoring) {
			return 0;
		}
		track_const(&k, i, &d);
	}
	return 0;
}

/* Behind pc: the prologue from the function's start. */
static int scan_behind(struct code *c, const struct dwunw_regs *in, uint64_t start, uint64_t pc, struct result *res)
{
	int64_t size = 0, fp_off = 0, slot[32];
	uint64_t saved = 0;
	int fp_set = 0, dyn = 0;
	struct consts k = { 0 };

	if (pc - start > 4 * SCAN_MAX)
		return DWUNW_ERR_PROLOGUE;
	for (uint64_t a = start; a < pc; a += 4) {
		uint32_t i;
		struct insn d;
		if (fetch(c, a, &i))
			return DWUNW_ERR_IO;
		decode(i, &d);
		if (d.k == K_ADD_IMM && d.rd == SP && d.rn == SP) {
			if (d.val < 0)
				size -= d.val;
		} else if (d.k == K_ADD_IMM && d.rd == X29 && d.rn == SP) {
			if (!fp_set && !dyn) {
				fp_set = 1;
				fp_off = size - d.val;
			}
		} else if (d.k == K_SUB_REG && d.rd == SP && d.rn == SP) {
			if (!(k.known & (1u << d.rm)))
				dyn = 1;
			else if (d.val < 0)
				size += (int64_t)k.val[d.rm];
		} else if ((d.k == K_PAIR || d.k == K_ONE) && (d.rn == SP || (d.rn == X29 && fp_set))) {
			int64_t base_off = d.rn == SP ? size : fp_off;
			if (d.rn == SP && (d.idx == 3 || d.idx == 1)) {
				if (d.val < 0 && d.idx == 3) {
					size -= d.val; /* pre-index push */
					base_off = size;
				} else if (d.val < 0) {
					return DWUNW_ERR_PROLOGUE;
				}
				/* a positive writeback is another path's epilogue */
			}
			if (!d.load && !(d.rn == SP && dyn)) {
				/* offset form: at base + val; pre-index: at the new sp; post-index: at the old */
				int64_t at = d.idx == 2 ? d.val : 0;
				unsigned regs[2] = { d.rt, d.k == K_PAIR ? d.rt2 : 32 };
				for (unsigned j = 0; j < 2; j++)
					if (regs[j] < 31 && (SAVED_SET & BIT(regs[j])) && !(saved & BIT(regs[j]))) {
						saved |= BIT(regs[j]);
						slot[regs[j]] = at + 8 * j - base_off;
					}
			}
		} else if (d.k == K_WRITES_SP || (d.k == K_ADD_IMM && d.rd == SP && d.rn != X29) ||
			   (d.k == K_SUB_REG && d.rd == SP)) {
			if (!fp_set)
				return DWUNW_ERR_PROLOGUE;
			dyn = 1;
		}
		track_const(&k, i, &d);
	}
	memset(res, 0, sizeof(*res));
	if (fp_set) {
		if (!(in->valid & BIT(X29)))
			return DWUNW_ERR_PROLOGUE;
		res->cfa = in->regs[X29] + (uint64_t)fp_off;
	} else {
		if (dyn)
			return DWUNW_ERR_PROLOGUE;
		if (!(in->valid & BIT(SP)))
			return DWUNW_ERR_PROLOGUE;
		res->cfa = in->regs[SP] + (uint64_t)size;
	}
	for (unsigned r = 0; r < 31; r++)
		if (saved & BIT(r)) {
			res->from_mem |= BIT(r);
			res->addr[r] = res->cfa + (uint64_t)slot[r];
		}
	return 1;
}

/* No symbol: the function starts after the previous one's `ret` (and any padding). */
static int find_start(struct code *c, uint64_t pc, uint64_t *start)
{
	for (unsigned n = 1; n <= BACK_MAX && pc >= 4ull * n; n++) {
		uint32_t i;
		struct insn d;
		uint64_t a = pc - 4ull * n;
		if (fetch(c, a, &i))
			return DWUNW_ERR_PROLOGUE;
		decode(i, &d);
		if (d.k != K_RET)
			continue;
		a += 4;
		/* nop, udf #0 padding */
		while (a < pc && fetch(c, a, &i) == DWUNW_OK && (i == 0xd503201fu || i == 0))
			a += 4;
		*start = a;
		return DWUNW_OK;
	}
	return DWUNW_ERR_PROLOGUE;
}

int dw_arm64_prologue_step(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t func_start, int exact,
			   int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	struct code c = { .read = read, .arg = arg };
	struct result res;
	uint64_t pc, start;
	int r;

	if (!in || !out || !read)
		return DWUNW_ERR_INVALID_ARG;
	if ((in->pc & 3) || !(in->valid & BIT(SP)))
		return 0;
	pc = in->pc;
	r = scan_ahead(&c, in, pc, &res);
	if (r == 0) {
		uint64_t from = exact ? pc : pc - 4; /* a return address: the call ran */
		if (func_start && func_start <= from && from - func_start <= 4 * SCAN_MAX)
			start = func_start;
		else if ((r = find_start(&c, from + 4, &start)) < 0)
			return r;
		r = scan_behind(&c, in, start, pc, &res);
		if (r < 0)
			return r;
	}
	return finish(in, out, &res, read, arg);
}
