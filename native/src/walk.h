/* SPDX-License-Identifier: GPL-2.0-only */
/* The state of one capture (dwunw_capture): the register state of a frame, the places (mapping,
 * module, table) recent frames were in, and what the capture holds and has read. */
#ifndef DWUNW_WALK_H
#define DWUNW_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "proc.h"
#include "table.h"
#include "utils/stack_reader.h"

#define DW_HELD_MAX 32
#define DW_STEP_REGS 34  /* registers copied per step: at least every backend's nregs (x86_64 17, arm64 and mips32 32) */

/* The register state of one frame: only the arch's registers are copied between steps. */
struct state {
	uint64_t pc;
	uint64_t valid;
	uint64_t regs[DWUNW_MAX_REGS];
};

/* Where a pc is: a mapping, its module (held once per capture), load bias and table. */
struct place {
	uint64_t start, len;       /* the mapping: lookup - start < len */
	/* the same for a return address (lookup = pc - 1, pc inside too): pc - start1 < len1; 0 0
	 * when empty (nothing matches) */
	uint64_t start1, len1;
	uint64_t bias;
	const struct dw_table *table;
	/* the table's look-up, unpacked for walk_fast (rcache NULL: no table, or no walk_fast) */
	uint64_t tbias;            /* bias + table base: lookup - tbias is the table offset */
	_Atomic uint64_t *rcache;
	unsigned rshift;
	const struct dw_rule *rules;
	const struct dw_regrule *regrules;
	/* a CFI frame's module, how and flags, laid out as in struct dwunw_frame (frame_modhow) */
	struct dwunw_module *mod;
	uint64_t howflags;
	struct dw_map *map;
	/* pre-decoded rules (shape.h): the memo's cache of this place, else dw_no_shapes */
	struct dw_shape *shapes;
	uint64_t *dirty;           /* shapes_w: the sets written (dw_memo_fill empties only those) */
	uint32_t fflags;           /* DWUNW_FRAME_* every frame here carries (JIT, vDSO, uprobes) */
	int err;
	uint8_t unused;            /* taken from the memo, no frame yet: held[hidx] has no frame */
	uint8_t hidx;
	uint8_t shapes_w;          /* shapes may be filled (the capture owns the memo) */
};

/* An empty shape cache, never written (shapes_w 0). */
extern const struct dw_shape dw_no_shapes[1 << DW_SHAPE_BITS];

#define DW_LIVE_PAGE 4096
#define DW_LIVE_SPAN (64u << 10)   /* bytes of live stack read in one batch */
#define DW_SAMPLE_MAX 4096u        /* bytes of samples checked per capture */
#define DW_SAMPLE_IOV 64           /* samples checked per capture */

struct walk {
	struct dwunw_ctx_impl *c;
	const struct dwunw_arch_ops *arch;
	const struct dwunw_regs *in;
	const uint8_t *snap;
	uint64_t snap_lo, snap_len;
	struct dw_proc *proc;
	int proc_ref;              /* the capture holds a reference on proc (else it is a reader) */
	/* DW_MEMO_PLACES recent places (frame_place); empty: len 0, no rcache. The context's memo
	 * when the capture owns it (place_memo.h), else own[] */
	struct place *places;
	unsigned nplaces;          /* places filled so far */
	uint8_t remote_on;
	uint8_t refreshed;
	uint8_t beyond;            /* the current step read beyond the snapshot */
	uint8_t checked;           /* the samples were compared with the live process */
	uint8_t stale;             /* ... and one differed: live memory is not trusted */
	uint8_t nowait;            /* DWUNW_REGS_NOWAIT: no file I/O, no context lock */
	uint8_t blocked;           /* ... and a read of a module file was refused */
	uint8_t filled;            /* the places filled by this capture (bit per place) */
	unsigned asz;
	uint64_t live_lo, live_len; /* live_buf holds the process's bytes [live_lo, +live_len) */
	uint8_t *live_buf;         /* DW_LIVE_SPAN + DW_SAMPLE_MAX bytes, allocated on first need */
	const struct dwunw_stack_sample *samples;
	size_t nsamples;
	/* not cleared at the start of a capture: */
	struct dw_remote remote;   /* set up on first use (remote_on) */
	struct place own[DW_MEMO_PLACES];
	struct {
		struct dwunw_module *m;
		uint32_t frame;    /* first frame using it: it carries the reference */
	} held[DW_HELD_MAX];
	unsigned nheld;
};

_Static_assert(offsetof(struct dwunw_frame, flags) == offsetof(struct dwunw_frame, how) + 4,
	       "a frame's how and flags are one 8-byte word (place.howflags)");
_Static_assert(sizeof(void *) != 8 ||
	       (offsetof(struct dwunw_frame, how) == offsetof(struct dwunw_frame, module) + 8 &&
		offsetof(struct place, howflags) == offsetof(struct place, mod) + 8),
	       "with 64-bit pointers a frame's module, how and flags are 16 bytes, as a place's mod and howflags");

/* A CFI frame's module, how and flags from its place: one 16-byte copy with 64-bit pointers. */
static inline void frame_modhow(struct dwunw_frame *f, const struct place *p)
{
	if (sizeof(void *) == 8) {
		memcpy(&f->module, &p->mod, 16);
	} else {
		f->module = p->mod;
		memcpy(&f->how, &p->howflags, sizeof(p->howflags));
	}
}

/* The first frame in a place taken from the memo carries its module's reference. */
static inline void place_use(struct walk *w, const struct place *pl, uint32_t fi)
{
	if (DW_UNLIKELY(pl->unused)) {
		if (w->held[pl->hidx].frame > fi)
			w->held[pl->hidx].frame = fi;
		((struct place *)pl)->unused = 0;
	}
}

#endif
