/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Checks made before and while a BPF tool runs, so that a kernel or a target it cannot work
 * with gives one line naming the cause instead of empty reports.
 */
#ifndef DWUNW_PREFLIGHT_H
#define DWUNW_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * What the running kernel lacks for uprobe-based BPF tools with CO-RE (BTF, the bpf() system
 * call, BPF programs on probes, uprobes, the ring buffer when need_ringbuf), as one line with
 * the kernel option to turn on; NULL when nothing is missing. Needs the privileges to load BPF.
 */
const char *dwunw_kernel_lacks(bool need_ringbuf);

/*
 * Whether the program pid runs has no program interpreter (a static executable, which maps no
 * shared C library): 1 yes, 0 no, -1 unknown (gone, unreadable). Its path in path[n].
 */
int dwunw_exe_is_static(pid_t pid, char *path, size_t n);

#endif
