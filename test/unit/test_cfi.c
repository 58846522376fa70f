// SPDX-License-Identifier: GPL-2.0-only
/* CIE/FDE parsing, pointer encodings, every DW_CFA opcode, and the table built from them. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "cfi.h"
#include "table.h"
#include "tap.h"

/* ---- a tiny assembler for CFI sections ---------------------------------------------------- */

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put8(struct buf *b, uint8_t v) { b->b[b->n++] = v; }
static void put32(struct buf *b, uint32_t v) { memcpy(b->b + b->n, &v, 4); b->n += 4; }
static void put64(struct buf *b, uint64_t v) { memcpy(b->b + b->n, &v, 8); b->n += 8; }
static void putbytes(struct buf *b, const void *p, size_t n) { if (n) memcpy(b->b + b->n, p, n); b->n += n; }
static void uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t x = v & 0x7f;
		v >>= 7;
		put8(b, x | (v ? 0x80 : 0));
	} while (v);
}
static void sleb(struct buf *b, int64_t v)
{
	for (;;) {
		uint8_t x = v & 0x7f;
		v >>= 6; /* arithmetic: keep sign */
		int done = (v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40));
		v >>= 1;
		if (done) { put8(b, x); return; }
		put8(b, x | 0x80);
		(void)0;
	}
}
static size_t begin_entry(struct buf *b) { size_t at = b->n; put32(b, 0); return at; }
static void end_entry(struct buf *b, size_t at)
{
	while ((b->n - at) % 4)
		put8(b, 0); /* DW_CFA_nop padding */
	uint32_t len = (uint32_t)(b->n - at - 4);
	memcpy(b->b + at, &len, 4);
}

/* .eh_frame CIE "zR" (pcrel|sdata4), code_align 1, data_align -8, RA 16, with insns. */
static size_t eh_cie(struct buf *b, const char *aug, const uint8_t *ins, size_t nins)
{
	size_t at = begin_entry(b);
	put32(b, 0);
	put8(b, 1);
	putbytes(b, aug, strlen(aug) + 1);
	uleb(b, 1);
	sleb(b, -8);
	put8(b, 16);
	if (aug[0] == 'z') {
		struct buf a = { .n = 0 };
		for (const char *p = aug + 1; *p; p++) {
			if (*p == 'R') put8(&a, DW_EH_PE_pcrel | DW_EH_PE_sdata4);
			if (*p == 'L') put8(&a, DW_EH_PE_pcrel | DW_EH_PE_sdata4);
			if (*p == 'P') { put8(&a, DW_EH_PE_udata4); put32(&a, 0x12345678); }
		}
		uleb(b, a.n);
		putbytes(b, a.b, a.n);
	}
	putbytes(b, ins, nins);
	end_entry(b, at);
	return at;
}

/* .eh_frame FDE for [pc, pc+len) against the CIE at cie_off; section vaddr is `vaddr`. */
static size_t eh_fde(struct buf *b, size_t cie_off, uint64_t vaddr, uint64_t pc, uint32_t len,
		     int has_z, const uint8_t *ins, size_t nins)
{
	size_t at = begin_entry(b);
	put32(b, (uint32_t)(b->n - cie_off));
	put32(b, (uint32_t)(int32_t)(pc - (vaddr + b->n)));
	put32(b, len);
	if (has_z)
		uleb(b, 0);
	putbytes(b, ins, nins);
	end_entry(b, at);
	return at;
}

static struct dw_cfi_section eh_section(const struct buf *b, uint64_t vaddr)
{
	return (struct dw_cfi_section){ .data = b->b, .size = b->n, .vaddr = vaddr, .is_eh = 1,
					.addr_size = 8, .machine = EM_X86_64 };
}

/* Rows of one FDE as text: "pc cfa reg=rule,..." lines. */
struct rows {
	char text[64][160];
	int n;
};

static void state_text(const struct dw_frame_state *st, char *out, size_t len)
{
	size_t o = 0;
	if (st->cfa_kind == DW_CFA_KIND_REG)
		o += snprintf(out + o, len - o, "r%u%+lld", st->cfa_reg, (long long)st->cfa_off);
	else if (st->cfa_kind == DW_CFA_KIND_EXPR)
		o += snprintf(out + o, len - o, "exp[%u]", st->cfa_expr_len);
	else
		o += snprintf(out + o, len - o, "none");
	if (st->ra_signed)
		o += snprintf(out + o, len - o, " ras");
	for (unsigned r = 0; r < DW_MAX_COLS; r++) {
		if (!(st->set[r / 64] & (1ull << (r % 64))))
			continue;
		const struct dw_col *c = &st->col[r];
		static const char *k[] = { "?", "u", "s", "c", "v", "r", "exp", "vexp" };
		o += snprintf(out + o, len - o, " %u=%s", r, k[c->kind]);
		if (c->kind == DW_RULE_OFFSET || c->kind == DW_RULE_VAL_OFFSET)
			o += snprintf(out + o, len - o, "%+lld", (long long)c->val);
		else if (c->kind == DW_RULE_REG)
			o += snprintf(out + o, len - o, "%lld", (long long)c->val);
		else if (c->kind >= DW_RULE_EXPR)
			o += snprintf(out + o, len - o, "[%u]", c->expr_len);
	}
}

