/* SPDX-License-Identifier: GPL-2.0-only */
/* memleak's command line (libbpf-tools/bcc memleak flags plus dwunw's) and its checks. */
#ifndef DWUNW_MEMLEAK_OPTS_H
#define DWUNW_MEMLEAK_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "memleak.h"

struct ml_env {
	pid_t pid;
	const char *command;
	char **prog_argv;      /* -- PROG ARGS... */
	bool trace;
	bool show_allocs;
	bool allocated;        /* --allocated: also every allocation of the interval, freed or not */
	bool combined;
	uint64_t older_ms;
	uint32_t sample_rate;
	size_t top;
	bool top_given;        /* --folded: every stack unless -T */
	bool weight_allocs;    /* --folded: allocations instead of bytes */
	uint32_t max_frames;
	uint64_t min_size, max_size;
	const char *obj;
	const char *sym_prefix;
	bool verbose;
	int interval;
	long count;            /* reports, -1 = forever */
	int unwind;            /* enum ml_unwind, or ML_UNWIND_AUTO until parsed */
	bool unwind_auto;      /* the unwind mode was auto's choice */
	bool freeze;           /* --unwind=freeze: dwarf mode, the thread stopped at the event (runtime/freeze.h) */
	uint32_t stack_size;
	bool folded, json;
	bool lines;            /* --lines: file:line of named frames */
	bool nested;
	bool perfbuf;
	size_t buffer_size;    /* 0 = default */
	size_t max_stacks;
	uint32_t max_cpu;       /* --max-cpu (percent of one CPU; 0: no budget) */
	bool fp_ids;
	uint64_t expected_rate; /* allocator calls/s: sizes the ring buffer */
	bool probe_at_entry;    /* no cheap probe places */
	bool no_multi;          /* one link per probe even where multi-uprobe links exist */
	uint64_t table_budget;  /* --table-budget (bytes; 0: the walker's default) */
	uint64_t cache_bytes;   /* --cache-bytes (0: libdwunw's default) */
};

/* --unwind=auto while parsing: kernel or dwarf after (tool_unwind_auto) */
#define ML_UNWIND_AUTO (-1)

/* Parses argv into *env (defaults first); a usage error is one line and exit 2 (tool_opts.h). */
void ml_parse_args(struct ml_env *env, int argc, char **argv);

#endif /* DWUNW_MEMLEAK_OPTS_H */
