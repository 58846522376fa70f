/* SPDX-License-Identifier: MIT */
/* Synthetic `name@plt` symbols for a module's PLT stubs, as perf and gdb show them. */
#ifndef DWUNW_PLT_SYMS_H
#define DWUNW_PLT_SYMS_H

#include <stddef.h>
#include <stdint.h>

#include "elf_file.h"

struct dw_plt_sym {
	uint64_t addr;              /* the stub's first instruction */
	uint64_t end;               /* the end of its stub section (the next symbol ends it sooner) */
	const char *name;           /* "name@plt", in the strings block */
};

/*
 * The PLT stubs of e (.plt, .plt.sec, .plt.got: x86_64) named after the dynamic symbol whose GOT
 * slot each one jumps through (its JUMP_SLOT or GLOB_DAT relocation). *out and *strings are
 * malloc'd (free both); *n 0 when there are none or the machine is not supported. DWUNW_OK or
 * DWUNW_ERR_NOMEM.
 */
int dw_plt_syms(struct dw_elf *e, struct dw_plt_sym **out, size_t *n, char **strings);

#endif
