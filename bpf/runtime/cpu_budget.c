// SPDX-License-Identifier: GPL-2.0-only
/* The tool's CPU held under a budget by sampling: see cpu_budget.h. */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include "cpu_budget.h"
#include "intern.h"
#include "tool_opts.h"
#include "tool_util.h"

#define PERIOD_NS 100000000ull

uint32_t cpu_budget_parse(const char *s)
{
	uint64_t v = tool_opt_u64(s, "--max-cpu", 0, UINT64_MAX);

	if (v < 1 || v > 100)
		tool_usage_error("--max-cpu %s: out of range (1 .. 100 %% of one CPU)", s);
	return (uint32_t)v;
}

uint64_t self_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cpu_budget_init(struct cpu_budget *b, uint32_t pct)
{
	*b = (struct cpu_budget){ .pct = pct, .stride = 1, .max_stride = 1 };
	b->last_ns = mono_ns();
	b->last_cpu_ns = self_cpu_ns();
}

bool cpu_budget_take(struct cpu_budget *b)
{
	if (!b->pct)
		return true;
	/* the clock every 64 records only (a vDSO read, no system call) */
	if ((b->n & 63) == 0) {
		uint64_t now = mono_ns();

		if (now - b->last_ns >= PERIOD_NS) {
			uint64_t cpu = self_cpu_ns();
			uint64_t used = (cpu - b->last_cpu_ns) * 100, allowed = (now - b->last_ns) * b->pct;

			if (used > allowed && b->stride < CPU_BUDGET_MAX_STRIDE)
				b->stride *= 2;
			else if (used * 2 < allowed && b->stride > 1)
				b->stride /= 2;
			if (b->stride > b->max_stride)
				b->max_stride = b->stride;
			b->last_ns = now;
			b->last_cpu_ns = cpu;
		}
	}
	if (b->n++ % b->stride == 0)
		return true;
	b->skipped++;
	return false;
}

const char *cpu_budget_label(const struct cpu_budget *b)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "[not unwound: --max-cpu %u %% budget]", b->pct);
	return intern(buf);
}
