// SPDX-License-Identifier: GPL-2.0-only
/* Loader of the in-kernel walker's maps (kwalk_user.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dwunw.h"
#include "dwunw_export.h"
#include "kwalk_user.h"

#define KW_MAX_MODS   1024
#define KW_BATCH      65536
#define KW_PAD_GAP    16       /* END rows of gaps shorter than this (alignment padding) are dropped */
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

static const uint8_t plt_expr10[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22 };
static const uint8_t plt_expr11[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22 };

const char *kw_status_name(unsigned s)
{
	static const char *n[] = { "ok", "depth", "no-code", "no-proc", "no-mapping", "no-table", "no-dwarf",
				   "unsupported-rule", "register-unknown", "read-fault", "no-progress", "busy" };
	return s < KW_ST_MAX ? n[s] : "?";
}

const char *kw_why_name(unsigned w)
{
	static const char *n[] = { "", "cfa-expression", "cfa-register", "ra-rule", "register-rule",
				   "offset-range", "no-cfa" };
	return w < sizeof(n) / sizeof(n[0]) ? n[w] : "?";
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

/* ---- Rules -------------------------------------------------------------------------------- */

static int sleb(const uint8_t **p, const uint8_t *end, int64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*p >= end || shift > 63)
			return -1;
		b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	*out = (int64_t)v;
	return 0;
}

static int uleb(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*p >= end || shift > 63)
			return -1;
		b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	*out = v;
	return 0;
}

/* CFA expressions the walker evaluates: the PLT's, bregN off [deref [plus_uconst k]]. */
static void cfa_expr(const uint8_t *e, uint32_t len, struct kw_rule *r)
{
	const uint8_t *p = e, *end = e + len;
	int64_t off;
	uint64_t add;

	if (!KW_ARM64 && len == sizeof(plt_expr11) && (!memcmp(e, plt_expr11, len) || !memcmp(e, plt_expr10, len))) {
		r->cfa_type = KW_CFA_PLT;
		r->cfa_off = 8;
		r->cfa_add = e[6] == 0x3b ? 11 : 10;
		return;
	}
	r->cfa_type = KW_CFA_UNSUP;
	r->cfa_reg = KW_WHY_CFA_EXPR;
	if (len < 2 || e[0] < 0x70 || e[0] > 0x7f)
		return;
	p++;
	if (sleb(&p, end, &off) || off < INT32_MIN || off > INT32_MAX)
		return;
	if (p == end) {
		if (e[0] - 0x70 >= KW_NREGS)
			return;
		r->cfa_type = KW_CFA_REG;
		r->cfa_reg = e[0] - 0x70;
		r->cfa_off = (int32_t)off;
		return;
	}
	if (*p++ != 0x06) /* DW_OP_deref */
		return;
	add = 0;
	if (p < end) {
		if (*p++ != 0x23 || uleb(&p, end, &add) || add > INT16_MAX || p != end)
			return;
	}
	r->cfa_type = KW_CFA_DEREF;
	r->cfa_reg = e[0] - 0x70;
	r->cfa_off = (int32_t)off;
	r->cfa_add = (int16_t)add;
}

static int slot_of(unsigned reg)
{
#if KW_ARM64
	return reg >= 19 && reg <= 30 ? (int)reg - 19 : -1;
#else
	switch (reg) {
	case 3: return 0;
	case 6: return 1;
	case 12: case 13: case 14: case 15: return (int)reg - 10;
	default: return -1;
	}
#endif
}

