// SPDX-License-Identifier: GPL-2.0-only
/*
 * offcputime: where threads wait, by stack, with the command line and output of libbpf-tools
 * offcputime and complete user stacks on code without frame pointers.
 *
 * offcputime.bpf.c stamps each switch-out (kernel stack id; the user stack as a snapshot, a
 * walker event or a frame-pointer id by --unwind) and sends the span at the switch-in. Here
 * the switch-out's user stack is unwound when its record arrives and kept for its thread until
 * the span comes (paired by seq); spans are summed by (pid, comm, kernel stack, user stack),
 * stacks interned and symbolized once. The report is printed at the end (Ctrl-C, DURATION, or
 * the end of the command and every process it started).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/spaces.h"
#include "runtime/capture_user.h"
#include "runtime/command.h"
#include "runtime/cpu_budget.h"
#include "runtime/frame_lines.h"
#include "runtime/frames.h"
#include "runtime/freeze.h"
#include "runtime/intern.h"
#include "runtime/kstack.h"
#include "runtime/ksyms.h"
#include "runtime/mappings.h"
#include "runtime/module_warn.h"
#include "runtime/stack_store.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_signals.h"
#include "runtime/counters.h"
#include "runtime/tool_util.h"
#include "offcputime.h"
#include "offcputime.skel.h"
#include "offcputime_opts.h"
#include "offcputime_out.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_drain.h"
#include "kwalk/kwalk_preload.h"
#include "kwalk/kwalk_record.h"
#include "kwalk/kwalk_track_user.h"
#include "kwalk/kwalk_user.h"
#endif

_Static_assert(OC_STACK_NONE == KSTACK_NONE, "one 'no stack' id");

/* What the record handlers share (one tool, one context). */
struct oc_ctx {
	struct oc_opts o;
	struct offcputime_bpf *skel;
	struct stack_store st;     /* user and kernel stacks (the kernel's in KSTACK_SPACE) */
	struct frames fr;          /* its maps: mapping events on (dwarf/kernel mode, given targets) */
	struct oc_sums sums;
	struct oc_stats stats;
	struct fp_cache kcache;
	struct cpu_budget budget;  /* --max-cpu */
	uint64_t poll_until;   /* on_record returns -EINTR from then on */
	struct freeze fz;      /* --unwind=freeze */
	/* --unwind=freeze: snapshots whose thread is still off CPU (the SIGSTOP comes when it is
	 * switched in): unwound when its span arrives, or when the thread stopped or the slot went
	 * (frozen_sweep); at most a few (one freeze per process, FRZ_MAX_DEFAULT processes) */
	struct frozen_rec {
		uint32_t tid, seq;
		void *data;
		size_t size;
	} frozen[2 * FRZ_MAX_DEFAULT];
	size_t nfrozen;
	/* each thread's latest switch-out user stack, until its span arrives: direct-mapped by tid */
	struct pending {
		uint32_t tid;      /* tid + 1 */
		uint32_t seq;
		int64_t ustack;
	} *pending, *wpending; /* wpending: --waker's stacks, direct-mapped by seq */
	size_t npending;
	struct spaces spaces;      /* pid -> image generation: the address space of its stacks */
#ifdef HAVE_KWALK
	struct kw_track kwt;
	struct kw_drain kagg;      /* --aggregate: the spans summed in the kernel, drained into sums */
#endif
};

/* The address space of pid's stacks (runtime/spaces.h). */
static uint64_t space_of(struct oc_ctx *c, uint32_t pid)
{
	return spaces_of(&c->spaces, pid);
}

static int64_t user_fp_stack(struct oc_ctx *c, uint32_t pid, int32_t id)
{
	if (id == OC_STACK_NONE)
		return -1;
	if (id == -EFAULT) {
		c->stats.ulost++;
		return pseudo_stack(&c->st, "[stack lost: frame-pointer walk failed (EFAULT)]");
	}
	int64_t idx = fp_stack_of(&c->fr, NULL, bpf_map__fd(c->skel->maps.stack_traces), (pid_t)pid,
				  space_of(c, pid), id, 0, false);
	if (c->st.v[idx].kind == SK_PSEUDO)
		c->stats.ulost++;
	return idx;
}

