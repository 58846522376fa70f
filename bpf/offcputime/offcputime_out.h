/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * offcputime's sums and report: off-CPU time keyed by (pid, comm, kernel stack, user stack)
 * (stack store indices), bounded; printed as libbpf-tools offcputime prints it (text, folded,
 * microseconds) or NDJSON in profile's form (count: microseconds), then a summary line.
 */
#ifndef DWUNW_OFFCPUTIME_OUT_H
#define DWUNW_OFFCPUTIME_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "runtime/frames.h"
#include "kwalk/kwalk_frames.h"
#include "offcputime_opts.h"

struct oc_key {
	uint32_t pid;
	const char *comm;      /* interned */
	int64_t kstack;        /* stack store index, -1: none */
	int64_t ustack;
	bool on;               /* --wall: on-CPU samples (else off-CPU spans) */
	/* --waker: who woke it (woken false: preempted, or woken before it switched out) */
	bool woken;
	uint32_t wpid;         /* 0 with [interrupt] */
	const char *wcomm;     /* interned; "[interrupt]": woken from interrupt context */
	int64_t wkstack, wustack;
};

struct oc_entry {
	struct oc_key k;
	uint64_t ns;           /* time off CPU */
	uint64_t spans;        /* switch-outs summed (--wall on-CPU: samples) */
};

struct oc_sums {
	struct oc_entry *v;
	size_t n, cap;
	uint32_t *index;       /* open addressing: entry + 1 */
	size_t index_cap;
	size_t max;
	uint64_t overflow_ns;  /* time summed under [aggregation table full] */
};

/* --aggregate: what the drains took from the kernel's sums (kwalk/kwalk_drain.h) */
struct oc_agg_stats {
	bool on;
	uint64_t spans, keys, drains;
	uint64_t bytes;        /* read from the maps */
	uint64_t no_stack;     /* spans under a stack key not found (never expected) */
	uint64_t hold_full;    /* 1: the hold map could not take a process, counting ended (kwalk_hold.bpf.h) */
};

struct oc_stats {
	uint64_t start_ns, end_ns;
	uint64_t setup_cpu_ns;  /* offcputime's CPU before tracing began (BPF load, tables) */
	struct unwind_stats unw;
	uint64_t ulost, klost;  /* spans whose user / kernel stack was lost */
	uint64_t unmatched;     /* spans whose switch-out record was not seen */
	uint64_t output_failed, read_failed;
	uint64_t bpf[OC_CNT_MAX];
	uint64_t records, buffer_bytes;
	struct kwalk_seen kw;   /* --unwind=kernel */
	uint64_t on_records;    /* --wall: on-CPU samples received */
	uint64_t off_records;   /* spans received as records */
	uint64_t period_ns;     /* --wall: the sampling period (each sample's time) */
	uint32_t cpus;          /* --wall: CPUs sampled */
	uint64_t irq_wakeups;   /* --waker: spans woken from interrupt context */
	uint64_t still_off;     /* switch-outs whose thread was still off CPU at the end */
	struct oc_agg_stats agg;
};

/* Adds n spans of ns in all; a full table's time goes under a pseudo-stack interned in st. */
void oc_sums_add(struct oc_sums *s, struct stack_store *st, const struct oc_key *k, uint64_t ns,
		 uint64_t n);
/* The report of the sums, its stacks in fr's stack store, its modules fr's. */
void oc_report(const struct oc_opts *o, const struct oc_sums *s, const struct oc_stats *prs,
	       const struct frames *fr);

#endif /* DWUNW_OFFCPUTIME_OUT_H */
