// SPDX-License-Identifier: GPL-2.0-only
/* dwunw_py_stack: a thread's Python frames, from its thread state (found by native thread id) along
 * _PyCFrame.current_frame -> _PyInterpreterFrame.previous, each named by its code object. */
#include <stdlib.h>
#include <string.h>
#include "py_layout.h"
#include "py_linetable.h"
#include "py_mem.h"
#include "../ctx_handle.h"
#include "../internal.h"

#define MAX_INTERPS  64
#define MAX_THREADS  65536
#define MAX_LINETAB  (64u << 10)  /* larger tables: the line is not read */

/* What a code object gives its frames, kept for the rest of the call (the thread is stopped or the
 * process dead: a code object cannot change under one call). Recursion reads each code once. */
#define CODE_SLOTS 16
struct code_info {
	uint64_t code;                /* 0: empty */
	int32_t firstlineno, firsttraceable;
	int err;                      /* reading its names failed: every frame of it fails the same */
	uint32_t trunc;
	char name[128], file[256];
};

struct py_walk {
	struct dw_py_mem m;
	const struct dw_py_layout *L;
	const struct dwunw_py_runtime *rt;
	uint8_t *linetab;             /* MAX_LINETAB, one per call */
	uint64_t linetab_code;        /* whose table linetab holds (0: none) */
	uint64_t linetab_size;
	struct code_info codes[CODE_SLOTS];
};

/* The thread state whose native_thread_id is tid: 0 when none (not a Python thread). */
static int find_tstate(struct py_walk *w, int32_t tid, uint64_t *out)
{
	const struct dw_py_layout *L = w->L;
	uint64_t interp, ts, ntid;
	int err;

	*out = 0;
	if ((err = dw_py_read_u64(&w->m, w->rt->runtime_addr + L->rt_interp_head, &interp)))
		return err;
	for (unsigned i = 0; interp && i < MAX_INTERPS; i++) {
		if ((err = dw_py_read_u64(&w->m, interp + L->is_threads_head, &ts)))
			return err;
		for (unsigned j = 0; ts && j < MAX_THREADS; j++) {
			if ((err = dw_py_read_u64(&w->m, ts + L->ts_native_tid, &ntid)))
				return err;
			if (ntid == (uint64_t)(uint32_t)tid) {
				*out = ts;
				return DWUNW_OK;
			}
			if ((err = dw_py_read_u64(&w->m, ts + L->ts_next, &ts)))
				return err;
		}
		if ((err = dw_py_read_u64(&w->m, interp + L->is_next, &interp)))
			return err;
	}
	return DWUNW_OK;
}

/* Append code point cp as UTF-8; 0 when it does not fit. */
static int put_utf8(char *out, size_t cap, size_t *at, uint32_t cp)
{
	char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (char)cp, n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
	} else {
		b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
	}
	if (*at + n >= cap)
		return 0;
	memcpy(out + *at, b, n);
	*at += n;
	return 1;
}

/* A str object into out (UTF-8, NUL-terminated); *trunc set when cut. Only compact strings (what
 * code objects hold); anything else is an error: the object is not what the frame said. */
static int read_str(struct py_walk *w, uint64_t obj, char *out, size_t cap, int *trunc)
{
	const struct dw_py_layout *L = w->L;
	uint8_t hdr[48];
	uint64_t type, len;
	uint32_t state;
	uint8_t data[1024];
	size_t at = 0;

	out[0] = 0;
	if (dw_py_read(&w->m, obj, hdr, sizeof(hdr)))
		return DWUNW_ERR_IO;
	memcpy(&type, hdr + L->ob_type, 8);
	memcpy(&len, hdr + L->str_length, 8);
	memcpy(&state, hdr + L->str_state, 4);
	if (type != w->rt->str_type)
		return DWUNW_ERR_CORRUPT;
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4) || len > (1u << 30))
		return DWUNW_ERR_CORRUPT;
	uint64_t n = len * kind;
	if (n > sizeof(data)) {
		n = sizeof(data) - sizeof(data) % kind;
		*trunc = 1;
	}
	if (n && dw_py_read(&w->m, obj + (ascii ? L->str_ascii_data : L->str_compact_data), data, n))
		return DWUNW_ERR_IO;
	for (uint64_t i = 0; i < n; i += kind) {
		uint32_t cp = kind == 1 ? data[i] : kind == 2 ? (uint32_t)(data[i] | data[i + 1] << 8)
				   : (uint32_t)(data[i] | data[i + 1] << 8 | data[i + 2] << 16 | (uint32_t)data[i + 3] << 24);
		if (!put_utf8(out, cap, &at, cp)) {
			*trunc = 1;
			break;
		}
	}
	out[at] = 0;
	return DWUNW_OK;
}

