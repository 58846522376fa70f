// SPDX-License-Identifier: GPL-2.0-only
/* Report pieces: see report_fmt.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frames.h"
#include "report_fmt.h"
#include "tool_util.h"

void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

const char *frame_origin(const struct uframe *f)
{
	const char *name = dwunw_origin_name(f->flags & UF_LIVE ? DWUNW_ORIGIN_LIVE : uf_origin(f));

	return name ? name : "window";
}

void fprint_frame_marks(FILE *out, const struct uframe *f, bool fp_marks, uint32_t *seen)
{
	uint32_t o = uf_origin(f), m = 0;
	int mark = dwunw_origin_mark(f->flags & UF_LIVE ? DWUNW_ORIGIN_LIVE : o);

	if (mark == DWUNW_MARK_FP && !fp_marks)
		mark = -1;
	if (mark >= 0 && mark != DWUNW_MARK_PY) {
		fprintf(out, " [%s]", dwunw_mark_name((uint32_t)mark));
		m |= 1u << mark;
	}
	if (o == UO_PYTHON) {
		fprintf(out, " [%s]", dwunw_mark_name(DWUNW_MARK_PY));
		m |= MARK_PY;
	}
	if (f->flags & UF_PERFMAP) {
		fprintf(out, " [%s]", dwunw_mark_name(DWUNW_MARK_JIT));
		m |= MARK_JIT;
	}
	if (seen)
		*seen |= m;
}

void fprint_marks_legend(FILE *out, const char *indent, uint32_t seen)
{
	const char *sep = "";

	if (!seen)
		return;
	fprintf(out, "%sframes marked ", indent);
	for (uint32_t i = 0; i < DWUNW_MARK_COUNT; i++)
		if (seen & (1u << i)) {
			fprintf(out, "%s[%s] %s", sep, dwunw_mark_name(i), dwunw_mark_legend(i));
			sep = "; ";
		}
	fputc('\n', out);
}

void fprint_unknown(FILE *out, const struct uframe *f, const char *module_fmt, bool base)
{
	fputs("[unknown]", out);
	if (f->module) {
		fputc(' ', out);
		fprintf(out, module_fmt, base ? base_name(f->module) : f->module);
	} else if (f->flags & UF_JIT) {
		fputc(' ', out);
		fprintf(out, module_fmt, "anon"); /* "[anon]", "(anon)": not "[[anon]]" */
	}
}

void fprint_frame_src(FILE *out, const struct uframe *f)
{
	if (!f->src)
		return;
	fprintf(out, " at %s", f->src->file);
	if (f->src->line)
		fprintf(out, ":%u", f->src->line);
}

void print_frame_text(size_t i, const struct uframe *f, bool fp_marks, uint32_t *seen)
{
	printf("\t%zu [<%016" PRIx64 ">] ", i, f->pc);
	if (uf_origin(f) == UO_PYTHON)
		fprint_frame_folded(stdout, f);
	else if (f->name && f->module)
		printf("%s+0x%" PRIx64 " [%s]", f->name, f->offset, f->module);
	else if (f->name)
		printf("%s+0x%" PRIx64, f->name, f->offset);
	else
		fprint_unknown(stdout, f, "[%s]", false);
	fprint_frame_marks(stdout, f, fp_marks, seen);
	fprint_frame_src(stdout, f);
	putchar('\n');
}

void fprint_frame_folded(FILE *out, const struct uframe *f)
{
	/* a Python function: "func (file:line)", as py-spy and the OTel profiler write it */
	if (uf_origin(f) == UO_PYTHON && f->name && f->module) {
		if (f->offset)
			fprintf(out, "%s (%s:%" PRIu64 ")", f->name, f->module, f->offset);
		else
			fprintf(out, "%s (%s)", f->name, f->module);
	} else if (f->name)
		fputs(f->name, out);
	else if (f->module)
		fprintf(out, "[%s]", base_name(f->module));
	else
		fputs("[unknown]", out);
}

void print_frame_folded(const struct uframe *f)
{
	fprint_frame_folded(stdout, f);
}

void print_frame_json(const struct uframe *f)
{
	printf("{\"pc\":\"0x%" PRIx64 "\",\"symbol\":", f->pc);
	if (uf_origin(f) == UO_PYTHON) {
		/* pc: the frame's last instruction; file and line instead of module and offset */
		f->name ? json_str(f->name) : (void)printf("null");
		printf(",\"offset\":0,\"module\":null,\"file\":");
		f->module ? json_str(f->module) : (void)printf("null");
		if (f->offset)
			printf(",\"line\":%" PRIu64, f->offset);
		else
			printf(",\"line\":null");
		printf(",\"origin\":\"python\"}");
		return;
	}
	if (f->name)
		json_str(f->name);
	else
		printf("null");
	printf(",\"offset\":%" PRIu64 ",\"module\":", f->name ? f->offset : 0);
	if (f->module)
		json_str(f->module);
	else
		printf("null");
	/* in anonymous executable memory at the event (JIT code): module is null */
	if (!f->module && (f->flags & UF_JIT))
		printf(",\"anon\":true");
	/* --lines: where the debug info places the pc (a return address: its call) */
	if (f->src) {
		printf(",\"file\":");
		json_str(f->src->file);
		f->src->line ? (void)printf(",\"line\":%u", f->src->line) : (void)printf(",\"line\":null");
	}
	printf(",\"origin\":\"%s\"}", frame_origin(f));
}

static int cmp_folded_text(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;
	int c = strcmp(x->text, y->text);

	return c ? c : (x->rank < y->rank ? -1 : 1);
}

static int cmp_folded_rank(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_folded_weight(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;

	if (x->weight != y->weight)
		return x->weight < y->weight ? -1 : 1;
	return strcmp(x->text, y->text);
}

size_t folded_merge(struct folded_line *v, size_t n)
{
	size_t m = 0;

	/* equal texts next to each other, the first-ranked first: it keeps its rank */
	qsort(v, n, sizeof(*v), cmp_folded_text);
	for (size_t k = 0; k < n; k++) {
		if (m && !strcmp(v[m - 1].text, v[k].text)) {
			v[m - 1].weight += v[k].weight;
			free(v[k].text);
			continue;
		}
		v[m++] = v[k];
	}
	return m;
}

void print_folded_lines(struct folded_line *v, size_t n, enum folded_order order, bool json)
{
	size_t m = folded_merge(v, n);

	qsort(v, m, sizeof(*v), order == FOLDED_BY_RANK ? cmp_folded_rank : cmp_folded_weight);
	for (size_t k = 0; k < m; k++) {
		if (json) {
			printf("{\"folded\":");
			json_str(v[k].text);
			printf(",\"count\":%" PRIu64 "}\n", v[k].weight);
		} else {
			printf("%s %" PRIu64 "\n", v[k].text, v[k].weight);
		}
		free(v[k].text);
	}
	free(v);
}

void print_modules_json(const struct module_seen *mods, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"path\":", i ? "," : "");
		json_str(mods[i].path);
		printf(",\"build_id\":");
		if (mods[i].build_id)
			json_str(mods[i].build_id);
		else
			printf("null");
		putchar('}');
	}
}
