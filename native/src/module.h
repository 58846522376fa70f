/* SPDX-License-Identifier: GPL-2.0-only */
/* A module: one ELF file and what is compiled from it (unwind table, symbols), living in a slot
 * of the context's module cache. */
#ifndef DWUNW_MODULE_H
#define DWUNW_MODULE_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "ctx_handle.h"
#include "elf_file.h"
#include "shape.h"
#include "table.h"

#define DW_REF_EVICTING UINT32_MAX  /* refcnt while a slot is being emptied */

struct dw_symtab;
struct dw_proc;

/* An ELF image the context owns (a vDSO copied out of a process). */
struct dw_image {
	struct dw_image *next;
	size_t size;
	uint8_t data[];
};

struct dwunw_module {
	/* Slot state. The struct lives as long as the context; its contents change on reload. */
	_Atomic uint32_t refcnt;
	_Atomic uint32_t gen;       /* bumped at each load; odd while loading or empty */
	uint32_t slot;
	uint32_t loaded;            /* holds a module (under ctx lock) */
	uint32_t stale;             /* its file changed on disk: never handed out again */
	_Atomic uint64_t warm_seq;  /* when refcnt last dropped to 0: the LRU order of reclaim (one
				     * stamp per release, i.e. per capture, never per frame) */
	struct dwunw_ctx_impl *ctx;

	/* Identity */
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;      /* any write moves it; utimensat cannot set it back */
	int is_image;

	struct dw_elf elf;

	/* Built on first use */
	pthread_mutex_t lock;
	_Atomic int table_state;    /* 0 = not built, 1 = built, < 0 = DWUNW_ERR_* */
	struct dw_table table;      /* for unwinding: built by range when the module is big */
	_Atomic int full_state;     /* the same for `full`, built when a caller wants every row */
	struct dw_table full;       /* every row (dump, export, row APIs); unused when table is eager */
	_Atomic int syms_state;
	struct dw_symtab *syms;
	_Atomic int py_none;        /* dwunw_py_find: no CPython runtime symbols here (per file, not per pid) */
};

struct dwunw_ctx_impl {
	struct dwunw_config cfg;    /* strings duplicated below */
	char *sysroot;
	char *debug_dirs;
	pthread_mutex_t lock;       /* module loads and evictions, process maps */
	struct dwunw_module *slots; /* cfg.cache_slots of them */
	uint32_t nslots;
	_Atomic uint64_t hits, misses, evictions;
	_Atomic uint64_t warm_clock;
	uint64_t bytes_bound;       /* cfg.cache_bytes in effect (UINT64_MAX: none) */
	_Atomic uint64_t bytes_evictions;
	uint64_t *bound_scratch;    /* nslots byte counts for dw_cache_bound_locked (under the lock) */
	uint64_t trim_mark;         /* warm_clock at the last dwunw_cache_trim (under the lock) */
	struct dw_proc *procs;      /* per-pid maps (proc.c) */
	/* The process of the last capture, with a reference of its own: a capture of the same pid
	 * uses it without the lock (dw_proc_enter). Processes it pointed at are freed only while no
	 * capture runs (readers == 0); until then they wait in the graveyard. */
	_Atomic(struct dw_proc *) last_proc;
	_Atomic uint32_t readers;
	struct dw_proc *graveyard;
	uint32_t nprocs;
	uint64_t proc_seq;
	struct dw_image *images;    /* vDSO images read from processes, deduplicated */
	struct dw_fetcher *fetcher; /* debuginfod.c: with DWUNW_CFG_DEBUGINFOD */
	/* One live-read buffer (unwind.c) kept between captures: no malloc/free per capture that
	 * reads live (a traced free() in memleak itself costs a trap). Taken by exchange. */
	uint8_t *_Atomic live_spare;
	/* The places (walk.h) of a capture, kept for the next one: a capture of the same process
	 * walks in them instead of looking its modules up. Whoever sets memo_busy owns the fields
	 * below until it clears it; a capture that finds it set does without (no waiting). No
	 * reference is kept: a module is taken again only if its slot still holds the same load. */
	_Atomic uint32_t memo_busy;
	uint32_t memo_nplaces;      /* places filled so far (the next victim) */
	const struct dw_proc *memo_proc;
	uint64_t memo_proc_seq;     /* loaded_seq of memo_proc: the same maps */
	uint32_t memo_gen[DW_MEMO_PLACES];
	uint64_t memo_place[DW_MEMO_PLACES][18];
	struct dw_shape memo_shapes[DW_MEMO_PLACES][1 << DW_SHAPE_BITS]; /* per place (shape.h) */
	uint64_t memo_dirty[DW_MEMO_PLACES]; /* the sets written since the cache was emptied */
};

