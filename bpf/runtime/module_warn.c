// SPDX-License-Identifier: GPL-2.0-only
/* Missing module files, said once each: see module_warn.h. */
#include <stdio.h>
#include <string.h>
#include "dwunw.h"
#include "intern.h"
#include "module_warn.h"
#include "tool_util.h"

static struct {
	const char **v;        /* interned paths, in the order met */
	size_t n, cap;
	bool summed;           /* the summary line was printed for this count */
} miss;

void module_warn(const char *path, const char *why)
{
	path = intern(path);
	/* a handful of paths is usual; a linear look-up by pointer is enough */
	for (size_t i = 0; i < miss.n; i++)
		if (miss.v[i] == path)
			return;
	if (miss.n == miss.cap) {
		miss.cap = miss.cap ? miss.cap * 2 : 16;
		miss.v = xrealloc(miss.v, miss.cap * sizeof(*miss.v));
	}
	miss.v[miss.n++] = path;
	miss.summed = false;
	if (miss.n <= MODULE_WARN_SHOWN)
		fprintf(stderr, "%s: %s: cannot load the module file (%s): its frames are not unwound by CFI nor named\n",
			tool_name(), path, why);
	else if (miss.n == MODULE_WARN_SHOWN + 1)
		fprintf(stderr, "%s: more module files cannot be loaded (%s, ...): counted at the end\n",
			tool_name(), path);
}

bool module_warn_line(const char *line)
{
	static const char pre[] = DWUNW_WARN_NO_MODULE_PRE, mid[] = DWUNW_WARN_NO_MODULE_MID,
			  post[] = DWUNW_WARN_NO_MODULE_POST;
	char path[4096], why[256];
	const char *m, *e;
	size_t lp, lw;

	if (strncmp(line, pre, sizeof(pre) - 1))
		return false;
	m = strstr(line, mid);
	e = m ? strstr(m, post) : NULL;
	if (!m || !e || e[sizeof(post) - 1])
		return false;
	lp = (size_t)(m - line) - (sizeof(pre) - 1);
	lw = (size_t)(e - m) - (sizeof(mid) - 1);
	if (lp >= sizeof(path) || lw >= sizeof(why))
		return false;
	memcpy(path, line + sizeof(pre) - 1, lp);
	path[lp] = 0;
	memcpy(why, m + sizeof(mid) - 1, lw);
	why[lw] = 0;
	module_warn(path, why);
	return true;
}

size_t module_warn_count(void)
{
	return miss.n;
}

void module_warn_flush(void)
{
	if (miss.n <= MODULE_WARN_SHOWN || miss.summed)
		return;
	fprintf(stderr, "%s: %zu module files could not be loaded (%s, %s, %s, ...): frames in them are not unwound by CFI nor named\n",
		tool_name(), miss.n, miss.v[0], miss.v[1], miss.v[2]);
	miss.summed = true;
}

bool debug_refused_line(const char *line)
{
	static const char pre[] = "dwunw: debug file refused: ";
	static struct {
		const char **v;
		size_t n, cap;
	} seen;

	if (strncmp(line, pre, sizeof(pre) - 1))
		return false;
	const char *what = intern(line + sizeof(pre) - 1);
	for (size_t i = 0; i < seen.n; i++)
		if (seen.v[i] == what)
			return true;
	if (seen.n == seen.cap) {
		seen.cap = seen.cap ? seen.cap * 2 : 8;
		seen.v = xrealloc(seen.v, seen.cap * sizeof(*seen.v));
	}
	seen.v[seen.n++] = what;
	fprintf(stderr, "%s: debug file refused: %s: only root's directories are trusted; its module keeps the names it has\n",
		tool_name(), what);
	return true;
}
