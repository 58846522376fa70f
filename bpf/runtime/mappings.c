// SPDX-License-Identifier: GPL-2.0-only
/* Mappings of traced processes in record order: see mappings.h. */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/libbpf.h>
#include "intern.h"
#include "mmap_ev.h"
#include "mapped_files.h"
#include "mappings.h"
#include "mmap_track.h"
#include "tool_signals.h"
#include "tool_util.h"
#include "dwunw.h"

struct mv_map {
	uint64_t start, end, offset, ino;
	uint64_t since;        /* kernel time of the event that mapped it (0: read from /proc) */
	uint32_t dev_major, dev_minor;
	uint8_t prot;          /* 1 r, 2 w, 4 x */
	uint8_t file;          /* a file mapping (path names the file, or unknown) */
	uint8_t unknown;       /* a file mapping whose file is not known */
	const char *path;      /* interned; "[vdso]" and the like for special ones; NULL: anonymous */
	const char *held;      /* the file held open (mapped_files.h) given to libdwunw instead of path */
	uint64_t chk_changes;  /* mapped_files_changes() when `superseded` was found (0: never) */
	uint8_t superseded;    /* its range changed by a later event (mapped_files_superseded) */
};

struct mv_proc {
	uint32_t pid;
	bool dirty;            /* changed since last given to libdwunw */
	uint64_t dead_at;      /* mappings_sweep: kernel time it was found gone (0: alive) */
	uint64_t gone_chk;     /* mapped_files_hold_changes() + 1 when pin_gone last looked */
	struct mv_map *v;      /* sorted by start, not overlapping */
	size_t n, cap;
};

/* (dev, inode) -> path, learned from /proc reads: names files whose event lost its path. */
struct mv_known {
	uint64_t ino;
	uint32_t maj, min;
	const char *path;
};

struct mappings {
	struct mappings_stats stats;
	struct mv_proc *procs;
	size_t nprocs, procs_cap;
	size_t last;           /* proc_find's last answer */
	struct mv_known *known;
	size_t nknown, known_cap;
#ifdef HAVE_DWUNW
	struct dwunw_map *entries; /* mappings_sync's, for libdwunw */
	size_t entries_cap;
#endif
};

struct mappings *mappings_new(void)
{
	return xcalloc(1, sizeof(struct mappings));
}

void mappings_free(struct mappings *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->nprocs; i++)
		free(ms->procs[i].v);
	free(ms->procs);
	free(ms->known);
#ifdef HAVE_DWUNW
	free(ms->entries);
#endif
	free(ms);
}

static void known_put(struct mappings *ms, uint64_t ino, uint32_t maj, uint32_t min, const char *path)
{
	for (size_t i = 0; i < ms->nknown; i++)
		if (ms->known[i].ino == ino && ms->known[i].maj == maj && ms->known[i].min == min) {
			ms->known[i].path = path;
			return;
		}
	if (ms->nknown == ms->known_cap) {
		ms->known_cap = ms->known_cap ? ms->known_cap * 2 : 64;
		ms->known = xrealloc(ms->known, ms->known_cap * sizeof(*ms->known));
	}
	ms->known[ms->nknown++] = (struct mv_known){ ino, maj, min, path };
}

static const char *known_get(const struct mappings *ms, uint64_t ino, uint32_t maj, uint32_t min)
{
	for (size_t i = 0; i < ms->nknown; i++)
		if (ms->known[i].ino == ino && ms->known[i].maj == maj && ms->known[i].min == min)
			return ms->known[i].path;
	return NULL;
}

static struct mv_proc *proc_find(struct mappings *ms, uint32_t pid)
{
	if (ms->last < ms->nprocs && ms->procs[ms->last].pid == pid)
		return &ms->procs[ms->last];
	for (size_t i = 0; i < ms->nprocs; i++)
		if (ms->procs[i].pid == pid) {
			ms->last = i;
			return &ms->procs[i];
		}
	return NULL;
}

static void map_insert_at(struct mv_proc *p, size_t i, const struct mv_map *m)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(*p->v));
	p->v[i] = *m;
	p->n++;
}

