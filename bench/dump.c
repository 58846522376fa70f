// SPDX-License-Identifier: GPL-2.0-only
/*
 * --dump DIR: the snapshots as plain files for peers outside this process (bench/framehop):
 * DIR/N.txt names the snapshot, its registers (DWARF numbers), its stack and its modules;
 * DIR/N.stack holds the stack bytes. The self snapshots exist only in this process, so this is
 * the one way another unwinder sees exactly the memory the others unwind.
 */
#include <stdio.h>
#include <string.h>
#include "bench.h"

static int dump_one(const struct bsnap *s, const char *dir, unsigned idx, char *err, size_t errlen)
{
	char path[4200];
	FILE *f;
	int bad;

	snprintf(path, sizeof(path), "%s/%u.stack", dir, idx);
	f = fopen(path, "wb");
	if (!f || fwrite(s->stack, 1, s->regs.stack_size, f) != s->regs.stack_size) {
		if (f)
			fclose(f);
		snprintf(err, errlen, "%s: cannot write", path);
		return -1;
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/%u.txt", dir, idx);
	f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "%s: cannot write", path);
		return -1;
	}
	fprintf(f, "name %s\narch %s\npc %llx\nstack %llx %llx\n", s->name, s->arch_name,
		(unsigned long long)s->regs.pc, (unsigned long long)s->regs.stack_start,
		(unsigned long long)s->regs.stack_size);
	for (unsigned r = 0; r < DWUNW_MAX_REGS; r++)
		if (s->regs.valid & (1ull << r))
			fprintf(f, "reg %u %llx\n", r, (unsigned long long)s->regs.regs[r]);
	/* modules: file, runtime range of its mappings, load bias */
	for (size_t m = 0; m < s->space.nmods; m++) {
		const struct bmod *bm = &s->space.mods[m];
		if (bm->file && bm->text_hi)
			fprintf(f, "module %llx %llx %llx %s\n", (unsigned long long)bm->lo,
				(unsigned long long)bm->hi, (unsigned long long)bm->bias, bm->file->path);
	}
	bad = ferror(f);
	if (fclose(f) || bad) {
		snprintf(err, errlen, "%s: cannot write", path);
		return -1;
	}
	return 0;
}

int snap_dump(const struct bsnap *snaps, size_t n, const char *dir, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++)
		if (dump_one(&snaps[i], dir, (unsigned)i, err, errlen))
			return -1;
	return 0;
}
