// SPDX-License-Identifier: GPL-2.0-only
/* memleak's report: stacks by outstanding bytes, as text, folded or JSON (memleak_report.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/cap_pump.h"
#include "runtime/capture_user.h"
#include "runtime/follow.h"
#include "runtime/frame_lines.h"
#include "runtime/mappings.h"
#include "memleak_allocs.h"
#include "memleak_figs.h"
#include "memleak_mem.h"
#include "memleak_opts.h"
#include "memleak_print.h"
#include "memleak_procs.h"
#include "memleak_records.h"
#include "memleak_report.h"
#include "memleak_state.h"
#include "memleak.skel.h"
#include "runtime/report_fmt.h"
#include "runtime/stack_store.h"
#include "runtime/counters.h"
#include "runtime/tool_util.h"

/* qsort_r: stacks by outstanding bytes, then allocations, then index */
static int cmp_stack_bytes(const void *a, const void *b, void *arg)
{
	const struct ml_stack_fig *figs = arg;
	const struct ml_stack_fig *x = &figs[*(const uint32_t *)a], *y = &figs[*(const uint32_t *)b];

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->alloc_bytes != y->alloc_bytes)
		return x->alloc_bytes < y->alloc_bytes ? 1 : -1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

struct group_key {
	uint32_t pid, rank, group, stack;
};

