// SPDX-License-Identifier: GPL-2.0-only
/* One kw_event -> its stack (kwalk_event.h). */
#include <errno.h>
#include <stddef.h>
#include "dwunw.h"
#include "runtime/capture_user.h"
#include "kwalk_event.h"
#include "kwalk_user.h"

#define KW_EV_LIB_FRAMES 256

int kw_event_stack(struct kw_loader *l, struct dwunw_ctx *ctx, const void *data, size_t size,
		   uint64_t *pcs, size_t *n, struct kw_event_scratch *scratch)
{
	const struct kw_event *ev = data;
	const struct cap_record *rec;
	struct dwunw_frame f[KW_EV_LIB_FRAMES];
	struct dwunw_regs regs;
	size_t cap = *n, fn = KW_EV_LIB_FRAMES, k;
	int patched = 0;

	*n = 0;
	if (!ev || size < offsetof(struct kw_event, snap) || ev->h.kind != KW_KIND_EVENT)
		return -EINVAL;
	if (l && kw_wants_reload(ev->status))
		kw_load_pid(l, (int)ev->pid);
	if (KW_ST_COMPLETE(ev->status)) {
		for (k = 0; k < ev->nframes && k < KW_MAX_FRAMES && k < cap; k++)
			pcs[k] = ev->pcs[k];
		*n = k;
		return KW_FROM_KERNEL;
	}
	if (!(ev->flags & KW_EV_SNAPSHOT))
		return -ENODATA;
	rec = dwunw_cap_prepare(&ev->snap, size - offsetof(struct kw_event, snap), &scratch->buf,
				&scratch->size, &patched);
	if (!rec)
		return -EINVAL;
	dwunw_cap_to_regs(rec, &regs);
	dwunw_capture(ctx, &regs, f, &fn); /* stops wherever it must; the frames found are the stack */
	for (k = 0; k < fn && k < cap; k++)
		pcs[k] = f[k].pc;
	dwunw_module_cache_release(ctx, f, fn);
	*n = k;
	return KW_FROM_SNAPSHOT;
}
