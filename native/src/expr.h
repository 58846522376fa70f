/* SPDX-License-Identifier: GPL-2.0-only */
/* DWARF expression stack machine for CFI expressions (DW_CFA_expression, val_expression,
 * def_cfa_expression). Every DW_OP_* that has a meaning without .debug_info is evaluated; the rest
 * (frame base, DIE references, typed stack, pieces, TLS, entry values) are DWUNW_ERR_UNSUPPORTED_CFI. */
#ifndef DWUNW_EXPR_H
#define DWUNW_EXPR_H

#include <stddef.h>
#include <stdint.h>

#define DW_EXPR_MAX_STACK 64      /* values on the stack */
#define DW_EXPR_MAX_STEPS 10000   /* operations executed, so back-edges cannot loop forever */

struct dw_expr_env {
	uint8_t addr_size;        /* 4 or 8: width of the generic type; results wrap to it */
	/* Value of a DWARF register of the frame being unwound; DWUNW_ERR_* when not known. */
	int (*read_reg)(void *arg, unsigned reg, uint64_t *val);
	/* Target memory; DWUNW_ERR_* on failure. */
	int (*read_mem)(void *arg, uint64_t addr, void *buf, size_t len);
	void *arg;
};

/*
 * Evaluate `expr` with `initial` pushed first when `push_initial` (the CFA, for DW_CFA_expression
 * and val_expression). The result is the value on top of the stack. Errors: DWUNW_ERR_EXPR
 * (underflow, overflow, division by zero, step limit, branch out of range), DWUNW_ERR_CORRUPT
 * (truncated operand), DWUNW_ERR_UNSUPPORTED_CFI (operation needing debug info), and whatever
 * read_reg / read_mem return.
 */
int dw_expr_eval(const struct dw_expr_env *env, const uint8_t *expr, size_t len,
		 int push_initial, uint64_t initial, uint64_t *result);

/* Static check done when a table is built: every operation decodes, branches land on an
 * operation boundary inside the expression. DWUNW_OK or the error eval would give first. */
int dw_expr_check(const uint8_t *expr, size_t len, unsigned addr_size);

#endif