/* The line a frame is at: its last instruction (prev_instr) looked up in co_linetable. */
static int32_t frame_line(struct py_walk *w, uint64_t code, uint64_t prev_instr, int32_t firstlineno)
{
	const struct dw_py_layout *L = w->L;
	uint64_t start = code + L->co_code, tab, size;

	if (prev_instr < start)        /* not started: CPython reports the first line */
		return firstlineno;
	if ((prev_instr - start) & 1)
		return -1;
	if (w->linetab_code != code) {
		w->linetab_code = 0;
		if (dw_py_read_u64(&w->m, code + L->co_linetable, &tab) || dw_py_read_u64(&w->m, tab + L->bytes_size, &size) ||
		    size > MAX_LINETAB || (size && dw_py_read(&w->m, tab + L->bytes_data, w->linetab, size)))
			return -1;
		w->linetab_code = code;
		w->linetab_size = size;
	}
	size = w->linetab_size;
	int line = dw_py311_line(w->linetab, size, firstlineno, (uint32_t)((prev_instr - start) / 2));
	return line < 0 ? -1 : line;
}

struct raw_frame {
	uint64_t code, previous, prev_instr;
	uint8_t is_entry, owner;
};

static int read_frame(struct py_walk *w, uint64_t fr, struct raw_frame *rf)
{
	const struct dw_py_layout *L = w->L;
	uint8_t b[80];
	size_t need = (size_t)(L->fr_owner > L->fr_is_entry ? L->fr_owner : L->fr_is_entry) + 1;

	if (need > sizeof(b) || dw_py_read(&w->m, fr, b, need))
		return DWUNW_ERR_IO;
	memcpy(&rf->code, b + L->fr_code, 8);
	memcpy(&rf->previous, b + L->fr_previous, 8);
	memcpy(&rf->prev_instr, b + L->fr_prev_instr, 8);
	rf->is_entry = L->entry_flag ? b[L->fr_is_entry] : 0;
	rf->owner = b[L->fr_owner];
	return DWUNW_OK;
}

/* One frame's names and line; DWUNW_ERR_* when it is not a frame of a code object; *skip when
 * CPython itself would not show it yet (pushed, its first traceable instruction not reached). */
/* The code object's names and numbers, read once per call. */
static const struct code_info *code_of(struct py_walk *w, uint64_t code)
{
	const struct dw_py_layout *L = w->L;
	struct code_info *ci = &w->codes[(code >> 4) % CODE_SLOTS];
	uint8_t co[256];
	uint64_t type, qualname, filename;
	int trunc = 0;

	if (ci->code == code)
		return ci;
	memset(ci, 0, sizeof(*ci));
	ci->code = code;
	if (L->co_code > sizeof(co) || dw_py_read(&w->m, code, co, L->co_code)) {
		ci->err = DWUNW_ERR_IO;
		return ci;
	}
	memcpy(&type, co + L->ob_type, 8);
	if (type != w->rt->code_type) {
		ci->err = DWUNW_ERR_CORRUPT;
		return ci;
	}
	memcpy(&qualname, co + L->co_qualname, 8);
	memcpy(&filename, co + L->co_filename, 8);
	memcpy(&ci->firstlineno, co + L->co_firstlineno, 4);
	memcpy(&ci->firsttraceable, co + L->co_firsttraceable, 4);
	if ((ci->err = read_str(w, qualname, ci->name, sizeof(ci->name), &trunc)) == DWUNW_OK)
		ci->err = read_str(w, filename, ci->file, sizeof(ci->file), &trunc);
	ci->trunc = trunc;
	return ci;
}

