// SPDX-License-Identifier: GPL-2.0-only
/* py_merge.h */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture.h"
#include "frames.h"
#include "intern.h"
#include "py.h"
#include "py_merge.h"
#include "stack_store.h"
#include "tool_util.h"

#ifdef HAVE_DWUNW
#define PROC_SLOTS 1024         /* processes looked at (direct-mapped by pid: a collision evicts) */
#define TID_SLOTS  256          /* chains waiting for their stack record (by tid) */

struct proc_slot {
	uint32_t pid;
	uint8_t state;          /* 0: empty, 1: python (in py_procs), 2: looked at, not python */
	uint64_t looked_ns;     /* state 2: looked at again 100 ms later (an exec, a dlopen since) */
	struct dwunw_py_runtime rt;
};

struct tid_slot {
	uint32_t tid;
	bool full;
	struct py_rec rec;
};

void py_merge_init(struct py_merge *pm, struct frames *fr, int fd, int cfd, bool v)
{
	memset(pm, 0, sizeof(*pm));
	pm->fr = fr;
	pm->procs_fd = fd;
	pm->cost_fd = cfd;
	pm->verbose = v;
	pm->procs = xcalloc(PROC_SLOTS, sizeof(*pm->procs));
	pm->tids = xcalloc(TID_SLOTS, sizeof(*pm->tids));
	pm->raw = xcalloc(PY_MAX_FRAMES, sizeof(*pm->raw));
	pm->pyf = xcalloc(PY_MAX_FRAMES, sizeof(*pm->pyf));
}

/* The BPF program's cost, summed over the CPUs. */
static void bpf_cost(struct py_merge *pm, struct py_cost *sum)
{
	int cost_fd = pm->cost_fd;
	int ncpu = libbpf_num_possible_cpus();
	uint32_t zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (cost_fd < 0 || ncpu <= 0)
		return;
	struct py_cost *v = xcalloc((size_t)ncpu, sizeof(*v));

	if (bpf_map_lookup_elem(cost_fd, &zero, v) == 0)
		for (int c = 0; c < ncpu; c++) {
			sum->chains += v[c].chains;
			sum->frames += v[c].frames;
			sum->ns += v[c].ns;
		}
	free(v);
}

void py_merge_shutdown(struct py_merge *pm)
{
	struct py_cost c;
	bool verbose = pm->verbose;
	struct py_merge_stats py_stats = pm->stats;

	if (!pm->procs)
		return;
	bpf_cost(pm, &c);
	if (verbose && c.chains)
		fprintf(stderr, "python: BPF read %" PRIu64 " chains of %" PRIu64 " frames in %" PRIu64
			" ns: %" PRIu64 " ns per chain, %.1f frames per chain\n", (uint64_t)c.chains,
			(uint64_t)c.frames, (uint64_t)c.ns, (uint64_t)(c.ns / c.chains),
			(double)c.frames / (double)c.chains);
	if (verbose && py_stats.procs)
		fprintf(stderr, "python: %" PRIu64 " processes, %" PRIu64 " chains: %" PRIu64 " merged (%" PRIu64
			" frames), %" PRIu64 " not placed, %" PRIu64 " without thread state, %" PRIu64
			" cut, %" PRIu64 " orphaned, %" PRIu64 " samples of a described process without one; naming %" PRIu64 " ns per chain\n",
			py_stats.procs, py_stats.records, py_stats.merged, py_stats.frames, py_stats.unplaced,
			py_stats.no_thread, py_stats.cut, py_stats.orphan, py_stats.missing,
			py_stats.records ? py_stats.describe_ns / py_stats.records : 0);
	free(pm->procs);
	free(pm->tids);
	free(pm->raw);
	free(pm->pyf);
	free(pm->mf);
	free(pm->mpcs);
	free(pm->mids);
	memset(pm, 0, sizeof(*pm));
}

static void evict(struct py_merge *pm, struct proc_slot *s)
{
	if (s->state == 1 && pm->procs_fd >= 0)
		bpf_map_delete_elem(pm->procs_fd, &s->pid);
	s->state = 0;
	s->pid = 0;
}

