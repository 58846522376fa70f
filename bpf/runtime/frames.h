/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Record -> frames: a capture snapshot unwound with libdwunw (HAVE_DWUNW), or a
 * bpf_get_stackid() frame-pointer stack read from its stack map, interned in the stack store
 * and symbolized once when new. A tool owns one struct frames in its context: the unwinder
 * context (or, without libdwunw, the ELF symbolizer of syms.h), the stack store it interns into,
 * the mappings in record order (mappings.h) when the tool has mapping events, its limits.
 */
#ifndef DWUNW_FRAMES_H
#define DWUNW_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "capture.h"
#include "stack_store.h"

#define FRAMES_MAX 128          /* frames kept per unwound stack (default) */
#define FRAMES_FP_DEPTH 127     /* frames in a bpf_get_stackid() stack (PERF_MAX_STACK_DEPTH) */

#ifdef HAVE_DWUNW
#include "dwunw.h"
#endif

struct freeze;
struct mappings;
struct syms_proc;

/* Modules seen in symbolized frames (each file once, by path), with their build ids. */
struct module_seen {
	const char *path;      /* interned, as in struct uframe.module */
	const char *build_id;  /* hex, interned; NULL when the file has none */
};

struct frames {
	/* set by the tool (frames_setup gives the defaults) */
	struct stack_store *st;   /* where stacks are interned */
	struct mappings *maps;    /* the traced processes' mappings in record order; NULL: no
				   * mapping events (libdwunw reads /proc itself) */
	uint32_t max;             /* frames kept per unwound stack (--max-frames) */
	bool use_perf_map;        /* name anonymous code from /tmp/perf-PID.map */
	bool want_lines;          /* --lines: frames_lines gives named frames their file:line */
#ifdef HAVE_DWUNW
	struct dwunw_ctx dctx;    /* the unwinder (frames_init) */
	bool dctx_ok;
#else
	struct syms_proc *syms;   /* the symbolizer (the tool's; freed by frames_shutdown) */
#endif
	/* frames.c's own: modules seen, scratch of the unwind */
	struct {
		struct module_seen *v;
		size_t n, cap;
		uint32_t *index;      /* open addressing on the path pointer: entry + 1 */
		size_t index_cap;
	} mods;
	struct frame_lines *lines; /* frame_lines.c's: the addresses looked up */
	void (*lines_end)(struct frames *fr); /* frame_lines_want's: its summary and free, at shutdown */
	size_t lines_done;        /* stacks [0, lines_done) looked at by frames_lines */
	struct freeze *fz;        /* --unwind=freeze: records with CAP_F_FROZEN held while walked */
	uint64_t lag_ns;          /* DWUNW_TEST_LAG_MS */
	void *frames;             /* struct dwunw_frame[max + 1] */
	uint64_t *pcs, *ids;      /* max + 1 each */
	uint32_t cap;
	void *patch_buf;
	size_t patch_buf_size;
};

/* Defaults: stacks into st, FRAMES_MAX frames, perf maps used, no mappings. */
void frames_setup(struct frames *fr, struct stack_store *st);
#ifdef HAVE_DWUNW
/* Module-cache slots for a system-wide tool: one per executable file a busy host maps, by RAM
 * (16 MiB a slot, 256 .. 4096). */
uint32_t frames_machine_slots(void);
/* dwunw_init with `cache_slots` module-cache slots holding at most `cache_bytes` (--cache-bytes;
 * 0: libdwunw's default) and warnings on stderr under -v; names only (DWUNW_CFG_NO_LINES:
 * file:line comes from frames_lines, with --lines). */
int frames_init(struct frames *fr, uint32_t cache_slots, uint64_t cache_bytes, uint32_t flags,
		const char *debug_dirs);
/*
 * With DWUNW_CFG_DEBUGINFOD: wait at most wait_ms for the debug files asked (the fetches ran on
 * libdwunw's thread while sampling), name the stored frames of the modules whose file came, and
 * print one line for the modules whose file did not (which, and why). Before the report.
 */
