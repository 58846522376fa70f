// SPDX-License-Identifier: GPL-2.0-only
/* Files of executable mappings held open by identity: see mapped_files.h. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "intern.h"
#include "mmap_ev.h"
#include "mapped_files.h"

/*
 * A held file: one per identity (device, inode), shared by every mapping of it in every process.
 * While the fd is open the inode cannot be freed, so no other file can take its number: a later
 * mapping event with the same device and inode is the same file, and finds it held without an
 * open. (The mapping events carry no build id; device and inode of an inode kept alive are
 * unique, which a build id could only confirm.)
 */
struct hold {
	int fd;                /* -1: free */
	int used_fd;           /* the number given to libdwunw (never one given before), -1: none */
	uint32_t refs;         /* mappings (struct mref) using it */
	uint64_t ino, seq;
	uint32_t maj, min;
	char path[MMAP_EV_NAME_PARTS * MMAP_EV_PART_LEN + 2]; /* as the first mapping named it */
};

/* One executable file mapping of a process, made by the event of kernel time ts: its file. */
struct mref {
	uint32_t pid;
	uint32_t next;         /* the next of the pid's bucket (index + 1; 0: none); free list */
	uint32_t hold;         /* index in holds[] */
	uint32_t pad;
	uint64_t start, end, ts;
};

/* few files at once (libraries mapped by the traced processes): a flat table under one lock; the
 * drain thread takes it once per executable mmap, the main thread only on a frame without module.
 * The mappings, many more (each process maps the same few files), hash by pid. */
static struct hold holds[MAPPED_FILES_MAX];
#define MREF_BUCKETS 1024
static uint32_t mref_bucket[MREF_BUCKETS]; /* index + 1 of the first mref of a pid bucket */
static struct mref *mrefs;
static uint32_t mrefs_cap, mrefs_free; /* free list: index + 1 */
static uint64_t seq;
static struct mapped_files_stats stats;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool inited;
/*
 * libdwunw caches modules by path and file identity (device, inode, size, times): a deleted
 * file's inode number is reused, and copies made within one clock tick have equal times, so a
 * /proc/self/fd/N reused for another file could be served the first file's module. The number
 * given to libdwunw is therefore never one given before: a duplicate at or above next_fresh.
 */
static int next_fresh = 1024;

static void init_locked(void)
{
	if (inited)
		return;
	for (size_t i = 0; i < MAPPED_FILES_MAX; i++)
		holds[i].fd = holds[i].used_fd = -1;
	inited = true;
}

static uint32_t *bucket_of(uint32_t pid)
{
	return &mref_bucket[(pid * 2654435761u) >> 22 & (MREF_BUCKETS - 1)];
}

/* A mapping's ref, chained into its pid's bucket; NULL when out of memory. Locked. */
static struct mref *mref_add(uint32_t pid)
{
	uint32_t i, *b = bucket_of(pid);

	if (!mrefs_free) {
		uint32_t cap = mrefs_cap ? mrefs_cap * 2 : 256;
		struct mref *v = realloc(mrefs, (size_t)cap * sizeof(*v));

		if (!v)
			return NULL;
		mrefs = v;
		for (i = cap; i-- > mrefs_cap;) {
			mrefs[i].next = mrefs_free;
			mrefs_free = i + 1;
		}
		mrefs_cap = cap;
	}
	i = mrefs_free - 1;
	mrefs_free = mrefs[i].next;
	mrefs[i] = (struct mref){ .pid = pid, .next = *b };
	*b = i + 1;
	stats.mappings++;
	return &mrefs[i];
}

/* The file's fds closed once no mapping uses it. Locked. */
static void hold_close(struct hold *h)
{
	close(h->fd);
	if (h->used_fd >= 0)
		close(h->used_fd);
	h->fd = h->used_fd = -1;
	h->refs = 0;
}

/* Unchain *link's mref (free it) and drop its hold's reference. Locked. */
static void mref_drop(uint32_t *link)
{
	uint32_t i = *link - 1;
	struct hold *h = &holds[mrefs[i].hold];

	*link = mrefs[i].next;
	mrefs[i].next = mrefs_free;
	mrefs[i].pid = 0;
	mrefs_free = i + 1;
	stats.mappings--;
	if (h->fd >= 0 && !--h->refs)
		hold_close(h);
}

/* Iterate over pid's mrefs: `link` points at the link to the current one. */
#define for_each_mref(pid, link) \
	for (uint32_t *link = bucket_of(pid); *link; link = &mrefs[*link - 1].next)

/* The held file of this identity, or NULL. Locked. */
static struct hold *hold_find(uint64_t ino, uint32_t maj, uint32_t min)
{
	for (size_t i = 0; i < MAPPED_FILES_MAX; i++) {
		struct hold *h = &holds[i];

		if (h->fd >= 0 && h->ino == ino && h->maj == maj && h->min == min)
			return h;
	}
	return NULL;
}

