// SPDX-License-Identifier: GPL-2.0-only
/*
 * profile: CPU samples by stack, with the command line and output of libbpf-tools/bcc profile
 * and complete user stacks on code without frame pointers.
 *
 * One perf event per CPU runs profile.bpf.c. --unwind=dwarf (default): each sample of a user
 * thread sends a snapshot (registers + stack window) that is unwound here with libdwunw;
 * --unwind=fp: frame-pointer stacks from bpf_get_stackid; --unwind=kernel: stacks walked in the
 * BPF program from tables loaded here (kwalk_user.h), the snapshot of dwarf mode carried along
 * when a walk stops short. Samples are counted here by (pid,
 * comm, kernel stack, user stack), stacks interned and symbolized once; nothing per sample is
 * written anywhere. The report is printed at the end (Ctrl-C, DURATION, or the command's exit).
 */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "runtime/capture_user.h"
#include "runtime/frames.h"
#include "runtime/frame_lines.h"
#include "runtime/intern.h"
#include "runtime/module_warn.h"
#include "runtime/ksyms.h"
#include "runtime/kstack.h"
#include "runtime/mappings.h"
#include "profile.h"
#include "profile.skel.h"
#include "profile_agg.h"
#include "profile_opts.h"
#include "profile_out.h"
#include "profile_state.h"
#include "profile_target.h"
#include "runtime/stack_store.h"
#include "runtime/py_merge.h"
#include "runtime/tool_opts.h"
#include "runtime/counters.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_preload.h"
#include "kwalk/kwalk_record.h"
#include "kwalk/kwalk_track_user.h"
#include "kwalk/kwalk_user.h"
#endif

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* ---- Stacks of a sample ------------------------------------------------------------------ */

/* Kernel stack id -> stack index (-1: none in this sample). */
static int64_t kernel_stack(struct profile_ctx *pr, int32_t id)
{
	return kstack_of(&pr->st, &pr->kcache, bpf_map__fd(pr->skel->maps.stack_traces), id, NULL,
			 &pr->prs.klost);
}

/*
 * Thread name (the BPF side keeps the latest in `comms`): cached here per tid for a second, so
 * a sample costs no map look-up; an exec drops its process's entry (see on_exec).
 */
#define COMM_CACHE PR_COMM_CACHE

static const char *comm_of(struct profile_ctx *pr, uint32_t tid)
{
	char c[PR_COMM_LEN + 1] = "";
	size_t i = hash64(0, tid) & (COMM_CACHE - 1);

	if (pr->comm_cache[i].tid == tid + 1 && pr->now_ns - pr->comm_cache[i].ns < 1000000000ull)
		return pr->comm_cache[i].comm;
	if (bpf_map_lookup_elem(bpf_map__fd(pr->skel->maps.comms), &tid, c))
		return intern("[unknown]");
	c[PR_COMM_LEN] = 0;
	pr->comm_cache[i].tid = tid + 1;
	pr->comm_cache[i].comm = intern(c);
	pr->comm_cache[i].ns = pr->now_ns;
	return pr->comm_cache[i].comm;
}

static void note_pid(struct profile_ctx *pr, uint32_t pid);

static void count_samples(struct profile_ctx *pr, uint32_t pid, uint32_t tid, int64_t kidx,
			  int64_t uidx, uint64_t n)
{
	struct pr_key k = { .pid = pid, .tid = pr->opts.interval ? tid : 0, .comm = comm_of(pr, tid),
			    .kstack = kidx, .ustack = uidx };

	note_pid(pr, pid);
	pr_agg_add(&pr->agg, &pr->st, &k, n);
}

static void count_sample(struct profile_ctx *pr, uint32_t pid, uint32_t tid, int64_t kidx,
			 int64_t uidx)
{
	count_samples(pr, pid, tid, kidx, uidx, 1);
}

/* The address space of pid's samples in the stack store (runtime/spaces.h). */
static uint64_t space_of(struct profile_ctx *pr, uint32_t pid)
{
	return spaces_of(&pr->spaces, pid);
}

/* A process with samples: counted once (a pid reused after an exit is another process). */
static void note_pid(struct profile_ctx *pr, uint32_t pid)
{
	if (spaces_mark_seen(&pr->spaces, pid))
		pr->prs.npids++;
}

