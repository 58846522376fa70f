// SPDX-License-Identifier: GPL-2.0-only
/* Counted stack pairs as the stack tools print them: see stack_report.h. */
#include <inttypes.h>
#include <string.h>
#include "report_fmt.h"
#include "stack_report.h"

bool stack_reaches_bottom(const struct ustack *s)
{
	static const char *const bottoms[] = {
		"_start", "__libc_start_main", "__libc_start_call_main", "start_thread",
		"clone", "clone3", "__clone", "__clone3", "thread_start",
	};

	if (s->kind == SK_PSEUDO || !s->nframes)
		return false;
	const struct uframe *f = &s->frames[s->nframes - 1];
	const char *n = f->name;

	/* a walk that stopped is complete only at a process's first frame that has no CFI to step
	 * past (ld.so's _start, where a dynamically linked program begins): nothing lies above it */
	if (s->stop)
		return n && !strcmp(n, "_start") && s->stop_name && !strcmp(s->stop_name, "NO_DWARF");
	/* a stripped executable's _start: the DWARF walk ended there cleanly (CFI marks it) */
	if (!n)
		return s->kind == SK_DWARF && f->module;
	for (size_t i = 0; i < sizeof(bottoms) / sizeof(bottoms[0]); i++)
		if (!strcmp(n, bottoms[i]))
			return true;
	return false;
}

static void text_frame(const struct uframe *f, bool fp_marks, uint32_t *seen)
{
	fputs("    ", stdout);
	if (uf_origin(f) == UO_PYTHON)
		fprint_frame_folded(stdout, f);
	else if (f->name)
		fputs(f->name, stdout);
	else
		fprint_unknown(stdout, f, "(%s)", false);
	fprint_frame_marks(stdout, f, fp_marks, seen);
	fprint_frame_src(stdout, f);
	putchar('\n');
}

static void text_stack(const struct ustack *s, bool fp_marks, uint32_t *seen)
{
	for (uint32_t i = 0; i < s->nframes; i++)
		text_frame(&s->frames[i], fp_marks, seen);
	if (s->label)
		printf("    %s\n", s->label);
}

void stack_print_text(const struct ustack *k, const struct ustack *u, const char *comm,
		      uint32_t pid, uint64_t count, bool delimiter, bool fp_marks,
		      uint32_t *marks_seen)
{
	if (k)
		text_stack(k, fp_marks, marks_seen);
	if (delimiter && k && u)
		printf("    --\n");
	if (u)
		text_stack(u, fp_marks, marks_seen);
	if (!comm)
		return; /* the frames only (offcputime --waker's waker) */
	printf("    %-16s %s (%u)\n", "-", comm, pid);
	printf("        %" PRIu64 "\n\n", count);
}

static void folded_frame(FILE *o, const struct uframe *f)
{
	if (uf_origin(f) == UO_PYTHON)
		fprint_frame_folded(o, f);
	else if (f->name)
		fputs(f->name, o);
	else
		fprint_unknown(o, f, "(%s)", true);
}

void stack_folded_leaf_first(FILE *o, const struct ustack *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nframes; i++) {
		fputc(';', o);
		folded_frame(o, &s->frames[i]);
	}
	if (s->label)
		fprintf(o, ";%s", s->label);
}

static void folded_stack(FILE *o, const struct ustack *s)
{
	if (s->label)
		fprintf(o, ";%s", s->label);
	for (uint32_t i = s->nframes; i-- > 0;) {
		fputc(';', o);
		folded_frame(o, &s->frames[i]);
	}
}

void stack_folded_line(FILE *o, const char *comm, const struct ustack *k, const struct ustack *u,
		       bool delimiter)
{
	fputs(comm, o);
	if (u)
		folded_stack(o, u);
	if (k) {
		if (u && delimiter)
			fputs(";-", o);
		folded_stack(o, k);
	}
}

/* The indices of the frames with any of `flags`, as a JSON array. */
static void print_flagged(const struct ustack *s, uint32_t flags)
{
	bool c = false;

	putchar('[');
	for (uint32_t i = 0; i < s->nframes; i++)
		if (s->frames[i].flags & flags) {
			printf("%s%u", c ? "," : "", i);
			c = true;
		}
	putchar(']');
}

void stack_print_json(const struct ustack *s, bool user)
{
	if (!s) {
		printf("null");
		return;
	}
	printf("{\"frames\":[");
	for (uint32_t i = 0; i < s->nframes; i++) {
		if (i)
			putchar(',');
		print_frame_json(&s->frames[i]);
	}
	printf("]");
	if (user) {
		printf(",\"kind\":\"%s\",\"complete\":%s,\"stop\":",
		       s->kind == SK_DWARF ? "dwarf" : s->kind == SK_FP ? "fp" : "none",
		       stack_reaches_bottom(s) ? "true" : "false");
		json_str(s->kind == SK_PSEUDO ? "LOST" : s->stop ? s->stop_name : "OK");
		printf(",\"maddr\":[");
		for (uint32_t i = 0; i < s->nframes; i++)
			printf("%s%" PRIu64, i ? "," : "", s->frames[i].maddr);
		printf("],\"fp_frames\":");
		print_flagged(s, UF_FP);
		/* pcs that are not return addresses: a symbolizer looks them up as they are, not as pc - 1 */
		printf(",\"exact\":");
		print_flagged(s, UF_EXACT);
	}
	if (s->label) {
		printf(",\"reason\":");
		json_str(s->label);
	}
	putchar('}');
}
