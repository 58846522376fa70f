// SPDX-License-Identifier: GPL-2.0-only
/* offcputime's sums and report: see offcputime_out.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "offcputime_out.h"
#include "runtime/frames.h"
#include "runtime/freeze.h"
#include "runtime/report_fmt.h"
#include "runtime/stack_report.h"
#include "runtime/stack_store.h"
#include "runtime/tool_util.h"

static uint64_t key_hash(const struct oc_key *k)
{
	uint64_t h = hash64(0, k->pid);

	h = hash64(h, (uint64_t)(uintptr_t)k->comm);
	h = hash64(h, (uint64_t)k->kstack);
	h = hash64(h, (uint64_t)k->ustack);
	h = hash64(h, k->on);
	if (!k->woken)
		return h;
	h = hash64(h, (uint64_t)(uintptr_t)k->wcomm);
	h = hash64(h, k->wpid);
	h = hash64(h, (uint64_t)k->wkstack);
	return hash64(h, (uint64_t)k->wustack);
}

static bool key_eq(const struct oc_key *a, const struct oc_key *b)
{
	return a->pid == b->pid && a->comm == b->comm && a->kstack == b->kstack &&
	       a->ustack == b->ustack && a->on == b->on && a->woken == b->woken &&
	       (!a->woken || (a->wpid == b->wpid && a->wcomm == b->wcomm && a->wkstack == b->wkstack &&
			      a->wustack == b->wustack));
}

static void reindex(struct oc_sums *s, size_t cap)
{
	free(s->index);
	s->index = xcalloc(cap, sizeof(*s->index));
	s->index_cap = cap;
	for (size_t e = 0; e < s->n; e++) {
		size_t i = key_hash(&s->v[e].k) & (cap - 1);

		while (s->index[i])
			i = (i + 1) & (cap - 1);
		s->index[i] = (uint32_t)e + 1;
	}
}

void oc_sums_add(struct oc_sums *s, struct stack_store *st, const struct oc_key *key, uint64_t ns,
		 uint64_t n)
{
	struct oc_key k = *key;
	size_t i;

	for (int pass = 0; pass < 2; pass++) {
		if ((s->n + 1) * 2 > s->index_cap)
			reindex(s, s->index_cap ? s->index_cap * 2 : 1024);
		for (i = key_hash(&k) & (s->index_cap - 1); s->index[i]; i = (i + 1) & (s->index_cap - 1)) {
			struct oc_entry *e = &s->v[s->index[i] - 1];

			if (key_eq(&e->k, &k)) {
				e->ns += ns;
				e->spans += n;
				if (pass)
					s->overflow_ns += ns;
				return;
			}
		}
		if (s->n < s->max || pass)
			break;
		/* full: the process's time goes under one key that says so */
		k.kstack = -1;
		k.ustack = pseudo_stack(st, "[aggregation table full]");
		k.woken = false;
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			die("out of memory");
	}
	s->v[s->n] = (struct oc_entry){ .k = k, .ns = ns, .spans = n };
	s->index[i] = (uint32_t)++s->n;
	if (s->n > s->max)
		s->overflow_ns += ns;
}

static const struct ustack *stack_at(const struct stack_store *st, int64_t i)
{
	return i >= 0 ? &st->v[i] : NULL;
}

static const struct oc_sums *sort_sums;

