/* SPDX-License-Identifier: GPL-2.0-only */
/* mips32 o32 prologue/epilogue analysis for code without CFI (dwunw_arch_ops.prologue_step). */
#ifndef DWUNW_ARCH_MIPS32_PROLOGUE_H
#define DWUNW_ARCH_MIPS32_PROLOGUE_H

#include "dwunw.h"

int dw_mips32_prologue_step(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t func_start, int exact,
			    int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);

#endif