/* One frame's names and line; DWUNW_ERR_* when it is not a frame of a code object; *skip when
 * CPython itself would not show it yet (pushed, its first traceable instruction not reached). */
static int describe(struct py_walk *w, uint64_t fr, const struct raw_frame *rf, struct dwunw_py_frame *out, int *skip)
{
	const struct dw_py_layout *L = w->L;
	const struct code_info *ci = code_of(w, rf->code);

	*skip = 0;
	if (ci->err)
		return ci->err;
	memset(out, 0, sizeof(*out));
	out->frame = fr;
	out->code = rf->code;
	memcpy(out->name, ci->name, sizeof(out->name));
	memcpy(out->file, ci->file, sizeof(out->file));
	int32_t line = frame_line(w, rf->code, rf->prev_instr, ci->firstlineno);
	out->line = line > 0 ? line : 0;
	out->flags = (rf->is_entry ? DWUNW_PY_ENTRY : 0) | (line <= 0 ? DWUNW_PY_NO_LINE : 0) |
		     (ci->trunc ? DWUNW_PY_TRUNCATED : 0) | (rf->owner == L->owner_generator ? DWUNW_PY_GENERATOR : 0);
	*skip = rf->owner != L->owner_generator &&
		rf->prev_instr < rf->code + L->co_code + (uint64_t)ci->firsttraceable * 2;
	return DWUNW_OK;
}

/* One raw frame into the chain (the rule both readers share: a 3.12 shim marks the frame above it
 * as its call's entry, a frame CPython would not show yet hands its entry mark inward). */
static int take_frame(struct py_walk *w, uint64_t fr, const struct raw_frame *rf,
		      struct dwunw_py_frame *frames, size_t *cnt, size_t cap)
{
	const struct dw_py_layout *L = w->L;
	int skip, err;

	if (rf->owner == L->owner_cstack) {
		/* 3.12's shim below an eval call's first frame: that frame is its entry; a shim
		 * with no frame of its own call above it (just pushed) cuts the chain. */
		if (!*cnt || (frames[*cnt - 1].flags & DWUNW_PY_ENTRY))
			return DWUNW_ERR_CORRUPT;
		frames[*cnt - 1].flags |= DWUNW_PY_ENTRY;
		return DWUNW_OK;
	}
	if (*cnt == cap)
		return DWUNW_ERR_DEPTH;
	if ((err = describe(w, fr, rf, &frames[*cnt], &skip)))
		return err;
	/* A skipped entry frame hands its mark to the inner frame of its native call; when that
	 * call shows no other frame, it is shown (it is what that call runs). */
	if (skip && rf->is_entry && (!*cnt || (frames[*cnt - 1].flags & DWUNW_PY_ENTRY)))
		skip = 0;
	if (!skip)
		(*cnt)++;
	else if (rf->is_entry)
		frames[*cnt - 1].flags |= DWUNW_PY_ENTRY;
	return DWUNW_OK;
}

/* A walker over pid's memory: one allocation per call (line table, code cache), none per frame. */
static int walk_open(struct dwunw_ctx_impl *c, const struct dwunw_py_runtime *rt, struct py_walk **out)
{
	const struct dw_py_layout *L;
	struct py_walk *w;
	int err;

	*out = NULL;
	if (!(L = dw_py_layout_at(rt->layout)))
		return DWUNW_ERR_UNSUPPORTED;
	if (!(w = calloc(1, sizeof(*w))) || !(w->linetab = malloc(MAX_LINETAB))) {
		free(w);
		return DWUNW_ERR_NOMEM;
	}
	w->rt = rt;
	w->L = L;
	if ((err = dw_py_mem_open(&w->m, c, rt->pid))) {
		free(w->linetab);
		free(w);
		return err;
	}
	*out = w;
	return DWUNW_OK;
}

