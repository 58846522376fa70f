// SPDX-License-Identifier: GPL-2.0-only
/*
 * Seeds for fuzz_expr: the DWARF expressions of real unwind tables (libc's PLT and signal-frame
 * rules, ...). Usage: seed_exprs OUTDIR ELF... ; writes OUTDIR/<file>-<n> in fuzz_expr's input
 * format (flags, initial value, expression), once with the CFA pushed and once without.
 */
#include <stdio.h>
#include <string.h>
#include "dwunw.h"
#include "module.h"

int main(int argc, char **argv)
{
	struct dwunw_ctx ctx;
	unsigned written = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s OUTDIR ELF...\n", argv[0]);
		return 2;
	}
	if (dwunw_init(&ctx, NULL) != DWUNW_OK)
		return 1;
	for (int i = 2; i < argc; i++) {
		struct dwunw_module *mod;
		const struct dw_table *t;
		const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];

		if (dwunw_module_open(&ctx, argv[i], &mod) != DWUNW_OK)
			continue;
		if (dw_module_table(mod, &t) == DWUNW_OK) {
			for (uint32_t e = 0; e < t->nexprs && e < 64; e++) {
				for (int push = 0; push < 2; push++) {
					char path[4096];
					uint64_t initial = 0x7ffc1000ull;
					uint8_t flags = (uint8_t)((t->addr_size == 4 ? 1 : 0) | (push ? 2 : 0));
					FILE *f;

					snprintf(path, sizeof(path), "%s/%s-%u%s", argv[1], base, e, push ? "-cfa" : "");
					f = fopen(path, "wb");
					if (!f)
						continue;
					fwrite(&flags, 1, 1, f);
					fwrite(&initial, 8, 1, f);
					fwrite(t->exprs[e].p, 1, t->exprs[e].len, f);
					fclose(f);
					written++;
				}
			}
		}
		dwunw_module_put(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
	printf("%u expressions\n", written);
	return 0;
}