/* Remove [start, end) from the view: entries inside go, entries across are cut. */
static void view_cut(struct mv_proc *p, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < p->n;) {
		struct mv_map *m = &p->v[i];

		if (m->end <= start || m->start >= end) {
			i++;
			continue;
		}
		p->dirty = true;
		if (m->start < start && m->end > end) { /* split in two */
			struct mv_map hi = *m;

			hi.offset += end - m->start;
			hi.start = end;
			m->end = start;
			map_insert_at(p, i + 1, &hi);
			return;
		}
		if (m->start < start) {
			m->end = start;
			i++;
		} else if (m->end > end) {
			if (m->file)
				m->offset += end - m->start;
			m->start = end;
			i++;
		} else {
			memmove(m, m + 1, (p->n - i - 1) * sizeof(*m));
			p->n--;
		}
	}
}

static void view_add(struct mv_proc *p, const struct mv_map *m)
{
	size_t i = 0;

	view_cut(p, m->start, m->end);
	while (i < p->n && p->v[i].start < m->start)
		i++;
	map_insert_at(p, i, m);
	p->dirty = true;
}

/* Cut the view's entries at addr (an entry across it becomes two). */
static void view_split(struct mv_proc *p, uint64_t addr)
{
	for (size_t i = 0; i < p->n; i++) {
		struct mv_map *m = &p->v[i];

		if (m->start < addr && addr < m->end) {
			struct mv_map hi = *m;

			if (hi.file)
				hi.offset += addr - m->start;
			hi.start = addr;
			m->end = addr;
			map_insert_at(p, i + 1, &hi);
			return;
		}
	}
}

/*
 * mprotect: [start, end) has protection prot. Its entries change; where the view has nothing
 * and the pages become executable, anonymous code (JIT) is added, so frames there are known as
 * such even when the memory is gone by the time the record is processed.
 */
static void view_protect(struct mv_proc *p, uint64_t start, uint64_t end, uint8_t prot, uint64_t ts)
{
	uint64_t at = start;

	if (end <= start)
		return;
	view_split(p, start);
	view_split(p, end);
	for (size_t i = 0; i < p->n && at < end; i++) {
		struct mv_map *m = &p->v[i];

		if (m->end <= at)
			continue;
		if (m->start >= end)
			break;
		if (m->start > at && (prot & 4)) { /* a hole below this entry */
			struct mv_map a = { .start = at, .end = m->start, .prot = prot, .since = ts };

			map_insert_at(p, i, &a);
			i++;
			m = &p->v[i];
		}
		m->prot = prot;
		at = m->end;
	}
	if (at < end && (prot & 4)) {
		struct mv_map a = { .start = at, .end = end, .prot = prot, .since = ts };
		size_t i = 0;

		while (i < p->n && p->v[i].start < at)
			i++;
		map_insert_at(p, i, &a);
	}
	p->dirty = true;
}

/* mremap: the entries of [old_start, old_end) now lie at [start, end) (grown or shrunk at the end). */
static void view_move(struct mv_proc *p, uint64_t old_start, uint64_t old_end, uint64_t start,
		      uint64_t end, uint64_t ts)
{
	struct mv_map moved[16];
	size_t n = 0;

	view_split(p, old_start);
	view_split(p, old_end);
	for (size_t i = 0; i < p->n && n < 16; i++)
		if (p->v[i].start >= old_start && p->v[i].end <= old_end)
			moved[n++] = p->v[i];
	view_cut(p, old_start, old_end);
	view_cut(p, start, end);
	if (!n) { /* code the view did not know (anonymous, mapped executable): as such at its new place */
		struct mv_map a = { .start = start, .end = end, .prot = 5, .since = ts };

		view_add(p, &a);
	}
	for (size_t k = 0; k < n; k++) {
		struct mv_map m = moved[k];

		m.start = m.start - old_start + start;
		m.end = k + 1 == n ? end : m.end - old_start + start; /* the last one takes the growth */
		m.since = ts;
		if (m.start >= end)
			break;
		if (m.end > end)
			m.end = end;
		view_add(p, &m);
	}
	p->dirty = true;
}

/* whether [start, end) overlaps nothing in the view */
static bool view_free(const struct mv_proc *p, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].start < end && p->v[i].end > start)
			return false;
	return true;
}

