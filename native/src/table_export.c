// SPDX-License-Identifier: GPL-2.0-only
/* dwunw_export.h: a module's table as structured rows and rules, for re-encoders (bpf/kwalk). */
#include <string.h>
#include "dwunw_export.h"
#include "internal.h"
#include "module.h"

_Static_assert(DWUNW_XCFA_REG == DW_CFA_KIND_REG && DWUNW_XCFA_EXPR == DW_CFA_KIND_EXPR &&
	       DWUNW_XCFA_END == DW_CFA_KIND_END, "cfa kinds");
_Static_assert(DWUNW_XREG_UNDEF == DW_RULE_UNDEF && DWUNW_XREG_OFFSET == DW_RULE_OFFSET &&
	       DWUNW_XREG_VAL_EXPR == DW_RULE_VAL_EXPR, "register rule kinds");

static int table_of(struct dwunw_ctx *ctx, struct dwunw_module *mod, const struct dw_table **t)
{
	if (!dw_ctx(ctx) || !mod)
		return DWUNW_ERR_INVALID_ARG;
	return dw_module_full_table(mod, t);
}

DWUNW_API int dwunw_export_info(struct dwunw_ctx *ctx, struct dwunw_module *mod, struct dwunw_export_info *out)
{
	const struct dw_table *t;
	int err;

	if (!out)
		return DWUNW_ERR_INVALID_ARG;
	if ((err = table_of(ctx, mod, &t)))
		return err;
	out->rows = t->nrows;
	out->rules = t->nrules;
	return DWUNW_OK;
}

DWUNW_API int64_t dwunw_export_rows(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t first,
				    uint64_t n, uint64_t *pcs, uint32_t *rule_ids)
{
	const struct dw_table *t;
	int err;

	if (!pcs || !rule_ids)
		return DWUNW_ERR_INVALID_ARG;
	if ((err = table_of(ctx, mod, &t)))
		return err;
	if (first >= t->nrows)
		return 0;
	if (n > t->nrows - first)
		n = t->nrows - first;
	for (uint64_t i = 0; i < n; i++) {
		pcs[i] = t->base + dw_table_pc(t, (uint32_t)(first + i));
		rule_ids[i] = dw_table_id(t, (uint32_t)(first + i));
	}
	return (int64_t)n;
}

static void expr_of(const struct dw_table *t, int64_t idx, const uint8_t **p, uint32_t *len)
{
	if (idx < 0 || (uint64_t)idx >= t->nexprs) {
		*p = NULL;
		*len = 0;
		return;
	}
	*p = t->exprs[idx].p;
	*len = t->exprs[idx].len;
}

DWUNW_API int dwunw_export_rule(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint32_t id,
				struct dwunw_export_rule *out)
{
	const struct dw_table *t;
	const struct dw_rule *r;
	int err;

	if (!out)
		return DWUNW_ERR_INVALID_ARG;
	if ((err = table_of(ctx, mod, &t)))
		return err;
	if (id >= t->nrules)
		return DWUNW_ERR_INVALID_ARG;
	r = &t->rules[id];
	memset(out, 0, sizeof(*out));
	out->cfa_kind = r->cfa_kind;
	out->flags = (r->flags & DW_RULEF_SIGNAL ? DWUNW_ROW_SIGNAL : 0) |
		     (r->flags & DW_RULEF_RA_SIGNED ? DWUNW_ROW_RA_SIGNED : 0);
	out->cfa_reg = r->cfa_reg;
	out->ra_reg = r->ra_reg;
	if (r->cfa_kind == DW_CFA_KIND_EXPR)
		expr_of(t, r->cfa_off, &out->cfa_expr, &out->cfa_expr_len);
	else
		out->cfa_off = r->cfa_off;
	for (uint32_t i = 0; i < r->nregs; i++) {
		const struct dw_regrule *rr = &t->regrules[r->reg_first + i];

		if (i >= DWUNW_ROW_MAX_REGS)
			return DWUNW_ERR_UNSUPPORTED_CFI;
		out->regs[i].reg = rr->reg;
		out->regs[i].kind = rr->kind;
		if (rr->kind == DW_RULE_EXPR || rr->kind == DW_RULE_VAL_EXPR)
			expr_of(t, rr->val, &out->regs[i].expr, &out->regs[i].expr_len);
		else
			out->regs[i].val = rr->val;
		out->nregs = (uint16_t)(i + 1);
	}
	return DWUNW_OK;
}

DWUNW_API int dwunw_export_code(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr, void *buf, size_t len)
{
	if (!dw_ctx(ctx) || !mod || (!buf && len))
		return DWUNW_ERR_INVALID_ARG;
	return dw_elf_read_vaddr(&mod->elf, addr, buf, len);
}
