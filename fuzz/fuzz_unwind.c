// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: dwunw_capture on random register sets and stack snapshots, against real
 * unwind tables: the maps of this very process (read once at start-up from /proc/self/maps) are
 * registered offline for a fake pid, so every pc falls into a real module (the fuzzer, libc, ld.so,
 * libelf, ...) whose table is built from its file, and no memory is read from a live process.
 * The vDSO is registered from this process's own image.
 *
 * Input (little-endian):
 *   byte 0      flags: bit 0 DWUNW_REGS_PC_IS_RETADDR, bits 1-2 arch (1 arm64, 2 mips32, else
 *               x86_64), bit 3 sp taken from the registers (else stack_start + sp_off), bit 4 pc
 *               taken from register 16 (else code mapping `map` + pc_off)
 *   byte 1      frame capacity - 1 (mod 64)
 *   byte 2      code mapping index (mod the number of executable file mappings)
 *   byte 3      unused
 *   bytes 4-7   pc offset in that mapping (mod its size)
 *   bytes 8-11  sp offset in the snapshot (mod its size + 1)
 *   bytes 12-19 the valid-register mask
 *   bytes 20-155  17 register values (DWARF 0-16; repeated for the 32/33 registers of mips/arm64)
 *   the rest    the stack snapshot, at STACK_START
 * Every 8-byte word of the registers and the stack is translated before use: 0xc0de.mm.oooooooo
 * becomes offset o (mod size) into code mapping m, 0x57ac...oooo becomes STACK_START + o; other
 * values stay. So the fuzzer can build return addresses that land in real code.
 *
 * DWUNW_FUZZ_MAKE_SEEDS=DIR: at start-up, write seeds into DIR from this process's own stack
 * (the real frames of libFuzzer's call chain, translated to the tags above), then fuzz as usual.
 *
 * Checked besides sanitizer reports: frames <= capacity, at least frame 0, a documented stop
 * reason, DEPTH only with a full buffer, a capture within 2 s, and no module reference left
 * behind once the frames are released (every module-cache slot warm again).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>
#include "dwunw.h"
#include "test/unit/testutil.h"

#define FAKE_PID     0x7ffffff0
#define STACK_START  0x7ffd00000000ull
#define HDR          156
#define NREG_IN      17
#define MAX_FRAMES   64
#define MAX_EXEC     64

static struct dwunw_ctx ctx;
static unsigned nseeds;
/* Executable mappings, ordered by path and offset (not by address: with ASLR the vDSO moves among
 * the libraries), so that an input picks the same code in every run. */
static struct code_map { uint64_t start, end, offset; char path[256]; } code[MAX_EXEC];
static unsigned ncode;

static void fail(const char *what, long long a, long long b)
{
	fprintf(stderr, "fuzz_unwind: %s (%lld, %lld)\n", what, a, b);
	abort();
}

static char *read_all(const char *path, size_t *len)
{
	char *buf = read_text(path, len);

	if (!buf)
		fail("cannot read /proc/self/maps", errno, 0);
	return buf;
}

static int cmp_code(const void *a, const void *b)
{
	const struct code_map *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	return c ? c : x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Executable file mappings of the maps text, and the vDSO's range. */
static void find_code(const char *maps, size_t len, uint64_t *vdso_lo, uint64_t *vdso_hi)
{
	const char *p = maps, *end = maps + len;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		unsigned long long lo, hi, off = 0;
		char perms[8] = "", path[256] = "";
		char line[1024];
		size_t n = (size_t)((eol ? eol : end) - p);

		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %255s", &lo, &hi, perms, &off, path) >= 3) {
			if (strcmp(path, "[vdso]") == 0) {
				*vdso_lo = lo;
				*vdso_hi = hi;
			}
			if (perms[2] == 'x' && (path[0] == '/' || path[0] == '[') && ncode < MAX_EXEC) {
				code[ncode].start = lo;
				code[ncode].end = hi;
				code[ncode].offset = off;
				snprintf(code[ncode].path, sizeof(code[ncode].path), "%s", path);
				ncode++;
			}
		}
		p = eol ? eol + 1 : end;
	}
	if (!ncode)
		fail("no executable mapping in /proc/self/maps", 0, 0);
	qsort(code, ncode, sizeof(code[0]), cmp_code);
}

static uint64_t translate(uint64_t w, uint64_t stack_len)
{
	if ((w >> 48) == 0xc0de) {
		unsigned m = (unsigned)((w >> 32) & 0xff) % ncode;
		uint64_t size = code[m].end - code[m].start;
		return code[m].start + (w & 0xffffffffu) % size;
	}
	if ((w >> 48) == 0x57ac)
		return STACK_START + (w & 0xffff) % (stack_len + 1);
	return w;
}