/*
 * Read /proc/PID/maps into the view: all of it (seed: a process seen first, or after an exec),
 * or only anonymous and special mappings where the view has nothing (holes). Returns the
 * mappings added.
 */
static size_t view_read(struct mappings *ms, struct mv_proc *p, bool holes)
{
	struct dwunw_map *e = NULL;
	size_t added = 0, ne = 0;

	if (!holes) {
		p->n = 0;
		ms->stats.seeds++;
	}
	p->dirty = true;
	/* libdwunw's one parser (" (deleted)" cut off the path) */
	if (dwunw_maps_load((int32_t)p->pid, &e, &ne) != DWUNW_OK)
		return 0;
	for (size_t k = 0; k < ne; k++) {
		struct mv_map m = {
			.start = e[k].start, .end = e[k].end, .offset = e[k].offset, .ino = e[k].inode,
			.dev_major = e[k].dev_major, .dev_minor = e[k].dev_minor,
			.prot = (e[k].flags & DWUNW_MAP_R ? 1 : 0) | (e[k].flags & DWUNW_MAP_W ? 2 : 0) |
				(e[k].flags & DWUNW_MAP_X ? 4 : 0),
		};
		const char *path = e[k].path;

		if (m.end <= m.start)
			continue;
		if (path && *path) {
			m.path = intern(path);
			m.file = path[0] == '/' && m.ino;
			if (m.file)
				known_put(ms, m.ino, m.dev_major, m.dev_minor, m.path);
		}
		if (holes) {
			if (m.file || !view_free(p, m.start, m.end))
				continue;
			size_t i = 0;

			while (i < p->n && p->v[i].start < m.start)
				i++;
			map_insert_at(p, i, &m);
			added++;
			continue;
		}
		if (p->n && p->v[p->n - 1].end > m.start)
			continue;
		map_insert_at(p, p->n, &m);
		added++;
	}
	free(e);
	return added;
}

static void view_seed(struct mappings *ms, struct mv_proc *p)
{
	view_read(ms, p, false);
}

static struct mv_proc *proc_get(struct mappings *ms, uint32_t pid)
{
	struct mv_proc *p = proc_find(ms, pid);

