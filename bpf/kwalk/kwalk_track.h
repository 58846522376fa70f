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
	KW_KIND_FILE,                      /* a mapping of a file kw_files does not hold (kw_file_rec) */
};

/*
 * struct kw_event.flags of a stop notice (kwalk_hybrid.bpf.h): the event up to its pcs only
 * (status, where it stopped); the sample itself follows as the tool's dwarf-mode snapshot.
 */
#define KW_EV_NOTICE 0x100

/* struct kw_track_rec.flags */
#define KW_TR_MISS 0x1                     /* a file the BPF side could not enter: not loaded yet */

struct kw_track_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 flags;                       /* KW_TR_* */
};

/*
 * A file the BPF side could not enter (kwalk_procmap.bpf.h): its identity, the mapping, and its
 * path as the dentries give it (up to its mount's root). User space loads it by that path once
 * stat shows the same identity, and enters the mapping, with no read of /proc/PID/maps, unless the
 * process exec'd since (the entry's image changed: the mapping was the old program's); else it
 * loads the process the old way.
 */
#define KW_PATH_MAX 512                /* the BPF side writes up to 383 bytes */
struct kw_file_rec {
	struct cap_rec_hdr h;
	__u32 pid;
	__u32 pathlen;                     /* bytes of path used (no NUL) */
	__u32 image;                       /* the entry's image when told (struct kw_proc.image) */
	__u32 pad;
	__u64 start, end, pgoff;           /* the mapping (pages of the file from pgoff) */
	__u64 dev, ino, size;              /* struct kw_file_key (kwalk_format.h) */
	char path[KW_PATH_MAX];
};

enum kw_track_counter {
	KW_TC_MMAP = 0,                    /* executable file mappings told */
	KW_TC_LOST,                        /* not told: pending table or buffer full */
	KW_TC_PM_ADD,                      /* mappings entered in kw_procs by the BPF side */
	KW_TC_PM_MISS,                     /* mappings of a file kw_files does not hold (told) */
	KW_TC_PM_EXEC,                     /* processes whose entry the BPF side made at exec */
	KW_TC_PM_FORK,                     /* entries copied to a forked child */
	KW_TC_PM_FULL,                     /* an entry not made: kw_procs full or KW_MAX_MAPS */
	KW_TC_PM_EXIT,                     /* entries freed at exit */
	KW_TC_EXEC_GONE,                   /* samples in execve past its point of no return (or unsure) */
	KW_TC_EXEC_WALK,                   /* samples in execve walked in the calling image */
	KW_TC_MAX = 12,
};

#endif /* DWUNW_KWALK_TRACK_H */
