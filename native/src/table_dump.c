// SPDX-License-Identifier: GPL-2.0-only
/*
 * A whole table as text or JSON in a few calls (dwunw_table_dump). A row's text depends only on
 * its rule, so each rule used is rendered once and a row costs its address and a copy: the
 * dictionary that makes the table small makes its dump cheap too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "module.h"
#include "table.h"

/* chalk's codes, so the CLI's output looks the same whichever side renders it. */
#define BOLD_ON   "\x1b[1m"
#define BOLD_OFF  "\x1b[22m"
#define DIM_ON    "\x1b[2m"
#define DIM_OFF   "\x1b[22m"
#define CYAN_ON   "\x1b[36m"
#define GREEN_ON  "\x1b[32m"
#define COLOR_OFF "\x1b[39m"

struct col {
	uint16_t reg;
	uint16_t is_ra;
	uint32_t width;
	char label[16];
};

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void sb_str(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_pad(struct sbuf *b, size_t have, size_t width)
{
	while (have++ < width)
		sb_put(b, " ", 1);
}

static void sb_trim(struct sbuf *b)
{
	while (b->len && b->p[b->len - 1] == ' ')
		b->p[--b->len] = 0;
}

/* A JSON string of plain text (names and rules never hold control characters). */
static void sb_json(struct sbuf *b, const char *s)
{
	sb_put(b, "\"", 1);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			sb_put(b, "\\", 1);
		sb_put(b, s, 1);
	}
	sb_put(b, "\"", 1);
}

struct dump {
	uint32_t nrules;
	char **suffix;             /* per rule id: what follows the address on its line */
	uint32_t *suffix_len;
	char *header;              /* text: the column line */
	uint32_t pc_width;
};

static void dump_free(struct dump *d)
{
	if (d->suffix)
		for (uint32_t i = 0; i < d->nrules; i++)
			free(d->suffix[i]);
	free(d->suffix);
	free(d->suffix_len);
	free(d->header);
}

static int col_index(struct col *cols, uint32_t ncols, unsigned reg)
{
	for (uint32_t i = 0; i < ncols; i++)
		if (cols[i].reg == reg)
			return (int)i;
	return -1;
}

static int by_reg(const void *a, const void *b)
{
	return (int)((const struct col *)a)->reg - (int)((const struct col *)b)->reg;
}

/* Render every rule some row uses; the text form's columns are the union of their registers. */
static int dump_prepare(const struct dw_table *t, const struct dwunw_arch_ops *arch, uint32_t format,
			struct dump *d)
{
	const int json = format & DWUNW_DUMP_JSON, color = format & DWUNW_DUMP_COLOR;
	struct dwunw_row_text *rt = NULL;
	uint32_t *first = NULL;
	struct col cols[DWUNW_ROW_MAX_REGS * 2];
	uint32_t ncols = 0, cfa_width = 3;
	int rc = DWUNW_ERR_NOMEM;

