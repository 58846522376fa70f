// SPDX-License-Identifier: GPL-2.0-only
/* memleak's records: stacks under event ids, the queue, keys -> stacks (memleak_records.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/cap_pump.h"
#include "runtime/capture_user.h"
#include "runtime/intern.h"
#include "runtime/mappings.h"
#include "runtime/py_merge.h"
#include "memleak_allocs.h"
#include "memleak_opts.h"
#include "memleak_records.h"
#include "memleak_figs.h"
#include "memleak_state.h"
#include "memleak.skel.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_record.h"
#endif

/*
 * The stack of a bpf_get_stackid() id (optionally with a first frame put in front), of process
 * pid when following a tree (its address space), else (pid 0) of the target.
 */
static int64_t fp_stack(struct memleak_ctx *ml, uint32_t pid, int64_t id, uint64_t first_pc,
			bool replace_first)
{
	/* following a tree: stack ids are shared by the processes, the cache is not */
	return fp_stack_of(&ml->fr, pid ? NULL : &ml->fpc, bpf_map__fd(ml->skel->maps.stack_traces),
			   pid ? (pid_t)pid : ml->target_pid, pid, id, first_pc, replace_first);
}

/*
 * A process exited. fp mode names its stacks at the report (return addresses against its
 * mappings), so its view stays until the next report has named them (ml_forget_exited); the
 * other modes unwound each stack at its event and drop the view now.
 */
static void ml_proc_exited(struct memleak_ctx *ml, uint32_t pid)
{
	if (ml->env.unwind != ML_UNWIND_FP || ml->nexited >= ML_EXITED_MAX) {
		frames_forget_pid(&ml->fr, pid);
		return;
	}
	if (ml->nexited == ml->exited_cap) {
		ml->exited_cap = ml->exited_cap ? 2 * ml->exited_cap : 64;
		ml->exited = xrealloc(ml->exited, ml->exited_cap * sizeof(*ml->exited));
	}
	ml->exited[ml->nexited++] = pid;
}

void ml_forget_exited(struct memleak_ctx *ml)
{
	for (size_t k = 0; k < ml->nexited; k++)
		frames_forget_pid(&ml->fr, ml->exited[k]);
	ml->nexited = 0;
}

/* ---- Records ----------------------------------------------------------------------------------- */


static const char *fn_names[ML_FN_NR] = {
	"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc", "posix_memalign",
	"memalign", "valloc", "pvalloc", "mmap", "free", "munmap",
};

static void on_trace(const struct memleak_ctx *ml, const struct ml_trace_rec *r)
{
	const char *fn = r->fn < ML_FN_NR ? fn_names[r->fn] : "?";

	if (ml->env.json || ml->env.folded)
		return;
	if (r->fn == ML_FN_FREE || r->fn == ML_FN_MUNMAP)
		printf("[%u] %s: free entered, address = %#llx, size = %llu\n", r->tid, fn,
		       (unsigned long long)r->addr, (unsigned long long)r->size);
	else
		printf("[%u] %s: alloc exited, size = %llu, result = %#llx\n", r->tid, fn,
		       (unsigned long long)r->size, (unsigned long long)r->addr);
}

#ifdef HAVE_DWUNW
static void on_snapshot(struct memleak_ctx *ml, const void *data, size_t size)
{
	const struct cap_record *rec;
	uint32_t pid = 0;

	/* following a tree, each process is its own address space (stacks grouped by process) */
	if (ml->following && size >= offsetof(struct cap_record, pid) + sizeof(pid))
		memcpy(&pid, (const char *)data + offsetof(struct cap_record, pid), sizeof(pid));
	if (size >= sizeof(struct cap_record) && !cpu_budget_take(&ml->budget)) {
		/* over --max-cpu: the allocation kept, its stack not unwound (said so) */
		uint64_t cookie;

		memcpy(&cookie, (const char *)data + offsetof(struct cap_record, cookie), sizeof(cookie));
		ml_ev_put(cookie, (uint32_t)pseudo_stack(&ml->st, cpu_budget_label(&ml->budget)));
		return;
	}
	/* frame 0 (the allocator) is not shown */
	int64_t idx = frames_from_snapshot(&ml->fr, data, size, 1, pid, &ml->stats, &rec);

	if (idx == FRAMES_BAD)
		return;
	if (idx == FRAMES_FALLBACK) {
		uint64_t ra = 0;

		if (rec->stack_size >= sizeof(ra))
			memcpy(&ra, rec->stack, sizeof(ra));
		idx = fp_stack(ml, pid, rec->aux, ra, true);
	}
	/* the allocating thread's Python chain at the allocation (frame 0, the allocator, left out) */
	idx = py_merge_stack(&ml->py, idx, rec->pid, rec->tid, pid, false);
	py_merge_add(&ml->py, rec->pid);
	ml_ev_put(rec->cookie, (uint32_t)idx);
}
#endif