/* The reverse, for seeds made from real stacks. */
static uint64_t tag(uint64_t w, uint64_t sp, uint64_t len)
{
	for (unsigned m = 0; m < ncode; m++)
		if (w >= code[m].start && w < code[m].end)
			return 0xc0de000000000000ull | (uint64_t)m << 32 | (w - code[m].start);
	if (w >= sp && w - sp <= len && w - sp <= 0xffff)
		return 0x57ac000000000000ull | (w - sp);
	return w;
}

/* Copy the live stack: ASan's redzones are in it, so byte by byte and uninstrumented. */
__attribute__((no_sanitize("address"), noinline))
static void copy_stack(uint8_t *dst, uint64_t src, size_t len)
{
	const volatile uint8_t *s = (const volatile uint8_t *)(uintptr_t)src;

	for (size_t i = 0; i < len; i++)
		dst[i] = s[i];
}

/* Seeds: this process's registers and stack at a few depths of its own call chain. */
__attribute__((noinline)) static void write_seed(const char *dir, int depth)
{
	static uint64_t r[8];
	uint64_t stack_hi = 0;
	char path[4096];
	FILE *f;

	if (depth > 0) {
		write_seed(dir, depth - 1);
		BARRIER();
		return;
	}
#if defined(__x86_64__)
	CAPTURE_REGS(r);
#else
	return;
#endif
	{
		size_t len;
		char *maps = read_all("/proc/self/maps", &len);
		for (const char *p = maps; p < maps + len;) {
			unsigned long long lo, hi;
			if (sscanf(p, "%llx-%llx", &lo, &hi) == 2 && r[1] >= lo && r[1] < hi)
				stack_hi = hi;
			const char *eol = memchr(p, '\n', (size_t)(maps + len - p));
			p = eol ? eol + 1 : maps + len;
		}
		free(maps);
	}
	if (!stack_hi)
		return;
	for (unsigned window = 0; window < 3; window++) {
		size_t len = stack_hi - r[1];
		size_t want = window == 0 ? 2048 : window == 1 ? 16384 : 65536 - HDR;
		uint8_t *buf;
		uint64_t hdr_regs[NREG_IN] = { 0 };
		uint8_t hdr[HDR] = { 0 };
		uint64_t valid = (1ull << 3) | (1ull << 6) | (1ull << 7) | (0xfull << 12);

		if (len > want)
			len = want;
		buf = malloc(len);
		if (!buf)
			return;
		copy_stack(buf, r[1], len);
		for (size_t i = 0; i + 8 <= len; i += 8) {
			uint64_t w;
			memcpy(&w, buf + i, 8);
			w = tag(w, r[1], len);
			memcpy(buf + i, &w, 8);
		}
		hdr_regs[3] = tag(r[3], r[1], len);
		hdr_regs[6] = tag(r[2], r[1], len);
		hdr_regs[7] = tag(r[1], r[1], len);
		for (unsigned i = 0; i < 4; i++)
			hdr_regs[12 + i] = tag(r[4 + i], r[1], len);
		hdr_regs[16] = tag(r[0], r[1], len);
		hdr[0] = 0x10;                 /* pc from register 16 */
		hdr[1] = MAX_FRAMES - 1;
		memcpy(hdr + 12, &valid, 8);
		memcpy(hdr + 20, hdr_regs, sizeof(hdr_regs));
		snprintf(path, sizeof(path), "%s/self-%u-%zu", dir, nseeds++, len);
		f = fopen(path, "wb");
		if (f) {
			fwrite(hdr, 1, HDR, f);
			fwrite(buf, 1, len, f);
			fclose(f);
		}
		free(buf);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct dwunw_config cfg;
	struct dwunw_module *vdso;
	uint64_t vlo = 0, vhi = 0;
	size_t len;
	char *maps = read_all("/proc/self/maps", &len);
	const char *seeds = getenv("DWUNW_FUZZ_MAKE_SEEDS");

	(void)argc;
	(void)argv;
	find_code(maps, len, &vlo, &vhi);
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.cache_slots = 64;
	cfg.flags = DWUNW_CFG_NO_DEBUG_FILES;
	if (dwunw_init(&ctx, &cfg) != DWUNW_OK)
		fail("dwunw_init", 0, 0);
	if (dwunw_maps_set(&ctx, FAKE_PID, maps, len) != DWUNW_OK)
		fail("dwunw_maps_set", 0, 0);
	free(maps);
	/* Offline, "[vdso]" is served only by an image registered under that name. */
	if (vlo && getauxval(AT_SYSINFO_EHDR) == vlo &&
	    dwunw_module_open_image(&ctx, "[vdso]", (const void *)(uintptr_t)vlo, vhi - vlo, &vdso) == DWUNW_OK)
		dwunw_module_put(&ctx, vdso);
	if (seeds)
		write_seed(seeds, 0), write_seed(seeds, 3);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwunw_regs regs;
	struct dwunw_frame frames[MAX_FRAMES];
	struct dwunw_cache_stats st;
	struct dwunw_symbol sym;
	uint64_t in[NREG_IN], valid, t0, ns;
	uint32_t pc_off, sp_off;
	uint8_t *stack = NULL;
	size_t cap, nf, stack_len;
	int err;

	if (size < HDR)
		return 0;
	stack_len = size - HDR;
	memcpy(&pc_off, data + 4, 4);
	memcpy(&sp_off, data + 8, 4);
	memcpy(&valid, data + 12, 8);
	memcpy(in, data + 20, sizeof(in));

	memset(&regs, 0, sizeof(regs));
	switch ((data[0] >> 1) & 3) {
	case 1: regs.arch = DWUNW_ARCH_ARM64; break;
	case 2: regs.arch = DWUNW_ARCH_MIPS32; break;
	default: regs.arch = DWUNW_ARCH_X86_64; break;
	}
	const struct dwunw_arch_ops *ops = dwunw_arch_get((enum dwunw_arch)regs.arch);
	if (!ops)
		return 0;
	regs.flags = (data[0] & 1) ? DWUNW_REGS_PC_IS_RETADDR : 0;
	regs.pid = FAKE_PID;
	regs.tid = FAKE_PID;
	for (unsigned i = 0; i < DWUNW_MAX_REGS; i++)
		regs.regs[i] = translate(in[i % NREG_IN], stack_len);
	regs.valid = valid;
	if (!(data[0] & 8)) {
		regs.regs[ops->sp_reg] = STACK_START + sp_off % (stack_len + 1);
		regs.valid |= 1ull << ops->sp_reg;
	}
	if (data[0] & 0x10) {
		regs.pc = regs.regs[16];
	} else {
		unsigned m = data[2] % ncode;
		regs.pc = code[m].start + pc_off % (code[m].end - code[m].start);
	}
	if (stack_len) {
		/* Exact size, translated: reading past the snapshot is an ASan report. */
		stack = malloc(stack_len);
		if (!stack)
			return 0;
		memcpy(stack, data + HDR, stack_len);
		for (size_t i = 0; i + 8 <= stack_len; i += 8) {
			uint64_t w;
			memcpy(&w, stack + i, 8);
			w = translate(w, stack_len);
			memcpy(stack + i, &w, 8);
		}
		regs.stack_start = STACK_START;
		regs.stack = stack;
		regs.stack_size = stack_len;
	}

	cap = 1 + data[1] % MAX_FRAMES;
	nf = cap;
	t0 = now_ns();
	err = dwunw_capture(&ctx, &regs, frames, &nf);
	ns = now_ns() - t0;
	if (err > 0 || err < DWUNW_ERR_MIN)
		fail("undocumented result", err, 0);
	if (nf > cap)
		fail("more frames than the capacity", (long long)nf, (long long)cap);
	if (nf == 0 && err != DWUNW_ERR_UNSUPPORTED_ARCH && err != DWUNW_ERR_INVALID_ARG)
		fail("no frame 0", err, 0);
	if (err == DWUNW_ERR_DEPTH && nf != cap)
		fail("DEPTH with room left", (long long)nf, (long long)cap);
	if (ns > 2000000000ull)
		fail("a capture took more than 2 s", (long long)(ns / 1000000), (long long)nf);
	for (size_t i = 0; i < nf; i++) {
		if (frames[i].how > DWUNW_HOW_PROLOGUE)
			fail("unknown how", frames[i].how, (long long)i);
		if (frames[i].module && dwunw_symbolize_frame(&ctx, &frames[i], &sym) > 0)
			fail("dwunw_symbolize_frame", 0, (long long)i);
	}
	dwunw_module_cache_release(&ctx, frames, nf);
	if (dwunw_cache_stats(&ctx, &st) != DWUNW_OK || st.active != 0)
		fail("module references left after release", st.active, (long long)nf);
	free(stack);
	return 0;
}
