// SPDX-License-Identifier: GPL-2.0-only
/* memleak's report writers: a stack as text, folded or JSON (memleak_print.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memleak_opts.h"
#include "memleak_print.h"
#include "memleak_procs.h"
#include "memleak_records.h"
#include "memleak_state.h"
#include "memleak.skel.h"
#include "runtime/report_fmt.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_track.h"
#include "kwalk/kwalk_user.h"
#endif

const char *ml_unwind_name(const struct memleak_ctx *ml)
{
	if (ml->env.unwind == ML_UNWIND_DWARF && ml->env.freeze)
		return "freeze";
	return ml->env.unwind == ML_UNWIND_KERNEL ? "kernel" : ml->env.unwind == ML_UNWIND_DWARF ? "dwarf" : "fp";
}

/* --unwind=kernel: what the walker's events were made of, and the tables' memory */
void ml_print_kwalk(const struct memleak_ctx *ml, bool json)
{
#ifdef HAVE_KWALK
	struct kw_stats ks;
	uint64_t tc[KW_TC_MAX];
	double pct = ml->kws.events ? 100.0 * (double)ml->kws.snapshot / (double)ml->kws.events : 0.0;
	bool c = false;

	if (!ml->kwt.l)
		return;
	kw_get_stats(ml->kwt.l, &ks);
	kw_track_counters(ml->skel->obj, tc);
	if (json) {
		printf(",\"kernel_walk\":{\"events\":%" PRIu64 ",\"from_kernel\":%" PRIu64
		       ",\"fallback\":%" PRIu64 ",\"fallback_pct\":%.2f,\"bad\":%" PRIu64 ",\"by_status\":{",
		       ml->kws.events, ml->kws.kernel, ml->kws.snapshot, pct, ml->kws.bad);
		for (unsigned k = 0; k < KW_ST_MAX; k++)
			if (ml->kws.status[k]) {
				printf("%s\"%s\":%" PRIu64, c ? "," : "", kw_status_name(k), ml->kws.status[k]);
				c = true;
			}
		printf("},\"table_loads\":%" PRIu64 ",\"mmaps\":%" PRIu64 ",\"mmaps_lost\":%" PRIu64
		       ",\"exits\":%" PRIu64 ",\"map_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
		       ",\"modules\":%" PRIu64 ",\"evictions\":%" PRIu64,
		       ml->kwt.loads, ml->kwt.mmaps, tc[KW_TC_LOST], ml->kwt.exits, ks.map_bytes, ks.table_bytes,
		       ks.modules, ks.evictions);
		/* the BPF side's process entries (kwalk_procmap.bpf.h): made at exec and fork, freed
		 * at the last thread's exit; procs is what kw_procs holds now */
		printf(",\"procs\":%" PRIu64 ",\"bpf_entries\":{\"exec\":%" PRIu64 ",\"fork\":%" PRIu64
		       ",\"mmap\":%" PRIu64 ",\"unknown_file\":%" PRIu64 ",\"not_made\":%" PRIu64
		       ",\"freed\":%" PRIu64 ",\"files_told\":%" PRIu64 ",\"files_not_found\":%" PRIu64 "}}",
		       ks.procs, tc[KW_TC_PM_EXEC], tc[KW_TC_PM_FORK], tc[KW_TC_PM_ADD], tc[KW_TC_PM_MISS],
		       tc[KW_TC_PM_FULL], tc[KW_TC_PM_EXIT], ml->kwt.files, ml->kwt.files_stale);
		return;
	}
	printf("kernel walker: %" PRIu64 " events, %.1f%% fell back to the snapshot", ml->kws.events, pct);
	for (unsigned k = KW_ST_NO_PROC; k < KW_ST_MAX; k++)
		if (ml->kws.status[k]) {
			printf("%s%s %" PRIu64, c ? ", " : " (", kw_status_name(k), ml->kws.status[k]);
			c = true;
		}
	printf("%s; tables %.1f MiB of %.1f MiB of maps, %" PRIu64 " modules\n", c ? ")" : "",
	       (double)ks.table_bytes / 1048576.0, (double)ks.map_bytes / 1048576.0, ks.modules);
#else
	(void)ml;
	(void)json;
#endif
}

void ml_allocs_push(struct memleak_ctx *ml, uint64_t addr, const struct ml_alloc_info *info)
{
	if (ml->allocs_n == ml->allocs_cap) {
		ml->allocs_cap = ml->allocs_cap ? ml->allocs_cap * 2 : 4096;
		ml->allocs_v = xrealloc(ml->allocs_v, ml->allocs_cap * sizeof(*ml->allocs_v));
	}
	ml->allocs_v[ml->allocs_n].addr = addr;
	ml->allocs_v[ml->allocs_n].info = *info;
	ml->allocs_v[ml->allocs_n].next = -1;
	ml->allocs_n++;
}