	if (p)
		return p;
	if (ms->nprocs == ms->procs_cap) {
		ms->procs_cap = ms->procs_cap ? ms->procs_cap * 2 : 16;
		ms->procs = xrealloc(ms->procs, ms->procs_cap * sizeof(*ms->procs));
	}
	p = &ms->procs[ms->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	view_seed(ms, p);
	return p;
}

void mappings_seed(struct mappings *ms, uint32_t pid)
{
	proc_get(ms, pid);
}

/*
 * An event that could not name its file (no bpf_find_vma: kernels before 5.17, builds for kernels
 * without BTF): the file of the mapping that starts there in /proc/PID/maps now.
 * Later events are still queued behind this one, so the view ends right; only a mapping replaced
 * between the event and now would be named wrongly (a record in between then stops at a frame
 * that does not fit). Counted (named_from_proc). False when the process or the mapping is gone.
 */
static bool name_from_proc(struct mappings *ms, uint32_t pid, struct mv_map *m)
{
	struct dwunw_map *e = NULL;
	size_t ne = 0;
	bool found = false;

	if (dwunw_maps_load((int32_t)pid, &e, &ne) != DWUNW_OK)
		return false;
	for (size_t k = 0; k < ne && !found; k++) {
		/* the start only: ld.so maps a library's whole extent at once, then its segments over it */
		if (e[k].start != m->start || !e[k].path || e[k].path[0] != '/' || !e[k].inode)
			continue;
		m->path = intern(e[k].path);
		m->ino = e[k].inode;
		m->dev_major = e[k].dev_major;
		m->dev_minor = e[k].dev_minor;
		m->offset = e[k].offset;
		found = true;
	}
	free(e);
	ms->stats.named_from_proc += found;
	return found;
}

/* The path of an event's file, from its components, else learned from /proc by identity. */
static const char *event_path(const struct mappings *ms, const struct mmap_ev_rec *r)
{
	char buf[MMAP_EV_NAME_PARTS * MMAP_EV_PART_LEN + 2];

	if (!mmap_ev_rec_path(r, buf, sizeof(buf)))
		return known_get(ms, r->ino, r->dev_major, r->dev_minor);
	return intern(buf);
}

void mappings_event(struct mappings *ms, const void *data, size_t size)
{
	struct mmap_ev_rec r;
	struct mv_proc *p;

	if (size < sizeof(r))
		return;
	memcpy(&r, data, sizeof(r));
	ms->stats.events++;
	if (r.op == MMAP_EV_EXEC) {
		ms->stats.execs++;
		mapped_files_release(r.pid, 0, ~0ull, r.ts);
		p = proc_find(ms, r.pid);
		if (p)
			view_seed(ms, p);
		return;
	}
	if (r.end <= r.start)
		return;
	p = proc_get(ms, r.pid);
	if (r.op == MMAP_EV_MUNMAP) {
		ms->stats.munmaps++;
		view_cut(p, r.start, r.end);
		/* every record taken while it was mapped is processed: its file can go */
		mapped_files_release(r.pid, r.start, r.end, r.ts);
		return;
	}
	if (r.op == MMAP_EV_MPROTECT) {
		ms->stats.mprotects++;
		view_protect(p, r.start, r.end, (uint8_t)r.prot, r.ts);
		return;
	}
	if (r.op == MMAP_EV_MREMAP) {
		ms->stats.mremaps++;
		if (r.old_end > r.old_start)
			view_move(p, r.old_start, r.old_end, r.start, r.end, r.ts);
		return;
	}
	if (r.op == MMAP_EV_MMAP_ANON) { /* code of a JIT, mapped executable at once */
		struct mv_map a = { .start = r.start, .end = r.end, .prot = (uint8_t)r.prot, .since = r.ts };

		ms->stats.anon_mmaps++;
		view_add(p, &a);
		return;
	}
	if (r.op != MMAP_EV_MMAP && r.op != MMAP_EV_MMAP_UNKNOWN)
		return;
	mapped_files_tap(data, size); /* when no drain thread saw it first (profile) */
	struct mv_map m = {
		.start = r.start, .end = r.end, .offset = r.offset, .ino = r.ino,
		.dev_major = r.dev_major, .dev_minor = r.dev_minor, .prot = (uint8_t)r.prot, .file = 1,
		.since = r.ts,
	};
	m.path = r.op == MMAP_EV_MMAP ? event_path(ms, &r) : NULL;
	if (r.op == MMAP_EV_MMAP_UNKNOWN)
		name_from_proc(ms, r.pid, &m);
	m.unknown = !m.path;
	if (m.path)
		known_put(ms, m.ino, m.dev_major, m.dev_minor, m.path);
	ms->stats.mmaps++;
	ms->stats.unknown += m.unknown;
	view_add(p, &m);
}

/*
 * Mappings made by an event whose file is no longer the file at its path (deleted or replaced
 * since): named by their held file (mapped_files.h) before any walk, as libdwunw could not open
 * them by path. While such a mapping is still in the process, libdwunw opens it through
 * /proc/PID/map_files; it needs the held file once its range was unmapped or reused (a library
 * unloaded, then deleted). Looked at when the view changed (a mapping applied late may be gone
 * already) and when the drain thread saw a held file's range change, not per record: no system
 * call per record (a data munmap does not count).
 */
static void pin_gone(struct mappings *ms, struct mv_proc *p)
{
	uint64_t changes = mapped_files_hold_changes() + 1;

	if (!p->dirty && p->gone_chk == changes)
		return;
	p->gone_chk = changes;
	for (size_t i = 0; i < p->n; i++) {
		struct mv_map *m = &p->v[i];

		/* holds are taken for executable file mappings made by an event */
		if (!m->file || !m->since || m->held || m->unknown || !(m->prot & 4))
			continue;
		m->held = mapped_files_if_gone(p->pid, m->start, m->since);
		if (m->held) {
			ms->stats.held_pinned++;
			p->dirty = true;
		}
	}
}

void mappings_sync(struct mappings *ms, uint32_t pid, struct dwunw_ctx *dctx)
{
	struct mv_proc *p = proc_get(ms, pid);

	pin_gone(ms, p);
	if (!p->dirty)
		return;
	p->dirty = false;
#ifdef HAVE_DWUNW
	/* the view as libdwunw's entries, as they are (its paths copied by the call) */
	if (ms->entries_cap < p->n) {
		ms->entries_cap = p->n * 2;
		ms->entries = xrealloc(ms->entries, ms->entries_cap * sizeof(*ms->entries));
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct mv_map *m = &p->v[i];

		ms->entries[i] = (struct dwunw_map){
			.start = m->start, .end = m->end, .offset = m->offset, .inode = m->ino,
			.dev_major = m->dev_major, .dev_minor = m->dev_minor,
			.flags = (m->prot & 1 ? DWUNW_MAP_R : 0) | (m->prot & 2 ? DWUNW_MAP_W : 0) |
				 (m->prot & 4 ? DWUNW_MAP_X : 0),
			/* the held file instead of its path; an unknown file by a name that opens nothing */
			.path = m->held ? m->held : m->unknown ? "[unknown file]" : m->path ? m->path : "",
		};
	}
	if (p->n && dwunw_maps_pin_entries(dctx, (int32_t)pid, ms->entries, p->n) == DWUNW_OK)
		ms->stats.pins++;
#else
	(void)dctx;
#endif
}

/* The file mapping at pc in pid's view, or NULL. */
static struct mv_map *file_map_at(struct mappings *ms, uint32_t pid, uint64_t pc)
{
	struct mv_proc *p = proc_find(ms, pid);
	size_t lo = 0, hi;