/* Where a user stack sent ahead of its span waits: a switch-out's by tid, a waker's by seq. */
static struct pending *slot_of(struct oc_ctx *c, uint32_t tid, uint32_t seq)
{
	if (seq & OC_SEQ_WAKER)
		return &c->wpending[hash64(1, seq) & (c->npending - 1)];
	return &c->pending[hash64(0, tid) & (c->npending - 1)];
}

static void pending_set(struct oc_ctx *c, uint32_t tid, uint64_t cookie, int64_t uidx)
{
	struct pending *p = slot_of(c, tid, OC_COOKIE_SEQ(cookie));

	p->tid = tid + 1;
	p->seq = OC_COOKIE_SEQ(cookie);
	p->ustack = uidx;
}

/* A switch-out's user stack unwound, kept for its span. */
static void on_snapshot(struct oc_ctx *c, const void *data, size_t size)
{
	const struct cap_record *rec;
	uint32_t pid = 0;

	if (size >= sizeof(struct cap_record))
		memcpy(&pid, (const char *)data + offsetof(struct cap_record, pid), sizeof(pid));
	if (size >= sizeof(struct cap_record) && !cpu_budget_take(&c->budget)) {
		/* over --max-cpu: the span counted, its user stack not unwound (said so) */
		struct cap_record hdr;

		memcpy(&hdr, data, sizeof(hdr));
		pending_set(c, hdr.tid, hdr.cookie, pseudo_stack(&c->st, cpu_budget_label(&c->budget)));
		return;
	}
	int64_t uidx = frames_from_snapshot(&c->fr, data, size, 0, space_of(c, pid), &c->stats.unw, &rec);

	if (uidx == FRAMES_BAD)
		return;
	if (uidx == FRAMES_FALLBACK)
		uidx = user_fp_stack(c, rec->pid, (int32_t)rec->aux);
	pending_set(c, rec->tid, rec->cookie, uidx);
}

/* A frozen snapshot kept until its thread is switched in: false when there is no room. */
static bool frozen_defer(struct oc_ctx *c, const void *data, size_t size)
{
	const struct cap_record *rec = data;
	struct frozen_rec *f;

	if (c->nfrozen == sizeof(c->frozen) / sizeof(c->frozen[0]) || size < sizeof(*rec))
		return false;
	f = &c->frozen[c->nfrozen];
	f->data = malloc(size);
	if (!f->data)
		return false;
	memcpy(f->data, data, size);
	f->size = size;
	f->tid = rec->tid;
	f->seq = OC_COOKIE_SEQ(rec->cookie);
	c->nfrozen++;
	return true;
}

static void frozen_run(struct oc_ctx *c, size_t i)
{
	struct frozen_rec f = c->frozen[i];

	c->frozen[i] = c->frozen[--c->nfrozen];
	on_snapshot(c, f.data, f.size);
	free(f.data);
}

/* A thread in state T or t (stopped: our SIGSTOP came), or gone. */
static bool thread_stopped(uint32_t pid, uint32_t tid)
{
	char fn[64], buf[512];
	ssize_t n;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%u/task/%u/stat", pid, tid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return !p || p[2] == 'T' || p[2] == 't' || p[2] == 'Z' || p[2] == 'X';
}

/* Deferred snapshots whose span will not come (out of -m/-M, lost) but whose thread stopped or
 * whose slot went: unwound now (all of them with `all`, at the end). */
static void frozen_sweep(struct oc_ctx *c, bool all)
{
	for (size_t i = c->nfrozen; i-- > 0;) {
		const struct cap_record *rec = c->frozen[i].data;
		uint32_t key = rec->pid;
		uint64_t v;

		if (all || thread_stopped(rec->pid, rec->tid) ||
		    bpf_map_lookup_elem(c->fz.map_fd, &key, &v) || v != rec->cookie)
			frozen_run(c, i);
	}
}

/* The user stack of a span's switch-out or of its waker: sent ahead (found by tid and seq),
 * lost (a pseudo-stack saying why), or a frame-pointer stack id. */
