/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Address spaces of a tool's stacks: pid -> image generation. The same pcs after an exec are
 * another program's, and a pid reused after an exit is another process: each fork and exec seen
 * takes a new generation, an exit drops the pid's entry, so the table holds the live processes
 * only, however many came and went. A stack's space is (generation << 32 | pid).
 */
#ifndef DWUNW_SPACES_H
#define DWUNW_SPACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spaces {
	uint32_t *pid;         /* pid + 1; SPACES_TOMB: a dropped entry */
	uint32_t *gen;         /* generation, and SPACES_SEEN */
	size_t cap, n, tomb;
	uint32_t seq;          /* the last generation given */
};

/* A fork (same_process false: a new process) or an exec (true: its marks kept), seen. */
void spaces_new_image(struct spaces *s, uint32_t pid, bool same_process);
/* An exit applied: the pid's entry goes. */
void spaces_drop(struct spaces *s, uint32_t pid);
/* The space of pid's stacks now. */
uint64_t spaces_of(struct spaces *s, uint32_t pid);
/* Whether space is the current image of a live process (one with an entry). */
bool spaces_live(struct spaces *s, uint64_t space);
/* True the first time pid's process is marked (a process counted once: "processes seen"). */
bool spaces_mark_seen(struct spaces *s, uint32_t pid);
/*
 * Entries no fork or exec made (a process from before the start, or one whose sample came after
 * its exit record) of processes gone (kill(pid, 0): ESRCH) dropped: their exit records drop the
 * others. Returns how many. Every few seconds.
 */
size_t spaces_sweep(struct spaces *s);
void spaces_free(struct spaces *s);

#endif /* DWUNW_SPACES_H */
