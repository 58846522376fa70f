/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The mappings of each traced process as of the record being processed: seeded from
 * /proc/PID/maps at the process's first record or mapping event (and after each exec), then
 * changed only by mapping events (mmap_ev.h) applied in order with the records. Before a record is
 * unwound, its process's view is given to libdwunw as entries (dwunw_maps_pin_entries) when it
 * changed, so every record is unwound and symbolized against the modules mapped when it was
 * captured. One object per tool (mappings_new), used by its frames (frames.h) and fed by its
 * record loop; it knows nothing of the frames: the unwinder it pins views into is a parameter.
 */
#ifndef DWUNW_MAPPINGS_H
#define DWUNW_MAPPINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mmap_ev_rec;
struct dwunw_ctx;
struct mappings;

struct mappings_stats {
	uint64_t events;      /* mapping records received */
	uint64_t mmaps;       /* file mappings added */
	uint64_t unknown;     /* ... whose file could not be known (frames there are flagged) */
	uint64_t munmaps;
	uint64_t mprotects;   /* protection changes of code (JIT made executable, and back) */
	uint64_t mremaps;     /* code moved */
	uint64_t execs;
	uint64_t seeds;       /* views read from /proc/PID/maps */
	uint64_t pins;        /* views given to libdwunw */
	uint64_t flagged;     /* records with a frame in a mapping of unknown file */
	uint64_t anon_mmaps;  /* anonymous memory mapped executable (JIT code) */
	uint64_t held_pinned; /* mappings named by their held file before a walk (file gone since) */
	uint64_t held_late;   /* ... only after a walk found no module there (a record walked again) */
	uint64_t hole_reads;  /* /proc/PID/maps read again for a pc in no mapping of the view */
	uint64_t rewalks;     /* records walked more than once (a hole or a held file found late) */
	uint64_t swept;       /* views of processes found gone whose exit record never came (lost) */
	uint64_t forks;       /* views copied from a parent's */
	uint64_t forgotten;   /* views freed (exit, exec without events, sweep) */
	uint64_t named_from_proc; /* file mappings whose event had no file, named from /proc later */
};

/* A tool with mapping events (it attached mmap_ev.bpf.h's programs): its views, empty. */
struct mappings *mappings_new(void);
void mappings_free(struct mappings *m);

/* Apply one mapping record (CAP_KIND_MAPEV); malformed ones are ignored. */
void mappings_event(struct mappings *m, const void *data, size_t size);

/* Before unwinding a record of pid: its current view, given to the unwinder dctx if changed. */
void mappings_sync(struct mappings *m, uint32_t pid, struct dwunw_ctx *dctx);

/*
 * The identity of the file mapped at pc in pid's view (device and inode folded, never 0), or 0
 * when pc is in no file mapping; *unknown: pc lies in a file mapping whose file is unknown, that
 * was mapped after `ts` (the record's kernel time; 0: not checked), or whose module the caller
 * could not load (no_module). An unknown file's identity is that of this very mapping.
 */
uint64_t mappings_file_id(struct mappings *m, uint32_t pid, uint64_t pc, uint64_t ts, bool no_module, bool *unknown);

/*
 * A frame at pc has no module although pc lies in a file mapping: when the mapping's file is held
 * (mapped_files.h), the view names it by the held file from now on (re-synced on the next
 * mappings_sync); true when it changed, so the record is unwound again.
 */
bool mappings_use_hold(struct mappings *m, uint32_t pid, uint64_t pc);

/*
 * A frame at pc has a module, but its mapping's file was gone from its path while the range had
 * changed since (mapped_files_superseded): libdwunw may have opened the file now mapped there through
 * /proc/PID/map_files, which can carry the old file's inode number. Not trusted: flagged.
 */
bool mappings_untrusted(struct mappings *m, uint32_t pid, uint64_t pc);

/*
 * A frame at pc in a file mapping without a module: the name to show for its module ("PATH
 * (deleted)", "PATH (replaced)", PATH; NULL when the file is not known) and in *why the reason
 * it could not be loaded (NULL when pc is in no file mapping).
 */
const char *mappings_describe(struct mappings *m, uint32_t pid, uint64_t pc, uint64_t ts, const char **why);

struct bpf_object;
struct bpf_link;
/* Attach mmap_ev.bpf.h's exec program of obj, appended to *links, and the mapping tracker
 * (mmap_track.h): 0 or a negative errno. */
int mappings_attach(struct bpf_object *obj, struct bpf_link ***links, size_t *nlinks);

/* A record flagged MODULE_UNKNOWN (a frame in a mapping of unknown file): counted. */
void mappings_flagged(struct mappings *m);

/* The summary: JSON (",\"maps\":{...}") and a text line; nothing when m is NULL (no events). */
void mappings_json(struct mappings *m);
void mappings_text(struct mappings *m);

/*
 * pc lies in no mapping of pid's view. Mapping events carry anonymous memory only when it is
 * mapped executable or made so (mprotect, mremap); memory that was executable before events were
 * on (a process seeded from /proc) may be missing. mappings_fill_holes re-reads
 * /proc/PID/maps and adds its anonymous and special mappings where the view has nothing (never
 * a file mapping: those come from events only); true when it added some.
 */
bool mappings_hole(struct mappings *m, uint32_t pid, uint64_t pc);
bool mappings_fill_holes(struct mappings *m, uint32_t pid);

/* A record was walked again (frames.c): counted, so that "each record walked once" is measured. */
void mappings_rewalked(struct mappings *m);

/* Seed pid's view now, from /proc/PID/maps, if it has none yet (a command held before its exec:
 * its records from before the exec are processed later, maybe after the exec). */
void mappings_seed(struct mappings *m, uint32_t pid);

/*
 * child was forked by parent (a record in order with the others): its view is a copy of the
 * parent's as of now, so a child that exits before its first record is processed is still
 * unwound against what it had mapped (a fork maps nothing new). A parent without a view yet is
 * seeded from /proc first; when that fails too, the child is seeded at its first record.
 */
void mappings_fork(struct mappings *m, uint32_t parent, uint32_t child);

/*
 * Views of processes that are gone although their exit record never came (lost with a full
 * buffer): found with kill(pid, 0) at one call, handed to gone() (which forgets them) at a later
 * call once a record taken after that moment was processed (processed_ts, kernel time): every
 * record of theirs was processed by then. Call it every second or so.
 */
void mappings_sweep(struct mappings *m, uint64_t processed_ts, void (*gone)(void *arg, uint32_t pid), void *arg);

/* One line on f: the views and held files now, views forked and freed (memleak, offcputime). */
#include <stdio.h>
void mappings_held_text(struct mappings *m, FILE *f);

/* Processes with a view now, and the bytes their views take. */
size_t mappings_held(const struct mappings *m, uint64_t *bytes);

/* The process is gone: its view goes. */
void mappings_forget(struct mappings *m, uint32_t pid);

#endif /* DWUNW_MAPPINGS_H */