void frames_name_fetched(struct frames *fr, uint32_t wait_ms);
#endif
/* libdwunw's module cache now: modules loaded (active + warm) and the bytes they hold (its byte
 * bound, config cache_bytes: --cache-bytes, keeps the warm ones within it); 0 without it.
 * bound and evictions (may be NULL): that bound, and the modules freed to keep within it. */
uint64_t frames_modules_held(const struct frames *fr, uint64_t *bytes, uint64_t *bound, uint64_t *evictions);
/* The same as a JSON member: ,"module_cache":{"modules":N,"bytes":B} (memleak's summary). */
void frames_modules_json(const struct frames *fr);
/* The unwinder (or symbolizer) shut down, the scratch freed; with --lines, one line on stderr
 * says what the look-ups cost (frame_lines_summary). */
void frames_shutdown(struct frames *fr);

/* pid exec'd: what the unwinder and the mappings know of it goes. */
void frames_forget_pid(struct frames *fr, uint32_t pid);
/* pid's mappings re-read by the unwinder now (a new module: its next record may be in it). */
void frames_refresh_pid(struct frames *fr, uint32_t pid);

size_t frames_modules(const struct frames *fr, const struct module_seen **out);
/* The module seen under this (interned) path, and its index in frames_modules(); NULL if none. */
const struct module_seen *frames_module_find(const struct frames *fr, const char *path, size_t *index);

/* Name frames[i] of pid's stack: its pc exact (frame 0, after a signal) or a return address. */
void fill_pc(struct frames *fr, pid_t pid, struct uframe *frames, uint32_t i, bool exact);

/* "[stack lost: ...]" for a bpf_get_stackid() error (positive errno). */
const char *fperr_label(uint64_t err);

/* Stack id -> stack index cache of one stack map (ids are stable while the map lives). */
struct fp_cache {
	uint32_t n;
	int32_t *map;          /* stack index + 1 */
};

/*
 * The interned stack of bpf_get_stackid() id `id` in the stack map `map_fd` (a pseudo-stack for
 * a negative id), in address space `space`, symbolized for `pid`; with replace_first, its first
 * pc replaced by first_pc (not cached). `cache` may be NULL.
 */
int64_t fp_stack_of(struct frames *fr, struct fp_cache *cache, int map_fd, pid_t pid,
		    uint64_t space, int64_t id, uint64_t first_pc, bool replace_first);

/* Counters of the snapshots unwound. */
struct unwind_stats {
	uint64_t records;      /* snapshots received */
	uint64_t bad;          /* malformed */
	uint64_t patched;      /* snapshots with a pending return address written back */
	uint64_t unwind_ns;    /* over the timed ones */
	uint64_t timed;
	uint64_t fallback;     /* DWUNW_ERR_UNSUPPORTED_ARCH: fp stack used */
	uint64_t frames_fp;    /* frames recovered by frame pointers inside DWARF walks */
};

/* space argument: each process its own address space (the record's pid) */
#define FRAMES_SPACE_PID (1ull << 63)

#define FRAMES_BAD      (-1)   /* malformed record */
#define FRAMES_FALLBACK (-2)   /* architecture not unwindable: use the record's fp stack */

/*
 * Unwind the snapshot record `data`: the index of its interned stack (frames after the first
 * `skip` ones; stopped walks carry "[unwind stopped: REASON]"), or FRAMES_BAD /
 * FRAMES_FALLBACK. *recp: the (possibly patched) record, valid until the next call.
 */
#ifdef HAVE_DWUNW
int64_t frames_from_snapshot(struct frames *fr, const void *data, size_t size, uint32_t skip,
			     uint64_t space, struct unwind_stats *stats, const struct cap_record **recp);
#endif

#endif /* DWUNW_FRAMES_H */
