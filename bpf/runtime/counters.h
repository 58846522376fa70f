/* SPDX-License-Identifier: GPL-2.0-only */
/* The user side of counters.bpf.h: a per-CPU counter array summed over the CPUs. */
#ifndef DWUNW_COUNTERS_H
#define DWUNW_COUNTERS_H

#include <stdint.h>

struct bpf_object;

/* out[0..n) = map `name`'s counters, each summed over the CPUs (0 where unreadable); 0, or
 * -ENOENT (no such map), -ENOMEM. */
int percpu_counters_read(struct bpf_object *obj, const char *name, uint64_t *out, uint32_t n);

/* The tool's own (tool_counters, indexed by its enum). */
static inline int tool_counters_read(struct bpf_object *obj, uint64_t *out, uint32_t n)
{
	return percpu_counters_read(obj, "tool_counters", out, n);
}

#endif /* DWUNW_COUNTERS_H */