static int collect(void *arg, uint64_t pc, const struct dw_frame_state *st)
{
	struct rows *r = arg;
	char s[140];
	state_text(st, s, sizeof(s));
	if (r->n < 64)
		snprintf(r->text[r->n++], sizeof(r->text[0]), "%llx %s", (unsigned long long)pc, s);
	return 0;
}

/* Run `ins` as an FDE body under a CIE with `cie_ins`; rows into r; returns the run's error. */
static int run(const uint8_t *cie_ins, size_t ncie, const uint8_t *ins, size_t nins, struct rows *r)
{
	static struct buf b;
	struct dw_cfi_scan sc;
	struct dw_frame_state init;
	int err;

	memset(&b, 0, sizeof(b));
	memset(r, 0, sizeof(*r));
	size_t cie = eh_cie(&b, "zR", cie_ins, ncie);
	eh_fde(&b, cie, 0x1000, 0x2000, 0x100, 1, ins, nins);
	struct dw_cfi_section s = eh_section(&b, 0x1000);
	err = dw_cfi_scan(&s, &sc);
	if (err || sc.nfdes != 1 || sc.ncies != 1) {
		dw_cfi_scan_free(&sc);
		return err ? err : -100;
	}
	err = dw_cfi_cie_state(&s, &sc.cies[0], &init);
	if (!err)
		err = dw_cfi_run_fde(&s, &sc.cies[0], &init, &sc.fdes[0], collect, r);
	dw_cfi_scan_free(&sc);
	return err;
}

static const uint8_t x86_cie[] = { 0x0c, 7, 8, 0x90, 1 }; /* def_cfa rsp+8; offset r16 c-8 */

static void expect_rows(const uint8_t *ins, size_t n, const char *const *want, int nwant, const char *what)
{
	struct rows r;
	int err = run(x86_cie, sizeof(x86_cie), ins, n, &r);
	int same = !err && r.n == nwant;
	for (int i = 0; same && i < nwant; i++)
		same = strcmp(r.text[i], want[i]) == 0;
	ok(same, "%s", what);
	if (!same) {
		printf("  # err %d, %d rows\n", err, r.n);
		for (int i = 0; i < r.n; i++)
			printf("  #   got  %s\n", r.text[i]);
		for (int i = 0; i < nwant; i++)
			printf("  #   want %s\n", want[i]);
	}
}

#define ROWS(ins, what, ...) do { \
	static const uint8_t i_[] = ins; \
	static const char *const w_[] = { __VA_ARGS__ }; \
	expect_rows(i_, sizeof(i_), w_, (int)(sizeof(w_) / sizeof(w_[0])), what); \
} while (0)
#define B(...) { __VA_ARGS__ }

