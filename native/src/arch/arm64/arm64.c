// SPDX-License-Identifier: GPL-2.0-only
/*
 * arm64 (AArch64, AAPCS64, Linux user space): DWARF register names, pointer authentication,
 * signal frames, linker stubs, leaf frames, frame pointers, ptrace registers.
 *
 * DWARF numbering (DWARF for the Arm 64-bit Architecture, "aadwarf64"): 0-30 x0-x30, 31 sp,
 * 33 ELR_mode, 46 VG, 47 FFR, 48-63 p0-p15, 64-95 v0-v31, 96-127 z0-z31. There is no DWARF
 * number for the pc: the unwinder tracks it on its own, and the CFI's return-address column is
 * x30 (the link register), which the CIEs of GCC and glibc use (one glibc CIE names x15).
 */
#include <elf.h>
#include <stddef.h>
#include <string.h>
#include "internal.h"
#include "bytes.h"
#include "arch/arm64/prologue.h"

#if defined(__aarch64__)
#include <asm/ptrace.h>
#include <asm/sigcontext.h>
#endif

#ifndef EM_AARCH64
#define EM_AARCH64 183
#endif

enum {
	A_X0 = 0,
	A_X8 = 8,
	A_X15 = 15,
	A_X16 = 16,
	A_X17 = 17,
	A_X19 = 19,
	A_X29 = 29, /* frame pointer */
	A_X30 = 30, /* link register: the return-address column */
	A_SP = 31,
	A_NREGS = 32,
};

#define BIT(n) (1ull << (n))
#define GPR_MASK (BIT(A_NREGS) - 1) /* x0-x30 and sp */
/* Preserved across calls (AAPCS64 6.1.1): x19-x29, and sp. x30 is not: a call overwrites it. */
#define CALLEE_SAVED (((BIT(30) - 1) & ~(BIT(A_X19) - 1)) | BIT(A_SP))

/* Names as binutils' readelf prints them (--debug-dump=frames-interp, binutils 2.40); NULL
 * where it prints rN. */
static const char *const names[128] = {
	"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7",
	"x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15",
	"x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23",
	"x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp",
	NULL, "elr", NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, "vg", "ffr",
	"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7",
	"p8", "p9", "p10", "p11", "p12", "p13", "p14", "p15",
	"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
	"v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15",
	"v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
	"v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31",
	"z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7",
	"z8", "z9", "z10", "z11", "z12", "z13", "z14", "z15",
	"z16", "z17", "z18", "z19", "z20", "z21", "z22", "z23",
	"z24", "z25", "z26", "z27", "z28", "z29", "z30", "z31",
};

static const char *arm64_reg_name(unsigned reg)
{
	return reg < DW_ARRAY_SIZE(names) ? names[reg] : NULL;
}

/*
 * Pointer authentication. PACIASP/PACIBSP put a signature into the bits of x30 that are not part
 * of the virtual address: bits 54..VA_BITS and, when tagged addresses are not enabled for
 * instructions (TCR_EL1.TBID0), bits 63..56 too. Bit 55 selects the translation table (0 for
 * user space, TTBR0) and is never part of the signature. XPACI/XPACLRI strip a signature by
 * copying bit 55 into every signature bit; for a user address that clears them.
 *
 * The signature's lowest bit depends on the kernel's VA_BITS, which a snapshot or core file does
 * not record (ptrace gives it as NT_ARM_PAC_MASK, gdb reads it from there). Linux maps user
 * space below 2^48 unless a program asks mmap for a higher hint (52-bit VA kernels included),
 * and executable code is always loaded below 2^48, so bits 63..48 of a user instruction address
 * are zero and everything from bit 48 up is cleared: exact for every 48-bit kernel, and for
 * 52-bit kernels for all code mapped the default way. Stripping from bit 52 instead would leave
 * bits 48-51 of the signature in place on the common 48-bit kernels.
 *
 * The bits are cleared whether or not the CFI says the address is signed: no user instruction
 * address has them set, so an address signed by code whose CFI does not say so (hand-written
 * assembly, a leaf without CFI after PACIASP) still yields its pc. A kernel address (bit 55 set)
 * gets them set, as XPACI does.
 */
#define PAC_MASK 0xffff000000000000ull /* bits 63..48 */

static uint64_t strip_pac(uint64_t ra)
{
	return (ra & BIT(55)) ? ra | PAC_MASK : ra & ~PAC_MASK;
}

static uint64_t arm64_ra_to_pc(uint64_t ra, int ra_signed)
{
	(void)ra_signed; /* see above: stripped either way */
	return strip_pac(ra);
}

static void frame_from(const struct dwunw_regs *in, struct dwunw_regs *out)
{
	dw_arch_frame_from(in, out, DWUNW_ARCH_ARM64);
}

/*
 * Signal trampolines. The kernel enters a handler with x30 pointing at the vDSO's
 * __kernel_rt_sigreturn (or at the sa_restorer the C library gave with SA_RESTORER; glibc gives
 * none on arm64), qemu-user at a trampoline page of its own (anonymous r-x memory). All three are
 *     d2801168    mov x8, #139      (__NR_rt_sigreturn)
 *     d4000001    svc #0
 * arm64 has no non-RT sigreturn.
 */
