// SPDX-License-Identifier: GPL-2.0-only
/* Process maps: parsing /proc/PID/maps, caching it per pid, and resolving mappings to modules. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "core_keep.h"
#include "internal.h"
#include "proc.h"

#define DW_MAX_PROCS 64          /* cached pids; the oldest unused one goes first */
#define DW_MAX_VDSO (1u << 20)   /* a vDSO larger than this is not believed */

static int cmp_map(const void *a, const void *b)
{
	const struct dw_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* What the library makes of a mapping: a file to open, the vDSO, or memory with no file. */
static uint8_t map_kind(const struct dw_map *m)
{
	if (!m->path)
		return DW_MAP_ANON;
	if (m->path[0] != '[') /* anonymous memory: no file, whatever the inode says */
		return m->inode == 0 && !m->deleted && m->path[0] != '/' ? DW_MAP_SPECIAL : DW_MAP_FILE;
	if (!strcmp(m->path, "[vdso]"))
		return DW_MAP_VDSO;
	if (!strcmp(m->path, "[uprobes]"))
		return DW_MAP_UPROBES;
	return DW_MAP_SPECIAL;
}

/* p's maps from entries: kinds decided, paths copied, sorted by start. */
static int proc_from_entries(struct dw_proc *p, const struct dwunw_map *e, size_t n)
{
	size_t slen = 0;
	char *strs;

	if (!n || n > UINT32_MAX)
		return DWUNW_ERR_INVALID_ARG;
	for (size_t i = 0; i < n; i++) {
		if (e[i].end <= e[i].start)
			return DWUNW_ERR_INVALID_ARG;
		slen += e[i].path ? strlen(e[i].path) + 1 : 0;
	}
	p->maps = calloc(n, sizeof(*p->maps));
	p->strings = strs = malloc(slen + 1);
	if (!p->maps || !strs)
		return DWUNW_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		struct dw_map *m = &p->maps[i];
		size_t l = e[i].path ? strlen(e[i].path) : 0;

		m->start = e[i].start;
		m->end = e[i].end;
		m->offset = e[i].offset;
		m->inode = e[i].inode;
		m->dev_major = e[i].dev_major;
		m->dev_minor = e[i].dev_minor;
		m->prot = (uint8_t)(e[i].flags & (DWUNW_MAP_R | DWUNW_MAP_W | DWUNW_MAP_X));
		m->deleted = !!(e[i].flags & DWUNW_MAP_DELETED);
		if (l) {
			memcpy(strs, e[i].path, l + 1);
			m->path = strs;
			strs += l + 1;
		}
		m->kind = map_kind(m);
	}
	p->nmaps = (uint32_t)n;
	for (uint32_t i = 1; i < p->nmaps; i++)
		if (p->maps[i - 1].start > p->maps[i].start) {
			qsort(p->maps, p->nmaps, sizeof(*p->maps), cmp_map);
			break;
		}
	return DWUNW_OK;
}

static void proc_free(struct dw_proc *p)
{
	if (!p)
		return;
	free(p->mem);
	free(p->maps);
	free(p->strings);
	free(p);
}

/* Free the processes no capture can still see (locked). */
static void graveyard_drain(struct dwunw_ctx_impl *c)
{
	if (!c->graveyard || atomic_load(&c->readers))
		return;
	while (c->graveyard) {
		struct dw_proc *p = c->graveyard;
		c->graveyard = p->next;
		proc_free(p);
	}
}

/* Free p, unlinked and unreferenced (locked): a capture that found it as last_proc may still be
 * reading it without a reference, so a published one waits for the readers to leave. */
static void proc_retire(struct dwunw_ctx_impl *c, struct dw_proc *p)
{
	if (p->published && atomic_load(&c->readers)) {
		p->next = c->graveyard;
		c->graveyard = p;
		return;
	}
	proc_free(p);
}

/* p stops being the last process (locked): its cache reference goes. */
static void unpublish(struct dwunw_ctx_impl *c, struct dw_proc *p)
{
	if (atomic_load(&c->last_proc) != p)
		return;
	atomic_store(&c->last_proc, NULL);
	atomic_fetch_sub(&p->refcnt, 1);
}