/* libdwunw's rule -> the walker's. */
static void kw_rule_from(const struct dwunw_export_rule *x, struct kw_rule *r)
{
	int ra_seen = 0;

	memset(r, 0, sizeof(*r));
	if (x->cfa_kind == DWUNW_XCFA_END)
		return;
	if (x->flags & DWUNW_ROW_SIGNAL)
		r->flags |= KW_RF_SIGNAL;
	if (x->cfa_kind == DWUNW_XCFA_REG) {
		if (x->cfa_reg >= KW_NREGS) {
			r->cfa_type = KW_CFA_UNSUP;
			r->cfa_reg = KW_WHY_CFA_REG;
			return;
		}
		r->cfa_type = KW_CFA_REG;
		r->cfa_reg = (uint8_t)x->cfa_reg;
		r->cfa_off = x->cfa_off;
	} else if (x->cfa_kind == DWUNW_XCFA_EXPR) {
		cfa_expr(x->cfa_expr, x->cfa_expr_len, r);
		if (r->cfa_type == KW_CFA_UNSUP)
			return;
	} else {
		r->cfa_type = KW_CFA_UNSUP;
		r->cfa_reg = KW_WHY_NO_CFA;
		return;
	}
#define UNSUP(w) do { r->cfa_type = KW_CFA_UNSUP; r->cfa_reg = (w); return; } while (0)
	if ((r->cfa_type == KW_CFA_REG || r->cfa_type == KW_CFA_DEREF) && r->cfa_reg >= KW_NREGS)
		UNSUP(KW_WHY_CFA_REG);
	for (unsigned i = 0; i < x->nregs; i++) {
		unsigned reg = x->regs[i].reg, kind = x->regs[i].kind;
		int32_t val = x->regs[i].val;
		int s;

		if (reg == x->ra_reg && !KW_ARM64) {
			ra_seen = 1;
			if (kind == DWUNW_XREG_UNDEF) {
				r->flags |= KW_RF_RA_UNDEF;
				continue;
			}
			if (kind != DWUNW_XREG_OFFSET)
				UNSUP(KW_WHY_RA_RULE);
			if (val % 8 || val / 8 < -128 || val / 8 > 127)
				UNSUP(KW_WHY_OFFSET);
			r->ra_off = (int8_t)(val / 8);
			continue;
		}
		if (reg == KW_SP) /* a rule for the stack pointer itself */
			UNSUP(KW_WHY_REG_RULE);
		if (KW_ARM64 && reg == x->ra_reg) {
			ra_seen = 1; /* x30: an ordinary slot below, or undefined (the outermost frame) */
			if (kind == DWUNW_XREG_UNDEF) {
				r->flags |= KW_RF_RA_UNDEF;
				continue;
			}
		}
		s = slot_of(reg);
		if (s < 0)
			continue; /* caller-saved or vector registers: unknown in the caller anyway */
		switch (kind) {
		case DWUNW_XREG_SAME:
			break;
		case DWUNW_XREG_UNDEF:
			r->undef_regs |= 1u << reg;
			break;
		case DWUNW_XREG_OFFSET:
			if (val % 8 || val / 8 < -128 || val / 8 > 127)
				UNSUP(KW_WHY_OFFSET);
			r->saved |= 1u << s;
			r->off[s] = (int8_t)(val / 8);
			break;
		default:
			UNSUP(KW_WHY_REG_RULE);
		}
	}
	if (!ra_seen && !KW_ARM64)
		r->flags |= KW_RF_RA_UNDEF; /* no rule for the pseudo column: the chain ends */
	if (!ra_seen && KW_ARM64)
		r->flags |= KW_RF_RA_LR;   /* a leaf: the return address is still in x30 */
	if (KW_ARM64 && x->ra_reg != KW_LR)
		UNSUP(KW_WHY_RA_RULE);
	{
		int win = KW_ARM64 || (r->flags & KW_RF_RA_UNDEF) || (r->ra_off >= -8 && r->ra_off < 0);

		for (int i = 0; i < KW_NSAVED; i++)
			if ((r->saved & (1u << i)) && (r->off[i] < -8 || r->off[i] >= 0))
				win = 0;
		if (win)
			r->flags |= KW_RF_WINDOW;
	}
#undef UNSUP
}

static uint32_t rule_hash(const struct kw_rule *r)
{
	const uint8_t *p = (const uint8_t *)r;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(*r); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Global id of a rule (interned); -1 when the rule table is full. */
static int64_t rule_intern(struct kw_loader *l, const struct kw_rule *r)
{
	uint32_t h = rule_hash(r) & (l->rhash_size - 1);

	for (;;) {
		uint32_t e = l->rhash[h];

		if (!e)
			break;
		if (!memcmp(&l->rules[e - 1], r, sizeof(*r)))
			return e - 1;
		h = (h + 1) & (l->rhash_size - 1);
	}
	if (l->nrules >= l->rules_cap)
		return -1;
	l->rules[l->nrules] = *r;
	if (bpf_map_update_elem(l->fd_rules, &l->nrules, r, BPF_ANY))
		return -1;
	l->rhash[h] = ++l->nrules;
	if (r->cfa_type == KW_CFA_UNSUP)
		l->nunsup++;
	return l->nrules - 1;
}

void kw_rule_text(struct kw_loader *l, uint32_t gid, char *buf, size_t len)
{
#if KW_ARM64
	static const char *rn[KW_NREGS] = { "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
		"x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24",
		"x25", "x26", "x27", "x28", "x29", "x30", "sp" };
	static const char *sn[KW_NSAVED] = { "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
		"x28", "x29", "x30" };
#else
	static const char *rn[KW_NREGS] = { "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
				    "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
	static const char *sn[KW_NSAVED] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
#endif
	const struct kw_rule *r;
	size_t n = 0;

	if (!l || gid >= l->nrules) {
		snprintf(buf, len, "-");
		return;
	}
	r = &l->rules[gid];
	switch (r->cfa_type) {
	case KW_CFA_END: snprintf(buf, len, "end"); return;
	case KW_CFA_UNSUP: snprintf(buf, len, "unsupported(%s)", kw_why_name(r->cfa_reg)); return;
	case KW_CFA_REG: n = snprintf(buf, len, "cfa=%s%+d", rn[r->cfa_reg & (KW_NREGS - 1)], r->cfa_off); break;
	case KW_CFA_DEREF:
		n = snprintf(buf, len, "cfa=*(%s%+d)%+d", rn[r->cfa_reg & (KW_NREGS - 1)], r->cfa_off, r->cfa_add);
		break;
	case KW_CFA_PLT: n = snprintf(buf, len, "cfa=plt(rsp+%d,%d)", r->cfa_off, r->cfa_add); break;
	}
	if (n < len)
	{
		if (r->flags & KW_RF_RA_UNDEF)
			n += snprintf(buf + n, len - n, " ra=u");
		else if (KW_ARM64)
			n += snprintf(buf + n, len - n, (r->flags & KW_RF_RA_LR) ? " ra=x30" : " ra=slot");
		else
			n += snprintf(buf + n, len - n, " ra=c%+d", 8 * r->ra_off);
	}
	for (int i = 0; i < KW_NSAVED && n < len; i++) {
		if (r->saved & (1u << i))
			n += snprintf(buf + n, len - n, " %s=c%+d", sn[i], 8 * r->off[i]);
		else if (r->undef_regs & (1u << (KW_ARM64 ? 19 + i : i == 0 ? 3 : i == 1 ? 6 : 10 + i)))
			n += snprintf(buf + n, len - n, " %s=u", sn[i]);
	}
	if ((r->flags & KW_RF_SIGNAL) && n < len)
		snprintf(buf + n, len - n, " signal");
}

/* ---- Loader ------------------------------------------------------------------------------- */

static int map_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	return m ? bpf_map__fd(m) : -1;
}

struct kw_loader *kw_loader_new(struct bpf_object *obj, const struct kw_opts *opts)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = 64,
				    .flags = DWUNW_CFG_NO_DEBUG_FILES,
				    .cache_bytes = opts ? opts->cache_bytes : 0 };
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
	rule_intern(l, &end); /* id 0 = END */
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

