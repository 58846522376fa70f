// SPDX-License-Identifier: GPL-2.0-only
/* Processes (kwalk_loader.h): their executable mappings, read from /proc or told by the BPF side,
 * into their kw_procs entries. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include "kwalk_loader.h"

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
	h = kw_fnv64(text, tlen);
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
			if (kw_vdso_mod(l, pid, start, end - start, &um))
				continue;
		} else if (path[0] == '/') {
			struct stat st;

			if ((m->flags & DWUNW_MAP_DELETED) || stat(path, &st) || st.st_ino != m->inode)
				continue; /* deleted or replaced: its frames fall back */
			snprintf(key, sizeof(key), "%llx:%llx:%lld:%lld.%09ld", (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec);
			um = kw_mod_find_or_add(l, key, path);
			if (um && !um->nsegs)
				kw_read_segs(um);
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
		bias = kw_bias_of(um, start, off);
		if (bias == INT64_MIN)
			continue;
		kw_mod_ready(l, um, stamp);
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
	kw_mod_of_file(l, path, &st, &um);
	if (!um)
		return -ENOSPC;
	/* the mapping that told of it, into the process's entry (if it still has one) */
	bias = kw_bias_of(um, start, off);
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
