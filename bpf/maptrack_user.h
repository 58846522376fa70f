/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The mapping tracker's programs (maptrack.bpf.h) attached once for all of a tool's consumers:
 * maps_view (mapev records) and kwalk_track (the walker's mmap notices) each ask for them; the
 * links go when the last of them lets go. A second attachment would run the programs twice and
 * send every record twice.
 */
#ifndef DWUNW_MAPTRACK_USER_H
#define DWUNW_MAPTRACK_USER_H

struct bpf_object;

/* 0, or a negative errno (nothing attached then). */
int maptrack_attach(struct bpf_object *obj);
void maptrack_detach(void);

#endif /* DWUNW_MAPTRACK_USER_H */