void py_merge_add(struct py_merge *pm, uint32_t pid)
{
	struct proc_slot *s;
	struct dwunw_py_offsets o;
	struct py_proc p = {};

	if (!pm->procs || !pm->fr->dctx_ok || !pid)
		return;
	s = &pm->procs[pid % PROC_SLOTS];
	if (s->state == 1 && s->pid == pid)
		return;
	uint64_t now = mono_ns();
	bool again = s->state == 2 && s->pid == pid;

	if (again && now - s->looked_ns < 100000000ull)
		return;
	evict(pm, s);
	s->pid = pid;
	s->state = 2;
	s->looked_ns = now;
	memset(&s->rt, 0, sizeof(s->rt));
	s->rt.size = sizeof(s->rt);
	int rc = dwunw_py_find(&pm->fr->dctx, (int32_t)pid, &s->rt);
	if (rc != DWUNW_OK) {
		if (rc == DWUNW_ERR_UNSUPPORTED && !again)
			fprintf(stderr, "warning: pid %u: %s: %s: native frames only\n", pid,
				s->rt.path[0] ? s->rt.path : "CPython",
				s->rt.why[0] ? s->rt.why : dwunw_strerror(rc));
		return;
	}
	if (dwunw_py_offsets(&s->rt, &o) != DWUNW_OK)
		return;
	p.runtime_addr = s->rt.runtime_addr;
	p.rt_interp_head = o.rt_interp_head;
	p.is_threads_head = o.is_threads_head;
	p.ts_next = o.ts_next;
	p.ts_cframe = o.ts_cframe;
	p.ts_native_tid = o.ts_native_tid;
	p.cf_current_frame = o.cf_current_frame;
	p.fr_code = o.fr_code;
	p.fr_previous = o.fr_previous;
	p.fr_prev_instr = o.fr_prev_instr;
	p.fr_is_entry = o.fr_is_entry;
	p.fr_owner = o.fr_owner;
	p.entry_flag = o.entry_flag;
	p.owner_cstack = o.owner_cstack;
	if (bpf_map_update_elem(pm->procs_fd, &pid, &p, BPF_ANY)) {
		fprintf(stderr, "warning: pid %u: no room to describe CPython to the BPF program: native frames only\n", pid);
		return;
	}
	s->state = 1;
	pm->stats.procs++;
	if (pm->verbose)
		fprintf(stderr, "pid %u: CPython %u.%u in %s: Python frames read at each event\n", pid,
			s->rt.version >> 24, (s->rt.version >> 16) & 0xff, s->rt.path);
}

void py_merge_forget(struct py_merge *pm, uint32_t pid)
{
	if (pm->procs && pm->procs[pid % PROC_SLOTS].pid == pid)
		evict(pm, &pm->procs[pid % PROC_SLOTS]);
}

bool py_merge_record(struct py_merge *pm, const void *data, size_t size)
{
	const struct cap_rec_hdr *h = data;
	const struct py_rec *r = data;

	if (size < sizeof(*h) || h->kind != CAP_KIND_PY)
		return false;
	if (!pm->tids || size < offsetof(struct py_rec, frames) || r->nframes > PY_MAX_FRAMES ||
	    size < offsetof(struct py_rec, frames) + r->nframes * sizeof(struct py_raw_frame))
		return true;
	struct tid_slot *t = &pm->tids[r->tid % TID_SLOTS];

	if (t->full)
		pm->stats.orphan++;
	pm->stats.records++;
	t->tid = r->tid;
	t->full = true;
	memcpy(&t->rec, r, offsetof(struct py_rec, frames) + r->nframes * sizeof(struct py_raw_frame));
	return true;
}

/* The frame pc in the eval loop? A return address points after the call: look up the call. */
static bool is_eval(const struct dwunw_py_runtime *rt, const struct uframe *f, bool exact)
{
	uint64_t pc = f->pc - !exact;

	return pc >= rt->eval_lo && pc < rt->eval_hi;
}

static void fill_copy(void *arg, struct uframe *out, uint32_t n)
{
	const struct uframe *mf = arg;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t pc = out[i].pc;

		out[i] = mf[i];
		out[i].pc = pc;
	}
}

static void py_frame(struct uframe *u, const struct dwunw_py_frame *f)
{
	memset(u, 0, sizeof(*u));
	u->pc = f->code;
	u->name = intern(f->name);
	u->module = intern(f->file);
	u->offset = f->line > 0 ? (uint64_t)f->line : 0;
	uf_set_origin(u, UO_PYTHON);
}

static void py_mark(struct uframe *u, const char *label)
{
	memset(u, 0, sizeof(*u));
	u->name = intern(label);
	uf_set_origin(u, UO_PYTHON);
}

