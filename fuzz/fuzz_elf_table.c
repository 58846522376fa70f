// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: an ELF image through the public API, as dwunw dump-table and the symbolizer
 * use it: dwunw_module_open_image (elf_file.c: headers, sections, decompression, build-id,
 * PT_GNU_EH_FRAME), dwunw_table_info (the table build from .eh_frame and .debug_frame),
 * dwunw_table_row over every row, dwunw_table_lookup, dwunw_symbolize (symbols.c, dwarf_line.c,
 * MiniDebugInfo in debuginfo.c).
 *
 * Input: the whole ELF file. A context per input (so no image outlives its input), separate debug
 * files off (they would be looked up on this machine by the input's build-id).
 * The table for look-ups is built by range whatever its size (DWUNW_LAZY_MIN_FDES=1, table_lazy.c):
 * every row's pc and the input's addresses are looked up through it too.
 * Checked besides sanitizer reports: rows in strictly increasing pc order, each row's pc looks up
 * to that row (or is an END row), documented error codes only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dwunw.h"
#include "module.h"
#include "table.h"

#define MAX_ROWS_WALKED  200000u
#define MAX_SYMBOLIZED   64u

static void fail(const char *what, long long a, long long b)
{
	fprintf(stderr, "fuzz_elf_table: %s (%lld, %lld)\n", what, a, b);
	abort();
}

static int documented(int err)
{
	return err <= 0 && err >= DWUNW_ERR_MIN;
}

static void symbolize(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr)
{
	struct dwunw_symbol sym;
	int err = dwunw_symbolize(ctx, mod, addr, &sym);

	if (!documented(err))
		fail("dwunw_symbolize: undocumented result", err, 0);
	if (!memchr(sym.name, 0, sizeof(sym.name)) || !memchr(sym.file, 0, sizeof(sym.file)))
		fail("dwunw_symbolize: unterminated string", err, 0);
	if (err == DWUNW_OK && sym.offset != addr - sym.sym_addr)
		fail("dwunw_symbolize: offset is not addr - sym_addr", (long long)sym.offset, (long long)sym.sym_addr);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("DWUNW_LAZY_MIN_FDES", "1", 1);
	return 0;
}

/* A look-up through the module's look-up table (lazy when it has .eh_frame_hdr). */
static void lookup_rule(struct dwunw_module *mod, uint64_t addr)
{
	const struct dw_table *t;
	int err = dw_module_table(mod, &t);

	if (!documented(err))
		fail("dw_module_table: undocumented result", err, 0);
	if (!err) {
		const struct dw_rule *r = dw_table_rule_at(t, addr);
		if (r && r->cfa_kind > DW_CFA_KIND_END)
			fail("look-up gave a rule of no kind", r->cfa_kind, (long long)addr);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwunw_config cfg;
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	struct dwunw_table_info info;
	struct dwunw_row_text *row;
	char bid[129];
	uint64_t prev = 0, nsym = 0;
	int err, terr;

	if (size == 0)
		return 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.cache_slots = 2;
	cfg.flags = DWUNW_CFG_NO_DEBUG_FILES;
	if (dwunw_init(&ctx, &cfg) != DWUNW_OK)
		fail("dwunw_init", 0, 0);
	row = malloc(sizeof(*row));
	if (!row)
		goto out;

	/* libFuzzer's data is an exact-size heap copy already: reads past it are ASan reports. */
	err = dwunw_module_open_image(&ctx, "fuzz.elf", data, size, &mod);
	if (!documented(err))
		fail("dwunw_module_open_image: undocumented result", err, 0);
	if (err)
		goto out;
	err = dwunw_module_build_id(mod, bid, sizeof(bid));
	if (err < 0 || err > 64 || (size_t)strlen(bid) != 2 * (size_t)err)
		fail("dwunw_module_build_id", err, (long long)strlen(bid));
	(void)dwunw_module_arch(mod);

	terr = dwunw_table_info(&ctx, mod, &info);
	if (!documented(terr))
		fail("dwunw_table_info: undocumented result", terr, 0);
	if (terr == DWUNW_OK) {
		if (!documented(info.first_error) || info.fdes_dropped > info.fdes + info.rows + 1)
			fail("dwunw_table_info: inconsistent", info.first_error, (long long)info.fdes_dropped);
		for (uint64_t i = 0; i < info.rows && i < MAX_ROWS_WALKED; i++) {
			err = dwunw_table_row(&ctx, mod, i, row);
			if (err)
				fail("dwunw_table_row failed on a row", err, (long long)i);
			if (i && row->pc <= prev)
				fail("rows not strictly increasing", (long long)row->pc, (long long)prev);
			if (row->nregs > DWUNW_ROW_MAX_REGS || !memchr(row->cfa, 0, sizeof(row->cfa)))
				fail("row text out of bounds", row->nregs, (long long)i);
			prev = row->pc;
			lookup_rule(mod, row->pc);
			int64_t r = dwunw_table_lookup(&ctx, mod, row->pc);
			if (strcmp(row->cfa, "end") == 0 ? r != DWUNW_ERR_NO_DWARF : r != (int64_t)i)
				fail("a row's pc does not look up its row", r, (long long)i);
			if (nsym < MAX_SYMBOLIZED && (i % 7) == 0) {
				symbolize(&ctx, mod, row->pc);
				nsym++;
			}
		}
		if (dwunw_table_row(&ctx, mod, info.rows, row) != DWUNW_ERR_INVALID_ARG)
			fail("dwunw_table_row past the end", (long long)info.rows, 0);
	}
	/* Addresses taken from the input itself, and the edges. */
	for (size_t i = 0; i + 8 <= size && i < 8 * 8; i += 8) {
		uint64_t a;
		memcpy(&a, data + i, 8);
		int64_t r = dwunw_table_lookup(&ctx, mod, a);
		if (r < DWUNW_ERR_MIN || (terr == DWUNW_OK && r >= (int64_t)info.rows))
			fail("dwunw_table_lookup out of range", r, (long long)info.rows);
		symbolize(&ctx, mod, a);
		lookup_rule(mod, a);
	}
	dwunw_table_lookup(&ctx, mod, 0);
	dwunw_table_lookup(&ctx, mod, UINT64_MAX);
	symbolize(&ctx, mod, 0);
	symbolize(&ctx, mod, UINT64_MAX);
out:
	free(row);
	if (mod)
		dwunw_module_put(&ctx, mod);
	dwunw_shutdown(&ctx);
	return 0;
}
