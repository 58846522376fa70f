/* SPDX-License-Identifier: GPL-2.0-only */
/* offcputime's command line (libbpf-tools offcputime's flags plus dwunw's) and its checks. */
#ifndef DWUNW_OFFCPUTIME_OPTS_H
#define DWUNW_OFFCPUTIME_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "offcputime.h"

/* --unwind=auto while parsing: kernel or dwarf after (tool_unwind_auto) */
#define OC_UNWIND_AUTO 0xffffffffu

struct oc_opts {
	uint32_t pids[SEL_MAX_FILTER];
	size_t npids;
	uint32_t tids[SEL_MAX_FILTER];
	size_t ntids;
	bool user_threads, kernel_threads; /* -u, -k */
	bool user, kernel;     /* stacks wanted (-U: user only, -K: kernel only) */
	bool folded;           /* -f */
	bool delimiter;        /* -d */
	bool json;             /* --json */
	bool lines;            /* --lines: file:line of named user frames */
	bool verbose;          /* -v */
	int64_t state;         /* --state, -1: any */
	uint64_t min_us, max_us; /* -m, -M */
	uint32_t stack_storage;/* --stack-storage-size */
	uint64_t duration;     /* seconds */
	uint32_t unwind;       /* enum oc_unwind, or OC_UNWIND_AUTO until parsed */
	bool unwind_auto;      /* the unwind mode was auto's choice */
	bool freeze;           /* --unwind=freeze: dwarf mode, the thread stopped at its switch-in (runtime/freeze.h) */
	uint32_t stack_size;   /* --stack-size */
	size_t max_stacks;     /* --max-stacks */
	uint32_t max_cpu;      /* --max-cpu (percent of one CPU; 0: no budget) */
	size_t max_keys;       /* --max-keys */
	uint64_t table_budget; /* --table-budget (bytes; 0: the walker's default) */
	uint64_t cache_bytes;  /* --cache-bytes (0: libdwunw's default) */
	bool wall;             /* --wall: on-CPU samples too, in the same unit */
	uint32_t freq;         /* -F: --wall's sampling frequency (Hz) */
	bool waker;            /* --waker: each span's waker stack too (as offwaketime) */
	bool aggregate;        /* --aggregate: kernel mode's spans summed in BPF maps (kwalk_agg.h) */
	char **command;        /* -- COMMAND ARGS... (NULL-terminated), or NULL */
};

void oc_parse_args(struct oc_opts *o, int argc, char **argv);
/* -p/-t targets exist (one line and exit 3 otherwise). */
void oc_check_targets(const struct oc_opts *o);

#endif /* DWUNW_OFFCPUTIME_OPTS_H */
