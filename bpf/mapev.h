/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Mapping changes of traced processes, sent by mapev.bpf.h in the same ring buffer (or perf
 * buffer) as the tool's snapshot records, so user space (maps_view.c) applies them in order with
 * the records: each record is unwound against the mappings of the moment it was captured.
 *
 * Included from BPF (after vmlinux.h) and from user space.
 */
#ifndef DWUNW_MAPEV_H
#define DWUNW_MAPEV_H

#include "capture.h"

#define MAPEV_NAME_PARTS 12   /* path components kept, innermost first */
#define MAPEV_PART_LEN   48   /* bytes per component, NUL included */

enum mapev_op {
	MAPEV_MMAP = 1,     /* a file mapping appeared at [start, end) */
	MAPEV_MMAP_UNKNOWN, /* a file mapping appeared at [start, end), its file could not be read */
	MAPEV_MUNMAP,       /* [start, end) unmapped */
	MAPEV_EXEC,         /* a new image: every mapping went */
	MAPEV_MPROTECT,     /* [start, end) now has protection prot (made or left executable) */
	MAPEV_MREMAP,       /* [old_start, old_end) moved to [start, end) (executable mappings) */
};

/* struct mapev_rec.flags */
#define MAPEV_F_PATH_CUT (1u << 0) /* more components, or a longer one, than kept: path unknown */

struct mapev_rec {
	struct cap_rec_hdr h;  /* kind CAP_KIND_MAPEV, hdr_size = sizeof(struct mapev_rec) */
	__u32 pid;             /* tgid */
	__u32 tid;
	__u64 ts;
	__u32 op;              /* enum mapev_op */
	__u32 prot;            /* VM_READ 1 | VM_WRITE 2 | VM_EXEC 4 */
	__u64 start, end;
	__u64 offset;          /* file offset of start, in bytes */
	__u64 ino;
	__u32 dev_major, dev_minor;
	__u32 nparts;          /* path components in parts[] (0: unknown) */
	__u32 flags;           /* MAPEV_F_* */
	__u64 old_start, old_end; /* MAPEV_MREMAP: where the mapping was */
	char parts[MAPEV_NAME_PARTS][MAPEV_PART_LEN]; /* the file's path, last component first */
};

#endif /* DWUNW_MAPEV_H */
