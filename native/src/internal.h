/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef DWUNW_INTERNAL_H
#define DWUNW_INTERNAL_H

#include "dwunw.h"

/* Functions of the public API; everything else stays hidden in the .so. */
#define DWUNW_API __attribute__((visibility("default")))

#define DW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DW_LIKELY(x)   __builtin_expect(!!(x), 1)
#define DW_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* A point of the lock-free paths where another thread's update may land between two steps of a
 * reader (a slot emptied and reused, a mapping resolved again). The race build (make tsan:
 * -DDW_RACE_POINTS) yields the CPU there, so that test_nowait meets those interleavings in
 * seconds instead of once in hundreds of runs; other builds compile it to nothing. */
#ifdef DW_RACE_POINTS
#include <sched.h>
#define DW_RACE_POINT() sched_yield()
#else
#define DW_RACE_POINT() do { } while (0)
#endif

/* Backends, one per native/src/arch/<arch>/ */
extern const struct dwunw_arch_ops dw_arch_x86_64;
extern const struct dwunw_arch_ops dw_arch_arm64;
extern const struct dwunw_arch_ops dw_arch_mips32;

/* A backend's step starts the caller's frame as a copy of the callee's identity (process, thread,
 * snapshot) with no register known yet (arch.c). */
void dw_arch_frame_from(const struct dwunw_regs *in, struct dwunw_regs *out, uint32_t arch);

/* errno -> DWUNW_ERR_* */
int dw_errno_to_err(int err);

#endif