static void test_opcodes(void)
{
	ROWS(B(0x00), "DW_CFA_nop", "2000 r7+8 16=c-8");
	ROWS(B(0x41, 0x0e, 16, 0x42, 0x0e, 24), "advance_loc + def_cfa_offset",
	     "2000 r7+8 16=c-8", "2001 r7+16 16=c-8", "2003 r7+24 16=c-8");
	ROWS(B(0x02, 0x10, 0x0e, 16), "advance_loc1", "2000 r7+8 16=c-8", "2010 r7+16 16=c-8");
	ROWS(B(0x03, 0x20, 0x00, 0x0e, 16), "advance_loc2", "2000 r7+8 16=c-8", "2020 r7+16 16=c-8");
	ROWS(B(0x04, 0x30, 0, 0, 0, 0x0e, 16), "advance_loc4", "2000 r7+8 16=c-8", "2030 r7+16 16=c-8");
	ROWS(B(0x86, 2), "DW_CFA_offset r6", "2000 r7+8 6=c-16 16=c-8");
	ROWS(B(0x05, 0x06, 3), "offset_extended", "2000 r7+8 6=c-24 16=c-8");
	ROWS(B(0x11, 0x06, 0x7e), "offset_extended_sf (-2 * -8)", "2000 r7+8 6=c+16 16=c-8");
	ROWS(B(0x2f, 0x06, 2), "GNU_negative_offset_extended", "2000 r7+8 6=c+16 16=c-8");
	ROWS(B(0x14, 0x06, 2), "val_offset", "2000 r7+8 6=v-16 16=c-8");
	ROWS(B(0x15, 0x06, 0x7f), "val_offset_sf", "2000 r7+8 6=v+8 16=c-8");
	ROWS(B(0x86, 2, 0x41, 0xc6), "DW_CFA_restore to no rule",
	     "2000 r7+8 6=c-16 16=c-8", "2001 r7+8 16=c-8");
	ROWS(B(0x90, 3, 0x41, 0x06, 16), "restore_extended to the CIE rule",
	     "2000 r7+8 16=c-24", "2001 r7+8 16=c-8");
	{
		/* DW_CFA_restore inside the CIE keeps the rule it set (readelf's reading) */
		static const uint8_t cie_restore[] = { 0x0c, 7, 8, 0x90, 1, 0x83, 2, 0xc3 };
		static const uint8_t none[] = { 0 };
		struct rows rr;
		ok(run(cie_restore, sizeof(cie_restore), none, 1, &rr) == 0 && rr.n == 1 &&
		   strcmp(rr.text[0], "2000 r7+8 3=c-16 16=c-8") == 0, "restore in a CIE is a no-op");
	}
	ROWS(B(0x07, 3), "undefined", "2000 r7+8 3=u 16=c-8");
	ROWS(B(0x08, 3), "same_value", "2000 r7+8 3=s 16=c-8");
	ROWS(B(0x09, 3, 10), "register", "2000 r7+8 3=r10 16=c-8");
	ROWS(B(0x0e, 16, 0x86, 2, 0x0a, 0x41, 0x0e, 64, 0x83, 3, 0x41, 0x0b),
	     "remember_state/restore_state restore the CFA too",
	     "2000 r7+16 6=c-16 16=c-8", "2001 r7+64 3=c-24 6=c-16 16=c-8", "2002 r7+16 6=c-16 16=c-8");
	ROWS(B(0x0c, 6, 16), "def_cfa", "2000 r6+16 16=c-8");
	ROWS(B(0x12, 6, 0x7e), "def_cfa_sf (-2 * -8)", "2000 r6+16 16=c-8");
	ROWS(B(0x0d, 6), "def_cfa_register keeps the offset", "2000 r6+8 16=c-8");
	ROWS(B(0x13, 0x7c), "def_cfa_offset_sf (-4 * -8)", "2000 r7+32 16=c-8");
	ROWS(B(0x0f, 3, 0x77, 8, 0x06), "def_cfa_expression", "2000 exp[3] 16=c-8");
	ROWS(B(0x10, 6, 2, 0x70, 0x10), "expression", "2000 r7+8 6=exp[2] 16=c-8");
	ROWS(B(0x16, 6, 2, 0x70, 0x10), "val_expression", "2000 r7+8 6=vexp[2] 16=c-8");
	ROWS(B(0x2e, 32), "GNU_args_size is accepted", "2000 r7+8 16=c-8");
	ROWS(B(0x41, 0x40, 0x0e, 16), "advance by 0 keeps one row per location",
	     "2000 r7+8 16=c-8", "2001 r7+16 16=c-8");
	ROWS(B(0x04, 0x00, 0x10, 0, 0, 0x0e, 16), "advancing past the FDE end stops rows",
	     "2000 r7+8 16=c-8");

	struct rows r;
	static const uint8_t unknown[] = { 0x3e };
	is_int(run(x86_cie, sizeof(x86_cie), unknown, 1, &r), DWUNW_ERR_UNSUPPORTED_CFI, "unknown opcode → UNSUPPORTED_CFI");
	static const uint8_t sparc[] = { 0x2d };
	is_int(run(x86_cie, sizeof(x86_cie), sparc, 1, &r), DWUNW_ERR_UNSUPPORTED_CFI, "0x2d outside arm64 → UNSUPPORTED_CFI");
	static const uint8_t underflow[] = { 0x0b };
	is_int(run(x86_cie, sizeof(x86_cie), underflow, 1, &r), DWUNW_ERR_CORRUPT, "restore_state without remember → CORRUPT");
	static const uint8_t trunc[] = { 0x05, 0x86 };
	is_int(run(x86_cie, sizeof(x86_cie), trunc, 2, &r), DWUNW_ERR_CORRUPT, "LEB128 running past the entry → CORRUPT");
	static const uint8_t bigreg[] = { 0x07, 0x80, 0x02 };
	is_int(run(x86_cie, sizeof(x86_cie), bigreg, 3, &r), DWUNW_ERR_UNSUPPORTED_CFI, "register 256 → UNSUPPORTED_CFI");
	static const uint8_t back[] = { 0x41, 0x01, 0x00, 0x00, 0x00, 0x00 };
	is_int(run(x86_cie, sizeof(x86_cie), back, sizeof(back), &r), DWUNW_ERR_CORRUPT, "set_loc backwards → CORRUPT");
	uint8_t deep[40];
	memset(deep, 0x0a, sizeof(deep));
	is_int(run(x86_cie, sizeof(x86_cie), deep, sizeof(deep), &r), DWUNW_ERR_CORRUPT, "remember_state deeper than the limit → CORRUPT");
	static const uint8_t blk[] = { 0x0f, 0x7f };
	is_int(run(x86_cie, sizeof(x86_cie), blk, 2, &r), DWUNW_ERR_CORRUPT, "expression block longer than the entry → CORRUPT");
}

/* DW_CFA_set_loc uses the CIE's pointer encoding: here udata4, absolute. */
static void test_set_loc(void)
{
	static struct buf b;
	struct dw_cfi_scan sc;
	struct dw_frame_state init;
	struct rows r = { .n = 0 };

	memset(&b, 0, sizeof(b));
	size_t cie = begin_entry(&b);
	put32(&b, 0);
	put8(&b, 1);
	putbytes(&b, "zR", 3);
	uleb(&b, 1);
	sleb(&b, -8);
	put8(&b, 16);
	uleb(&b, 1);
	put8(&b, DW_EH_PE_udata4);
	putbytes(&b, x86_cie, sizeof(x86_cie));
	end_entry(&b, cie);
	size_t at = begin_entry(&b);
	put32(&b, (uint32_t)(b.n - cie));
	put32(&b, 0x2000);
	put32(&b, 0x40);
	uleb(&b, 0);
	put8(&b, 0x01);
	put32(&b, 0x2010);
	put8(&b, 0x0e);
	put8(&b, 16);
	end_entry(&b, at);
	struct dw_cfi_section s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 1, "udata4 CIE scans");
	dw_cfi_cie_state(&s, &sc.cies[0], &init);
	is_int(dw_cfi_run_fde(&s, &sc.cies[0], &init, &sc.fdes[0], collect, &r), 0, "set_loc runs");
	ok(r.n == 2 && strcmp(r.text[1], "2010 r7+16 16=c-8") == 0, "set_loc moves to 0x2010");
	dw_cfi_scan_free(&sc);
}

