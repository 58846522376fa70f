// SPDX-License-Identifier: GPL-2.0-only
/* x86_64 (System V): DWARF register names, signal frames, frame-pointer steps, ptrace registers. */
#include <elf.h>
#include <stddef.h>
#include <string.h>
#include "internal.h"
#include "bytes.h"

#if defined(__x86_64__)
#include <sys/ucontext.h>
#include <sys/user.h>
#endif

static const char *const names[] = {
	"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
	"xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
	"xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
	"st0", "st1", "st2", "st3", "st4", "st5", "st6", "st7",
	"mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7",
	"rflags", "es", "cs", "ss", "ds", "fs", "gs", NULL, NULL,
	"fs.base", "gs.base", NULL, NULL, "tr", "ldtr", "mxcsr", "fcw", "fsw",
	"xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
	"xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7",
};

/* DWARF register numbers (System V AMD64 psABI, figure 3.36). */
enum {
	X_RAX = 0, X_RDX = 1, X_RCX = 2, X_RBX = 3, X_RSI = 4, X_RDI = 5, X_RBP = 6, X_RSP = 7,
	X_R8 = 8, X_R9, X_R10, X_R11, X_R12, X_R13, X_R14, X_R15,
	X_RIP = 16, /* the return-address column */
};

#define BIT(n) (1ull << (n))
#define GPR_MASK (BIT(17) - 1) /* rax .. r15 and the rip column */
/* Preserved across calls (psABI 3.2.1); rsp is the CFA, restored by the unwinder itself. */
#define CALLEE_SAVED (BIT(X_RBX) | BIT(X_RBP) | BIT(X_R12) | BIT(X_R13) | BIT(X_R14) | BIT(X_R15))

static const char *x86_64_reg_name(unsigned reg)
{
	return reg < DW_ARRAY_SIZE(names) ? names[reg] : NULL;
}

static void frame_from(const struct dwunw_regs *in, struct dwunw_regs *out)
{
	dw_arch_frame_from(in, out, DWUNW_ARCH_X86_64);
}

/*
 * Signal trampolines. The kernel's x86_64 rt_sigframe has no code of its own: sa_restorer points
 * into the C library, whose restorer (glibc and musl __restore_rt, Go's sigreturn) is
 *     48 c7 c0 0f 00 00 00    mov $15, %rax      (__NR_rt_sigreturn)
 *     0f 05                   syscall
 * Some hand-written restorers use the shorter 32-bit move, accepted as well:
 *     b8 0f 00 00 00 0f 05    mov $15, %eax; syscall
 */
static const uint8_t restore_rt_long[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
static const uint8_t restore_rt_short[7] = { 0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };

/*
 * Layout of what the restorer finds at its stack pointer. The kernel pushes
 *     struct rt_sigframe { char *pretcode; struct ucontext uc; siginfo_t info; ... }
 * and enters the handler with rsp = &pretcode; the handler's `ret` pops pretcode, so at the
 * restorer's first instruction (which is also the pc the handler's CFI yields) rsp = &uc.
 * struct ucontext: uc_flags (8), uc_link (8), uc_stack (ss_sp 8, ss_flags 4 + 4 padding,
 * ss_size 8), then uc_mcontext whose first member is gregs[], in the kernel's struct sigcontext
 * order: r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip (then eflags, ...).
 */
#define UC_GREGS_OFF 40
enum {
	G_R8, G_R9, G_R10, G_R11, G_R12, G_R13, G_R14, G_R15,
	G_RDI, G_RSI, G_RBP, G_RBX, G_RDX, G_RAX, G_RCX, G_RSP, G_RIP,
	G_COUNT
};

/* DWARF number of each gregs[] slot. */
static const uint8_t greg_to_dwarf[G_COUNT] = {
	[G_R8] = X_R8, [G_R9] = X_R9, [G_R10] = X_R10, [G_R11] = X_R11,
	[G_R12] = X_R12, [G_R13] = X_R13, [G_R14] = X_R14, [G_R15] = X_R15,
	[G_RDI] = X_RDI, [G_RSI] = X_RSI, [G_RBP] = X_RBP, [G_RBX] = X_RBX,
	[G_RDX] = X_RDX, [G_RAX] = X_RAX, [G_RCX] = X_RCX, [G_RSP] = X_RSP,
	[G_RIP] = X_RIP,
};

#if defined(__x86_64__)
/* On an x86_64 host the C library's own definitions must agree with the layout above. */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == UC_GREGS_OFF, "ucontext gregs offset");
#define SAME_SLOT(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME_SLOT(REG_R8, G_R8) && SAME_SLOT(REG_R15, G_R15) && SAME_SLOT(REG_RDI, G_RDI) &&
	       SAME_SLOT(REG_RSI, G_RSI) && SAME_SLOT(REG_RBP, G_RBP) && SAME_SLOT(REG_RBX, G_RBX) &&
	       SAME_SLOT(REG_RDX, G_RDX) && SAME_SLOT(REG_RAX, G_RAX) && SAME_SLOT(REG_RCX, G_RCX) &&
	       SAME_SLOT(REG_RSP, G_RSP) && SAME_SLOT(REG_RIP, G_RIP), "gregs order");