bool mmap_ev_rec_path(const struct mmap_ev_rec *r, char *buf, size_t size)
{
	size_t len = 0;

	if (r->op != MMAP_EV_MMAP || (r->flags & MMAP_EV_F_PATH_CUT) || !r->nparts ||
	    r->nparts > MMAP_EV_NAME_PARTS || size < 2)
		return false;
	for (uint32_t k = r->nparts; k-- > 0;) {
		size_t l = strnlen(r->parts[k], MMAP_EV_PART_LEN);

		if (l == MMAP_EV_PART_LEN || len + 1 + l + 1 > size)
			return false;
		buf[len++] = '/';
		memcpy(buf + len, r->parts[k], l);
		len += l;
	}
	buf[len] = 0;
	return true;
}

static bool same_id(int fd, uint64_t ino, uint32_t maj, uint32_t min)
{
	struct stat st;

	return !fstat(fd, &st) && (uint64_t)st.st_ino == ino && major(st.st_dev) == maj &&
	       minor(st.st_dev) == min;
}

/*
 * The file of the mapping by its path, when that path still names the file mapped (same device
 * and inode); -1 otherwise. Not /proc/PID/map_files: by the time the event is drained, the range
 * may hold a later mapping (a library unloaded, another loaded at its address), whose file can
 * have the deleted one's inode number (tmpfs and ext4 reuse them at once): device and inode could
 * not tell them apart, and the held file would be the wrong one.
 */