#ifdef HAVE_KWALK
/* A walker event: its stack (the walker's, or the snapshot's it carries) under its event id. */
static void on_kwalk(struct memleak_ctx *ml, const void *data, size_t size)
{
	struct kwalk_info ki;
	uint32_t pid = ml->following ? kw_record_pid(data, size) : 0;

	/* frame 0 (the allocator) is not shown */
	int64_t idx = kw_record_stack(&ml->kwt, data, size, 1, pid, &ml->stats, &ml->kws, &ki);

	if (idx == FRAMES_BAD || idx == FRAMES_NOTICE)
		return; /* a notice: the snapshot record that follows has the stack */
	if (idx == FRAMES_FALLBACK)
		idx = fp_stack(ml, pid, ki.aux, 0, false);
	idx = py_merge_stack(&ml->py, idx, ki.pid, ki.tid, pid, false);
	py_merge_add(&ml->py, ki.pid);
	ml_ev_put(ki.cookie, (uint32_t)idx);
}
#endif

static int64_t ml_pseudo(struct memleak_ctx *ml, uint32_t pid, const char *label);

static void allocated_add(struct memleak_ctx *ml, int64_t idx, uint64_t size)
{
	struct ml_stack_fig *g = ml_fig(ml, idx);

	g->alloc_bytes += size;
	g->alloc_count++;
}

/* --allocated: one allocation made, counted under its stack (its event's, as the report does). */
static void on_alloc(struct memleak_ctx *ml, const struct ml_alloc_rec *r)
{
	uint32_t pid = ml->following ? r->pid : 0;

	if (!(r->key & ML_KEY_DWARF)) {
		allocated_add(ml, ml_key_stack(ml, r->key, pid), r->size);
		return;
	}
	int64_t idx = ml_ev_lookup(ml_key_value(r->key));

	if (idx >= 0) {
		allocated_add(ml, idx, r->size);
		return;
	}
	if (ml->alloc_nlater == ml->alloc_later_cap) {
		ml->alloc_later_cap = ml->alloc_later_cap ? ml->alloc_later_cap * 2 : 256;
		ml->alloc_later = xrealloc(ml->alloc_later, ml->alloc_later_cap * sizeof(*ml->alloc_later));
	}
	ml->alloc_later[ml->alloc_nlater++] = (struct ml_alloc_later){ ml_key_value(r->key), r->size, pid };
}

void ml_allocated_settle(struct memleak_ctx *ml)
{
	for (size_t i = 0; i < ml->alloc_nlater; i++) {
		const struct ml_alloc_later *a = &ml->alloc_later[i];
		int64_t idx = ml_ev_lookup(a->evid);

		if (idx < 0)
			idx = ml_pseudo(ml, a->pid, "[stack unknown: record not received]");
		allocated_add(ml, idx, a->size);
	}
	ml->alloc_nlater = 0;
	/* give back what a burst of them took */
	if (ml->alloc_later_cap > 4096) {
		free(ml->alloc_later);
		ml->alloc_later = NULL;
		ml->alloc_later_cap = 0;
	}
}