/* First free [base, base+n) in an arena of `cap` entries, given the loaded modules' ranges. */
static int arena_find(struct kw_loader *l, int rows, uint32_t n, uint32_t cap, uint32_t *base)
{
	uint32_t at = 0;

	for (;;) {
		int moved = 0;

		if ((uint64_t)at + n > cap)
			return -1;
		for (uint32_t i = 1; i < l->nmods; i++) {
			struct kw_umod *m = &l->mods[i];
			uint32_t b = rows ? m->row_base : m->blk_base, c = rows ? m->nrows : m->nblocks + 1;

			if (m->state != 1)
				continue;
			if (at < b + c && b < at + n) {
				at = b + c;
				moved = 1;
			}
		}
		if (!moved) {
			*base = at;
			return 0;
		}
	}
}

static void mod_evict(struct kw_loader *l, struct kw_umod *m)
{
	struct kw_mod zero = {};

	bpf_map_update_elem(l->fd_mods, &m->slot, &zero, BPF_ANY);
	m->state = 0;
	l->evictions++;
}

/* The modules of the processes the BPF side entered count as used now: user space never
 * loaded those processes, so their modules' last_use says nothing of them. */
static void mark_live(struct kw_loader *l, uint64_t stamp)
{
	struct kw_proc *kp;
	uint32_t key, next, n = 0;
	int err;

	if (!l->bpf_procs || !(kp = malloc(sizeof(*kp))))
		return;
	err = bpf_map_get_next_key(l->fd_procs, NULL, &next);
	while (!err && n++ < l->procs_cap) {
		key = next;
		if (!bpf_map_lookup_elem(l->fd_procs, &key, kp))
			for (uint32_t i = 0; i < kp->nmaps && i < KW_MAX_MAPS; i++) {
				uint32_t s = kp->maps[i].mod;

				if (s && s < l->nmods && l->mods[s].gen == kp->maps[i].gen && l->mods[s].last_use < stamp)
					l->mods[s].last_use = stamp - 1; /* below `keep` (the module being loaded) */
			}
		err = bpf_map_get_next_key(l->fd_procs, &key, &next);
	}
	free(kp);
}

/* Room for n rows and nb+1 blocks, evicting the least recently used modules (not `keep`). */
static int make_room(struct kw_loader *l, uint32_t n, uint32_t nb, uint64_t keep, uint32_t *rb, uint32_t *bb)
{
	int marked = 0;

	for (;;) {
		struct kw_umod *victim = NULL;

		if (!arena_find(l, 1, n, l->rows_cap, rb) && !arena_find(l, 0, nb + 1, l->blocks_cap, bb))
			return 0;
		if (!marked++)
			mark_live(l, keep);
		for (uint32_t i = 1; i < l->nmods; i++) {
			struct kw_umod *m = &l->mods[i];

			if (m->state == 1 && m->last_use != keep && (!victim || m->last_use < victim->last_use))
				victim = m;
		}
		if (!victim)
			return -ENOSPC;
		mod_evict(l, victim);
	}
}

