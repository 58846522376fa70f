/* SPDX-License-Identifier: GPL-2.0-only */
/* Kernel stacks from a bpf_get_stackid() stack map, interned once per id and named by ksyms. */
#ifndef DWUNW_KSTACK_H
#define DWUNW_KSTACK_H

#include <stdint.h>
#include "frames.h"

/* The tools' "no stack asked" id (the BPF side's *_STACK_NONE). */
#define KSTACK_NONE (-1000000)

#define KSTACK_SPACE UINT64_MAX /* the kernel's address space in a stack store */

/*
 * Stack id -> index in st (the kernel's stacks in their own address space, KSTACK_SPACE); -1 for none (KSTACK_NONE, or -EFAULT: the event was in user
 * mode); a lost stack ("[stack lost: kernel stack (...)]") counts in *lost. `cache` (n = the
 * map's max_entries) keeps id -> index. `from`: when a frame has this name, the frames above it
 * (leaf side) are left out: a tracepoint program's own (the BPF program, bpf_trace_run, the
 * tracepoint's iterator) are no part of the traced thread's stack.
 */
int64_t kstack_of(struct stack_store *st, struct fp_cache *cache, int map_fd, int32_t id,
		  const char *from, uint64_t *lost);

#endif /* DWUNW_KSTACK_H */
