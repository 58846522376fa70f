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

static const char *const pm_progs[2] = { "kw_track_exec", "kw_track_fork" };

void kw_track_prepare(struct kw_track *t, struct bpf_object *obj)
{
	for (int i = 0; i < 2; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, pm_progs[i]);

		if (p)
			bpf_program__set_autoload(p, true);
	}
	t->obj = obj;
	t->inbpf = true;
}

int kw_track_attach(struct kw_track *t, struct bpf_object *obj)
{
	int err = mmap_track_attach(obj);

	t->obj = obj;
	t->attached = !err;
	if (!t->inbpf || !t->l)
		return err;
	/* exec and fork make the entries; without them, loads from /proc as before */
	for (int i = 0; i < 2; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, pm_progs[i]);

		t->links[i] = p ? bpf_program__attach(p) : NULL;
		if (!t->links[i])
			t->inbpf = false;
	}
	if (!t->inbpf) /* both or neither: a half would race with the loads from /proc */
		for (int i = 0; i < 2; i++) {
			bpf_link__destroy(t->links[i]);
			t->links[i] = NULL;
		}
	kw_loader_bpf_procs(t->l, t->inbpf);
	return err;
}

void kw_track_detach(struct kw_track *t)
{
	if (t->attached)
		mmap_track_detach();
	t->attached = false;
	for (int i = 0; i < 2; i++) {
		bpf_link__destroy(t->links[i]);
		t->links[i] = NULL;
	}
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

/* A token bucket of loading time: load_ns_per_s refilled per second, at most one second's
 * worth banked; a long load (a large module's table) leaves a debt the next ones wait out. */
static bool have_time(struct kw_track *t, uint64_t now)
{
	int64_t tok;

	if (!t->load_ns_per_s)
		return true;
	tok = t->tokens + (int64_t)((now - t->last_refill) / 1000000000.0 * (double)t->load_ns_per_s);
	t->last_refill = now;
	t->tokens = tok > (int64_t)t->load_ns_per_s ? (int64_t)t->load_ns_per_s : tok;
	if (t->tokens > 0)
		return true;
	t->deferred++; /* no loading time left: the snapshot path meanwhile */
	return false;
}

/* A file the BPF side could not enter: loaded by its path (no read of the process's maps),
 * else the process the old way. */
static void on_file(struct kw_track *t, const struct kw_file_rec *r)
{
	struct kw_file_key fk = { r->dev, r->ino, r->size };
	char path[KW_PATH_MAX];
	uint64_t now = mono_ns();
	int err;

	t->files++;
	if (!have_time(t, now))
		return; /* the next process mapping it tells again */
	memcpy(path, r->path, sizeof(path));
	path[r->pathlen < KW_PATH_MAX ? r->pathlen : KW_PATH_MAX - 1] = 0;
	err = kw_enter_file(t->l, (int)r->pid, r->image, path, &fk, r->start, r->end, r->pgoff << 12);
	t->load_ns += mono_ns() - now;
	t->tokens -= (int64_t)(mono_ns() - now);
	if (err == -ESTALE || err == -ENOENT) {
		t->files_stale++;
		kw_track_reload(t, r->pid, true);
	}
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
	if (!have_time(t, now))
		return;
	t->tried[i].ns = now;
	t->loads++;
	t->tried[i].loaded = kw_load_pid(t->l, (int)pid) == 0;
	t->load_ns += mono_ns() - now;
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
	if (r.h.kind == KW_KIND_FILE && size >= sizeof(struct kw_file_rec)) {
		if (t->l && (!t->selected || t->selected(t->selected_arg, r.pid)))
			on_file(t, data);
		return 1;
	}
	if (r.h.kind != KW_KIND_MMAP && r.h.kind != KW_KIND_EXIT)
		return 0;
	if (!t->l || (t->selected && !t->selected(t->selected_arg, r.pid)))
		return 1;
	if (r.h.kind == KW_KIND_MMAP) {
		t->mmaps++;
		/* a new module of a loaded process (or of a target, or one the BPF side could not
		 * enter: a file not loaded yet): in before its samples */
		if (t->threshold <= 1 || (r.flags & KW_TR_MISS) || t->tried[slot_of(t, r.pid)].loaded)
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
