// SPDX-License-Identifier: GPL-2.0-only
/* DWARF expression stack machine for CFI expressions: evaluation and the static check. */
#include <string.h>
#include "expr.h"
#include "bytes.h"
#include "internal.h"

/* Our own opcode numbers (DWARF 5, section 7.7.1), so the library needs no libdw headers. */
enum {
	DW_OP_addr = 0x03,
	DW_OP_deref = 0x06,
	DW_OP_const1u = 0x08,
	DW_OP_const1s = 0x09,
	DW_OP_const2u = 0x0a,
	DW_OP_const2s = 0x0b,
	DW_OP_const4u = 0x0c,
	DW_OP_const4s = 0x0d,
	DW_OP_const8u = 0x0e,
	DW_OP_const8s = 0x0f,
	DW_OP_constu = 0x10,
	DW_OP_consts = 0x11,
	DW_OP_dup = 0x12,
	DW_OP_drop = 0x13,
	DW_OP_over = 0x14,
	DW_OP_pick = 0x15,
	DW_OP_swap = 0x16,
	DW_OP_rot = 0x17,
	DW_OP_xderef = 0x18,
	DW_OP_abs = 0x19,
	DW_OP_and = 0x1a,
	DW_OP_div = 0x1b,
	DW_OP_minus = 0x1c,
	DW_OP_mod = 0x1d,
	DW_OP_mul = 0x1e,
	DW_OP_neg = 0x1f,
	DW_OP_not = 0x20,
	DW_OP_or = 0x21,
	DW_OP_plus = 0x22,
	DW_OP_plus_uconst = 0x23,
	DW_OP_shl = 0x24,
	DW_OP_shr = 0x25,
	DW_OP_shra = 0x26,
	DW_OP_xor = 0x27,
	DW_OP_bra = 0x28,
	DW_OP_eq = 0x29,
	DW_OP_ge = 0x2a,
	DW_OP_gt = 0x2b,
	DW_OP_le = 0x2c,
	DW_OP_lt = 0x2d,
	DW_OP_ne = 0x2e,
	DW_OP_skip = 0x2f,
	DW_OP_lit0 = 0x30,
	DW_OP_lit31 = 0x4f,
	DW_OP_breg0 = 0x70,
	DW_OP_breg31 = 0x8f,
	DW_OP_bregx = 0x92,
	DW_OP_deref_size = 0x94,
	DW_OP_xderef_size = 0x95,
	DW_OP_nop = 0x96,
	/*
	 * Everything else is refused with DWUNW_ERR_UNSUPPORTED_CFI by the default case: reg0-31 and
	 * regx (locations, not values), fbreg, calls, call_frame_cfa, push_object_address, TLS,
	 * implicit_value, stack_value, pieces, implicit_pointer, entry values, the typed-stack
	 * operations, addrx/constx and the GNU extensions (0xe0-0xff).
	 */
};

/* Expressions with branches longer than this are refused by the check: the bitmap of operation
 * boundaries lives on the stack (4 KiB) and no real CFI expression comes near it. */
#define CHECK_MAX_BRANCH_LEN 32768

/* Stands in for a NULL empty expression. */
static const uint8_t no_ops[1];

static inline uint64_t width_mask(unsigned addr_size)
{
	return addr_size == 4 ? 0xffffffffull : ~0ull;
}

/* The generic type as a signed value: bit 31 is the sign for 4-byte addresses. */
static inline int64_t sval(uint64_t v, unsigned addr_size)
{
	return addr_size == 4 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
}

/* n bytes of target memory as an unsigned value; every supported target is little-endian. */
static int load(const struct dw_expr_env *env, uint64_t addr, unsigned n, uint64_t *out)
{
	uint8_t b[8];
	int err = env->read_mem(env->arg, addr, b, n);
	if (err)
		return err;
	uint64_t v = 0;
	for (unsigned i = n; i-- > 0;)
		v = v << 8 | b[i];
	*out = v;
	return DWUNW_OK;
}

