// SPDX-License-Identifier: GPL-2.0-only
/*
 * mips32: little-endian o32 Linux user space. Signal frames, .MIPS.stubs, leaf frames, ptrace
 * registers. Big-endian files are refused by the ELF layer (ELFDATA2LSB only); this backend
 * reads every word little-endian.
 *
 * DWARF numbering (the MIPS ABI, as GCC emits it): 0-31 are the GPRs $0-$31 (zero, at, v0-v1,
 * a0-a3, t0-t7, s0-s7, t8-t9, k0-k1, gp, sp, fp/s8, ra); 32-63 the FPRs. The return-address
 * column is 31 ($ra, the link register); there is no DWARF number for the pc. Every CIE starts
 * with def_cfa $sp+0 (code_align 1, data_align -4).
 */
#include <elf.h>
#include <stddef.h>
#include <string.h>
#include "internal.h"
#include "bytes.h"
#include "arch/mips32/prologue.h"

enum {
	M_ZERO = 0,
	M_T7 = 15,  /* a .MIPS.stubs entry copies the caller's return address here */
	M_S0 = 16,
	M_S7 = 23,
	M_T9 = 25,
	M_GP = 28,
	M_SP = 29,
	M_FP = 30,
	M_RA = 31,
	M_NREGS = 32,
};

#define BIT(n) (1ull << (n))
#define GPR_MASK (BIT(M_NREGS) - 1)
/* Preserved across calls (o32: s0-s7, sp, fp; gp as the caller sees it, since PIC code reloads
 * its own from the .cprestore slot after every call and the CFI never describes it). */
#define CALLEE_SAVED (((BIT(M_S7 + 1) - 1) & ~(BIT(M_S0) - 1)) | BIT(M_GP) | BIT(M_SP) | BIT(M_FP))

/* readelf (binutils 2.40) has no MIPS register names: it prints rN for every column. */
static const char *mips32_reg_name(unsigned reg)
{
	(void)reg;
	return NULL;
}

/* Addresses are 32 bits; MIPS has no pointer authentication. */
static uint64_t mips32_ra_to_pc(uint64_t ra, int ra_signed)
{
	(void)ra_signed;
	return (uint32_t)ra;
}

static void frame_from(const struct dwunw_regs *in, struct dwunw_regs *out)
{
	dw_arch_frame_from(in, out, DWUNW_ARCH_MIPS32);
}

/*
 * Signal trampolines. The kernel returns from a handler through __vdso_sigreturn /
 * __vdso_rt_sigreturn in the vDSO (older kernels: code it wrote on the stack, or in the
 * sigframe's sf_code), qemu-user through a trampoline page of its own (anonymous r-x memory,
 * sigreturn at +0, rt_sigreturn at +8). The code is the same everywhere:
 *     24021017    li v0, 4119       (__NR_sigreturn: 4000 + 119)
 *     0000000c    syscall
 *     24021061    li v0, 4193       (__NR_rt_sigreturn: 4000 + 193)
 *     0000000c    syscall
 */
#define INSN_LI_V0_SIGRETURN    0x24021017u
#define INSN_LI_V0_RT_SIGRETURN 0x24021061u
#define INSN_SYSCALL            0x0000000cu

/*
 * The frames, from the trampoline's stack pointer (the handler returns with the sp it was
 * entered with, which is the frame's address). arch/mips/kernel/signal.c (qemu's
 * linux-user/mips/signal.c has the same layout):
 *     struct sigframe    { u32 sf_ass[4]; u32 sf_pad[2]; struct sigcontext sf_sc; sigset_t sf_mask; }
 *     struct rt_sigframe { u32 rs_ass[4]; u32 rs_pad[2]; struct siginfo rs_info; struct ucontext rs_uc; }
 * o32 struct sigcontext (asm/sigcontext.h): sc_regmask 4, sc_status 4, sc_pc 8, sc_regs[32] of
 * 8 bytes each (the 32-bit value in the low word, first in little-endian), then FP state.
 * siginfo is 128 bytes; o32 struct ucontext: uc_flags 4, uc_link 4, uc_stack 12 (ss_sp,
 * ss_size, ss_flags), then uc_mcontext (a struct sigcontext, 8-byte aligned: offset 24).
 *     sigframe:    sigcontext at 24:  sc_pc at 32,  sc_regs[i] at 40 + 8i
 *     rt_sigframe: sigcontext at 24 + 128 + 24 = 176: sc_pc at 184, sc_regs[i] at 192 + 8i
 * (both measured under qemu 7.2).
 */