	if (!p)
		return NULL;
	hi = p->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->v[mid].end <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= p->n || p->v[lo].start > pc || !p->v[lo].file)
		return NULL;
	return &p->v[lo];
}

bool mappings_use_hold(struct mappings *ms, uint32_t pid, uint64_t pc)
{
	struct mv_map *m = file_map_at(ms, pid, pc);

	/* mappings read from /proc (since 0) were not made by an event: nothing was held for them */
	if (!m || m->held || m->unknown || !m->since)
		return false;
	m->held = mapped_files_path(pid, m->start, m->since);
	if (!m->held)
		return false;
	ms->stats.held_late++;
	proc_find(ms, pid)->dirty = true;
	return true;
}

bool mappings_untrusted(struct mappings *ms, uint32_t pid, uint64_t pc)
{
	struct mv_map *m = file_map_at(ms, pid, pc);
	uint64_t changes;
	struct stat st;

	/* seeded from /proc, or unwound through its held file: its file is known for sure */
	if (!m || !m->since || m->held || m->unknown || !m->path)
		return false;
	/* looked up once per batch of drained changes, not per frame */
	changes = mapped_files_changes();
	if (m->chk_changes != changes + 1) {
		m->superseded = mapped_files_superseded(pid, m->start, m->end, m->since);
		m->chk_changes = changes + 1;
	}
	if (!m->superseded)
		return false;
	/* its path still names the very file: what libdwunw opened */
	return stat(m->path, &st) || (uint64_t)st.st_ino != m->ino || major(st.st_dev) != m->dev_major ||
	       minor(st.st_dev) != m->dev_minor;
}

const char *mappings_describe(struct mappings *ms, uint32_t pid, uint64_t pc, uint64_t ts, const char **why)
{
	const struct mv_map *m = file_map_at(ms, pid, pc);
	char buf[4200];

	*why = NULL;
	if (!m)
		return NULL;
	if (ts && m->since > ts) {
		*why = "mapped after the record was taken (perf buffer order)";
		return m->unknown ? NULL : m->path;
	}
	*why = mapped_files_why(m->unknown ? NULL : m->path, m->ino, m->dev_major, m->dev_minor);
	if (m->unknown || !m->path)
		return NULL;
	if (!strncmp(*why, "deleted", 7)) {
		snprintf(buf, sizeof(buf), "%s (deleted)", m->path);
		return intern(buf);
	}
	if (!strncmp(*why, "replaced", 8)) {
		snprintf(buf, sizeof(buf), "%s (replaced)", m->path);
		return intern(buf);
	}
	return m->path;
}

