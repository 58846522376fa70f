// SPDX-License-Identifier: GPL-2.0-only
/* /proc/kallsyms, sorted by address: see ksyms.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "intern.h"
#include "ksyms.h"
#include "tool_util.h"

struct ksym {
	uint64_t addr;
	const char *name;
};

static struct ksym *ks;
static size_t nks;

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int ksyms_load(void)
{
	char line[512], name[256], type;
	size_t cap = 0;
	uint64_t addr;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) != 3 || !addr)
			continue;
		/* text symbols only: data would split functions */
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (nks == cap) {
			cap = cap ? cap * 2 : 65536;
			ks = xrealloc(ks, cap * sizeof(*ks));
		}
		ks[nks].addr = addr;
		ks[nks].name = intern(name);
		nks++;
	}
	fclose(f);
	qsort(ks, nks, sizeof(*ks), cmp_ksym);
	return nks ? 0 : -ENOENT;
}

const char *ksyms_lookup(uint64_t addr, uint64_t *off)
{
	size_t lo = 0, hi = nks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ks[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	*off = addr - ks[lo - 1].addr;
	return ks[lo - 1].name;
}
