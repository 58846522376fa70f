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
#include "profile_agg.h"
#include "profile_opts.h"
#include "profile_out.h"
#include "runtime/report_fmt.h"
#include "runtime/stack_report.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_user.h"
#define kw_status_text kw_status_name
#else
static const char *kw_status_text(unsigned s)
{
	(void)s;
	return "?";
}
#endif

/* ---- Processes seen ---------------------------------------------------------------------- */

static struct {
	uint32_t *v;           /* pid + 1 */
	size_t cap;
} pids;

void pr_note_pid(uint32_t pid)
{
	size_t i;

	if (prs.npids * 2 + 2 > pids.cap) {
		size_t ncap = pids.cap ? pids.cap * 2 : 256;
		uint32_t *nv = xcalloc(ncap, sizeof(*nv));

		for (size_t k = 0; k < pids.cap; k++)
			if (pids.v[k]) {
				for (i = hash64(0, pids.v[k]) & (ncap - 1); nv[i]; i = (i + 1) & (ncap - 1))
					;
				nv[i] = pids.v[k];
			}
		free(pids.v);
		pids.v = nv;
		pids.cap = ncap;
	}
	for (i = hash64(0, pid + 1) & (pids.cap - 1); pids.v[i]; i = (i + 1) & (pids.cap - 1))
		if (pids.v[i] == pid + 1)
			return;
	pids.v[i] = pid + 1;
	prs.npids++;
}

void pr_counters(struct bpf_map *m)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = xcalloc((size_t)ncpu, sizeof(*v));

	for (uint32_t k = 0; k < PR_CNT_MAX && k < 8; k++) {
		prs.bpf[k] = 0;
		if (bpf_map_lookup_elem(bpf_map__fd(m), &k, v) == 0)
			for (int c = 0; c < ncpu; c++)
				prs.bpf[k] += v[c];
	}
	free(v);
}

static const char *unwind_name(void)
{
	return opts.unwind == PR_UNWIND_KERNEL ? "kernel" : opts.unwind == PR_UNWIND_DWARF ? "dwarf" : "fp";
}

/* --unwind=kernel: share of the walker's events that fell back to the snapshot, in percent */
static double kw_fallback_pct(void)
{
	return prs.kw.events ? 100.0 * (double)prs.kw.snapshot / (double)prs.kw.events : 0.0;
}

void pr_print_header(void)
{
	FILE *f = opts.folded || opts.json ? stderr : stdout;
	char what[64];

	if (opts.period)
		snprintf(what, sizeof(what), "every %" PRIu64 " events", opts.period);
	else
		snprintf(what, sizeof(what), "at %" PRIu64 " Hertz", opts.freq);
	fprintf(f, "Sampling %s (%s, %d CPU%s) of %s by %s stack (%s unwinding)", what, prs.event,
		prs.ncpus, prs.ncpus == 1 ? "" : "s",
		opts.command ? "the command" : opts.npids ? "the given processes" : "all threads",
		opts.user && opts.kernel ? "user + kernel" : opts.user ? "user" : "kernel",
		opts.unwind == PR_UNWIND_FP ? "frame-pointer" : unwind_name());
	if (opts.duration)
		fprintf(f, " for %" PRIu64 " secs.\n", opts.duration);
	else
		fprintf(f, "... Hit Ctrl-C to end.\n");
	fflush(f);
}

/* ---- Stacks ------------------------------------------------------------------------------- */

/* The markers shown in the text report (their legend follows it). */
static uint32_t marks_seen;

static void print_text(const struct pr_entry *e)
{
	/* in fp mode every user frame is found by frame pointers: no [fp] on each line */
	stack_print_text(e->k.kstack >= 0 ? &st.v[e->k.kstack] : NULL,
			 e->k.ustack >= 0 ? &st.v[e->k.ustack] : NULL, e->k.comm, e->k.pid, e->count,
			 opts.delimiter, opts.unwind != PR_UNWIND_FP, &marks_seen);
}

/* The folded line of an entry, count excluded (bcc profile: "-" whenever both stacks are). */
static void folded_line(FILE *o, const struct pr_entry *e)
{
	stack_folded_line(o, e->k.comm, e->k.kstack >= 0 ? &st.v[e->k.kstack] : NULL,
			  e->k.ustack >= 0 ? &st.v[e->k.ustack] : NULL, true);
}

/*
 * Folded output: stacks that differ only in addresses (another pc in the same function) have
 * the same line; they are merged, as flame graphs expect. Smallest counts first, as bcc.
 */
