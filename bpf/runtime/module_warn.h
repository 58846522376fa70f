/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Module files that cannot be loaded (gone since the process mapped them, unreadable, not ELF),
 * said once each on stderr: the first few by name as they are met, then one line that more
 * follow, and at the end one summary line with the count. Frames in them are not unwound by CFI
 * nor named; without this the user would see only short or [unknown] stacks.
 */
#ifndef DWUNW_MODULE_WARN_H
#define DWUNW_MODULE_WARN_H

#include <stdbool.h>
#include <stddef.h>

/* Files named one by one; past that, counted. */
#define MODULE_WARN_SHOWN 4

/* Note that `path` cannot be loaded, for `why` (printed once per path). */
void module_warn(const char *path, const char *why);

/* libdwunw's warning line: true when it was a missing-module line (handled here). */
bool module_warn_line(const char *line);

/* libdwunw's line about a debug file refused for where it lies (a directory another user can
 * write): true when it was one; said once per file. */
bool debug_refused_line(const char *line);

/* Module files that could not be loaded so far. */
size_t module_warn_count(void);

/* The summary line when more files failed than were named (at exit). */
void module_warn_flush(void);

#endif /* DWUNW_MODULE_WARN_H */
