// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of the DWARF expression machine (dw_expr_eval, dw_expr_check). */
#include <stdint.h>
#include <stdlib.h>
#include "tap.h"
#include "dwunw.h"
#include "expr.h"

/* Opcodes spelled out here so the tests do not trust expr.c's own table. */
enum {
	OP_addr = 0x03, OP_deref = 0x06,
	OP_const1u = 0x08, OP_const1s, OP_const2u, OP_const2s, OP_const4u, OP_const4s,
	OP_const8u, OP_const8s, OP_constu, OP_consts,
	OP_dup = 0x12, OP_drop, OP_over, OP_pick, OP_swap, OP_rot, OP_xderef,
	OP_abs = 0x19, OP_and, OP_div, OP_minus, OP_mod, OP_mul, OP_neg, OP_not, OP_or, OP_plus,
	OP_plus_uconst = 0x23, OP_shl, OP_shr, OP_shra, OP_xor, OP_bra,
	OP_eq = 0x29, OP_ge, OP_gt, OP_le, OP_lt, OP_ne, OP_skip = 0x2f,
	OP_lit0 = 0x30, OP_lit1, OP_lit2, OP_lit3, OP_lit4, OP_lit5,
	OP_lit7 = 0x37, OP_lit8 = 0x38, OP_lit9 = 0x39, OP_lit11 = 0x3b, OP_lit15 = 0x3f,
	OP_lit31 = 0x4f,
	OP_reg0 = 0x50, OP_reg5 = 0x55,
	OP_breg0 = 0x70, OP_breg7 = 0x77, OP_breg16 = 0x80, OP_breg31 = 0x8f,
	OP_regx = 0x90, OP_fbreg, OP_bregx, OP_piece, OP_deref_size, OP_xderef_size, OP_nop,
	OP_push_object_address = 0x97, OP_call2, OP_call4, OP_call_ref, OP_form_tls_address,
	OP_call_frame_cfa, OP_bit_piece, OP_implicit_value, OP_stack_value, OP_implicit_pointer,
	OP_addrx, OP_constx, OP_entry_value, OP_const_type, OP_regval_type, OP_deref_type,
	OP_xderef_type, OP_convert, OP_reinterpret,
	OP_GNU_push_tls_address = 0xe0, OP_GNU_entry_value = 0xf3, OP_GNU_parameter_ref = 0xfa,
	OP_GNU_addr_index = 0xfb, OP_GNU_const_index = 0xfc, OP_GNU_variable_value = 0xfd,
};

/* A fake frame: registers, and a window of memory at MEM_BASE. */
#define MEM_BASE 0x7ffe1000ull
#define TEST_REG_ERR DWUNW_ERR_NO_DWARF
#define TEST_MEM_ERR DWUNW_ERR_NO_PROCESS

static struct {
	uint64_t regs[64];
	uint64_t valid;            /* bit n: regs[n] readable */
	uint8_t mem[256];
	unsigned mem_reads;
	size_t last_len;
} fx;

static int t_read_reg(void *arg, unsigned reg, uint64_t *val)
{
	(void)arg;
	if (reg >= 64 || !(fx.valid & (1ull << reg)))
		return TEST_REG_ERR;
	*val = fx.regs[reg];
	return DWUNW_OK;
}

static int t_read_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	(void)arg;
	fx.mem_reads++;
	fx.last_len = len;
	if (addr < MEM_BASE || addr - MEM_BASE > sizeof(fx.mem) || len > sizeof(fx.mem) - (addr - MEM_BASE))
		return TEST_MEM_ERR;
	memcpy(buf, fx.mem + (addr - MEM_BASE), len);
	return DWUNW_OK;
}

static int eval(unsigned asz, const uint8_t *e, size_t n, int push, uint64_t init, uint64_t *r)
{
	struct dw_expr_env env = { .addr_size = (uint8_t)asz, .read_reg = t_read_reg,
				   .read_mem = t_read_mem, .arg = NULL };
	return dw_expr_eval(&env, e, n, push, init, r);
}

/* One test: the expression evaluates to `want` and passes the static check. */
static void expect_val(unsigned asz, const uint8_t *e, size_t n, uint64_t want, const char *name)
{
	uint64_t r = 0xdeadbeef;
	int rc = eval(asz, e, n, 0, 0, &r);
	int chk = dw_expr_check(e, n, asz);
	if (!ok(rc == DWUNW_OK && r == want && chk == DWUNW_OK, "%s (addr_size %u)", name, asz))
		printf("  # rc %d (%s) got 0x%llx want 0x%llx, check %d\n", rc, dwunw_errname(rc),
		       (unsigned long long)r, (unsigned long long)want, chk);
}

/* One test: evaluation fails with `err`; the static check gives `chk`. */
static void expect_err(unsigned asz, const uint8_t *e, size_t n, int err, int chk_want, const char *name)
{
	uint64_t r = 0x5a5a;
	int rc = eval(asz, e, n, 0, 0, &r);
	int chk = dw_expr_check(e, n, asz);
	/* A failed evaluation leaves *result alone. */
	if (!ok(rc == err && chk == chk_want && (err == DWUNW_OK || r == 0x5a5a), "%s (addr_size %u): %s", name, asz,
		dwunw_errname(err)))
		printf("  # eval %d (%s), check %d (%s), result 0x%llx\n", rc, dwunw_errname(rc), chk,
		       dwunw_errname(chk), (unsigned long long)r);
}

