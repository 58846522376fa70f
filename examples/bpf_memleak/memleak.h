/* SPDX-License-Identifier: GPL-2.0-only */
/* What the BPF side and user space of the example memleak share. */
#ifndef EXAMPLE_MEMLEAK_H
#define EXAMPLE_MEMLEAK_H

#define MAX_STACK_DEPTH 127     /* the kernel's limit for a stack map entry */

/* allocs[address]: one outstanding allocation */
struct alloc_info {
	__u64 size;
	__u64 ts;                /* bpf_ktime_get_ns() at the allocation */
	__s64 stack_id;          /* bpf_get_stackid(), negative: its error */
};

#endif
