// SPDX-License-Identifier: GPL-2.0-only
/* 3.11's location-table decoder (native/src/python/py_linetable.c) against CPython itself: for
 * every code object of a few modules (and their nested code), python3.11 prints co_linetable,
 * co_firstlineno and the line co_positions() gives each code unit; the decoder must give the same
 * line at every unit (-1 where CPython has none). Malformed tables are refused, never read past. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tap.h"
#include "python/py_linetable.h"

#define PY "/usr/bin/python3.11"

static const char script[] =
	"import json, re, threading, types\n"
	"def walk(c):\n"
	"    yield c\n"
	"    for k in c.co_consts:\n"
	"        if isinstance(k, types.CodeType): yield from walk(k)\n"
	"mods = [json.decoder, json.encoder, re._parser, re._compiler, threading]\n"
	"codes = [compile(open(m.__file__).read(), m.__file__, 'exec') for m in mods]\n"
	"codes.append(compile(open('fixtures/python/chains.py').read(), 'chains.py', 'exec'))\n"
	"for top in codes:\n"
	"    for c in walk(top):\n"
	"        ls = [-1 if p[0] is None else p[0] for p in c.co_positions()]\n"
	"        print(c.co_firstlineno, c.co_linetable.hex() or '-', len(ls), *ls)\n";

static int unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;
	if (!strcmp(s, "-"))
		return 0;
	for (; s[0] && s[1] && n < cap; s += 2) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			return -1;
		out[n++] = (uint8_t)v;
	}
	return (int)n;
}

int main(void)
{
	static char line[1 << 20], hexbuf[1 << 18];
	static uint8_t tab[1 << 17];
	unsigned codes = 0, units = 0, wrong = 0;

	/* malformed input: refused */
	const uint8_t no_start[] = { 0x10 };           /* bit 7 clear: not an entry */
	const uint8_t cut_varint[] = { 0xe8, 0x41 };   /* kind 13, varint that never ends */
	ok(dw_py311_line(no_start, sizeof(no_start), 1, 0) == -2, "a byte without the entry bit is refused");
	ok(dw_py311_line(cut_varint, sizeof(cut_varint), 1, 0) == -2, "a varint cut by the end is refused");
	ok(dw_py311_line(NULL, 0, 1, 0) == -2, "an empty table reaches no unit");

	if (access(PY, X_OK) != 0) {
		printf("ok %d - # SKIP no %s (scripts/ensure-deps installs it)\n", ++tap_count, PY);
		printf("1..%d\n", tap_count);
		return 0;
	}
	FILE *tmp = tmpfile();
	if (!tmp || fputs(script, tmp) < 0 || fflush(tmp))
		return 1;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "%s /dev/fd/%d", PY, fileno(tmp));
	FILE *p = popen(cmd, "r");
	if (!ok(p != NULL, "python3.11 runs"))
		return 1;
	while (fgets(line, sizeof(line), p)) {
		int first, n, at;
		if (sscanf(line, "%d %262143s %d%n", &first, hexbuf, &n, &at) != 3)
			continue;
		int len = unhex(hexbuf, tab, sizeof(tab));
		if (len < 0)
			continue;
		codes++;
		char *s = line + at;
		for (int i = 0; i < n; i++) {
			long want = strtol(s, &s, 10);
			int got = dw_py311_line(tab, (size_t)len, first, (uint32_t)i);
			units++;
			if (got != want && wrong++ < 5)
				printf("# first %d unit %d: want %ld got %d\n", first, i, want, got);
		}
	}
	int st = pclose(p);
	ok(st == 0, "python3.11 printed the tables (exit %d)", st);
	ok(codes > 100, "code objects checked: %u", codes);
	ok(units > 10000, "code units checked: %u", units);
	ok(wrong == 0, "every unit's line equals co_positions(): %u differ", wrong);
	printf("1..%d\n", tap_count);
	return tap_failed != 0;
}