#define SF_SIGCTX_OFF    24
#define RT_SIGCTX_OFF    (24 + 128 + 24)
#define SC_PC_OFF        8
#define SC_REGS_OFF      16
#define SC_SPAN          (SC_REGS_OFF - SC_PC_OFF + 32 * 8) /* sc_pc up to the end of sc_regs */

static int mips32_sigframe(const struct dwunw_regs *in, struct dwunw_regs *out,
			   int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t code[8], sc[SC_SPAN];
	uint64_t sp, at;
	unsigned ctx_off;
	int err;

	if (!in || !out || !read)
		return DWUNW_ERR_INVALID_ARG;
	if ((in->pc & 3) || in->pc > UINT32_MAX - 8)
		return 0;
	/* Unreadable code is simply not a trampoline. */
	if (read(arg, in->pc, code, sizeof(code)) != DWUNW_OK || dw_le32(code + 4) != INSN_SYSCALL)
		return 0;
	if (dw_le32(code) == INSN_LI_V0_SIGRETURN)
		ctx_off = SF_SIGCTX_OFF;
	else if (dw_le32(code) == INSN_LI_V0_RT_SIGRETURN)
		ctx_off = RT_SIGCTX_OFF;
	else
		return 0;
	if (!(in->valid & BIT(M_SP)))
		return DWUNW_ERR_INVALID_ARG; /* a trampoline, but its frame cannot be located */
	sp = (uint32_t)in->regs[M_SP];
	at = sp + ctx_off + SC_PC_OFF;
	if (at + sizeof(sc) > (uint64_t)UINT32_MAX + 1)
		return DWUNW_ERR_INVALID_ARG;
	err = read(arg, at, sc, sizeof(sc));
	if (err)
		return err < 0 ? err : DWUNW_ERR_IO;

	frame_from(in, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < M_NREGS; i++)
		out->regs[i] = dw_le32(sc + (SC_REGS_OFF - SC_PC_OFF) + 8 * i);
	out->regs[M_ZERO] = 0;
	out->pc = dw_le32(sc);
	out->valid = GPR_MASK;
	return 1;
}

/* The caller's frame with pc = `ra` and the same sp (nothing pushed yet). */
static int caller_same_sp(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t ra)
{
	uint64_t keep;
	struct dwunw_regs tmp;

	ra = (uint32_t)ra;
	if (!(in->valid & BIT(M_SP)) || ra == 0 || (ra & 3))
		return 0;
	tmp = *in;
	keep = in->valid & CALLEE_SAVED;
	frame_from(&tmp, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < M_NREGS; i++)
		if (keep & BIT(i))
			out->regs[i] = tmp.regs[i];
	out->pc = ra;
	out->valid = keep | BIT(M_SP);
	return 1;
}

/*
 * .MIPS.stubs (lazy-binding stubs of o32 PIC/PIE code) have no FDE. Each entry is
 *     8f99xxxx    lw   t9, -0x7ff0(gp)     (the GOT slot of the lazy resolver)
 *     03e07825    move t7, ra               (older binutils: 03e07821, addu t7, ra, zero)
 *     [3c18xxxx   lui  t8, hi(index)]       (only for large symbol indices)
 *     0320f809    jalr t9                   (ra = the stub's own return address)
 *     2418xxxx    li   t8, index            (delay slot; or ori t8, t8/zero, index)
 * Up to and including the move the caller's return address is in ra; after it, in t7 (and ra is
 * overwritten by the jalr). sp is not touched.
 */
