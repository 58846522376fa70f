/* SPDX-License-Identifier: GPL-2.0-only */
/* profile's command line (libbpf-tools/bcc profile flags plus dwunw's) and its checks. */
#ifndef DWUNW_PROFILE_OPTS_H
#define DWUNW_PROFILE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "profile.h"

/* --unwind=auto while parsing: kernel or dwarf after (tool_unwind_auto) */
#define PR_UNWIND_AUTO 0xffffffffu
#define PR_MAX_FREQ 10000   /* Hz per CPU: above, copying stack windows dominates the CPU */

struct pr_opts {
	uint32_t pids[SEL_MAX_FILTER];
	size_t npids;
	uint32_t tids[SEL_MAX_FILTER];
	size_t ntids;
	bool user, kernel;     /* stacks wanted (-U: user only, -K: kernel only) */
	bool idle;             /* -I */
	bool folded;           /* -f */
	bool delimiter;        /* -d */
	bool json;             /* --json */
	bool lines;            /* --lines: file:line of named user frames */
	bool verbose;          /* -v */
	bool perfbuf;          /* --perf-buffer */
	bool aggregate;        /* --aggregate: kernel walks counted in BPF maps */
	bool all;              /* -a */
	uint64_t freq;         /* -F */
	uint64_t period;       /* -c (0: frequency mode) */
	int cpu;               /* -C, -1: all */
	uint32_t stack_storage;/* --stack-storage-size */
	uint64_t duration;     /* seconds, 0: until Ctrl-C */
	uint32_t unwind;       /* enum pr_unwind, or PR_UNWIND_AUTO until parsed */
	bool unwind_auto;      /* the unwind mode was auto's choice */
	bool freeze;           /* --unwind=freeze: dwarf mode, the thread stopped at the sample (runtime/freeze.h) */
	uint32_t stack_size;   /* --stack-size */
	size_t max_stacks;     /* --max-stacks */
	size_t max_keys;       /* --max-keys */
	uint64_t interval;     /* --interval (seconds, 0: one report at the end) */
	uint64_t table_budget; /* --table-budget (bytes; 0: the walker's default) */
	uint64_t cache_bytes;  /* --cache-bytes (0: libdwunw's default) */
	uint32_t max_cpu;      /* --max-cpu (percent of one CPU; 0: no budget) */
	bool debuginfod;       /* --debuginfod / --no-debuginfod (default: DEBUGINFOD_URLS set) */
	const char *debug_dir; /* --debug-dir: roots of separate debug files (NULL: /usr/lib/debug) */
	char **command;        /* -- COMMAND ARGS... (NULL-terminated), or NULL */
};

/* Parses argv into *opts (defaults first); a usage error is one line. */
void pr_parse_args(struct pr_opts *opts, int argc, char **argv);
/* -p/-L targets exist (dies with one line otherwise). */
void pr_check_targets(const struct pr_opts *opts);
bool pr_cpu_selected(const struct pr_opts *opts, int cpu);

#endif /* DWUNW_PROFILE_OPTS_H */
