/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile's state: one context, made in main() and passed down to every part of its user space
 * (the runtime gets what it needs of it as parameters).
 */
#ifndef DWUNW_PROFILE_STATE_H
#define DWUNW_PROFILE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "profile_agg.h"
#include "profile_opts.h"
#include "profile_out.h"
#include "runtime/cpu_budget.h"
#include "runtime/frames.h"
#include "runtime/freeze.h"
#include "runtime/py_merge.h"
#include "runtime/spaces.h"
#include "runtime/stack_store.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_track_user.h"
#endif
#include "profile.h"
#include "kwalk/kwalk_drain.h"

#define PR_COMM_CACHE 4096

struct profile_ctx;

struct bpf_link;

struct profile_ctx {
	struct pr_opts opts;            /* the command line */
	struct profile_bpf *skel;
	struct stack_store st;          /* user and kernel stacks (the kernel's in KSTACK_SPACE) */
	struct frames fr;               /* its maps: mapping events on (dwarf mode, given targets) */
	struct freeze fz;               /* --unwind=freeze */
	struct fp_cache kcache;         /* kernel stack id -> stack */
	struct py_merge py;             /* Python chains read at the event, spliced in */
	struct pr_agg agg;              /* the counts */
	struct kw_drain kagg;           /* --aggregate: the kernel's counts drained into agg */
	struct pr_stats prs;            /* the summary's figures */
	uint64_t now_ns;                /* mono_ns(), refreshed every 256 records */
	uint64_t poll_until;            /* on_record returns -EINTR from then on */
	uint64_t processed_ts;          /* kernel time of the newest snapshot processed */
	struct cpu_budget budget;       /* --max-cpu */
	/* thread names, cached per tid for a second (profile.c) */
	struct {
		uint32_t tid;           /* tid + 1 */
		const char *comm;
		uint64_t ns;
	} comm_cache[PR_COMM_CACHE];
	struct spaces spaces;           /* pid -> image generation: the address space of its samples */
#ifdef HAVE_KWALK
	struct kw_track kwt;
#endif
	/* the perf events, one per CPU */
	struct bpf_link **links;
	int *pfds;
	int nlinks;
	/* the report (profile_out.c) */
	struct pr_tally tally;          /* the summary's figures of the keys reported and dropped */
	struct {
		struct folded_line *v;  /* --interval -f: the run's folded lines, by name (no pid) */
		size_t n, cap;
	} folded;
	uint32_t marks_seen;            /* markers shown in the text (legend after) */
	/* --interval: per module seen (frames_modules' index), 1 + the seq of the last interval line
	 * that named it: each line names the modules of its own stacks once */
	uint64_t *mod_stamp;
	size_t mod_stamp_n;
};

#endif /* DWUNW_PROFILE_STATE_H */
