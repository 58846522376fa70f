// SPDX-License-Identifier: GPL-2.0-only
/* --unwind=kernel tables over a process's life: see kwalk_track_user.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/frames.h"
#include "kwalk_track_user.h"
#include "kwalk_user.h"
#include "runtime/counters.h"
#include "runtime/mmap_track.h"
#include "runtime/tool_util.h"

int kw_track_attach(struct kw_track *t, struct bpf_object *obj)
{
	int err = mmap_track_attach(obj);

	t->attached = !err;
	return err;
}

void kw_track_detach(struct kw_track *t)
{
	if (t->attached)
		mmap_track_detach();
	t->attached = false;
}

static size_t slot_of(struct kw_track *t, uint32_t pid)
{
	size_t i = hash64(0, pid) & (KW_TRACK_SLOTS - 1);

	if (t->tried[i].pid != pid + 1) { /* a new process (or a collision: it starts over) */
		t->tried[i].pid = pid + 1;
		t->tried[i].fallbacks = 0;
		t->tried[i].loaded = false;
		t->tried[i].ns = 0;
	}
	return i;
}

void kw_track_reload(struct kw_track *t, uint32_t pid, bool force)
{
	uint64_t now;
	size_t i;

	if (!t->l)
		return;
	i = slot_of(t, pid);
	now = mono_ns();
	if (!force) {
		if (++t->tried[i].fallbacks < t->threshold) {
			t->deferred++;
			return;
		}
		if (t->tried[i].ns && now - t->tried[i].ns < 50000000ull)
			return;
	}
	/* a token bucket of loading time: load_ns_per_s refilled per second, at most one second's
	 * worth banked; a long load (a large module's table) leaves a debt the next ones wait out */
	if (t->load_ns_per_s) {
		int64_t tok = t->tokens + (int64_t)((now - t->last_refill) / 1000000000.0 * (double)t->load_ns_per_s);

		t->last_refill = now;
		t->tokens = tok > (int64_t)t->load_ns_per_s ? (int64_t)t->load_ns_per_s : tok;
		if (t->tokens <= 0) {
			t->deferred++; /* no loading time left: the snapshot path meanwhile */
			return;
		}
	}
	t->tried[i].ns = now;
	t->loads++;
	t->tried[i].loaded = kw_load_pid(t->l, (int)pid) == 0;
	t->tokens -= (int64_t)(mono_ns() - now);
	/* the snapshot path's maps too: the fallback of the next sample may be in the new module */
	if (t->tried[i].loaded && t->fr)
		frames_refresh_pid(t->fr, pid);
}

void kw_track_forget(struct kw_track *t, uint32_t pid)
{
	size_t i;

	if (!t->l)
		return;
	i = slot_of(t, pid);
	t->tried[i].loaded = false;
	t->tried[i].fallbacks = 0;
	kw_forget_pid(t->l, (int)pid);
}

int kw_track_record(struct kw_track *t, const void *data, size_t size)
{
	struct kw_track_rec r;

	if (size < sizeof(r))
		return 0;
	memcpy(&r, data, sizeof(r));
	if (r.h.kind != KW_KIND_MMAP && r.h.kind != KW_KIND_EXIT)
		return 0;
	if (!t->l || (t->selected && !t->selected(t->selected_arg, r.pid)))
		return 1;
	if (r.h.kind == KW_KIND_MMAP) {
		t->mmaps++;
		/* a new module of a loaded process (or of a target): in before its samples */
		if (t->threshold <= 1 || t->tried[slot_of(t, r.pid)].loaded)
			kw_track_reload(t, r.pid, true);
	} else {
		t->exits++;
		kw_track_forget(t, r.pid);
	}
	return 1;
}

void kw_track_counters(struct bpf_object *obj, uint64_t out[KW_TC_MAX])
{
	percpu_counters_read(obj, "kw_track_counters", out, KW_TC_MAX);
}
