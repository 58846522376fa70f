/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * User side of the in-kernel walker (kwalk.bpf.h): sizes its maps from a memory budget, then
 * fills them from libdwunw's tables, per process: each executable file mapping (and [vdso])
 * becomes a module slot shared by every process mapping the same file (by build id, else
 * device/inode/size/mtime), its rows re-encoded at 4 bytes with a block index, its rules
 * deduplicated across everything loaded. When the budget is full, the modules used least
 * recently are evicted; a module that still does not fit is left out (its frames fall back
 * to the snapshot path). Loading never fails because of the budget.
 *
 *   skel = X__open();  kw_size_maps(skel->obj, &opts);  X__load(skel);
 *   l = kw_loader_new(skel->obj, &opts);
 *   kw_load_pid(l, pid);              when a process starts, maps a library, or an event says
 *                                     KW_ST_NO_PROC / NO_MAPPING (kw_wants_reload)
 */
#ifndef DWUNW_KWALK_USER_H
#define DWUNW_KWALK_USER_H

#include <stddef.h>
#include <stdint.h>
#include "kwalk_format.h"

struct bpf_object;
struct kw_loader;

#define KW_DEF_BUDGET (64ull << 20)
#define KW_DEF_ROWS   (2u << 20)    /* row capacity when the caller gives no hint */

struct kw_opts {
	uint64_t budget;            /* bytes of maps at most; 0 = KW_DEF_BUDGET */
	uint32_t rows;              /* row capacity wanted; 0 = KW_DEF_ROWS (both capped by budget) */
	uint32_t peer;              /* also fill kw_peer_pcs (the binary-search peer walker) */
	uint32_t max_procs;         /* kw_procs entries; 0 = 1024 */
	uint32_t max_rules;         /* 0 = 16384 */
	uint64_t max_file;          /* files larger than this get no table (their frames fall back:
	                             * no-table); 0 = no limit. A whole-system tool's bound on the
	                             * seconds one table build holds its consumer */
};

struct kw_stats {
	uint64_t map_bytes;         /* value bytes of every kwalk map as sized (procs: as used) */
	uint64_t table_bytes;       /* rows + blocks in use + rules in use */
	uint64_t src_rows;          /* libdwunw rows of the loaded modules */
	uint64_t rows;              /* kernel rows in use */
	uint64_t blocks;            /* block-index entries in use */
	uint64_t rules;             /* distinct rules */
	uint64_t unsup_rules;       /* of which the walker does not evaluate */
	uint64_t modules;           /* loaded */
	uint64_t evictions;
	uint64_t skipped;           /* modules left out: budget, or no CFI */
	uint64_t procs;             /* kw_procs entries (the kernel's, with kw_loader_bpf_procs) */
	uint64_t files;             /* kw_files entries */
	uint64_t recycled;          /* module slots given to another file */
	uint64_t row_capacity;
};

/* Before load: size the maps (0 or a negative errno). */
int kw_size_maps(struct bpf_object *obj, const struct kw_opts *opts);

/* After load. NULL on failure (errno). */
struct kw_loader *kw_loader_new(struct bpf_object *obj, const struct kw_opts *opts);
void kw_loader_free(struct kw_loader *l);

/* Load (or refresh) a process's executable mappings and their tables: 0, or a negative errno
 * (the process is gone). Cheap when its maps did not change. */
int kw_load_pid(struct kw_loader *l, int pid);
/* The BPF side makes and frees kw_procs entries (kwalk_procmap.bpf.h): user space then drops
 * only its own record of a process at exec and exit, and counts the kernel's entries. */
void kw_loader_bpf_procs(struct kw_loader *l, int on);
/* A file the BPF side told of (kwalk_track.h's kw_file_rec): loaded by path when stat shows the
 * identity fk, and pid's mapping [start, end) at file offset off entered in its kernel entry if
 * that is still of image (struct kw_proc.image: not after an exec). 0, or a negative errno
 * (-ESTALE: the path names another file; load the process instead). */
int kw_enter_file(struct kw_loader *l, int pid, uint32_t image, const char *path, const struct kw_file_key *fk,
		  uint64_t start, uint64_t end, uint64_t off);
/* The process exited: drop its entry (its modules stay cached until evicted). */
void kw_forget_pid(struct kw_loader *l, int pid);
/* Should an event with this status make user space reload the process? */
int kw_wants_reload(unsigned status);

void kw_get_stats(struct kw_loader *l, struct kw_stats *out);
/* A global rule in readable form ("cfa=rsp+8 ra=c-8 rbp=c-16", "unsup(cfa-expr)"). */
void kw_rule_text(struct kw_loader *l, uint32_t gid, char *buf, size_t len);
/* The module (path) of a process's pc, for reports; NULL if unknown. */
const char *kw_pc_module(struct kw_loader *l, int pid, uint64_t pc, uint64_t *mod_addr);

const char *kw_status_name(unsigned status);
const char *kw_why_name(unsigned why);

#endif /* DWUNW_KWALK_USER_H */
