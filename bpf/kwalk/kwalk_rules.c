// SPDX-License-Identifier: GPL-2.0-only
/* libdwunw's rules as the in-kernel walker evaluates them (struct kw_rule), interned in kw_rules
 * (kwalk_loader.h). */
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include "dwunw_export.h"
#include "kwalk_loader.h"

static const uint8_t plt_expr10[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22 };
static const uint8_t plt_expr11[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22 };

const char *kw_why_name(unsigned w)
{
	static const char *n[] = { "", "cfa-expression", "cfa-register", "ra-rule", "register-rule",
				   "offset-range", "no-cfa" };
	return w < sizeof(n) / sizeof(n[0]) ? n[w] : "?";
}

/* A LEB128 number (signed: sign-extended from its last byte); -1 past end or over 64 bits. */
static int leb128(const uint8_t **p, const uint8_t *end, int sign, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*p >= end || shift > 63)
			return -1;
		b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (sign && shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	*out = v;
	return 0;
}

/* CFA expressions the walker evaluates: the PLT's, bregN off [deref [plus_uconst k]]. */
static void cfa_expr(const uint8_t *e, uint32_t len, struct kw_rule *r)
{
	const uint8_t *p = e, *end = e + len;
	uint64_t uoff, add;
	int64_t off;

	if (!KW_ARM64 && len == sizeof(plt_expr11) && (!memcmp(e, plt_expr11, len) || !memcmp(e, plt_expr10, len))) {
		r->cfa_type = KW_CFA_PLT;
		r->cfa_off = 8;
		r->cfa_add = e[6] == 0x3b ? 11 : 10;
		return;
	}
	r->cfa_type = KW_CFA_UNSUP;
	r->cfa_reg = KW_WHY_CFA_EXPR;
	if (len < 2 || e[0] < 0x70 || e[0] > 0x7f)
		return;
	p++;
	if (leb128(&p, end, 1, &uoff))
		return;
	off = (int64_t)uoff;
	if (off < INT32_MIN || off > INT32_MAX)
		return;
	if (p == end) {
		if (e[0] - 0x70 >= KW_NREGS)
			return;
		r->cfa_type = KW_CFA_REG;
		r->cfa_reg = e[0] - 0x70;
		r->cfa_off = (int32_t)off;
		return;
	}
	if (*p++ != 0x06) /* DW_OP_deref */
		return;
	add = 0;
	if (p < end) {
		if (*p++ != 0x23 || leb128(&p, end, 0, &add) || add > INT16_MAX || p != end)
			return;
	}
	r->cfa_type = KW_CFA_DEREF;
	r->cfa_reg = e[0] - 0x70;
	r->cfa_off = (int32_t)off;
	r->cfa_add = (int16_t)add;
}

static int slot_of(unsigned reg)
{
#if KW_ARM64
	return reg >= 19 && reg <= 30 ? (int)reg - 19 : -1;
#else
	switch (reg) {
	case 3: return 0;
	case 6: return 1;
	case 12: case 13: case 14: case 15: return (int)reg - 10;
	default: return -1;
	}
#endif
}

/* libdwunw's rule -> the walker's. */
void kw_rule_from(const struct dwunw_export_rule *x, struct kw_rule *r)
{
	int ra_seen = 0;

	memset(r, 0, sizeof(*r));
	if (x->cfa_kind == DWUNW_XCFA_END)
		return;
	if (x->flags & DWUNW_ROW_SIGNAL)
		r->flags |= KW_RF_SIGNAL;
	if (x->cfa_kind == DWUNW_XCFA_REG) {
		if (x->cfa_reg >= KW_NREGS) {
			r->cfa_type = KW_CFA_UNSUP;
			r->cfa_reg = KW_WHY_CFA_REG;
			return;
		}
		r->cfa_type = KW_CFA_REG;
		r->cfa_reg = (uint8_t)x->cfa_reg;
		r->cfa_off = x->cfa_off;
	} else if (x->cfa_kind == DWUNW_XCFA_EXPR) {
		cfa_expr(x->cfa_expr, x->cfa_expr_len, r);
		if (r->cfa_type == KW_CFA_UNSUP)
			return;
	} else {
		r->cfa_type = KW_CFA_UNSUP;
		r->cfa_reg = KW_WHY_NO_CFA;
		return;
	}
#define UNSUP(w) do { r->cfa_type = KW_CFA_UNSUP; r->cfa_reg = (w); return; } while (0)
	if ((r->cfa_type == KW_CFA_REG || r->cfa_type == KW_CFA_DEREF) && r->cfa_reg >= KW_NREGS)
		UNSUP(KW_WHY_CFA_REG);
	for (unsigned i = 0; i < x->nregs; i++) {
		unsigned reg = x->regs[i].reg, kind = x->regs[i].kind;
		int32_t val = x->regs[i].val;
		int s;

		if (reg == x->ra_reg && !KW_ARM64) {
			ra_seen = 1;
			if (kind == DWUNW_XREG_UNDEF) {
				r->flags |= KW_RF_RA_UNDEF;
				continue;
			}
			if (kind != DWUNW_XREG_OFFSET)
				UNSUP(KW_WHY_RA_RULE);
			if (val % 8 || val / 8 < -128 || val / 8 > 127)
				UNSUP(KW_WHY_OFFSET);
			r->ra_off = (int8_t)(val / 8);
			continue;
		}
		if (reg == KW_SP) /* a rule for the stack pointer itself */
			UNSUP(KW_WHY_REG_RULE);
		if (KW_ARM64 && reg == x->ra_reg) {
			ra_seen = 1; /* x30: an ordinary slot below, or undefined (the outermost frame) */
			if (kind == DWUNW_XREG_UNDEF) {
				r->flags |= KW_RF_RA_UNDEF;
				continue;
			}
		}
		s = slot_of(reg);
		if (s < 0)
			continue; /* caller-saved or vector registers: unknown in the caller anyway */
		switch (kind) {
		case DWUNW_XREG_SAME:
			break;
		case DWUNW_XREG_UNDEF:
			r->undef_regs |= 1u << reg;
			break;
		case DWUNW_XREG_OFFSET:
			if (val % 8 || val / 8 < -128 || val / 8 > 127)
				UNSUP(KW_WHY_OFFSET);
			r->saved |= 1u << s;
			r->off[s] = (int8_t)(val / 8);
			break;
		default:
			UNSUP(KW_WHY_REG_RULE);
		}
	}
	if (!ra_seen && !KW_ARM64)
		r->flags |= KW_RF_RA_UNDEF; /* no rule for the pseudo column: the chain ends */
	if (!ra_seen && KW_ARM64)
		r->flags |= KW_RF_RA_LR;   /* a leaf: the return address is still in x30 */
	if (KW_ARM64 && x->ra_reg != KW_LR)
		UNSUP(KW_WHY_RA_RULE);
	{
		int win = KW_ARM64 || (r->flags & KW_RF_RA_UNDEF) || (r->ra_off >= -8 && r->ra_off < 0);

		for (int i = 0; i < KW_NSAVED; i++)
			if ((r->saved & (1u << i)) && (r->off[i] < -8 || r->off[i] >= 0))
				win = 0;
		if (win)
			r->flags |= KW_RF_WINDOW;
	}
#undef UNSUP
}

