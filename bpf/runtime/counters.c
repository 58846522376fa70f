// SPDX-License-Identifier: GPL-2.0-only
/* Per-CPU counters summed: see counters.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "counters.h"

int percpu_counters_read(struct bpf_object *obj, const char *name, uint64_t *out, uint32_t n)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v;

	memset(out, 0, n * sizeof(out[0]));
	if (!m || ncpu <= 0)
		return -ENOENT;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++)
		if (bpf_map_lookup_elem(bpf_map__fd(m), &k, v) == 0)
			for (int c = 0; c < ncpu; c++)
				out[k] += v[c];
	free(v);
	return 0;
}