	memset(d, 0, sizeof(*d));
	d->nrules = t->nrules;
	d->pc_width = (arch ? arch->addr_size : t->addr_size) * 2;
	d->suffix = calloc(t->nrules ? t->nrules : 1, sizeof(*d->suffix));
	d->suffix_len = calloc(t->nrules ? t->nrules : 1, sizeof(*d->suffix_len));
	first = malloc((t->nrules ? t->nrules : 1) * sizeof(*first));
	rt = malloc(sizeof(*rt) * (t->nrules ? t->nrules : 1));
	if (!d->suffix || !d->suffix_len || !first || !rt)
		goto out;
	/* A row standing for each rule: its text is the rule's. */
	memset(first, 0xff, t->nrules * sizeof(*first));
	for (uint32_t r = 0; r < t->nrows; r++) {
		uint32_t id = dw_table_id(t, r);
		if (id < t->nrules && first[id] == UINT32_MAX)
			first[id] = r;
	}
	for (uint32_t id = 0; id < t->nrules; id++) {
		if (first[id] == UINT32_MAX)
			continue;
		if ((rc = dw_table_row_text(t, arch, first[id], &rt[id])))
			goto out;
		size_t cl = strnlen(rt[id].cfa, sizeof(rt[id].cfa));
		if (cl > cfa_width)
			cfa_width = (uint32_t)cl;
		if (!strcmp(rt[id].cfa, "end"))
			continue;
		for (uint32_t i = 0; i < rt[id].nregs; i++) {
			typeof(rt[id].regs[0]) *g = &rt[id].regs[i];
			int k = col_index(cols, ncols, g->reg);
			if (k < 0) {
				if (ncols == DW_ARRAY_SIZE(cols)) {
					rc = DWUNW_ERR_UNSUPPORTED_CFI;
					goto out;
				}
				k = (int)ncols++;
				memset(&cols[k], 0, sizeof(cols[k]));
				cols[k].reg = g->reg;
				snprintf(cols[k].label, sizeof(cols[k].label), "%s", g->name[0] ? g->name : "?");
				if (!g->name[0])
					snprintf(cols[k].label, sizeof(cols[k].label), "r%u", g->reg);
			}
			if (g->is_ra) {
				cols[k].is_ra = 1;
				strcpy(cols[k].label, "ra");
			}
			size_t w = strnlen(g->rule, sizeof(g->rule));
			if (w > cols[k].width)
				cols[k].width = (uint32_t)w;
		}
	}
	for (uint32_t k = 0; k < ncols; k++)
		if (strlen(cols[k].label) > cols[k].width)
			cols[k].width = (uint32_t)strlen(cols[k].label);
	qsort(cols, ncols, sizeof(cols[0]), by_reg);

	for (uint32_t id = 0; id < t->nrules; id++) {
		struct sbuf b = { 0 };
		if (first[id] == UINT32_MAX)
			continue;
		const struct dwunw_row_text *x = &rt[id];
		int end = !strcmp(x->cfa, "end");
		if (json) {
			/* Registers by DWARF number, as the columns are. */
			sb_str(&b, "\",\"cfa\":");
			sb_json(&b, x->cfa);
			sb_str(&b, ",\"regs\":{");
			int n = 0;
			for (uint32_t k = 0; k < ncols && !end; k++)
				for (uint32_t i = 0; i < x->nregs; i++) {
					if (x->regs[i].reg != cols[k].reg)
						continue;
					if (n++)
						sb_str(&b, ",");
					sb_json(&b, x->regs[i].is_ra ? "ra" : x->regs[i].name[0] ? x->regs[i].name : cols[k].label);
					sb_str(&b, ":");
					sb_json(&b, x->regs[i].rule);
				}
			sb_str(&b, "}}");
		} else if (end) {
			sb_str(&b, " end");
			if (color)
				sb_str(&b, DIM_OFF);
			sb_str(&b, "\n");
		} else {
			size_t cl = strlen(x->cfa);
			sb_str(&b, " ");
			if (color)
				sb_str(&b, CYAN_ON);
			sb_str(&b, x->cfa);
			if (color)
				sb_str(&b, COLOR_OFF);
			sb_pad(&b, cl, cfa_width);
			for (uint32_t k = 0; k < ncols; k++) {
				const char *rule = "u";
				for (uint32_t i = 0; i < x->nregs; i++)
					if (x->regs[i].reg == cols[k].reg)
						rule = x->regs[i].rule;
				int u = !strcmp(rule, "u");
				sb_str(&b, " ");
				if (color && !u)
					sb_str(&b, GREEN_ON);
				sb_str(&b, rule);
				if (color && !u)
					sb_str(&b, COLOR_OFF);
				sb_pad(&b, strlen(rule), cols[k].width);
			}
			sb_trim(&b);
			sb_str(&b, "\n");
		}
		if (b.oom || !b.p) {
			free(b.p);
			rc = DWUNW_ERR_NOMEM;
			goto out;
		}
		d->suffix[id] = b.p;
		d->suffix_len[id] = (uint32_t)b.len;
	}
	if (!json) {
		struct sbuf b = { 0 };
		if (color)
			sb_str(&b, BOLD_ON);
		sb_str(&b, "LOC");
		sb_pad(&b, 3, d->pc_width);
		sb_str(&b, " CFA");
		sb_pad(&b, 3, cfa_width);
		for (uint32_t k = 0; k < ncols; k++) {
			sb_str(&b, " ");
			sb_str(&b, cols[k].label);
			sb_pad(&b, strlen(cols[k].label), cols[k].width);
		}
		sb_trim(&b);
		if (color)
			sb_str(&b, BOLD_OFF);
		sb_str(&b, "\n");
		if (b.oom || !b.p) {
			free(b.p);
			rc = DWUNW_ERR_NOMEM;
			goto out;
		}
		d->header = b.p;
	}
	rc = DWUNW_OK;
out:
	free(first);
	free(rt);
	if (rc)
		dump_free(d);
	return rc;
}

