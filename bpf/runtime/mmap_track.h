/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The mapping tracker's programs (mmap_track.bpf.h) attached once for all of a tool's consumers:
 * mappings (mmap_ev records) and kwalk_track (the walker's mmap notices) each ask for them; the
 * links go when the last of them lets go. A second attachment would run the programs twice and
 * send every record twice.
 */
#ifndef DWUNW_MMAP_TRACK_H
#define DWUNW_MMAP_TRACK_H

struct bpf_object;

/* 0, or a negative errno (nothing attached then). */
int mmap_track_attach(struct bpf_object *obj);
void mmap_track_detach(void);

#endif /* DWUNW_MMAP_TRACK_H */