static void on_exec(struct profile_ctx *pr, uint32_t pid)
{
	pr->comm_cache[hash64(0, pid) & (COMM_CACHE - 1)].tid = 0;
	spaces_new_image(&pr->spaces, pid, true);
	/* with mapping events the view follows the exec by its own record (mappings.c) */
	if (!pr->fr.maps)
		frames_forget_pid(&pr->fr, pid);
}

/* A new process: its own address space; its view a copy of its parent's. */
static void on_fork(struct profile_ctx *pr, uint32_t pid, uint32_t parent)
{
	pr->prs.forks++;
	spaces_new_image(&pr->spaces, pid, false);
	mappings_fork(pr->fr.maps, parent, pid);
}

/* A process's last record: what was held for it goes (its counts stay in the report). */
static void on_proc_exit(struct profile_ctx *pr, uint32_t pid)
{
	pr->prs.exits++;
	spaces_drop(&pr->spaces, pid);
	pr->comm_cache[hash64(0, pid) & (COMM_CACHE - 1)].tid = 0;
	frames_forget_pid(&pr->fr, pid);
	py_merge_forget(&pr->py, pid);
}

/* mappings_sweep: a process gone whose exit record was lost */
static void on_swept(void *arg, uint32_t pid)
{
	struct profile_ctx *pr = arg;

	on_proc_exit(pr, pid);
	pr->prs.exits--;
	pr->prs.swept++;
}

static int64_t user_fp_stack(struct profile_ctx *pr, uint32_t pid, int32_t id)
{
	if (id == PR_STACK_NONE)
		return -1;
	if (id == -EFAULT) {
		pr->prs.ulost++;
		return pseudo_stack(&pr->st, "[stack lost: frame-pointer walk failed (EFAULT)]");
	}
	int64_t idx = fp_stack_of(&pr->fr, NULL, bpf_map__fd(pr->skel->maps.stack_traces), (pid_t)pid,
				  space_of(pr, pid), id, 0, false);
	if (pr->st.v[idx].kind == SK_PSEUDO)
		pr->prs.ulost++;
	return idx;
}

#ifdef HAVE_KWALK
/* ---- --unwind=kernel: tables for the walker ------------------------------------------------ */

/* An exec the BPF side reports for every process: only the profiled ones get tables. */
static bool kw_selected(void *arg, uint32_t pid)
{
	const struct profile_ctx *pr = arg;

	if (!pr->opts.npids)
		return true;
	for (size_t i = 0; i < pr->opts.npids; i++)
		if (pr->opts.pids[i] == pid)
			return true;
	return false;
}

static void pr_on_kwalk(struct profile_ctx *pr, const void *data, size_t size, uint64_t n)
{
	struct kwalk_info ki;
	uint32_t pid = kw_record_pid(data, size);
	int64_t uidx = kw_record_stack(&pr->kwt, data, size, 0, space_of(pr, pid), &pr->prs.unw, &pr->prs.kw, &ki);

	if (uidx == FRAMES_BAD || uidx == FRAMES_NOTICE)
		return;
	if (uidx == FRAMES_FALLBACK)
		uidx = user_fp_stack(pr, ki.pid, (int32_t)ki.aux);
	uidx = py_merge_stack(&pr->py, uidx, ki.pid, ki.tid, space_of(pr, ki.pid), true);
	py_merge_add(&pr->py, ki.pid);
	count_samples(pr, ki.pid, ki.tid, kernel_stack(pr, PR_COOKIE_KSTACK(ki.cookie)), uidx, n);
}

/* --aggregate: a drained key, as the walker record it would have been, its count as samples */
static void pr_on_kagg(void *arg, struct kw_event *ev, const struct kw_agg_key *k, const struct kw_agg_val *v)
{
	struct profile_ctx *pr = arg;

	ev->cookie = PR_COOKIE(k->kstack, 0);
	ev->aux = PR_STACK_NONE;
	pr_on_kwalk(pr, ev, offsetof(struct kw_event, snap), v->count);
	kw_drain_seen(&pr->prs.kw, k, v->count);
}
#endif