#undef SAME_SLOT
#endif

static int is_restorer(uint64_t pc, int (*read)(void *, uint64_t, void *, size_t), void *arg)
{
	uint8_t code[9];

	/* Both forms in one read (a read is a system call when the code comes from the file or
	 * the process); the short one alone where the longer read fails (the end of the code).
	 * Unreadable code is simply not a trampoline. */
	if (read(arg, pc, code, sizeof(restore_rt_long)) == DWUNW_OK)
		return memcmp(code, restore_rt_short, sizeof(restore_rt_short)) == 0 ||
		       memcmp(code, restore_rt_long, sizeof(restore_rt_long)) == 0;
	if (read(arg, pc, code, sizeof(restore_rt_short)) != DWUNW_OK)
		return 0;
	if (memcmp(code, restore_rt_short, sizeof(restore_rt_short)) == 0)
		return 1;
	if (code[0] != restore_rt_long[0] || memcmp(code, restore_rt_long, sizeof(restore_rt_short)) != 0)
		return 0;
	if (read(arg, pc + sizeof(restore_rt_short), code + sizeof(restore_rt_short),
		 sizeof(restore_rt_long) - sizeof(restore_rt_short)) != DWUNW_OK)
		return 0;
	return memcmp(code, restore_rt_long, sizeof(restore_rt_long)) == 0;
}

static int x86_64_sigframe(const struct dwunw_regs *in, struct dwunw_regs *out,
			   int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t g[G_COUNT * 8];
	uint64_t sp;
	int err;

	if (!in || !out || !read)
		return DWUNW_ERR_INVALID_ARG;
	if (!is_restorer(in->pc, read, arg))
		return 0;
	if (!(in->valid & BIT(X_RSP)))
		return DWUNW_ERR_INVALID_ARG; /* a trampoline, but its frame cannot be located */
	sp = in->regs[X_RSP];
	if (sp > UINT64_MAX - UC_GREGS_OFF - sizeof(g))
		return DWUNW_ERR_INVALID_ARG;
	err = read(arg, sp + UC_GREGS_OFF, g, sizeof(g));
	if (err)
		return err < 0 ? err : DWUNW_ERR_IO;

	frame_from(in, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < G_COUNT; i++)
		out->regs[greg_to_dwarf[i]] = dw_le64(g + 8 * i);
	out->pc = out->regs[X_RIP];
	out->valid = GPR_MASK;
	return 1;
}

/* In a PLT stub nothing is pushed yet: the return address is at [rsp], the caller's rsp above it. */
static int x86_64_stub_step(const struct dwunw_regs *in, struct dwunw_regs *out,
			    int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	uint8_t w[8];
	uint64_t sp, ra, keep;
	struct dwunw_regs tmp;

	if (!in || !out || !read || !(in->valid & BIT(X_RSP)))
		return 0;
	sp = in->regs[X_RSP];
	if (sp > UINT64_MAX - 8 || read(arg, sp, w, sizeof(w)) != DWUNW_OK)
		return 0;
	ra = dw_le64(w);
	if (ra == 0)
		return 0;
	tmp = *in;
	keep = in->valid & CALLEE_SAVED;
	frame_from(&tmp, out);
	memcpy(out->regs, tmp.regs, sizeof(out->regs));
	out->regs[X_RSP] = sp + 8;
	out->regs[X_RIP] = ra;
	out->pc = ra;
	out->valid = keep | BIT(X_RSP) | BIT(X_RIP);
	return 1;
}

/*
 * The classic frame-pointer chain (push %rbp; mov %rsp,%rbp): [rbp] is the caller's rbp and
 * [rbp+8] the return address; the caller's rsp is rbp+16.
 */