uint64_t mappings_file_id(struct mappings *ms, uint32_t pid, uint64_t pc, uint64_t ts, bool no_module, bool *unknown)
{
	const struct mv_map *m = file_map_at(ms, pid, pc);

	*unknown = false;
	if (!m)
		return 0;
	/* mapped after the record was taken: the view is newer than the record (the perf buffer
	 * orders records per CPU only), so which file was there is not known */
	*unknown = m->unknown || no_module || (ts && m->since > ts);
	/* device, inode and path: a deleted file's inode number goes to the next file made on that
	 * file system at once (copies of a plugin loaded in turn), which the path tells apart */
	uint64_t id = hash64(hash64(hash64(m->ino, m->dev_major), m->dev_minor), (uintptr_t)m->path);

	/* a file not known, or deleted or replaced since (unwound through its file held open): this
	 * very mapping, as the same path and inode may name another file by now */
	if (*unknown || m->held)
		id = hash64(id, m->since);
	return id | 1;
}

bool mappings_hole(struct mappings *ms, uint32_t pid, uint64_t pc)
{
	struct mv_proc *p = proc_find(ms, pid);

	return p && view_free(p, pc, pc + 1);
}

bool mappings_fill_holes(struct mappings *ms, uint32_t pid)
{
	struct mv_proc *p = proc_find(ms, pid);

	if (!p)
		return false;
	ms->stats.hole_reads++;
	return view_read(ms, p, true) > 0;
}

void mappings_rewalked(struct mappings *ms)
{
	ms->stats.rewalks++;
}

void mappings_fork(struct mappings *ms, uint32_t parent, uint32_t child)
{
	struct mv_proc *c;

	if (!ms)
		return;
	/* a fork record names a new process: a view under its pid is a dead one's (its exit record
	 * lost with a full buffer) */
	if (proc_find(ms, child))
		mappings_forget(ms, child);
	/* a parent not seen yet (it forks before its first record is processed): its view now */
	if (!proc_find(ms, parent) && (!proc_get(ms, parent)->n))
		return;
	if (ms->nprocs == ms->procs_cap) {
		ms->procs_cap = ms->procs_cap ? ms->procs_cap * 2 : 16;
		ms->procs = xrealloc(ms->procs, ms->procs_cap * sizeof(*ms->procs));
	}
	struct mv_proc *p = proc_find(ms, parent); /* after the realloc */
	ms->stats.forks++;
	c = &ms->procs[ms->nprocs++];
	*c = (struct mv_proc){ .pid = child, .dirty = true, .n = p->n, .cap = p->n ? p->n : 1 };
	c->v = xcalloc(c->cap, sizeof(*c->v));
	memcpy(c->v, p->v, p->n * sizeof(*p->v));
	for (size_t i = 0; i < c->n; i++)
		c->v[i].held = NULL; /* the parent's holds are released with its own ranges */
}

void mappings_sweep(struct mappings *ms, uint64_t processed_ts, void (*gone)(void *arg, uint32_t pid), void *arg)
{
	uint64_t now = mono_ns();

	if (!ms)
		return;
	for (size_t i = 0; i < ms->nprocs;) {
		struct mv_proc *p = &ms->procs[i];
		uint32_t pid = p->pid;

		if (!p->dead_at) {
			if (kill((pid_t)pid, 0) && errno == ESRCH)
				p->dead_at = now;
			i++;
		} else if (processed_ts > p->dead_at) {
			ms->stats.swept++;
			gone(arg, pid); /* forgets the view: another one is at i now */
			if (proc_find(ms, pid))
				mappings_forget(ms, pid);
		} else {
			i++;
		}
	}
}

size_t mappings_held(const struct mappings *ms, uint64_t *bytes)
{
	*bytes = 0;
	if (!ms)
		return 0;
	*bytes = ms->procs_cap * sizeof(*ms->procs) + ms->known_cap * sizeof(*ms->known);
	for (size_t i = 0; i < ms->nprocs; i++)
		*bytes += ms->procs[i].cap * sizeof(struct mv_map);
	return ms->nprocs;
}

