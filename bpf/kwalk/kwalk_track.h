/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Process tracking for a tool's --unwind=kernel (kwalk_track.bpf.h -> kwalk_track_user.h): the
 * records that tell user space a process mapped a file executable or exited, so the walker's
 * tables are loaded as mappings appear (not only after a sample fell back) and dropped with the
 * process; and the flag of kwalk_hybrid.bpf.h's stop notices. Shared by the BPF side and user
 * space.
 */
#ifndef DWUNW_KWALK_TRACK_H
#define DWUNW_KWALK_TRACK_H

#include "runtime/capture.h"

enum kw_track_kind {
	KW_KIND_MMAP = CAP_KIND_TOOL + 16, /* a file mapped executable (its table may be new) */
	KW_KIND_EXIT,                      /* the process exited (its mappings go) */
};

/*
 * struct kw_event.flags of a stop notice (kwalk_hybrid.bpf.h): the event up to its pcs only
 * (status, where it stopped); the sample itself follows as the tool's dwarf-mode snapshot.
 */
#define KW_EV_NOTICE 0x100

struct kw_track_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pad;
};

enum kw_track_counter {
	KW_TC_MMAP = 0,                    /* executable file mappings told */
	KW_TC_LOST,                        /* not told: pending table or buffer full */
	KW_TC_MAX = 4,
};

#endif /* DWUNW_KWALK_TRACK_H */