static int x86_64_fp_step(const struct dwunw_regs *in, struct dwunw_regs *out,
			  int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg)
{
	/* callee-saved registers other than rbp, which the chain restores */
	static const uint8_t kept[] = { X_RBX, X_R12, X_R13, X_R14, X_R15 };
	uint8_t w[16];
	uint64_t rbp, new_sp, ra, saved[DW_ARRAY_SIZE(kept)], keep;

	if (!in || !out || !read)
		return 0;
	if (!(in->valid & BIT(X_RBP)))
		return 0;
	rbp = in->regs[X_RBP];
	if (rbp == 0 || (rbp & 7) != 0 || rbp > UINT64_MAX - 16)
		return 0;
	new_sp = rbp + 16;
	/* The caller's frame is above (outward of) the callee's stack pointer. */
	if ((in->valid & BIT(X_RSP)) && new_sp <= in->regs[X_RSP])
		return 0;
	if (read(arg, rbp, w, sizeof(w)) != DWUNW_OK)
		return 0;
	ra = dw_le64(w + 8);
	if (ra == 0)
		return 0;

	/* in and out may be the same structure: take what is kept before overwriting. */
	for (unsigned i = 0; i < DW_ARRAY_SIZE(kept); i++)
		saved[i] = in->regs[kept[i]];
	keep = in->valid & CALLEE_SAVED & ~BIT(X_RBP);

	frame_from(in, out);
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < DW_ARRAY_SIZE(kept); i++)
		out->regs[kept[i]] = saved[i];
	out->regs[X_RBP] = dw_le64(w);
	out->regs[X_RSP] = new_sp;
	out->regs[X_RIP] = ra;
	out->pc = ra;
	out->valid = keep | BIT(X_RBP) | BIT(X_RSP) | BIT(X_RIP);
	return 1;
}

/*
 * NT_PRSTATUS on x86_64 is struct user_regs_struct (<sys/user.h>): 27 words in the order below.
 * The layout is spelled out here so that other hosts can read x86_64 core files too.
 */
enum {
	U_R15, U_R14, U_R13, U_R12, U_RBP, U_RBX, U_R11, U_R10, U_R9, U_R8,
	U_RAX, U_RCX, U_RDX, U_RSI, U_RDI, U_ORIG_RAX, U_RIP, U_CS, U_EFLAGS, U_RSP, U_SS,
	U_FS_BASE, U_GS_BASE, U_DS, U_ES, U_FS, U_GS,
	U_COUNT
};

#if defined(__x86_64__)
_Static_assert(sizeof(struct user_regs_struct) == U_COUNT * 8, "user_regs_struct size");
_Static_assert(offsetof(struct user_regs_struct, rip) == U_RIP * 8 &&
	       offsetof(struct user_regs_struct, rsp) == U_RSP * 8 &&
	       offsetof(struct user_regs_struct, r8) == U_R8 * 8 &&
	       offsetof(struct user_regs_struct, rdi) == U_RDI * 8, "user_regs_struct layout");
#endif

static const uint8_t user_to_dwarf[][2] = {
	{ U_RAX, X_RAX }, { U_RDX, X_RDX }, { U_RCX, X_RCX }, { U_RBX, X_RBX },
	{ U_RSI, X_RSI }, { U_RDI, X_RDI }, { U_RBP, X_RBP }, { U_RSP, X_RSP },
	{ U_R8, X_R8 }, { U_R9, X_R9 }, { U_R10, X_R10 }, { U_R11, X_R11 },
	{ U_R12, X_R12 }, { U_R13, X_R13 }, { U_R14, X_R14 }, { U_R15, X_R15 },
	{ U_RIP, X_RIP },
};

static int x86_64_regs_from_prstatus(const void *buf, size_t len, struct dwunw_regs *out)
{
	const uint8_t *p = buf;

	if (!buf || !out || len < U_COUNT * 8)
		return DWUNW_ERR_INVALID_ARG;
	out->arch = DWUNW_ARCH_X86_64;
	memset(out->regs, 0, sizeof(out->regs));
	for (unsigned i = 0; i < DW_ARRAY_SIZE(user_to_dwarf); i++)
		out->regs[user_to_dwarf[i][1]] = dw_le64(p + 8 * user_to_dwarf[i][0]);
	out->pc = out->regs[X_RIP];
	out->valid = GPR_MASK;
	return DWUNW_OK;
}

const struct dwunw_arch_ops dw_arch_x86_64 = {
	.name = "x86_64",
	.arch = DWUNW_ARCH_X86_64,
	.elf_machine = EM_X86_64,
	.elf_class = ELFCLASS64,
	.addr_size = 8,
	.nregs = 17,
	.sp_reg = 7,
	.fp_reg = 6,
	.ra_reg = 16,
	.lr_reg = 0xffff,
	.pc_reg = X_RIP,
	.callee_saved = CALLEE_SAVED,
	.reg_name = x86_64_reg_name,
	.sigframe = x86_64_sigframe,
	.fp_step = x86_64_fp_step,
	.ra_to_pc = NULL, /* identity */
	.lr_step = NULL,
	.stub_step = x86_64_stub_step,
	.regs_from_prstatus = x86_64_regs_from_prstatus,
};
