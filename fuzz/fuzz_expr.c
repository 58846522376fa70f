// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: the DWARF expression machine (expr.c).
 *
 * Input: byte 0 = flags (bit 0: 4-byte addresses, bit 1: push the initial value first, bit 2:
 * register reads fail), bytes 1-8 = the initial value (the CFA), the rest = the expression.
 * dw_expr_check and dw_expr_eval run on every input; memory is a 256-byte window at MEM_BASE
 * (the input itself, repeated), every register has a value near it. Checked: no crash, no sanitizer
 * report, a result that fits the address size, an error code the header documents, and that an
 * expression dw_expr_check accepts never fails to decode at run time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dwunw.h"
#include "expr.h"

#define MEM_BASE 0x10000ull
#define MEM_SIZE 256

struct env_arg {
	uint8_t mem[MEM_SIZE];
	int regs_fail;
	unsigned reads;
};

static int read_reg(void *arg, unsigned reg, uint64_t *val)
{
	struct env_arg *a = arg;

	if (a->regs_fail)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	*val = MEM_BASE + 8 * (uint64_t)(reg & 31);
	return DWUNW_OK;
}

static int read_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct env_arg *a = arg;

	a->reads++;
	if (len > 8)
		abort(); /* the machine never asks for more than a generic value */
	if (addr < MEM_BASE || addr - MEM_BASE > MEM_SIZE || len > MEM_SIZE - (addr - MEM_BASE))
		return DWUNW_ERR_IO;
	memcpy(buf, a->mem + (addr - MEM_BASE), len);
	return DWUNW_OK;
}

static int documented(int err)
{
	return err == DWUNW_OK || err == DWUNW_ERR_EXPR || err == DWUNW_ERR_CORRUPT ||
	       err == DWUNW_ERR_UNSUPPORTED_CFI || err == DWUNW_ERR_IO;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct env_arg a = { 0 };
	struct dw_expr_env env;
	uint64_t initial = 0, result = 0;
	const uint8_t *expr;
	size_t len;
	uint8_t *copy;
	int err, check;

	if (size < 9)
		return 0;
	env.addr_size = (data[0] & 1) ? 4 : 8;
	env.read_reg = read_reg;
	env.read_mem = read_mem;
	env.arg = &a;
	a.regs_fail = !!(data[0] & 4);
	memcpy(&initial, data + 1, 8);
	for (size_t i = 0; i < MEM_SIZE; i++)
		a.mem[i] = data[i % size];
	/* An exact-size heap copy: reading one byte past the expression is an ASan report. */
	len = size - 9;
	copy = malloc(len ? len : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 9, len);
	expr = len ? copy : NULL;

	check = dw_expr_check(expr, len, env.addr_size);
	if (!documented(check) || check == DWUNW_ERR_IO) {
		fprintf(stderr, "dw_expr_check: undocumented result %d\n", check);
		abort();
	}
	err = dw_expr_eval(&env, expr, len, data[0] & 2, initial, &result);
	if (!documented(err)) {
		fprintf(stderr, "dw_expr_eval: undocumented result %d\n", err);
		abort();
	}
	/* A statically valid expression never decodes badly at run time: with every register
	 * readable, eval can fail on the stack, a branch loop or memory, not on decoding. */
	if (check == DWUNW_OK && !a.regs_fail && (err == DWUNW_ERR_CORRUPT || err == DWUNW_ERR_UNSUPPORTED_CFI)) {
		fprintf(stderr, "dw_expr_check accepted what dw_expr_eval refused (%d)\n", err);
		abort();
	}
	if (err == DWUNW_OK && env.addr_size == 4 && result > UINT32_MAX) {
		fprintf(stderr, "dw_expr_eval: 4-byte result 0x%llx\n", (unsigned long long)result);
		abort();
	}
	/* Each operation reads memory at most once: the step limit bounds the reads too. */
	if (a.reads > DW_EXPR_MAX_STEPS) {
		fprintf(stderr, "dw_expr_eval: %u reads\n", a.reads);
		abort();
	}
	free(copy);
	return 0;
}