void ml_print_stack_text(struct memleak_ctx *ml, uint32_t idx)
{
	const struct ustack *s = &ml->st.v[idx];
	const struct ml_stack_fig *g = &ml->figs[idx];
	/* in fp mode every frame is found by frame pointers: no [fp] on each line */
	bool fp_marks = ml->env.unwind != ML_UNWIND_FP;
	size_t i;

	printf("%" PRIu64 " bytes in %" PRIu64 " allocations from stack", g->bytes, g->count);
	if (ml->env.allocated)
		printf(" (made since the last report: %" PRIu64 " bytes in %" PRIu64 " allocations)",
		       g->alloc_bytes, g->alloc_count);
	putchar('\n');
	if (ml->env.show_allocs && !ml->env.combined)
		for (int64_t a = g->first_alloc; a >= 0; a = ml->allocs_v[a].next)
			printf("\taddr = %#" PRIx64 " size = %" PRIu64 "\n", ml->allocs_v[a].addr,
			       (uint64_t)ml->allocs_v[a].info.size);
	for (i = 0; i < s->nframes; i++)
		print_frame_text(i, &s->frames[i], fp_marks, &ml->marks_seen);
	if (s->label)
		printf("\t%zu [<%016x>] %s\n", i, 0, s->label);
}

/* The frames of a folded line, root first (without the weight). */
static void folded_frames(FILE *out, const struct ustack *s, bool by_process)
{
	bool sep = false;

	if (by_process) {
		fprintf(out, "%s (%u)", ml_proc_comm((uint32_t)s->space), (uint32_t)s->space);
		sep = true;
	}
	if (s->label) {
		fprintf(out, "%s%s", sep ? ";" : "", s->label);
		sep = true;
	}
	for (size_t i = s->nframes; i-- > 0;) {
		if (sep)
			fputc(';', out);
		sep = true;
		fprint_frame_folded(out, &s->frames[i]);
	}
}

/* Stacks that fold to the same line (same names, other pcs) are one line, weights summed. */
void ml_print_folded(const struct memleak_ctx *ml, const uint32_t *order, size_t shown,
		     bool by_process)
{
	struct folded_line *v = xcalloc(shown, sizeof(*v));

	for (size_t k = 0; k < shown; k++) {
		const struct ustack *s = &ml->st.v[order[k]];
		size_t len = 0;
		FILE *m = open_memstream(&v[k].text, &len);

		if (!m)
			die("out of memory");
		folded_frames(m, s, by_process);
		fclose(m);
		v[k].weight = ml->env.weight_allocs ? ml->figs[order[k]].count : ml->figs[order[k]].bytes;
		v[k].rank = (uint32_t)k;
	}
	print_folded_lines(v, shown, FOLDED_BY_RANK, false);
}

void ml_print_stack_json(const struct memleak_ctx *ml, uint32_t idx)
{
	const struct ustack *s = &ml->st.v[idx];
	const struct ml_stack_fig *g = &ml->figs[idx];

	printf("{\"bytes\":%" PRIu64 ",\"allocations\":%" PRIu64 ",", g->bytes, g->count);
	if (ml->env.allocated)
		printf("\"alloc_bytes\":%" PRIu64 ",\"alloc_allocations\":%" PRIu64 ",", g->alloc_bytes,
		       g->alloc_count);
	if (ml->following) {
		printf("\"pid\":%u,\"comm\":", (uint32_t)s->space);
		json_str(ml_proc_comm((uint32_t)s->space));
		putchar(',');
	}
	printf("\"frames\":[");
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct uframe *f = &s->frames[i];

		if (i)
			putchar(',');
		print_frame_json(f);
	}
	printf("],\"kind\":\"%s\",", s->kind == SK_DWARF ? "dwarf" : s->kind == SK_FP ? "fp" : "none");
	if (s->kind == SK_DWARF)
		printf("\"complete\":%s,\"stop\":", s->stop == 0 ? "true" : "false");
	else
		printf("\"complete\":null,\"stop\":");
	if (s->kind == SK_DWARF)
		json_str(s->stop ? s->stop_name : "OK");
	else if (s->kind == SK_FP)
		json_str("FP");
	else
		json_str("NONE");
	if (s->kind == SK_DWARF) {
		uint32_t live = 0;

		for (uint32_t i = 0; i < s->nframes; i++)
			live += !!(s->frames[i].flags & UF_LIVE);
		printf(",\"beyond_window\":%s,\"live_frames\":%u", s->beyond ? "true" : "false", live);
	}
	if (s->label) {
		printf(",\"reason\":");
		json_str(s->label);
	}
	if (ml->env.show_allocs && !ml->env.combined) {
		printf(",\"allocs\":[");
		bool c = false;
		for (int64_t a = g->first_alloc; a >= 0; a = ml->allocs_v[a].next, c = true)
			printf("%s{\"addr\":\"%#" PRIx64 "\",\"size\":%" PRIu64 "}", c ? "," : "",
			       ml->allocs_v[a].addr, (uint64_t)ml->allocs_v[a].info.size);
		putchar(']');
	}
	putchar('}');
}