static const char hexdig[] = "0123456789abcdef";

/* pc in hex, zero-padded to `width` digits (more when it needs them). */
static size_t put_hex(char *o, uint64_t v, uint32_t width)
{
	char tmp[16];
	size_t n = 0;

	do {
		tmp[n++] = hexdig[v & 15];
		v >>= 4;
	} while (v);
	while (n < width && n < sizeof(tmp))
		tmp[n++] = '0';
	for (size_t i = 0; i < n; i++)
		o[i] = tmp[n - 1 - i];
	return n;
}

DWUNW_API int64_t dwunw_table_dump(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint32_t format,
				   uint64_t *row, char *buf, uint64_t len)
{
	const struct dw_table *t;
	struct dump d;
	uint64_t used = 0;
	int err;

	if (!dw_ctx(ctx) || !mod || !row || !buf || (format & ~(DWUNW_DUMP_JSON | DWUNW_DUMP_COLOR)))
		return DWUNW_ERR_INVALID_ARG;
	if ((err = dw_module_full_table(mod, &t)))
		return err;
	if (*row >= t->nrows)
		return 0;
	if ((err = dump_prepare(t, mod->elf.arch, format, &d)))
		return err;
	const int json = format & DWUNW_DUMP_JSON, color = format & DWUNW_DUMP_COLOR;
	if (*row == 0 && d.header) {
		size_t n = strlen(d.header);
		if (n > len) {
			dump_free(&d);
			return DWUNW_ERR_INVALID_ARG;
		}
		memcpy(buf, d.header, n);
		used = n;
	}
	/* Longest prefix: ",\n{"pc":"0x" or the dim code, 16 digits. */
	enum { PREFIX_MAX = 32 };
	uint64_t r = *row;
	for (; r < t->nrows; r++) {
		uint32_t id = dw_table_id(t, (uint32_t)r);
		if (id >= d.nrules || !d.suffix[id]) {
			dump_free(&d);
			return DWUNW_ERR_CORRUPT;
		}
		if (len - used < PREFIX_MAX + d.suffix_len[id])
			break;
		char *o = buf + used;
		uint64_t pc = t->base + dw_table_pc(t, (uint32_t)r);
		if (json) {
			const char *pre = r ? ",\n{\"pc\":\"0x" : "\n{\"pc\":\"0x";
			size_t pl = strlen(pre);
			memcpy(o, pre, pl);
			o += pl;
			o += put_hex(o, pc, 0);
		} else {
			if (color && dw_table_rule(t, (uint32_t)r)->cfa_kind == DW_CFA_KIND_END) {
				memcpy(o, DIM_ON, sizeof(DIM_ON) - 1);
				o += sizeof(DIM_ON) - 1;
			}
			o += put_hex(o, pc, d.pc_width);
		}
		memcpy(o, d.suffix[id], d.suffix_len[id]);
		o += d.suffix_len[id];
		used = (uint64_t)(o - buf);
	}
	dump_free(&d);
	if (r == *row && r < t->nrows)
		return DWUNW_ERR_INVALID_ARG; /* not even one line fits */
	*row = r;
	return (int64_t)used;
}