#define INSN_MOV_X8_139 0xd2801168u
#define INSN_SVC_0      0xd4000001u

/*
 * What the trampoline finds at its stack pointer: the kernel's struct rt_sigframe
 * (arch/arm64/kernel/signal.c; qemu's target_rt_sigframe is the same) starts there, the handler
 * having returned with the stack pointer it was entered with.
 *     struct rt_sigframe { struct siginfo info; struct ucontext uc; }
 * siginfo is 128 bytes. struct ucontext (asm/ucontext.h): uc_flags 8, uc_link 8, uc_stack 24
 * (ss_sp 8, ss_flags 4 + 4 padding, ss_size 8), uc_sigmask 8 and padding up to 1024 bits
 * (128 bytes in all), then uc_mcontext, a struct sigcontext aligned to 16: 8+8+24+128 = 168
 * rounds up to 176. struct sigcontext (asm/sigcontext.h): fault_address, regs[31], sp, pc,
 * pstate. So, from the trampoline's sp: regs[i] at 304 + 8 + 8i = 312 + 8i, sp at 560, pc at
 * 568 (measured under qemu 7.2, and the layout of the kernel's headers).
 */
#define SIGINFO_SIZE     128
#define UC_MCONTEXT_OFF  176
#define SIGCTX_OFF       (SIGINFO_SIZE + UC_MCONTEXT_OFF) /* 304 */
#define SC_REGS_OFF      8                                /* after fault_address */
#define SC_WORDS         34                               /* regs[31], sp, pc, pstate */

#if defined(__aarch64__)
/* On an arm64 host the kernel headers must agree with the layout above. */
_Static_assert(offsetof(struct sigcontext, regs) == SC_REGS_OFF, "sigcontext regs");
_Static_assert(offsetof(struct sigcontext, sp) == SC_REGS_OFF + 31 * 8, "sigcontext sp");
_Static_assert(offsetof(struct sigcontext, pc) == SC_REGS_OFF + 32 * 8, "sigcontext pc");
#endif

static int is_trampoline(uint64_t pc, int (*read)(void *, uint64_t, void *, size_t), void *arg)
{
	uint8_t code[8];

	if (pc & 3)
		return 0;
	/* Unreadable code is simply not a trampoline. */
	if (read(arg, pc, code, sizeof(code)) != DWUNW_OK)
		return 0;
	return dw_le32(code) == INSN_MOV_X8_139 && dw_le32(code + 4) == INSN_SVC_0;
}

static int arm64_sigframe(const struct dwunw_regs *in, struct dwunw_regs *out,
			  int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t sc[SC_WORDS * 8];
	uint64_t sp;
	int err;

	if (!in || !out || !read)
		return DWUNW_ERR_INVALID_ARG;
	if (!is_trampoline(in->pc, read, arg))
		return 0;
	if (!(in->valid & BIT(A_SP)))
		return DWUNW_ERR_INVALID_ARG; /* a trampoline, but its frame cannot be located */
	sp = in->regs[A_SP];
	if (sp > UINT64_MAX - SIGCTX_OFF - SC_REGS_OFF - sizeof(sc))
		return DWUNW_ERR_INVALID_ARG;
	err = read(arg, sp + SIGCTX_OFF + SC_REGS_OFF, sc, sizeof(sc));
	if (err)
		return err < 0 ? err : DWUNW_ERR_IO;

	frame_from(in, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < A_NREGS; i++) /* regs[0..30], then sp */
		out->regs[i] = dw_le64(sc + 8 * i);
	out->pc = dw_le64(sc + 8 * 32);
	out->valid = GPR_MASK;
	return 1;
}

/*
 * The caller's frame of a function that has not touched sp or x30 yet: pc = x30, the same sp.
 * The caller's own x30 is not known (it saved it before the call, the CFI will say where).
 */
static int from_link_register(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t sp_adjust)
{
	uint64_t ra, sp, keep;
	struct dwunw_regs tmp;

	if (!(in->valid & BIT(A_X30)) || !(in->valid & BIT(A_SP)))
		return 0;
	ra = strip_pac(in->regs[A_X30]);
	sp = in->regs[A_SP];
	if (ra == 0 || (ra & 3) || sp > UINT64_MAX - sp_adjust)
		return 0;
	tmp = *in;
	keep = in->valid & CALLEE_SAVED;
	frame_from(&tmp, out);
	memcpy(out->regs, tmp.regs, sizeof(out->regs));
	for (unsigned i = 0; i < DWUNW_MAX_REGS; i++)
		if (!(keep & BIT(i)))
			out->regs[i] = 0;
	out->regs[A_SP] = sp + sp_adjust;
	out->pc = ra;
	out->valid = keep | BIT(A_SP);
	return 1;
}

/*
 * Linker stubs (.plt, .iplt) have no FDE. A PLTn entry
 *     adrp x16, GOT page; ldr x17, [x16, #off]; add x16, x16, #off; br x17
 * touches neither sp nor x30: the caller's pc is x30. PLT0 (lazy binding) starts with
 *     a9bf7bf0    stp x16, x30, [sp, #-16]!
 * then the same four instructions: after that store the caller's sp is sp + 16 (x30 is still in
 * the register). A pc at most four instructions after that store is inside PLT0's tail.
 */