static int64_t user_stack(struct oc_ctx *c, uint32_t flags, uint32_t pid, uint32_t tid,
			  uint32_t seq, int32_t fp_id)
{
	bool waker = seq & OC_SEQ_WAKER;

	if (!c->o.user)
		return -1;
	if (flags & (OC_F_IN_EXEC | OC_F_LOST_SNAP)) {
		c->stats.ulost++;
		return pseudo_stack(&c->st, flags & OC_F_IN_EXEC ? "[stack lost: switched out inside execve]" :
				    "[stack lost: ring buffer full]");
	}
	if (!(flags & OC_F_SENT))
		return user_fp_stack(c, pid, fp_id);
	struct pending *p = slot_of(c, tid, seq);

	if (p->tid && p->seq == seq && (waker || p->tid == tid + 1)) {
		p->tid = 0;
		return p->ustack;
	}
	c->stats.unmatched++;
	return pseudo_stack(&c->st, waker ? "[stack lost: wakeup record not seen]" :
			    "[stack lost: switch-out record not seen]");
}

static const char *comm_of(const char raw[OC_COMM_LEN])
{
	char comm[OC_COMM_LEN + 1];

	memcpy(comm, raw, OC_COMM_LEN);
	comm[OC_COMM_LEN] = 0;
	return intern(comm);
}

/* A wakeup's kernel stack ran in interrupt context (hard IRQ, NMI, a softirq): the task that was
 * running then was interrupted, it did not wake anyone. */
static bool interrupt_path(const struct ustack *k)
{
	static const char *const prefixes[] = {
		"asm_sysvec_", "asm_common_interrupt", "asm_exc_nmi", "sysvec_", "__sysvec_",
		"common_interrupt", "handle_softirqs", "__do_softirq", "irq_exit_rcu", "__irq_exit_rcu",
		"hrtimer_interrupt", "handle_irq_event", "asm_call_irq_on_stack",
	};

	for (uint32_t i = 0; i < k->nframes; i++) {
		const char *n = k->frames[i].name;

		for (size_t j = 0; n && j < sizeof(prefixes) / sizeof(prefixes[0]); j++)
			if (!strncmp(n, prefixes[j], strlen(prefixes[j])))
				return true;
	}
	return false;
}

/* --waker: the span's waker in its key (none: preempted, or woken before it switched out) */
static void waker_key(struct oc_ctx *c, const struct oc_off_rec *r, struct oc_key *k)
{
	const struct oc_waker *w = &r->waker;

	k->wkstack = k->wustack = -1;
	if (!(r->flags & OC_F_WOKEN))
		return;
	k->woken = true;
	k->wkstack = kstack_of(&c->st, &c->kcache, bpf_map__fd(c->skel->maps.stack_traces),
			       w->kstack, "try_to_wake_up", &c->stats.klost);
	if (k->wkstack >= 0 && interrupt_path(&c->st.v[k->wkstack])) {
		k->wcomm = intern("[interrupt]");
		c->stats.irq_wakeups++;
		if (!c->o.kernel)
			k->wkstack = -1;
		return;
	}
	if (!c->o.kernel)
		k->wkstack = -1;
	k->wcomm = comm_of(w->comm);
	k->wpid = w->pid;
	k->wustack = user_stack(c, w->flags, w->pid, 0, w->seq, w->ustack);
}

/* A span off CPU, or (--wall) a sample on CPU: its stacks, summed under its key. */
static void on_span(struct oc_ctx *c, const struct oc_off_rec *r)
{
	/* its frozen snapshot: the thread is stopping now */
	if (r->flags & OC_F_FROZEN)
		for (size_t i = 0; i < c->nfrozen; i++)
			if (c->frozen[i].tid == r->tid && c->frozen[i].seq == r->seq) {
				frozen_run(c, i);
				break;
			}

	struct oc_key k = {
		.pid = r->pid,
		.comm = comm_of(r->comm),
		.kstack = kstack_of(&c->st, &c->kcache, bpf_map__fd(c->skel->maps.stack_traces),
				    r->kstack, "__schedule", &c->stats.klost),
		.ustack = user_stack(c, r->flags, r->pid, r->tid, r->seq, r->ustack),
		.on = r->h.kind == OC_REC_ON,
	};

	if (c->o.waker)
		waker_key(c, r, &k);
	oc_sums_add(&c->sums, &c->st, &k, r->delta_ns, 1);
}

