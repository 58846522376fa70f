// SPDX-License-Identifier: GPL-2.0-only
/* profile's report: see profile_out.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/intern.h"
#include "runtime/kstack.h"
#include "profile_agg.h"
#include "profile_opts.h"
#include "profile_out.h"
#include "runtime/cpu_budget.h"
#include "runtime/frame_lines.h"
#include "runtime/mapped_files.h"
#include "runtime/mappings.h"
#include "profile_state.h"
#include "runtime/report_fmt.h"
#include "runtime/stack_report.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"
#include "kwalk/kwalk_track.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_track_user.h"
#include "kwalk/kwalk_user.h"
#define kw_status_text kw_status_name
#else
static const char *kw_status_text(unsigned s)
{
	(void)s;
	return "?";
}
#endif

static const char *unwind_name(const struct profile_ctx *pr)
{
	if (pr->opts.freeze)
		return "freeze";
	return pr->opts.unwind == PR_UNWIND_KERNEL ? "kernel" : pr->opts.unwind == PR_UNWIND_DWARF ? "dwarf" : "fp";
}

/* --unwind=kernel: share of the walker's events that fell back to the snapshot, in percent */
static double kw_fallback_pct(const struct profile_ctx *pr)
{
	return pr->prs.kw.events ? 100.0 * (double)pr->prs.kw.snapshot / (double)pr->prs.kw.events : 0.0;
}

void pr_print_header(const struct profile_ctx *pr)
{
	FILE *f = pr->opts.folded || pr->opts.json ? stderr : stdout;
	char what[64];

	if (pr->opts.period)
		snprintf(what, sizeof(what), "every %" PRIu64 " events", pr->opts.period);
	else
		snprintf(what, sizeof(what), "at %" PRIu64 " Hertz", pr->opts.freq);
	fprintf(f, "Sampling %s (%s, %d CPU%s) of %s by %s stack (%s unwinding)", what, pr->prs.event,
		pr->prs.ncpus, pr->prs.ncpus == 1 ? "" : "s",
		pr->opts.command ? "the command" : pr->opts.npids ? "the given processes" : "all threads",
		pr->opts.user && pr->opts.kernel ? "user + kernel" : pr->opts.user ? "user" : "kernel",
		pr->opts.unwind == PR_UNWIND_FP ? "frame-pointer" : unwind_name(pr));
	if (pr->opts.duration)
		fprintf(f, " for %" PRIu64 " secs.\n", pr->opts.duration);
	else
		fprintf(f, "... Hit Ctrl-C to end.\n");
	fflush(f);
}

/* ---- Stacks ------------------------------------------------------------------------------- */

static void print_text(struct profile_ctx *pr, const struct pr_entry *e)
{
	/* in fp mode every user frame is found by frame pointers: no [fp] on each line */
	stack_print_text(e->k.kstack >= 0 ? &pr->st.v[e->k.kstack] : NULL,
			 e->k.ustack >= 0 ? &pr->st.v[e->k.ustack] : NULL, e->k.comm, e->k.pid, e->count,
			 pr->opts.delimiter, pr->opts.unwind != PR_UNWIND_FP, &pr->marks_seen);
}

/* The folded line of an entry, count excluded (bcc profile: "-" whenever both stacks are). */
static void folded_line(const struct profile_ctx *pr, FILE *o, const struct pr_entry *e)
{
	stack_folded_line(o, e->k.comm, e->k.kstack >= 0 ? &pr->st.v[e->k.kstack] : NULL,
			  e->k.ustack >= 0 ? &pr->st.v[e->k.ustack] : NULL, true);
}

/*
 * Folded output: stacks that differ only in addresses (another pc in the same function) have
 * the same line; they are merged, as flame graphs expect. Smallest counts first, as bcc.
 */
static void print_folded_all(struct profile_ctx *pr)
{
	pr_tally_keys(pr); /* the keys' lines joined to those of the intervals (--interval) */
	print_folded_lines(pr->folded.v, pr->folded.n, FOLDED_BY_WEIGHT, pr->opts.json);
	pr->folded.v = NULL;
	pr->folded.n = pr->folded.cap = 0;
}