static int on_record(void *ctx, const void *data, size_t size)
{
	struct profile_ctx *pr = ctx;
	const struct cap_rec_hdr *h = data;

	/* hand control back to the main loop now and then: a steady stream must not hold it */
	if ((++pr->prs.records & 255) == 0) {
		pr->now_ns = mono_ns();
		if (pr->now_ns >= pr->poll_until)
			return -EINTR;
	}
	pr->prs.buffer_bytes += size;
	if (size < sizeof(*h))
		return 0;
	if (py_merge_record(&pr->py, data, size)) {
		/* the thread's Python chain at the event: its stack record follows */
	} else if (h->kind == CAP_KIND_MAPEV) {
		if (pr->fr.maps) {
			uint64_t t0 = thread_cpu_ns();

#ifdef HAVE_KWALK
			kw_drain_mapev(&pr->kagg, data, size); /* its counts named with the maps before */
#endif
			mappings_event(pr->fr.maps, data, size);
			pr->prs.maps_ns += thread_cpu_ns() - t0;
		}
	} else if (h->kind == CAP_KIND_SNAPSHOT) {
		const struct cap_record *rec;
		uint32_t pid = 0;

		if (size >= sizeof(struct cap_record))
			memcpy(&pid, (const char *)data + offsetof(struct cap_record, pid), sizeof(pid));
		if (size >= sizeof(struct cap_record) && !cpu_budget_take(&pr->budget)) {
			/* over --max-cpu: the sample counted, its user stack not unwound (said so) */
			struct cap_record hdr;

			memcpy(&hdr, data, sizeof(hdr));
			pr->prs.ulost++;
			count_sample(pr, hdr.pid, hdr.tid, kernel_stack(pr, PR_COOKIE_KSTACK(hdr.cookie)),
				     pseudo_stack(&pr->st, cpu_budget_label(&pr->budget)));
			return 0;
		}
		int64_t uidx = frames_from_snapshot(&pr->fr, data, size, 0, space_of(pr, pid), &pr->prs.unw, &rec);

		if (uidx == FRAMES_BAD)
			return 0;
		if (rec->ts > pr->processed_ts)
			pr->processed_ts = rec->ts;
		if (uidx == FRAMES_FALLBACK)
			uidx = user_fp_stack(pr, rec->pid, (int32_t)rec->aux);
		uidx = py_merge_stack(&pr->py, uidx, rec->pid, rec->tid, space_of(pr, rec->pid), true);
		py_merge_add(&pr->py, rec->pid); /* -a: any python process, from its next sample on */
		count_sample(pr, rec->pid, rec->tid, kernel_stack(pr, PR_COOKIE_KSTACK(rec->cookie)), uidx);
	} else if (h->kind == PR_REC_SAMPLE && size >= sizeof(struct pr_sample_rec)) {
		struct pr_sample_rec r;
		int64_t uidx;

		memcpy(&r, data, sizeof(r));
		if ((r.flags & PR_S_IN_EXEC) && pr->opts.user) {
			pr->prs.ulost++;
			uidx = pseudo_stack(&pr->st, r.flags & PR_S_EXEC_NEW
				? "[stack lost: sampled inside execve: new image installed, registers still the old one's]"
				: "[stack lost: sampled inside execve: process not seen since before profile started]");
		} else if (r.flags & PR_S_LOST_SNAP) {
			pr->prs.ulost++;
			uidx = pseudo_stack(&pr->st, pr->opts.perfbuf ? "[stack lost: perf buffer full]"
								  : "[stack lost: ring buffer full]");
		} else {
			uidx = user_fp_stack(pr, r.pid, r.ustack);
		}
		count_sample(pr, r.pid, r.tid, kernel_stack(pr, r.kstack), uidx);
	} else if (h->kind == CAP_KIND_PROC && size >= sizeof(struct cap_proc_rec)) {
		struct cap_proc_rec r;

		uint64_t t0 = thread_cpu_ns();

		memcpy(&r, data, sizeof(r));
		if (r.op == CAP_PROC_FORK)
			on_fork(pr, r.pid, r.parent);
		else if (r.op == CAP_PROC_EXIT) {
#ifdef HAVE_KWALK
			kw_drain_pid(&pr->kagg, r.pid); /* its counts named before its state goes */
#endif
			on_proc_exit(pr, r.pid);
		}
		pr->prs.maps_ns += thread_cpu_ns() - t0;
	} else if (h->kind == PR_REC_EXEC && size >= sizeof(struct pr_exec_rec)) {
		struct pr_exec_rec r;

		memcpy(&r, data, sizeof(r));
#ifdef HAVE_KWALK
		kw_drain_pid(&pr->kagg, r.pid); /* its counts before the exec: the old program's maps */
#endif
		on_exec(pr, r.pid);
		py_merge_forget(&pr->py, r.pid);
		/* a selected process: described now, its samples carry chains from here on */
		for (size_t i = 0; i < pr->opts.npids; i++)
			if (pr->opts.pids[i] == r.pid)
				py_merge_add(&pr->py, r.pid);
#ifdef HAVE_KWALK
		if (pr->kwt.l) {
			kw_track_forget(&pr->kwt, r.pid);
			/* a target: its new program's tables at once (the BPF side made its entry
			 * already, and tells of a module it could not enter) */
			if (pr->opts.npids && !pr->kwt.inbpf && kw_selected(pr, r.pid))
				kw_track_reload(&pr->kwt, r.pid, true);
		}
	} else if (h->kind == KW_KIND_EVENT) {
		pr_on_kwalk(pr, data, size, 1);
	} else if (h->kind == KW_KIND_MMAP || h->kind == KW_KIND_EXIT) {
		/* an executable mapping or an exit: tables loaded or dropped; an exit drains the
		 * counts first (the process's samples named with its maps) */
		if (h->kind == KW_KIND_EXIT && size >= sizeof(struct kw_track_rec))
			kw_drain_pid(&pr->kagg, ((const struct kw_track_rec *)data)->pid);
		kw_track_record(&pr->kwt, data, size);
#endif
	}
	return 0;
}

