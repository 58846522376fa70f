// SPDX-License-Identifier: GPL-2.0-only
/* The processes of a followed tree: names and slots (memleak_procs.h). */
#include <stdio.h>
#include <string.h>
#include "memleak_procs.h"
#include "memleak_state.h"
#include "memleak.skel.h"
#include "runtime/tool_util.h"

static struct {
	uint32_t pid;
	char comm[16];
} *procs;
static size_t nprocs, procs_cap;

static void proc_note(uint32_t pid, const char *comm)
{
	for (size_t i = nprocs; i-- > 0;)
		if (procs[i].pid == pid) {
			if (*comm)
				snprintf(procs[i].comm, sizeof(procs[i].comm), "%s", comm);
			return;
		}
	if (nprocs == procs_cap)
		procs = xrealloc(procs, (procs_cap = procs_cap ? procs_cap * 2 : 64) * sizeof(*procs));
	procs[nprocs].pid = pid;
	snprintf(procs[nprocs].comm, sizeof(procs[nprocs].comm), "%s", comm);
	nprocs++;
}

const char *ml_proc_comm(uint32_t pid)
{
	char fn[64];
	FILE *f;

	for (size_t i = nprocs; i-- > 0;)
		if (procs[i].pid == pid && procs[i].comm[0])
			return procs[i].comm;
	/* not seen in a slot (a stack whose allocations are gone): ask /proc while it runs */
	snprintf(fn, sizeof(fn), "/proc/%u/comm", pid);
	f = fopen(fn, "re");
	if (f) {
		char c[16] = "";

		if (fgets(c, sizeof(c), f))
			c[strcspn(c, "\n")] = 0;
		fclose(f);
		if (*c) {
			proc_note(pid, c);
			return ml_proc_comm(pid);
		}
	}
	return "?";
}

/* Slot -> process, read once per report. */
static struct {
	uint32_t gen;
	bool ok;
	struct follow_slot s;
} *slot_cache;
static uint32_t slot_gen;

void ml_slots_forget(void)
{
	slot_gen++;
}

const struct follow_slot *ml_slot_info(const struct memleak_ctx *ml, uint32_t slot)
{
	if (!slot_cache)
		slot_cache = xcalloc(FOLLOW_SLOTS, sizeof(*slot_cache));
	slot %= FOLLOW_SLOTS;
	if (slot_cache[slot].gen != slot_gen) {
		slot_cache[slot].gen = slot_gen;
		slot_cache[slot].ok = follow_slot_get(ml->skel->obj, slot, &slot_cache[slot].s);
		if (slot_cache[slot].ok)
			proc_note(slot_cache[slot].s.tgid, slot_cache[slot].s.comm);
	}
	return slot_cache[slot].ok ? &slot_cache[slot].s : NULL;
}