static int write_array(int fd, uint32_t base, const void *vals, uint32_t n, size_t vsize)
{
	static uint32_t keys[KW_BATCH];

	for (uint32_t done = 0; done < n;) {
		uint32_t c = n - done > KW_BATCH ? KW_BATCH : n - done, cnt = c;
		LIBBPF_OPTS(bpf_map_batch_opts, o);

		for (uint32_t i = 0; i < c; i++)
			keys[i] = base + done + i;
		if (bpf_map_update_batch(fd, keys, (const uint8_t *)vals + (size_t)done * vsize, &cnt, &o)) {
			/* older kernels: one by one */
			for (uint32_t i = 0; i < c; i++)
				if (bpf_map_update_elem(fd, &keys[i], (const uint8_t *)vals + (size_t)(done + i) * vsize, BPF_ANY))
					return -errno;
		}
		done += c;
	}
	return 0;
}

/*
 * Is [addr, addr+n) alignment padding (nops, int3, zero fill)? Only then may the END row of a
 * gap go: a short gap may also hold code without CFI (glibc's clone3 after its syscall: test,
 * jl, je, ret), where the previous FDE's last rule would be a guess (right for the parent, a read
 * fault on the child's fresh stack). Unknown bytes or another arch: code, END kept.
 */
static int gap_is_padding(struct kw_loader *l, struct dwunw_module *dm, uint64_t addr, uint64_t n)
{
	uint8_t b[KW_PAD_GAP];
	uint64_t i = 0;

	if (n > sizeof(b) || dwunw_export_code(&l->ctx, dm, addr, b, n))
		return 0;
#if defined(__x86_64__)
	while (i < n) {
		uint8_t m;

		while (i < n && (b[i] == 0x66 || b[i] == 0x2e)) /* operand-size, cs prefixes of long nops */
			i++;
		if (i < n && (b[i] == 0x90 || b[i] == 0xcc || b[i] == 0x00)) {
			i++;
			continue;
		}
		if (i + 3 > n || b[i] != 0x0f || b[i + 1] != 0x1f)
			return 0;
		m = b[i + 2]; /* nopl/nopw r/m: modrm, SIB when rm = 4, disp8 or disp32 */
		i += 3 + ((m & 7) == 4 && (m >> 6) != 3) + ((m >> 6) == 1 ? 1 : (m >> 6) == 2 ? 4 : 0);
	}
	return i == n;
#elif defined(__aarch64__)
	for (; i + 4 <= n; i += 4) {
		uint32_t w = (uint32_t)b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16 | (uint32_t)b[i + 3] << 24;

		if (w != 0xd503201f && w != 0)
			return 0;
	}
	return i == n;
#else
	return 0;
#endif
}

