/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Mapping changes of traced processes, sent by mmap_ev.bpf.h in the same ring buffer (or perf
 * buffer) as the tool's snapshot records, so user space (mappings.c) applies them in order with
 * the records: each record is unwound against the mappings of the moment it was captured.
 *
 * Included from BPF (after vmlinux.h) and from user space.
 */
#ifndef DWUNW_MMAP_EV_H
#define DWUNW_MMAP_EV_H

#include "capture.h"

#define MMAP_EV_NAME_PARTS 12   /* path components kept, innermost first */
#define MMAP_EV_PART_LEN   48   /* bytes per component, NUL included */

enum mmap_ev_op {
	MMAP_EV_MMAP = 1,     /* a file mapping appeared at [start, end) */
	MMAP_EV_MMAP_UNKNOWN, /* a file mapping appeared at [start, end), its file could not be read */
	MMAP_EV_MUNMAP,       /* [start, end) unmapped */
	MMAP_EV_EXEC,         /* a new image: every mapping went */
	MMAP_EV_MPROTECT,     /* [start, end) now has protection prot (made or left executable) */
	MMAP_EV_MREMAP,       /* [old_start, old_end) moved to [start, end) (executable mappings) */
	MMAP_EV_MMAP_ANON,    /* anonymous memory mapped executable at [start, end) (JIT code), prot */
};

/* struct mmap_ev_rec.flags */
#define MMAP_EV_F_PATH_CUT (1u << 0) /* more components, or a longer one, than kept: path unknown */

struct mmap_ev_rec {
	struct cap_rec_hdr h;  /* kind CAP_KIND_MAPEV, hdr_size = sizeof(struct mmap_ev_rec) */
	__u32 pid;             /* tgid */
	__u32 tid;
	__u64 ts;
	__u32 op;              /* enum mmap_ev_op */
	__u32 prot;            /* VM_READ 1 | VM_WRITE 2 | VM_EXEC 4 */
	__u64 start, end;
	__u64 offset;          /* file offset of start, in bytes */
	__u64 ino;
	__u32 dev_major, dev_minor;
	__u32 nparts;          /* path components in parts[] (0: unknown) */
	__u32 flags;           /* MMAP_EV_F_* */
	__u64 old_start, old_end; /* MMAP_EV_MREMAP: where the mapping was */
	char parts[MMAP_EV_NAME_PARTS][MMAP_EV_PART_LEN]; /* the file's path, last component first */
};

#endif /* DWUNW_MMAP_EV_H */
