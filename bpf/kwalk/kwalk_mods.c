// SPDX-License-Identifier: GPL-2.0-only
/* Module slots (kwalk_loader.h): one per file (or [vdso] image) whatever process maps it, its ELF
 * segments, its kw_files entry, its table loaded when it is in use. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "kwalk_loader.h"

/* PT_LOAD segments of an ELF (file or image), for mapping biases. */
void kw_read_segs(struct kw_umod *um)
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

int64_t kw_bias_of(const struct kw_umod *um, uint64_t start, uint64_t off)
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
int kw_mod_ready(struct kw_loader *l, struct kw_umod *um, uint64_t stamp)
{
	um->last_use = stamp;
	if (um->state == 0) {
		int e = kw_mod_load(l, um, stamp);

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
struct kw_umod *kw_mod_find_or_add(struct kw_loader *l, const char *key, const char *path)
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

/* [vdso] of pid at start (sz bytes) as a module, keyed by its image (the kernel's: one for every
 * process of an ABI). 0, or -1 when its memory cannot be read. */
int kw_vdso_mod(struct kw_loader *l, int pid, uint64_t start, size_t sz, struct kw_umod **out)
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
	snprintf(key, sizeof(key), "[kw-vdso-%016llx]", (unsigned long long)kw_fnv64(img, sz));
	um = *out = kw_mod_find_or_add(l, key, "[vdso]");
	if (um && !um->image) {
		um->image = img;
		um->image_size = sz;
		um->fkey.size = sz;
		kw_read_segs(um);
	} else {
		free(img);
	}
	return 0;
}

/* A file's module (stat st), loaded if it is not: 0, or DWUNW_ERR_* / a negative errno. */
int kw_mod_of_file(struct kw_loader *l, const char *path, const struct stat *st, struct kw_umod **out)
{
	char key[128];
	struct kw_umod *um;

	snprintf(key, sizeof(key), "%llx:%llx:%lld:%lld.%09ld", (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
		 st->st_mtim.tv_nsec);
	um = *out = kw_mod_find_or_add(l, key, path);
	if (!um)
		return -ENOSPC;
	if (!um->nsegs)
		kw_read_segs(um);
	if (!um->fkey.ino) { /* as the kernel sees it (kwalk_format.h) */
		um->fkey.dev = (uint64_t)major(st->st_dev) << 20 | minor(st->st_dev);
		um->fkey.ino = st->st_ino;
		um->fkey.size = (uint64_t)st->st_size;
	}
	return kw_mod_ready(l, um, ++l->clock);
}
