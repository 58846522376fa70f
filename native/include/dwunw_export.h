/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A module's compiled unwind table, exported row by row with its rules in structured form, for
 * consumers that re-encode it (the in-kernel walker's BPF maps, bpf/kwalk/kwalk_user.c). Narrow on
 * purpose: no table internals leak, only what a rule says.
 *
 * The pointers in struct dwunw_export_rule (expression bytes) point into the module's ELF image:
 * valid while the caller holds its reference on the module.
 */
#ifndef DWUNW_EXPORT_H
#define DWUNW_EXPORT_H

#include <stdint.h>
#include "dwunw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cfa_kind */
#define DWUNW_XCFA_NONE 0           /* no CFA rule */
#define DWUNW_XCFA_REG  1           /* CFA = cfa_reg + cfa_off */
#define DWUNW_XCFA_EXPR 2           /* CFA = value of cfa_expr */
#define DWUNW_XCFA_END  3           /* gap after an FDE: no CFI from this pc on */

/* regs[].kind */
#define DWUNW_XREG_UNDEF      1     /* the register has no value in the caller */
#define DWUNW_XREG_SAME       2
#define DWUNW_XREG_OFFSET     3     /* saved at CFA + val */
#define DWUNW_XREG_VAL_OFFSET 4     /* value is CFA + val */
#define DWUNW_XREG_REG        5     /* saved in register val */
#define DWUNW_XREG_EXPR       6     /* saved at the address expr gives (CFA pushed first) */
#define DWUNW_XREG_VAL_EXPR   7     /* value is expr's result (CFA pushed first) */

struct dwunw_export_rule {
	uint8_t cfa_kind;           /* DWUNW_XCFA_* */
	uint8_t flags;              /* DWUNW_ROW_SIGNAL, DWUNW_ROW_RA_SIGNED */
	uint16_t cfa_reg;
	int32_t cfa_off;
	uint16_t ra_reg;            /* return-address column */
	uint16_t nregs;             /* entries of regs[] used */
	uint32_t cfa_expr_len;
	const uint8_t *cfa_expr;    /* DWUNW_XCFA_EXPR: the DWARF expression */
	struct {
		uint16_t reg;       /* DWARF number */
		uint8_t kind;       /* DWUNW_XREG_* */
		uint8_t pad;
		int32_t val;
		uint32_t expr_len;
		const uint8_t *expr;
	} regs[DWUNW_ROW_MAX_REGS];
};

struct dwunw_export_info {
	uint64_t rows;
	uint64_t rules;             /* rule ids are 0 .. rules-1; id 0 is the END rule */
};

/* Rows and rules of the module's table (built on first use). */
int dwunw_export_info(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_export_info *out);
/*
 * Rows first .. first+n-1: the module address each starts at, and its rule id. Returns the number
 * written (n clipped to the table), or a DWUNW_ERR_* code.
 */
int64_t dwunw_export_rows(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t first, uint64_t n,
			  uint64_t *pcs, uint32_t *rule_ids);
/* Rule `id` (DWUNW_ERR_INVALID_ARG past the end). Registers beyond DWUNW_ROW_MAX_REGS are cut:
 * DWUNW_ERR_UNSUPPORTED_CFI is returned then, with what fits filled in. */
int dwunw_export_rule(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint32_t id,
		      struct dwunw_export_rule *out);

/* The module's bytes at module address `addr` (its file's loaded contents): DWUNW_OK, or
 * DWUNW_ERR_INVALID_ARG where no PT_LOAD holds them. For re-encoders that check what lies in a
 * gap the table leaves (alignment padding, or code without CFI). */
int dwunw_export_code(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr, void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