#define V(asz, want, name, ...) do { \
	const uint8_t e_[] = { __VA_ARGS__ }; \
	expect_val(asz, e_, sizeof(e_), want, name); \
} while (0)
#define V8(want, name, ...) V(8, want, name, __VA_ARGS__)
#define V4(want, name, ...) V(4, want, name, __VA_ARGS__)
#define E(asz, err, chk, name, ...) do { \
	const uint8_t e_[] = { __VA_ARGS__ }; \
	expect_err(asz, e_, sizeof(e_), err, chk, name); \
} while (0)

#define M8 UINT64_MAX
#define M4 0xffffffffull

static void reset_fixture(void)
{
	memset(&fx, 0, sizeof(fx));
	for (unsigned i = 0; i < 64; i++)
		fx.regs[i] = 0x1000 * (i + 1);
	fx.valid = ~0ull & ~(1ull << 40);   /* register 40 is "not known" */
	for (unsigned i = 0; i < sizeof(fx.mem); i++)
		fx.mem[i] = (uint8_t)(0x80 + i);   /* mem[i] = 0x80+i: loads show width and order */
}

/* Little-endian value of the fixture memory at MEM_BASE+off, n bytes. */
static uint64_t memval(unsigned off, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = n; i-- > 0;)
		v = v << 8 | fx.mem[off + i];
	return v;
}

/* DW_OP_constu MEM_BASE+off (a 5-byte ULEB128), for loads. */
#define ADDR(off) OP_constu, \
	(uint8_t)(((MEM_BASE + (off)) & 0x7f) | 0x80), \
	(uint8_t)((((MEM_BASE + (off)) >> 7) & 0x7f) | 0x80), \
	(uint8_t)((((MEM_BASE + (off)) >> 14) & 0x7f) | 0x80), \
	(uint8_t)((((MEM_BASE + (off)) >> 21) & 0x7f) | 0x80), \
	(uint8_t)(((MEM_BASE + (off)) >> 28) & 0x7f)

