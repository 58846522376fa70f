/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Interned user stacks: each distinct stack (its pcs, how it was obtained, why it stopped, in
 * which address space) is stored and symbolized once; tools keep its index. The store holds
 * frames only: a tool keeps its own figures per stack in arrays indexed like it. Each tool owns
 * its store (a struct stack_store in its context). The table is bounded (max); a stack refused
 * for room is counted and replaced by the pseudo-stack "[stack table full]", so nothing is
 * dropped silently.
 */
#ifndef DWUNW_STACK_STORE_H
#define DWUNW_STACK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <dwunw.h>

/* A source position (frame_lines.h): file interned, line 0 when the row has none. */
struct src_line {
	const char *file;
	uint32_t line;
};

struct uframe {
	uint64_t pc;
	const char *name;      /* NULL: no symbol */
	uint64_t offset;
	const char *module;    /* NULL: not in a file mapping */
	uint64_t maddr;        /* pc as an address of the module's file (0: unknown) */
	uint32_t how;          /* enum dwunw_how for unwound frames (0 otherwise), or HOW_KERNEL */
	uint32_t flags;        /* UF_* */
	const struct src_line *src; /* --lines: its file:line (frames_lines), NULL when unknown */
};

#define UF_FP      (1u << 0) /* recovered by frame pointers inside a DWARF walk (no CFI there) */
#define UF_JIT     (1u << 1) /* anonymous executable memory */
#define UF_PERFMAP (1u << 2) /* named from /tmp/perf-PID.map */
#define UF_EXACT   (1u << 4) /* pc is not a return address (frame 0, after a signal frame) */
#define UF_LIVE    (1u << 3) /* rests on memory read from the process after the event (for at least
			      * one record of the stack): it, or a frame below it, needed it */

/*
 * Where a frame came from, in bits 8-11 of flags (frame_origin() in report_fmt.h names it; UF_LIVE
 * overrides it when shown). Only UO_WINDOW, UO_SIGNAL and UO_KERNEL rest on nothing but what was
 * captured at the event and on the CFI or the ABI.
 */
enum uf_origin {
	UO_WINDOW = DWUNW_ORIGIN_WINDOW,   /* registers and stack window captured at the event, stepped by CFI */
	UO_FP = DWUNW_ORIGIN_FP,           /* frame pointers (no CFI at the callee's pc; or a frame-pointer stack) */
	UO_PROLOGUE = DWUNW_ORIGIN_PROLOGUE, /* the callee's prologue decoded (no CFI) */
	UO_LR = DWUNW_ORIGIN_LR,           /* the return address where a call leaves it: link register, [sp] (no CFI) */
	UO_SIGNAL = DWUNW_ORIGIN_SIGNAL,   /* a signal frame's saved context */
	UO_KERNEL = DWUNW_ORIGIN_KERNEL,   /* a kernel frame (the kernel's own unwinder, at the event) */
	UO_KWALK = DWUNW_ORIGIN_KERNEL_WALK, /* a user frame walked in the BPF program at the event (--unwind=kernel) */
	UO_PYTHON = DWUNW_ORIGIN_PYTHON,   /* a Python function read from the interpreter at the event (py_merge.h):
					    * name = co_qualname, module = co_filename, offset = line (0: unknown) */
	UO_FROZEN = DWUNW_ORIGIN_FROZEN,   /* stepped by CFI over stack memory read from the thread stopped at
					    * the event (--unwind=freeze): event-time state, as the window's */
};
#define UF_ORIGIN_SHIFT 8
#define UF_ORIGIN_MASK  (0xfu << UF_ORIGIN_SHIFT)

static inline uint32_t uf_origin(const struct uframe *f)
{
	return (f->flags & UF_ORIGIN_MASK) >> UF_ORIGIN_SHIFT;
}

static inline void uf_set_origin(struct uframe *f, enum uf_origin o)
{
	f->flags = (f->flags & ~UF_ORIGIN_MASK) | ((uint32_t)o << UF_ORIGIN_SHIFT);
}

/* uframe.how of a frame walked by the in-kernel walker (--unwind=kernel; not a dwunw_how) */
#define HOW_KERNEL 16

enum stack_kind {
	SK_DWARF = 1,          /* unwound by libdwunw */
	SK_FP,                 /* frame-pointer stack (fp mode, or the dwarf fallback) */
	SK_PSEUDO,             /* no frames: a reason (lost record, ...) */
};

struct ustack {
	uint64_t hash;
	uint64_t space;        /* address space the pcs belong to (profile: pid; memleak: 0) */
	uint32_t kind;
	int32_t stop;          /* SK_DWARF: DWUNW_OK or why the walk stopped */
	const char *label;     /* SK_PSEUDO: what it stands for; SK_DWARF stopped: the reason */
	const char *stop_name; /* machine-readable reason (JSON, summary) */
	uint32_t nframes;
	struct uframe *frames;
	uint64_t *ids;         /* per frame: the identity of its file (mappings.h), or NULL */
	bool beyond;           /* SK_DWARF: some unwind read memory beyond the stack window */
	bool live;             /* ... read live after the event (not from a thread frozen at it) */
};

struct stack_store {
	struct ustack *v;
	size_t n, cap;
	uint32_t *index;       /* open addressing: stack index + 1 */
	size_t index_cap;
	size_t max;            /* stacks with frames kept at most (pseudo-stacks always fit) */
	uint64_t full;         /* stacks refused: table full */
	uint64_t bytes;        /* held by the stacks' frames and ids */
	uint64_t freed;        /* stacks freed by stack_store_compact */
};

#define STACK_STORE_MAX 65536 /* default max */

/* An empty store keeping at most `max` stacks with frames (0: STACK_STORE_MAX). */
void stack_store_init(struct stack_store *st, size_t max);

/* Fills the frames of a new stack (their pcs are set) with names and modules. */
typedef void (*fill_fn)(void *arg, struct uframe *frames, uint32_t n);

/* The stack's index; a new one is added (frames filled by fill()) when absent. */
int64_t stack_get_in(struct stack_store *st, uint64_t space, uint32_t kind, int32_t stop, const char *label,
		     const char *stop_name, const uint64_t *pcs, uint32_t n, fill_fn fill, void *arg);
/*
 * The same, keyed by (file identity, pc) per frame: `ids` (n, may be NULL) tells apart two
 * files mapped at one address at different times, so their stacks never merge.
 */
int64_t stack_get_ids(struct stack_store *st, uint64_t space, uint32_t kind, int32_t stop, const char *label,
		      const char *stop_name, const uint64_t *pcs, const uint64_t *ids, uint32_t n,
		      fill_fn fill, void *arg);

static inline int64_t stack_get(struct stack_store *st, uint32_t kind, int32_t stop,
				const char *label, const char *stop_name, const uint64_t *pcs, uint32_t n,
				fill_fn fill, void *arg)
{
	return stack_get_in(st, 0, kind, stop, label, stop_name, pcs, n, fill, arg);
}

/*
 * Frees the stacks whose keep[i] is false and numbers the others anew, in their order: remap[i]
 * is stack i's new index, or -1 when it was freed. Every index a caller holds must be remapped
 * (or dropped) after. Returns the number of stacks freed.
 */
size_t stack_store_compact(struct stack_store *st, const bool *keep, int64_t *remap);

/* The pseudo-stack standing for `label` (interned here). */
int64_t pseudo_stack(struct stack_store *st, const char *label);

#endif /* DWUNW_STACK_STORE_H */
