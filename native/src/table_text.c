// SPDX-License-Identifier: GPL-2.0-only
/* A table row in readelf's --debug-dump=frames-interp notation, so tables can be diffed with it. */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "table.h"

static void reg_label(const struct dwunw_arch_ops *arch, unsigned reg, char *buf, size_t len)
{
	const char *name = arch && arch->reg_name ? arch->reg_name(reg) : NULL;

	if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "r%u", reg);
}

int dw_table_row_text(const struct dw_table *t, const struct dwunw_arch_ops *arch, uint32_t row,
		      struct dwunw_row_text *out)
{
	const struct dw_rule *r;
	char name[16];

	if (row >= t->nrows)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	r = dw_table_rule(t, row);
	out->pc = t->base + dw_table_pc(t, row);
	out->end = row + 1 < t->nrows ? t->base + dw_table_pc(t, row + 1) : out->pc;
	if (r->flags & DW_RULEF_SIGNAL)
		out->flags |= DWUNW_ROW_SIGNAL;
	if (r->flags & DW_RULEF_RA_SIGNED)
		out->flags |= DWUNW_ROW_RA_SIGNED;
	switch (r->cfa_kind) {
	case DW_CFA_KIND_END:
		strcpy(out->cfa, "end");
		return DWUNW_OK;
	case DW_CFA_KIND_EXPR:
		strcpy(out->cfa, "exp");
		break;
	case DW_CFA_KIND_REG:
		reg_label(arch, r->cfa_reg, name, sizeof(name));
		snprintf(out->cfa, sizeof(out->cfa), "%s%+d", name, r->cfa_off);
		break;
	default:
		strcpy(out->cfa, "u");
		break;
	}
	for (uint32_t i = 0; i < r->nregs && out->nregs < DWUNW_ROW_MAX_REGS; i++) {
		const struct dw_regrule *rr = &t->regrules[r->reg_first + i];
		typeof(out->regs[0]) *o = &out->regs[out->nregs++];

		o->reg = rr->reg;
		o->is_ra = rr->reg == r->ra_reg;
		if (o->is_ra)
			strcpy(o->name, "ra");
		else
			reg_label(arch, rr->reg, o->name, sizeof(o->name));
		switch (rr->kind) {
		case DW_RULE_UNDEF: strcpy(o->rule, "u"); break;
		case DW_RULE_SAME: strcpy(o->rule, "s"); break;
		case DW_RULE_OFFSET: snprintf(o->rule, sizeof(o->rule), "c%+d", rr->val); break;
		case DW_RULE_VAL_OFFSET: snprintf(o->rule, sizeof(o->rule), "v%+d", rr->val); break;
		case DW_RULE_EXPR: strcpy(o->rule, "exp"); break;
		case DW_RULE_VAL_EXPR: strcpy(o->rule, "vexp"); break;
		case DW_RULE_REG: {
			const char *n = arch && arch->reg_name ? arch->reg_name((unsigned)rr->val) : NULL;
			if (n)
				snprintf(o->rule, sizeof(o->rule), "r%d (%s)", rr->val, n);
			else
				snprintf(o->rule, sizeof(o->rule), "r%d", rr->val);
			break;
		}
		default: strcpy(o->rule, "?"); break;
		}
	}
	return DWUNW_OK;
}
