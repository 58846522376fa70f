/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --max-cpu PCT (memleak, profile, offcputime): the tool's own CPU held under PCT % of one CPU by
 * sampling. The tool's CPU (getrusage, looked at every 100 ms, not per record) over the last
 * period decides a stride: 1 in N of the expensive records (snapshots to unwind) is unwound, the
 * others are counted and shown under a pseudo-stack that names the budget, never dropped silently.
 * The stride doubles while the tool is over budget (up to CPU_BUDGET_MAX_STRIDE) and halves
 * while it is under half of it.
 */
#ifndef DWUNW_CPU_BUDGET_H
#define DWUNW_CPU_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define CPU_BUDGET_MAX_STRIDE 256

struct cpu_budget {
	uint32_t pct;          /* 0: no budget */
	uint32_t stride;       /* 1 in stride unwound */
	uint64_t n;            /* records asked about */
	uint64_t skipped;      /* records not unwound for the budget */
	uint64_t last_ns, last_cpu_ns;
	uint32_t max_stride;   /* the largest stride used */
};

/* The tool's own CPU time so far (user + system), in ns; the calling thread's. */
uint64_t self_cpu_ns(void);
uint64_t thread_cpu_ns(void);

/* "--max-cpu PCT": 1..100 (percent of one CPU), else a usage error (tool_opts.h). */
uint32_t cpu_budget_parse(const char *s);
void cpu_budget_init(struct cpu_budget *b, uint32_t pct);
/* Per expensive record: whether to do the work (true), or count it as skipped (false). */
bool cpu_budget_take(struct cpu_budget *b);
/* The pseudo-stack label for a skipped record ("[not unwound: --max-cpu 5 % budget]"). */
const char *cpu_budget_label(const struct cpu_budget *b);

#endif /* DWUNW_CPU_BUDGET_H */