static void test_constants(void)
{
	V8(0x1122334455667788ull, "addr reads 8 bytes",
	   OP_addr, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11);
	V4(0x55667788ull, "addr reads 4 bytes", OP_addr, 0x88, 0x77, 0x66, 0x55);
	E(4, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "addr with 3 bytes", OP_addr, 1, 2, 3);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "addr with 4 bytes", OP_addr, 1, 2, 3, 4);

	V8(0xff, "const1u", OP_const1u, 0xff);
	V8(M8, "const1s -1", OP_const1s, 0xff);
	V4(M4, "const1s -1", OP_const1s, 0xff);
	V8(0x7f, "const1s 127", OP_const1s, 0x7f);
	V8(0x8000, "const2u", OP_const2u, 0x00, 0x80);
	V8(0xffffffffffff8000ull, "const2s", OP_const2s, 0x00, 0x80);
	V4(0xffff8000ull, "const2s", OP_const2s, 0x00, 0x80);
	V8(0x80000000ull, "const4u", OP_const4u, 0x00, 0x00, 0x00, 0x80);
	V8(0xffffffff80000000ull, "const4s", OP_const4s, 0x00, 0x00, 0x00, 0x80);
	V4(0x80000000ull, "const4s", OP_const4s, 0x00, 0x00, 0x00, 0x80);
	V8(0x8877665544332211ull, "const8u", OP_const8u, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88);
	V4(0x44332211ull, "const8u wraps", OP_const8u, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88);
	V8(0xfffffffffffffffeull, "const8s", OP_const8s, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	V4(0xfffffffeull, "const8s wraps", OP_const8s, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	V8(624485, "constu 624485", OP_constu, 0xe5, 0x8e, 0x26);
	V8(M8, "constu max", OP_constu, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	V4(M4, "constu wraps", OP_constu, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	V8((uint64_t)-123456, "consts -123456", OP_consts, 0xc0, 0xbb, 0x78);
	V4((uint32_t)-123456, "consts -123456", OP_consts, 0xc0, 0xbb, 0x78);
	V8(63, "consts 63", OP_consts, 0x3f);

	/* lit0..lit31 */
	int all = 1;
	for (unsigned i = 0; i < 32; i++) {
		uint8_t e = (uint8_t)(OP_lit0 + i);
		uint64_t r = ~0ull;
		if (eval(8, &e, 1, 0, 0, &r) || r != i || dw_expr_check(&e, 1, 8))
			all = 0;
	}
	ok(all, "lit0..lit31 push 0..31");
	V8(31, "lit31", OP_lit31);
}

static void test_registers(void)
{
	int all = 1;
	for (unsigned i = 0; i < 32; i++) {
		uint8_t e[2] = { (uint8_t)(OP_breg0 + i), 0x7c };   /* breg<i> -4 */
		uint64_t r = 0;
		if (eval(8, e, 2, 0, 0, &r) || r != fx.regs[i] - 4 || dw_expr_check(e, 2, 8))
			all = 0;
	}
	ok(all, "breg0..breg31 -4 read their register");
	V8(fx.regs[7] + 200, "breg7 +200", OP_breg7, 0xc8, 0x01);
	V8(fx.regs[31], "breg31 0", OP_breg31, 0x00);
	V8(fx.regs[16] - 8, "bregx 16 -8", OP_bregx, 16, 0x78);
	V8(fx.regs[63] + 1, "bregx 63 +1", OP_bregx, 63, 0x01);
	V8(fx.regs[33], "bregx 33 (two-byte ULEB 0xa1 0x00)", OP_bregx, 0xa1, 0x00, 0x00);

	/* 32-bit: the register value and the sum wrap to 32 bits. */
	fx.regs[5] = 0xfffffff0;
	V4(0x10, "breg5 +0x20 wraps", OP_breg0 + 5, 0x20);
	V8(0x100000010ull, "breg5 +0x20 does not wrap", OP_breg0 + 5, 0x20);
	fx.regs[5] = 0x1234567800000010ull;
	V4(0x8, "breg5 -8 uses the low 32 bits", OP_breg0 + 5, 0x78);
	fx.regs[5] = 0x6000;

	/* Unknown register: read_reg's error is returned as it is. */
	E(8, TEST_REG_ERR, DWUNW_OK, "bregx of an unknown register", OP_bregx, 40, 0);
	E(8, TEST_REG_ERR, DWUNW_OK, "bregx past the register file", OP_bregx, 0x80, 0x01, 0);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "bregx register > 32 bits",
	  OP_bregx, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0);
}

static void test_stack_ops(void)
{
	V8(10, "dup", OP_lit5, OP_dup, OP_plus);
	V8(1, "drop", OP_lit1, OP_lit2, OP_drop);
	V8(12, "over", OP_lit7, OP_lit2, OP_over, OP_minus, OP_minus);  /* 7 - (2 - 7) */
	V8(1, "pick 2", OP_lit1, OP_lit2, OP_lit3, OP_pick, 2);
	V8(3, "pick 0", OP_lit1, OP_lit2, OP_lit3, OP_pick, 0);
	V8(2, "pick 1", OP_lit1, OP_lit2, OP_lit3, OP_pick, 1);
	V8(1, "swap", OP_lit1, OP_lit2, OP_swap, OP_minus);      /* 2 - 1 */
	V8(M8, "no swap", OP_lit1, OP_lit2, OP_minus);            /* 1 - 2 */
	/* rot: [1 2 3] (3 on top) -> [3 1 2] */
	V8(2, "rot: second becomes top", OP_lit1, OP_lit2, OP_lit3, OP_rot);
	V8(1, "rot: third becomes second", OP_lit1, OP_lit2, OP_lit3, OP_rot, OP_drop);
	V8(3, "rot: top becomes third", OP_lit1, OP_lit2, OP_lit3, OP_rot, OP_drop, OP_drop);
	V8(5, "nop", OP_nop, OP_lit5, OP_nop);
}

static void test_arith(void)
{
	V8(0x0f, "and", OP_const1u, 0x3f, OP_const1u, 0xcf, OP_and);
	V8(0xff, "or", OP_const1u, 0xf0, OP_lit15, OP_or);
	V8(0xf0, "xor", OP_const1u, 0xff, OP_lit15, OP_xor);
	V8(0x100000001ull, "plus", OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_lit2, OP_plus);
	V4(1, "plus wraps", OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_lit2, OP_plus);
	V8(0, "plus wraps", OP_const1s, 0xff, OP_lit1, OP_plus);
	V8(4, "minus", OP_lit9, OP_lit5, OP_minus);
	V8(M8, "minus wraps", OP_lit0, OP_lit1, OP_minus);
	V4(M4, "minus wraps", OP_lit0, OP_lit1, OP_minus);
	V8(0x100000000ull, "mul", OP_const4u, 0, 0, 1, 0, OP_dup, OP_mul);
	V8(0x100000000ull, "mul 64-bit", OP_const2u, 0, 1, OP_const4u, 0, 0, 0, 1, OP_mul);   /* 2^8 * 2^24 */
	V8(0, "mul 2^32*2^32 wraps", OP_const8u, 0, 0, 0, 0, 1, 0, 0, 0, OP_dup, OP_mul);
	V4(0, "mul 2^16*2^16 wraps", OP_const4u, 0, 0, 1, 0, OP_dup, OP_mul);
	V8(0xfffffffffffffff9ull, "mul signed operand", OP_consts, 0x79, OP_lit1, OP_mul);  /* -7*1 */
	V8(M8, "neg 1", OP_lit1, OP_neg);
	V4(M4, "neg 1", OP_lit1, OP_neg);
	V8(5, "neg -5", OP_consts, 0x7b, OP_neg);
	V8(M8, "not 0", OP_lit0, OP_not);
	V4(M4, "not 0", OP_lit0, OP_not);
	V4(0xfffffff0ull, "not 15", OP_lit15, OP_not);
	V8(129, "plus_uconst 128", OP_lit1, OP_plus_uconst, 0x80, 0x01);
	V4(3, "plus_uconst wraps", OP_const4u, 0xfe, 0xff, 0xff, 0xff, OP_plus_uconst, 5);
	V8(0x100000003ull, "plus_uconst 64-bit", OP_const4u, 0xfe, 0xff, 0xff, 0xff, OP_plus_uconst, 5);

	V8(5, "abs -5", OP_consts, 0x7b, OP_abs);
	V8(5, "abs 5", OP_lit5, OP_abs);
	V4(5, "abs of 0xfffffffb (32-bit -5)", OP_const4u, 0xfb, 0xff, 0xff, 0xff, OP_abs);
	V8(0xfffffffbull, "abs of 0xfffffffb (positive in 64 bits)", OP_const4u, 0xfb, 0xff, 0xff, 0xff, OP_abs);
	V8(0x8000000000000000ull, "abs INT64_MIN wraps",
	   OP_const8u, 0, 0, 0, 0, 0, 0, 0, 0x80, OP_abs);
	V4(0x80000000ull, "abs INT32_MIN wraps", OP_const4u, 0, 0, 0, 0x80, OP_abs);

	/* div is signed and truncates toward zero. */
	V8(3, "div 7/2", OP_lit7, OP_lit2, OP_div);
	V8((uint64_t)-3, "div -7/2", OP_consts, 0x79, OP_lit2, OP_div);
	V8((uint64_t)-3, "div 7/-2", OP_lit7, OP_consts, 0x7e, OP_div);
	V8(3, "div -7/-2", OP_consts, 0x79, OP_consts, 0x7e, OP_div);
	V4(0xfffffffdull, "div -7/2 32-bit", OP_const4u, 0xf9, 0xff, 0xff, 0xff, OP_lit2, OP_div);
	V8(0x7ffffffcull, "div 0xfffffff9/2 is unsigned-looking in 64 bits",
	   OP_const4u, 0xf9, 0xff, 0xff, 0xff, OP_lit2, OP_div);
	V8(0x8000000000000000ull, "div INT64_MIN/-1 wraps",
	   OP_const8u, 0, 0, 0, 0, 0, 0, 0, 0x80, OP_consts, 0x7f, OP_div);
	V4(0x80000000ull, "div INT32_MIN/-1 wraps", OP_const4u, 0, 0, 0, 0x80, OP_consts, 0x7f, OP_div);
	V8((uint64_t)-5, "div -5/1", OP_consts, 0x7b, OP_lit1, OP_div);

	/* mod is unsigned on the generic type. */
	V8(1, "mod 7%3", OP_lit7, OP_lit3, OP_mod);
	V8(UINT64_MAX % 7, "mod (2^64-1)%7", OP_const1s, 0xff, OP_lit7, OP_mod);
	V4(0xffffffffull % 7, "mod (2^32-1)%7", OP_const1s, 0xff, OP_lit7, OP_mod);

	V8(0x8000000000000000ull, "shl 63", OP_lit1, OP_const1u, 63, OP_shl);
	V8(0, "shl 64", OP_lit1, OP_const1u, 64, OP_shl);
	V8(0, "shl huge", OP_lit1, OP_const1s, 0xff, OP_shl);
	V4(0x80000000ull, "shl 31", OP_lit1, OP_lit31, OP_shl);
	V4(0, "shl 32", OP_lit1, OP_const1u, 32, OP_shl);
	V4(0xfffffff0ull, "shl wraps", OP_const1s, 0xff, OP_lit4, OP_shl);
	V8(0xf, "shr 60", OP_const1s, 0xff, OP_const1u, 60, OP_shr);
	V4(0xf, "shr 28", OP_const1s, 0xff, OP_const1u, 28, OP_shr);
	V8(0, "shr 64", OP_const1s, 0xff, OP_const1u, 64, OP_shr);
	V4(0, "shr 32", OP_const1s, 0xff, OP_const1u, 32, OP_shr);
	V8((uint64_t)-4, "shra -16 by 2", OP_consts, 0x70, OP_lit2, OP_shra);
	V8(4, "shra 16 by 2", OP_const1u, 16, OP_lit2, OP_shra);
	V4(0xf8000000ull, "shra 0x80000000 by 4 (negative)", OP_const4u, 0, 0, 0, 0x80, OP_lit4, OP_shra);
	V8(0x08000000ull, "shra 0x80000000 by 4 (positive)", OP_const4u, 0, 0, 0, 0x80, OP_lit4, OP_shra);
	V8(M8, "shra -16 by 64", OP_consts, 0x70, OP_const1u, 64, OP_shra);
	V8(M8, "shra -16 by huge", OP_consts, 0x70, OP_const1s, 0xff, OP_shra);
	V4(M4, "shra -16 by 32", OP_consts, 0x70, OP_const1u, 32, OP_shra);
	V8(0, "shra 16 by 64", OP_const1u, 16, OP_const1u, 64, OP_shra);
}

static void test_compare(void)
{
	V8(1, "eq", OP_lit3, OP_lit3, OP_eq);
	V8(0, "eq false", OP_lit3, OP_lit4, OP_eq);
	V8(1, "ne", OP_lit3, OP_lit4, OP_ne);
	V8(0, "ne false", OP_lit3, OP_lit3, OP_ne);
	V8(1, "ge equal", OP_lit3, OP_lit3, OP_ge);
	V8(0, "ge", OP_lit3, OP_lit4, OP_ge);
	V8(1, "gt", OP_lit4, OP_lit3, OP_gt);
	V8(0, "gt equal", OP_lit3, OP_lit3, OP_gt);
	V8(1, "le", OP_lit3, OP_lit4, OP_le);
	V8(0, "le", OP_lit4, OP_lit3, OP_le);
	V8(1, "lt", OP_lit3, OP_lit4, OP_lt);
	V8(0, "lt equal", OP_lit3, OP_lit3, OP_lt);
	/* Signed: -1 < 1. */
	V8(1, "lt -1 < 1", OP_consts, 0x7f, OP_lit1, OP_lt);
	V8(1, "gt 1 > -1", OP_lit1, OP_consts, 0x7f, OP_gt);
	V8(0, "ge -1 >= 1", OP_consts, 0x7f, OP_lit1, OP_ge);
	V8(1, "le -1 <= 1", OP_consts, 0x7f, OP_lit1, OP_le);
	V4(1, "lt 0xffffffff < 1 (32-bit -1)", OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_lit1, OP_lt);
	V8(0, "lt 0xffffffff < 1 (positive in 64 bits)", OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_lit1, OP_lt);
	V4(1, "eq -1 == 0xffffffff", OP_consts, 0x7f, OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_eq);
	V8(0, "eq -1 != 0xffffffff", OP_consts, 0x7f, OP_const4u, 0xff, 0xff, 0xff, 0xff, OP_eq);
}

static void test_branches(void)
{
	V8(5, "bra taken", OP_lit5, OP_lit1, OP_bra, 0x01, 0x00, OP_lit7);
	V8(7, "bra not taken", OP_lit5, OP_lit0, OP_bra, 0x01, 0x00, OP_lit7);
	V8(1, "skip forward", OP_lit1, OP_skip, 0x01, 0x00, OP_lit2);
	V8(1, "skip 0", OP_lit1, OP_skip, 0x00, 0x00);
	V8(1, "skip to exactly len ends", OP_lit1, OP_skip, 0x02, 0x00, OP_lit2, OP_lit3);
	V8(5, "bra to exactly len ends", OP_lit5, OP_lit1, OP_bra, 0x01, 0x00, OP_lit7);
	/* Countdown 3, 2, 1, 0 through a back-edge. */
	V8(0, "bra back-edge loop terminates",
	   OP_lit3,                              /* 0 */
	   OP_lit1, OP_minus, OP_dup,            /* 1..3 */
	   OP_bra, 0xfa, 0xff);                  /* 4: to 1 while non-zero */
	/* Forward to a backward skip, back to lit9, then forward to the end. */
	V8(9, "skip backward lands on an operation",
	   OP_skip, 0x04, 0x00,                  /* 0: to 7 */
	   OP_lit9, OP_skip, 0x03, 0x00,         /* 3: lit9, to 10 = len */
	   OP_skip, 0xf9, 0xff);                 /* 7: to 3 */

	/* Conditional on the PLT position: rip & 15 >= 11 -> +8. */
	for (unsigned k = 0; k < 16; k++) {
		const uint8_t plt[] = {
			OP_breg7, 8, OP_breg16, 0, OP_lit15, OP_and, OP_lit11, OP_ge, OP_lit3, OP_shl, OP_plus,
		};
		uint64_t r = 0;
		fx.regs[7] = 0x7ffc12345670ull;
		fx.regs[16] = 0x401020ull + k;
		int rc = eval(8, plt, sizeof(plt), 0, 0, &r);
		uint64_t want = fx.regs[7] + (k < 11 ? 8 : 16);
		if (!ok(rc == DWUNW_OK && r == want && dw_expr_check(plt, sizeof(plt), 8) == DWUNW_OK,
			"x86_64 PLT CFA at rip&15 = %u is rsp+%u", k, k < 11 ? 8 : 16))
			printf("  # rc %d got 0x%llx want 0x%llx\n", rc, (unsigned long long)r,
			       (unsigned long long)want);
	}
	fx.regs[7] = 0x8000;
	fx.regs[16] = 0x11000;
}

static void test_memory(void)
{
	V8(memval(0x10, 8), "deref reads 8 bytes", ADDR(0x10), OP_deref);
	is_int(fx.last_len, 8, "deref asked for 8 bytes");
	V4(memval(0x10, 4), "deref reads 4 bytes", ADDR(0x10), OP_deref);
	is_int(fx.last_len, 4, "deref (addr_size 4) asked for 4 bytes");
	V8(memval(0x21, 1), "deref_size 1", ADDR(0x21), OP_deref_size, 1);
	V8(memval(0x22, 2), "deref_size 2", ADDR(0x22), OP_deref_size, 2);
	V8(memval(0x23, 3), "deref_size 3", ADDR(0x23), OP_deref_size, 3);
	V8(memval(0x24, 4), "deref_size 4 zero-extends", ADDR(0x24), OP_deref_size, 4);
	V8(memval(0x28, 8), "deref_size 8", ADDR(0x28), OP_deref_size, 8);
	V4(memval(0x24, 4), "deref_size 4", ADDR(0x24), OP_deref_size, 4);
	E(4, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "deref_size 8 wider than an address",
	  ADDR(0x28), OP_deref_size, 8);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "deref_size 0", ADDR(0x28), OP_deref_size, 0);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "deref_size 9", ADDR(0x28), OP_deref_size, 9);
	V8(memval(0x30, 8), "xderef ignores the address space", OP_lit3, ADDR(0x30), OP_xderef);
	V8(memval(0x30, 8) + 1, "xderef pops two values",
	   OP_lit1, OP_lit3, ADDR(0x30), OP_xderef, OP_plus);
	V4(memval(0x30, 4), "xderef", OP_lit3, ADDR(0x30), OP_xderef);
	V8(memval(0x31, 2), "xderef_size 2", OP_lit0, ADDR(0x31), OP_xderef_size, 2);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "xderef with one value", ADDR(0x30), OP_xderef);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "deref on an empty stack", OP_deref);

	/* Signal frame: the saved context pointer lives at rsp+N; the register is M into it. */
	uint64_t ctx = MEM_BASE + 0x40;
	memcpy(fx.mem + 0x18, &ctx, 8);
	fx.regs[7] = MEM_BASE + 0x08;
	V8(ctx + 0xa0, "breg7 0x10; deref; plus_uconst 0xa0",
	   OP_breg7, 0x10, OP_deref, OP_plus_uconst, 0xa0, 0x01);
	/* The same in 32 bits reads a 4-byte pointer. */
	uint32_t ctx32 = (uint32_t)(MEM_BASE + 0x40);
	memcpy(fx.mem + 0x18, &ctx32, 4);
	fx.regs[4] = MEM_BASE + 0x08;
	V4(ctx32 + 0x20, "breg4 0x10; deref; plus_uconst 0x20 (32-bit)",
	   OP_breg0 + 4, 0x10, OP_deref, OP_plus_uconst, 0x20);

	/* read_mem's error is returned as it is. */
	E(8, TEST_MEM_ERR, DWUNW_OK, "deref of unreadable memory", OP_lit8, OP_deref);
	E(8, TEST_MEM_ERR, DWUNW_OK, "deref_size of unreadable memory", OP_lit8, OP_deref_size, 1);
	E(8, TEST_MEM_ERR, DWUNW_OK, "xderef of unreadable memory", OP_lit0, OP_lit8, OP_xderef);
	reset_fixture();
}