static void test_arm64_negate_ra(void)
{
	static struct buf b;
	static const uint8_t cie_ins[] = { 0x0c, 31, 0 };
	static const uint8_t ins[] = { 0x2d, 0x44, 0x0e, 16, 0x9e, 2, 0x44, 0x2d };
	struct dw_cfi_scan sc;
	struct dw_frame_state init;
	struct rows r = { .n = 0 };

	memset(&b, 0, sizeof(b));
	size_t cie = eh_cie(&b, "zR", cie_ins, sizeof(cie_ins));
	eh_fde(&b, cie, 0, 0x400, 0x40, 1, ins, sizeof(ins));
	struct dw_cfi_section s = eh_section(&b, 0);
	s.machine = EM_AARCH64;
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 1, "arm64 section scans");
	dw_cfi_cie_state(&s, &sc.cies[0], &init);
	is_int(dw_cfi_run_fde(&s, &sc.cies[0], &init, &sc.fdes[0], collect, &r), 0, "negate_ra_state runs");
	is_int(r.n, 3, "three rows");
	ok(strstr(r.text[0], " ras") != NULL, "signed from the first instruction");
	ok(strstr(r.text[1], " ras") != NULL && strstr(r.text[1], "30=c-16"), "still signed after the prologue");
	ok(strstr(r.text[2], " ras") == NULL, "toggled back by the second negate_ra_state");
	dw_cfi_scan_free(&sc);
}

/* DWARF 5, Appendix D.6: the call-frame example for a hypothetical RISC machine. */
static void test_dwarf5_example(void)
{
	static struct buf b;
	struct dw_cfi_scan sc;
	struct dw_frame_state init;
	struct rows r = { .n = 0 };

	memset(&b, 0, sizeof(b));
	/* CIE: 32-bit .debug_frame, version 4, address size 4, code align 4, data align -4, RA 8 */
	size_t cie = begin_entry(&b);
	put32(&b, 0xffffffff);
	put8(&b, 4);
	put8(&b, 0);
	put8(&b, 4);
	put8(&b, 0);
	uleb(&b, 4);
	sleb(&b, -4);
	uleb(&b, 8);
	static const uint8_t cie_ins[] = {
		0x0c, 7, 0,        /* def_cfa (7, 0) */
		0x08, 0,           /* same_value (0) */
		0x07, 1, 0x07, 2, 0x07, 3,
		0x08, 4, 0x08, 5, 0x08, 6, 0x08, 7,
		0x09, 8, 1,        /* register (8, 1) */
	};
	putbytes(&b, cie_ins, sizeof(cie_ins));
	end_entry(&b, cie);
	is_int(b.n, 40, "the example's CIE is 40 bytes");
	size_t fde = begin_entry(&b);
	put32(&b, (uint32_t)cie);
	put32(&b, 0x1000); /* foo */
	put32(&b, 84);
	static const uint8_t fde_ins[] = {
		0x41, 0x0e, 12,    /* advance_loc(1); def_cfa_offset(12) */
		0x41, 0x88, 1,     /* advance_loc(1); offset(8, 1) */
		0x41, 0x86, 2,     /* advance_loc(1); offset(6, 2) */
		0x41, 0x0d, 6,     /* advance_loc(1); def_cfa_register(6) */
		0x41, 0x84, 3,     /* advance_loc(1); offset(4, 3) */
		0x4b, 0xc4,        /* advance_loc(11); restore(4) */
		0x41, 0xc6, 0x0d, 7, /* advance_loc(1); restore(6); def_cfa_register(7) */
		0x41, 0xc8,        /* advance_loc(1); restore(8) */
		0x41, 0x0e, 0,     /* advance_loc(1); def_cfa_offset(0) */
	};
	putbytes(&b, fde_ins, sizeof(fde_ins));
	end_entry(&b, fde);
	is_int(b.n - fde, 44, "the example's FDE is 44 bytes");

	struct dw_cfi_section s = { .data = b.b, .size = b.n, .is_eh = 0, .addr_size = 4, .machine = 0 };
	is_int(dw_cfi_scan(&s, &sc), 0, "D.6 section scans");
	is_int(sc.ncies, 1, "one CIE");
	is_int(sc.nfdes, 1, "one FDE");
	if (sc.ncies != 1 || sc.nfdes != 1)
		return;
	is_int(sc.cies[0].version, 4, "CIE version 4");
	is_int(sc.cies[0].code_align, 4, "code alignment 4");
	is_int(sc.cies[0].data_align, -4, "data alignment -4");
	is_int(sc.cies[0].ra_reg, 8, "return address in R8");
	is_hex(sc.fdes[0].pc_begin, 0x1000, "initial location foo");
	is_hex(sc.fdes[0].pc_end, 0x1000 + 84, "address range 84");
	is_int(dw_cfi_cie_state(&s, &sc.cies[0], &init), 0, "CIE program runs");
	is_int(dw_cfi_run_fde(&s, &sc.cies[0], &init, &sc.fdes[0], collect, &r), 0, "FDE program runs");
	/* Figure D.? of the spec, one row per location. */
	static const char *const want[] = {
		"1000 r7+0 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=r1",
		"1004 r7+12 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=r1",
		"1008 r7+12 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=c-4",
		"100c r7+12 0=s 1=u 2=u 3=u 4=s 5=s 6=c-8 7=s 8=c-4",
		"1010 r6+12 0=s 1=u 2=u 3=u 4=s 5=s 6=c-8 7=s 8=c-4",
		"1014 r6+12 0=s 1=u 2=u 3=u 4=c-12 5=s 6=c-8 7=s 8=c-4",
		"1040 r6+12 0=s 1=u 2=u 3=u 4=s 5=s 6=c-8 7=s 8=c-4",
		"1044 r7+12 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=c-4",
		"1048 r7+12 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=r1",
		"104c r7+0 0=s 1=u 2=u 3=u 4=s 5=s 6=s 7=s 8=r1",
	};
	int same = r.n == 10;
	for (int i = 0; same && i < 10; i++)
		same = strcmp(r.text[i], want[i]) == 0;
	ok(same, "rows equal the spec's table");
	if (!same)
		for (int i = 0; i < r.n; i++)
			printf("  # %s\n", r.text[i]);

	/* The same through the table compiler: 10 rows + the END gap, readelf notation. */
	struct dw_table t;
	struct dw_table_input in = { .debug_frame = &s, .addr_size = 4 };
	is_int(dw_table_build(&in, &t), 0, "table builds");
	is_int(t.nrows, 11, "10 rows and an END row");
	struct dwunw_row_text rt;
	dw_table_row_text(&t, NULL, 5, &rt);
	is_hex(rt.pc, 0x1014, "row 5 at foo+20");
	is_str(rt.cfa, "r6+12", "row 5 CFA");
	ok(rt.nregs == 9 && strcmp(rt.regs[4].rule, "c-12") == 0 && strcmp(rt.regs[8].name, "ra") == 0 &&
	   strcmp(rt.regs[8].rule, "c-4") == 0, "row 5 rules in readelf notation");
	dw_table_row_text(&t, NULL, 8, &rt);
	is_str(rt.regs[8].rule, "r1", "DW_CFA_register without a name prints rN");
	dw_table_row_text(&t, NULL, 10, &rt);
	ok(rt.pc == 0x1000 + 84 && strcmp(rt.cfa, "end") == 0, "END row at the FDE end");
	is_int(dw_table_find(&t, 0x1015), 5, "lookup inside row 5");
	is_int(dw_table_find(&t, 0xfff), -1, "lookup before the table");
	is_int(dw_table_find(&t, 0x2000), 10, "lookup past the end gives the END row");
	dw_table_free(&t);
	dw_cfi_scan_free(&sc);
}