/* Re-encode a module's table into the maps. */
static int mod_load(struct kw_loader *l, struct kw_umod *um, uint64_t stamp)
{
	struct dwunw_module *dm = NULL;
	struct dwunw_export_info info;
	struct dwunw_export_rule *xr = NULL;
	uint64_t *pcs = NULL, *kpcs = NULL, text_lo, text_hi, span;
	uint32_t *ids = NULL, *lg = NULL, *krows = NULL, *blocks = NULL, *peer = NULL, nk = 0, nb, shift;
	uint32_t rb, bb;
	struct kw_mod km = {};
	int err;

	if (l->max_file && um->fkey.size > l->max_file)
		return -EFBIG;
	if (um->image)
		err = dwunw_module_open_image(&l->ctx, um->key, um->image, um->image_size, &dm);
	else
		err = dwunw_module_open(&l->ctx, um->path, &dm);
	if (err)
		return err;
	err = dwunw_export_info(&l->ctx, dm, &info);
	if (!err && (info.rows == 0 || info.rows > (1u << 26)))
		err = DWUNW_ERR_NO_DWARF;
	if (err)
		goto out;
	pcs = malloc(info.rows * sizeof(*pcs));
	kpcs = malloc(info.rows * sizeof(*kpcs));
	ids = malloc(info.rows * sizeof(*ids));
	krows = malloc(info.rows * sizeof(*krows));
	lg = malloc(info.rules * sizeof(*lg));
	xr = malloc(sizeof(*xr));
	if (!pcs || !kpcs || !ids || !krows || !lg || !xr) {
		err = -ENOMEM;
		goto out;
	}
	if (dwunw_export_rows(&l->ctx, dm, 0, info.rows, pcs, ids) != (int64_t)info.rows) {
		err = DWUNW_ERR_CORRUPT;
		goto out;
	}
	memset(lg, 0xff, info.rules * sizeof(*lg));
	for (uint64_t i = 0; i < info.rows; i++) {
		uint32_t id = ids[i], g;

		if (id >= info.rules) {
			err = DWUNW_ERR_CORRUPT;
			goto out;
		}
		if (lg[id] == ~0u) {
			struct kw_rule r;
			int64_t gid;

			if (dwunw_export_rule(&l->ctx, dm, id, xr) == DWUNW_OK)
				kw_rule_from(xr, &r);
			else
				memset(&r, 0, sizeof(r)), r.cfa_type = KW_CFA_UNSUP, r.cfa_reg = KW_WHY_REG_RULE;
			gid = rule_intern(l, &r);
			if (gid < 0) {
				err = -ENOSPC; /* rule table full */
				goto out;
			}
			lg[id] = (uint32_t)gid;
		}
		g = lg[id];
		/* drop a row repeating the previous rule, and the END of alignment padding */
		if (nk && KW_ROW_RULE(krows[nk - 1]) == g)
			continue;
		if (g == 0 && nk && i + 1 < info.rows && pcs[i + 1] - pcs[i] < KW_PAD_GAP &&
		    gap_is_padding(l, dm, pcs[i], pcs[i + 1] - pcs[i]))
			continue;
		krows[nk] = KW_ROW(pcs[i] & 0xffff, g);
		kpcs[nk++] = pcs[i];
	}
	text_lo = kpcs[0];
	text_hi = KW_ROW_RULE(krows[nk - 1]) == 0 ? kpcs[nk - 1] : ~0ull;
	span = kpcs[nk - 1] - text_lo;
	if (span > (1ull << 40)) {
		err = DWUNW_ERR_CORRUPT;
		goto out;
	}
	/* the smallest block with at most one index entry per 16 rows */
	for (shift = 4; shift < KW_MAX_SHIFT; shift++)
		if ((span >> shift) + 2 <= nk / 16 + 2)
			break;
	nb = (uint32_t)(span >> shift) + 1;
	blocks = malloc((nb + 1) * sizeof(*blocks));
	if (l->peer)
		peer = malloc(nk * sizeof(*peer));
	if (!blocks || (l->peer && !peer)) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = make_room(l, nk, nb, stamp, &rb, &bb)))
		goto out;
	for (uint32_t b = 0, r = 0; b <= nb; b++) {
		uint64_t start = text_lo + ((uint64_t)b << shift);

		while (r + 1 < nk && kpcs[r + 1] <= start)
			r++;
		blocks[b] = rb + r;
	}
	if (peer)
		for (uint32_t i = 0; i < nk; i++)
			peer[i] = (uint32_t)(kpcs[i] - text_lo);
	if ((err = write_array(l->fd_rows, rb, krows, nk, 4)) ||
	    (err = write_array(l->fd_blocks, bb, blocks, nb + 1, 4)) ||
	    (peer && (err = write_array(l->fd_peer, rb, peer, nk, 4))))
		goto out;
	km.gen = um->gen;
	km.row_base = rb;
	km.nrows = nk;
	km.blk_base = bb;
	km.nblocks = nb;
	km.shift = shift;
	km.text_lo = text_lo;
	km.text_hi = text_hi;
	if (bpf_map_update_elem(l->fd_mods, &um->slot, &km, BPF_ANY)) {
		err = -errno;
		goto out;
	}
	um->row_base = rb;
	um->nrows = nk;
	um->blk_base = bb;
	um->nblocks = nb;
	um->src_rows = info.rows;
	um->state = 1;
out:
	free(pcs);
	free(kpcs);
	free(ids);
	free(krows);
	free(lg);
	free(xr);
	free(blocks);
	free(peer);
	dwunw_module_put(&l->ctx, dm);
	return err;
}

