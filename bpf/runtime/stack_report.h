/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One counted (kernel stack, user stack) pair as the bcc/libbpf-tools stack tools print it
 * (profile, offcputime): text (kernel frames leaf first, "--" with -d, user frames, "- comm (pid)",
 * the count), the folded line (comm;user root..leaf;[-;]kernel root..leaf), and NDJSON stacks;
 * whether a user stack is complete (ends at a frame that starts a process or thread).
 */
#ifndef DWUNW_STACK_REPORT_H
#define DWUNW_STACK_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "stack_store.h"

/* The walk ended at a frame that starts a process or thread (_start, start_thread, clone3...). */
bool stack_reaches_bottom(const struct ustack *s);

/* Text form on stdout (comm NULL: the frames only, no comm and count). fp_marks: mark [fp] frames (not in fp mode, where every frame is one);
 * *marks_seen collects the markers printed (report_fmt.h's legend). */
void stack_print_text(const struct ustack *k, const struct ustack *u, const char *comm,
		      uint32_t pid, uint64_t count, bool delimiter, bool fp_marks,
		      uint32_t *marks_seen);

/* The folded line without its count; "-" between user and kernel frames when `delimiter`. */
void stack_folded_line(FILE *o, const char *comm, const struct ustack *k, const struct ustack *u,
		       bool delimiter);

/* ";frame" for each frame leaf first (offwaketime's waker stacks, above the wakee's), then its
 * label; nothing for NULL. */
void stack_folded_leaf_first(FILE *o, const struct ustack *s);

/* {"frames":[...], user: "kind","complete","stop","maddr","fp_frames","exact"; "reason"} or null. */
void stack_print_json(const struct ustack *s, bool user);

#endif /* DWUNW_STACK_REPORT_H */
