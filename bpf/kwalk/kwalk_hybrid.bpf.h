/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tool's --unwind=kernel sample (included after capture.bpf.h and kwalk.bpf.h): the walker's
 * frames when its walk completes (a kw_event up to its snapshot: pcs and how), else a short stop
 * notice (a kw_event up to its pcs: why and where, flag KW_EV_NOTICE) followed by the tool's
 * dwarf-mode snapshot (cap_snapshot: registers and the stack window cut at the stack's VMA, as
 * large as dwarf mode's, --stack-size included). A fallback then costs what a dwarf-mode sample
 * costs, not a fixed maximal window (KW_EMIT's, for the differential test).
 */
#ifndef DWUNW_KWALK_HYBRID_BPF_H
#define DWUNW_KWALK_HYBRID_BPF_H

#include "kwalk_track.h"

/*
 * A tool may take a complete walk itself instead of its event (profile's in-kernel counts):
 * KW_HYBRID_TAKE(w, s, pid, tid, cookie, aux) is 1 when it did, 0 to send the event.
 */
#ifndef KW_HYBRID_TAKE
#define KW_HYBRID_TAKE(w, s, pid, tid, cookie, aux) 0
#endif

/* 0, or a negative errno when the sample could not be output (the notice alone is no sample). */
static __always_inline long kw_hybrid(void *ctx, struct pt_regs *regs, __u64 cookie, __s64 aux,
				      struct cap_thread *t)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 pid = pt >> 32, tid = (__u32)pt;
	struct kw_walk w;
	struct kw_scratch *s = kw_walk(&w, regs, pid, KW_MODE_MAIN);
	struct kw_event *ev;
	long err = 0;

	if (KW_ST_COMPLETE(w.status)) {
		if (s && KW_HYBRID_TAKE(&w, s, pid, tid, cookie, aux)) {
			kw_walk_done(s);
			return 0;
		}
		ev = bpf_ringbuf_reserve(&cap_ringbuf, offsetof(struct kw_event, snap), 0);
		if (ev) {
			kw_event_fill(ev, &w, s, pid, tid, 0, cookie, aux);
			bpf_ringbuf_submit(ev, cap_rb_wakeup());
		} else {
			err = -ENOSPC;
			kw_count(KW_C_LOST, 1);
		}
		kw_walk_done(s);
		return err;
	}
	kw_walk_done(s);
	ev = bpf_ringbuf_reserve(&cap_ringbuf, offsetof(struct kw_event, pcs), 0);
	if (ev) {
		kw_event_head(ev, &w, offsetof(struct kw_event, pcs), pid, tid, KW_EV_NOTICE, cookie, aux);
		bpf_ringbuf_submit(ev, cap_rb_wakeup());
	} else {
		kw_count(KW_C_LOST, 1);
	}
	return cap_snapshot(ctx, regs, cookie, aux, 0, t);
}

#endif /* DWUNW_KWALK_HYBRID_BPF_H */