/* p becomes the last process (locked), holding a reference of the context. */
static void publish(struct dwunw_ctx_impl *c, struct dw_proc *p)
{
	struct dw_proc *old = atomic_load(&c->last_proc);

	if (old == p || p->dead)
		return;
	atomic_fetch_add(&p->refcnt, 1);
	p->published = 1;
	atomic_store(&c->last_proc, p);
	if (old && atomic_fetch_sub(&old->refcnt, 1) == 1 && old->dead)
		proc_retire(c, old);
}

/* Insert p as the pid's current snapshot; the one it replaces dies when unreferenced. Locked. */
static void install(struct dwunw_ctx_impl *c, struct dw_proc *p)
{
	struct dw_proc **pp = &c->procs;

	p->loaded_seq = ++c->proc_seq;
	while (*pp) {
		struct dw_proc *o = *pp;
		if (o->pid == p->pid) {
			*pp = o->next;
			c->nprocs--;
			o->dead = 1;
			unpublish(c, o);
			if (atomic_load(&o->refcnt) == 0)
				proc_retire(c, o);
			continue;
		}
		pp = &o->next;
	}
	/* Bounded: drop the oldest snapshot nobody uses. */
	while (c->nprocs >= DW_MAX_PROCS) {
		struct dw_proc **victim = NULL;
		for (pp = &c->procs; *pp; pp = &(*pp)->next)
			if (atomic_load(&(*pp)->refcnt) == 0 && (!victim || (*pp)->loaded_seq < (*victim)->loaded_seq))
				victim = pp;
		if (!victim)
			break;
		struct dw_proc *o = *victim;
		*victim = o->next;
		c->nprocs--;
		proc_retire(c, o);
	}
	graveyard_drain(c);
	p->next = c->procs;
	c->procs = p;
	c->nprocs++;
}

/* A new snapshot of pid: from /proc (e NULL), or from the caller's entries. */
static int load_proc(int32_t pid, const struct dwunw_map *e, size_t n, struct dw_proc **out)
{
	struct dw_proc *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return DWUNW_ERR_NOMEM;
	p->pid = pid;
	if (e) {
		p->offline = 1;
		err = proc_from_entries(p, e, n);
	} else {
		struct dwunw_map *live = NULL;
		/* pid 0 has no maps (dwunw_maps_load would read ours) */
		err = pid > 0 ? dwunw_maps_load(pid, &live, &n) : DWUNW_ERR_NO_PROCESS;
		if (!err)
			err = proc_from_entries(p, live, n);
		free(live);
	}
	if (err) {
		proc_free(p);
		return err;
	}
	*out = p;
	return DWUNW_OK;
}

int dw_proc_get(struct dwunw_ctx_impl *c, int32_t pid, struct dw_proc **out)
{
	struct dw_proc *p;
	int err;

	pthread_mutex_lock(&c->lock);
	for (p = c->procs; p; p = p->next)
		if (p->pid == pid)
			break;
	if (!p) {
		pthread_mutex_unlock(&c->lock);
		/* read /proc without holding the lock */
		err = load_proc(pid, NULL, 0, &p);
		if (err)
			return err;
		pthread_mutex_lock(&c->lock);
		install(c, p);
	}
	atomic_fetch_add(&p->refcnt, 1);
	publish(c, p);
	graveyard_drain(c);
	pthread_mutex_unlock(&c->lock);
	*out = p;
	return DWUNW_OK;
}

int dw_proc_enter_nowait(struct dwunw_ctx_impl *c, int32_t pid, struct dw_proc **out, int *ref)
{
	struct dw_proc *p;

	atomic_fetch_add(&c->readers, 1);
	*ref = 0;
	p = atomic_load(&c->last_proc);
	if (p && p->pid == pid) {
		*out = p;
		return DWUNW_OK;
	}
	if (pthread_mutex_trylock(&c->lock))
		return DWUNW_ERR_WOULDBLOCK;
	for (p = c->procs; p; p = p->next)
		if (p->pid == pid)
			break;
	/* Published, p is freed only once no reader is left: the capture needs no reference. */
	if (p)
		publish(c, p);
	pthread_mutex_unlock(&c->lock);
	if (!p)
		return DWUNW_ERR_WOULDBLOCK;
	*out = p;
	return DWUNW_OK;
}