static void on_exec(struct oc_ctx *c, uint32_t pid)
{
#ifdef HAVE_KWALK
	kw_drain_pid(&c->kagg, pid); /* its sums before the exec: named with the old program's maps */
#endif
	spaces_new_image(&c->spaces, pid, true);
	/* with mapping events the view follows the exec by its own record (mappings.c) */
	if (!c->fr.maps)
		frames_forget_pid(&c->fr, pid);
#ifdef HAVE_KWALK
	if (c->kwt.l) {
		kw_track_forget(&c->kwt, pid);
		if (c->o.npids || c->o.command)
			kw_track_reload(&c->kwt, pid, true);
	}
#endif
}

#ifdef HAVE_KWALK
static bool kw_selected(void *arg, uint32_t pid)
{
	const struct oc_ctx *c = arg;

	if (!c->o.npids)
		return true;
	for (size_t i = 0; i < c->o.npids; i++)
		if (c->o.pids[i] == pid)
			return true;
	return false;
}

static void on_kwalk(struct oc_ctx *c, const void *data, size_t size)
{
	struct kwalk_info ki;
	uint32_t pid = kw_record_pid(data, size);
	int64_t uidx = kw_record_stack(&c->kwt, data, size, 0, space_of(c, pid), &c->stats.unw,
				       &c->stats.kw, &ki);

	if (uidx == FRAMES_BAD || uidx == FRAMES_NOTICE)
		return;
	if (uidx == FRAMES_FALLBACK)
		uidx = user_fp_stack(c, ki.pid, (int32_t)ki.aux);
	pending_set(c, ki.tid, ki.cookie, uidx);
}

/* --aggregate: a drained key, the walker event its switch-outs would have sent, its spans summed
 * under the key their records would have made */
static void on_kagg(void *arg, struct kw_event *ev, const struct kw_agg_key *k, const struct kw_agg_val *v)
{
	struct oc_ctx *c = arg;
	struct kwalk_info ki;
	int64_t uidx;

	ev->cookie = OC_COOKIE(k->kstack, 0);
	ev->aux = OC_STACK_NONE;
	uidx = kw_record_stack(&c->kwt, ev, offsetof(struct kw_event, snap), 0, space_of(c, k->pid),
			       &c->stats.unw, &c->stats.kw, &ki);
	if (uidx == FRAMES_BAD || uidx == FRAMES_NOTICE)
		return; /* a complete walk is neither */
	if (uidx == FRAMES_FALLBACK)
		uidx = user_fp_stack(c, k->pid, OC_STACK_NONE);
	kw_drain_seen(&c->stats.kw, k, v->count);

	struct oc_key key = {
		.pid = k->pid,
		.comm = comm_of(k->comm),
		.kstack = kstack_of(&c->st, &c->kcache, bpf_map__fd(c->skel->maps.stack_traces),
				    k->kstack, "__schedule", &c->stats.klost),
		.ustack = uidx,
	};

	oc_sums_add(&c->sums, &c->st, &key, v->sum, v->count);
}
#endif

