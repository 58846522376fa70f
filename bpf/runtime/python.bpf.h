/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPython frames read at the event, for any tool: include after capture.bpf.h. User space puts a
 * struct py_proc in py_procs for each python process (py_merge.c); py_emit() then sends, just
 * before the event's own stack record, a struct py_rec (py.h) with the current thread's chain:
 * thread state found by native thread id in the first interpreter's thread list, then
 * current_frame -> previous, per frame its code object, last instruction and entry marks.
 * Names and lines are read in user space once per code object (a code object freed by then is
 * marked, not guessed). Both walks are bounded (PY_MAX_THREADS, PY_MAX_FRAMES) and say when cut.
 */
#ifndef DWUNW_PYTHON_BPF_H
#define DWUNW_PYTHON_BPF_H

#include "py.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PY_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct py_scratch {
	__u8 fbuf[136];        /* one _PyInterpreterFrame's head (offsets masked to 127) */
	struct py_rec rec;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_cost);
} py_cost SEC(".maps");

static __always_inline __u64 py_u64(const struct py_scratch *s, __u16 off)
{
	return *(const __u64 *)(s->fbuf + (off & 120));
}

/* The thread state of tid in the process described by p: 0 when none was found. */
static __always_inline __u64 py_tstate(const struct py_proc *p, __u32 tid)
{
	__u64 interp = 0, ts = 0, ntid = 0;

	if (bpf_probe_read_user(&interp, 8, (void *)(p->runtime_addr + p->rt_interp_head)) || !interp)
		return 0;
	if (bpf_probe_read_user(&ts, 8, (void *)(interp + p->is_threads_head)))
		return 0;
	for (int i = 0; i < PY_MAX_THREADS && ts; i++) {
		if (bpf_probe_read_user(&ntid, 8, (void *)(ts + p->ts_native_tid)))
			return 0;
		if (ntid == tid)
			return ts;
		if (bpf_probe_read_user(&ts, 8, (void *)(ts + p->ts_next)))
			return 0;
	}
	return 0;
}

/*
 * Send tgid/tid's Python chain when tgid is a described python process: 1 when a record was
 * sent, 0 when the process is not one, < 0 when the record could not be sent.
 */
static __always_inline long py_emit(void *ctx, __u32 tgid, __u32 tid)
{
	const struct py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_scratch *s;
	__u64 ts, cframe = 0, fr = 0;
	__u32 n = 0, zero = 0;

	if (!p)
		return 0;
	__u64 t0 = bpf_ktime_get_ns();
	s = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!s)
		return -1;
	s->rec.h.kind = CAP_KIND_PY;
	s->rec.h.flags = 0;
	s->rec.pid = tgid;
	s->rec.tid = tid;
	s->rec.ts = t0;
	s->rec.status = PY_R_OK;
	ts = py_tstate(p, tid);
	if (!ts)
		s->rec.status = PY_R_NO_THREAD;
	else if (bpf_probe_read_user(&cframe, 8, (void *)(ts + p->ts_cframe)) ||
		 bpf_probe_read_user(&fr, 8, (void *)(cframe + p->cf_current_frame)))
		s->rec.status = PY_R_READ;
	for (int i = 0; i < PY_MAX_FRAMES && fr; i++) {
		struct py_raw_frame *f = &s->rec.frames[i];

		if (bpf_probe_read_user(s->fbuf, 80, (void *)fr)) {
			s->rec.status = PY_R_READ;
			break;
		}
		f->frame = fr;
		f->code = py_u64(s, p->fr_code);
		f->prev_instr = py_u64(s, p->fr_prev_instr);
		f->is_entry = p->entry_flag ? s->fbuf[p->fr_is_entry & 127] : 0;
		f->owner = s->fbuf[p->fr_owner & 127];
		fr = py_u64(s, p->fr_previous);
		n = i + 1;
	}
	if (fr && s->rec.status == PY_R_OK)
		s->rec.status = PY_R_DEPTH;
	s->rec.nframes = n;
	__u32 size = offsetof(struct py_rec, frames) + n * sizeof(struct py_raw_frame);
	if (size > sizeof(s->rec))
		size = sizeof(s->rec);
	s->rec.h.hdr_size = size;
	long err = cap_emit(ctx, &s->rec, size);
	struct py_cost *c = bpf_map_lookup_elem(&py_cost, &zero);

	if (c) {
		c->chains++;
		c->frames += n;
		c->ns += bpf_ktime_get_ns() - t0;
	}
	return err ? -1 : 1;
}

#endif /* DWUNW_PYTHON_BPF_H */
