/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's state: one context, made in main() and passed down to every part of its user space
 * (the runtime gets what it needs of it as parameters).
 */
#ifndef DWUNW_MEMLEAK_STATE_H
#define DWUNW_MEMLEAK_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "runtime/py_merge.h"
#include "memleak_opts.h"
#include "runtime/cpu_budget.h"
#include "runtime/command.h"
#include "runtime/frames.h"
#include "runtime/freeze.h"
#include "runtime/stack_store.h"
#include "runtime/uprobe_set.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_frames.h"
#include "kwalk/kwalk_track_user.h"
#endif

struct cap_pump;
struct dwunw_cap_reader;
struct mappings;

/* A stack's figures in this report (memleak_report.c), indexed like the stack store. */
struct ml_stack_fig {
	uint64_t bytes, count; /* outstanding */
	int64_t first_alloc;   /* -a: its first allocation in allocs_v (-1: none) */
	uint64_t alloc_bytes, alloc_count; /* --allocated: made since the last report, freed or not */
};

/* -a: the outstanding allocations of this report, chained by stack (ml_stack_fig.first_alloc). */
struct alloc_ent {
	uint64_t addr;
	struct ml_alloc_info info;
	int64_t next;          /* next allocation of the same stack (-a) */
};

/* --allocated: an allocation whose event's stack was not known yet when its record came */
struct ml_alloc_later {
	uint64_t evid, size;
	uint32_t pid;
};

struct memleak_ctx {
	struct ml_env env;              /* the command line */
	struct cpu_budget budget;       /* --max-cpu */
	struct memleak_bpf *skel;
	pid_t target_pid;               /* -p PID, or the command's first process */
	bool following;                 /* -c, -- PROG: the command's process tree */
	struct command cmd;             /* -c COMMAND, -- PROG ARGS */
	struct uprobe_spec probes[ML_FN_NR];
	struct uprobe_set ups;          /* the allocator's functions probed */
	struct bpf_link **links;        /* every link, detached at once */
	size_t nlinks;

	/* records -> stacks */
	struct stack_store st;
	struct frames fr;               /* its maps: mapping events on (dwarf mode) */
	struct fp_cache fpc;            /* stack id -> stack (not following a tree) */
	struct py_merge py;             /* Python chains read at the allocation, spliced in */
	struct unwind_stats stats;
	struct freeze fz;               /* --unwind=freeze */
	uint64_t record_bytes;          /* bytes of all records received */
	uint64_t trace_records;         /* -t records received */
	struct dwunw_cap_reader *reader;
	struct cap_pump *pump;
	bool sync_gave_up;              /* in this report: records still queued are done without */
#ifdef HAVE_KWALK
	struct kw_track kwt;
	struct kwalk_seen kws;
#endif

	/* the report */
	struct ml_stack_fig *figs;      /* per stack */
	size_t nfigs;
	struct alloc_ent *allocs_v;     /* -a */
	size_t allocs_n, allocs_cap;
	struct ml_alloc_later *alloc_later; /* --allocated: records before their stack's */
	size_t alloc_nlater, alloc_later_cap;
	uint32_t marks_seen;            /* markers shown in this report's text (legend after) */
	size_t report_outstanding;      /* entries of the allocs map at the last report */
	uint64_t exec_gone, exec_gone_bytes; /* outstanding allocations of images replaced by exec */
	uint32_t *exited;               /* fp mode: processes exited since the last report */
	size_t nexited, exited_cap;
};

#endif /* DWUNW_MEMLEAK_STATE_H */