static int on_record(void *arg, const void *data, size_t size)
{
	struct oc_ctx *c = arg;
	const struct cap_rec_hdr *h = data;

	if ((++c->stats.records & 255) == 0 && mono_ns() >= c->poll_until)
		return -EINTR; /* a steady stream must not hold the main loop */
	c->stats.buffer_bytes += size;
	if (size < sizeof(*h))
		return 0;
	if (h->kind == CAP_KIND_MAPEV) {
		if (c->fr.maps) {
#ifdef HAVE_KWALK
			kw_drain_mapev(&c->kagg, data, size); /* its sums named with the maps before */
#endif
			mappings_event(c->fr.maps, data, size);
		}
	} else if (h->kind == CAP_KIND_SNAPSHOT) {
		if (!c->fr.fz || !(h->flags & CAP_F_FROZEN) || !frozen_defer(c, data, size))
			on_snapshot(c, data, size);
	} else if ((h->kind == OC_REC_OFF || h->kind == OC_REC_ON) &&
		   size >= offsetof(struct oc_off_rec, waker)) {
		struct oc_off_rec r = { 0 };

		/* the waker's part only with --waker */
		memcpy(&r, data, size < sizeof(r) ? size : sizeof(r));
		c->stats.on_records += h->kind == OC_REC_ON;
		c->stats.off_records += h->kind == OC_REC_OFF;
		on_span(c, &r);
	} else if (h->kind == OC_REC_EXEC && size >= sizeof(struct oc_exec_rec)) {
		struct oc_exec_rec r;

		memcpy(&r, data, sizeof(r));
		on_exec(c, r.pid);
	} else if (h->kind == CAP_KIND_PROC && size >= sizeof(struct cap_proc_rec)) {
		struct cap_proc_rec r;

		memcpy(&r, data, sizeof(r));
		if (r.op == CAP_PROC_FORK) {
			spaces_new_image(&c->spaces, r.pid, false);
			mappings_fork(c->fr.maps, r.parent, r.pid);
		} else if (r.op == CAP_PROC_EXIT) {
#ifdef HAVE_KWALK
			kw_drain_pid(&c->kagg, r.pid); /* its sums named before its view goes */
#endif
			frames_forget_pid(&c->fr, r.pid);
			spaces_drop(&c->spaces, r.pid);
		}
#ifdef HAVE_KWALK
	} else if (h->kind == KW_KIND_EVENT) {
		on_kwalk(c, data, size);
	} else if (h->kind == KW_KIND_MMAP || h->kind == KW_KIND_EXIT) {
		/* an executable mapping or an exit: tables loaded or dropped (an exit's sums first) */
		if (h->kind == KW_KIND_EXIT && size >= sizeof(struct kw_track_rec))
			kw_drain_pid(&c->kagg, ((const struct kw_track_rec *)data)->pid);
		kw_track_record(&c->kwt, data, size);
#endif
	}
	return 0;
}

static uint32_t cache_slots_for_machine(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mib = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz >> 20 : 1024;
	uint64_t slots = mib / 16;

	return (uint32_t)(slots < 256 ? 256 : slots > 4096 ? 4096 : slots);
}

/*
 * --wall: one cpu-clock event a CPU at a fixed period (not a frequency: every sample is then the
 * same time on CPU, the spans' unit) running oc_sample. Its links in *links.
 */
static size_t wall_attach(struct oc_ctx *c, struct bpf_link ***links)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t n = 0;

	*links = xcalloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof(**links));
	for (int cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_period = c->stats.period_ns,
		};
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0 && errno == ENODEV)
			continue; /* offline CPU */
		if (fd < 0)
			die("perf_event_open (cpu-clock, CPU %d): %s", cpu, strerror(errno));
		(*links)[n] = bpf_program__attach_perf_event(c->skel->progs.oc_sample, fd);
		if (!(*links)[n])
			die("cannot attach to the cpu-clock event of CPU %d: %s", cpu, strerror(errno));
		n++;
	}
	c->stats.cpus = (uint32_t)n;
	return n;
}

/* switch-outs whose thread is still off CPU at the end (sched_switch detached): no span yet */
static uint64_t still_off(struct oc_ctx *c)
{
	int fd = bpf_map__fd(c->skel->maps.start);
	uint32_t k, next, *prev = NULL;
	uint64_t n = 0;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		n++;
	}
	return n;
}

static bool targets_gone(struct oc_ctx *c, struct command *cmd)
{
	if (c->o.command) {
		int status;

		command_exited(cmd, &status);
		return cmd->pid <= 0 && !follow_any_alive(c->skel->obj);
	}
	if (!c->o.npids)
		return false;
	for (size_t i = 0; i < c->o.npids; i++)
		if (!(kill((pid_t)c->o.pids[i], 0) && errno == ESRCH))
			return false;
	return true;
}