static int fake_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	(void)arg;
	if (addr != 0x5000)
		return DWUNW_ERR_INVALID_ARG;
	uint64_t v = 0xdeadbeef;
	memcpy(buf, &v, len);
	return 0;
}

static void test_encodings(void)
{
	uint8_t data[64] = { 0 };
	struct dw_cfi_section s = { .data = data, .size = sizeof(data), .vaddr = 0x1000, .is_eh = 1,
				    .addr_size = 8, .text_vaddr = 0x400000, .data_vaddr = 0x600000,
				    .read_mem = fake_mem };
	struct dw_cursor c;
	uint64_t v;

#define ENC(bytes, enc, func, want, what) do { \
	static const uint8_t b_[] = bytes; \
	memset(data, 0, sizeof(data)); \
	memcpy(data + 8, b_, sizeof(b_)); \
	cur_init(&c, data + 8, sizeof(data) - 8); \
	int e_ = dw_read_encoded(&s, &c, enc, func, &v); \
	ok(e_ == 0 && v == (uint64_t)(want), "%s", what); \
	if (e_ || v != (uint64_t)(want)) printf("  # err %d got 0x%llx\n", e_, (unsigned long long)v); \
} while (0)
	ENC(B(1, 2, 3, 4, 5, 6, 7, 8), DW_EH_PE_absptr, 0, 0x0807060504030201ull, "absptr (8 bytes)");
	ENC(B(0xe5, 0x8e, 0x26), DW_EH_PE_uleb128, 0, 624485, "uleb128");
	ENC(B(0x34, 0x12), DW_EH_PE_udata2, 0, 0x1234, "udata2");
	ENC(B(0x78, 0x56, 0x34, 0x12), DW_EH_PE_udata4, 0, 0x12345678, "udata4");
	ENC(B(1, 0, 0, 0, 0, 0, 0, 0x80), DW_EH_PE_udata8, 0, 0x8000000000000001ull, "udata8");
	ENC(B(0x7f), DW_EH_PE_sleb128, 0, -1, "sleb128");
	ENC(B(0xfe, 0xff), DW_EH_PE_sdata2, 0, -2, "sdata2");
	ENC(B(0xfc, 0xff, 0xff, 0xff), DW_EH_PE_sdata4, 0, -4, "sdata4");
	ENC(B(0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), DW_EH_PE_sdata8, 0, -8, "sdata8");
	ENC(B(0x10, 0, 0, 0), DW_EH_PE_pcrel | DW_EH_PE_sdata4, 0, 0x1008 + 0x10, "pcrel from the field's address");
	ENC(B(0x10, 0, 0, 0), DW_EH_PE_textrel | DW_EH_PE_udata4, 0, 0x400010, "textrel");
	ENC(B(0x10, 0, 0, 0), DW_EH_PE_datarel | DW_EH_PE_udata4, 0, 0x600010, "datarel");
	ENC(B(0x10, 0, 0, 0), DW_EH_PE_funcrel | DW_EH_PE_udata4, 0x7000, 0x7010, "funcrel");
	ENC(B(0x00, 0x50, 0, 0), DW_EH_PE_indirect | DW_EH_PE_udata4, 0, 0xdeadbeef, "indirect reads the pointer");
	ENC(B(0), DW_EH_PE_omit, 0, 0, "omit");

	/* aligned: the value is at the next 8-byte boundary in memory */
	memset(data, 0, sizeof(data));
	uint64_t val = 0x1122334455667788ull;
	memcpy(data + 16, &val, 8);
	cur_init(&c, data + 11, sizeof(data) - 11);
	ok(dw_read_encoded(&s, &c, DW_EH_PE_aligned, 0, &v) == 0 && v == val && c.p == data + 24, "aligned");

	s.addr_size = 4;
	ENC(B(0xff, 0xff, 0xff, 0xff), DW_EH_PE_pcrel | DW_EH_PE_sdata4, 0, 0x1008 - 1, "pcrel wraps to 32 bits");
	ENC(B(4, 3, 2, 1), DW_EH_PE_absptr, 0, 0x01020304, "absptr (4 bytes)");
	s.addr_size = 8;

	memset(data, 0, sizeof(data));
	cur_init(&c, data, 2);
	is_int(dw_read_encoded(&s, &c, DW_EH_PE_udata4, 0, &v), DWUNW_ERR_CORRUPT, "truncated value → CORRUPT");
	cur_init(&c, data, 8);
	is_int(dw_read_encoded(&s, &c, 0x07, 0, &v), DWUNW_ERR_CORRUPT, "unknown value format → CORRUPT");
	cur_init(&c, data, 8);
	is_int(dw_read_encoded(&s, &c, 0x60 | DW_EH_PE_udata4, 0, &v), DWUNW_ERR_CORRUPT, "unknown application → CORRUPT");
	s.read_mem = NULL;
	cur_init(&c, data, 8);
	is_int(dw_read_encoded(&s, &c, DW_EH_PE_indirect | DW_EH_PE_udata4, 0, &v), DWUNW_ERR_UNSUPPORTED_CFI, "indirect without a reader");
}