int dw_expr_eval(const struct dw_expr_env *env, const uint8_t *expr, size_t len,
		 int push_initial, uint64_t initial, uint64_t *result)
{
	uint64_t st[DW_EXPR_MAX_STACK];
	unsigned sp = 0;           /* values on the stack; st[sp - 1] is the top */
	unsigned steps = 0;
	struct dw_cursor c;
	int err;

	if (!env || !result || (!expr && len) || !env->read_reg || !env->read_mem ||
	    (env->addr_size != 4 && env->addr_size != 8))
		return DWUNW_ERR_INVALID_ARG;

	const unsigned asz = env->addr_size;
	const unsigned bits = asz * 8;
	const uint64_t mask = width_mask(asz);

	if (push_initial)
		st[sp++] = initial & mask;
	if (!expr)
		expr = no_ops;   /* NULL + 0 is undefined in C */
	cur_init(&c, expr, len);

/* Operands are decoded before the stack is touched, so truncation wins over stack errors as
 * it does in dw_expr_check. */
#define OPERAND_OK() do { if (DW_UNLIKELY(c.err)) return c.err; } while (0)
#define NEED(n) do { if (DW_UNLIKELY(sp < (n))) return DWUNW_ERR_EXPR; } while (0)
#define PUSH(v) do { \
	if (DW_UNLIKELY(sp >= DW_EXPR_MAX_STACK)) \
		return DWUNW_ERR_EXPR; \
	uint64_t v_ = (v); \
	st[sp++] = v_ & mask; \
} while (0)
/* Replace the top two values by one. */
#define BINOP(expr_) do { NEED(2); uint64_t a = st[sp - 2], b = st[sp - 1]; (void)a; (void)b; \
	sp--; st[sp - 1] = (expr_) & mask; } while (0)
