// SPDX-License-Identifier: GPL-2.0-only
/* A module's table re-encoded into the walker's maps (kw_rows, kw_blocks, kw_peer_pcs, kw_mods),
 * room made by evicting the modules used least recently (kwalk_loader.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dwunw_export.h"
#include "kwalk_loader.h"

#define KW_BATCH      65536
#define KW_PAD_GAP    16       /* END rows of gaps shorter than this (alignment padding) are dropped */

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
int kw_mod_load(struct kw_loader *l, struct kw_umod *um, uint64_t stamp)
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
			gid = kw_rule_intern(l, &r);
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