/* ---- Sampling ------------------------------------------------------------------------------ */

static int open_event(const struct profile_ctx *pr, uint32_t type, uint64_t config, int cpu)
{
	struct perf_event_attr a = {
		.size = sizeof(a),
		.type = type,
		.config = config,
		.freq = pr->opts.period ? 0 : 1,
	};

	if (pr->opts.period)
		a.sample_period = pr->opts.period;
	else
		a.sample_freq = pr->opts.freq;
	return (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void attach_events(struct profile_ctx *pr)
{
	int ncpu = libbpf_num_possible_cpus();
	uint32_t type = PERF_TYPE_HARDWARE;
	uint64_t config = PERF_COUNT_HW_CPU_CYCLES;

	pr->links = xcalloc((size_t)ncpu, sizeof(*pr->links));
	pr->pfds = xcalloc((size_t)ncpu, sizeof(*pr->pfds));
	pr->prs.event = "cycles";
	for (int cpu = 0; cpu < ncpu; cpu++) {
		if (!pr_cpu_selected(&pr->opts, cpu))
			continue;
		int fd = open_event(pr, type, config, cpu);

		if (fd < 0 && type == PERF_TYPE_HARDWARE &&
		    (errno == ENOENT || errno == EOPNOTSUPP || errno == ENODEV || errno == EINVAL)) {
			/* no hardware PMU (virtual machines): the software clock */
			type = PERF_TYPE_SOFTWARE;
			config = PERF_COUNT_SW_CPU_CLOCK;
			pr->prs.event = "cpu-clock";
			fd = open_event(pr, type, config, cpu);
		}
		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* offline CPU */
			die("perf_event_open (%s, CPU %d): %s", pr->prs.event, cpu, strerror(errno));
		}
		pr->links[pr->nlinks] = bpf_program__attach_perf_event(pr->skel->progs.sample, fd);
		if (!pr->links[pr->nlinks])
			die("cannot attach to the %s event of CPU %d: %s", pr->prs.event, cpu,
			    strerror(errno));
		pr->pfds[pr->nlinks++] = fd;
		pr->prs.ncpus++;
	}
	if (!pr->nlinks)
		die("no online CPU to sample");
}

/* ---- Main -------------------------------------------------------------------------------------- */

#define PR_TRIM_NS (30 * 1000000000ull)

/* Module cache for the machine: a slot per executable file a busy host maps (bounded by RAM). */
static uint32_t cache_slots_for_machine(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mib = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz >> 20 : 1024;
	uint64_t slots = mib / 16;

	if (slots < 256)
		slots = 256;
	if (slots > 4096)
		slots = 4096;
	return (uint32_t)slots;
}

/*
 * Ring buffer: room for about a second of snapshots at the full rate on every CPU (the consumer
 * stalls while it opens a large module for the first time), 8 .. 128 MiB; 1 MiB for fp records.
 */
static size_t ring_size(const struct profile_ctx *pr)
{
	uint64_t hz = pr->opts.period ? 1000 : pr->opts.freq;
	uint64_t want = (uint64_t)libbpf_num_possible_cpus() * hz * (pr->opts.stack_size + 512);
	size_t r = 8u << 20;

	if (pr->opts.unwind == PR_UNWIND_FP || !pr->opts.user)
		return 1u << 20;
	while (r < want && r < (128u << 20))
		r <<= 1;
	return r;
}

static bool all_targets_gone(const struct profile_ctx *pr)
{
	if (!pr->opts.npids || pr->opts.command)
		return false;
	for (size_t i = 0; i < pr->opts.npids; i++)
		if (!(kill((pid_t)pr->opts.pids[i], 0) && errno == ESRCH))
			return false;
	return true;
}

/* profile's state (profile_state.h): large (the thread-name cache), so not on the stack */
static struct profile_ctx ctx;

int main(int argc, char **argv)
{
	struct profile_ctx *pr = &ctx;
	struct dwunw_cap_reader *reader;
	size_t ring_bytes;
	int err, status = 0;

	tool_set_name("profile");
	pr_parse_args(&pr->opts, argc, argv);
	tool_set_verbose(pr->opts.verbose);
	stack_store_init(&pr->st, pr->opts.max_stacks);
	frames_setup(&pr->fr, &pr->st);
	frame_lines_want(&pr->fr, pr->opts.lines);
	cpu_budget_init(&pr->budget, pr->opts.max_cpu);
	pr->agg.max = pr->opts.max_keys;
	const char *why = tool_missing_privileges(pr->opts.unwind != PR_UNWIND_FP);
	if (why)
		tool_fail(TOOL_EXIT_PRIVILEGE, "%s", why);
	pr_check_targets(&pr->opts);
	libbpf_set_print(tool_libbpf_print);
	if (pr->opts.kernel && ksyms_load())
		fprintf(stderr, "profile: /proc/kallsyms unreadable: kernel frames unnamed\n");

	pr->skel = profile_bpf__open();
	if (!pr->skel)
		die("cannot open the BPF object: %s", strerror(errno));
	pr->skel->rodata->unwind_mode = pr->opts.unwind;
	pr->skel->rodata->want_user = pr->opts.user;
	pr->skel->rodata->want_kernel = pr->opts.kernel;
	pr->skel->rodata->include_idle = pr->opts.idle;
	pr->skel->rodata->filter_tgid = pr->opts.npids || pr->opts.command;
	pr->skel->rodata->filter_tid = pr->opts.ntids > 0;
	pr->skel->rodata->follow_forks = pr->opts.command != NULL;
	pr->skel->rodata->frz_enabled = pr->opts.freeze;
	/* dwarf mode: mapping changes in order with the samples (every process's without -p), so a
	 * process gone before its samples are processed is unwound like any other; kernel mode too,
	 * for the walks that fall back to a snapshot (a short-lived process is often gone by then)
	 * and to name walked pcs through the process's files (another mount namespace, deleted) */
	if ((pr->opts.unwind == PR_UNWIND_DWARF || pr->opts.unwind == PR_UNWIND_KERNEL) && pr->opts.user &&
	    !(getenv("DWUNW_MAPEV") && !strcmp(getenv("DWUNW_MAPEV"), "0")))
		pr->fr.maps = mappings_new();
	pr->skel->rodata->mmap_ev_enabled = pr->fr.maps != NULL;
	pr->skel->rodata->cap_use_perfbuf = pr->opts.perfbuf;
	pr->skel->rodata->cap_stack_bytes = pr->opts.stack_size;
	pr->skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(pr->opts.perfbuf);
	ring_bytes = ring_size(pr);
	pr->skel->rodata->cap_wakeup_bytes = ring_bytes / 16;
	err = dwunw_cap_size_maps(pr->skel->obj, pr->opts.perfbuf, ring_bytes);
	if (!err)
		err = bpf_map__set_max_entries(pr->skel->maps.stack_traces, pr->opts.stack_storage);
	if (!err)
		err = freeze_size_maps(pr->skel->obj, pr->opts.freeze ? 0 : 1);
#ifdef HAVE_KWALK
	/* the whole system: rows for the whole budget (many programs' modules at once, not
	 * evicting each other); given processes: the default row count within it */
	struct kw_opts kwo = { .budget = pr->opts.table_budget, .rows = pr->opts.npids || pr->opts.command ? 0 : UINT32_MAX,
			       .max_file = pr->opts.npids || pr->opts.command ? 0 : 32ull << 20 };

	if (!err && pr->opts.unwind == PR_UNWIND_KERNEL && pr->opts.user)
		err = kw_size_maps(pr->skel->obj, &kwo);
	pr->skel->rodata->kw_track_enabled = pr->opts.unwind == PR_UNWIND_KERNEL && pr->opts.user;
	pr->skel->rodata->aggregate = pr->opts.aggregate;
	/* new processes' mappings entered by the BPF side, from exec, fork and mmap */
	pr->skel->rodata->kw_pm_enabled = pr->skel->rodata->kw_track_enabled;
	if (pr->skel->rodata->kw_pm_enabled)
		kw_track_prepare(&pr->kwt, pr->skel->obj);
#endif
	if (!err && !pr->opts.aggregate) /* the maps of --aggregate unused: one entry each */
		err = kw_drain_shrink(pr->skel->obj);
	if (err)
		die("cannot size the maps: %s", strerror(-err));
	err = profile_bpf__load(pr->skel);
	if (err)
		die("cannot load the BPF programs: %s (run with -v for the verifier log)",
		    strerror(-err));
#ifdef HAVE_KWALK
	if (pr->opts.unwind == PR_UNWIND_KERNEL && pr->opts.user) {
		pr->kwt.l = kw_loader_new(pr->skel->obj, &kwo);
		if (pr->opts.aggregate && kw_drain_open(&pr->kagg, pr->skel->obj, &pr->skel->bss->kw_agg_gen,
							&pr->skel->bss->kw_agg_pids_full, &pr->skel->bss->kw_agg_hold_all,
							pr_on_kagg, pr))
			die("--aggregate: the walker's count maps are missing");
		if (!pr->kwt.l)
			die("cannot set up the in-kernel walker's tables: %s", strerror(errno));
		pr->kwt.fr = &pr->fr;
		/* records come only for the processes the BPF side follows (-- COMMAND: its
		 * descendants too): no filter here */
		pr->kwt.selected = NULL;
		/* the whole system: a process earns its tables with a few samples (kwalk_track_user.h) */
		pr->kwt.threshold = pr->opts.npids || pr->opts.command ? 1 : 16;
		pr->kwt.load_ns_per_s = pr->opts.npids || pr->opts.command ? 0 : 200000000ull; /* at most 20 % of the consumer */
		if (pr->opts.command)
			kw_preload_command(pr->kwt.l, pr->opts.command[0]);
	}
#endif
	if (pr->opts.command) {
		uint32_t pid = (uint32_t)ptarget_start(pr->opts.command);

		pr->opts.pids[pr->opts.npids++] = pid;
		atexit(ptarget_stop);
	}
	tool_select_set(pr->skel->obj, pr->opts.pids, pr->opts.npids, pr->opts.tids, pr->opts.ntids);
	pr->kcache.n = pr->opts.stack_storage;
	pr->kcache.map = xcalloc(pr->kcache.n, sizeof(*pr->kcache.map));
	if (pr->opts.freeze) {
		err = freeze_start(&pr->fz, pr->skel->obj);
		if (err)
			die("--unwind=freeze: cannot start its watchdog: %s", strerror(-err));
		pr->fr.fz = &pr->fz;
	}
	err = frames_init(&pr->fr, cache_slots_for_machine(), pr->opts.debuginfod ? DWUNW_CFG_DEBUGINFOD : 0,
			  pr->opts.debug_dir);
	if (err)
		die("libdwunw: %s", dwunw_strerror(err));
	py_merge_init(&pr->py, &pr->fr, bpf_map__fd(pr->skel->maps.py_procs),
		      bpf_map__fd(pr->skel->maps.py_cost), pr->opts.verbose);
	for (size_t i = 0; i < pr->opts.npids && !pr->opts.command; i++)
		py_merge_add(&pr->py, pr->opts.pids[i]);
#ifdef HAVE_KWALK
	/* -p: the targets' tables in before their first sample (kernel mode; else a no-op) */
	for (size_t i = 0; i < pr->opts.npids && !pr->opts.command; i++)
		kw_track_reload(&pr->kwt, pr->opts.pids[i], true);
#endif

	reader = dwunw_cap_reader_new(pr->skel->obj, pr->opts.perfbuf, 8u << 20, on_record, pr);
	if (!reader)
		die("cannot open the %s buffer: %s", pr->opts.perfbuf ? "perf" : "ring", strerror(errno));
	/* --perf-buffer: the reader orders our records by their time as it does the runtime's */
	dwunw_cap_reader_order_by(reader, PR_REC_SAMPLE, offsetof(struct pr_sample_rec, ts));
	dwunw_cap_reader_order_by(reader, PR_REC_EXEC, offsetof(struct pr_exec_rec, ts));
	err = bpf_program__attach(pr->skel->progs.pr_thread_exit) ? 0 : -errno;
	if (err)
		die("cannot attach sched_process_exit: %s", strerror(-err));
	if (!bpf_program__attach(pr->skel->progs.pr_exec))
		die("cannot attach sched_process_exec: %s", strerror(errno));
	if (!bpf_program__attach(pr->skel->progs.pr_fork))
		die("cannot attach sched_process_fork: %s", strerror(errno));
	if (pr->fr.maps) {
		struct bpf_link **ml = NULL;
		size_t nml = 0;

		err = mappings_attach(pr->skel->obj, &ml, &nml);
		if (err)
			die("cannot attach the mapping-change programs: %s", strerror(-err));
		free(ml); /* the links live as long as profile */
	}
#ifdef HAVE_KWALK
	if (pr->kwt.l) {
		err = kw_track_attach(&pr->kwt, pr->skel->obj);
		if (err) /* the walker's fallback still reloads a process whose pcs it does not know */
			fprintf(stderr, "profile: no mmap tracing (%s): new mappings load at their "
				"first sample\n", strerror(-err));
		for (size_t i = 0; i < pr->opts.npids; i++)
			if (!pr->opts.command)
				kw_track_reload(&pr->kwt, pr->opts.pids[i], true);
	}
#endif
	attach_events(pr);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	pr_print_header(pr);
	/* the command's maps before its exec (profile's own image), read while it waits: its first
	 * samples are processed later, perhaps after the exec */
	if (pr->fr.maps && pr->opts.command)
		mappings_seed(pr->fr.maps, pr->opts.pids[pr->opts.npids - 1]);
	ptarget_release();
	pr->skel->bss->frz_armed = pr->opts.freeze; /* after the command's go (runtime/freeze.h) */

	uint64_t t0 = mono_ns(), end = pr->opts.duration ? t0 + pr->opts.duration * 1000000000ull : 0;
	uint64_t last_check = t0, last_sweep = t0, ival_start = t0, ival_seq = 0, last_drain = t0;
	uint64_t last_trim = t0, last_spaces = t0, poll_ns;

	pr->prs.start_ns = t0;
	pr->prs.setup_cpu_ns = self_cpu_ns();
	while (!exiting) {
		pr->now_ns = mono_ns();
		pr->poll_until = pr->now_ns + 50000000ull;
		poll_ns = pr->now_ns; /* (records move now_ns on) */
		err = dwunw_cap_reader_poll(reader, 10);
#ifdef HAVE_KWALK
		if (err >= 0) /* --aggregate: holds whose records this poll applied end */
			kw_drain_sweep(&pr->kagg, poll_ns);
#endif
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "profile: polling the %s buffer: %s\n",
				pr->opts.perfbuf ? "perf" : "ring", strerror(-err));
			break;
		}
		uint64_t now = mono_ns();
		if (end && now >= end)
			break;
#ifdef HAVE_KWALK
		/* --aggregate: the kernel's counts each interval, or each second */
		if (pr->kagg.on && now - last_drain >= (pr->opts.interval ? pr->opts.interval : 1) * 1000000000ull) {
			last_drain = now;
			kw_drain_all(&pr->kagg);
		}
#endif
		if (pr->opts.interval && now - ival_start >= pr->opts.interval * 1000000000ull) {
			tool_counters_read(pr->skel->obj, pr->prs.bpf, PR_CNT_MAX);
			pr_print_interval(pr, ival_seq++, ival_start, now);
			ival_start = now;
		}
		if (now - last_sweep >= 1000000000ull) {
			uint64_t c0 = thread_cpu_ns();

			last_sweep = now;
			mappings_sweep(pr->fr.maps, pr->processed_ts, on_swept, pr);
			if (now - last_spaces >= 10000000000ull) {
				last_spaces = now;
				spaces_sweep(&pr->spaces);
			}
			pr->prs.maps_ns += thread_cpu_ns() - c0;
		}
#ifdef HAVE_DWUNW
		/* modules unused for 30 to 60 s (their processes gone) leave memory: -a under process
		 * churn meets new files all the time, and warm slots would otherwise stay until the
		 * cache (RAM / 16 MiB slots) is full */
		if (pr->fr.dctx_ok && now - last_trim >= PR_TRIM_NS) {
			last_trim = now;
			dwunw_cache_trim(&pr->fr.dctx, NULL);
		}
#endif
		if (now - last_check >= 50000000ull) {
			last_check = now;
			if (pr->opts.command && ptarget_exited(&status))
				break;
			if (all_targets_gone(pr))
				break;
		}
	}
	for (int i = 0; i < pr->nlinks; i++) {
		bpf_link__destroy(pr->links[i]);
		close(pr->pfds[i]);
	}
	pr->prs.end_ns = mono_ns();
	pr->poll_until = UINT64_MAX;
	dwunw_cap_reader_consume(reader); /* the samples already taken */
