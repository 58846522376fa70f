// SPDX-License-Identifier: GPL-2.0-only
/* --unwind=kernel tables over a process's life: see kwalk_track_user.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "frames.h"
#include "kwalk_track_user.h"
#include "kwalk_user.h"
#include "tool_util.h"

int kw_track_attach(struct kw_track *t, struct bpf_object *obj)
{
	static const char *const progs[2] = { "kw_mmap_enter", "kw_mmap_exit" };

	for (int i = 0; i < 2; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, progs[i]);

		t->links[i] = p ? bpf_program__attach(p) : NULL;
		if (!t->links[i]) {
			int err = p ? -errno : -ENOENT;

			kw_track_detach(t);
			return err;
		}
	}
	return 0;
}

void kw_track_detach(struct kw_track *t)
{
	for (int i = 0; i < 2; i++) {
		bpf_link__destroy(t->links[i]);
		t->links[i] = NULL;
	}
}

void kw_track_reload(struct kw_track *t, uint32_t pid, bool force)
{
	size_t i = hash64(0, pid) & (KW_TRACK_SLOTS - 1);
	uint64_t now = mono_ns();

	if (!t->l || (!force && t->tried[i].pid == pid + 1 && now - t->tried[i].ns < 50000000ull))
		return;
	t->tried[i].pid = pid + 1;
	t->tried[i].ns = now;
	t->loads++;
	/* the snapshot path's maps too: the fallback of the next sample may be in the new module */
	if (kw_load_pid(t->l, (int)pid) == 0 && dctx_ok)
		dwunw_maps_refresh(&dctx, (int32_t)pid);
}

int kw_track_record(struct kw_track *t, const void *data, size_t size)
{
	struct kw_track_rec r;

	if (size < sizeof(r))
		return 0;
	memcpy(&r, data, sizeof(r));
	if (r.h.kind != KW_KIND_MMAP && r.h.kind != KW_KIND_EXIT)
		return 0;
	if (!t->l || (t->selected && !t->selected(r.pid)))
		return 1;
	if (r.h.kind == KW_KIND_MMAP) {
		t->mmaps++;
		kw_track_reload(t, r.pid, true);
	} else {
		t->exits++;
		kw_forget_pid(t->l, (int)r.pid);
	}
	return 1;
}

void kw_track_counters(struct bpf_object *obj, uint64_t out[KW_TC_MAX])
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "kw_track_counters");
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = ncpu > 0 ? calloc((size_t)ncpu, sizeof(*v)) : NULL;

	memset(out, 0, KW_TC_MAX * sizeof(out[0]));
	for (uint32_t k = 0; v && m && k < KW_TC_MAX; k++)
		if (bpf_map_lookup_elem(bpf_map__fd(m), &k, v) == 0)
			for (int c = 0; c < ncpu; c++)
				out[k] += v[c];
	free(v);
}