static int cmp_group_pid(const void *a, const void *b)
{
	const struct group_key *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_group_rank(const void *a, const void *b)
{
	const struct group_key *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

struct report_walk {
	struct memleak_ctx *ml;
	uint64_t now, older_ns, exec_cut;
};


/* Allocations an image left when it exec'd: gone with its address space, counted, not shown. */
static void exec_gone(struct memleak_ctx *ml, uint64_t bytes, uint64_t count)
{
	ml->exec_gone += count;
	ml->exec_gone_bytes += bytes;
}

/*
 * -C in fp mode: the process whose mappings name a combined key's stack (following a tree: its
 * image's slot's), or -1 when that image exec'd since (counted; the caller drops the entry).
 */
static int64_t combined_image(struct memleak_ctx *ml, uint64_t key, const struct ml_combined *c)
{
	uint32_t img = (uint32_t)((key >> ML_KEY_IMAGE_SHIFT) & ML_KEY_IMAGE_MASK);
	bool gone;
	uint32_t pid = 0;

	if (ml->following) {
		const struct follow_slot *fs = ml_slot_info(ml, img);

		gone = fs && (fs->flags & FOLLOW_F_EXECED);
		pid = fs ? fs->tgid : 0;
	} else {
		gone = img != (ml->skel->bss->exec_gen & ML_KEY_IMAGE_MASK);
	}
	if (!gone)
		return pid;
	exec_gone(ml, c->total_size, c->count);
	return -1;
}

/* One outstanding allocation of the map walk: counted under its stack (-a: also listed). */
static void report_alloc(void *ctx, uint64_t addr, const struct ml_alloc_info *info)
{
	struct report_walk *w = ctx;
	struct memleak_ctx *ml = w->ml;
	uint32_t pid = 0;

	if (info->ts < w->exec_cut) {
		/* allocated by the image the target replaced with exec */
		exec_gone(ml, info->size, 1);
		bpf_map_delete_elem(bpf_map__fd(ml->skel->maps.allocs), &addr);
		return;
	}
	if (ml->following) {
		/* the key has the process's slot on top of the address */
		uint32_t slot = (uint32_t)(addr >> FOLLOW_SLOT_SHIFT);
		const struct follow_slot *fs = ml_slot_info(ml, slot);

		if (fs && (fs->flags & FOLLOW_F_EXECED)) {
			/* allocated by an image its process replaced with exec */
			exec_gone(ml, info->size, 1);
			bpf_map_delete_elem(bpf_map__fd(ml->skel->maps.allocs), &addr);
			return;
		}
		pid = fs ? fs->tgid : 0;
		addr &= (1ull << FOLLOW_SLOT_SHIFT) - 1;
	}
	int64_t idx = ml_key_stack(ml, info->key, pid); /* keeps its event, even when too young to show */
	if (!ml->env.combined && w->now > info->ts && w->now - info->ts < w->older_ns)
		return;
	if (info->ts > w->now)
		return;
	struct ml_stack_fig *g = ml_fig(ml, idx);
	g->bytes += info->size;
	g->count++;
	if (ml->env.show_allocs) {
		ml_allocs_push(ml, addr, info);
		ml->allocs_v[ml->allocs_n - 1].next = g->first_alloc;
		g->first_alloc = (int64_t)(ml->allocs_n - 1);
	}
}

void ml_report(struct memleak_ctx *ml)
{
	uint64_t now = mono_ns(), older_ns = ml->env.older_ms * 1000000ull;
	uint64_t exec_cut = ml->skel->bss->exec_ns;
	uint32_t *order = NULL, nord = 0;
	uint64_t capc[CAP_CNT_MAX], lost;
	struct tm tm;
	time_t t;

	/* the outstanding figures are this report's; --allocated's were counted since the last */
	for (size_t k = 0; k < ml->nfigs; k++) {
		ml->figs[k].bytes = ml->figs[k].count = 0;
		ml->figs[k].first_alloc = -1;
	}
	ml_slots_forget();
	ml_drain_reset(ml);

	if (ml->env.combined && ml->env.unwind == ML_UNWIND_FP) {
		/* the per-stack aggregate kept in BPF, iterated from the first key */
		int fd = bpf_map__fd(ml->skel->maps.combined_allocs);
		uint64_t key, next, *gone = NULL;
		size_t ngone = 0, gone_cap = 0;
		void *prev = NULL;

		ml_drain(ml);
		ml->allocs_n = 0;
		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			struct ml_combined c;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(fd, &key, &c) || !c.count)
				continue; /* fully freed: not shown */
			int64_t pid = combined_image(ml, key, &c);

			if (pid < 0) {
				/* deleted after the walk: a deleted key would restart it from the first */
				if (ngone == gone_cap) {
					gone_cap = gone_cap ? 2 * gone_cap : 64;
					gone = xrealloc(gone, gone_cap * sizeof(*gone));
				}
				gone[ngone++] = key;
				continue;
			}
			struct ml_stack_fig *g = ml_fig(ml, ml_key_stack(ml, key & ~(ML_KEY_IMAGE_MASK << ML_KEY_IMAGE_SHIFT),
									 (uint32_t)pid));

			g->bytes += c.total_size;
			g->count += c.count;
		}
		for (size_t k = 0; k < ngone; k++)
			bpf_map_delete_elem(fd, &gone[k]);
		free(gone);
	} else {
		/* drain, then walk the map in chunks (a record still missing is drained then) */
		struct report_walk w = { .ml = ml, .now = now, .older_ns = older_ns, .exec_cut = exec_cut };

		ml_drain(ml);
		ml->allocs_n = 0;
		ml->report_outstanding = ml_allocs_walk(bpf_map__fd(ml->skel->maps.allocs), report_alloc, &w);
	}

	ml_allocated_settle(ml); /* after the drain: every record of the interval taken */
	/* stacks with outstanding allocations (--allocated: or allocations made), by bytes */
	if (ml->st.n)
		ml_fig(ml, (int64_t)ml->st.n - 1); /* a figure for every stack */
	order = xcalloc(ml->st.n, sizeof(*order));
	for (size_t k = 0; k < ml->st.n; k++)
		if (ml->figs[k].count || ml->figs[k].alloc_count)
			order[nord++] = (uint32_t)k;
	qsort_r(order, nord, sizeof(*order), cmp_stack_bytes, ml->figs);
	/* -a lists allocations in the order the map gave them */
	for (uint32_t k = 0; k < nord; k++) {
		struct ml_stack_fig *s = &ml->figs[order[k]];
		int64_t prev = -1, cur = s->first_alloc;

		while (cur >= 0) {
			int64_t nx = ml->allocs_v[cur].next;

			ml->allocs_v[cur].next = prev;
			prev = cur;
			cur = nx;
		}
		s->first_alloc = prev;
	}
	size_t shown = nord < ml->env.top ? nord : ml->env.top;
	bool by_process = false;

	if (ml->env.folded && !ml->env.top_given)
		shown = nord; /* a flame graph needs every stack */
	if (ml->following) {
		/* more than one process: group the stacks shown by process, the largest stack's first */
		for (size_t k = 1; k < shown && !by_process; k++)
			by_process = ml->st.v[order[k]].space != ml->st.v[order[0]].space;
		if (by_process) {
			struct group_key *g = xcalloc(shown, sizeof(*g));

			for (size_t k = 0; k < shown; k++)
				g[k] = (struct group_key){ (uint32_t)ml->st.v[order[k]].space, (uint32_t)k, 0,
							   order[k] };
			/* rank of a process: the rank of its first (largest) stack */
			qsort(g, shown, sizeof(*g), cmp_group_pid);
			for (size_t k = 0; k < shown; k++)
				g[k].group = k && g[k - 1].pid == g[k].pid ? g[k - 1].group : g[k].rank;
			qsort(g, shown, sizeof(*g), cmp_group_rank);
			for (size_t k = 0; k < shown; k++)
				order[k] = g[k].stack;
			free(g);
		}
	}

	dwunw_cap_counters(ml->skel->obj, capc);
	lost = capc[CAP_CNT_OUTPUT_FAILED];
	if (cap_pump_reader_lost(ml->pump) > lost)
		lost = cap_pump_reader_lost(ml->pump);
	uint64_t qdropped = cap_pump_dropped(ml->pump);
	lost += qdropped;
	uint64_t cnt[ML_CNT_MAX];

	tool_counters_read(ml->skel->obj, cnt, ML_CNT_MAX);
	uint64_t allocs_full = cnt[ML_CNT_ALLOCS_FULL];
	uint64_t no_pending = cnt[ML_CNT_NO_PENDING];
	uint64_t combined_full = cnt[ML_CNT_COMBINED_FULL];
	uint64_t alloc_lost = cnt[ML_CNT_ALLOC_LOST];

	/* unwind summary over the stacks shown in this report's aggregate */
	size_t n_dwarf = 0, n_complete = 0, n_stopped = 0, n_fp = 0, n_pseudo = 0, n_beyond = 0, n_stale = 0;
	size_t n_live_complete = 0; /* shown complete on memory read live: only spot-checked */
	size_t n_live = 0;          /* with frames read live (not from a thread frozen at the event) */
	char reasons[512] = "";
	{
		const char *rname[32];
		size_t rcount[32], nr = 0;

		for (uint32_t k = 0; k < nord; k++) {
			const struct ustack *s = &ml->st.v[order[k]];

			if (s->kind == SK_FP) {
				n_fp++;
			} else if (s->kind == SK_PSEUDO) {
				n_pseudo++;
			} else {
				n_dwarf++;
				n_beyond += s->beyond;
				n_live += s->live;
				if (!s->stop) {
					n_complete++;
					n_live_complete += s->live;
					continue;
				}
				n_stopped++;
				n_stale += s->stop_name && !strcmp(s->stop_name, "STALE");
				size_t r;
				for (r = 0; r < nr; r++)
					if (rname[r] == s->stop_name)
						break;
				if (r == nr && nr < 32) {
					rname[nr] = s->stop_name;
					rcount[nr++] = 0;
				}
				if (r < 32)
					rcount[r]++;
			}
		}
		size_t off = 0;
		for (size_t r = 0; r < nr && off < sizeof(reasons) - 64; r++)
			off += (size_t)snprintf(reasons + off, sizeof(reasons) - off, "%s%s %zu",
						r ? ", " : "", rname[r], rcount[r]);
	}

	/* --lines: the stacks shown, each distinct address once over the run */
	frames_lines(&ml->fr, order, shown);
	t = time(NULL);
	localtime_r(&t, &tm);
	if (ml->env.json) {
		printf("{\"time\":\"%d:%d:%d\",\"timestamp\":%lld,\"pid\":%d,\"unwind_mode\":\"%s\",\"stacks\":[",
		       tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)t, ml->target_pid,
		       ml_unwind_name(ml));
		for (size_t k = 0; k < shown; k++) {
			if (k)
				putchar(',');
			ml_print_stack_json(ml, order[k]);
		}
		printf("],\"lost\":%" PRIu64 ",\"untracked\":{\"allocs_full\":%" PRIu64
		       ",\"no_pending\":%" PRIu64 ",\"combined_full\":%" PRIu64 ",\"stack_table_full\":%" PRIu64 "}",
		       lost, allocs_full, no_pending, combined_full, ml->st.full);
		printf(",\"exec_gone\":{\"allocations\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", ml->exec_gone,
		       ml->exec_gone_bytes);
		if (ml->env.allocated)
			printf(",\"allocated_lost\":%" PRIu64, alloc_lost);
		printf(",\"unwind\":{\"stacks\":%zu,\"complete\":%zu,\"stopped\":%zu,\"fp\":%zu,\"pseudo\":%zu,"
		       "\"beyond_window\":%zu,\"complete_live\":%zu,\"records\":%" PRIu64 ",\"patched\":%" PRIu64
		       ",\"fallback\":%" PRIu64 ",\"unwind_ns_avg\":%" PRIu64 ",\"record_bytes_avg\":%" PRIu64
		       ",\"reasons\":{",
		       n_dwarf, n_complete, n_stopped, n_fp, n_pseudo, n_beyond, n_live_complete, ml->stats.records, ml->stats.patched,
		       ml->stats.fallback, ml->stats.timed ? ml->stats.unwind_ns / ml->stats.timed : 0,
		       ml->stats.records ? ml->record_bytes / ml->stats.records : 0);
		{
			bool c = false;
			for (uint32_t k = 0; k < nord; k++) {
				const struct ustack *s = &ml->st.v[order[k]];
				bool dup = false;

				if (s->kind != SK_DWARF || !s->stop)
					continue;
				for (uint32_t j = 0; j < k; j++)
					if (ml->st.v[order[j]].kind == SK_DWARF && ml->st.v[order[j]].stop &&
					    ml->st.v[order[j]].stop_name == s->stop_name)
						dup = true;
				if (dup)
					continue;
				size_t cnt = 0;
				for (uint32_t j = 0; j < nord; j++)
					if (ml->st.v[order[j]].kind == SK_DWARF && ml->st.v[order[j]].stop &&
					    ml->st.v[order[j]].stop_name == s->stop_name)
						cnt++;
				printf("%s", c ? "," : "");
				json_str(s->stop_name);
				printf(":%zu", cnt);
				c = true;
			}
		}
		printf("}},\"queue\":{\"bytes\":%zu,\"peak_records\":%" PRIu64 ",\"dropped\":%" PRIu64 "}",
		       cap_pump_queue_bytes(ml->pump), cap_pump_queue_peak(ml->pump), qdropped);
		ml_print_kwalk(ml, true);
		if (ml->env.freeze) {
			putchar(',');
			freeze_json(&ml->fz, stdout);
		}
		mappings_json(ml->fr.maps);
		frames_modules_json(&ml->fr);
		ml_mem_json(ml->skel->obj, ml->report_outstanding);
		printf("}\n");
	} else if (ml->env.folded) {
		ml_print_folded(ml, order, shown, by_process);
		putchar('\n');
	} else {
		printf("[%d:%d:%d] Top %zu stacks with outstanding allocations:\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec, shown);
		ml->marks_seen = 0;
		for (size_t k = 0; k < shown; k++) {
			const struct ustack *s = &ml->st.v[order[k]];

			if (by_process && (k == 0 || ml->st.v[order[k - 1]].space != s->space))
				printf("%s (%u):\n", ml_proc_comm((uint32_t)s->space), (uint32_t)s->space);
			ml_print_stack_text(ml, order[k]);
		}
		fprint_marks_legend(stdout, "", ml->marks_seen);
		if (ml->env.unwind != ML_UNWIND_FP)
			printf("%s: %zu stacks, %zu complete, %zu stopped early%s%s%s, %zu with frames "
			       "read live after the event; %" PRIu64 " records, %.1f us/unwind, %" PRIu64 " patched\n",
			       ml_unwind_name(ml), n_dwarf, n_complete, n_stopped, *reasons ? " (" : "", reasons,
			       *reasons ? ")" : "", n_live, ml->stats.records,
			       ml->stats.timed ? ml->stats.unwind_ns / 1000.0 / (double)ml->stats.timed : 0.0,
			       ml->stats.patched);
		ml_print_kwalk(ml, false);
		if (ml->env.freeze)
			freeze_summary(&ml->fz, stdout);
		mappings_text(ml->fr.maps);
		if (ml->following) /* a tree: what is held per process, freed at each one's exit */
			mappings_held_text(ml->fr.maps, stdout);
		if (ml->env.unwind == ML_UNWIND_DWARF && (n_live || n_stale))
			/* a rewrite that leaves the sampled words as they were is not seen: the complete
			 * ones among them are marked [live], counted here, never vouched for */
			printf("%zu stacks needed stack memory above the window, read after the event (%zu found "
			       "changed since, cut there; %zu shown complete with [live] frames, checked at %d "
			       "sampled spots of %d bytes only): --unwind=kernel walks them at the event, a larger "
			       "--stack-size (now %u, at most %d) copies more\n",
			       n_live + n_stale, n_stale, n_live_complete, CAP_NSAMPLES, CAP_SAMPLE_BYTES,
			       ml->env.stack_size, CAP_MAX_STACK);
		if (lost > qdropped)
			printf("lost %" PRIu64 " records (%s buffer full)\n", lost - qdropped,
			       ml->env.perfbuf ? "perf" : "ring");
		if (qdropped)
			printf("lost %" PRIu64 " records (record queue full)\n", qdropped);
		if (allocs_full)
			printf("%" PRIu64 " allocations not tracked (allocation table full)\n", allocs_full);
		if (no_pending)
			printf("%" PRIu64 " allocations not tracked (too many nested calls on a thread)\n",
			       no_pending);
		if (combined_full)
			printf("%" PRIu64 " allocations not aggregated (-C table full)\n", combined_full);
		if (ml->exec_gone)
			printf("%" PRIu64 " allocations (%" PRIu64 " bytes) not shown: their image was replaced "
			       "by exec (its memory is gone)\n", ml->exec_gone, ml->exec_gone_bytes);
		if (alloc_lost)
			printf("%" PRIu64 " allocations not counted as made (--allocated: %s buffer full)\n",
			       alloc_lost, ml->env.perfbuf ? "perf" : "ring");
		if (ml->st.full)
			printf("%" PRIu64 " stacks not stored (stack table full)\n", ml->st.full);
	}
	fflush(stdout);
	free(order);
	for (size_t k = 0; k < ml->nfigs; k++)
		ml->figs[k].alloc_bytes = ml->figs[k].alloc_count = 0;
	if (ml->env.unwind != ML_UNWIND_FP)
		ml_ev_prune();
	else
		ml_forget_exited(ml); /* named now: the exited processes' views can go */
}