static int by_time(const void *a, const void *b)
{
	const struct oc_entry *x = &sort_sums->v[*(const uint32_t *)a];
	const struct oc_entry *y = &sort_sums->v[*(const uint32_t *)b];

	if (x->ns / 1000 != y->ns / 1000)
		return x->ns / 1000 < y->ns / 1000 ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static const char *unwind_name(const struct oc_opts *o)
{
	if (o->freeze)
		return "freeze";
	return o->unwind == OC_UNWIND_KERNEL ? "kernel" : o->unwind == OC_UNWIND_DWARF ? "dwarf" : "fp";
}

/* --wall: the frame that ends an off-CPU stack (the flame graph and folded lines tell on from off) */
#define OFF_CPU_FRAME "[off-CPU]"

static void print_json(const struct oc_opts *o, const struct stack_store *st, const struct oc_entry *e)
{
	printf("{\"pid\":%u,\"comm\":", e->k.pid);
	json_str(e->k.comm);
	printf(",\"count\":%" PRIu64 ",\"%s\":%" PRIu64, e->ns / 1000,
	       e->k.on ? "samples" : "switches", e->spans);
	if (o->wall)
		printf(",\"state\":\"%s\"", e->k.on ? "on" : "off");
	printf(",\"user\":");
	stack_print_json(stack_at(st, e->k.ustack), true);
	printf(",\"kernel\":");
	stack_print_json(stack_at(st, e->k.kstack), false);
	if (e->k.woken) {
		printf(",\"waker\":{\"pid\":%u,\"comm\":", e->k.wpid);
		json_str(e->k.wcomm);
		printf(",\"user\":");
		stack_print_json(stack_at(st, e->k.wustack), true);
		printf(",\"kernel\":");
		stack_print_json(stack_at(st, e->k.wkstack), false);
		printf("}");
	}
	printf("}\n");
}

void oc_report(const struct oc_opts *o, const struct oc_sums *s, const struct oc_stats *p,
	       const struct frames *fr)
{
	const struct stack_store *st = fr->st;
	uint32_t *order = xcalloc(s->n + 1, sizeof(*order));
	struct folded_line *fl = o->folded ? xcalloc(s->n + 1, sizeof(*fl)) : NULL;
	uint64_t total_ns = 0, spans = 0, uns = 0, ucomplete_ns = 0, on_ns = 0, on_samples = 0;
	uint32_t marks = 0;
	size_t nfl = 0;

	for (size_t i = 0; i < s->n; i++)
		order[i] = (uint32_t)i;
	sort_sums = s;
	qsort(order, s->n, sizeof(*order), by_time);
	for (size_t i = 0; i < s->n; i++) {
		const struct oc_entry *e = &s->v[order[i]];
		const struct ustack *u = stack_at(st, e->k.ustack);

		total_ns += e->ns;
		if (e->k.on) {
			on_ns += e->ns;
			on_samples += e->spans;
		} else {
			spans += e->spans;
		}
		if (u && u->kind != SK_PSEUDO) {
			uns += e->ns;
			if (stack_reaches_bottom(u))
				ucomplete_ns += e->ns;
		}
		if (e->ns < 1000)
			continue; /* under a microsecond in all: nothing to print */
		if (o->json)
			print_json(o, st, e);
		if (o->folded) {
			size_t len = 0;
			FILE *f = open_memstream(&fl[nfl].text, &len);

			if (!f)
				die("out of memory");
			stack_folded_line(f, e->k.comm, o->kernel ? stack_at(st, e->k.kstack) : NULL,
					  o->user ? u : NULL, o->delimiter);
			if (o->wall && !e->k.on)
				fputs(";" OFF_CPU_FRAME, f);
			if (e->k.woken) { /* offwaketime's: the waker above, leaf first, its comm on top */
				fputs(";--", f);
				stack_folded_leaf_first(f, o->kernel ? stack_at(st, e->k.wkstack) : NULL);
				stack_folded_leaf_first(f, o->user ? stack_at(st, e->k.wustack) : NULL);
				fprintf(f, ";%s", e->k.wcomm);
			}
			fclose(f);
			fl[nfl].weight = e->ns / 1000;
			fl[nfl].rank = (uint32_t)nfl;
			nfl++;
		} else if (!o->json) {
			if (e->k.woken) {
				printf("    %-16s %s (%u)\n", "waker:", e->k.wcomm, e->k.wpid);
				stack_print_text(o->kernel ? stack_at(st, e->k.wkstack) : NULL,
						 o->user ? stack_at(st, e->k.wustack) : NULL, NULL, 0, 0,
						 o->delimiter, o->unwind != OC_UNWIND_FP, &marks);
				printf("    %-16s %s\n", "--", "--");
			}
			if (o->wall && !e->k.on)
				printf("    %s\n", OFF_CPU_FRAME);
			stack_print_text(o->kernel ? stack_at(st, e->k.kstack) : NULL, o->user ? u : NULL,
					 e->k.comm, e->k.pid, e->ns / 1000, o->delimiter,
					 o->unwind != OC_UNWIND_FP, &marks);
		}
	}
	free(order);
	if (o->folded)
		print_folded_lines(fl, nfl, FOLDED_BY_WEIGHT, o->json); /* -f --json: NDJSON records */
	else if (!o->json)
		fprint_marks_legend(stdout, "    ", marks);
	fflush(stdout);

	struct rusage ru;
	const struct module_seen *mods;
	size_t nmods = frames_modules(fr, &mods);
	double secs = (double)(p->end_ns - p->start_ns) / 1e9;
	double pct = uns ? 100.0 * (double)ucomplete_ns / (double)uns : 0.0;
	uint64_t lost = p->bpf[OC_CNT_REC_LOST] + p->bpf[OC_CNT_START_FULL] + p->bpf[OC_CNT_AGG_LOST];

	getrusage(RUSAGE_SELF, &ru);
	double ucpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	double scpu = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;

	if (o->json) {
		printf("{\"summary\":{\"unit\":\"microseconds\",\"samples\":%" PRIu64
		       ",\"switches\":%" PRIu64 ",\"off_cpu_us\":%" PRIu64 ",\"event\":\"sched_switch\""
		       ",\"frequency\":0,\"period\":1000,\"cpus\":0,\"duration_ns\":%" PRIu64
		       ",\"start_unix_ns\":%" PRIu64 ",\"unwind\":\"%s\",\"user_samples\":%" PRIu64
		       ",\"user_complete\":%" PRIu64 ",\"spans_lost\":%" PRIu64
		       ",\"switch_out_lost\":%" PRIu64 ",\"unmatched\":%" PRIu64
		       ",\"out_of_range\":%" PRIu64 ",\"user_lost\":%" PRIu64 ",\"kernel_lost\":%" PRIu64
		       ",\"keys\":%zu,\"overflow_us\":%" PRIu64 ",\"stacks\":%zu,\"stack_table_full\":%" PRIu64
		       ",\"records\":%" PRIu64 ",\"buffer_bytes\":%" PRIu64
		       ",\"self\":{\"user_s\":%.3f,\"sys_s\":%.3f,\"setup_s\":%.3f,\"max_rss_kib\":%ld}",
		       total_ns / 1000, spans, (total_ns - on_ns) / 1000, p->end_ns - p->start_ns,
		       (uint64_t)time(NULL) * UINT64_C(1000000000) - (p->end_ns - p->start_ns),
		       unwind_name(o), uns / 1000, ucomplete_ns / 1000, lost,
		       p->bpf[OC_CNT_SNAP_LOST], p->unmatched, p->bpf[OC_CNT_OUT_OF_RANGE], p->ulost,
		       p->klost, s->n, s->overflow_ns / 1000, st->n, st->full, p->records,
		       p->buffer_bytes, ucpu, scpu, (double)p->setup_cpu_ns / 1e9, ru.ru_maxrss);
		if (o->waker)
			printf(",\"waker\":{\"wakeups\":%" PRIu64 ",\"table_full\":%" PRIu64
			       ",\"from_interrupt\":%" PRIu64 "}", p->bpf[OC_CNT_WAKEUPS],
			       p->bpf[OC_CNT_WAKER_FULL], p->irq_wakeups);
		if (o->wall)
			printf(",\"wall\":{\"on_cpu_us\":%" PRIu64 ",\"off_cpu_us\":%" PRIu64
			       ",\"period_ns\":%" PRIu64 ",\"cpus\":%u,\"on_samples\":%" PRIu64
			       ",\"on_samples_bpf\":%" PRIu64 ",\"on_lost\":%" PRIu64
			       ",\"on_records\":%" PRIu64 "}",
			       on_ns / 1000, (total_ns - on_ns) / 1000, p->period_ns, p->cpus, on_samples,
			       p->bpf[OC_CNT_ON_SAMPLES], p->bpf[OC_CNT_ON_LOST], p->on_records);
		if (p->agg.on) /* every switch-out accounted: summed here, a record, lost, or still off */
			printf(",\"aggregated\":{\"spans\":%" PRIu64 ",\"counted_in_bpf\":%" PRIu64
			       ",\"map_full\":%" PRIu64 ",\"hold_full\":%" PRIu64 ",\"spans_lost\":%" PRIu64
			       ",\"keys\":%" PRIu64 ",\"drains\":%" PRIu64 ",\"no_stack\":%" PRIu64
			       ",\"drain_bytes\":%" PRIu64 "}",
			       p->agg.spans, p->bpf[OC_CNT_AGG], p->bpf[OC_CNT_AGG_FULL], p->agg.hold_full,
			       p->bpf[OC_CNT_AGG_LOST], p->agg.keys, p->agg.drains, p->agg.no_stack, p->agg.bytes);
		printf(",\"switch_outs_bpf\":%" PRIu64 ",\"span_records\":%" PRIu64 ",\"still_off\":%" PRIu64,
		       p->bpf[OC_CNT_SWITCHES], p->off_records, p->still_off);
		if (o->unwind == OC_UNWIND_KERNEL) { /* the walks: in the kernel, or fallen back (why) */
			printf(",\"kernel_walk\":{");
			kwalk_seen_json(stdout, &p->kw);
			putchar('}');
		}
		if (fr->fz) {
			putchar(',');
			freeze_json(fr->fz, stdout);
		}
		printf(",\"modules\":[");
		print_modules_json(mods, nmods);
		printf("]}}\n");
		fflush(stdout);
	}
	fprintf(stderr, "offcputime: %" PRIu64 " switch-outs, %.3f s off CPU in %.1f s (%s unwinding); "
		"user stacks: %.1f%% of the time complete to _start/__libc_start_main/thread start",
		spans, (double)(total_ns - on_ns) / 1e9, secs, unwind_name(o), pct);
	if (o->wall)
		fprintf(stderr, "; wall: %.3f s on CPU (%" PRIu64 " samples of %" PRIu64 " us), %.1f%% of %.3f s"
			"; on-CPU samples lost: %" PRIu64, (double)on_ns / 1e9, on_samples,
			p->period_ns / 1000, total_ns ? 100.0 * (double)on_ns / (double)total_ns : 0.0,
			(double)total_ns / 1e9, p->bpf[OC_CNT_ON_LOST]);
	if (lost)
		fprintf(stderr, "; spans lost: %" PRIu64 " (buffer, thread or count table full)", lost);
	if (p->bpf[OC_CNT_SNAP_LOST])
		fprintf(stderr, "; user stacks lost at the switch-out (buffer full): %" PRIu64,
			p->bpf[OC_CNT_SNAP_LOST]);
	if (p->unmatched)
		fprintf(stderr, "; switch-outs not matched: %" PRIu64, p->unmatched);
	if (p->klost)
		fprintf(stderr, "; kernel stacks lost: %" PRIu64, p->klost);
	if (s->overflow_ns)
		fprintf(stderr, "; %.3f s under [aggregation table full]", (double)s->overflow_ns / 1e9);
	if (st->full)
		fprintf(stderr, "; %" PRIu64 " stacks not stored (stack table full)", st->full);
	if (o->waker)
		fprintf(stderr, "; wakeups recorded: %" PRIu64 "%s", p->bpf[OC_CNT_WAKEUPS],
			p->bpf[OC_CNT_WAKER_FULL] ? " (some lost: waker table full)" : "");
	if (o->unwind == OC_UNWIND_KERNEL)
		fprintf(stderr, "; kernel walker: %" PRIu64 " events, %" PRIu64 " fell back to the snapshot",
			p->kw.events, p->kw.snapshot);
	if (p->agg.on)
		fprintf(stderr, "; %" PRIu64 " spans summed in the kernel (%" PRIu64 " keys drained%s)",
			p->agg.spans, p->agg.keys,
			p->agg.hold_full ? "; hold map full: counting ended, the rest as records" : "");
	fprintf(stderr, "\noffcputime: self: CPU %.2f s (user %.2f, sys %.2f), max RSS %.1f MiB; "
		"%" PRIu64 " records (%.1f MiB) read, %zu modules seen\n", ucpu + scpu, ucpu, scpu,
		ru.ru_maxrss / 1024.0, p->records, (double)p->buffer_bytes / 1048576.0, nmods);
}
