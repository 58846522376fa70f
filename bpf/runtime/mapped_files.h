/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Files of executable file mappings held open by identity from the moment user space first sees
 * their mapping event (the drain thread, cap_pump.c), until the main thread applies the munmap
 * that ends the last mapping of them (every record taken while it was mapped is processed by
 * then). One fd per file (device, inode), however many processes map it: a thousand shells
 * mapping libc hold libc once, referred to by a small record per mapping. The kernel
 * keeps a deleted file while an fd refers to it, so a library unloaded and deleted before its
 * records are processed is still unwound and named through /proc/self/fd/N (mappings.c gives
 * that path to libdwunw only when the file's own path no longer names it). A mapping gone before
 * its event was drained cannot be held: its frames are flagged, with that reason.
 */
#ifndef DWUNW_MAPPED_FILES_H
#define DWUNW_MAPPED_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mmap_ev_rec;

struct mapped_files_stats {
	uint64_t held;         /* files held open (one per identity: device, inode) */
	uint64_t shared;       /* mappings whose file was held already (another mapping's): no open */
	uint64_t missed;       /* mappings whose mapping and file were gone when the event was seen */
	uint64_t evicted;      /* files closed early: more than MAPPED_FILES_MAX distinct at once */
	uint64_t used;         /* mappings unwound through a held file (their path named another) */
	uint64_t open;         /* files held now (closed with the last mapping of them: munmap, exec,
				* the process's exit) */
	uint64_t mappings;     /* mappings referring to a held file now */
	uint64_t bytes;        /* memory of the tables (files and mappings) */
};

#define MAPPED_FILES_MAX 256

/*
 * A mapping record as it arrives (records other than executable mmaps are ignored): on the drain
 * thread (cap_pump.c), else on the thread that applies it (mappings.c), which skips it when a
 * drain thread saw it first.
 */
void mapped_files_tap_drain(const void *data, size_t size);
void mapped_files_tap(const void *data, size_t size);

/*
 * "/proc/self/fd/N" of the file held for the mapping made by the event of kernel time ts (its
 * start at or after the event's start), interned; NULL when none. Main thread.
 */
const char *mapped_files_path(uint32_t pid, uint64_t start, uint64_t ts);

/*
 * The same, but only when that file is no longer the file at its path (unlinked, or the path names
 * another file or nothing): libdwunw could not open it by its path. Two system calls (fstat, stat);
 * NULL when not held or still in place.
 */
const char *mapped_files_if_gone(uint32_t pid, uint64_t start, uint64_t ts);

/*
 * For a module path given by libdwunw: when it is a held file's, its original path with
 * " (deleted)" when that path no longer names the file (interned); else path itself.
 */
const char *mapped_files_name(const char *path);

/* The mapping's file is not held: why, for the frame's stop reason ("deleted", "replaced"...). */
const char *mapped_files_why(const char *path, uint64_t ino, uint32_t maj, uint32_t min);

/*
 * [start, end) of pid was unmapped at kernel time ts (applied in record order), or pid is gone
 * (end = ts = ~0): the holds of mappings made before ts there are closed.
 */
void mapped_files_release(uint32_t pid, uint64_t start, uint64_t end, uint64_t ts);

/*
 * A mapping of pid at [start, end), made by the event of time `since`, may no longer be what the
 * process has there: the drain thread has seen a later event change that range (or cannot tell).
 * Then /proc/PID/map_files shows another mapping, whose file may even have the same device and
 * inode (the number of a deleted file is reused). False without a drain thread.
 */
bool mapped_files_superseded(uint32_t pid, uint64_t start, uint64_t end, uint64_t since);
/* Changes noted so far: an answer of mapped_files_superseded stays valid while this is unchanged. */
uint64_t mapped_files_changes(void);
/*
 * Those of them across the mapping of a held file (a library unloaded, its file free to go): the
 * moments a held file may stop being the file at its path while records of it are still to come.
 */
uint64_t mapped_files_hold_changes(void);

/* The path of a mapping record's file into buf (NUL-terminated); false when not known. */
bool mmap_ev_rec_path(const struct mmap_ev_rec *r, char *buf, size_t size);

void mapped_files_stats_get(struct mapped_files_stats *out);

#endif /* DWUNW_MAPPED_FILES_H */
