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

/* What profile holds now (the summary's "held"): per-process state, caches, the report's tables. */
struct pr_held {
	uint64_t processes, view_bytes; /* mapping views (runtime/mappings.h) */
	uint64_t files;                 /* executable files held open (runtime/mapped_files.h) */
	uint64_t file_bytes;            /* ... its tables (files and the mappings using them) */
	uint64_t spaces;                /* pids with an image generation */
	uint64_t modules;               /* libdwunw's module cache: active + warm slots */
	uint64_t module_bytes;          /* ... the bytes they hold (bounded: config cache_bytes) */
	uint64_t stacks, keys;          /* the stack store, the aggregation */
	uint64_t forks, exits, swept;
	uint64_t not_followed;          /* -- COMMAND: children left out (filter map full) */
};

struct profile_ctx;

void pr_note_pid(struct profile_ctx *pr, uint32_t pid);
void pr_print_header(const struct profile_ctx *pr);
void pr_report(struct profile_ctx *pr);
/* --unwind=kernel: the walker's tables and process entries into pr->prs (no-op otherwise). */
void pr_kw_stats(struct profile_ctx *pr);
void pr_held(const struct profile_ctx *pr, struct pr_held *h);
void pr_held_json(const struct pr_held *h);
void pr_held_text(const struct pr_held *h);
/* --interval: the stacks counted since the last call, then an interval line (NDJSON). */
void pr_print_interval(struct profile_ctx *pr, uint64_t seq, uint64_t start_ns, uint64_t end_ns);

#endif /* DWUNW_PROFILE_OUT_H */