static void test_cie_forms(void)
{
	static struct buf b;
	struct dw_cfi_scan sc;

	/* augmentations z P L R S B, and an FDE with an LSDA */
	memset(&b, 0, sizeof(b));
	size_t cie = eh_cie(&b, "zPLRSB", x86_cie, sizeof(x86_cie));
	size_t at = begin_entry(&b);
	put32(&b, (uint32_t)(b.n - cie));
	put32(&b, (uint32_t)(int32_t)(0x3000 - (0x1000 + b.n)));
	put32(&b, 0x20);
	uleb(&b, 4);
	put32(&b, (uint32_t)(int32_t)(0x9000 - (0x1000 + b.n)));
	end_entry(&b, at);
	struct dw_cfi_section s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.ncies == 1 && sc.nfdes == 1, "zPLRSB parses");
	if (sc.ncies == 1 && sc.nfdes == 1) {
		ok(sc.cies[0].signal && sc.cies[0].b_key && sc.cies[0].personality == 0x12345678, "S, B and P recorded");
		is_hex(sc.fdes[0].pc_begin, 0x3000, "FDE start through R");
		is_hex(sc.fdes[0].lsda, 0x9000, "LSDA through L");
	}
	dw_cfi_scan_free(&sc);

	/* version 3 (uleb RA), 64-bit .debug_frame lengths and CIE id */
	memset(&b, 0, sizeof(b));
	put32(&b, 0xffffffff);
	size_t lenpos = b.n;
	put64(&b, 0);
	put64(&b, UINT64_MAX);
	put8(&b, 3);
	put8(&b, 0);
	uleb(&b, 1);
	sleb(&b, -8);
	uleb(&b, 16);
	putbytes(&b, x86_cie, sizeof(x86_cie));
	while ((b.n - lenpos - 8) % 8) put8(&b, 0);
	uint64_t l = b.n - lenpos - 8;
	memcpy(b.b + lenpos, &l, 8);
	put32(&b, 0xffffffff);
	lenpos = b.n;
	put64(&b, 0);
	put64(&b, 0); /* CIE at offset 0 */
	put64(&b, 0x4000);
	put64(&b, 0x10);
	put8(&b, 0x41);
	put8(&b, 0x0e);
	put8(&b, 16);
	while ((b.n - lenpos - 8) % 8) put8(&b, 0);
	l = b.n - lenpos - 8;
	memcpy(b.b + lenpos, &l, 8);
	struct dw_cfi_section d = { .data = b.b, .size = b.n, .addr_size = 8, .machine = EM_X86_64 };
	ok(dw_cfi_scan(&d, &sc) == 0 && sc.ncies == 1 && sc.nfdes == 1 && sc.bad == 0, "64-bit DWARF .debug_frame, CIE version 3");
	if (sc.nfdes == 1)
		ok(sc.cies[0].version == 3 && sc.cies[0].ra_reg == 16 && sc.fdes[0].pc_begin == 0x4000 &&
		   sc.fdes[0].pc_end == 0x4010, "its fields");
	dw_cfi_scan_free(&sc);

	/* "S" without 'z' (GNU as in .debug_frame) is understood */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "S", x86_cie, sizeof(x86_cie));
	at = begin_entry(&b);
	put32(&b, (uint32_t)(b.n - cie));
	put64(&b, 0x2000); /* no 'R': absolute pointers */
	put64(&b, 0x10);
	end_entry(&b, at);
	s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 1 && sc.bad == 0 && sc.cies[0].signal, "augmentation \"S\" without z");
	dw_cfi_scan_free(&sc);

	/* unknown augmentation without 'z': the CIE and its FDEs are skipped, reported once */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "xy", x86_cie, sizeof(x86_cie));
	eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 0, NULL, 0);
	s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 0 && sc.bad == 2 && sc.first_err == DWUNW_ERR_UNSUPPORTED_CFI,
	   "unknown augmentation → UNSUPPORTED_CFI, entries skipped");
	dw_cfi_scan_free(&sc);

	/* CIE pointer out of range, and pointing at an FDE */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	size_t f1 = eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 1, NULL, 0);
	size_t f2 = eh_fde(&b, cie, 0x1000, 0x2100, 0x10, 1, NULL, 0);
	uint32_t bogus = 0x7fffffff;
	memcpy(b.b + f1 + 4, &bogus, 4);
	uint32_t to_fde = (uint32_t)(f2 + 4 - f1);
	memcpy(b.b + f2 + 4, &to_fde, 4);
	s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 0 && sc.bad == 2 && sc.first_err == DWUNW_ERR_CORRUPT &&
	   sc.first_err_off == f1, "CIE pointer out of range or at an FDE → CORRUPT at its offset");
	dw_cfi_scan_free(&sc);

	/* a length running past the section ends the scan, keeps what came before */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 1, NULL, 0);
	size_t f3 = eh_fde(&b, cie, 0x1000, 0x2100, 0x10, 1, NULL, 0);
	uint32_t huge = 0x10000;
	memcpy(b.b + f3, &huge, 4);
	s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 1 && sc.first_err == DWUNW_ERR_CORRUPT, "overlong length stops the scan");
	dw_cfi_scan_free(&sc);

	/* zero terminator: skipped with an exact size, the end with a bounded one */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 1, NULL, 0);
	put32(&b, 0);
	eh_fde(&b, cie, 0x1000, 0x2100, 0x10, 1, NULL, 0);
	s = eh_section(&b, 0x1000);
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 2, "zero terminator inside an exact section is skipped");
	dw_cfi_scan_free(&sc);
	s.size_unknown = 1;
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.nfdes == 1 && sc.bad == 0, "bounded section ends at the terminator");
	dw_cfi_scan_free(&sc);

	/* truncated inside the CIE header */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	s = eh_section(&b, 0x1000);
	s.size = 6;
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.ncies == 0 && sc.first_err == DWUNW_ERR_CORRUPT, "truncated section → CORRUPT");
	dw_cfi_scan_free(&sc);
	s.size = 2;
	ok(dw_cfi_scan(&s, &sc) == 0 && sc.first_err == DWUNW_ERR_CORRUPT, "2-byte section → CORRUPT");
	dw_cfi_scan_free(&sc);
}

