/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's probes: the allocator object found, its functions probed (uprobe_set.h), the
 * exec/exit tracepoints, mapping changes and the followed tree attached; all detached at once.
 */
#ifndef DWUNW_MEMLEAK_ATTACH_H
#define DWUNW_MEMLEAK_ATTACH_H

#include <sys/types.h>

struct memleak_ctx;

/* The allocator object's path (-O): from the target's maps (-p), else our own maps, else ldconfig. */
char *ml_resolve_obj(const struct memleak_ctx *ml, pid_t pid);

/* Before load: the programs of one way of attaching the uprobes. */
void ml_attach_choose(struct memleak_ctx *ml);

/* Every program, the uprobes on `path` in process pid (-1: every process); dies naming what failed. */
void ml_attach_all(struct memleak_ctx *ml, const char *path, pid_t pid);

/* Following a tree: its programs attached and its first process added. */
void ml_attach_follow(struct memleak_ctx *ml);

/* Every link, detached without waiting (tool_signals.h). */
void ml_detach_all(struct memleak_ctx *ml);

#endif /* DWUNW_MEMLEAK_ATTACH_H */