/* The keys' folded lines added to the run's (pr->folded), lines alike merged. */
static void fold_keys(struct profile_ctx *pr)
{
	if (pr->folded.n + pr->agg.n > pr->folded.cap) {
		pr->folded.cap = (pr->folded.n + pr->agg.n) * 2;
		pr->folded.v = xrealloc(pr->folded.v, pr->folded.cap * sizeof(*pr->folded.v));
	}
	for (size_t i = 0; i < pr->agg.n; i++) {
		struct folded_line *l = &pr->folded.v[pr->folded.n++];
		size_t len = 0;
		FILE *o = open_memstream(&l->text, &len);

		if (!o)
			die("out of memory");
		folded_line(pr, o, &pr->agg.v[i]);
		fclose(o);
		l->weight = pr->agg.v[i].count;
		l->rank = (uint32_t)i;
	}
	pr->folded.n = folded_merge(pr->folded.v, pr->folded.n);
}

static void print_json(const struct profile_ctx *pr, const struct pr_entry *e, uint64_t count)
{
	printf("{\"pid\":%u,", e->k.pid);
	if (pr->opts.interval)
		printf("\"tid\":%u,", e->k.tid);
	printf("\"comm\":");
	json_str(e->k.comm);
	printf(",\"count\":%" PRIu64 ",\"user\":", count);
	stack_print_json(e->k.ustack >= 0 ? &pr->st.v[e->k.ustack] : NULL, true);
	printf(",\"kernel\":");
	stack_print_json(e->k.kstack >= 0 ? &pr->st.v[e->k.kstack] : NULL, false);
	printf("}\n");
}

/* --unwind=kernel: the walker's figures now. */
void pr_kw_stats(struct profile_ctx *pr)
{
#ifdef HAVE_KWALK
	struct kw_stats ks;

	if (!pr->kwt.l)
		return;
	kw_get_stats(pr->kwt.l, &ks);
	if (pr->kwt.obj)
		kw_track_counters(pr->kwt.obj, pr->prs.kw_tc);
	pr->prs.kw_map_bytes = ks.map_bytes;
	pr->prs.kw_table_bytes = ks.table_bytes;
	pr->prs.kw_modules = ks.modules;
	pr->prs.kw_evictions = ks.evictions;
	pr->prs.kw_procs = ks.procs;
	pr->prs.kw_files = ks.files;
	pr->prs.kw_recycled = ks.recycled;
	pr->prs.kw_loads = pr->kwt.loads;
	pr->prs.kw_load_ns = pr->kwt.load_ns;
	pr->prs.kw_mmaps = pr->kwt.mmaps;
	pr->prs.kw_exits = pr->kwt.exits;
	pr->prs.kw_deferred = pr->kwt.deferred;
	pr->prs.kw_files_told = pr->kwt.files;
	pr->prs.kw_files_stale = pr->kwt.files_stale;
	pr->prs.kw_skipped = ks.skipped;
	pr->prs.kw_mmaps_lost = pr->prs.kw_tc[KW_TC_LOST];
#else
	(void)pr;
#endif
}

/*
 * --interval: the interval's keys (their counts are the interval's: keys are dropped at its end),
 * then the interval line with the modules seen since the last (build ids) and what is held. The
 * end's report has no keys of its own: they are in the intervals (with -f, the run's folded lines,
 * merged by name, and the summary's figures are kept across them).
 */
