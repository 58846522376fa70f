/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --lines: the source file and line of stored frames (struct uframe.src), looked up before a
 * report, never while records are processed: each distinct (module, address) once, from the
 * module's .debug_line (or its debug file's) through libdwunw's one line-table reader
 * (dwunw_source_line). Only named frames of files whose build id is still the one seen when they
 * were unwound get a line (a file rebuilt since gets none rather than a wrong one); Python and
 * kernel frames keep theirs (none). Without libdwunw: no lines.
 */
#ifndef DWUNW_FRAME_LINES_H
#define DWUNW_FRAME_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

struct frames;
struct frame_lines;

/*
 * Fill .src of the frames of stacks[0..n) (indices in fr->st), or with stacks NULL of every stack
 * stored since the last such call (frames_name_fetched makes it every stack again): with
 * fr->want_lines, a no-op otherwise. Call it before printing the stacks.
 */
void frames_lines(struct frames *fr, const uint32_t *stacks, size_t n);
/* With --lines, one line on `out`: what the look-ups cost ("TOOL: lines: N addresses looked up
 * (M with a line) for F frames: T ms of CPU"). */
void frame_lines_summary(const struct frames *fr, FILE *out);
void frame_lines_free(struct frame_lines *fl);

/* --lines asked for or not: frames_shutdown then prints the summary and frees the look-ups. */
void frame_lines_want(struct frames *fr, bool want);

#endif /* DWUNW_FRAME_LINES_H */
