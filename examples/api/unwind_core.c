// SPDX-License-Identifier: GPL-2.0-only
/* unwind_core.c: unwind every thread of a core file, offline (doc/api_usage.md §6.2).
 * Build: make examples (build/examples/api/unwind_core), or
 *   cc -O2 -Wall -Wextra -I native/include -o unwind_core unwind_core.c build/libdwunw.a \
 *       -lelf -lz -lzstd -llzma -lpthread -ldl
 * Usage: ./unwind_core CORE [MAPS]   (MAPS: the maps text a qemu guest core without NT_FILE needs) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "dwunw.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	buf = malloc(*len + 1);
	if (buf && fread(buf, 1, *len, f) != *len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .flags = DWUNW_CFG_NO_REMOTE_READS };
	struct dwunw_core_options opts = { .size = sizeof(opts) };
	struct dwunw_core_thread threads[64];
	struct dwunw_core_info info;
	size_t nthreads = 64;
	struct dwunw_ctx ctx;
	char *maps = NULL;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORE [MAPS]\n", argv[0]);
		return 2;
	}
	if (argc > 2 && !(maps = slurp(argv[2], &opts.maps_len))) {
		perror(argv[2]);
		return 1;
	}
	opts.maps_text = maps;
	if ((err = dwunw_init(&ctx, &cfg)))
		return 1;
	/* register the core's process (maps, memory, vDSO); returns each thread's registers */
	err = dwunw_core_load(&ctx, argv[1], &opts, threads, &nthreads, &info);
	if (err && err != DWUNW_ERR_CORRUPT) {
		fprintf(stderr, "%s: %s\n", argv[1], dwunw_strerror(err));
		dwunw_shutdown(&ctx);
		return 1;
	}
	printf("pid %d (%s), %u threads, %u maps, %u segments%s%s\n", info.core_pid, info.comm,
	       info.nthreads, info.nmaps, info.nsegments,
	       info.flags & DWUNW_CORE_VDSO ? ", vdso" : "", err ? ", partly corrupt" : "");
	for (size_t t = 0; t < nthreads; t++) {
		struct dwunw_frame frames[128];
		size_t n = 128;
		int stop = dwunw_capture(&ctx, &threads[t].regs, frames, &n);

		printf("thread %d signal %d\n", threads[t].tid, threads[t].signo);
		for (size_t i = 0; i < n; i++) {
			struct dwunw_symbol sym;
			int ok = dwunw_symbolize_frame(&ctx, &frames[i], &sym) == DWUNW_OK;
			printf("  #%-2zu 0x%016" PRIx64 " %s+0x%" PRIx64 "\n", i, frames[i].pc,
			       ok ? sym.name : "??", ok ? sym.offset : 0);
		}
		printf("  stop: %s\n", dwunw_errname(stop));
		dwunw_module_cache_release(&ctx, frames, n);
	}
	dwunw_shutdown(&ctx); /* frees the core's memory and maps */
	free(maps);
	return 0;
}
