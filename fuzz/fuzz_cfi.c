// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: raw .eh_frame / .debug_frame bytes through the CFI parser (cfi_parse.c), the
 * DW_CFA interpreter (cfi_exec.c), the table builder and look-ups (table.c, table_text.c) and the
 * expressions the table keeps (expr.c), without an ELF file around them.
 *
 * Input: a 12-byte header, then the section bytes.
 *   byte 0      flags: bit 0 .eh_frame rules (else .debug_frame), bit 1 4-byte addresses,
 *               bit 2 size unknown (stop at a zero terminator), bit 3 arm64 (else x86_64),
 *               bit 4 two sections: the bytes split at `split` into .eh_frame + .debug_frame,
 *               bit 5 one executable range [vaddr, vaddr + 16 MiB) (else any FDE is accepted)
 *   bytes 1-3   split offset (little-endian, 24 bits), used with bit 4
 *   bytes 4-11  vaddr of the section's first byte (the pcrel base; DW_EH_PE_indirect reads the
 *               section itself at that address)
 * Checked besides sanitizer reports: every FDE's rows come in increasing pc order inside the FDE,
 * table rows have strictly increasing pcs and each row's pc looks up to that row, the cached
 * look-up agrees with the plain one, and an expression that passed dw_expr_check evaluates
 * without a decoding error.
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfi.h"
#include "dwunw.h"
#include "expr.h"
#include "table.h"

#define HDR 12

static void fail(const char *what, unsigned long long a, unsigned long long b)
{
	fprintf(stderr, "fuzz_cfi: %s (0x%llx, 0x%llx)\n", what, a, b);
	abort();
}

struct sec_mem {
	const uint8_t *data;
	uint64_t size, vaddr;
};

/* DW_EH_PE_indirect and DW_OP_deref: the section's own bytes at its address. */
static int read_sec(void *arg, uint64_t vaddr, void *buf, size_t len)
{
	const struct sec_mem *m = arg;

	if (vaddr < m->vaddr || vaddr - m->vaddr > m->size || len > m->size - (vaddr - m->vaddr))
		return DWUNW_ERR_IO;
	memcpy(buf, m->data + (vaddr - m->vaddr), len);
	return DWUNW_OK;
}

static int read_reg(void *arg, unsigned reg, uint64_t *val)
{
	(void)arg;
	*val = 0x7ffc0000ull + 8ull * (reg & 63);
	return DWUNW_OK;
}

struct row_check {
	uint64_t begin, end, last;
	unsigned n;
};

static int on_row(void *arg, uint64_t pc, const struct dw_frame_state *st)
{
	struct row_check *rc = arg;

	(void)st;
	if (pc < rc->begin || pc >= rc->end)
		fail("row outside its FDE", pc, rc->begin);
	if (rc->n && pc <= rc->last)
		fail("rows not in increasing pc order", pc, rc->last);
	rc->last = pc;
	rc->n++;
	return 0;
}

/* Parse and run every CIE and FDE on its own, checking the row order. */
static void scan_and_run(const struct dw_cfi_section *s)
{
	struct dw_cfi_scan sc;
	struct dw_frame_state *cie_st = malloc(sizeof(*cie_st));

	if (!cie_st)
		return;
	if (dw_cfi_scan(s, &sc) == DWUNW_OK) {
		for (uint32_t i = 0; i < sc.nfdes; i++) {
			const struct dw_fde *f = &sc.fdes[i];
			struct row_check rc = { f->pc_begin, f->pc_end, 0, 0 };
			if (f->cie >= sc.ncies)
				fail("FDE names a CIE beyond the scan", f->cie, sc.ncies);
			if (dw_cfi_cie_state(s, &sc.cies[f->cie], cie_st) != DWUNW_OK)
				continue;
			dw_cfi_run_fde(s, &sc.cies[f->cie], cie_st, f, on_row, &rc);
		}
		dw_cfi_scan_free(&sc);
	}
	free(cie_st);
	/* A CIE parsed at the start, as a test would. */
	struct dw_cie cie;
	dw_cfi_parse_cie(s, 0, &cie);
}