static void test_table_merge(void)
{
	static struct buf b;
	struct dw_table t;

	/* Two adjacent FDEs with the same rules merge; a gap gets an END row; an overlapping later
	 * FDE wins from its start. */
	memset(&b, 0, sizeof(b));
	size_t cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	static const uint8_t push[] = { 0x41, 0x0e, 16, 0x41, 0x0e, 8 };
	eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 1, push, sizeof(push));
	eh_fde(&b, cie, 0x1000, 0x2010, 0x10, 1, NULL, 0);
	eh_fde(&b, cie, 0x1000, 0x2040, 0x10, 1, NULL, 0);
	eh_fde(&b, cie, 0x1000, 0x2048, 0x10, 1, push, sizeof(push));
	struct dw_cfi_section s = eh_section(&b, 0x1000);
	struct dw_table_input in = { .eh_frame = &s, .addr_size = 8, .machine = EM_X86_64 };
	is_int(dw_table_build(&in, &t), 0, "table builds");
	/* rows: 2000 rsp+8, 2001 rsp+16, 2002 rsp+8 (merged through 2020), 2020 END, 2040 rsp+8,
	 * 2049 rsp+16, 204a rsp+8, 2058 END */
	static const uint32_t pcs[] = { 0, 1, 2, 0x20, 0x40, 0x49, 0x4a, 0x58 };
	int same = t.nrows == 8;
	for (uint32_t i = 0; same && i < 8; i++)
		same = dw_table_pc(&t, i) == pcs[i];
	ok(same, "merged neighbours, END gaps, overlap clipped (%u rows)", t.nrows);
	is_int(t.nrules, 3, "END + two distinct rules");
	ok(dw_table_rule(&t, 3)->cfa_kind == DW_CFA_KIND_END && dw_table_rule(&t, 7)->cfa_kind == DW_CFA_KIND_END, "END rows");
	is_int(t.fdes_dropped, 0, "nothing dropped");
	for (uint64_t pc = 0x1ff0; pc < 0x2060; pc++) {
		int64_t want = -1;
		for (uint32_t i = 0; i < t.nrows; i++)
			if (0x2000 + dw_table_pc(&t, i) <= pc)
				want = i;
		if (dw_table_find(&t, pc) != want) {
			ok(0, "lookup of 0x%llx", (unsigned long long)pc);
			break;
		}
		if (pc == 0x205f)
			ok(1, "lookup agrees with a linear scan at every pc");
	}
	dw_table_free(&t);

	/* ranges: an FDE outside the executable range is dropped */
	uint64_t ranges[1][2] = { { 0x2000, 0x2020 } };
	in.ranges = (const uint64_t (*)[2])ranges;
	in.nranges = 1;
	is_int(dw_table_build(&in, &t), 0, "table with ranges builds");
	is_int(t.fdes_dropped, 2, "FDEs outside the executable range dropped");
	dw_table_free(&t);
	in.nranges = 0;

	/* an FDE with a bad opcode: its rows are dropped (END over its range), the error is kept, the table builds */
	memset(&b, 0, sizeof(b));
	cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	static const uint8_t bad[] = { 0x41, 0x0e, 16, 0x41, 0x3e };
	size_t fb = eh_fde(&b, cie, 0x1000, 0x2000, 0x10, 1, bad, sizeof(bad));
	eh_fde(&b, cie, 0x1000, 0x2010, 0x10, 1, NULL, 0);
	s = eh_section(&b, 0x1000);
	is_int(dw_table_build(&in, &t), 0, "table with a bad FDE builds");
	ok(t.first_err == DWUNW_ERR_UNSUPPORTED_CFI && t.first_err_off == fb && t.fdes_dropped == 1,
	   "its error and offset are kept");
	dw_table_free(&t);

	/* nothing usable */
	memset(&b, 0, sizeof(b));
	eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	s = eh_section(&b, 0x1000);
	is_int(dw_table_build(&in, &t), DWUNW_ERR_NO_DWARF, "no FDE → NO_DWARF");
}