void mappings_forget(struct mappings *ms, uint32_t pid)
{
	struct mv_proc *p = proc_find(ms, pid);

	if (!p)
		return;
	mapped_files_release(pid, 0, ~0ull, ~0ull);
	ms->stats.forgotten++;
	free(p->v);
	*p = ms->procs[--ms->nprocs];
	ms->last = 0;
}

int mappings_attach(struct bpf_object *obj, struct bpf_link ***links, size_t *nlinks)
{
	static const char *const progs[] = { "mmap_ev_exec" };
	int err = tool_links_attach(obj, progs, 1, links, nlinks);

	/* the system calls through the tracker shared with the walker's notices (mmap_track.h);
	 * its links live as long as the tool */
	return err ? err : mmap_track_attach(obj);
}

void mappings_flagged(struct mappings *ms)
{
	ms->stats.flagged++;
}

void mappings_json(struct mappings *ms)
{
	struct mapped_files_stats h;

	if (!ms)
		return;
	const struct mappings_stats *s = &ms->stats;

	mapped_files_stats_get(&h);
	uint64_t held_bytes;
	size_t nheld = mappings_held(ms, &held_bytes);

	printf(",\"maps\":{\"events\":%" PRIu64 ",\"mmaps\":%" PRIu64 ",\"unknown_files\":%" PRIu64
	       ",\"mprotects\":%" PRIu64 ",\"mremaps\":%" PRIu64 ",\"munmaps\":%" PRIu64 ",\"execs\":%" PRIu64 ",\"seeds\":%" PRIu64
	       ",\"records_flagged\":%" PRIu64 ",\"files_held\":%" PRIu64 ",\"files_missed\":%" PRIu64
	       ",\"held_used\":%" PRIu64 ",\"anon_mmaps\":%" PRIu64 ",\"held_pinned\":%" PRIu64 ",\"held_late\":%" PRIu64
	       ",\"hole_reads\":%" PRIu64 ",\"rewalks\":%" PRIu64 ",\"swept\":%" PRIu64 ",\"forks\":%" PRIu64
	       ",\"forgotten\":%" PRIu64 ",\"named_from_proc\":%" PRIu64
	       ",\"files_shared\":%" PRIu64
	       ",\"held\":{\"processes\":%zu,\"view_bytes\":%" PRIu64 ",\"files\":%" PRIu64
	       ",\"file_mappings\":%" PRIu64 ",\"file_bytes\":%" PRIu64 "}}",
	       s->events, s->mmaps, s->unknown, s->mprotects, s->mremaps, s->munmaps, s->execs, s->seeds, s->flagged, h.held, h.missed,
	       h.used, s->anon_mmaps, s->held_pinned, s->held_late, s->hole_reads, s->rewalks, s->swept, s->forks, s->forgotten,
	       s->named_from_proc, h.shared, nheld, held_bytes, h.open, h.mappings, h.bytes);
}

void mappings_held_text(struct mappings *ms, FILE *f)
{
	struct mapped_files_stats h;
	uint64_t bytes;
	size_t n;

	if (!ms)
		return;
	n = mappings_held(ms, &bytes);
	mapped_files_stats_get(&h);
	fprintf(f, "held: %zu processes' mappings (%.1f KiB), %" PRIu64 " files open; %" PRIu64 " views forked, %" PRIu64
		" freed (%" PRIu64 " of processes gone without an exit record)\n", n, (double)bytes / 1024.0, h.open,
		ms->stats.forks, ms->stats.forgotten, ms->stats.swept);
}

void mappings_text(struct mappings *ms)
{
	if (!ms)
		return;
	const struct mappings_stats *s = &ms->stats;

	/* only when something is flagged (the JSON summary always has the counts) */
	if (!s->unknown && !s->flagged)
		return;
	struct mapped_files_stats h;

	mapped_files_stats_get(&h);
	printf("maps: %" PRIu64 " file mappings of unknown file, %" PRIu64
	       " records flagged MODULE_UNKNOWN (of %" PRIu64 " mappings applied in record order); %" PRIu64
	       " library files gone before they could be held open, %" PRIu64 " unwound through a held file\n",
	       s->unknown, s->flagged, s->mmaps, h.missed, h.used);
}
