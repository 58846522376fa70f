/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's target: -c COMMAND or -- PROG started stopped before exec (runtime/command.h), its maps kept
 * for fp mode, whether it is gone, and a static executable named rather than traced in vain.
 */
#ifndef DWUNW_MEMLEAK_TARGET_H
#define DWUNW_MEMLEAK_TARGET_H

#include <stdbool.h>

struct memleak_ctx;

/* Fork the command into ml->cmd (stopped before exec); a program that cannot run ends here: 127
 * or 126. */
void ml_start_command(struct memleak_ctx *ml);

/* fp mode: a copy of the target's maps that outlives it (refreshed while it runs). */
void ml_keep_maps(struct memleak_ctx *ml);

/* The target (or, following, every process of the tree) is gone. pidfd: -p's, or -1. */
bool ml_target_gone(struct memleak_ctx *ml, int pidfd);

/* -c, --: once the command runs, a static executable (no `obj` to probe) ends memleak with one line. */
void ml_static_target_check(struct memleak_ctx *ml, const char *obj);

#endif /* DWUNW_MEMLEAK_TARGET_H */
