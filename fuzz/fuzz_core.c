// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: core files through dwunw_core_load (core.c: ELF header, PT_NOTE notes
 * (NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE), PT_LOAD segments, maps, the vDSO image), then
 * dwunw_capture on the threads it returns (the walk reads the core's memory and the module files
 * NT_FILE names).
 *
 * Input: the core file (written to a memfd and loaded through /proc/self/fd/N). One context for
 * the whole run, so module tables are built once; the core's pid is forgotten after each input.
 * Checked besides sanitizer reports: documented results, threads <= capacity, frames <= capacity,
 * and no module reference left once the frames are released and the core forgotten.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "dwunw.h"

#define MAX_THREADS 8
#define MAX_FRAMES  64

static struct dwunw_ctx ctx;
static int memfd = -1;
static char path[64];

static void fail(const char *what, long long a, long long b)
{
	fprintf(stderr, "fuzz_core: %s (%lld, %lld)\n", what, a, b);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct dwunw_config cfg;

	(void)argc;
	(void)argv;
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.cache_slots = 64;
	cfg.flags = DWUNW_CFG_NO_DEBUG_FILES;
	if (dwunw_init(&ctx, &cfg) != DWUNW_OK)
		fail("dwunw_init", 0, 0);
	memfd = memfd_create("fuzz-core", MFD_CLOEXEC);
	if (memfd < 0)
		fail("memfd_create", 0, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dwunw_core_thread threads[MAX_THREADS];
	static struct dwunw_core_info info;
	struct dwunw_frame frames[MAX_FRAMES];
	struct dwunw_cache_stats st;
	size_t n = MAX_THREADS, done = 0;
	int err;

	if (ftruncate(memfd, 0) != 0)
		fail("ftruncate", 0, 0);
	while (done < size) {
		ssize_t w = pwrite(memfd, data + done, size - done, (off_t)done);
		if (w <= 0)
			fail("pwrite", (long long)w, 0);
		done += (size_t)w;
	}

	err = dwunw_core_load(&ctx, path, NULL, threads, &n, &info);
	if (err > 0 || err < DWUNW_ERR_MIN)
		fail("undocumented result", err, 0);
	if (n > MAX_THREADS)
		fail("more threads than the capacity", (long long)n, MAX_THREADS);
	if (err != DWUNW_OK && err != DWUNW_ERR_CORRUPT && n != 0)
		fail("threads returned with an error", err, (long long)n);
	if (!memchr(info.comm, 0, sizeof(info.comm)) || !memchr(info.exe, 0, sizeof(info.exe)))
		fail("unterminated string in the info", 0, 0);

	for (size_t i = 0; i < n && i < 4; i++) {
		size_t nf = MAX_FRAMES;
		int r = dwunw_capture(&ctx, &threads[i].regs, frames, &nf);
		if (r > 0 || r < DWUNW_ERR_MIN || nf > MAX_FRAMES)
			fail("dwunw_capture", r, (long long)nf);
		dwunw_module_cache_release(&ctx, frames, nf);
	}
	if (info.pid)
		dwunw_maps_forget(&ctx, info.pid);
	if (dwunw_cache_stats(&ctx, &st) != DWUNW_OK || st.active != 0)
		fail("module references left after the core was forgotten", st.active, 0);
	return 0;
}