int dw_proc_refresh(struct dwunw_ctx_impl *c, struct dw_proc **pp)
{
	struct dw_proc *old = *pp, *p;
	int err;

	if (old->offline || old->pinned)
		return DWUNW_ERR_NO_MODULE;
	err = load_proc(old->pid, NULL, 0, &p);
	if (err)
		return err;
	p->from_miss = 1;
	pthread_mutex_lock(&c->lock);
	install(c, p);
	atomic_fetch_add(&p->refcnt, 1);
	pthread_mutex_unlock(&c->lock);
	*pp = p;
	return DWUNW_OK;
}

void dw_proc_put(struct dwunw_ctx_impl *c, struct dw_proc *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&c->lock);
	if (atomic_fetch_sub(&p->refcnt, 1) == 1 && p->dead)
		proc_retire(c, p);
	graveyard_drain(c);
	pthread_mutex_unlock(&c->lock);
}

void dw_procs_free(struct dwunw_ctx_impl *c)
{
	atomic_store(&c->last_proc, NULL);
	while (c->graveyard) {
		struct dw_proc *p = c->graveyard;
		c->graveyard = p->next;
		proc_free(p);
	}
	while (c->procs) {
		struct dw_proc *p = c->procs;
		c->procs = p->next;
		proc_free(p);
	}
	c->nprocs = 0;
	while (c->images) {
		struct dw_image *i = c->images;
		c->images = i->next;
		free(i);
	}
}

const struct dw_map *dw_proc_find(const struct dw_proc *p, uint64_t addr)
{
	uint32_t lo = 0, hi = p->nmaps;
	/* Captures of one process look up the same few mappings first: try the last two answers.
	 * A racy hint is only a wrong guess, checked like any other. */
	uint32_t h = atomic_load_explicit(&((struct dw_proc *)p)->hint, memory_order_relaxed);

	for (int i = 0; i < 2; i++, h >>= 16) {
		const struct dw_map *m = &p->maps[(h & 0xffff) < p->nmaps ? (h & 0xffff) : 0];
		if (p->nmaps && addr - m->start < m->end - m->start)
			return m;
	}

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (p->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nmaps && p->maps[lo].start <= addr) {
		h = atomic_load_explicit(&((struct dw_proc *)p)->hint, memory_order_relaxed);
		atomic_store_explicit(&((struct dw_proc *)p)->hint, (h << 16) | (lo & 0xffff), memory_order_relaxed);
		return &p->maps[lo];
	}
	return NULL;
}

/* A copy of the vDSO shared by every process showing the same bytes. Locked. */
static int vdso_image(struct dwunw_ctx_impl *c, const struct dw_map *m,
		      int (*read)(void *, uint64_t, void *, size_t), void *arg, struct dw_image **out)
{
	size_t size = (size_t)(m->end - m->start);
	struct dw_image *img;
	int err;

	if (!read || size > DW_MAX_VDSO)
		return DWUNW_ERR_NO_MODULE;
	img = malloc(sizeof(*img) + size);
	if (!img)
		return DWUNW_ERR_NOMEM;
	err = read(arg, m->start, img->data, size);
	if (err) {
		free(img);
		return err;
	}
	img->size = size;
	for (struct dw_image *i = c->images; i; i = i->next)
		if (i->size == size && !memcmp(i->data, img->data, size)) {
			free(img);
			*out = i;
			return DWUNW_OK;
		}
	img->next = c->images;
	c->images = img;
	*out = img;
	return DWUNW_OK;
}

/* Same file as the mapping? (a file replaced at its path is opened through map_files) */
static int path_is_mapping(const struct dw_map *m, const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return 0;
	return (uint64_t)st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
	       minor(st.st_dev) == m->dev_minor;
}

int dw_map_module_cached(struct dwunw_ctx_impl *c, struct dw_map *m, struct dwunw_module **out)
{
	uint64_t load = atomic_load_explicit(&m->mod_load, memory_order_acquire);
	int err;

	DW_RACE_POINT();
	/* the slot and its generation from one load (struct dw_map: mod_load) */
	if (load && (uint32_t)load <= c->nslots &&
	    dw_module_get(&c->slots[(uint32_t)load - 1], (uint32_t)(load >> 32)) == DWUNW_OK) {
		*out = &c->slots[(uint32_t)load - 1];
		return DWUNW_OK;
	}
	err = atomic_load_explicit(&m->mod_err, memory_order_relaxed);
	if (err)
		return err;
	if (m->kind != DW_MAP_FILE && m->kind != DW_MAP_VDSO)
		return DWUNW_ERR_NO_MODULE;
	return DWUNW_ERR_WOULDBLOCK;
}

