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
#include "runtime/mappings.h"
#include "memleak_allocs.h"
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
#include "runtime/tool_util.h"

static uint64_t counter_sum(struct bpf_map *m, uint32_t idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = xcalloc(ncpu, sizeof(*v)), sum = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(m), &idx, v) == 0)
		for (int c = 0; c < ncpu; c++)
			sum += v[c];
	free(v);
	return sum;
}

static int cmp_stack_bytes(const void *a, const void *b)
{
	const struct ustack *x = &st.v[*(const uint32_t *)a], *y = &st.v[*(const uint32_t *)b];

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
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

size_t report_outstanding; /* entries of the allocs map at the last report */

struct report_walk {
	uint64_t now, older_ns, exec_cut;
};

/* One outstanding allocation of the map walk: counted under its stack (-a: also listed). */
static void report_alloc(void *ctx, uint64_t addr, const struct ml_alloc_info *info)
{
	struct report_walk *w = ctx;

	if (info->ts < w->exec_cut) {
		/* allocated by the image the target replaced with exec */
		bpf_map_delete_elem(bpf_map__fd(skel->maps.allocs), &addr);
		return;
	}
	if (following) {
		/* the key has the process's slot on top of the address */
		uint32_t slot = (uint32_t)(addr >> FOLLOW_SLOT_SHIFT);
		const struct follow_slot *fs = ml_slot_info(slot);

		if (fs && (fs->flags & FOLLOW_F_EXECED)) {
			/* allocated by an image its process replaced with exec */
			bpf_map_delete_elem(bpf_map__fd(skel->maps.allocs), &addr);
			return;
		}
		stack_pid = fs ? fs->tgid : 0;
		addr &= (1ull << FOLLOW_SLOT_SHIFT) - 1;
	}
	int64_t idx = ml_key_stack(info->key); /* keeps its event, even when too young to show */
	stack_pid = 0;
	if (!env.combined && w->now > info->ts && w->now - info->ts < w->older_ns)
		return;
	if (info->ts > w->now)
		return;
	struct ustack *s = &st.v[idx];
	s->bytes += info->size;
	s->count++;
	if (env.show_allocs) {
		ml_allocs_push(addr, info);
		allocs_v[allocs_n - 1].next = s->first_alloc;
		s->first_alloc = (int64_t)(allocs_n - 1);
	}
}

void ml_report(void)
{
	uint64_t now = mono_ns(), older_ns = env.older_ms * 1000000ull;
	uint64_t exec_cut = skel->bss->exec_ns;
	uint32_t *order = NULL, nord = 0;
	uint64_t capc[CAP_CNT_MAX], lost;
	struct tm tm;
	time_t t;

	for (size_t k = 0; k < st.n; k++) {
		st.v[k].bytes = st.v[k].count = 0;
		st.v[k].first_alloc = -1;
	}
	ml_slots_forget();
	ml_drain_reset();

	if (env.combined && env.unwind == ML_UNWIND_FP) {
		/* the per-stack aggregate kept in BPF, iterated from the first key */
		int fd = bpf_map__fd(skel->maps.combined_allocs);
		uint64_t key, next;
		void *prev = NULL;

		ml_drain();
		allocs_n = 0;
		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			struct ml_combined c;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(fd, &key, &c) || !c.count)
				continue; /* fully freed: not shown */
			int64_t idx = ml_key_stack(key);
			st.v[idx].bytes += c.total_size;
			st.v[idx].count += c.count;
		}
	} else {
		/* drain, then walk the map in chunks (a record still missing is drained then) */
		struct report_walk w = { .now = now, .older_ns = older_ns, .exec_cut = exec_cut };

		ml_drain();
		allocs_n = 0;
		report_outstanding = ml_allocs_walk(bpf_map__fd(skel->maps.allocs), report_alloc, &w);
	}

	/* stacks with outstanding allocations, by bytes */
	order = xcalloc(st.n, sizeof(*order));
	for (size_t k = 0; k < st.n; k++)
		if (st.v[k].count)
			order[nord++] = (uint32_t)k;
	qsort(order, nord, sizeof(*order), cmp_stack_bytes);
	/* -a lists allocations in the order the map gave them */
	for (uint32_t k = 0; k < nord; k++) {
		struct ustack *s = &st.v[order[k]];
		int64_t prev = -1, cur = s->first_alloc;

		while (cur >= 0) {
			int64_t nx = allocs_v[cur].next;

			allocs_v[cur].next = prev;
			prev = cur;
			cur = nx;
		}
		s->first_alloc = prev;
	}
	size_t shown = nord < env.top ? nord : env.top;
	bool by_process = false;

	if (env.folded && !env.top_given)
		shown = nord; /* a flame graph needs every stack */
	if (following) {
		/* more than one process: group the stacks shown by process, the largest stack's first */
		for (size_t k = 1; k < shown && !by_process; k++)
			by_process = st.v[order[k]].space != st.v[order[0]].space;
		if (by_process) {
			struct group_key *g = xcalloc(shown, sizeof(*g));

			for (size_t k = 0; k < shown; k++)
				g[k] = (struct group_key){ (uint32_t)st.v[order[k]].space, (uint32_t)k, 0,
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

	dwunw_cap_counters(skel->obj, capc);
	lost = capc[CAP_CNT_OUTPUT_FAILED];
	if (cap_pump_reader_lost(ml_pump) > lost)
		lost = cap_pump_reader_lost(ml_pump);
	uint64_t qdropped = cap_pump_dropped(ml_pump);
	lost += qdropped;
	uint64_t allocs_full = counter_sum(skel->maps.ml_counters, ML_CNT_ALLOCS_FULL);
	uint64_t no_pending = counter_sum(skel->maps.ml_counters, ML_CNT_NO_PENDING);
	uint64_t combined_full = counter_sum(skel->maps.ml_counters, ML_CNT_COMBINED_FULL);

	/* unwind summary over the stacks shown in this report's aggregate */
	size_t n_dwarf = 0, n_complete = 0, n_stopped = 0, n_fp = 0, n_pseudo = 0, n_beyond = 0, n_stale = 0;
	size_t n_live_complete = 0; /* shown complete on memory read live: only spot-checked */
	char reasons[512] = "";
	{
		const char *rname[32];
		size_t rcount[32], nr = 0;

		for (uint32_t k = 0; k < nord; k++) {
			const struct ustack *s = &st.v[order[k]];

			if (s->kind == SK_FP) {
				n_fp++;
			} else if (s->kind == SK_PSEUDO) {
				n_pseudo++;
			} else {
				n_dwarf++;
				n_beyond += s->beyond;
				if (!s->stop) {
					n_complete++;
					n_live_complete += s->beyond;
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

	t = time(NULL);
	localtime_r(&t, &tm);
	if (env.json) {
		printf("{\"time\":\"%d:%d:%d\",\"timestamp\":%lld,\"pid\":%d,\"unwind_mode\":\"%s\",\"stacks\":[",
		       tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)t, target_pid,
		       ml_unwind_name());
		for (size_t k = 0; k < shown; k++) {
			if (k)
				putchar(',');
			ml_print_stack_json(&st.v[order[k]]);
		}
		printf("],\"lost\":%" PRIu64 ",\"untracked\":{\"allocs_full\":%" PRIu64
		       ",\"no_pending\":%" PRIu64 ",\"combined_full\":%" PRIu64 ",\"stack_table_full\":%" PRIu64 "}",
		       lost, allocs_full, no_pending, combined_full, st.full);
		printf(",\"unwind\":{\"stacks\":%zu,\"complete\":%zu,\"stopped\":%zu,\"fp\":%zu,\"pseudo\":%zu,"
		       "\"beyond_window\":%zu,\"complete_live\":%zu,\"records\":%" PRIu64 ",\"patched\":%" PRIu64
		       ",\"fallback\":%" PRIu64 ",\"unwind_ns_avg\":%" PRIu64 ",\"record_bytes_avg\":%" PRIu64
		       ",\"reasons\":{",
		       n_dwarf, n_complete, n_stopped, n_fp, n_pseudo, n_beyond, n_live_complete, ml_stats.records, ml_stats.patched,
		       ml_stats.fallback, ml_stats.timed ? ml_stats.unwind_ns / ml_stats.timed : 0,
		       ml_stats.records ? ml_record_bytes / ml_stats.records : 0);
		{
			bool c = false;
			for (uint32_t k = 0; k < nord; k++) {
				const struct ustack *s = &st.v[order[k]];
				bool dup = false;

				if (s->kind != SK_DWARF || !s->stop)
					continue;
				for (uint32_t j = 0; j < k; j++)
					if (st.v[order[j]].kind == SK_DWARF && st.v[order[j]].stop &&
					    st.v[order[j]].stop_name == s->stop_name)
						dup = true;
				if (dup)
					continue;
				size_t cnt = 0;
				for (uint32_t j = 0; j < nord; j++)
					if (st.v[order[j]].kind == SK_DWARF && st.v[order[j]].stop &&
					    st.v[order[j]].stop_name == s->stop_name)
						cnt++;
				printf("%s", c ? "," : "");
				json_str(s->stop_name);
				printf(":%zu", cnt);
				c = true;
			}
		}
		printf("}},\"queue\":{\"bytes\":%zu,\"peak_records\":%" PRIu64 ",\"dropped\":%" PRIu64 "}",
		       cap_pump_queue_bytes(ml_pump), cap_pump_queue_peak(ml_pump), qdropped);
		ml_print_kwalk(true);
		mappings_json();
		ml_mem_json(skel->obj, report_outstanding);
		printf("}\n");
	} else if (env.folded) {
		ml_print_folded(order, shown, by_process);
		putchar('\n');
	} else {
		printf("[%d:%d:%d] Top %zu stacks with outstanding allocations:\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec, shown);
		marks_seen = 0;
		for (size_t k = 0; k < shown; k++) {
			const struct ustack *s = &st.v[order[k]];

			if (by_process && (k == 0 || st.v[order[k - 1]].space != s->space))
				printf("%s (%u):\n", ml_proc_comm((uint32_t)s->space), (uint32_t)s->space);
			ml_print_stack_text(s);
		}
		fprint_marks_legend(stdout, "", marks_seen);
		if (env.unwind != ML_UNWIND_FP)
			printf("%s: %zu stacks, %zu complete, %zu stopped early%s%s%s, %zu with frames "
			       "read live after the event; %" PRIu64 " records, %.1f us/unwind, %" PRIu64 " patched\n",
			       ml_unwind_name(), n_dwarf, n_complete, n_stopped, *reasons ? " (" : "", reasons,
			       *reasons ? ")" : "", n_beyond, ml_stats.records,
			       ml_stats.timed ? ml_stats.unwind_ns / 1000.0 / (double)ml_stats.timed : 0.0,
			       ml_stats.patched);
		ml_print_kwalk(false);
		mappings_text();
		if (env.unwind == ML_UNWIND_DWARF && (n_beyond || n_stale))
			/* a rewrite that leaves the sampled words as they were is not seen: the complete
			 * ones among them are marked [live], counted here, never vouched for */
			printf("%zu stacks needed stack memory above the window, read after the event (%zu found "
			       "changed since, cut there; %zu shown complete with [live] frames, checked at %d "
			       "sampled spots of %d bytes only): --unwind=kernel walks them at the event, a larger "
			       "--stack-size (now %u, at most %d) copies more\n",
			       n_beyond + n_stale, n_stale, n_live_complete, CAP_NSAMPLES, CAP_SAMPLE_BYTES,
			       env.stack_size, CAP_MAX_STACK);
		if (lost > qdropped)
			printf("lost %" PRIu64 " records (%s buffer full)\n", lost - qdropped,
			       env.perfbuf ? "perf" : "ring");
		if (qdropped)
			printf("lost %" PRIu64 " records (record queue full)\n", qdropped);
		if (allocs_full)
			printf("%" PRIu64 " allocations not tracked (allocation table full)\n", allocs_full);
		if (no_pending)
			printf("%" PRIu64 " allocations not tracked (too many nested calls on a thread)\n",
			       no_pending);
		if (combined_full)
			printf("%" PRIu64 " allocations not aggregated (-C table full)\n", combined_full);
		if (st.full)
			printf("%" PRIu64 " stacks not stored (stack table full)\n", st.full);
	}
	fflush(stdout);
	free(order);
	if (env.unwind != ML_UNWIND_FP)
		ml_ev_prune();
}

