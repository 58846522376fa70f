// SPDX-License-Identifier: GPL-2.0-only
/*
 * What libdwunw answers for each file of the corrupt-input corpus (test/corpus/, made by
 * fuzz/make-corpus): corpus_check MANIFEST DIR reads the manifest (expected.txt: file, code, rows,
 * unwind) and prints, for each of its files, one line in the same columns with what the library
 * actually returns, then the time it took:
 *   FILE CODE ROWS UNWIND MS
 * CODE is the first failure of dwunw_module_open, dwunw_table_info, or the table's first_error
 * (OK when none); ROWS the rows of the table (- when there is none); UNWIND, when the manifest
 * names a pc (PC:CODE), PC:<what dwunw_capture returns> with the file mapped offline at 0x400000,
 * pc = 0x400000 + PC and rsp in the middle of 4 KiB of zeroed stack; - otherwise.
 * test/corrupt.test.ts compares the two. Each file gets its own context.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dwunw.h"

#define LOAD_BASE  0x400000ull
#define STACK_BASE 0x7ff000000000ull
#define STACK_SIZE 4096
#define OFFLINE_PID 0x7ffffff0

/* CPU time, not wall time: a loop in the parser burns it, a loaded machine does not */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int unwind_at(struct dwunw_ctx *ctx, const char *path, uint64_t pc)
{
	static uint8_t stack[STACK_SIZE];
	struct dwunw_regs regs;
	struct dwunw_frame frames[16];
	size_t nf = 16;
	char maps[PATH_MAX + 128];
	int n, err;

	n = snprintf(maps, sizeof(maps), "%llx-%llx r-xp 00000000 00:00 0 %s\n",
		     (unsigned long long)LOAD_BASE, (unsigned long long)LOAD_BASE + 0x10000, path);
	err = dwunw_maps_set(ctx, OFFLINE_PID, maps, (size_t)n);
	if (err)
		return err;
	memset(&regs, 0, sizeof(regs));
	regs.arch = DWUNW_ARCH_X86_64;
	regs.pid = regs.tid = OFFLINE_PID;
	regs.pc = LOAD_BASE + pc;
	regs.regs[7] = STACK_BASE + STACK_SIZE / 2;
	regs.regs[6] = STACK_BASE + STACK_SIZE / 2 + 64;
	regs.valid = (1ull << 7) | (1ull << 6);
	regs.stack_start = STACK_BASE;
	regs.stack = stack;
	regs.stack_size = STACK_SIZE;
	err = dwunw_capture(ctx, &regs, frames, &nf);
	dwunw_module_cache_release(ctx, frames, nf);
	return err;
}

static void check(const char *dir, const char *name, const char *unwind)
{
	struct dwunw_config cfg;
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	struct dwunw_table_info info;
	char path[PATH_MAX], rows[32] = "-", uw[64] = "-", real[PATH_MAX];
	uint64_t t0 = now_ns();
	int code;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.flags = DWUNW_CFG_NO_DEBUG_FILES;
	if (dwunw_init(&ctx, &cfg) != DWUNW_OK) {
		printf("%s INIT_FAILED - - 0\n", name);
		return;
	}
	code = dwunw_module_open(&ctx, real, &mod);
	if (code == DWUNW_OK) {
		code = dwunw_table_info(&ctx, mod, &info);
		if (code == DWUNW_OK) {
			snprintf(rows, sizeof(rows), "%" PRIu64, info.rows);
			code = info.first_error;
		}
		dwunw_module_put(&ctx, mod);
	}
	if (strcmp(unwind, "-") != 0) {
		uint64_t pc = strtoull(unwind, NULL, 16);
		snprintf(uw, sizeof(uw), "0x%" PRIx64 ":%s", pc, dwunw_errname(unwind_at(&ctx, real, pc)));
	}
	dwunw_shutdown(&ctx);
	printf("%s %s %s %s %" PRIu64 "\n", name, dwunw_errname(code), rows, uw, (now_ns() - t0) / 1000000);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[1024];
	FILE *f;

	if (argc != 3) {
		fprintf(stderr, "usage: %s MANIFEST DIR\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		char name[256], code[64], rows[32], unwind[64];
		if (line[0] == '#' || sscanf(line, "%255s %63s %31s %63s", name, code, rows, unwind) != 4)
			continue;
		check(argv[2], name, unwind);
	}
	fclose(f);
	return 0;
}
