// SPDX-License-Identifier: GPL-2.0-only
/* Kernel stacks: see kstack.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include "intern.h"
#include "ksyms.h"
#include "kstack.h"
#include "stack_store.h"

static void fill_kernel(void *arg, struct uframe *f, uint32_t n)
{
	(void)arg;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t off;
		const char *name = ksyms_lookup(f[i].pc, &off);

		f[i].module = intern("[kernel.kallsyms]");
		uf_set_origin(&f[i], UO_KERNEL);
		if (name) {
			f[i].name = name;
			f[i].offset = off;
		}
	}
}

int64_t kstack_of(struct stack_store *st, struct fp_cache *cache, int map_fd, int32_t id,
		  const char *from, uint64_t *lost)
{
	uint64_t raw[FRAMES_FP_DEPTH], pcs[FRAMES_FP_DEPTH];
	uint32_t n = 0, skip = 0;

	if (id == KSTACK_NONE || id == -EFAULT)
		return -1;
	if (id < 0) {
		char l[96];

		(*lost)++;
		snprintf(l, sizeof(l), "[stack lost: kernel stack (%s)]",
			 id == -EEXIST ? "stack map full, EEXIST" : strerror(-id));
		return pseudo_stack(st, l);
	}
	if ((uint32_t)id < cache->n && cache->map[id])
		return cache->map[id] - 1;
	memset(raw, 0, sizeof(raw));
	if (bpf_map_lookup_elem(map_fd, &id, raw)) {
		(*lost)++;
		return pseudo_stack(st, "[stack lost: kernel stack id not found]");
	}
	for (uint32_t i = 0; i < FRAMES_FP_DEPTH && raw[i]; i++) {
		uint64_t off;
		const char *name = from && !skip ? ksyms_lookup(raw[i], &off) : NULL;

		if (name && !strcmp(name, from))
			skip = i + 1; /* frames [0, i) are the tracing's */
	}
	if (skip)
		skip--;
	for (uint32_t i = skip; i < FRAMES_FP_DEPTH && raw[i]; i++)
		pcs[n++] = raw[i];
	int64_t idx = stack_get_in(st, KSTACK_SPACE, SK_FP, 0, NULL, NULL, pcs, n, fill_kernel, NULL);
	if ((uint32_t)id < cache->n && st->v[idx].space == KSTACK_SPACE)
		cache->map[id] = (int32_t)idx + 1;
	return idx;
}
