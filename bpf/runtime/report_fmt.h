/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Pieces of the tools' reports on stdout: JSON strings, one frame as text, folded or JSON, where
 * each frame came from (its origin and text marker, and the legend line that explains the markers).
 */
#ifndef DWUNW_REPORT_FMT_H
#define DWUNW_REPORT_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <dwunw.h>
#include "stack_store.h"

/* s as a JSON string, quotes included. */
void json_str(const char *s);

/* The frame's origin as libdwunw names it (dwunw_origin_name): "live" (UF_LIVE), else its own. */
const char *frame_origin(const struct uframe *f);

/*
 * Text markers (libdwunw's, dwunw_mark_name): " [live]", " [fp]", " [prologue]", " [lr]" for a
 * frame that rests on memory read after the event or on no CFI (one, in that order of
 * precedence), " [py]" for a Python function, then " [jit]" for a name from the JIT's perf map.
 * Marks what it printed in *seen (MARK_* bits) for the legend. Frames of a frame-pointer stack in
 * fp mode (every frame is one) are marked only with `fp_marks`.
 */
#define MARK_LIVE     (1u << DWUNW_MARK_LIVE)
#define MARK_FP       (1u << DWUNW_MARK_FP)
#define MARK_PROLOGUE (1u << DWUNW_MARK_PROLOGUE)
#define MARK_LR       (1u << DWUNW_MARK_LR)
#define MARK_JIT      (1u << DWUNW_MARK_JIT)
#define MARK_PY       (1u << DWUNW_MARK_PY)
void fprint_frame_marks(FILE *out, const struct uframe *f, bool fp_marks, uint32_t *seen);

/* One line that explains the markers in `seen` (nothing when none), in libdwunw's words:
 * "frames marked [live] ...; [fp] ...". */
void fprint_marks_legend(FILE *out, const char *indent, uint32_t seen);

/*
 * A frame without a name, perf style: "[unknown]" with its module in the form the tool prints
 * modules (fmt: "[%s]" or "(%s)"), "[anon]" for anonymous executable memory (JIT code), nothing
 * for a pc in no mapping.
 */
void fprint_unknown(FILE *out, const struct uframe *f, const char *module_fmt, bool base);

/* --lines: " at FILE:LINE" (" at FILE" for a row without a line) when the frame has one, as
 * dwunw unwind-pid --lines prints it; nothing otherwise. */
void fprint_frame_src(FILE *out, const struct uframe *f);

/* memleak's frame line: "\tI [<PC>] name+0xOFF [module]" (upstream's form), marks after it, then
 * its file:line (fprint_frame_src). */
void print_frame_text(size_t i, const struct uframe *f, bool fp_marks, uint32_t *seen);

/* A frame in folded stacks: its name, else "[module]" (base name), else "[unknown]". */
void print_frame_folded(const struct uframe *f);
/* The same into a stream (a line built in memory: memleak merges identical folded lines). */
void fprint_frame_folded(FILE *out, const struct uframe *f);

/* {"pc":"0x..","symbol":..,"offset":N,"module":..,"origin":".."}, with "file" and "line" when
 * the frame has them (--lines) */
void print_frame_json(const struct uframe *f);

/* The modules' JSON array's items (frames_modules): {"path":..,"build_id":..|null}, comma-separated. */
struct module_seen;
void print_modules_json(const struct module_seen *mods, size_t n);

/* A folded line being merged: its text (malloc'd), weight, and rank in the report. */
struct folded_line {
	char *text;
	uint64_t weight;
	uint32_t rank;
};

enum folded_order {
	FOLDED_BY_RANK,   /* in the order of each line's first stack (memleak) */
	FOLDED_BY_WEIGHT, /* smallest weights first, then by text (bcc's profile) */
};

/* Lines that fold alike (same names, other pcs) printed as one, weights summed, as flame graphs
 * expect: "TEXT WEIGHT", or with json {"folded":"TEXT","count":WEIGHT} (what `dwunw profile`
 * prints, so the folding stays here); frees the texts and v. */
void print_folded_lines(struct folded_line *v, size_t n, enum folded_order order, bool json);
/* Lines alike merged in place (weights summed, the first-ranked kept): the count left. */
size_t folded_merge(struct folded_line *v, size_t n);

#endif /* DWUNW_REPORT_FMT_H */
