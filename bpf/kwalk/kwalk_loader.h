/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Inside the in-kernel walker's table loader (kwalk_user.h): its state and what its files ask of
 * each other. Private to these files:
 *   kwalk_user.c     maps sized, the loader made and freed, its figures
 *   kwalk_rules.c    libdwunw's rules as the walker's, interned in kw_rules
 *   kwalk_table.c    a module's table re-encoded into kw_rows / kw_blocks, room made by eviction
 *   kwalk_mods.c     module slots: a file's or [vdso]'s identity, segments, kw_files entry
 *   kwalk_procs.c    processes: their executable mappings into kw_procs
 *   kwalk_preload.c  files and [vdso] loaded before any process maps them
 */
#ifndef DWUNW_KWALK_LOADER_H
#define DWUNW_KWALK_LOADER_H

#include <stddef.h>
#include <stdint.h>
#include "dwunw.h"
#include "kwalk_user.h"

struct stat;
struct dwunw_export_rule;

#define KW_MAX_MODS   1024
#define KW_PROC_SLOTS 4096     /* pids tracked in user space */

struct kw_seg {
	uint64_t off, vaddr, filesz;
};

struct kw_umod {
	char key[128];
	char path[512];
	uint32_t slot;             /* kw_mods index, 0 = none */
	uint32_t gen;
	uint32_t row_base, nrows, blk_base, nblocks;
	uint64_t src_rows;
	uint64_t last_use;
	int state;                 /* 0 = not loaded (evicted), 1 = loaded, < 0 = cannot (DWUNW_ERR_* / -ENOSPC) */
	int in_files;              /* fkey is in kw_files */
	struct kw_file_key fkey;   /* the identity the kernel sees (kw_files), once a mapping showed it */
	struct kw_seg segs[8];
	uint32_t nsegs;
	void *image;               /* [vdso] bytes (kept: the module cache serves them) */
	size_t image_size;
};

struct kw_uproc {
	int pid;
	uint64_t maps_hash;
	uint64_t evict_seen;
	uint32_t nmaps;
	struct kw_map maps[KW_MAX_MAPS];
	uint32_t umod[KW_MAX_MAPS];
};

struct kw_loader {
	struct dwunw_ctx ctx;
	int fd_rows, fd_blocks, fd_peer, fd_rules, fd_mods, fd_procs;
	int fd_files;              /* kw_files, when the object has the BPF side's process entries */
	int bpf_procs;             /* kw_procs entries made and freed by the BPF side too */
	uint64_t recycled;         /* module slots reused for another file */
	uint32_t rows_cap, blocks_cap, rules_cap, mods_cap, procs_cap, peer;
	uint64_t max_file;
	uint64_t scratch_bytes;
	struct kw_umod *mods;      /* index = slot (0 unused) */
	uint32_t nmods;            /* entries used in mods[] (slots 1..nmods-1) */
	struct kw_rule *rules;     /* by global id */
	uint32_t nrules, nunsup;
	uint32_t *rhash;           /* open addressing: gid + 1 */
	uint32_t rhash_size;
	struct kw_uproc **procs;
	uint32_t nprocs;
	uint64_t clock, evictions, gen;
};

/* kwalk_rules.c: libdwunw's rule -> the walker's; its global id (interned), -1 when kw_rules is full */
void kw_rule_from(const struct dwunw_export_rule *x, struct kw_rule *r);
int64_t kw_rule_intern(struct kw_loader *l, const struct kw_rule *r);

/* kwalk_table.c: um's table into the maps (stamp: its use, kept from eviction): 0, or DWUNW_ERR_* /
 * a negative errno */
int kw_mod_load(struct kw_loader *l, struct kw_umod *um, uint64_t stamp);

/* kwalk_mods.c: a module's segments and mapping bias; in use (loaded, in kw_files); its slot by key;
 * [vdso] of a process and a file (stat) as modules */
void kw_read_segs(struct kw_umod *um);
int64_t kw_bias_of(const struct kw_umod *um, uint64_t start, uint64_t off);
int kw_mod_ready(struct kw_loader *l, struct kw_umod *um, uint64_t stamp);
struct kw_umod *kw_mod_find_or_add(struct kw_loader *l, const char *key, const char *path);
int kw_vdso_mod(struct kw_loader *l, int pid, uint64_t start, size_t sz, struct kw_umod **out);
int kw_mod_of_file(struct kw_loader *l, const char *path, const struct stat *st, struct kw_umod **out);

/* FNV-1a of n bytes: a [vdso] image's key, a process's maps text */
static inline uint64_t kw_fnv64(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

#endif /* DWUNW_KWALK_LOADER_H */
