// SPDX-License-Identifier: GPL-2.0-only
/* The registry of architecture backends. */
#include <stddef.h>
#include <string.h>
#include "internal.h"

static const struct dwunw_arch_ops *const backends[] = {
	&dw_arch_x86_64,
	&dw_arch_arm64,
	&dw_arch_mips32,
};

DWUNW_API const struct dwunw_arch_ops *dwunw_arch_get(enum dwunw_arch arch)
{
	for (size_t i = 0; i < DW_ARRAY_SIZE(backends); i++)
		if (backends[i]->arch == (uint32_t)arch)
			return backends[i];
	return NULL;
}

DWUNW_API const struct dwunw_arch_ops *dwunw_arch_for_elf(unsigned machine, unsigned elf_class)
{
	for (size_t i = 0; i < DW_ARRAY_SIZE(backends); i++)
		if (backends[i]->elf_machine == machine && backends[i]->elf_class == elf_class)
			return backends[i];
	return NULL;
}

void dw_arch_frame_from(const struct dwunw_regs *in, struct dwunw_regs *out, uint32_t arch)
{
	if (out != in)
		memcpy(out, in, offsetof(struct dwunw_regs, regs));
	out->arch = arch;
	out->flags = in->flags & ~DWUNW_REGS_PC_IS_RETADDR;
	out->valid = 0;
	out->stack_start = in->stack_start;
	out->stack = in->stack;
	out->stack_size = in->stack_size;
}