int dw_map_module(struct dwunw_ctx_impl *c, struct dw_proc *p, struct dw_map *m,
		  int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg,
		  struct dwunw_module **out)
{
	struct dwunw_module *mod = NULL;
	char path[4096], alt[96];
	const char *open_path = NULL;
	int err = dw_map_module_cached(c, m, out);

	if (err != DWUNW_ERR_WOULDBLOCK)
		return err;

	pthread_mutex_lock(&c->lock);
	if (m->kind == DW_MAP_VDSO) {
		struct dw_image *img = NULL;
		/* Offline, only a vDSO image the caller registered under "[vdso]" can serve. */
		err = p->offline ? DWUNW_OK : vdso_image(c, m, read, arg, &img);
		pthread_mutex_unlock(&c->lock);
		if (!err && img)
			err = dw_module_acquire(c, "[vdso]", NULL, img->data, img->size, &mod);
		else if (!err)
			err = dw_module_find_image(c, "[vdso]", &mod);
	} else {
		snprintf(path, sizeof(path), "%s%s", c->sysroot ? c->sysroot : "", m->path);
		if (!p->offline && (m->deleted || !path_is_mapping(m, path))) {
			/* deleted or replaced since it was mapped: the kernel still has the file */
			snprintf(alt, sizeof(alt), "/proc/%d/map_files/%llx-%llx", p->pid,
				 (unsigned long long)m->start, (unsigned long long)m->end);
			open_path = alt;
		}
		pthread_mutex_unlock(&c->lock);
		/* pinned maps may be older than the process: open only the very file once mapped, or
		 * its module still cached (a library unloaded and deleted since) */
		if (p->pinned && open_path && !path_is_mapping(m, open_path))
			err = dw_module_find_file(c, path, m->dev_major, m->dev_minor, m->inode, &mod);
		else
			err = dw_module_acquire(c, path, open_path, NULL, 0, &mod);
	}
	if (!err) {
		const struct dw_phdr *ph = dw_elf_load_for_offset(&mod->elf, m->kind == DW_MAP_VDSO ? 0 : m->offset);
		uint64_t file_off = m->kind == DW_MAP_VDSO ? 0 : m->offset;
		if (!ph) {
			dw_module_put(mod);
			err = DWUNW_ERR_NO_MODULE;
		} else {
			atomic_store_explicit(&m->bias, m->start - (ph->vaddr - ph->offset + file_off),
					      memory_order_relaxed);
			DW_RACE_POINT();
			/* the generation of our reference: stable while we hold it */
			atomic_store_explicit(&m->mod_load,
					      (uint64_t)atomic_load(&mod->gen) << 32 | (mod->slot + 1),
					      memory_order_release);
			*out = mod;
			return DWUNW_OK;
		}
	}
	/* A file that cannot be opened will not open on the next frame either: say so once. */
	if (err != DWUNW_ERR_CACHE_FULL && err != DWUNW_ERR_NOMEM) {
		if (m->kind == DW_MAP_FILE && err != DWUNW_ERR_NO_MODULE && c->cfg.warn &&
		    !atomic_load_explicit(&m->mod_err, memory_order_relaxed)) {
			char line[4200];
			snprintf(line, sizeof(line), DWUNW_WARN_NO_MODULE_PRE "%s" DWUNW_WARN_NO_MODULE_MID "%s" DWUNW_WARN_NO_MODULE_POST,
				 path, dwunw_strerror(err));
			c->cfg.warn(c->cfg.warn_arg, line);
		}
		atomic_store_explicit(&m->mod_err, err, memory_order_relaxed);
	}
	return err;
}

/* Install the caller's maps of pid: offline (set), or live and kept by the caller (pinned). */
static int maps_give(struct dwunw_ctx *ctx, int32_t pid, const struct dwunw_map *e, size_t n, int pinned)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_proc *p;
	int err;

	if (!c || !e || !n || (pinned && pid <= 0))
		return DWUNW_ERR_INVALID_ARG;
	err = load_proc(pid, e, n, &p);
	if (err)
		return err;
	if (pinned) {
		p->offline = 0;  /* memory beyond the snapshot is still read from the process */
		p->pinned = 1;
	}
	pthread_mutex_lock(&c->lock);
	install(c, p);
	pthread_mutex_unlock(&c->lock);
	return DWUNW_OK;
}

