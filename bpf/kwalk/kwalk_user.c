// SPDX-License-Identifier: GPL-2.0-only
/* Loader of the in-kernel walker's maps (kwalk_user.h): the maps sized from a budget, the loader
 * made and freed, its figures. Its parts: kwalk_loader.h. */
#include <errno.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kwalk_loader.h"

const char *kw_status_name(unsigned s)
{
	static const char *n[] = { "ok", "depth", "no-code", "no-proc", "no-mapping", "no-table", "no-dwarf",
				   "unsupported-rule", "register-unknown", "read-fault", "no-progress", "busy" };
	return s < KW_ST_MAX ? n[s] : "?";
}

int kw_wants_reload(unsigned status)
{
	return status == KW_ST_NO_PROC || status == KW_ST_NO_MAPPING || status == KW_ST_NO_TABLE;
}

/* ---- Sizing ------------------------------------------------------------------------------ */

struct kw_sizes {
	uint32_t rows, blocks, peer, rules, mods, procs;
};

static void kw_sizes_of(const struct kw_opts *o, struct kw_sizes *s)
{
	uint64_t budget = o && o->budget ? o->budget : KW_DEF_BUDGET, fixed, avail, per_row, rows;

	s->rules = o && o->max_rules ? o->max_rules : 16384;
	if (s->rules > KW_MAX_RULES)
		s->rules = KW_MAX_RULES;
	s->mods = KW_MAX_MODS;
	s->procs = o && o->max_procs ? o->max_procs : 1024;
	fixed = (uint64_t)s->rules * sizeof(struct kw_rule) + (uint64_t)s->mods * sizeof(struct kw_mod) +
		(uint64_t)s->procs * sizeof(struct kw_proc) + 4 * (uint64_t)s->mods * 4;
	avail = budget > fixed ? budget - fixed : 0;
	per_row = 4 + 1 + (o && o->peer ? 4 : 0);  /* row + block index (<= 1 entry per 4 rows) */
	rows = o && o->rows ? o->rows : KW_DEF_ROWS;
	if (rows > avail / per_row)
		rows = avail / per_row;
	if (rows < 1024)
		rows = 1024;
	s->rows = (uint32_t)rows;
	s->blocks = s->rows / 4 + 4 * s->mods;
	s->peer = o && o->peer ? s->rows : 1;
}

int kw_size_maps(struct bpf_object *obj, const struct kw_opts *opts)
{
	struct kw_sizes s;
	struct {
		const char *name;
		uint32_t n;
	} m[6];
	struct bpf_map *files = bpf_object__find_map_by_name(obj, "kw_files");
	struct bpf_map *cache = bpf_object__find_map_by_name(obj, "kw_cache");
	int err;

	kw_sizes_of(opts, &s);
	m[0].name = "kw_rows", m[0].n = s.rows;
	m[1].name = "kw_blocks", m[1].n = s.blocks;
	m[2].name = "kw_peer_pcs", m[2].n = s.peer;
	m[3].name = "kw_rules", m[3].n = s.rules;
	m[4].name = "kw_mods", m[4].n = s.mods;
	m[5].name = "kw_procs", m[5].n = s.procs;
	for (int i = 0; i < 6; i++) {
		struct bpf_map *map = bpf_object__find_map_by_name(obj, m[i].name);

		if (!map)
			return -ENOENT;
		if ((err = bpf_map__set_max_entries(map, m[i].n)))
			return err;
	}
	/* the rule cache: one value per CPU (an mmapable array, so each entry is one cache line) */
	if (cache && (err = bpf_map__set_max_entries(cache, (uint32_t)libbpf_num_possible_cpus())))
		return err;
	return files ? bpf_map__set_max_entries(files, s.mods) : 0;
}

static int map_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	return m ? bpf_map__fd(m) : -1;
}

