/* SPDX-License-Identifier: GPL-2.0-only */
/* Pieces of the tools' reports on stdout: JSON strings, and one frame as text, folded or JSON. */
#ifndef DWUNW_REPORT_FMT_H
#define DWUNW_REPORT_FMT_H

#include <stddef.h>
#include <stdio.h>
#include "stack_store.h"

/* s as a JSON string, quotes included. */
void json_str(const char *s);

/* memleak's frame line: "\tI [<PC>] name+0xOFF [module]" (upstream's form). */
void print_frame_text(size_t i, const struct uframe *f);

/* A frame in folded stacks: its name, else "[module]" (base name), else "[unknown]". */
void print_frame_folded(const struct uframe *f);
/* The same into a stream (a line built in memory: memleak merges identical folded lines). */
void fprint_frame_folded(FILE *out, const struct uframe *f);

/* {"pc":"0x..","symbol":..,"offset":N,"module":..} */
void print_frame_json(const struct uframe *f);

#endif /* DWUNW_REPORT_FMT_H */