int main(int argc, char **argv)
{
	static struct oc_ctx ctx;
	struct oc_ctx *c = &ctx;
	struct offcputime_bpf *skel;
	struct dwunw_cap_reader *reader;
	struct command cmd = { 0 };
	struct bpf_link **links = NULL;
	size_t nlinks = 0;
	int err;

	tool_set_name("offcputime");
	oc_parse_args(&c->o, argc, argv);
	tool_set_verbose(c->o.verbose);
	stack_store_init(&c->st, c->o.max_stacks);
	frames_setup(&c->fr, &c->st);
	frame_lines_want(&c->fr, c->o.lines);
	cpu_budget_init(&c->budget, c->o.max_cpu);
	c->sums.max = c->o.max_keys;
	const char *why = tool_missing_privileges(c->o.user && c->o.unwind != OC_UNWIND_FP);
	if (why)
		tool_fail(TOOL_EXIT_PRIVILEGE, "%s", why);
	oc_check_targets(&c->o);
	if (c->o.command && (err = command_check_program(c->o.command[0])))
		exit(err);
	tool_signals_init();
	libbpf_set_print(tool_libbpf_print);
	if (c->o.kernel && ksyms_load())
		fprintf(stderr, "offcputime: /proc/kallsyms unreadable: kernel frames unnamed\n");

	c->skel = skel = offcputime_bpf__open();
	if (!skel)
		die("cannot open the BPF object: %s", strerror(errno));
	skel->rodata->unwind_mode = c->o.unwind;
	skel->rodata->frz_enabled = c->o.freeze;
	skel->rodata->want_user = c->o.user;
	skel->rodata->want_kernel = c->o.kernel;
	skel->rodata->user_threads_only = c->o.user_threads;
	skel->rodata->kernel_threads_only = c->o.kernel_threads;
	skel->rodata->state_filter = c->o.state;
	skel->rodata->filter_tgid = c->o.npids > 0;
	skel->rodata->filter_tid = c->o.ntids > 0;
	skel->rodata->follow_tree = c->o.command != NULL;
	skel->rodata->min_ns = c->o.min_us * 1000;
	skel->rodata->max_ns = c->o.max_us == UINT64_MAX ? UINT64_MAX : c->o.max_us * 1000;
	c->stats.period_ns = c->o.wall ? 1000000000ull / c->o.freq : 0;
	skel->rodata->sample_period_ns = c->stats.period_ns;
	skel->rodata->want_waker = c->o.waker;
	bool stacks_out = c->o.user && c->o.unwind != OC_UNWIND_FP;
	/* dwarf mode, and kernel mode's snapshots (a walk that stopped short; a forked child's
	 * first switch-outs, before its tables load), on chosen processes: their mapping changes
	 * in order with the records (not system-wide: every process's mmaps would be sent) */
	if (stacks_out && (c->o.npids || c->o.command) &&
	    !(getenv("DWUNW_MAPEV") && !strcmp(getenv("DWUNW_MAPEV"), "0")))
		c->fr.maps = mappings_new();
	skel->rodata->mmap_ev_enabled = c->fr.maps != NULL;
	skel->rodata->cap_stack_bytes = c->o.stack_size;
	skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(false);
	/* room for a burst of switch-outs while the consumer opens a large module: 32 MiB with
	 * user stacks (2000 windows of 16 KiB), 4 MiB without */
	size_t ring_bytes = stacks_out ? 32u << 20 : 4u << 20;
	skel->rodata->cap_wakeup_bytes = ring_bytes / 16;
	err = dwunw_cap_size_maps(skel->obj, false, ring_bytes);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.stack_traces, c->o.stack_storage);
	if (!err)
		err = freeze_size_maps(skel->obj, c->o.freeze ? 0 : 1);
#ifdef HAVE_KWALK
	struct kw_opts kwo = { .budget = c->o.table_budget };

	if (!err && c->o.unwind == OC_UNWIND_KERNEL && c->o.user)
		err = kw_size_maps(skel->obj, &kwo);
	skel->rodata->kw_track_enabled = c->o.unwind == OC_UNWIND_KERNEL && c->o.user;
	skel->rodata->aggregate = c->o.aggregate;
	if (!err && !c->o.aggregate) /* the maps of --aggregate unused: one entry each */
		err = kw_drain_shrink(skel->obj);
#endif
	if (err)
		die("cannot size the maps: %s", strerror(-err));
	err = offcputime_bpf__load(skel);
	if (err)
		die("cannot load the BPF programs: %s (run with -v for the verifier log)", strerror(-err));