static void test_initial(void)
{
	const uint8_t empty[1] = { 0 };
	const uint8_t plus8[] = { OP_lit8, OP_plus };
	const uint8_t plus[] = { OP_plus };
	const uint8_t deref[] = { OP_deref };
	uint64_t r = 0;

	ok(eval(8, empty, 0, 1, 0x1234, &r) == DWUNW_OK && r == 0x1234,
	   "empty expression with push_initial gives the initial value");
	ok(eval(8, plus8, sizeof(plus8), 1, 0x1000, &r) == DWUNW_OK && r == 0x1008,
	   "push_initial: initial is on the stack first");
	ok(eval(4, plus8, sizeof(plus8), 1, 0x1fffffffcull, &r) == DWUNW_OK && r == 4,
	   "push_initial: the initial value wraps to 32 bits");
	is_int(eval(8, plus, sizeof(plus), 0, 0x1000, &r), DWUNW_ERR_EXPR,
	       "without push_initial the initial value is not pushed");
	r = 0;
	ok(eval(8, deref, sizeof(deref), 1, MEM_BASE + 8, &r) == DWUNW_OK && r == memval(8, 8),
	   "push_initial then deref (DW_CFA_expression style)");
	is_int(eval(8, empty, 0, 0, 0, &r), DWUNW_ERR_EXPR, "empty expression: empty result stack");
	ok(eval(8, NULL, 0, 1, 0x42, &r) == DWUNW_OK && r == 0x42, "NULL empty expression with push_initial");
	is_int(eval(8, NULL, 1, 1, 0x42, &r), DWUNW_ERR_INVALID_ARG, "NULL expression of length 1");
	is_int(dw_expr_check(empty, 0, 8), DWUNW_OK, "check of the empty expression");
	is_int(eval(8, (const uint8_t[]){ OP_lit1, OP_drop }, 2, 0, 0, &r), DWUNW_ERR_EXPR,
	       "stack emptied by drop: no result");
}

