/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tool's --unwind=kernel tables over time: loads a process's tables when it starts, maps a
 * file executable (kwalk_track.bpf.h's records) or its walks stop for want of them (throttled
 * per process, so a process that cannot be loaded is not retried at every sample), and drops
 * them when it exits.
 *
 * Loading a process costs milliseconds (its maps read, new modules' tables built); a process
 * sampled once or twice costs less through the snapshot path. So a tool watching the whole
 * system sets `threshold`: a process's tables load after that many fallbacks of its own, and
 * its mmap records refresh only tables already loaded, and the time spent loading is capped
 * (load_ns_per_s) so that the consumer keeps up with the samples. A tool with given targets
 * loads at once (threshold 0 or 1, no cap).
 */
#ifndef DWUNW_KWALK_TRACK_USER_H
#define DWUNW_KWALK_TRACK_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kwalk_track.h"

struct bpf_object;
struct kw_loader;

#define KW_TRACK_SLOTS 1024

struct frames;

struct kw_track {
	struct kw_loader *l;
	struct bpf_object *obj;            /* the tool's (kw_track_prepare / kw_track_attach) */
	struct frames *fr;                 /* the tool's: its walks of the fallbacks, its maps
	                                    * refreshed with the tables */
	bool (*selected)(void *arg, uint32_t pid); /* whose mmap/exit records count; NULL: all */
	void *selected_arg;
	uint32_t threshold;                /* fallbacks of a process before it is loaded (0, 1: at once) */
	uint64_t load_ns_per_s;            /* time for loads per second at most (0: no limit); past
	                                    * it, loads wait: the samples keep their snapshot path */
	int64_t tokens;                    /* loading time in hand (ns; negative: a debt) */
	uint64_t last_refill;
	uint64_t loads;                    /* table (re)loads */
	uint64_t load_ns;                  /* time they took */
	uint64_t mmaps, exits;             /* records handled */
	uint64_t files, files_stale;       /* files told by the BPF side; of which found by path not */
	uint64_t deferred;                 /* fallbacks not (yet) worth a load */
	bool attached;                     /* the mapping tracker's programs (mmap_track.h) */
	bool inbpf;                        /* the BPF side enters mappings (kw_track_prepare) */
	struct bpf_link *links[2];         /* its exec and fork programs */
	struct {
		uint32_t pid;                  /* pid + 1 */
		uint32_t fallbacks;
		bool loaded;
		uint64_t ns;                   /* last load attempt */
	} tried[KW_TRACK_SLOTS];
};

/* Before the object's load, with the tool's .rodata kw_pm_enabled set: load the BPF side's
 * exec and fork programs (kwalk_procmap.bpf.h), so that new processes' mappings
 * enter kw_procs in the kernel with no load per process. */
void kw_track_prepare(struct kw_track *t, struct bpf_object *obj);
/* Attach the mapping tracker (its kwalk notices on with the tool's .rodata kw_track_enabled):
 * 0, or a negative errno (the tables then load on fallbacks). */
int kw_track_attach(struct kw_track *t, struct bpf_object *obj);
void kw_track_detach(struct kw_track *t);
/* (Re)load pid's tables: at once with force; else (a fallback wanting tables) once it has
 * `threshold` of them, at most every 50 ms per process. */
void kw_track_reload(struct kw_track *t, uint32_t pid, bool force);
/* pid exec'd or exited: its tables go (a new program earns its own). */
void kw_track_forget(struct kw_track *t, uint32_t pid);
/* A KW_KIND_MMAP / KW_KIND_EXIT record: handled (1), or not one of them (0). */
int kw_track_record(struct kw_track *t, const void *data, size_t size);
/* The BPF side's counters (enum kw_track_counter), summed over CPUs. */
void kw_track_counters(struct bpf_object *obj, uint64_t out[KW_TC_MAX]);

#endif /* DWUNW_KWALK_TRACK_USER_H */
