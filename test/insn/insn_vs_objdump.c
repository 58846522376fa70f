// SPDX-License-Identifier: GPL-2.0-only
/*
 * insn_vs_objdump FILE < BOUNDARIES
 *
 * Checks bpf/runtime/insn_x86.c's instruction lengths against objdump: BOUNDARIES holds the file
 * offsets (hex, ascending) where `objdump -d` starts an instruction, one per line; for each
 * pair of neighbours less than 16 bytes apart, the decoded length at the first must reach the
 * second. Prints "checked N wrong W undecodable U" and the first mismatches; exit 0 when W and
 * U are 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include "insn_x86.h"

int main(int argc, char **argv)
{
	FILE *f;
	unsigned char *b;
	long n, prev = -1, cur, bad = 0, tot = 0, undec = 0;

	if (argc != 2 || !(f = fopen(argv[1], "rb")))
		return 2;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(n);
	if (!b || fread(b, 1, n, f) != (size_t)n)
		return 2;
	while (scanf("%lx", &cur) == 1) {
		if (prev >= 0 && cur > prev && cur - prev < 16 && cur < n) {
			struct ix_insn in;

			tot++;
			if (ix_decode(b + prev, n - prev, &in)) {
				if (undec++ < 5)
					printf("undecodable at %#lx\n", prev);
			} else if (prev + in.len != cur) {
				if (bad++ < 10)
					printf("length %d at %#lx, objdump's next at %#lx\n", in.len, prev, cur);
			}
		}
		prev = cur;
	}
	printf("checked %ld wrong %ld undecodable %ld\n", tot, bad, undec);
	return bad || undec;
}
