// SPDX-License-Identifier: GPL-2.0-only
/* The tools' perf maps, one per process, parsed by libdwunw (dwunw_perf_map_*): see perf_map.h. */
#include <stdio.h>
#include <stdlib.h>
#include <dwunw.h>
#include "intern.h"
#include "perf_map.h"
#include "tool_util.h"

struct pm_proc {
	pid_t pid;
	uint64_t checked_ns;   /* last look at the file */
	bool rejected_said;    /* a refused file (planted) was named once */
	uint64_t reads;        /* the map's reads counted in `reads` below */
	struct dwunw_perf_map *map;
	struct pm_proc *next;
};

static struct pm_proc *procs;
static uint64_t reads;

uint64_t perf_map_reads(void)
{
	return reads;
}

/* Read on from where the last read ended; a refused file is named once. */
static void pm_read(struct pm_proc *p, bool first)
{
	struct dwunw_perf_map_info info;

	p->checked_ns = mono_ns();
	if (!first)
		dwunw_perf_map_read_on(p->map);
	if (dwunw_perf_map_info(p->map, &info))
		return;
	if (info.rejected[0] && !p->rejected_said) {
		p->rejected_said = true;
		fprintf(stderr, "%s: %s\n", tool_name(), info.rejected);
	}
	reads += info.reads - p->reads;
	p->reads = info.reads;
}

static const char *pm_find(const struct pm_proc *p, uint64_t pc, uint64_t *off)
{
	const char *name;
	uint64_t start;

	if (dwunw_perf_map_find(p->map, pc, &name, &start))
		return NULL;
	*off = pc - start;
	return intern(name);
}

const char *perf_map_lookup(pid_t pid, uint64_t pc, bool jit, uint64_t *off)
{
	struct pm_proc *p;
	const char *name;

	for (p = procs; p && p->pid != pid; p = p->next)
		;
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		if (dwunw_perf_map_open(pid, &p->map)) {
			free(p);
			return NULL;
		}
		p->pid = pid;
		p->next = procs;
		procs = p;
		pm_read(p, true);
	}
	if ((name = pm_find(p, pc, off)) || !jit)
		return name;
	/* code named since the last read: read on, at most once per PERF_MAP_RECHECK_NS */
	if (mono_ns() - p->checked_ns < PERF_MAP_RECHECK_NS)
		return NULL;
	pm_read(p, false);
	return pm_find(p, pc, off);
}

void perf_map_forget(pid_t pid)
{
	for (struct pm_proc **pp = &procs; *pp; pp = &(*pp)->next)
		if ((*pp)->pid == pid) {
			struct pm_proc *p = *pp;

			*pp = p->next;
			dwunw_perf_map_free(p->map);
			free(p);
			return;
		}
}