static void test_errors(void)
{
	uint8_t big[DW_EXPR_MAX_STEPS + 2];
	uint64_t r = 0;

	/* Underflow */
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "plus on one value", OP_lit1, OP_plus);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "dup on empty", OP_dup);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "drop on empty", OP_drop);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "over on one value", OP_lit1, OP_over);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "swap on one value", OP_lit1, OP_swap);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "rot on two values", OP_lit1, OP_lit2, OP_rot);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "pick 2 on two values", OP_lit1, OP_lit2, OP_pick, 2);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "neg on empty", OP_neg);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "abs on empty", OP_abs);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "not on empty", OP_not);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "plus_uconst on empty", OP_plus_uconst, 1);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "div on one value", OP_lit1, OP_div);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "mod on one value", OP_lit1, OP_mod);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "shra on one value", OP_lit1, OP_shra);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "lt on one value", OP_lit1, OP_lt);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "bra on empty", OP_bra, 0, 0);

	/* Overflow: 64 values fit, 65 do not. */
	memset(big, OP_lit0, sizeof(big));
	ok(eval(8, big, DW_EXPR_MAX_STACK, 0, 0, &r) == DWUNW_OK && r == 0, "64 pushes fit");
	is_int(eval(8, big, DW_EXPR_MAX_STACK + 1, 0, 0, &r), DWUNW_ERR_EXPR, "65 pushes overflow");
	is_int(eval(8, big, DW_EXPR_MAX_STACK, 1, 0, &r), DWUNW_ERR_EXPR,
	       "push_initial + 64 pushes overflow");
	big[DW_EXPR_MAX_STACK - 1] = OP_dup;
	is_int(eval(8, big, DW_EXPR_MAX_STACK, 0, 0, &r), DWUNW_OK, "dup as the 64th value fits");
	big[DW_EXPR_MAX_STACK] = OP_dup;
	is_int(eval(8, big, DW_EXPR_MAX_STACK + 1, 0, 0, &r), DWUNW_ERR_EXPR, "dup overflows");
	big[DW_EXPR_MAX_STACK] = OP_over;
	is_int(eval(8, big, DW_EXPR_MAX_STACK + 1, 0, 0, &r), DWUNW_ERR_EXPR, "over overflows");
	big[DW_EXPR_MAX_STACK] = OP_pick;
	big[DW_EXPR_MAX_STACK + 1] = 0;
	is_int(eval(8, big, DW_EXPR_MAX_STACK + 2, 0, 0, &r), DWUNW_ERR_EXPR, "pick overflows");

	/* Step limit: exactly DW_EXPR_MAX_STEPS operations run, one more does not. */
	memset(big, OP_nop, sizeof(big));
	big[DW_EXPR_MAX_STEPS - 1] = OP_lit7;
	ok(eval(8, big, DW_EXPR_MAX_STEPS, 0, 0, &r) == DWUNW_OK && r == 7,
	   "DW_EXPR_MAX_STEPS operations run");
	big[DW_EXPR_MAX_STEPS - 1] = OP_nop;
	big[DW_EXPR_MAX_STEPS] = OP_lit7;
	is_int(eval(8, big, DW_EXPR_MAX_STEPS + 1, 0, 0, &r), DWUNW_ERR_EXPR,
	       "DW_EXPR_MAX_STEPS + 1 operations do not");
	is_int(dw_expr_check(big, DW_EXPR_MAX_STEPS + 1, 8), DWUNW_OK, "the long expression checks");

	/* Division by zero */
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "div by zero", OP_lit1, OP_lit0, OP_div);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "mod by zero", OP_lit1, OP_lit0, OP_mod);
	E(4, DWUNW_ERR_EXPR, DWUNW_OK, "div by 2^32 is zero in 32 bits",
	  OP_lit1, OP_const8u, 0, 0, 0, 0, 1, 0, 0, 0, OP_div);
	E(4, DWUNW_ERR_EXPR, DWUNW_OK, "mod by 2^32 is zero in 32 bits",
	  OP_lit1, OP_const8u, 0, 0, 0, 0, 1, 0, 0, 0, OP_mod);

	/* Loops */
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "skip -3 loops on itself", OP_skip, 0xfd, 0xff);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "bra back-edge that never falls through",
	  OP_lit1, OP_bra, 0xfc, 0xff);
	E(8, DWUNW_ERR_EXPR, DWUNW_OK, "loop through two skips",
	  OP_skip, 0x00, 0x00, OP_skip, 0xfa, 0xff);

	/* Branch targets */
	E(8, DWUNW_ERR_EXPR, DWUNW_ERR_EXPR, "skip past the end", OP_lit1, OP_skip, 0x02, 0x00, OP_lit2);
	E(8, DWUNW_ERR_EXPR, DWUNW_ERR_EXPR, "skip before the start", OP_lit1, OP_skip, 0xfb, 0xff);
	E(8, DWUNW_ERR_EXPR, DWUNW_ERR_EXPR, "bra taken past the end",
	  OP_lit1, OP_bra, 0x10, 0x00, OP_lit2);
	E(8, DWUNW_ERR_EXPR, DWUNW_ERR_EXPR, "skip -32768", OP_lit1, OP_skip, 0x00, 0x80);
	/* Into the middle of an operation: eval decodes from there, the check refuses it. */
	{
		const uint8_t mid[] = { OP_skip, 0x01, 0x00, OP_const1u, OP_lit1 };
		r = 0;
		ok(eval(8, mid, sizeof(mid), 0, 0, &r) == DWUNW_OK && r == 1,
		   "skip into an operand decodes from there");
		is_int(dw_expr_check(mid, sizeof(mid), 8), DWUNW_ERR_EXPR,
		       "check: skip into an operand");
		const uint8_t midb[] = { OP_lit1, OP_bra, 0x01, 0x00, OP_breg7, 0x30, OP_lit2 };
		is_int(dw_expr_check(midb, sizeof(midb), 8), DWUNW_ERR_EXPR,
		       "check: bra into a SLEB operand");
		const uint8_t back[] = { OP_const2u, 0x31, 0x31, OP_skip, 0xfc, 0xff };
		is_int(dw_expr_check(back, sizeof(back), 8), DWUNW_ERR_EXPR,
		       "check: skip back into an operand");
	}

	/* Truncated operands */
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "const4u with 2 bytes", OP_const4u, 1, 2);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "const1u with none", OP_const1u);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "const2s with 1 byte", OP_const2s, 1);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "const8s with 7 bytes", OP_const8s, 1, 2, 3, 4, 5, 6, 7);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "constu unterminated", OP_constu, 0x80);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "consts unterminated", OP_consts, 0xff, 0xff);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "breg7 without offset", OP_breg7);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "bregx without offset", OP_bregx, 7);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "plus_uconst unterminated", OP_lit1, OP_plus_uconst, 0x81);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "pick without index", OP_lit1, OP_pick);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "skip with 1 byte", OP_lit1, OP_skip, 0);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "bra with 1 byte", OP_lit1, OP_bra, 0);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "deref_size without size", OP_lit1, OP_deref_size);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "xderef_size without size",
	  OP_lit1, OP_lit1, OP_xderef_size);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "constu of 65 bits",
	  OP_constu, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
	E(8, DWUNW_ERR_CORRUPT, DWUNW_ERR_CORRUPT, "truncation beats a full stack",
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_lit0,
	  OP_lit0, OP_lit0, OP_lit0, OP_lit0, OP_const4u, 1);
	/* Truncated at the end of a heap block: ASan reports any read past the expression. */
	{
		uint8_t *heap = malloc(2);
		heap[0] = OP_const2u;
		heap[1] = 0x34;
		is_int(eval(8, heap, 2, 0, 0, &r), DWUNW_ERR_CORRUPT, "truncated const2u at a heap edge");
		is_int(dw_expr_check(heap, 2, 8), DWUNW_ERR_CORRUPT, "check: truncated const2u at a heap edge");
		free(heap);
	}

	/* Unsupported operations */
	static const uint8_t unsupported[] = {
		0x00, 0x01, 0x02, 0x04, 0x05, 0x07, OP_reg0, OP_reg5, OP_reg0 + 31, OP_regx, OP_fbreg,
		OP_piece, OP_push_object_address, OP_call2, OP_call4, OP_call_ref, OP_form_tls_address,
		OP_call_frame_cfa, OP_bit_piece, OP_implicit_value, OP_stack_value,
		OP_implicit_pointer, OP_addrx, OP_constx, OP_entry_value, OP_const_type,
		OP_regval_type, OP_deref_type, OP_xderef_type, OP_convert, OP_reinterpret,
		OP_GNU_push_tls_address, OP_GNU_entry_value, OP_GNU_parameter_ref,
		OP_GNU_addr_index, OP_GNU_const_index, OP_GNU_variable_value, 0xaa, 0xdf, 0xe1,
		0xf0, 0xff,
	};
	int all = 1;
	for (size_t i = 0; i < sizeof(unsupported); i++) {
		uint8_t e[4] = { OP_lit1, unsupported[i], 0x08, 0x00 };
		if (eval(8, e, sizeof(e), 0, 0, &r) != DWUNW_ERR_UNSUPPORTED_CFI ||
		    eval(4, e, sizeof(e), 0, 0, &r) != DWUNW_ERR_UNSUPPORTED_CFI ||
		    dw_expr_check(e, sizeof(e), 8) != DWUNW_ERR_UNSUPPORTED_CFI) {
			all = 0;
			printf("  # opcode 0x%02x accepted\n", unsupported[i]);
		}
	}
	ok(all, "%zu unsupported opcodes give UNSUPPORTED_CFI", sizeof(unsupported));
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "fbreg", OP_fbreg, 0x10);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "piece", OP_lit1, OP_piece, 8);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "reg5 (a location)", OP_reg5);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "regx (a location)", OP_regx, 5);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "stack_value",
	  OP_lit1, OP_stack_value);
	E(8, DWUNW_ERR_UNSUPPORTED_CFI, DWUNW_ERR_UNSUPPORTED_CFI, "GNU_entry_value",
	  OP_GNU_entry_value, 1, OP_reg5);
	/* Not reached: skipped over by a branch. The check still refuses it. */
	E(8, DWUNW_OK, DWUNW_ERR_UNSUPPORTED_CFI, "fbreg skipped over",
	  OP_lit1, OP_skip, 0x02, 0x00, OP_fbreg, 0x10);

	/* Bad arguments */
	struct dw_expr_env env = { .addr_size = 2, .read_reg = t_read_reg, .read_mem = t_read_mem };
	const uint8_t lit[] = { OP_lit1 };
	is_int(dw_expr_eval(&env, lit, 1, 0, 0, &r), DWUNW_ERR_INVALID_ARG, "eval: addr_size 2");
	is_int(dw_expr_check(lit, 1, 2), DWUNW_ERR_INVALID_ARG, "check: addr_size 2");
	is_int(dw_expr_check(NULL, 1, 8), DWUNW_ERR_INVALID_ARG, "check: NULL expression");
	is_int(dw_expr_check(NULL, 0, 8), DWUNW_OK, "check: NULL empty expression");
}