struct kw_loader *kw_loader_new(struct bpf_object *obj, const struct kw_opts *opts)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = 64,
				    .flags = DWUNW_CFG_NO_DEBUG_FILES };
	struct kw_loader *l = calloc(1, sizeof(*l));
	struct kw_sizes s;
	struct kw_rule end = {};

	if (!l)
		return NULL;
	kw_sizes_of(opts, &s);
	l->rows_cap = s.rows;
	l->blocks_cap = s.blocks;
	l->rules_cap = s.rules;
	l->mods_cap = s.mods;
	l->procs_cap = s.procs;
	l->peer = opts && opts->peer;
	l->max_file = opts ? opts->max_file : 0;
	l->fd_rows = map_fd(obj, "kw_rows");
	l->fd_blocks = map_fd(obj, "kw_blocks");
	l->fd_peer = map_fd(obj, "kw_peer_pcs");
	l->fd_rules = map_fd(obj, "kw_rules");
	l->fd_mods = map_fd(obj, "kw_mods");
	l->fd_procs = map_fd(obj, "kw_procs");
	l->fd_files = map_fd(obj, "kw_files");
	l->scratch_bytes = (uint64_t)libbpf_num_possible_cpus() * (8 + 9 * KW_MAX_FRAMES);
	l->rhash_size = 1;
	while (l->rhash_size < 2 * l->rules_cap)
		l->rhash_size <<= 1;
	l->mods = calloc(l->mods_cap, sizeof(*l->mods));
	l->rules = calloc(l->rules_cap, sizeof(*l->rules));
	l->rhash = calloc(l->rhash_size, sizeof(*l->rhash));
	l->procs = calloc(KW_PROC_SLOTS, sizeof(*l->procs));
	l->nmods = 1;
	if (l->fd_rows < 0 || l->fd_blocks < 0 || l->fd_peer < 0 || l->fd_rules < 0 || l->fd_mods < 0 ||
	    l->fd_procs < 0 || !l->mods || !l->rules || !l->rhash || !l->procs ||
	    dwunw_init(&l->ctx, &cfg) != DWUNW_OK) {
		free(l->mods);
		free(l->rules);
		free(l->rhash);
		free(l->procs);
		free(l);
		errno = EINVAL;
		return NULL;
	}
	elf_version(EV_CURRENT);
	kw_rule_intern(l, &end); /* id 0 = END */
	return l;
}

void kw_loader_free(struct kw_loader *l)
{
	if (!l)
		return;
	dwunw_shutdown(&l->ctx);
	for (uint32_t i = 0; i < l->nmods; i++)
		free(l->mods[i].image);
	for (uint32_t i = 0; i < KW_PROC_SLOTS; i++)
		free(l->procs[i]);
	free(l->mods);
	free(l->rules);
	free(l->rhash);
	free(l->procs);
	free(l);
}

void kw_loader_bpf_procs(struct kw_loader *l, int on)
{
	l->bpf_procs = on;
}

void kw_get_stats(struct kw_loader *l, struct kw_stats *o)
{
	memset(o, 0, sizeof(*o));
	for (uint32_t i = 1; i < l->nmods; i++) {
		const struct kw_umod *m = &l->mods[i];

		if (m->state == 1) {
			o->modules++;
			o->src_rows += m->src_rows;
			o->rows += m->nrows;
			o->blocks += m->nblocks + 1;
		} else if (m->state < 0) {
			o->skipped++;
		}
	}
	o->rules = l->nrules;
	o->unsup_rules = l->nunsup;
	o->evictions = l->evictions;
	o->recycled = l->recycled;
	o->procs = l->nprocs;
	if (l->bpf_procs) { /* the kernel's entries: the BPF side makes and frees them too */
		uint32_t key, next, n = 0;
		int err = bpf_map_get_next_key(l->fd_procs, NULL, &next);

		while (!err && n < l->procs_cap) {
			n++;
			key = next;
			err = bpf_map_get_next_key(l->fd_procs, &key, &next);
		}
		o->procs = n;
	}
	for (uint32_t i = 1; i < l->nmods; i++)
		o->files += l->mods[i].in_files;
	o->row_capacity = l->rows_cap;
	o->table_bytes = o->rows * 4 + o->blocks * 4 + (uint64_t)l->nrules * sizeof(struct kw_rule);
	o->map_bytes = (uint64_t)l->rows_cap * 4 + (uint64_t)l->blocks_cap * 4 +
		       (uint64_t)(l->peer ? l->rows_cap : 1) * 4 + (uint64_t)l->rules_cap * sizeof(struct kw_rule) +
		       (uint64_t)l->mods_cap * sizeof(struct kw_mod) + o->procs * sizeof(struct kw_proc) +
		       o->files * (sizeof(struct kw_file_key) + sizeof(struct kw_file)) + l->scratch_bytes;
}