#ifdef HAVE_KWALK
	if (c->o.unwind == OC_UNWIND_KERNEL && c->o.user) {
		c->kwt.l = kw_loader_new(skel->obj, &kwo);
		if (!c->kwt.l)
			die("cannot set up the in-kernel walker's tables: %s", strerror(errno));
		c->kwt.fr = &c->fr;
		c->kwt.selected = kw_selected;
		c->kwt.selected_arg = c;
		c->kwt.threshold = c->o.npids || c->o.command ? 1 : 16;
		c->kwt.load_ns_per_s = c->o.npids || c->o.command ? 0 : 200000000ull;
		if (c->o.command)
			kw_preload_command(c->kwt.l, c->o.command[0]);
		if (c->o.aggregate && kw_drain_open(&c->kagg, skel->obj, &skel->bss->kw_agg_gen,
						    &skel->bss->kw_agg_pids_full, &skel->bss->kw_agg_hold_all,
						    on_kagg, c))
			die("--aggregate: the walker's count maps are missing");
	}
#endif
	tool_select_set(skel->obj, c->o.pids, c->o.npids, c->o.tids, c->o.ntids);
	c->kcache.n = c->o.stack_storage;
	c->kcache.map = xcalloc(c->kcache.n, sizeof(*c->kcache.map));
	c->npending = 1u << 16;
	c->pending = xcalloc(c->npending, sizeof(*c->pending));
	if (c->o.waker)
		c->wpending = xcalloc(c->npending, sizeof(*c->wpending));
	if (c->o.freeze) {
		err = freeze_start(&c->fz, skel->obj);
		if (err)
			die("--unwind=freeze: cannot start its watchdog: %s", strerror(-err));
		c->fr.fz = &c->fz;
	}
	err = frames_init(&c->fr, cache_slots_for_machine(), 0, NULL);
	if (err)
		die("libdwunw: %s", dwunw_strerror(err));
#ifdef HAVE_KWALK
	/* -p: the targets' tables in before their first switch-out (kernel mode; else a no-op) */
	for (size_t i = 0; i < c->o.npids; i++)
		kw_track_reload(&c->kwt, c->o.pids[i], true);
#endif
	reader = dwunw_cap_reader_new(skel->obj, false, 8u << 20, on_record, c);
	if (!reader)
		die("cannot open the ring buffer: %s", strerror(errno));

	if (c->o.command) {
		command_start(&cmd, c->o.command, NULL);
		if ((err = follow_add_root(skel->obj, cmd.pid)))
			die("cannot follow the command: %s", strerror(-err));
		if ((err = follow_attach(skel->obj, &links, &nlinks)))
			die("cannot attach the process-tree programs: %s", strerror(-err));
	}
	static const char *const progs[] = { "oc_exec", "oc_thread_exit", "oc_fork" };
	if ((err = tool_links_attach(skel->obj, progs, 3, &links, &nlinks)))
		die("cannot attach the exec/exit/fork programs: %s", strerror(-err));
	if (c->fr.maps && (err = mappings_attach(skel->obj, &links, &nlinks)))
		die("cannot attach the mapping-change programs: %s", strerror(-err));
#ifdef HAVE_KWALK
	if (c->kwt.l) {
		err = kw_track_attach(&c->kwt, skel->obj);
		if (err)
			fprintf(stderr, "offcputime: no mmap tracing (%s): new mappings load at their "
				"first switch-out\n", strerror(-err));
		for (size_t i = 0; i < c->o.npids; i++)
			kw_track_reload(&c->kwt, c->o.pids[i], true);
	}