int64_t py_merge_stack(struct py_merge *pm, int64_t idx, uint32_t pid, uint32_t tid, uint64_t space,
		       bool first_exact)
{
	struct py_merge_stats *stats = &pm->stats;
	struct stack_store *st = pm->fr->st;
	struct dwunw_py_raw *raw = pm->raw;
	struct dwunw_py_frame *pyf = pm->pyf;
	struct tid_slot *t;
	struct proc_slot *p;

	if (!pm->tids || idx < 0)
		return idx;
	t = &pm->tids[tid % TID_SLOTS];
	p = &pm->procs[pid % PROC_SLOTS];
	if (!t->full || t->tid != tid || t->rec.pid != pid) {
		if (p->pid == pid && p->state == 1)
			stats->missing++;
		return idx;
	}
	t->full = false;
	if (p->pid != pid || p->state != 1)
		return idx;
	if (t->rec.status == PY_R_NO_THREAD) {
		stats->no_thread++;
		return idx;
	}
	const struct ustack *s = &st->v[idx];
	if (s->kind == SK_PSEUDO || !s->nframes)
		return idx;

	/* name the chain (the rules of dwunw_py_stack: entry marks, shims, frames not started) */
	uint32_t nr = t->rec.nframes;
	for (uint32_t i = 0; i < nr; i++) {
		raw[i].frame = t->rec.frames[i].frame;
		raw[i].code = t->rec.frames[i].code;
		raw[i].prev_instr = t->rec.frames[i].prev_instr;
		raw[i].is_entry = t->rec.frames[i].is_entry;
		raw[i].owner = t->rec.frames[i].owner;
	}
	size_t np = PY_MAX_FRAMES;
	uint64_t t0 = mono_ns();
	int rc = dwunw_py_describe(&pm->fr->dctx, &p->rt, raw, nr, pyf, &np);
	stats->describe_ns += mono_ns() - t0;
	const char *cut = NULL;
	if (rc != DWUNW_OK)
		cut = rc == DWUNW_ERR_CORRUPT ? "[py?] chain cut: a frame or code object changed since the event"
					      : "[py?] chain cut: a code object could not be read";
	else if (t->rec.status == PY_R_READ)
		cut = "[py?] chain cut: a frame could not be read at the event";
	else if (t->rec.status == PY_R_DEPTH)
		cut = "[py?] chain cut: more Python frames than read at the event";
	if (cut)
		stats->cut++;

	/* groups: up to and including each entry frame; a cut chain's last group is partial */
	uint32_t ngroups = 0, open = 0;
	for (size_t i = 0; i < np; i++) {
		open = 1;
		if (pyf[i].flags & DWUNW_PY_ENTRY) {
			ngroups++;
			open = 0;
		}
	}
	if (open && !cut) {
		stats->unplaced++;   /* the outermost Python frame is no entry frame */
		return idx;
	}
	ngroups += open;
	if (cut && !open)
		ngroups++;             /* the mark stands for the unread rest: a group of its own */
	uint32_t nevals = 0, n = s->nframes;
	for (uint32_t i = 0; i < n; i++)
		nevals += is_eval(&p->rt, &s->frames[i], i == 0 && first_exact);
	/* One eval call more than groups, the chain whole: the innermost call is entering (its frame
	 * not yet current) or leaving (already popped); it runs no Python frame at this instant. */
	uint32_t skip_evals = 0;
	if (!cut && nevals == ngroups + 1)
		skip_evals = 1;
	else if (ngroups != nevals) {
		stats->unplaced++;
		return idx;
	}
	/* native frames, each eval frame preceded by its group */
	if (pm->mcap < (size_t)n + np + 1) {
		pm->mcap = (size_t)n + np + 1;
		pm->mf = xrealloc(pm->mf, pm->mcap * sizeof(*pm->mf));
		pm->mpcs = xrealloc(pm->mpcs, pm->mcap * sizeof(*pm->mpcs));
		pm->mids = xrealloc(pm->mids, pm->mcap * sizeof(*pm->mids));
	}
	struct uframe *mf = pm->mf;
	uint64_t *mpcs = pm->mpcs, *mids = pm->mids;
	uint32_t m = 0;
	size_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (is_eval(&p->rt, &s->frames[i], i == 0 && first_exact) && !(skip_evals && skip_evals--)) {
			while (k < np) {
				bool entry = pyf[k].flags & DWUNW_PY_ENTRY;

				py_frame(&mf[m], &pyf[k++]);
				mpcs[m] = mf[m].pc;
				mids[m] = (1ull << 63) | mf[m].offset;
				m++;
				stats->frames++;
				if (entry)
					break;
			}
			if (k == np && cut) {
				py_mark(&mf[m], cut);
				mpcs[m] = 0;
				mids[m] = (1ull << 63) | 1ull << 62;
				m++;
				cut = NULL;
			}
		}
		mf[m] = s->frames[i];
		mpcs[m] = s->frames[i].pc;
		mids[m++] = s->ids ? s->ids[i] : 0;
	}
	uint32_t kind = s->kind;
	int32_t stop = s->stop;
	const char *label = s->label, *stop_name = s->stop_name;
	bool beyond = s->beyond, live = s->live;
	int64_t out = stack_get_ids(st, space, kind, stop, label, stop_name, mpcs, mids, m, fill_copy, mf);
	if (out >= 0) {
		st->v[out].beyond = beyond;
		st->v[out].live = live;
	}
	stats->merged++;
	return out;
}
#else
/* without libdwunw (memleak-fp): no Python frames; the records are recognised and dropped */
void py_merge_init(struct py_merge *pm, struct frames *fr, int fd, int cfd, bool v)
{
	memset(pm, 0, sizeof(*pm));
	(void)fr; (void)fd; (void)cfd; (void)v;
}
void py_merge_shutdown(struct py_merge *pm) { (void)pm; }
void py_merge_add(struct py_merge *pm, uint32_t pid) { (void)pm; (void)pid; }
void py_merge_forget(struct py_merge *pm, uint32_t pid) { (void)pm; (void)pid; }
bool py_merge_record(struct py_merge *pm, const void *data, size_t size)
{
	const struct cap_rec_hdr *h = data;

	(void)pm;
	return size >= sizeof(*h) && h->kind == CAP_KIND_PY;
}
int64_t py_merge_stack(struct py_merge *pm, int64_t idx, uint32_t pid, uint32_t tid, uint64_t space,
		       bool first_exact)
{
	(void)pm; (void)pid; (void)tid; (void)space; (void)first_exact;
	return idx;
}
#endif
