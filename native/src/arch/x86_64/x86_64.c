// SPDX-License-Identifier: GPL-2.0-only
/* x86_64 (System V): DWARF register numbers and readelf's names for them. */
#include <elf.h>
#include "internal.h"

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

static const char *x86_64_reg_name(unsigned reg)
{
	return reg < DW_ARRAY_SIZE(names) ? names[reg] : NULL;
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
	.reg_name = x86_64_reg_name,
};