static int open_mapping(const struct mmap_ev_rec *r, const char *path)
{
	int fd;

	if (!*path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && same_id(fd, r->ino, r->dev_major, r->dev_minor))
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Already held? Locked. */
static bool held_locked(const struct mmap_ev_rec *r)
{
	init_locked();
	for_each_mref(r->pid, link) {
		const struct mref *m = &mrefs[*link - 1];

		/* by the event itself: an inode number is reused once a file is deleted */
		if (m->pid == r->pid && m->ts == r->ts && m->start == r->start)
			return true;
	}
	return false;
}

static bool drain_taps; /* a drain thread taps every record first: the main thread need not */
static void mapped_files_tap_one(const void *data, size_t size);

/*
 * Ranges changed by events the drain thread has seen (it runs ahead of the main thread): a
 * mapping made before such a change is no longer what /proc/PID/map_files shows for its range.
 * A ring; a query older than what it still holds is answered "changed" (never trusted).
 */
#define CHG_MAX 1024
static struct chg {
	uint32_t pid;
	uint64_t start, end, ts;
} chg[CHG_MAX];
static size_t chg_next, chg_n;
static uint64_t chg_floor;    /* ts of the newest entry overwritten */
static uint64_t chg_latest;   /* ts of the newest entry */
static uint64_t chg_seq;      /* entries ever noted (read without the lock) */
static uint64_t chg_hold_seq; /* ... of them across a held file's mapping made before (read without the lock) */

uint64_t mapped_files_changes(void)
{
	return __atomic_load_n(&chg_seq, __ATOMIC_ACQUIRE);
}

uint64_t mapped_files_hold_changes(void)
{
	return __atomic_load_n(&chg_hold_seq, __ATOMIC_ACQUIRE);
}

static void chg_note(const struct mmap_ev_rec *r)
{
	struct chg c = { r->pid, r->start, r->end, r->ts };

	if (r->op == MMAP_EV_EXEC) {
		c.start = 0;
		c.end = ~0ull;
	} else if (r->op == MMAP_EV_MREMAP) {
		c.start = r->old_start;
		c.end = r->old_end;
	} else if (r->op != MMAP_EV_MUNMAP && r->op != MMAP_EV_MMAP && r->op != MMAP_EV_MMAP_UNKNOWN &&
		   r->op != MMAP_EV_MMAP_ANON) {
		return;
	}
	pthread_mutex_lock(&mu);
	if (chg_n == CHG_MAX && chg[chg_next].ts > chg_floor)
		chg_floor = chg[chg_next].ts;
	chg[chg_next] = c;
	chg_next = (chg_next + 1) % CHG_MAX;
	if (chg_n < CHG_MAX)
		chg_n++;
	if (c.ts > chg_latest)
		chg_latest = c.ts;
	__atomic_add_fetch(&chg_seq, 1, __ATOMIC_RELEASE);
	init_locked();
	for_each_mref(c.pid, link) {
		const struct mref *m = &mrefs[*link - 1];

		if (m->pid == c.pid && m->ts < c.ts && m->start < c.end && c.start < m->end) {
			__atomic_add_fetch(&chg_hold_seq, 1, __ATOMIC_RELEASE);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}

bool mapped_files_superseded(uint32_t pid, uint64_t start, uint64_t end, uint64_t since)
{
	bool yes = false;

	if (!__atomic_load_n(&drain_taps, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&mu);
	if (chg_latest > since) {
		yes = since < chg_floor;
		for (size_t i = 0; i < chg_n && !yes; i++)
			yes = chg[i].pid == pid && chg[i].ts > since && chg[i].start < end && start < chg[i].end;
	}
	pthread_mutex_unlock(&mu);
	return yes;
}

void mapped_files_tap_drain(const void *data, size_t size)
{
	struct mmap_ev_rec r;

	__atomic_store_n(&drain_taps, true, __ATOMIC_RELAXED);
	if (size >= sizeof(r)) {
		memcpy(&r, data, sizeof(r));
		if (r.h.kind == CAP_KIND_MAPEV)
			chg_note(&r);
	}
	mapped_files_tap_one(data, size);
}

void mapped_files_tap(const void *data, size_t size)
{
	if (__atomic_load_n(&drain_taps, __ATOMIC_RELAXED))
		return;
	mapped_files_tap_one(data, size);
}

/* A hold for the file of r (path: where it was opened, fd: that open); NULL when none is free. An
 * identity table full means more distinct files than MAPPED_FILES_MAX are mapped at once: the one
 * held longest goes, with its mappings (counted: evicted). Locked. */
static struct hold *hold_new_locked(const struct mmap_ev_rec *r, const char *path, int fd)
{
	struct hold *slot = NULL;

	for (size_t i = 0; i < MAPPED_FILES_MAX; i++) {
		struct hold *h = &holds[i];

		if (h->fd < 0) {
			slot = h;
			break;
		}
		if (!slot || h->seq < slot->seq)
			slot = h;
	}
	if (slot->fd >= 0) {
		uint32_t victim = (uint32_t)(slot - holds);

		for (uint32_t b = 0; b < MREF_BUCKETS; b++)
			for (uint32_t *link = &mref_bucket[b]; *link;) {
				if (mrefs[*link - 1].hold == victim)
					mref_drop(link); /* the last one closes it */
				else
					link = &mrefs[*link - 1].next;
			}
		if (slot->fd >= 0)
			hold_close(slot);
		stats.evicted++;
	}
	*slot = (struct hold){ .fd = fd, .used_fd = -1, .ino = r->ino, .maj = r->dev_major, .min = r->dev_minor,
			       .seq = ++seq };
	snprintf(slot->path, sizeof(slot->path), "%s", path);
	stats.held++;
	return slot;
}

/* r's mapping refers to h from now on. Locked. */
static void mref_attach(const struct mmap_ev_rec *r, struct hold *h)
{
	struct mref *m = mref_add(r->pid);

	if (!m) {
		if (!h->refs)
			hold_close(h);
		return;
	}
	m->hold = (uint32_t)(h - holds);
	m->start = r->start;
	m->end = r->end;
	m->ts = r->ts;
	h->refs++;
}

static void mapped_files_tap_one(const void *data, size_t size)
{
	struct mmap_ev_rec r;
	char path[sizeof(holds[0].path)] = "";
	struct hold *h;
	bool dup;
	int fd;

	if (size < sizeof(r))
		return;
	memcpy(&r, data, sizeof(r));
	if (r.h.kind != CAP_KIND_MAPEV || r.op != MMAP_EV_MMAP || !(r.prot & 4) || r.end <= r.start)
		return;
	pthread_mutex_lock(&mu);
	dup = held_locked(&r); /* tapped already (the drain thread, then the main one) */
	/* its file held already (another mapping, another process): no open */
	h = dup ? NULL : hold_find(r.ino, r.dev_major, r.dev_minor);
	if (h) {
		mref_attach(&r, h);
		stats.shared++;
	}
	pthread_mutex_unlock(&mu);
	if (dup || h)
		return;
	mmap_ev_rec_path(&r, path, sizeof(path));
	fd = open_mapping(&r, path);

	pthread_mutex_lock(&mu);
	if (fd < 0) {
		stats.missed++;
	} else if (held_locked(&r)) {
		close(fd);
	} else if ((h = hold_find(r.ino, r.dev_major, r.dev_minor))) {
		close(fd); /* held by another thread meanwhile */
		mref_attach(&r, h);
		stats.shared++;
	} else {
		mref_attach(&r, hold_new_locked(&r, path, fd));
	}
	pthread_mutex_unlock(&mu);
}

/* A descriptor number never used before for a held file: next_fresh and up (NOFILE raised). */
static int fresh_fd(int fd)
{
	struct rlimit rl;
	int nfd;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)next_fresh + 64 &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, next_fresh);
	if (nfd >= 0)
		next_fresh = nfd + 1;
	return nfd;
}

/* The hold of the mapping made by the event of time ts (cut at its start since, it keeps its
 * file), or NULL. Locked. */
static struct hold *hold_of_locked(uint32_t pid, uint64_t start, uint64_t ts)
{
	init_locked();
	for_each_mref(pid, link) {
		const struct mref *m = &mrefs[*link - 1];

		if (m->pid == pid && m->ts == ts && start >= m->start && start < m->end)
			return &holds[m->hold];
	}
	return NULL;
}

/* "/proc/self/fd/N" of h's file, given to libdwunw (a number never given before). Locked. */
static const char *hold_use_locked(struct hold *h, char *fn, size_t size)
{
	if (h->used_fd < 0)
		h->used_fd = fresh_fd(h->fd);
	if (h->used_fd < 0)
		return NULL;
	stats.used++;
	snprintf(fn, size, "/proc/self/fd/%d", h->used_fd);
	return fn;
}

const char *mapped_files_path(uint32_t pid, uint64_t start, uint64_t ts)
{
	char fn[32];
	const char *path = NULL;
	struct hold *h;

	pthread_mutex_lock(&mu);
	h = hold_of_locked(pid, start, ts);
	if (h)
		path = hold_use_locked(h, fn, sizeof(fn));
	pthread_mutex_unlock(&mu);
	return path ? intern(path) : NULL;
}

const char *mapped_files_if_gone(uint32_t pid, uint64_t start, uint64_t ts)
{
	char fn[32];
	const char *path = NULL;
	struct stat held, now;
	struct hold *h;

	pthread_mutex_lock(&mu);
	h = hold_of_locked(pid, start, ts);
	/* the held file unlinked, or its path now names another file (or nothing) */
	if (h && !fstat(h->fd, &held) &&
	    (held.st_nlink == 0 || stat(h->path, &now) || now.st_ino != held.st_ino || now.st_dev != held.st_dev))
		path = hold_use_locked(h, fn, sizeof(fn));
	pthread_mutex_unlock(&mu);
	return path ? intern(path) : NULL;
}

const char *mapped_files_why(const char *path, uint64_t ino, uint32_t maj, uint32_t min)
{
	struct stat st;

	if (!path)
		return "its file is not known";
	if (stat(path, &st))
		return "deleted before it could be held open";
	if ((uint64_t)st.st_ino != ino || major(st.st_dev) != maj || minor(st.st_dev) != min)
		return "replaced at its path before it could be held open";
	return "its file cannot be loaded";
}

const char *mapped_files_name(const char *path)
{
	static const char pfx[] = "/proc/self/fd/";
	char buf[sizeof(holds[0].path) + 16];
	const char *name = NULL;
	int fd;

	if (!path || strncmp(path, pfx, sizeof(pfx) - 1))
		return path;
	fd = atoi(path + sizeof(pfx) - 1);
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < MAPPED_FILES_MAX && !name; i++) {
		struct hold *h = &holds[i];
		int fd2;

		if (h->fd < 0 || h->used_fd != fd || !inited)
			continue;
		if (!h->path[0]) {
			name = path;
			break;
		}
		fd2 = open(h->path, O_RDONLY | O_CLOEXEC);
		snprintf(buf, sizeof(buf), "%s%s", h->path,
			 fd2 >= 0 && same_id(fd2, h->ino, h->maj, h->min) ? "" : " (deleted)");
		if (fd2 >= 0)
			close(fd2);
		name = buf;
	}
	pthread_mutex_unlock(&mu);
	return name ? intern(name) : path;
}

void mapped_files_release(uint32_t pid, uint64_t start, uint64_t end, uint64_t ts)
{
	pthread_mutex_lock(&mu);
	init_locked();
	for (uint32_t *link = bucket_of(pid); *link;) {
		const struct mref *m = &mrefs[*link - 1];

		/* released once the whole mapping went (a partial munmap leaves code mapped); a hold
		 * taken for a later mapping (the drain thread runs ahead: the same range reused) stays;
		 * the file is closed with the last mapping of it */
		if (m->pid == pid && start <= m->start && m->end <= end && m->ts < ts)
			mref_drop(link);
		else
			link = &mrefs[*link - 1].next;
	}
	pthread_mutex_unlock(&mu);
}

void mapped_files_stats_get(struct mapped_files_stats *out)
{
	pthread_mutex_lock(&mu);
	init_locked();
	*out = stats;
	out->open = 0;
	for (size_t i = 0; i < MAPPED_FILES_MAX; i++)
		out->open += holds[i].fd >= 0;
	out->bytes = sizeof(holds) + sizeof(mref_bucket) + (uint64_t)mrefs_cap * sizeof(*mrefs);
	pthread_mutex_unlock(&mu);
}
