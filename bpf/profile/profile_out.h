/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile's report: text as libbpf-tools profile prints it, folded (bcc's form), or NDJSON; then
 * a summary line (samples, share of user stacks complete to a known bottom frame, losses and
 * early stops by reason, the tool's own CPU and RSS, processes and modules seen).
 */
#ifndef DWUNW_PROFILE_OUT_H
#define DWUNW_PROFILE_OUT_H

#include <stdint.h>
#include "runtime/frames.h"
#include "kwalk/kwalk_frames.h"

struct bpf_map;

struct pr_stats {
	const char *event;     /* "cycles" or "cpu-clock" */
	int ncpus;
	uint64_t start_ns, end_ns;
	struct unwind_stats unw;
	uint64_t ulost, klost; /* samples whose user / kernel stack was lost */
	uint64_t output_failed, read_failed;
	uint64_t untimed;       /* --perf-buffer: records of a kind with no time (dwunw_cap_reader_untimed) */
	uint64_t bpf[PR_CNT_MAX]; /* enum pr_counter */
	uint64_t npids;
	uint64_t records;       /* records received */
	uint64_t buffer_bytes;  /* bytes of records received (snapshots and samples) */
	/* --unwind=kernel */
	struct kwalk_seen kw;   /* walker events: from the walker / fallen back, by stop reason */
	uint64_t kw_loads, kw_mmaps, kw_exits; /* table (re)loads; mmap and exit records seen */
	uint64_t kw_deferred;   /* fallbacks of processes not (yet) worth loading (-a) */
	uint64_t kw_map_bytes, kw_table_bytes, kw_modules, kw_evictions, kw_mmaps_lost;
	uint64_t kw_procs, kw_files, kw_recycled; /* kw_procs entries, kw_files entries, slots reused */
	uint64_t kw_tc[16];     /* the BPF side's tracking counters (enum kw_track_counter) */
	uint64_t kw_load_ns;    /* time spent in table loads */
	uint64_t kw_files_told, kw_files_stale; /* files the BPF side told of; not found by path */
	uint64_t kw_skipped;    /* modules left without a table (too large for -a, no CFI, budget) */
	uint64_t forks, exits;  /* process records applied (per-process state made / freed) */
	uint64_t swept;         /* processes found gone whose exit record was lost (mappings_sweep) */
	uint64_t maps_ns;       /* CPU on mapping and process records and sweeps (per-process start-up) */
	uint64_t setup_cpu_ns;  /* profile's CPU before sampling began (BPF load, symbols, tables) */
};

/* A reason's samples (lost or stopped stacks), by its label. */
struct pr_reason {
	const char *name;
	uint64_t n;
};

#define PR_REASONS 32

/*
 * The summary's figures of user stacks, summed over the keys as they are reported: at the end,
 * and with --interval at each interval's end, before its keys are dropped.
 */
struct pr_tally {
	uint64_t usamples, ucomplete, ufp, ulive, ustale;
	struct pr_reason lost[PR_REASONS], stopped[PR_REASONS];
	size_t nlost, nstopped;
};

/* What profile holds now (the summary's "held"): per-process state, caches, the report's tables. */
struct pr_held {
	uint64_t processes, view_bytes; /* mapping views (runtime/mappings.h) */
	uint64_t files;                 /* executable files held open (runtime/mapped_files.h) */
	uint64_t file_bytes;            /* ... its tables (files and the mappings using them) */
	uint64_t spaces;                /* live processes with an entry (image generation, seen) */
	uint64_t modules;               /* libdwunw's module cache: active + warm slots */
	uint64_t module_bytes;          /* ... the bytes they hold (bounded: config cache_bytes) */
	uint64_t module_bytes_bound;    /* that bound (--cache-bytes) */
	uint64_t module_evictions;      /* modules freed to keep within it, since the start */
	uint64_t stacks, keys;          /* the stack store, the aggregation */
	uint64_t user_stacks;           /* ... its stacks of processes (not the kernel's, not reasons) */
	uint64_t stack_bytes;           /* the stacks and their frames */
	uint64_t stacks_freed;          /* --interval: stacks freed at intervals' ends */
	uint64_t folded;                /* --interval -f: the run's folded lines kept (by name) */
	uint64_t forks, exits, swept;
	uint64_t not_followed;          /* -- COMMAND: children left out (filter map full) */
};

struct profile_ctx;

void pr_print_header(const struct profile_ctx *pr);
void pr_report(struct profile_ctx *pr);
/* --unwind=kernel: the walker's tables and process entries into pr->prs (no-op otherwise). */
void pr_kw_stats(struct profile_ctx *pr);
void pr_held(const struct profile_ctx *pr, struct pr_held *h);
void pr_held_json(const struct pr_held *h);
void pr_held_text(const struct pr_held *h);
/*
 * --interval: the stacks counted since the last call, then an interval line (NDJSON); then the
 * interval's keys are dropped and the stacks no key of a live process used in it freed
 * (profile_reset.c): nothing of a process outlives the interval after its exit.
 */
void pr_print_interval(struct profile_ctx *pr, uint64_t seq, uint64_t start_ns, uint64_t end_ns);
/* The keys' figures into pr->tally (and with --interval -f, their folded lines into pr->folded). */
void pr_tally_keys(struct profile_ctx *pr);
/* profile_reset.c: the interval's keys dropped, stacks no longer needed freed. */
void pr_interval_reset(struct profile_ctx *pr);

#endif /* DWUNW_PROFILE_OUT_H */