static void walk_close(struct py_walk *w)
{
	dw_py_mem_close(&w->m);
	free(w->linetab);
	free(w);
}

DWUNW_API int dwunw_py_stack(struct dwunw_ctx *ctx, const struct dwunw_py_runtime *rt, int32_t tid,
			     struct dwunw_py_frame *frames, size_t *n)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	const struct dw_py_layout *L;
	struct py_walk *w;
	uint64_t ts, cframe, fr;
	size_t cap, cnt = 0;
	int err;

	if (!n)
		return DWUNW_ERR_INVALID_ARG;
	cap = *n;
	*n = 0;
	if (!c || !rt || rt->size < sizeof(*rt) || (cap && !frames) || tid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	if ((err = walk_open(c, rt, &w)))
		return err;
	L = w->L;
	err = find_tstate(w, tid, &ts);
	if (!err && !ts)
		err = DWUNW_ERR_NOT_FOUND;
	if (!err)
		err = dw_py_read_u64(&w->m, ts + L->ts_cframe, &cframe);
	if (!err)
		err = dw_py_read_u64(&w->m, cframe + L->cf_current_frame, &fr);
	while (!err && fr) {
		struct raw_frame rf;

		if ((err = read_frame(w, fr, &rf)))
			break;
		err = take_frame(w, fr, &rf, frames, &cnt, cap);
		fr = rf.previous;
	}
	walk_close(w);
	*n = cnt;
	return err;
}

DWUNW_API int dwunw_py_describe(struct dwunw_ctx *ctx, const struct dwunw_py_runtime *rt,
				const struct dwunw_py_raw *raw, size_t nraw,
				struct dwunw_py_frame *frames, size_t *n)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct py_walk *w;
	size_t cap, cnt = 0;
	int err;

	if (!n)
		return DWUNW_ERR_INVALID_ARG;
	cap = *n;
	*n = 0;
	if (!c || !rt || rt->size < sizeof(*rt) || (cap && !frames) || (nraw && !raw))
		return DWUNW_ERR_INVALID_ARG;
	if ((err = walk_open(c, rt, &w)))
		return err;
	for (size_t i = 0; !err && i < nraw; i++) {
		struct raw_frame rf = { .code = raw[i].code, .prev_instr = raw[i].prev_instr,
					.is_entry = raw[i].is_entry, .owner = raw[i].owner };
		err = take_frame(w, raw[i].frame, &rf, frames, &cnt, cap);
	}
	walk_close(w);
	*n = cnt;
	return err;
}

DWUNW_API int dwunw_py_offsets(const struct dwunw_py_runtime *rt, struct dwunw_py_offsets *o)
{
	const struct dw_py_layout *L;

	if (!rt || !o || rt->size < sizeof(*rt))
		return DWUNW_ERR_INVALID_ARG;
	if (!(L = dw_py_layout_at(rt->layout)))
		return DWUNW_ERR_UNSUPPORTED;
	memset(o, 0, sizeof(*o));
	o->rt_interp_head = L->rt_interp_head;
	o->is_next = L->is_next;
	o->is_threads_head = L->is_threads_head;
	o->ts_next = L->ts_next;
	o->ts_cframe = L->ts_cframe;
	o->ts_native_tid = L->ts_native_tid;
	o->cf_current_frame = L->cf_current_frame;
	o->fr_code = L->fr_code;
	o->fr_previous = L->fr_previous;
	o->fr_prev_instr = L->fr_prev_instr;
	o->fr_is_entry = L->fr_is_entry;
	o->fr_owner = L->fr_owner;
	o->entry_flag = L->entry_flag;
	o->owner_cstack = L->owner_cstack;
	return DWUNW_OK;
}
