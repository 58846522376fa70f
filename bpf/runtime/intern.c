// SPDX-License-Identifier: GPL-2.0-only
/* Interned strings: an open-addressing set of copies, see intern.h. */
#include <stdlib.h>
#include <string.h>
#include "intern.h"
#include "tool_util.h"

static struct {
	char **tab;
	size_t cap, n;
} strs;

const char *intern(const char *s)
{
	size_t i;

	if (!s)
		return NULL;
	if (strs.n * 2 >= strs.cap) {
		size_t ncap = strs.cap ? strs.cap * 2 : 1024;
		char **nt = xcalloc(ncap, sizeof(*nt));

		for (i = 0; i < strs.cap; i++) {
			if (!strs.tab[i])
				continue;
			size_t j = hash_str(strs.tab[i]) & (ncap - 1);
			while (nt[j])
				j = (j + 1) & (ncap - 1);
			nt[j] = strs.tab[i];
		}
		free(strs.tab);
		strs.tab = nt;
		strs.cap = ncap;
	}
	for (i = hash_str(s) & (strs.cap - 1); strs.tab[i]; i = (i + 1) & (strs.cap - 1))
		if (!strcmp(strs.tab[i], s))
			return strs.tab[i];
	strs.tab[i] = strdup(s);
	if (!strs.tab[i])
		die("out of memory");
	strs.n++;
	return strs.tab[i];
}