/* Take a reference on an already-loaded slot if it still holds generation `gen`. Inline, as
 * dw_module_put: every capture takes and drops one per module it walks through. */
static inline int dw_module_get(struct dwunw_module *m, uint32_t gen)
{
	uint32_t r = atomic_load_explicit(&m->refcnt, memory_order_acquire);

	do {
		if (r == DW_REF_EVICTING)
			return DWUNW_ERR_NO_MODULE;
	} while (!atomic_compare_exchange_weak_explicit(&m->refcnt, &r, r + 1, memory_order_acq_rel,
							 memory_order_acquire));
	DW_RACE_POINT();
	if (atomic_load_explicit(&m->gen, memory_order_acquire) != gen) {
		/* Not ours after all: undo without touching its place in the FIFO. */
		atomic_fetch_sub_explicit(&m->refcnt, 1, memory_order_acq_rel);
		return DWUNW_ERR_NO_MODULE;
	}
	return DWUNW_OK;
}

/* Drop a reference; the last one makes the slot warm (its place in the eviction order). */
static inline void dw_module_put(struct dwunw_module *m)
{
	if (atomic_fetch_sub_explicit(&m->refcnt, 1, memory_order_acq_rel) == 1)
		atomic_store_explicit(&m->warm_seq,
				      atomic_fetch_add_explicit(&m->ctx->warm_clock, 1, memory_order_relaxed) + 1,
				      memory_order_relaxed);
}
/* dwunw_cache_trim: free the warm slots not used since the last call. */
int dw_module_trim(struct dwunw_ctx_impl *c, uint32_t *freed);
/* Empty a slot this caller owns (refcnt == DW_REF_EVICTING) and count the eviction; the slot
 * is left free (refcnt 0). Under the context lock. */
void dw_module_evict(struct dwunw_module *m);

/* The byte bound (module.c). Bytes a module holds now: table(s), symbol index, line table,
 * ELF bytes read (what dwunw_module_memory reports, plus the line table). */
uint64_t dw_module_bytes(struct dwunw_module *m);
/* Count the loaded modules' bytes and free warm ones, least recently used first, until they fit
 * the bound. Under the context lock. */
void dw_cache_bound_locked(struct dwunw_ctx_impl *c);
/* m built something (a table, its symbols, its lines): apply the bound now. Takes the context
 * lock: never call it holding that lock or m's. */
void dw_module_grew(struct dwunw_module *m);

/* Find or load a module; takes a reference. `name` is its path as shown and matched (with the
 * file's stat identity); `open_path` what to open (e.g. /proc/PID/map_files/... for a deleted
 * file), NULL = name. With `image`, the ELF is that buffer. */
int dw_module_acquire(struct dwunw_ctx_impl *c, const char *name, const char *open_path,
		      const void *image, size_t size, struct dwunw_module **out);

/* A caller's image registered under `name`, with a reference; DWUNW_ERR_NO_MODULE if none. */
/* A module still cached for the file `path` that was device maj:min, inode ino (even if the path
 * now names another file or none): pinned maps of a library unloaded and deleted since. */
int dw_module_find_file(struct dwunw_ctx_impl *c, const char *path, uint32_t maj, uint32_t min,
			uint64_t ino, struct dwunw_module **out);
int dw_module_find_image(struct dwunw_ctx_impl *c, const char *name, struct dwunw_module **out);

/* The module's table for look-ups, built on first call (thread-safe); a big module's is built
 * by range as pcs are looked up (table_lazy.c). */
int dw_module_table(struct dwunw_module *m, const struct dw_table **out);
/* Every row of the module's table: the look-up table when it is eager, else one built whole. */
int dw_module_full_table(struct dwunw_module *m, const struct dw_table **out);

#endif