static uint32_t rule_hash(const struct kw_rule *r)
{
	const uint8_t *p = (const uint8_t *)r;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(*r); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Global id of a rule (interned); -1 when the rule table is full. */
int64_t kw_rule_intern(struct kw_loader *l, const struct kw_rule *r)
{
	uint32_t h = rule_hash(r) & (l->rhash_size - 1);

	for (;;) {
		uint32_t e = l->rhash[h];

		if (!e)
			break;
		if (!memcmp(&l->rules[e - 1], r, sizeof(*r)))
			return e - 1;
		h = (h + 1) & (l->rhash_size - 1);
	}
	if (l->nrules >= l->rules_cap)
		return -1;
	l->rules[l->nrules] = *r;
	if (bpf_map_update_elem(l->fd_rules, &l->nrules, r, BPF_ANY))
		return -1;
	l->rhash[h] = ++l->nrules;
	if (r->cfa_type == KW_CFA_UNSUP)
		l->nunsup++;
	return l->nrules - 1;
}

void kw_rule_text(struct kw_loader *l, uint32_t gid, char *buf, size_t len)
{
#if KW_ARM64
	static const char *rn[KW_NREGS] = { "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
		"x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24",
		"x25", "x26", "x27", "x28", "x29", "x30", "sp" };
	static const char *sn[KW_NSAVED] = { "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
		"x28", "x29", "x30" };
#else
	static const char *rn[KW_NREGS] = { "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
				    "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
	static const char *sn[KW_NSAVED] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
#endif
	const struct kw_rule *r;
	size_t n = 0;

	if (!l || gid >= l->nrules) {
		snprintf(buf, len, "-");
		return;
	}
	r = &l->rules[gid];
	switch (r->cfa_type) {
	case KW_CFA_END: snprintf(buf, len, "end"); return;
	case KW_CFA_UNSUP: snprintf(buf, len, "unsupported(%s)", kw_why_name(r->cfa_reg)); return;
	case KW_CFA_REG: n = snprintf(buf, len, "cfa=%s%+d", rn[r->cfa_reg & (KW_NREGS - 1)], r->cfa_off); break;
	case KW_CFA_DEREF:
		n = snprintf(buf, len, "cfa=*(%s%+d)%+d", rn[r->cfa_reg & (KW_NREGS - 1)], r->cfa_off, r->cfa_add);
		break;
	case KW_CFA_PLT: n = snprintf(buf, len, "cfa=plt(rsp+%d,%d)", r->cfa_off, r->cfa_add); break;
	}
	if (n < len)
	{
		if (r->flags & KW_RF_RA_UNDEF)
			n += snprintf(buf + n, len - n, " ra=u");
		else if (KW_ARM64)
			n += snprintf(buf + n, len - n, (r->flags & KW_RF_RA_LR) ? " ra=x30" : " ra=slot");
		else
			n += snprintf(buf + n, len - n, " ra=c%+d", 8 * r->ra_off);
	}
	for (int i = 0; i < KW_NSAVED && n < len; i++) {
		if (r->saved & (1u << i))
			n += snprintf(buf + n, len - n, " %s=c%+d", sn[i], 8 * r->off[i]);
		else if (r->undef_regs & (1u << (KW_ARM64 ? 19 + i : i == 0 ? 3 : i == 1 ? 6 : 10 + i)))
			n += snprintf(buf + n, len - n, " %s=u", sn[i]);
	}
	if ((r->flags & KW_RF_SIGNAL) && n < len)
		snprintf(buf + n, len - n, " signal");
}