#define INSN_STP_X16_X30_PRE 0xa9bf7bf0u

static int arm64_stub_step(const struct dwunw_regs *in, struct dwunw_regs *out,
			   int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t code[4];
	uint64_t adjust = 0;

	if (!in || !out || !read || (in->pc & 3))
		return 0;
	/* the store, 1 to 4 instructions before the pc: it has run (read one by one: the PLT may
	 * start less than 16 bytes before the pc) */
	for (uint64_t k = 1; k <= 4 && in->pc >= 4 * k; k++)
		if (read(arg, in->pc - 4 * k, code, sizeof(code)) == DWUNW_OK && dw_le32(code) == INSN_STP_X16_X30_PRE) {
			adjust = 16;
			break;
		}
	return from_link_register(in, out, adjust);
}

/* Frame 0 without CFI (a leaf, or code before its prologue): the return address is in x30. */
static int arm64_lr_step(const struct dwunw_regs *in, struct dwunw_regs *out)
{
	if (!in || !out)
		return 0;
	return from_link_register(in, out, 0);
}

/*
 * The AAPCS64 frame record: x29 points at {caller's x29, return address}. The record sits at the
 * bottom of GCC's and LLVM's frames, so the caller's sp is at least x29 + 16; the true value (the
 * callee's frame size above the record) is not recorded anywhere, and x29 + 16 is used. Only for
 * code without any CFI (JIT code): a caller with CFI that bases its CFA on sp would then be
 * unwound from a low sp.
 */
static int arm64_fp_step(const struct dwunw_regs *in, struct dwunw_regs *out,
			 int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t w[16];
	uint64_t fp, ra, keep, saved[DWUNW_MAX_REGS];

	if (!in || !out || !read || !(in->valid & BIT(A_X29)))
		return 0;
	fp = in->regs[A_X29];
	if (fp == 0 || (fp & 15) != 0 || fp > UINT64_MAX - 16)
		return 0;
	/* The caller's frame is above (outward of) the callee's stack pointer. */
	if ((in->valid & BIT(A_SP)) && fp + 16 <= in->regs[A_SP])
		return 0;
	if (read(arg, fp, w, sizeof(w)) != DWUNW_OK)
		return 0;
	ra = strip_pac(dw_le64(w + 8));
	if (ra == 0 || (ra & 3))
		return 0;
	memcpy(saved, in->regs, sizeof(saved));
	keep = in->valid & CALLEE_SAVED & ~BIT(A_X29);
	frame_from(in, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < A_NREGS; i++)
		if (keep & BIT(i))
			out->regs[i] = saved[i];
	out->regs[A_X29] = dw_le64(w);
	out->regs[A_SP] = fp + 16;
	out->pc = ra;
	out->valid = keep | BIT(A_X29) | BIT(A_SP);
	return 1;
}

/*
 * NT_PRSTATUS on arm64 is struct user_pt_regs (asm/ptrace.h): regs[31], sp, pc, pstate, 34
 * words (272 bytes); also what qemu-user writes into its cores. A 32-bit (compat) task's set is
 * 18 words and refused.
 */
#define PR_WORDS 34

#if defined(__aarch64__)
_Static_assert(sizeof(struct user_pt_regs) == PR_WORDS * 8, "user_pt_regs size");
_Static_assert(offsetof(struct user_pt_regs, sp) == 31 * 8 && offsetof(struct user_pt_regs, pc) == 32 * 8,
	       "user_pt_regs layout");
#endif

static int arm64_regs_from_prstatus(const void *buf, size_t len, struct dwunw_regs *out)
{
	const uint8_t *p = buf;

	if (!buf || !out || len < PR_WORDS * 8)
		return DWUNW_ERR_INVALID_ARG;
	out->arch = DWUNW_ARCH_ARM64;
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < A_NREGS; i++)
		out->regs[i] = dw_le64(p + 8 * i);
	out->pc = dw_le64(p + 8 * 32);
	out->valid = GPR_MASK;
	return DWUNW_OK;
}

const struct dwunw_arch_ops dw_arch_arm64 = {
	.name = "arm64",
	.arch = DWUNW_ARCH_ARM64,
	.elf_machine = EM_AARCH64,
	.elf_class = ELFCLASS64,
	.addr_size = 8,
	.nregs = A_NREGS,
	.sp_reg = A_SP,
	.fp_reg = A_X29,
	.ra_reg = A_X30,
	.lr_reg = A_X30,
	.pc_reg = 0xffff,
	.callee_saved = CALLEE_SAVED,
	.reg_name = arm64_reg_name,
	.ra_to_pc = arm64_ra_to_pc,
	.sigframe = arm64_sigframe,
	.fp_step = arm64_fp_step,
	.lr_step = arm64_lr_step,
	.stub_step = arm64_stub_step,
	.regs_from_prstatus = arm64_regs_from_prstatus,
	.prologue_step = dw_arm64_prologue_step,
};