/* PT_LOAD segments of an ELF (file or image), for mapping biases. */
static void read_segs(struct kw_umod *um)
{
	int fd = -1;
	Elf *e;
	size_t n;

	if (um->image) {
		e = elf_memory(um->image, um->image_size);
	} else {
		fd = open(um->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		e = elf_begin(fd, ELF_C_READ, NULL);
	}
	if (e && !elf_getphdrnum(e, &n)) {
		for (size_t i = 0; i < n && um->nsegs < 8; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
				um->segs[um->nsegs++] = (struct kw_seg){ ph.p_offset, ph.p_vaddr, ph.p_filesz };
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

static int64_t bias_of(const struct kw_umod *um, uint64_t start, uint64_t off)
{
	for (uint32_t i = 0; i < um->nsegs; i++) {
		const struct kw_seg *s = &um->segs[i];
		uint64_t pstart = s->off & ~0xfffull;

		if (off >= pstart && off < s->off + s->filesz)
			return (int64_t)(start - (s->vaddr - s->off + off));
	}
	return INT64_MIN;
}

/* A module's entry in kw_files (the BPF side then enters its mappings by itself). */
static void files_put(struct kw_loader *l, struct kw_umod *um)
{
	struct kw_file f = { .slot = um->slot, .gen = um->gen };

	if (l->fd_files < 0 || um->in_files || !um->nsegs || !(um->fkey.dev || um->fkey.ino || um->fkey.size))
		return;
	for (uint32_t i = 0; i < um->nsegs && f.nsegs < KW_FILE_SEGS; i++, f.nsegs++) {
		f.segs[f.nsegs].off_lo = um->segs[i].off & ~0xfffull;
		f.segs[f.nsegs].off_hi = um->segs[i].off + um->segs[i].filesz;
		f.segs[f.nsegs].delta = (int64_t)(um->segs[i].vaddr - um->segs[i].off);
	}
	um->in_files = !bpf_map_update_elem(l->fd_files, &um->fkey, &f, BPF_ANY);
}

/* A module in use at stamp: its table loaded if it is not, its kw_files entry made. 0, or why it
 * has no table (DWUNW_ERR_* / a negative errno, or -1). */
static int mod_ready(struct kw_loader *l, struct kw_umod *um, uint64_t stamp)
{
	um->last_use = stamp;
	if (um->state == 0) {
		int e = mod_load(l, um, stamp);

		if (e)
			um->state = e < 0 ? e : -1;
	}
	files_put(l, um);
	return um->state == 1 ? 0 : um->state;
}

/*
 * The slot of a module by key, added if new. The slots are module identities: a slot's gen is
 * given once, so the mappings entered with it stay valid while its table is evicted and loaded
 * again. When every slot is taken, the one unloaded longest is given to the new file (its
 * kw_files entry goes, its gen changes: the old file's mappings then stop with no-table).
 */
static struct kw_umod *mod_find_or_add(struct kw_loader *l, const char *key, const char *path)
{
	struct kw_umod *m = NULL;

	for (uint32_t i = 1; i < l->nmods; i++)
		if (!strcmp(l->mods[i].key, key))
			return &l->mods[i];
	if (l->nmods < l->mods_cap) {
		m = &l->mods[l->nmods];
		memset(m, 0, sizeof(*m));
		m->slot = l->nmods++;
	} else {
		for (uint32_t i = 1; i < l->nmods; i++)
			if (l->mods[i].state != 1 && (!m || l->mods[i].last_use < m->last_use))
				m = &l->mods[i];
		if (!m)
			return NULL;
		if (m->in_files)
			bpf_map_delete_elem(l->fd_files, &m->fkey);
		free(m->image);
		uint32_t slot = m->slot;
		memset(m, 0, sizeof(*m));
		m->slot = slot;
		l->recycled++;
	}
	m->gen = (uint32_t)++l->gen;
	snprintf(m->key, sizeof(m->key), "%s", key);
	snprintf(m->path, sizeof(m->path), "%s", path);
	return m;
}

static uint64_t fnv64(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static struct kw_uproc **proc_slot(struct kw_loader *l, int pid, int create)
{
	uint32_t h = (uint32_t)pid * 2654435761u % KW_PROC_SLOTS;

	struct kw_uproc **tomb = NULL;

	for (uint32_t k = 0; k < KW_PROC_SLOTS; k++) {
		struct kw_uproc **p = &l->procs[(h + k) % KW_PROC_SLOTS];

		if (*p && (*p)->pid == pid)
			return p;
		if (*p && (*p)->pid == -1 && !tomb)
			tomb = p; /* a forgotten process's: reused, so exits leave no slot behind */
		if (!*p)
			return create ? (tomb ? tomb : p) : NULL;
	}
	return create ? tomb : NULL;
}

/* [vdso] of pid at start (sz bytes) as a module, keyed by its image (the kernel's: one for every
 * process of an ABI). 0, or -1 when its memory cannot be read. */
static int vdso_mod(struct kw_loader *l, int pid, uint64_t start, size_t sz, struct kw_umod **out)
{
	char fn[64], key[64];
	void *img = malloc(sz);
	struct kw_umod *um;
	int fd;

	*out = NULL;
	snprintf(fn, sizeof(fn), "/proc/%d/mem", pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (!img || fd < 0 || pread(fd, img, sz, (off_t)start) != (ssize_t)sz) {
		free(img);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	snprintf(key, sizeof(key), "[kw-vdso-%016llx]", (unsigned long long)fnv64(img, sz));
	um = *out = mod_find_or_add(l, key, "[vdso]");
	if (um && !um->image) {
		um->image = img;
		um->image_size = sz;
		um->fkey.size = sz;
		read_segs(um);
	} else {
		free(img);
	}
	return 0;
}

/* The image of pid's kernel entry (struct kw_proc.image), -1 when it has none. */
static int64_t entry_image(struct kw_loader *l, int pid)
{
	struct kw_proc *kp = malloc(sizeof(*kp));
	int64_t image = -1;

	if (kp && !bpf_map_lookup_elem(l->fd_procs, &pid, kp))
		image = kp->image;
	free(kp);
	return image;
}

int kw_load_pid(struct kw_loader *l, int pid)
{
	char *text = NULL;
	size_t tlen = 0, nm = 0;
	struct dwunw_map *maps;
	struct kw_uproc **slot, *p;
	struct kw_proc *kp;
	uint64_t h, stamp = ++l->clock;
	/* the BPF side makes entries at exec: one made while the maps were read stands */
	int64_t image = l->bpf_procs ? entry_image(l, pid) : -1;
	int err = 0;

	switch (dwunw_maps_read(pid, &text, &tlen)) {
	case DWUNW_OK: break;
	case DWUNW_ERR_NOMEM: return -ENOMEM;
	case DWUNW_ERR_PERM: return -EACCES;
	default: return -ESRCH;
	}
	h = fnv64(text, tlen);
	slot = proc_slot(l, pid, 1);
	if (!slot) {
		free(text);
		return -ENOSPC;
	}
	p = *slot;
	if (p && p->pid == pid && p->maps_hash == h && p->evict_seen == l->evictions) {
		free(text);
		return 0;
	}
	dwunw_maps_parse(text, tlen, NULL, &nm);
	maps = calloc(nm ? nm : 1, sizeof(*maps));
	if (!maps || dwunw_maps_parse(text, tlen, maps, &nm))
		nm = 0;
	if (!p) {
		p = *slot = calloc(1, sizeof(*p));
		if (!p) {
			free(maps);
			free(text);
			return -ENOMEM;
		}
		p->pid = -1;
	}
	if (p->pid == -1)
		l->nprocs++;
	p->pid = pid;
	p->maps_hash = h;
	p->nmaps = 0;
	for (size_t i = 0; i < nm; i++) {
		const struct dwunw_map *m = &maps[i];
		uint64_t start = m->start, end = m->end, off = m->offset;
		const char *path = m->path;
		char key[128];
		struct kw_umod *um;
		int64_t bias;

		if (!(m->flags & DWUNW_MAP_X))
			continue;
		if (p->nmaps >= KW_MAX_MAPS)
			break;
		if (!strcmp(path, "[vdso]")) {
			if (vdso_mod(l, pid, start, end - start, &um))
				continue;
		} else if (path[0] == '/') {
			struct stat st;

			if ((m->flags & DWUNW_MAP_DELETED) || stat(path, &st) || st.st_ino != m->inode)
				continue; /* deleted or replaced: its frames fall back */
			snprintf(key, sizeof(key), "%llx:%llx:%lld:%lld.%09ld", (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec);
			um = mod_find_or_add(l, key, path);
			if (um && !um->nsegs)
				read_segs(um);
			if (um && !um->fkey.ino) { /* as the kernel sees it (kwalk_format.h) */
				um->fkey.dev = (uint64_t)m->dev_major << 20 | m->dev_minor;
				um->fkey.ino = m->inode;
				um->fkey.size = (uint64_t)st.st_size;
			}
		} else {
			continue; /* anonymous (JIT), [uprobes], [vsyscall]: fall back */
		}
		if (!um)
			continue;
		bias = bias_of(um, start, off);
		if (bias == INT64_MIN)
			continue;
		mod_ready(l, um, stamp);
		struct kw_map *km = &p->maps[p->nmaps];
		km->start = start;
		km->end = end;
		km->bias = (uint64_t)bias;
		km->mod = um->slot;
		km->gen = um->gen;  /* kw_mods[slot].gen is 0 while the table is not loaded */
		p->umod[p->nmaps++] = um->slot;
	}
	free(maps);
	free(text);
	p->evict_seen = l->evictions;
	kp = calloc(1, sizeof(*kp));
	if (!kp)
		return -ENOMEM;
	kp->nmaps = p->nmaps;
	kp->image = image > 0 ? (uint32_t)image : 0;
	memcpy(kp->maps, p->maps, sizeof(kp->maps)); /* /proc/PID/maps is sorted by address */
	if (l->bpf_procs && entry_image(l, pid) != image) {
		/* exec'd (or exited) meanwhile: what was read may be the old program's */
	} else if (bpf_map_update_elem(l->fd_procs, &pid, kp, BPF_ANY))
		err = -errno;
	free(kp);
	return err;
}

/* A file's module (stat st), loaded if it is not: 0, or DWUNW_ERR_* / a negative errno. */
static int mod_of_file(struct kw_loader *l, const char *path, const struct stat *st, struct kw_umod **out)
{
	char key[128];
	struct kw_umod *um;

	snprintf(key, sizeof(key), "%llx:%llx:%lld:%lld.%09ld", (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
		 st->st_mtim.tv_nsec);
	um = *out = mod_find_or_add(l, key, path);
	if (!um)
		return -ENOSPC;
	if (!um->nsegs)
		read_segs(um);
	if (!um->fkey.ino) { /* as the kernel sees it (kwalk_format.h) */
		um->fkey.dev = (uint64_t)major(st->st_dev) << 20 | minor(st->st_dev);
		um->fkey.ino = st->st_ino;
		um->fkey.size = (uint64_t)st->st_size;
	}
	return mod_ready(l, um, ++l->clock);
}

int kw_preload_file(struct kw_loader *l, const char *path)
{
	struct stat st;
	struct kw_umod *um;

	if (stat(path, &st))
		return -errno;
	return mod_of_file(l, path, &st, &um);
}

int kw_preload_vdso(struct kw_loader *l)
{
	char *text = NULL;
	size_t tlen = 0, nm = 0;
	struct dwunw_map *maps = NULL;
	struct kw_umod *um = NULL;
	int err = -ENOENT;

	if (dwunw_maps_read(getpid(), &text, &tlen) != DWUNW_OK)
		return -ESRCH;
	dwunw_maps_parse(text, tlen, NULL, &nm);
	maps = calloc(nm ? nm : 1, sizeof(*maps));
	if (maps && !dwunw_maps_parse(text, tlen, maps, &nm))
		for (size_t i = 0; i < nm; i++)
			if (!strcmp(maps[i].path, "[vdso]")) {
				if (vdso_mod(l, getpid(), maps[i].start, maps[i].end - maps[i].start, &um) || !um)
					break;
				err = mod_ready(l, um, ++l->clock);
				break;
			}
	free(maps);
	free(text);
	return err;
}

/* m into p's mappings (sorted by start), the ones it overlaps dropped; -1 when full. */
static int procs_merge(struct kw_proc *p, const struct kw_map *m)
{
	struct kw_map out[KW_MAX_MAPS];
	uint32_t n = 0, done = 0;

	for (uint32_t i = 0; i < p->nmaps && i < KW_MAX_MAPS; i++) {
		const struct kw_map *o = &p->maps[i];

		if (o->start < m->end && m->start < o->end)
			continue;
		if (!done && o->start >= m->end) {
			if (n >= KW_MAX_MAPS)
				return -1;
			out[n++] = *m;
			done = 1;
		}
		if (n >= KW_MAX_MAPS)
			return -1;
		out[n++] = *o;
	}
	if (!done) {
		if (n >= KW_MAX_MAPS)
			return -1;
		out[n++] = *m;
	}
	memcpy(p->maps, out, n * sizeof(out[0]));
	p->nmaps = n;
	return 0;
}

int kw_enter_file(struct kw_loader *l, int pid, uint32_t image, const char *path, const struct kw_file_key *fk,
		  uint64_t start, uint64_t end, uint64_t off)
{
	struct stat st;
	struct kw_umod *um;
	struct kw_proc *kp;
	int64_t bias;
	int err;

	if (stat(path, &st))
		return -errno;
	/* the path the dentries gave may name another file (another mount): same identity only */
	if (((uint64_t)major(st.st_dev) << 20 | minor(st.st_dev)) != fk->dev || st.st_ino != fk->ino ||
	    (uint64_t)st.st_size != fk->size)
		return -ESTALE;
	mod_of_file(l, path, &st, &um);
	if (!um)
		return -ENOSPC;
	/* the mapping that told of it, into the process's entry (if it still has one) */
	bias = bias_of(um, start, off);
	if (bias == INT64_MIN)
		return -ENOEXEC;
	kp = malloc(sizeof(*kp));
	if (!kp)
		return -ENOMEM;
	err = 0;
	/* an entry of a later image (the process exec'd since the tell) keeps its own mappings: the
	 * told one was the old program's and may overlap the new one's */
	if (!bpf_map_lookup_elem(l->fd_procs, &pid, kp) && kp->image == image) {
		struct kw_map m = { .start = start, .end = end, .bias = (uint64_t)bias, .mod = um->slot, .gen = um->gen };

		if (procs_merge(kp, &m) || bpf_map_update_elem(l->fd_procs, &pid, kp, BPF_EXIST))
			err = -ENOSPC;
	}
	free(kp);
	return err;
}

void kw_loader_bpf_procs(struct kw_loader *l, int on)
{
	l->bpf_procs = on;
}

void kw_forget_pid(struct kw_loader *l, int pid)
{
	struct kw_uproc **slot = proc_slot(l, pid, 0);

	/* the BPF side frees its entry at exit and makes it anew at exec itself */
	if (!l->bpf_procs)
		bpf_map_delete_elem(l->fd_procs, &pid);
	if (slot && *slot) {
		/* keep the probe chain intact: mark as a tombstone pid that never matches */
		(*slot)->pid = -1;
		(*slot)->nmaps = 0;
		l->nprocs--;
	}
}

const char *kw_pc_module(struct kw_loader *l, int pid, uint64_t pc, uint64_t *mod_addr)
{
	struct kw_uproc **slot = proc_slot(l, pid, 0);
	struct kw_uproc *p = slot ? *slot : NULL;

	for (uint32_t i = 0; p && i < p->nmaps; i++)
		if (pc >= p->maps[i].start && pc < p->maps[i].end) {
			if (mod_addr)
				*mod_addr = pc - p->maps[i].bias;
			return l->mods[p->umod[i]].path;
		}
	return NULL;
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
