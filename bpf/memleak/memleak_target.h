/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's target: -c COMMAND or -- PROG started stopped before exec (runtime/command.h), its maps kept
 * for fp mode, whether it is gone, and a static executable named rather than traced in vain.
 */
#ifndef DWUNW_MEMLEAK_TARGET_H
#define DWUNW_MEMLEAK_TARGET_H

#include <stdbool.h>
#include "runtime/command.h"

/* -c COMMAND, -- PROG ARGS: the command. */
extern struct command ml_cmd;

/* Fork the command (stopped before exec); a program that cannot run ends here: 127 or 126. */
void ml_start_command(void);
/* The command ended (atexit). */
void ml_stop_command(void);

/* fp mode: a copy of the target's maps that outlives it (refreshed while it runs). */
void ml_keep_maps(void);

/* The target (or, following, every process of the tree) is gone. pidfd: -p's, or -1. */
bool ml_target_gone(int pidfd);

/* -c, --: once the command runs, a static executable (no `obj` to probe) ends memleak with one line. */
void ml_static_target_check(const char *obj);

#endif /* DWUNW_MEMLEAK_TARGET_H */