#endif
	struct bpf_link **wall_links = NULL;
	size_t nwall = c->o.wall ? wall_attach(c, &wall_links) : 0;
	static const char *const wk[] = { "oc_waking" };
	if (c->o.waker && (err = tool_links_attach(skel->obj, wk, 1, &links, &nlinks)))
		die("cannot attach sched_waking: %s", strerror(-err));
	static const char *const sw[] = { "oc_switch" };
	if ((err = tool_links_attach(skel->obj, sw, 1, &links, &nlinks)))
		die("cannot attach sched_switch: %s", strerror(-err));

	FILE *hf = c->o.folded || c->o.json ? stderr : stdout;
	fprintf(hf, "Tracing %s time (us) of %s by %s stack (%s unwinding)",
		c->o.wall ? "on-CPU (sampled) and off-CPU" : "off-CPU",
		c->o.command ? "the command" : c->o.npids ? "the given processes" :
		c->o.ntids ? "the given threads" : "all threads",
		c->o.user && c->o.kernel ? "user + kernel" : c->o.user ? "user" : "kernel",
		c->o.unwind == OC_UNWIND_FP ? "frame-pointer" : c->o.unwind == OC_UNWIND_KERNEL ?
		"kernel" : c->o.freeze ? "freeze" : "dwarf");
	if (c->o.duration)
		fprintf(hf, " for %" PRIu64 " secs.\n", c->o.duration);
	else
		fprintf(hf, "... Hit Ctrl-C to end.\n");
	fflush(hf);
	if (c->o.command) {
		if (c->fr.maps)
			mappings_seed(c->fr.maps, (uint32_t)cmd.pid);
		if ((err = command_go(&cmd)))
			exit(err);
	}
	skel->bss->frz_armed = c->o.freeze; /* the command has exec'd (runtime/freeze.h) */

	uint64_t t0 = mono_ns(), end = c->o.duration ? t0 + c->o.duration * 1000000000ull : 0;
	uint64_t last_check = t0, last_drain = t0;

	c->stats.start_ns = t0;
	c->stats.setup_cpu_ns = self_cpu_ns();
	while (!tool_stop_requested() && !tool_stdout_closed()) {
		uint64_t poll_ns = mono_ns();

		c->poll_until = poll_ns + 50000000ull;
		err = dwunw_cap_reader_poll(reader, 10);
#ifdef HAVE_KWALK
		if (err >= 0) /* --aggregate: holds whose records this poll applied end */
			kw_drain_sweep(&c->kagg, poll_ns);
#endif
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "offcputime: polling the ring buffer: %s\n", strerror(-err));
			break;
		}
		uint64_t now = mono_ns();
		if (end && now >= end)
			break;
		if (c->nfrozen)
			frozen_sweep(c, false);
#ifdef HAVE_KWALK
		if (c->kagg.on && now - last_drain >= 1000000000ull) { /* --aggregate: each second */
			last_drain = now;
			kw_drain_all(&c->kagg);
		}
#endif
		if (now - last_check >= 50000000ull) {
			last_check = now;
			if (targets_gone(c, &cmd))
				break;
		}
	}
	/* the spans until now: sched_switch first, so no span ends after the report's time */
	bpf_link__destroy(links[nlinks - 1]);
	links[--nlinks] = NULL;
	for (size_t i = 0; i < nwall; i++) /* now: a perf event's detach is quick */
		bpf_link__destroy(wall_links[i]);
	free(wall_links);
	c->stats.end_ns = mono_ns();
	c->poll_until = UINT64_MAX;
	dwunw_cap_reader_consume(reader);
	frozen_sweep(c, true);
#ifdef HAVE_KWALK
	kw_drain_all(&c->kagg); /* and the spans summed in the kernel (sched_switch detached) */
	c->stats.agg = (struct oc_agg_stats){ .on = c->kagg.on, .spans = c->kagg.events, .keys = c->kagg.keys_drained,
					      .drains = c->kagg.drains, .bytes = c->kagg.bytes, .no_stack = c->kagg.no_stack,
					      .hold_full = kw_drain_hold_full(&c->kagg) };
#endif
	c->stats.still_off = still_off(c);
	{
		uint64_t capc[CAP_CNT_MAX];

		dwunw_cap_counters(skel->obj, capc);
		c->stats.output_failed = capc[CAP_CNT_OUTPUT_FAILED];
		c->stats.read_failed = capc[CAP_CNT_READ_FAILED];
	}
	tool_counters_read(skel->obj, c->stats.bpf, OC_CNT_MAX);
	if (!tool_stdout_closed()) {
		if (c->o.json || !c->o.folded)
			frames_lines(&c->fr, NULL, 0);
		oc_report(&c->o, &c->sums, &c->stats, &c->fr);
	}
	if (c->o.freeze) {
		fputs("offcputime: ", stderr);
		freeze_summary(&c->fz, stderr);
	}
	dwunw_cap_reader_free(reader);
#ifdef HAVE_KWALK
	if (c->kwt.l) {
		kw_track_detach(&c->kwt);
		kw_loader_free(c->kwt.l);
	}
	kw_drain_free(&c->kagg);
#endif
	tool_links_destroy(links, nlinks);
	offcputime_bpf__destroy(skel);
	command_stop(&cmd);
	frames_shutdown(&c->fr);
	mappings_free(c->fr.maps);
	module_warn_flush();
	return 0;
}