#ifdef HAVE_KWALK
	kw_drain_all(&pr->kagg); /* and those counted in the kernel (the events are detached) */
#endif
	{
		uint64_t capc[CAP_CNT_MAX];

		dwunw_cap_counters(pr->skel->obj, capc);
		pr->prs.output_failed = capc[CAP_CNT_OUTPUT_FAILED];
		if (dwunw_cap_reader_lost(reader) > pr->prs.output_failed)
			pr->prs.output_failed = dwunw_cap_reader_lost(reader);
		pr->prs.read_failed = capc[CAP_CNT_READ_FAILED];
		pr->prs.untimed = dwunw_cap_reader_untimed(reader);
	}
	tool_counters_read(pr->skel->obj, pr->prs.bpf, PR_CNT_MAX);
	if (pr->opts.interval) /* the last, partial interval */
		pr_print_interval(pr, ival_seq, ival_start, pr->prs.end_ns);
	pr_kw_stats(pr);
	spaces_sweep(&pr->spaces); /* the summary's "held": what is left of processes gone */
	if (pr->opts.debuginfod)
		frames_name_fetched(&pr->fr, 60000);
	pr_report(pr);
	dwunw_cap_reader_free(reader);
#ifdef HAVE_KWALK
	if (pr->kwt.l) {
		kw_track_detach(&pr->kwt);
		kw_loader_free(pr->kwt.l);
	}
#endif
	py_merge_shutdown(&pr->py); /* reads its maps: before they go */
	profile_bpf__destroy(pr->skel);
	ptarget_stop();
	frames_shutdown(&pr->fr);
	mappings_free(pr->fr.maps);
	module_warn_flush();
	return 0;
}
