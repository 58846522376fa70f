/* SPDX-License-Identifier: GPL-2.0-only */
/* arm64 prologue/epilogue analysis for code without CFI (dwunw_arch_ops.prologue_step). */
#ifndef DWUNW_ARCH_ARM64_PROLOGUE_H
#define DWUNW_ARCH_ARM64_PROLOGUE_H

#include "dwunw.h"

int dw_arm64_prologue_step(const struct dwunw_regs *in, struct dwunw_regs *out, uint64_t func_start, int exact,
			   int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg);

#endif
