// SPDX-License-Identifier: GPL-2.0-only
/* Report pieces: see report_fmt.h. */
#include <inttypes.h>
#include <stdio.h>
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

void print_frame_text(size_t i, const struct uframe *f)
{
	if (!f->module)
		printf("\t%zu [<%016" PRIx64 ">] <null sym>\n", i, f->pc);
	else if (!f->name)
		printf("\t%zu [<%016" PRIx64 ">] [%s]\n", i, f->pc, f->module);
	else
		printf("\t%zu [<%016" PRIx64 ">] %s+0x%" PRIx64 " [%s]\n", i, f->pc, f->name, f->offset,
		       f->module);
}

void fprint_frame_folded(FILE *out, const struct uframe *f)
{
	if (f->name)
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
	if (f->name)
		json_str(f->name);
	else
		printf("null");
	printf(",\"offset\":%" PRIu64 ",\"module\":", f->name ? f->offset : 0);
	if (f->module)
		json_str(f->module);
	else
		printf("null");
	putchar('}');
}