static void print_folded_all(void)
{
	struct folded_line *v = xcalloc(agg.n, sizeof(*v));

	for (size_t i = 0; i < agg.n; i++) {
		size_t len = 0;
		FILE *o = open_memstream(&v[i].text, &len);

		if (!o)
			die("out of memory");
		folded_line(o, &agg.v[i]);
		fclose(o);
		v[i].weight = agg.v[i].count;
		v[i].rank = (uint32_t)i;
	}
	print_folded_lines(v, agg.n, FOLDED_BY_WEIGHT);
}

static void print_json(const struct pr_entry *e)
{
	printf("{\"pid\":%u,\"comm\":", e->k.pid);
	json_str(e->k.comm);
	printf(",\"count\":%" PRIu64 ",\"user\":", e->count);
	stack_print_json(e->k.ustack >= 0 ? &st.v[e->k.ustack] : NULL, true);
	printf(",\"kernel\":");
	stack_print_json(e->k.kstack >= 0 ? &st.v[e->k.kstack] : NULL, false);
	printf("}\n");
}

static int cmp_count_asc(const void *a, const void *b)
{
	const struct pr_entry *x = &agg.v[*(const uint32_t *)a], *y = &agg.v[*(const uint32_t *)b];

	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* ---- Summary ------------------------------------------------------------------------------- */

struct reason {
	const char *name;
	uint64_t n;
};

static void reason_add(struct reason *r, size_t *nr, size_t max, const char *name, uint64_t n)
{
	for (size_t i = 0; i < *nr; i++)
		if (r[i].name == name) {
			r[i].n += n;
			return;
		}
	if (*nr < max)
		r[(*nr)++] = (struct reason){ name, n };
}

void pr_report(void)
{
	uint32_t *order = xcalloc(agg.n, sizeof(*order));
	struct reason lost[32], stopped[32];
	size_t nlost = 0, nstopped = 0;
	uint64_t usamples = 0, ucomplete = 0, ufp = 0, ulive = 0, ustale = 0;

	for (size_t i = 0; i < agg.n; i++)
		order[i] = (uint32_t)i;
	qsort(order, agg.n, sizeof(*order), cmp_count_asc);
	for (size_t i = 0; i < agg.n; i++) {
		const struct pr_entry *e = &agg.v[order[i]];

		if (opts.json)
			print_json(e);
		else if (!opts.folded)
			print_text(e);
		if (e->k.ustack < 0)
			continue;
		const struct ustack *u = &st.v[e->k.ustack];
		usamples += e->count;
		if (stack_reaches_bottom(u))
			ucomplete += e->count;
		if (u->kind == SK_FP)
			ufp += e->count;
		/* stacks cut where the memory above the window changed since the event */
		if (u->kind == SK_DWARF && u->stop_name && !strcmp(u->stop_name, "STALE"))
			ustale += e->count;
		if (u->kind == SK_DWARF && u->beyond)
			ulive += e->count;
		if (u->kind == SK_PSEUDO)
			reason_add(lost, &nlost, 32, u->label, e->count);
		else if (u->stop)
			reason_add(stopped, &nstopped, 32, u->stop_name, e->count);
	}
	free(order);
	if (opts.folded)
		print_folded_all();
	else if (!opts.json)
		fprint_marks_legend(stdout, "    ", marks_seen);
	fflush(stdout);

	struct rusage ru;
	const struct module_seen *mods;
	size_t nmods = frames_modules(&mods);
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
	double secs = (double)(prs.end_ns - prs.start_ns) / 1e9;
	double pct = usamples ? 100.0 * (double)ucomplete / (double)usamples : 0.0;

	if (opts.json) {
		printf("{\"summary\":{\"samples\":%" PRIu64 ",\"event\":\"%s\",\"frequency\":%" PRIu64
		       ",\"period\":%" PRIu64 ",\"cpus\":%d,\"duration_ns\":%" PRIu64
		       ",\"start_unix_ns\":%" PRIu64 ",\"unwind\":\"%s\",\"user_samples\":%" PRIu64
		       ",\"user_complete\":%" PRIu64 ",\"user_fp_stacks\":%" PRIu64
		       ",\"fp_frames_in_dwarf\":%" PRIu64 ",\"user_live\":%" PRIu64 ",\"lost\":{",
		       agg.samples, prs.event, opts.period ? 0 : opts.freq, opts.period, prs.ncpus,
		       prs.end_ns - prs.start_ns, (uint64_t)time(NULL) * UINT64_C(1000000000) -
		       (uint64_t)(prs.end_ns - prs.start_ns), unwind_name(),
		       usamples, ucomplete, ufp, prs.unw.frames_fp, ulive);
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
		       "\"max_rss_kib\":%ld}",
		       prs.klost, prs.bpf[PR_CNT_REC_LOST], prs.read_failed, agg.n, agg.overflow, st.n,
		       st.full, prs.unw.timed ? prs.unw.unwind_ns / prs.unw.timed : 0, prs.npids, prs.buffer_bytes, ucpu,
		       scpu, ru.ru_maxrss);
		print_modules_json();
		if (opts.unwind == PR_UNWIND_KERNEL) {
			printf(",\"kernel_walk\":{\"events\":%" PRIu64 ",\"from_kernel\":%" PRIu64
			       ",\"fallback\":%" PRIu64 ",\"fallback_pct\":%.2f,\"bad\":%" PRIu64
			       ",\"by_status\":{", prs.kw.events, prs.kw.kernel, prs.kw.snapshot,
			       kw_fallback_pct(), prs.kw.bad);
			bool c = false;
			for (unsigned k = 0; k < KW_ST_MAX; k++)
				if (prs.kw.status[k]) {
					printf("%s\"%s\":%" PRIu64, c ? "," : "", kw_status_text(k),
					       prs.kw.status[k]);
					c = true;
				}
			printf("},\"table_loads\":%" PRIu64 ",\"mmaps\":%" PRIu64 ",\"mmaps_lost\":%" PRIu64
			       ",\"exits\":%" PRIu64 ",\"loads_deferred\":%" PRIu64 ",\"map_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
			       ",\"modules\":%" PRIu64 ",\"evictions\":%" PRIu64 "}",
			       prs.kw_loads, prs.kw_mmaps, prs.kw_mmaps_lost, prs.kw_exits, prs.kw_deferred,
			       prs.kw_map_bytes, prs.kw_table_bytes, prs.kw_modules, prs.kw_evictions);
		}
		printf("}}\n");
		fflush(stdout);
	}
	fprintf(stderr,
		"profile: %" PRIu64 " samples in %.1f s (%s, %d CPU%s); user stacks: %" PRIu64
		", %.1f%% complete to _start/__libc_start_main/thread start (%s)%s%s%s%s%s%s",
		agg.samples, secs, prs.event, prs.ncpus, prs.ncpus == 1 ? "" : "s", usamples, pct,
		unwind_name(), *lostbuf ? "; lost: " : "", lostbuf,
		*stopbuf ? "; stopped early: " : "", stopbuf, prs.unw.frames_fp ? "; " : "",
		prs.unw.frames_fp ? "frames by frame pointer (no CFI) marked [fp]" : "");
	if (ulive)
		fprintf(stderr, "; %" PRIu64 " with frames read live after the event [live]", ulive);
	if (opts.unwind == PR_UNWIND_KERNEL) {
		fprintf(stderr, "; kernel walker: %" PRIu64 " events, %.1f%% fell back to the snapshot",
			prs.kw.events, kw_fallback_pct());
		for (unsigned k = KW_ST_NO_PROC, c = 0; k < KW_ST_MAX; k++)
			if (prs.kw.status[k])
				fprintf(stderr, "%s%s %" PRIu64, c++ ? ", " : " (", kw_status_text(k),
					prs.kw.status[k]);
		for (unsigned k = KW_ST_NO_PROC; k < KW_ST_MAX; k++)
			if (prs.kw.status[k]) {
				fputc(')', stderr);
				break;
			}
		fprintf(stderr, ", tables %.1f MiB of %.1f MiB of maps",
			(double)prs.kw_table_bytes / 1048576.0, (double)prs.kw_map_bytes / 1048576.0);
	}
	if (ustale)
		fprintf(stderr, "; %" PRIu64 " cut where the stack above the window changed since the event",
			ustale);
	if (opts.unwind == PR_UNWIND_DWARF && (ulive || ustale))
		fprintf(stderr, "; --unwind=kernel walks stacks at the event");
	if (prs.klost)
		fprintf(stderr, "; kernel stacks lost: %" PRIu64, prs.klost);
	if (prs.bpf[PR_CNT_REC_LOST])
		fprintf(stderr, "; samples lost (buffer full): %" PRIu64, prs.bpf[PR_CNT_REC_LOST]);
	if (agg.overflow)
		fprintf(stderr, "; %" PRIu64 " samples under [aggregation table full]", agg.overflow);
	if (st.full)
		fprintf(stderr, "; %" PRIu64 " stacks not stored (stack table full)", st.full);
	fprintf(stderr, "\nprofile: self: CPU %.2f s (user %.2f, sys %.2f), max RSS %.1f MiB; %" PRIu64
		" processes, %zu modules seen\n", ucpu + scpu, ucpu, scpu, ru.ru_maxrss / 1024.0,
		prs.npids, nmods);
}