/* The text forms: parsed into entries (on a copy: the parser works in place), then as those. */
static int maps_give_text(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len, int pinned)
{
	struct dwunw_map *e = NULL;
	size_t n = 0;
	char *copy;
	int err;

	if (!dw_ctx(ctx) || !maps_text || !len || (pinned && pid <= 0))
		return DWUNW_ERR_INVALID_ARG;
	err = dwunw_maps_parse((char *)maps_text, len, NULL, &n); /* counting writes nothing */
	if (err)
		return err;
	copy = malloc(len + 1);
	e = malloc(n * sizeof(*e));
	if (!copy || !e) {
		err = DWUNW_ERR_NOMEM;
	} else {
		memcpy(copy, maps_text, len);
		copy[len] = 0;
		err = dwunw_maps_parse(copy, len, e, &n);
		if (!err)
			err = maps_give(ctx, pid, e, n, pinned);
	}
	free(e);
	free(copy);
	return err;
}

DWUNW_API int dwunw_maps_set_entries(struct dwunw_ctx *ctx, int32_t pid, const struct dwunw_map *maps, size_t n)
{
	return maps_give(ctx, pid, maps, n, 0);
}

DWUNW_API int dwunw_maps_pin_entries(struct dwunw_ctx *ctx, int32_t pid, const struct dwunw_map *maps, size_t n)
{
	return maps_give(ctx, pid, maps, n, 1);
}

DWUNW_API int dwunw_maps_set(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len)
{
	return maps_give_text(ctx, pid, maps_text, len, 0);
}

DWUNW_API int dwunw_maps_pin(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len)
{
	return maps_give_text(ctx, pid, maps_text, len, 1);
}

int dw_proc_read_mem(const struct dw_proc *p, uint64_t addr, void *buf, size_t len)
{
	uint32_t lo = 0, hi = p->nmem;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (p->mem[mid].addr + p->mem[mid].len <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nmem && p->mem[lo].addr <= addr && len <= p->mem[lo].len - (addr - p->mem[lo].addr)) {
		memcpy(buf, p->mem[lo].data + (addr - p->mem[lo].addr), len);
		return DWUNW_OK;
	}
	return DWUNW_ERR_IO;
}

DWUNW_API int dwunw_memory_add(struct dwunw_ctx *ctx, int32_t pid, uint64_t addr, const void *data,
			       uint64_t len)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_proc *p;
	struct dw_mem_region *r;
	uint32_t i;
	int err = DWUNW_ERR_NOT_FOUND;

	if (!c || !data || !len || addr + len < addr)
		return DWUNW_ERR_INVALID_ARG;
	pthread_mutex_lock(&c->lock);
	for (p = c->procs; p; p = p->next)
		if (p->pid == pid && p->offline)
			break;
	if (p) {
		r = realloc(p->mem, (p->nmem + 1) * sizeof(*p->mem));
		err = DWUNW_ERR_NOMEM;
		if (r) {
			p->mem = r;
			for (i = p->nmem; i > 0 && r[i - 1].addr > addr; i--)
				r[i] = r[i - 1];
			r[i] = (struct dw_mem_region){ addr, len, data };
			p->nmem++;
			err = DWUNW_OK;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

DWUNW_API int dwunw_maps_refresh(struct dwunw_ctx *ctx, int32_t pid)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_proc *p;
	int err;

	if (!c || pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	err = load_proc(pid, NULL, 0, &p);
	if (err)
		return err;
	pthread_mutex_lock(&c->lock);
	install(c, p);
	pthread_mutex_unlock(&c->lock);
	return DWUNW_OK;
}

DWUNW_API void dwunw_maps_forget(struct dwunw_ctx *ctx, int32_t pid)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_proc **pp;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	for (pp = &c->procs; *pp;) {
		struct dw_proc *o = *pp;
		if (o->pid != pid) {
			pp = &o->next;
			continue;
		}
		*pp = o->next;
		c->nprocs--;
		o->dead = 1;
		unpublish(c, o);
		if (atomic_load(&o->refcnt) == 0)
			proc_retire(c, o);
	}
	graveyard_drain(c);
	pthread_mutex_unlock(&c->lock);
	dw_core_forget(c, pid);
}