#define INSN_MOVE_T7_RA      0x03e07825u
#define INSN_ADDU_T7_RA_ZERO 0x03e07821u
#define INSN_LW_T9_GP_MASK   0xffff0000u
#define INSN_LW_T9_GP        0x8f990000u

static int mips32_stub_step(const struct dwunw_regs *in, struct dwunw_regs *out,
			    int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t code[4];
	uint32_t insn;
	unsigned reg;

	if (!in || !out || !read || (in->pc & 3))
		return 0;
	if (read(arg, in->pc, code, sizeof(code)) != DWUNW_OK)
		return 0;
	insn = dw_le32(code);
	if (insn == INSN_MOVE_T7_RA || insn == INSN_ADDU_T7_RA_ZERO || (insn & INSN_LW_T9_GP_MASK) == INSN_LW_T9_GP)
		reg = M_RA; /* the move has not run yet */
	else
		reg = M_T7;
	if (!(in->valid & BIT(reg)))
		return 0;
	return caller_same_sp(in, out, in->regs[reg]);
}

/* Frame 0 without CFI (a leaf, or code before its prologue): the return address is in $ra. */
static int mips32_lr_step(const struct dwunw_regs *in, struct dwunw_regs *out)
{
	if (!in || !out || !(in->valid & BIT(M_RA)))
		return 0;
	return caller_same_sp(in, out, in->regs[M_RA]);
}

/*
 * NT_PRSTATUS of an o32 task is the o32 elf_gregset_t (asm/reg.h, MIPS32_EF_*): 45 32-bit words,
 * 6 unused ones first, then $0-$31 at words 6-37, lo, hi, cp0 epc (the pc, word 40), badvaddr,
 * status, cause, and one unused: 180 bytes. A 64-bit kernel uses the same layout for o32 tasks
 * (ptrace and cores); qemu-user writes it into its cores. A 64-bit set (n32, n64: 45 words of 8
 * bytes) is refused.
 */
#define PR_R0    6
#define PR_EPC   40
#define PR_WORDS 45

static int mips32_regs_from_prstatus(const void *buf, size_t len, struct dwunw_regs *out)
{
	const uint8_t *p = buf;

	if (!buf || !out || len < PR_WORDS * 4)
		return DWUNW_ERR_INVALID_ARG;
	if (len >= PR_WORDS * 8)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	out->arch = DWUNW_ARCH_MIPS32;
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < M_NREGS; i++)
		out->regs[i] = dw_le32(p + 4 * (PR_R0 + i));
	out->regs[M_ZERO] = 0;
	out->pc = dw_le32(p + 4 * PR_EPC);
	out->valid = GPR_MASK;
	return DWUNW_OK;
}

const struct dwunw_arch_ops dw_arch_mips32 = {
	.name = "mips32",
	.arch = DWUNW_ARCH_MIPS32,
	.elf_machine = EM_MIPS,
	.elf_class = ELFCLASS32,
	.addr_size = 4,
	.nregs = M_NREGS,
	.sp_reg = M_SP,
	.fp_reg = M_FP,
	.ra_reg = M_RA,
	.lr_reg = M_RA,
	.pc_reg = 0xffff,
	.callee_saved = CALLEE_SAVED,
	.reg_name = mips32_reg_name,
	.ra_to_pc = mips32_ra_to_pc,
	.sigframe = mips32_sigframe,
	.fp_step = NULL,
	.lr_step = mips32_lr_step,
	.stub_step = mips32_stub_step,
	.regs_from_prstatus = mips32_regs_from_prstatus,
	.prologue_step = dw_mips32_prologue_step,
};
