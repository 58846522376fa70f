// SPDX-License-Identifier: GPL-2.0-only
/* In-kernel walker event -> interned stack (kwalk_frames.h). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "kwalk_frames.h"
#include "runtime/intern.h"
#include "runtime/mappings.h"
#include "kwalk_track.h"
#include "kwalk_user.h"

#ifdef HAVE_DWUNW
struct kw_fill {
	struct frames *fr;
	const struct kw_event *ev;
	uint32_t skip;
};

/*
 * A walked frame's pc is exact in frame 0, after a signal frame, and in the signal trampoline
 * itself (nothing called it: the handler "returns" to its first byte); else a return address.
 */
static void fill_kwalk(void *arg, struct uframe *out, uint32_t n)
{
	const struct kw_fill *k = arg;
	const struct kw_event *ev = k->ev;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i + k->skip;
		bool exact = j == 0 || ev->how[j] == KW_HOW_SIGNAL ||
			     (j + 1 < ev->nframes && ev->how[j + 1] == KW_HOW_SIGNAL);

		out[i].how = HOW_KERNEL;
		/* walked by CFI in the kernel at the event: the stack as it was then */
		uf_set_origin(&out[i], ev->how[j] == KW_HOW_SIGNAL ? UO_SIGNAL : UO_KWALK);
		fill_pc(k->fr, (pid_t)ev->pid, out, i, exact);
	}
}

int64_t frames_from_kwalk(struct frames *fr, const void *data, size_t size, uint32_t skip,
			  uint64_t space, struct unwind_stats *stats, struct kwalk_seen *seen,
			  struct kwalk_info *info)
{
	const struct kw_event *ev = data;
	const size_t head = offsetof(struct kw_event, snap);
	uint64_t pcs[KW_MAX_FRAMES];
	uint32_t n;
	int rc;

	if (size < offsetof(struct kw_event, pcs) || ev->h.kind != KW_KIND_EVENT ||
	    ev->nframes > KW_MAX_FRAMES || (size < head && !(ev->flags & KW_EV_NOTICE))) {
		seen->bad++;
		return FRAMES_BAD;
	}
	*info = (struct kwalk_info){ .pid = ev->pid, .tid = ev->tid, .status = ev->status,
				     .cookie = ev->cookie, .aux = ev->aux };
	seen->events++;
	if (ev->status < KW_ST_MAX)
		seen->status[ev->status]++;
	if (space == FRAMES_SPACE_PID)
		space = ev->pid;
	if (ev->flags & KW_EV_NOTICE) {
		seen->snapshot++;
		return FRAMES_NOTICE;
	}
	if (!KW_ST_COMPLETE(ev->status)) {
		const struct cap_record *rec;

		if (!(ev->flags & KW_EV_SNAPSHOT) || size <= head) {
			seen->bad++;
			return FRAMES_BAD;
		}
		seen->snapshot++;
		return frames_from_snapshot(fr, &ev->snap, size - head, skip, space, stats, &rec);
	}
	/* the same stop as libdwunw's on the same stack, so both modes intern one stack */
	seen->kernel++;
	rc = ev->status == KW_ST_OK ? DWUNW_OK
	     : ev->status == KW_ST_DEPTH ? DWUNW_ERR_DEPTH : DWUNW_ERR_NO_MODULE;
	n = ev->nframes;
	if (n > fr->max + 1) {
		n = fr->max + 1;
		rc = DWUNW_ERR_DEPTH;
	}
	if (n == 0)
		return pseudo_stack(fr->st, "[unwind failed: no frame]");
	n = n > skip ? n - skip : 0;
	memcpy(pcs, ev->pcs + skip, n * sizeof(pcs[0]));
	const char *label = NULL, *stop_name = NULL;
	if (rc != DWUNW_OK) {
		char buf[128];

		snprintf(buf, sizeof(buf), "[unwind stopped: %s]", dwunw_strerror(rc));
		label = intern(buf);
		stop_name = intern(dwunw_errname(rc));
	}
	/* the pcs are named from the modules mapped at the event (mapping events applied in
	 * order), so a process gone before its event is processed is named like any other */
	if (fr->maps)
		mappings_sync(fr->maps, ev->pid, &fr->dctx);
	struct kw_fill fa = { .fr = fr, .ev = ev, .skip = skip };
	return stack_get_in(fr->st, space, SK_DWARF, rc, label, stop_name, pcs, n, fill_kwalk, &fa);
}
#endif

void kwalk_seen_json(FILE *out, const struct kwalk_seen *s)
{
	bool c = false;

	fprintf(out, "\"events\":%" PRIu64 ",\"from_kernel\":%" PRIu64 ",\"fallback\":%" PRIu64
		",\"fallback_pct\":%.2f,\"bad\":%" PRIu64 ",\"by_status\":{", s->events, s->kernel,
		s->snapshot, s->events ? 100.0 * (double)s->snapshot / (double)s->events : 0.0, s->bad);
	for (unsigned k = 0; k < KW_ST_MAX; k++)
		if (s->status[k]) {
			fprintf(out, "%s\"%s\":%" PRIu64, c ? "," : "", kw_status_name(k), s->status[k]);
			c = true;
		}
	fputc('}', out);
}