static void test_check(void)
{
	const uint8_t a4[] = { OP_addr, 1, 2, 3, 4 };
	is_int(dw_expr_check(a4, sizeof(a4), 4), DWUNW_OK, "check: addr with 4 bytes at addr_size 4");
	is_int(dw_expr_check(a4, sizeof(a4), 8), DWUNW_ERR_CORRUPT, "check: addr with 4 bytes at addr_size 8");
	const uint8_t ds8[] = { OP_lit0, OP_deref_size, 8 };
	is_int(dw_expr_check(ds8, sizeof(ds8), 8), DWUNW_OK, "check: deref_size 8 at addr_size 8");
	is_int(dw_expr_check(ds8, sizeof(ds8), 4), DWUNW_ERR_CORRUPT, "check: deref_size 8 at addr_size 4");
	const uint8_t sig[] = { OP_breg7, 0xa0, 0x01, OP_deref, OP_plus_uconst, 0x28 };
	is_int(dw_expr_check(sig, sizeof(sig), 8), DWUNW_OK, "check: signal-frame expression");
	const uint8_t trunc_late[] = { OP_lit1, OP_skip, 0x01, 0x00, OP_lit2, OP_const4u, 1 };
	is_int(dw_expr_check(trunc_late, sizeof(trunc_late), 8), DWUNW_ERR_CORRUPT,
	       "check: truncation at the end");
	const uint8_t after_len[] = { OP_skip, 0x00, 0x00 };
	is_int(dw_expr_check(after_len, sizeof(after_len), 8), DWUNW_OK, "check: branch to len");
	const uint8_t to_zero[] = { OP_lit1, OP_lit0, OP_bra, 0xfb, 0xff };
	is_int(dw_expr_check(to_zero, sizeof(to_zero), 8), DWUNW_OK, "check: branch to offset 0");
	const uint8_t unsup_after[] = { OP_lit1, OP_lit2, OP_plus, OP_stack_value };
	is_int(dw_expr_check(unsup_after, sizeof(unsup_after), 8), DWUNW_ERR_UNSUPPORTED_CFI,
	       "check: stack_value at the end");

	/* A long expression with a branch: the boundary bitmap still covers it. */
	static uint8_t longx[20000];
	memset(longx, OP_nop, sizeof(longx));
	longx[0] = OP_skip;
	longx[1] = (uint8_t)((sizeof(longx) - 3) & 0xff);
	longx[2] = (uint8_t)((sizeof(longx) - 3) >> 8);
	is_int(dw_expr_check(longx, sizeof(longx), 8), DWUNW_OK, "check: long expression, skip to len");
	longx[sizeof(longx) - 2] = OP_const1u;
	is_int(dw_expr_check(longx, sizeof(longx), 8), DWUNW_OK, "check: long expression, skip to len (2)");
	longx[1]--;
	is_int(dw_expr_check(longx, sizeof(longx), 8), DWUNW_ERR_EXPR,
	       "check: long expression, skip into the last operand");

	/* Past 32 KiB the check keeps no boundary bitmap: branches there are refused, not guessed. */
	static uint8_t huge[40000];
	memset(huge, OP_nop, sizeof(huge));
	huge[sizeof(huge) - 1] = OP_lit1;
	is_int(dw_expr_check(huge, sizeof(huge), 8), DWUNW_OK, "check: 40000 bytes without branches");
	huge[0] = OP_skip;
	huge[1] = huge[2] = 0;
	is_int(dw_expr_check(huge, sizeof(huge), 8), DWUNW_ERR_UNSUPPORTED_CFI,
	       "check: 40000 bytes with a branch is refused");
}

int main(void)
{
	reset_fixture();
	test_constants();
	test_registers();
	test_stack_ops();
	test_arith();
	test_compare();
	test_branches();
	test_memory();
	test_initial();
	test_errors();
	test_check();
	return done_testing();
}