#define SCMP(op_) BINOP(sval(a, asz) op_ sval(b, asz) ? 1 : 0)

	while (c.p < c.end) {
		if (DW_UNLIKELY(++steps > DW_EXPR_MAX_STEPS))
			return DWUNW_ERR_EXPR;
		uint8_t op = *c.p++;
		uint64_t u, v;
		int64_t s;

		switch (op) {
		case DW_OP_lit0 ... DW_OP_lit31:
			PUSH((uint64_t)(op - DW_OP_lit0));
			break;
		case DW_OP_breg0 ... DW_OP_breg31:
			s = cur_sleb(&c);
			OPERAND_OK();
			if ((err = env->read_reg(env->arg, op - DW_OP_breg0, &v)))
				return err;
			PUSH(v + (uint64_t)s);
			break;
		case DW_OP_bregx:
			u = cur_uleb(&c);
			s = cur_sleb(&c);
			OPERAND_OK();
			/* Larger register numbers than unsigned holds cannot name a register. */
			if (u > 0xffffffffu)
				return DWUNW_ERR_UNSUPPORTED_CFI;
			if ((err = env->read_reg(env->arg, (unsigned)u, &v)))
				return err;
			PUSH(v + (uint64_t)s);
			break;
		case DW_OP_addr:
			u = cur_addr(&c, asz);
			OPERAND_OK();
			PUSH(u);
			break;
		case DW_OP_const1u: u = cur_u8(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const1s: u = (uint64_t)(int8_t)cur_u8(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const2u: u = cur_u16(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const2s: u = (uint64_t)(int16_t)cur_u16(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const4u: u = cur_u32(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const4s: u = (uint64_t)(int32_t)cur_u32(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_const8u:
		case DW_OP_const8s: u = cur_u64(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_constu: u = cur_uleb(&c); OPERAND_OK(); PUSH(u); break;
		case DW_OP_consts: u = (uint64_t)cur_sleb(&c); OPERAND_OK(); PUSH(u); break;

		case DW_OP_dup:
			NEED(1);
			PUSH(st[sp - 1]);
			break;
		case DW_OP_drop:
			NEED(1);
			sp--;
			break;
		case DW_OP_over:
			NEED(2);
			PUSH(st[sp - 2]);
			break;
		case DW_OP_pick:
			u = cur_u8(&c);
			OPERAND_OK();
			if (u >= sp)
				return DWUNW_ERR_EXPR;
			PUSH(st[sp - 1 - u]);
			break;
		case DW_OP_swap:
			NEED(2);
			u = st[sp - 1];
			st[sp - 1] = st[sp - 2];
			st[sp - 2] = u;
			break;
		case DW_OP_rot:
			/* top -> third, second -> top, third -> second */
			NEED(3);
			u = st[sp - 1];
			st[sp - 1] = st[sp - 2];
			st[sp - 2] = st[sp - 3];
			st[sp - 3] = u;
			break;

		case DW_OP_deref:
		case DW_OP_deref_size:
		case DW_OP_xderef:
		case DW_OP_xderef_size: {
			unsigned n = asz;
			if (op == DW_OP_deref_size || op == DW_OP_xderef_size) {
				n = cur_u8(&c);
				OPERAND_OK();
				/* Wider than the generic type, or nothing at all: malformed. */
				if (n == 0 || n > asz)
					return DWUNW_ERR_CORRUPT;
			}
			/* The x forms also pop an address-space id, which a process does not have. */
			unsigned x = op == DW_OP_xderef || op == DW_OP_xderef_size;
			NEED(1 + x);
			if ((err = load(env, st[sp - 1], n, &v)))
				return err;
			sp -= x;
			st[sp - 1] = v;
			break;
		}

		case DW_OP_abs:
			NEED(1);
			s = sval(st[sp - 1], asz);
			/* -INT_MIN wraps to itself, as the unsigned negation gives. */
			if (s < 0)
				st[sp - 1] = -(uint64_t)s & mask;
			break;
		case DW_OP_neg:
			NEED(1);
			st[sp - 1] = -st[sp - 1] & mask;
			break;
		case DW_OP_not:
			NEED(1);
			st[sp - 1] = ~st[sp - 1] & mask;
			break;
		case DW_OP_plus_uconst:
			u = cur_uleb(&c);
			OPERAND_OK();
			NEED(1);
			st[sp - 1] = (st[sp - 1] + u) & mask;
			break;

		case DW_OP_and: BINOP(a & b); break;
		case DW_OP_or: BINOP(a | b); break;
		case DW_OP_xor: BINOP(a ^ b); break;
		case DW_OP_plus: BINOP(a + b); break;
		case DW_OP_minus: BINOP(a - b); break;
		case DW_OP_mul: BINOP(a * b); break;
		case DW_OP_div: {
			NEED(2);
			int64_t a = sval(st[sp - 2], asz), b = sval(st[sp - 1], asz);
			if (b == 0)
				return DWUNW_ERR_EXPR;
			/* INT64_MIN / -1 overflows in C: negate unsigned, which wraps like the target. */
			u = b == -1 ? -(uint64_t)a : (uint64_t)(a / b);
			sp--;
			st[sp - 1] = u & mask;
			break;
		}
		case DW_OP_mod:
			/* Unsigned on the generic type (DWARF leaves its sign open; gdb does the same). */
			NEED(2);
			if (st[sp - 1] == 0)
				return DWUNW_ERR_EXPR;
			BINOP(a % b);
			break;
		case DW_OP_shl: BINOP(b >= bits ? 0 : a << b); break;
		case DW_OP_shr: BINOP(b >= bits ? 0 : a >> b); break;
		case DW_OP_shra: {
			NEED(2);
			int64_t a = sval(st[sp - 2], asz);
			uint64_t b = st[sp - 1];
			/* Shifting the sign-extended value by 63 fills every bit with the sign. */
			unsigned n = b > 63 ? 63 : (unsigned)b;
			u = a < 0 ? ~(~(uint64_t)a >> n) : (uint64_t)a >> n;
			sp--;
			st[sp - 1] = u & mask;
			break;
		}

		case DW_OP_eq: SCMP(==); break;
		case DW_OP_ne: SCMP(!=); break;
		case DW_OP_ge: SCMP(>=); break;
		case DW_OP_gt: SCMP(>); break;
		case DW_OP_le: SCMP(<=); break;
		case DW_OP_lt: SCMP(<); break;

		case DW_OP_skip:
		case DW_OP_bra: {
			int16_t off = (int16_t)cur_u16(&c);
			OPERAND_OK();
			if (op == DW_OP_bra) {
				NEED(1);
				if (st[--sp] == 0)
					break;
			}
			/* Relative to the next operation; landing on `len` ends the expression. */
			int64_t to = (int64_t)(c.p - expr) + off;
			if (to < 0 || (uint64_t)to > len)
				return DWUNW_ERR_EXPR;
			c.p = expr + to;
			break;
		}

		case DW_OP_nop:
			break;

		default:
			return DWUNW_ERR_UNSUPPORTED_CFI;
		}
	}
#undef OPERAND_OK
#undef NEED
#undef PUSH
#undef BINOP
#undef SCMP

	if (sp == 0)
		return DWUNW_ERR_EXPR;
	*result = st[sp - 1];
	return DWUNW_OK;
}

/*
 * Decode the operation at c->p and step over it. Returns 0, or the error eval would give for
 * the operation itself. *branch gets the branch offset of skip/bra (and 1 in *is_branch).
 */
static int check_op(struct dw_cursor *c, unsigned addr_size, int *is_branch, int16_t *branch)
{
	uint8_t op = cur_u8(c);
	unsigned n;

	*is_branch = 0;
	switch (op) {
	case DW_OP_lit0 ... DW_OP_lit31:
	case DW_OP_dup: case DW_OP_drop: case DW_OP_over: case DW_OP_swap: case DW_OP_rot:
	case DW_OP_deref: case DW_OP_xderef:
	case DW_OP_abs: case DW_OP_and: case DW_OP_div: case DW_OP_minus: case DW_OP_mod:
	case DW_OP_mul: case DW_OP_neg: case DW_OP_not: case DW_OP_or: case DW_OP_plus:
	case DW_OP_shl: case DW_OP_shr: case DW_OP_shra: case DW_OP_xor:
	case DW_OP_eq: case DW_OP_ge: case DW_OP_gt: case DW_OP_le: case DW_OP_lt: case DW_OP_ne:
	case DW_OP_nop:
		break;
	case DW_OP_breg0 ... DW_OP_breg31:
	case DW_OP_consts:
		cur_sleb(c);
		break;
	case DW_OP_bregx: {
		uint64_t reg = cur_uleb(c);
		cur_sleb(c);
		if (!c->err && reg > 0xffffffffu)
			return DWUNW_ERR_UNSUPPORTED_CFI;
		break;
	}
	case DW_OP_constu:
	case DW_OP_plus_uconst:
		cur_uleb(c);
		break;
	case DW_OP_addr: cur_skip(c, addr_size); break;
	case DW_OP_const1u: case DW_OP_const1s: case DW_OP_pick: cur_skip(c, 1); break;
	case DW_OP_const2u: case DW_OP_const2s: cur_skip(c, 2); break;
	case DW_OP_const4u: case DW_OP_const4s: cur_skip(c, 4); break;
	case DW_OP_const8u: case DW_OP_const8s: cur_skip(c, 8); break;
	case DW_OP_deref_size:
	case DW_OP_xderef_size:
		n = cur_u8(c);
		if (!c->err && (n == 0 || n > addr_size))
			return DWUNW_ERR_CORRUPT;
		break;
	case DW_OP_skip:
	case DW_OP_bra:
		*branch = (int16_t)cur_u16(c);
		*is_branch = 1;
		break;
	default:
		return DWUNW_ERR_UNSUPPORTED_CFI;
	}
	return c->err;
}

int dw_expr_check(const uint8_t *expr, size_t len, unsigned addr_size)
{
	uint8_t starts[CHECK_MAX_BRANCH_LEN / 8];  /* bit i: an operation starts at offset i */
	int has_branch = 0, is_branch, err;
	int16_t off = 0;
	struct dw_cursor c;

	if ((!expr && len) || (addr_size != 4 && addr_size != 8))
		return DWUNW_ERR_INVALID_ARG;

	if (!expr)
		expr = no_ops;
	/* Pass 1: every operation decodes; branch targets fall inside [0, len]. */
	if (len <= CHECK_MAX_BRANCH_LEN)
		memset(starts, 0, (len + 7) / 8);
	cur_init(&c, expr, len);
	while (c.p < c.end) {
		size_t at = (size_t)(c.p - expr);
		if (len <= CHECK_MAX_BRANCH_LEN)
			starts[at / 8] |= (uint8_t)(1u << (at % 8));
		if ((err = check_op(&c, addr_size, &is_branch, &off)))
			return err;
		if (is_branch) {
			int64_t to = (int64_t)(c.p - expr) + off;
			if (to < 0 || (uint64_t)to > len)
				return DWUNW_ERR_EXPR;
			has_branch = 1;
		}
	}
	if (!has_branch)
		return DWUNW_OK;
	if (len > CHECK_MAX_BRANCH_LEN)
		return DWUNW_ERR_UNSUPPORTED_CFI;

	/* Pass 2: every branch lands on an operation boundary (or exactly at the end). */
	cur_init(&c, expr, len);
	while (c.p < c.end) {
		check_op(&c, addr_size, &is_branch, &off);
		if (is_branch) {
			size_t to = (size_t)((int64_t)(c.p - expr) + off);
			if (to < len && !(starts[to / 8] & (1u << (to % 8))))
				return DWUNW_ERR_EXPR;
		}
	}
	return DWUNW_OK;
}
