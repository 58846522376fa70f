/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Before a command starts: load the tables of its executable (found on PATH) and of the
 * libraries `ldd` says it needs, and [vdso], so the in-kernel walker has them from its first
 * sample on.
 */
#ifndef DWUNW_KWALK_PRELOAD_H
#define DWUNW_KWALK_PRELOAD_H

struct kw_loader;

void kw_preload_command(struct kw_loader *l, const char *cmd);

#endif