static void walk_table(const struct dw_table *t, const struct dwunw_arch_ops *arch, struct sec_mem *mem,
		       unsigned addr_size)
{
	struct dwunw_row_text *txt = malloc(sizeof(*txt));
	uint64_t probes[8];

	if (!txt)
		return;
	for (uint32_t i = 0; i < t->nrows; i++) {
		uint64_t pc = t->base + dw_table_pc(t, i);
		if (i && dw_table_pc(t, i) <= dw_table_pc(t, i - 1))
			fail("table rows not strictly increasing", dw_table_pc(t, i), dw_table_pc(t, i - 1));
		if (dw_table_id(t, i) >= t->nrules)
			fail("row names a rule beyond the table", dw_table_id(t, i), t->nrules);
		if (dw_table_row_text(t, arch, i, txt) != DWUNW_OK)
			fail("dw_table_row_text failed on a row", i, t->nrows);
		if (txt->nregs > DWUNW_ROW_MAX_REGS || !memchr(txt->cfa, 0, sizeof(txt->cfa)))
			fail("row text out of bounds", txt->nregs, i);
		if (i < 4096) {
			int64_t r = dw_table_find(t, pc);
			if (r != (int64_t)i)
				fail("row pc does not look up its row", pc, (unsigned long long)r);
			if (dw_table_rule_at(t, pc) != dw_table_rule(t, (uint32_t)r))
				fail("cached look-up differs", pc, (unsigned long long)r);
		}
	}
	probes[0] = 0;
	probes[1] = UINT64_MAX;
	probes[2] = t->base - 1;
	probes[3] = t->base;
	probes[4] = t->nrows ? t->base + dw_table_pc(t, t->nrows - 1) + 1 : 1;
	probes[5] = t->base + 0x7fffffffull;
	probes[6] = t->base + 0x100000000ull;
	probes[7] = t->base + (t->nrows ? dw_table_pc(t, t->nrows / 2) : 0) + 3;
	for (unsigned i = 0; i < 8; i++) {
		int64_t r = dw_table_find(t, probes[i]);
		if (r >= (int64_t)t->nrows || r < -1)
			fail("look-up out of range", probes[i], (unsigned long long)r);
		if (dw_table_rule_at(t, probes[i]) != (r < 0 ? NULL : dw_table_rule(t, (uint32_t)r)))
			fail("cached look-up differs", probes[i], (unsigned long long)r);
	}
	free(txt);

	/* The expressions, as the unwinder would evaluate them. */
	for (uint32_t i = 0; i < t->nexprs; i++) {
		const struct dw_expr_ref *e = &t->exprs[i];
		struct dw_expr_env env = { (uint8_t)addr_size, read_reg, read_sec, mem };
		uint64_t out;
		int err;

		if (e->check != dw_expr_check(e->p, e->len, addr_size))
			fail("stored check result differs", (unsigned)e->check, i);
		err = dw_expr_eval(&env, e->p, e->len, 1, 0x7ffc1000ull, &out);
		if (e->check == DWUNW_OK && (err == DWUNW_ERR_CORRUPT || err == DWUNW_ERR_UNSUPPORTED_CFI))
			fail("checked expression failed to decode", (unsigned)err, i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dw_cfi_section sec[2];
	struct sec_mem mem[2];
	struct dw_table_input in;
	struct dw_table t;
	uint64_t range[1][2];
	uint8_t *copy[2] = { NULL, NULL };
	uint64_t len[2];
	uint8_t flags;
	uint32_t split;
	uint64_t vaddr;
	unsigned asz;
	int nsec, err;

	if (size < HDR)
		return 0;
	flags = data[0];
	split = data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16;
	memcpy(&vaddr, data + 4, 8);
	asz = (flags & 2) ? 4 : 8;
	if (asz == 4)
		vaddr &= 0xffffffffu;
	data += HDR;
	size -= HDR;

	nsec = (flags & 16) ? 2 : 1;
	len[0] = nsec == 2 && split < size ? split : size;
	len[1] = nsec == 2 ? size - len[0] : 0;
	/* Exact-size heap copies, so that reading past a section is an ASan report (malloc(0) is a
	 * valid pointer to nothing: an empty section in an ELF image is never NULL either). */
	for (int i = 0; i < nsec; i++) {
		copy[i] = malloc(len[i]);
		if (!copy[i])
			goto out;
		memcpy(copy[i], data + (i ? len[0] : 0), len[i]);
		mem[i] = (struct sec_mem){ copy[i], len[i], i ? 0 : vaddr };
		sec[i] = (struct dw_cfi_section){
			.data = copy[i],
			.size = len[i],
			.vaddr = i ? 0 : vaddr,
			.is_eh = i ? 0 : (flags & 1),
			.addr_size = (uint8_t)asz,
			.machine = (flags & 8) ? EM_AARCH64 : EM_X86_64,
			.size_unknown = i ? 0 : !!(flags & 4),
			.text_vaddr = vaddr + 0x1000,
			.data_vaddr = vaddr + 0x2000,
			.read_mem = read_sec,
			.arg = &mem[i],
		};
		scan_and_run(&sec[i]);
	}
	if (nsec == 2)
		sec[0].is_eh = 1; /* the first of two is the .eh_frame */

	memset(&in, 0, sizeof(in));
	in.eh_frame = nsec == 2 || (flags & 1) ? &sec[0] : NULL;
	in.debug_frame = nsec == 2 ? &sec[1] : (flags & 1) ? NULL : &sec[0];
	in.machine = sec[0].machine;
	in.addr_size = (uint8_t)asz;
	if (flags & 32) {
		range[0][0] = vaddr;
		range[0][1] = vaddr + (16u << 20);
		in.ranges = (const uint64_t (*)[2])range;
		in.nranges = 1;
	}
	err = dw_table_build(&in, &t);
	if (err == DWUNW_OK) {
		walk_table(&t, dwunw_arch_get((flags & 8) ? DWUNW_ARCH_ARM64 : DWUNW_ARCH_X86_64), &mem[0], asz);
		dw_table_free(&t);
	} else if (t.mem || t.nrows) {
		fail("a failed build left a table behind", (unsigned)err, t.nrows);
	}
out:
	free(copy[0]);
	free(copy[1]);
	return 0;
}