/* 16-bit pcs: rows farther apart than a block (64 KiB at most) and rows exactly on block starts
 * keep their pcs and look up like a linear scan. */
static void test_table_sparse(void)
{
	static struct buf b;
	static const uint64_t starts[] = { 0x10000, 0x10004, 0x20000, 0x20010, 0x31000, 0x131000,
					   0x131008, 0x140000, 0x3140000 };
	static const uint8_t push[] = { 0x41, 0x0e, 16 };
	uint64_t want[32];
	uint32_t nwant = 0;
	struct dw_table t;

	memset(&b, 0, sizeof(b));
	size_t cie = eh_cie(&b, "zR", x86_cie, sizeof(x86_cie));
	/* each FDE 4 bytes: a row at its start, one at +1, END at +4 unless the next FDE starts there */
	for (uint32_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		eh_fde(&b, cie, 0x1000, starts[i], 4, 1, push, sizeof(push));
		want[nwant++] = starts[i];
		want[nwant++] = starts[i] + 1;
		if (i + 1 == sizeof(starts) / sizeof(starts[0]) || starts[i + 1] != starts[i] + 4)
			want[nwant++] = starts[i] + 4;
	}
	struct dw_cfi_section s = eh_section(&b, 0x1000);
	struct dw_table_input in = { .eh_frame = &s, .addr_size = 8, .machine = EM_X86_64 };
	is_int(dw_table_build(&in, &t), 0, "sparse table builds");
	int same = t.nrows == nwant && t.shift <= 16;
	for (uint32_t i = 0; same && i < nwant; i++)
		same = t.base + dw_table_pc(&t, i) == want[i];
	ok(same, "%u rows over 50 MiB keep their pcs in 16 bits (shift %u)", t.nrows, t.shift);
	same = 1;
	for (uint32_t i = 0; same && i < nwant; i++)
		for (int64_t d = -2; same && d <= 2; d++) {
			uint64_t pc = want[i] + (uint64_t)d;
			int64_t lin = -1;
			for (uint32_t r = 0; r < nwant; r++)
				if (want[r] <= pc)
					lin = r;
			same = dw_table_find(&t, pc) == lin;
			if (!same)
				printf("# pc 0x%llx: %lld, want %lld\n", (unsigned long long)pc, (long long)dw_table_find(&t, pc), (long long)lin);
		}
	ok(same, "look-ups around every row agree with a linear scan");
	dw_table_free(&t);
}

int main(void)
{
	test_encodings();
	test_opcodes();
	test_set_loc();
	test_arm64_negate_ra();
	test_dwarf5_example();
	test_cie_forms();
	test_table_merge();
	test_table_sparse();
	return done_testing();
}