int ml_on_record(void *ctx, const void *data, size_t size)
{
	struct memleak_ctx *ml = ctx;
	const struct cap_rec_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	ml->record_bytes += size;
	if (py_merge_record(&ml->py, data, size)) {
		/* the thread's Python chain at the allocation: its stack record follows */
	} else if (h->kind == CAP_KIND_SNAPSHOT) {
#ifdef HAVE_DWUNW
		on_snapshot(ml, data, size);
#endif
	} else if (h->kind == CAP_KIND_MAPEV) {
		if (ml->fr.maps)
			mappings_event(ml->fr.maps, data, size);
	} else if (h->kind == CAP_KIND_PROC && size >= sizeof(struct cap_proc_rec)) {
		struct cap_proc_rec r;

		memcpy(&r, data, sizeof(r));
		if (r.op == CAP_PROC_FORK)
			mappings_fork(ml->fr.maps, r.parent, r.pid);
		else if (r.op == CAP_PROC_EXIT)
			ml_proc_exited(ml, r.pid); /* its blocks stay: leaks at its exit */
#ifdef HAVE_KWALK
	} else if (h->kind == KW_KIND_EVENT) {
		on_kwalk(ml, data, size);
	} else if (kw_track_record(&ml->kwt, data, size)) {
		/* an executable mapping or an exit: tables loaded or dropped */
#endif
	} else if (h->kind == ML_REC_TRACE && size >= sizeof(struct ml_trace_rec)) {
		struct ml_trace_rec r;

		memcpy(&r, data, sizeof(r));
		ml->trace_records++;
		on_trace(ml, &r);
	} else if (h->kind == ML_REC_ALLOC && size >= sizeof(struct ml_alloc_rec)) {
		struct ml_alloc_rec r;

		memcpy(&r, data, sizeof(r));
		on_alloc(ml, &r);
	}
	return 0;
}

/* Snapshots the drain thread could not queue: their allocations go under a lost stack. */
static void take_dropped(struct memleak_ctx *ml)
{
	uint64_t *ids;
	size_t n = cap_pump_take_dropped(ml->pump, &ids);

	if (n) {
		int64_t idx = ml_pseudo(ml, 0, "[stack lost: record queue full]");

		for (size_t i = 0; i < n; i++)
			ml_ev_put(ids[i], (uint32_t)idx);
	}
	free(ids);
}

/*
 * Process every record the producers submitted until now (the report needs them all). Producers
 * faster than the unwinding for seconds: this report goes on without the records still in the
 * buffers (their allocations under "[stack unknown: record not received]"), rather than wait.
 */
#define SYNC_TIMEOUT_MS 5000

void ml_drain_reset(struct memleak_ctx *ml)
{
	ml->sync_gave_up = false;
}

void ml_drain(struct memleak_ctx *ml)
{
	if (!ml->pump)
		return;
	if (ml->sync_gave_up) {
		cap_pump_process(ml->pump, ml_on_record, ml, 65536);
	} else if (cap_pump_sync(ml->pump, ml_on_record, ml, SYNC_TIMEOUT_MS) < 0) {
		ml->sync_gave_up = true;
		fprintf(stderr, "memleak: the unwinding is behind the records by more than %d s: this "
			"report does without the records still in the buffers\n", SYNC_TIMEOUT_MS / 1000);
	}
	take_dropped(ml);
}

/* Some queued records: the main loop's step, and between chunks of the report's long loops. */
void ml_process_some(struct memleak_ctx *ml, size_t max)
{
	if (!ml->pump)
		return;
	cap_pump_process(ml->pump, ml_on_record, ml, max); /* nothing when called from a record */
	take_dropped(ml);
}

void ml_drain_yield(void *ml)
{
	ml_process_some(ml, 16384);
}

/* A pseudo-stack, of process pid when following a tree (0: not following). */
static int64_t ml_pseudo(struct memleak_ctx *ml, uint32_t pid, const char *label)
{
	return stack_get_in(&ml->st, pid, SK_PSEUDO, 0, intern(label), NULL, NULL, 0, NULL, NULL);
}

int64_t ml_key_stack(struct memleak_ctx *ml, uint64_t key, uint32_t pid)
{
	if (key & ML_KEY_LOST)
		return ml_pseudo(ml, pid, ml->env.perfbuf ? "[stack lost: perf buffer full]"
							  : "[stack lost: ring buffer full]");
	if (key & ML_KEY_DWARF) {
		int64_t idx = ml_ev_lookup_live(ml_key_value(key));

		if (idx < 0 && ml_key_value(key) > ml_ev_max()) {
			ml_drain(ml); /* submitted after the drain that began the report */
			idx = ml_ev_lookup_live(ml_key_value(key));
		}

		if (idx < 0)
			return ml_pseudo(ml, pid, "[stack unknown: record not received]");
		return idx;
	}
	if (key & ML_KEY_FPERR)
		return ml_pseudo(ml, pid, fperr_label(ml_key_value(key)));
	return fp_stack(ml, pid, (int64_t)key, 0, false);
}
