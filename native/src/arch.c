// SPDX-License-Identifier: GPL-2.0-only
/* The registry of architecture backends. */
#include <stddef.h>
#include "internal.h"

static const struct dwunw_arch_ops *const backends[] = {
	&dw_arch_x86_64,
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