void pr_print_interval(struct profile_ctx *pr, uint64_t seq, uint64_t start_ns, uint64_t end_ns)
{
	const struct module_seen *mods;
	size_t nmods = frames_modules(&pr->fr, &mods);
	uint64_t samples = 0, keys = 0;
	struct timespec rt;

	frames_lines(&pr->fr, NULL, 0); /* --lines: the stacks stored since the last interval */

	for (size_t i = 0; i < pr->agg.n; i++) {
		const struct pr_entry *e = &pr->agg.v[i];

		print_json(pr, e, e->count);
		samples += e->count;
		keys++;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	printf("{\"interval\":{\"seq\":%" PRIu64 ",\"start_unix_ns\":%" PRIu64 ",\"duration_ns\":%" PRIu64
	       ",\"samples\":%" PRIu64 ",\"keys\":%" PRIu64 ",\"frequency\":%" PRIu64 ",\"period\":%" PRIu64
	       ",\"records_lost\":%" PRIu64 ",\"keys_overflow\":%" PRIu64 ",\"stack_table_full\":%" PRIu64
	       ",\"modules\":[", seq,
	       (uint64_t)rt.tv_sec * UINT64_C(1000000000) + (uint64_t)rt.tv_nsec - (end_ns - start_ns),
	       end_ns - start_ns, samples, keys, pr->opts.period ? 0 : pr->opts.freq, pr->opts.period,
	       pr->prs.bpf[PR_CNT_REC_LOST], pr->agg.overflow, pr->st.full);
	print_modules_json(mods + pr->mods_printed, nmods - pr->mods_printed);
	pr->mods_printed = nmods;
	printf("]");
	if (pr->opts.unwind == PR_UNWIND_KERNEL && pr->opts.user) { /* what the walker holds now */
		pr_kw_stats(pr);
		printf(",\"kernel_walk\":{\"events\":%" PRIu64 ",\"fallback\":%" PRIu64 ",\"no_mapping\":%" PRIu64
		       ",\"map_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64 ",\"procs\":%" PRIu64
		       ",\"files\":%" PRIu64 ",\"modules\":%" PRIu64 ",\"evictions\":%" PRIu64 "}",
		       pr->prs.kw.events, pr->prs.kw.snapshot, pr->prs.kw.status[KW_ST_NO_MAPPING],
		       pr->prs.kw_map_bytes, pr->prs.kw_table_bytes, pr->prs.kw_procs, pr->prs.kw_files,
		       pr->prs.kw_modules, pr->prs.kw_evictions);
	}
	/* what is held at the interval's end, before its keys go */
	struct pr_held hd;

	pr_held(pr, &hd);
	pr_held_json(&hd);
	printf("}}\n");
	fflush(stdout);
	pr_tally_keys(pr);
	pr_interval_reset(pr);
}

/* qsort_r: entries by count, smallest first */
static int cmp_count_asc(const void *a, const void *b, void *arg)
{
	const struct pr_entry *v = arg;
	const struct pr_entry *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];

	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* ---- Summary ------------------------------------------------------------------------------- */

static void reason_add(struct pr_reason *r, size_t *nr, const char *name, uint64_t n)
{
	for (size_t i = 0; i < *nr; i++)
		if (r[i].name == name) {
			r[i].n += n;
			return;
		}
	if (*nr < PR_REASONS)
		r[(*nr)++] = (struct pr_reason){ name, n };
}

void pr_tally_keys(struct profile_ctx *pr)
{
	struct pr_tally *t = &pr->tally;

	for (size_t i = 0; i < pr->agg.n; i++) {
		const struct pr_entry *e = &pr->agg.v[i];

		if (e->k.ustack < 0)
			continue;
		const struct ustack *u = &pr->st.v[e->k.ustack];
		t->usamples += e->count;
		if (stack_reaches_bottom(u))
			t->ucomplete += e->count;
		if (u->kind == SK_FP)
			t->ufp += e->count;
		/* stacks cut where the memory above the window changed since the event */
		if (u->kind == SK_DWARF && u->stop_name && !strcmp(u->stop_name, "STALE"))
			t->ustale += e->count;
		if (u->kind == SK_DWARF && u->live)
			t->ulive += e->count;
		if (u->kind == SK_PSEUDO)
			reason_add(t->lost, &t->nlost, u->label, e->count);
		else if (u->stop)
			reason_add(t->stopped, &t->nstopped, u->stop_name, e->count);
	}
	if (pr->opts.folded)
		fold_keys(pr);
}

void pr_report(struct profile_ctx *pr)
{
	uint32_t *order = xcalloc(pr->agg.n + 1, sizeof(*order));

	for (size_t i = 0; i < pr->agg.n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, pr->agg.n, sizeof(*order), cmp_count_asc, pr->agg.v);
	if (pr->opts.json || !pr->opts.folded)
		frames_lines(&pr->fr, NULL, 0);
	for (size_t i = 0; i < pr->agg.n; i++) {
		const struct pr_entry *e = &pr->agg.v[order[i]];

		if (pr->opts.json)
			print_json(pr, e, e->count);
		else if (!pr->opts.folded)
			print_text(pr, e);
	}
	free(order);
	/* the figures of the keys left (none after --interval's last: tallied there) */
	if (pr->opts.folded)
		print_folded_all(pr);
	else
		pr_tally_keys(pr);
	if (!pr->opts.folded && !pr->opts.json)
		fprint_marks_legend(stdout, "    ", pr->marks_seen);
	fflush(stdout);

	const struct pr_tally *t = &pr->tally;
	const struct pr_reason *lost = t->lost, *stopped = t->stopped;
	size_t nlost = t->nlost, nstopped = t->nstopped;
	uint64_t usamples = t->usamples, ucomplete = t->ucomplete, ufp = t->ufp, ulive = t->ulive, ustale = t->ustale;

	struct rusage ru;
	const struct module_seen *mods;
	size_t nmods = frames_modules(&pr->fr, &mods);
	char lostbuf[1024] = "", stopbuf[1024] = "";
	size_t off = 0;

	for (size_t i = 0; i < nlost && off < sizeof(lostbuf) - 128; i++)
		off += (size_t)snprintf(lostbuf + off, sizeof(lostbuf) - off, "%s%s %" PRIu64,
					i ? ", " : "", lost[i].name, lost[i].n);
	off = 0;
	for (size_t i = 0; i < nstopped && off < sizeof(stopbuf) - 128; i++)
		off += (size_t)snprintf(stopbuf + off, sizeof(stopbuf) - off, "%s%s %" PRIu64,
					i ? ", " : "", stopped[i].name, stopped[i].n);
	getrusage(RUSAGE_SELF, &ru);
	double ucpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	double scpu = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	double secs = (double)(pr->prs.end_ns - pr->prs.start_ns) / 1e9;
	double pct = usamples ? 100.0 * (double)ucomplete / (double)usamples : 0.0;

	struct pr_held hd;
	double setup = (double)pr->prs.setup_cpu_ns / 1e9, run = ucpu + scpu - setup;

	pr_held(pr, &hd);
	if (pr->opts.json) {
		printf("{\"summary\":{\"samples\":%" PRIu64 ",\"event\":\"%s\",\"frequency\":%" PRIu64
		       ",\"period\":%" PRIu64 ",\"cpus\":%d,\"duration_ns\":%" PRIu64
		       ",\"start_unix_ns\":%" PRIu64 ",\"unwind\":\"%s\",\"user_samples\":%" PRIu64
		       ",\"user_complete\":%" PRIu64 ",\"user_fp_stacks\":%" PRIu64
		       ",\"fp_frames_in_dwarf\":%" PRIu64 ",\"user_live\":%" PRIu64 ",\"lost\":{",
		       pr->agg.samples, pr->prs.event, pr->opts.period ? 0 : pr->opts.freq, pr->opts.period, pr->prs.ncpus,
		       pr->prs.end_ns - pr->prs.start_ns, (uint64_t)time(NULL) * UINT64_C(1000000000) -
		       (uint64_t)(pr->prs.end_ns - pr->prs.start_ns), unwind_name(pr),
		       usamples, ucomplete, ufp, pr->prs.unw.frames_fp, ulive);
		for (size_t i = 0; i < nlost; i++) {
			printf("%s", i ? "," : "");
			json_str(lost[i].name);
			printf(":%" PRIu64, lost[i].n);
		}
		printf("},\"stopped\":{");
		for (size_t i = 0; i < nstopped; i++) {
			printf("%s", i ? "," : "");
			json_str(stopped[i].name);
			printf(":%" PRIu64, stopped[i].n);
		}
		printf("},\"kernel_lost\":%" PRIu64 ",\"records_lost\":%" PRIu64
		       ",\"stack_read_failed\":%" PRIu64 ",\"keys\":%zu,\"keys_overflow\":%" PRIu64
		       ",\"stacks\":%zu,\"stack_table_full\":%" PRIu64 ",\"unwind_ns_avg\":%" PRIu64
		       ",\"processes\":%" PRIu64 ",\"buffer_bytes\":%" PRIu64 ",\"self\":{\"user_s\":%.3f,\"sys_s\":%.3f,"
		       "\"max_rss_kib\":%ld},\"modules\":[",
		       pr->prs.klost, pr->prs.bpf[PR_CNT_REC_LOST], pr->prs.read_failed, pr->agg.n, pr->agg.overflow, pr->st.n,
		       pr->st.full, pr->prs.unw.timed ? pr->prs.unw.unwind_ns / pr->prs.unw.timed : 0, pr->prs.npids, pr->prs.buffer_bytes, ucpu,
		       scpu, ru.ru_maxrss);
		print_modules_json(mods, nmods);
		printf("]");
		if (pr->opts.perfbuf)
			printf(",\"perf_buffer\":{\"untimed\":%" PRIu64 "}", pr->prs.untimed);
		pr_held_json(&hd);
		printf(",\"cost\":{\"cpu_s\":%.3f,\"setup_s\":%.3f,\"us_per_sample\":%.1f,\"us_per_process\":%.1f,"
		       "\"maps_s\":%.3f,\"budget\":{\"max_cpu_pct\":%u,\"not_unwound\":%" PRIu64 ",\"max_stride\":%u}}",
		       ucpu + scpu, setup, pr->agg.samples ? 1e6 * run / (double)pr->agg.samples : 0.0,
		       pr->prs.forks ? 1e6 * run / (double)pr->prs.forks : 0.0, (double)pr->prs.maps_ns / 1e9,
		       pr->budget.pct, pr->budget.skipped, pr->budget.max_stride);
		if (pr->opts.unwind == PR_UNWIND_KERNEL) {
			printf(",\"kernel_walk\":{");
			kwalk_seen_json(stdout, &pr->prs.kw);
			printf(",\"table_loads\":%" PRIu64 ",\"load_ns\":%" PRIu64 ",\"mmaps\":%" PRIu64 ",\"mmaps_lost\":%" PRIu64
			       ",\"exits\":%" PRIu64 ",\"loads_deferred\":%" PRIu64 ",\"map_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
			       ",\"modules\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"slots_recycled\":%" PRIu64
			       ",\"procs\":%" PRIu64 ",\"files\":%" PRIu64,
			       pr->prs.kw_loads, pr->prs.kw_load_ns, pr->prs.kw_mmaps, pr->prs.kw_mmaps_lost, pr->prs.kw_exits,
			       pr->prs.kw_deferred, pr->prs.kw_map_bytes, pr->prs.kw_table_bytes, pr->prs.kw_modules,
			       pr->prs.kw_evictions, pr->prs.kw_recycled, pr->prs.kw_procs, pr->prs.kw_files);
			/* the BPF side's entries (kwalk_procmap.bpf.h) and samples inside execve */
			printf(",\"bpf_entries\":{\"exec\":%" PRIu64 ",\"fork\":%" PRIu64 ",\"mmap\":%" PRIu64
			       ",\"unknown_file\":%" PRIu64 ",\"not_made\":%" PRIu64 ",\"freed\":%" PRIu64
			       ",\"files_told\":%" PRIu64 ",\"files_not_found\":%" PRIu64 ",\"modules_skipped\":%" PRIu64
			       "},\"in_execve\":{\"walked\":%" PRIu64 ",\"image_gone\":%" PRIu64 "}}",
			       pr->prs.kw_tc[KW_TC_PM_EXEC], pr->prs.kw_tc[KW_TC_PM_FORK], pr->prs.kw_tc[KW_TC_PM_ADD],
			       pr->prs.kw_tc[KW_TC_PM_MISS], pr->prs.kw_tc[KW_TC_PM_FULL], pr->prs.kw_tc[KW_TC_PM_EXIT],
			       pr->prs.kw_files_told, pr->prs.kw_files_stale, pr->prs.kw_skipped,
			       pr->prs.kw_tc[KW_TC_EXEC_WALK], pr->prs.kw_tc[KW_TC_EXEC_GONE]);
		}
		if (pr->kagg.on)
			printf(",\"aggregated\":{\"samples\":%" PRIu64 ",\"counted_in_bpf\":%" PRIu64
			       ",\"map_full\":%" PRIu64 ",\"hold_full\":%" PRIu64 ",\"keys\":%" PRIu64 ",\"drains\":%" PRIu64
			       ",\"no_stack\":%" PRIu64 ",\"drain_bytes\":%" PRIu64 ",\"selected_samples\":%" PRIu64 "}",
			       pr->kagg.events, pr->prs.bpf[PR_CNT_AGG], pr->prs.bpf[PR_CNT_AGG_FULL],
			       kw_drain_hold_full(&pr->kagg), pr->kagg.keys_drained, pr->kagg.drains, pr->kagg.no_stack, pr->kagg.bytes,
			       pr->prs.bpf[PR_CNT_SAMPLES] - pr->prs.bpf[PR_CNT_FILTERED]);
		if (pr->opts.freeze) {
			putchar(',');
			freeze_json(&pr->fz, stdout);
		}
		printf("}}\n");
		fflush(stdout);
	}
	fprintf(stderr,
		"profile: %" PRIu64 " samples in %.1f s (%s, %d CPU%s); user stacks: %" PRIu64
		", %.1f%% complete to _start/__libc_start_main/thread start (%s)%s%s%s%s%s%s",
		pr->agg.samples, secs, pr->prs.event, pr->prs.ncpus, pr->prs.ncpus == 1 ? "" : "s", usamples, pct,
		unwind_name(pr), *lostbuf ? "; lost: " : "", lostbuf,
		*stopbuf ? "; stopped early: " : "", stopbuf, pr->prs.unw.frames_fp ? "; " : "",
		pr->prs.unw.frames_fp ? "frames by frame pointer (no CFI) marked [fp]" : "");
	if (ulive)
		fprintf(stderr, "; %" PRIu64 " with frames read live after the event [live]", ulive);
	if (pr->opts.unwind == PR_UNWIND_KERNEL) {
		fprintf(stderr, "; kernel walker: %" PRIu64 " events, %.1f%% fell back to the snapshot",
			pr->prs.kw.events, kw_fallback_pct(pr));
		for (unsigned k = KW_ST_NO_PROC, c = 0; k < KW_ST_MAX; k++)
			if (pr->prs.kw.status[k])
				fprintf(stderr, "%s%s %" PRIu64, c++ ? ", " : " (", kw_status_text(k),
					pr->prs.kw.status[k]);
		for (unsigned k = KW_ST_NO_PROC; k < KW_ST_MAX; k++)
			if (pr->prs.kw.status[k]) {
				fputc(')', stderr);
				break;
			}
		if (pr->kagg.on)
			fprintf(stderr, "; %" PRIu64 " samples counted in the kernel (%" PRIu64 " keys drained)",
				pr->kagg.events, pr->kagg.keys_drained);
		fprintf(stderr, ", tables %.1f MiB of %.1f MiB of maps",
			(double)pr->prs.kw_table_bytes / 1048576.0, (double)pr->prs.kw_map_bytes / 1048576.0);
	}
	if (ustale)
		fprintf(stderr, "; %" PRIu64 " cut where the stack above the window changed since the event",
			ustale);
	if (pr->opts.unwind == PR_UNWIND_DWARF && (ulive || ustale))
		fprintf(stderr, "; --unwind=kernel walks stacks at the event");
	if (pr->prs.klost)
		fprintf(stderr, "; kernel stacks lost: %" PRIu64, pr->prs.klost);
	if (pr->prs.untimed)
		fprintf(stderr, "; %" PRIu64 " perf-buffer records without a time (in the order of the one "
			"before them)", pr->prs.untimed);
	if (pr->prs.bpf[PR_CNT_REC_LOST])
		fprintf(stderr, "; samples lost (buffer full): %" PRIu64, pr->prs.bpf[PR_CNT_REC_LOST]);
	if (pr->prs.bpf[PR_CNT_FOLLOW_FULL])
		fprintf(stderr, "; %" PRIu64 " children of the command not followed (filter map full)",
			pr->prs.bpf[PR_CNT_FOLLOW_FULL]);
	if (pr->agg.overflow)
		fprintf(stderr, "; %" PRIu64 " samples under [aggregation table full]", pr->agg.overflow);
	if (pr->st.full)
		fprintf(stderr, "; %" PRIu64 " stacks not stored (stack table full)", pr->st.full);
	fprintf(stderr, "\nprofile: self: CPU %.2f s (user %.2f, sys %.2f), max RSS %.1f MiB; %" PRIu64
		" processes, %zu modules seen\n", ucpu + scpu, ucpu, scpu, ru.ru_maxrss / 1024.0,
		pr->prs.npids, nmods);
	pr_held_text(&hd);
	fprintf(stderr, "profile: cost: set-up %.2f s of CPU (BPF load); then %.2f s: %.0f us per sample, %.0f us per new "
		"process, %.1f%% of it on mapping and process records (%.2f s)", setup, run,
		pr->agg.samples ? 1e6 * run / (double)pr->agg.samples : 0.0,
		pr->prs.forks ? 1e6 * run / (double)pr->prs.forks : 0.0,
		run > 0 ? 100.0 * (double)pr->prs.maps_ns / 1e9 / run : 0.0, (double)pr->prs.maps_ns / 1e9);
	if (pr->budget.pct)
		fprintf(stderr, "; --max-cpu %u%%: %" PRIu64 " samples not unwound (1 in %u at most)", pr->budget.pct,
			pr->budget.skipped, pr->budget.max_stride);
	fputc('\n', stderr);
	if (pr->opts.freeze) {
		fputs("profile: ", stderr);
		freeze_summary(&pr->fz, stderr);
	}
}

void pr_held(const struct profile_ctx *pr, struct pr_held *h)
{
	struct mapped_files_stats mf;

	memset(h, 0, sizeof(*h));
	h->processes = mappings_held(pr->fr.maps, &h->view_bytes);
	mapped_files_stats_get(&mf);
	h->files = mf.open;
	h->file_bytes = mf.bytes;
	h->spaces = pr->spaces.n;
	h->forks = pr->prs.forks;
	h->exits = pr->prs.exits;
	h->swept = pr->prs.swept;
	h->stacks = pr->st.n;
	h->keys = pr->agg.n;
	h->stack_bytes = pr->st.bytes + pr->st.n * sizeof(*pr->st.v);
	for (size_t i = 0; i < pr->st.n; i++)
		h->user_stacks += pr->st.v[i].kind != SK_PSEUDO && pr->st.v[i].space != KSTACK_SPACE;
	h->stacks_freed = pr->st.freed;
	h->folded = pr->folded.n;
	h->not_followed = pr->prs.bpf[PR_CNT_FOLLOW_FULL];
	h->modules = frames_modules_held(&pr->fr, &h->module_bytes);
}

void pr_held_json(const struct pr_held *h)
{
	printf(",\"held\":{\"processes\":%" PRIu64 ",\"view_bytes\":%" PRIu64 ",\"files\":%" PRIu64 ",\"file_bytes\":%" PRIu64
	       ",\"spaces\":%" PRIu64 ",\"modules\":%" PRIu64 ",\"module_bytes\":%" PRIu64 ",\"stacks\":%" PRIu64
	       ",\"user_stacks\":%" PRIu64 ",\"stack_bytes\":%" PRIu64 ",\"stacks_freed\":%" PRIu64 ",\"keys\":%" PRIu64
	       ",\"folded_lines\":%" PRIu64 ",\"forks\":%" PRIu64 ",\"exits\":%" PRIu64 ",\"swept\":%" PRIu64 ",\"not_followed\":%" PRIu64 "}",
	       h->processes, h->view_bytes, h->files, h->file_bytes, h->spaces, h->modules, h->module_bytes, h->stacks, h->user_stacks,
	       h->stack_bytes, h->stacks_freed, h->keys, h->folded, h->forks, h->exits, h->swept, h->not_followed);
}

void pr_held_text(const struct pr_held *h)
{
	fprintf(stderr, "profile: held: %" PRIu64 " processes' mappings (%.1f KiB), %" PRIu64 " files open, %" PRIu64
		" address spaces, %" PRIu64 " modules cached (%.1f MiB); %" PRIu64 " stacks (%.1f KiB; %" PRIu64 " freed), %" PRIu64
		" keys, %" PRIu64 " folded lines; %" PRIu64 " forks and %" PRIu64 " exits applied, %" PRIu64
		" gone without an exit record (lost)\n", h->processes, (double)h->view_bytes / 1024.0, h->files, h->spaces,
		h->modules, (double)h->module_bytes / 1048576.0, h->stacks, (double)h->stack_bytes / 1024.0, h->stacks_freed,
		h->keys, h->folded, h->forks, h->exits, h->swept);
}
