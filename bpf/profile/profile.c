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
#include "profile_target.h"
#include "runtime/stack_store.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_preload.h"
#include "kwalk/kwalk_record.h"
#include "kwalk/kwalk_track_user.h"
#include "kwalk/kwalk_user.h"
#endif

static struct profile_bpf *skel;
static volatile sig_atomic_t exiting;
struct pr_stats prs;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* ---- Stacks of a sample ------------------------------------------------------------------ */

static struct fp_cache kcache;

/* Kernel stack id -> stack index (-1: none in this sample). */
static int64_t kernel_stack(int32_t id)
{
	return kstack_of(&kcache, bpf_map__fd(skel->maps.stack_traces), id, NULL, &prs.klost);
}

/*
 * Thread name (the BPF side keeps the latest in `comms`): cached here per tid for a second, so
 * a sample costs no map look-up; an exec drops its process's entry (see on_exec).
 */
#define COMM_CACHE 4096
static struct {
	uint32_t tid;          /* tid + 1 */
	const char *comm;
	uint64_t ns;
} comm_cache[COMM_CACHE];
static uint64_t now_ns;        /* mono_ns(), refreshed every 256 records */
static uint64_t poll_until;    /* on_record returns -EINTR from then on */

static const char *comm_of(uint32_t tid)
{
	char c[PR_COMM_LEN + 1] = "";
	size_t i = hash64(0, tid) & (COMM_CACHE - 1);

	if (comm_cache[i].tid == tid + 1 && now_ns - comm_cache[i].ns < 1000000000ull)
		return comm_cache[i].comm;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.comms), &tid, c))
		return intern("[unknown]");
	c[PR_COMM_LEN] = 0;
	comm_cache[i].tid = tid + 1;
	comm_cache[i].comm = intern(c);
	comm_cache[i].ns = now_ns;
	return comm_cache[i].comm;
}

static void count_sample(uint32_t pid, uint32_t tid, int64_t kidx, int64_t uidx)
{
	struct pr_key k = { .pid = pid, .comm = comm_of(tid), .kstack = kidx, .ustack = uidx };

	pr_note_pid(pid);
	pr_agg_add(&k, 1);
}

/*
 * The address space of pid's samples in the stack store: the pid and its exec generation (the
 * same pcs after an exec are another program's).
 */
static struct {
	uint32_t *pid;         /* pid + 1 */
	uint32_t *gen;
	size_t cap, n;
} gens;

static uint32_t *gen_slot(uint32_t pid, bool add)
{
	size_t i;

	if (add && (gens.n + 1) * 2 > gens.cap) {
		size_t ncap = gens.cap ? gens.cap * 2 : 256;
		uint32_t *np = xcalloc(ncap, sizeof(*np)), *ng = xcalloc(ncap, sizeof(*ng));

		for (size_t k = 0; k < gens.cap; k++)
			if (gens.pid[k]) {
				for (i = hash64(0, gens.pid[k]) & (ncap - 1); np[i]; i = (i + 1) & (ncap - 1))
					;
				np[i] = gens.pid[k];
				ng[i] = gens.gen[k];
			}
		free(gens.pid);
		free(gens.gen);
		gens.pid = np;
		gens.gen = ng;
		gens.cap = ncap;
	}
	if (!gens.cap)
		return NULL;
	for (i = hash64(0, pid + 1) & (gens.cap - 1); gens.pid[i]; i = (i + 1) & (gens.cap - 1))
		if (gens.pid[i] == pid + 1)
			return &gens.gen[i];
	if (!add)
		return NULL;
	gens.pid[i] = pid + 1;
	gens.n++;
	return &gens.gen[i];
}

static uint64_t space_of(uint32_t pid)
{
	uint32_t *g = gen_slot(pid, false);

	return (uint64_t)(g ? *g : 0) << 32 | pid;
}

static void on_exec(uint32_t pid)
{
	comm_cache[hash64(0, pid) & (COMM_CACHE - 1)].tid = 0;
	(*gen_slot(pid, true))++;
	dwunw_maps_forget(&dctx, (int32_t)pid);
	mappings_forget(pid);
}

static int64_t user_fp_stack(uint32_t pid, int32_t id)
{
	if (id == PR_STACK_NONE)
		return -1;
	if (id == -EFAULT) {
		prs.ulost++;
		return pseudo_stack("[stack lost: frame-pointer walk failed (EFAULT)]");
	}
	int64_t idx = fp_stack_of(NULL, bpf_map__fd(skel->maps.stack_traces), (pid_t)pid,
				  space_of(pid), id, 0, false);
	if (st.v[idx].kind == SK_PSEUDO)
		prs.ulost++;
	return idx;
}

#ifdef HAVE_KWALK
/* ---- --unwind=kernel: tables for the walker ------------------------------------------------ */

static struct kw_track kwt;

/* An exec the BPF side reports for every process: only the profiled ones get tables. */
static bool kw_selected(uint32_t pid)
{
	if (!opts.npids)
		return true;
	for (size_t i = 0; i < opts.npids; i++)
		if (opts.pids[i] == pid)
			return true;
	return false;
}

static void on_kwalk(const void *data, size_t size)
{
	struct kwalk_info ki;
	uint32_t pid = kw_record_pid(data, size);
	int64_t uidx = kw_record_stack(&kwt, data, size, 0, space_of(pid), &prs.unw, &prs.kw, &ki);

	if (uidx == FRAMES_BAD || uidx == FRAMES_NOTICE)
		return;
	if (uidx == FRAMES_FALLBACK)
		uidx = user_fp_stack(ki.pid, (int32_t)ki.aux);
	count_sample(ki.pid, ki.tid, kernel_stack(PR_COOKIE_KSTACK(ki.cookie)), uidx);
}
#endif

static int on_record(void *ctx, const void *data, size_t size)
{
	const struct cap_rec_hdr *h = data;

	(void)ctx;
	/* hand control back to the main loop now and then: a steady stream must not hold it */
	if ((++prs.records & 255) == 0) {
		now_ns = mono_ns();
		if (now_ns >= poll_until)
			return -EINTR;
	}
	prs.buffer_bytes += size;
	if (size < sizeof(*h))
		return 0;
	if (h->kind == CAP_KIND_MAPEV) {
		mappings_event(data, size);
	} else if (h->kind == CAP_KIND_SNAPSHOT) {
		const struct cap_record *rec;
		uint32_t pid = 0;

		if (size >= sizeof(struct cap_record))
			memcpy(&pid, (const char *)data + offsetof(struct cap_record, pid), sizeof(pid));
		int64_t uidx = frames_from_snapshot(data, size, 0, space_of(pid), &prs.unw, &rec);

		if (uidx == FRAMES_BAD)
			return 0;
		if (uidx == FRAMES_FALLBACK)
			uidx = user_fp_stack(rec->pid, (int32_t)rec->aux);
		count_sample(rec->pid, rec->tid, kernel_stack(PR_COOKIE_KSTACK(rec->cookie)), uidx);
	} else if (h->kind == PR_REC_SAMPLE && size >= sizeof(struct pr_sample_rec)) {
		struct pr_sample_rec r;
		int64_t uidx;

		memcpy(&r, data, sizeof(r));
		if ((r.flags & PR_S_IN_EXEC) && opts.user) {
			prs.ulost++;
			uidx = pseudo_stack("[stack lost: sampled inside execve]");
		} else if (r.flags & PR_S_LOST_SNAP) {
			prs.ulost++;
			uidx = pseudo_stack(opts.perfbuf ? "[stack lost: perf buffer full]"
							 : "[stack lost: ring buffer full]");
		} else {
			uidx = user_fp_stack(r.pid, r.ustack);
		}
		count_sample(r.pid, r.tid, kernel_stack(r.kstack), uidx);
	} else if (h->kind == PR_REC_EXEC && size >= sizeof(struct pr_exec_rec)) {
		struct pr_exec_rec r;

		memcpy(&r, data, sizeof(r));
		on_exec(r.pid);
#ifdef HAVE_KWALK
		if (kwt.l && kw_selected(r.pid)) {
			kw_track_forget(&kwt, r.pid);
			if (opts.npids) /* a target: its new program's tables at once */
				kw_track_reload(&kwt, r.pid, true);
		}
	} else if (h->kind == KW_KIND_EVENT) {
		on_kwalk(data, size);
	} else if (kw_track_record(&kwt, data, size)) {
		/* an executable mapping or an exit: tables loaded or dropped */
#endif
	}
	return 0;
}

/* ---- Sampling ------------------------------------------------------------------------------ */

static struct bpf_link **links;
static int *pfds;
static int nlinks;

static int open_event(uint32_t type, uint64_t config, int cpu)
{
	struct perf_event_attr a = {
		.size = sizeof(a),
		.type = type,
		.config = config,
		.freq = opts.period ? 0 : 1,
	};

	if (opts.period)
		a.sample_period = opts.period;
	else
		a.sample_freq = opts.freq;
	return (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void attach_events(void)
{
	int ncpu = libbpf_num_possible_cpus();
	uint32_t type = PERF_TYPE_HARDWARE;
	uint64_t config = PERF_COUNT_HW_CPU_CYCLES;

	links = xcalloc((size_t)ncpu, sizeof(*links));
	pfds = xcalloc((size_t)ncpu, sizeof(*pfds));
	prs.event = "cycles";
	for (int cpu = 0; cpu < ncpu; cpu++) {
		if (!pr_cpu_selected(cpu))
			continue;
		int fd = open_event(type, config, cpu);

		if (fd < 0 && type == PERF_TYPE_HARDWARE &&
		    (errno == ENOENT || errno == EOPNOTSUPP || errno == ENODEV || errno == EINVAL)) {
			/* no hardware PMU (virtual machines): the software clock */
			type = PERF_TYPE_SOFTWARE;
			config = PERF_COUNT_SW_CPU_CLOCK;
			prs.event = "cpu-clock";
			fd = open_event(type, config, cpu);
		}
		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* offline CPU */
			die("perf_event_open (%s, CPU %d): %s", prs.event, cpu, strerror(errno));
		}
		links[nlinks] = bpf_program__attach_perf_event(skel->progs.sample, fd);
		if (!links[nlinks])
			die("cannot attach to the %s event of CPU %d: %s", prs.event, cpu,
			    strerror(errno));
		pfds[nlinks++] = fd;
		prs.ncpus++;
	}
	if (!nlinks)
		die("no online CPU to sample");
}

static void set_filters(void)
{
	uint8_t one = 1;

	for (size_t i = 0; i < opts.npids; i++)
		if (bpf_map_update_elem(bpf_map__fd(skel->maps.tgids), &opts.pids[i], &one, BPF_ANY))
			die("cannot set the pid filter: %s", strerror(errno));
	for (size_t i = 0; i < opts.ntids; i++)
		if (bpf_map_update_elem(bpf_map__fd(skel->maps.tids), &opts.tids[i], &one, BPF_ANY))
			die("cannot set the thread filter: %s", strerror(errno));
}

/* ---- Main -------------------------------------------------------------------------------------- */

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
static size_t ring_size(void)
{
	uint64_t hz = opts.period ? 1000 : opts.freq;
	uint64_t want = (uint64_t)libbpf_num_possible_cpus() * hz * (opts.stack_size + 512);
	size_t r = 8u << 20;

	if (opts.unwind == PR_UNWIND_FP || !opts.user)
		return 1u << 20;
	while (r < want && r < (128u << 20))
		r <<= 1;
	return r;
}

static bool all_targets_gone(void)
{
	if (!opts.npids || opts.command)
		return false;
	for (size_t i = 0; i < opts.npids; i++)
		if (!(kill((pid_t)opts.pids[i], 0) && errno == ESRCH))
			return false;
	return true;
}

int main(int argc, char **argv)
{
	struct dwunw_cap_reader *reader;
	size_t ring_bytes;
	int err, status = 0;

	tool_name = "profile";
	pr_parse_args(argc, argv);
	tool_verbose = opts.verbose;
	st.max = opts.max_stacks;
	agg.max = opts.max_keys;
	const char *why = tool_missing_privileges(opts.unwind != PR_UNWIND_FP);
	if (why)
		tool_fail(TOOL_EXIT_PRIVILEGE, "%s", why);
	pr_check_targets();
	libbpf_set_print(tool_libbpf_print);
	if (opts.kernel && ksyms_load())
		fprintf(stderr, "profile: /proc/kallsyms unreadable: kernel frames unnamed\n");

	skel = profile_bpf__open();
	if (!skel)
		die("cannot open the BPF object: %s", strerror(errno));
	skel->rodata->unwind_mode = opts.unwind;
	skel->rodata->want_user = opts.user;
	skel->rodata->want_kernel = opts.kernel;
	skel->rodata->include_idle = opts.idle;
	skel->rodata->filter_tgid = opts.npids || opts.command;
	skel->rodata->filter_tid = opts.ntids > 0;
	/* dwarf mode on chosen processes: mapping changes in order with the samples (not
	 * system-wide: every process's mmaps would be sent) */
	mappings_on = opts.unwind == PR_UNWIND_DWARF && opts.user && (opts.npids || opts.command) &&
		       !(getenv("DWUNW_MAPEV") && !strcmp(getenv("DWUNW_MAPEV"), "0"));
	skel->rodata->mmap_ev_enabled = mappings_on;
	skel->rodata->cap_use_perfbuf = opts.perfbuf;
	skel->rodata->cap_stack_bytes = opts.stack_size;
	skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(opts.perfbuf);
	ring_bytes = ring_size();
	skel->rodata->cap_wakeup_bytes = ring_bytes / 16;
	err = dwunw_cap_size_maps(skel->obj, opts.perfbuf, ring_bytes);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.stack_traces, opts.stack_storage);
#ifdef HAVE_KWALK
	struct kw_opts kwo = { .budget = opts.table_budget };

	if (!err && opts.unwind == PR_UNWIND_KERNEL && opts.user)
		err = kw_size_maps(skel->obj, &kwo);
	skel->rodata->kw_track_enabled = opts.unwind == PR_UNWIND_KERNEL && opts.user;
#endif
	if (err)
		die("cannot size the maps: %s", strerror(-err));
	err = profile_bpf__load(skel);
	if (err)
		die("cannot load the BPF programs: %s (run with -v for the verifier log)",
		    strerror(-err));
#ifdef HAVE_KWALK
	if (opts.unwind == PR_UNWIND_KERNEL && opts.user) {
		kwt.l = kw_loader_new(skel->obj, &kwo);
		if (!kwt.l)
			die("cannot set up the in-kernel walker's tables: %s", strerror(errno));
		kwt.selected = kw_selected;
		/* the whole system: a process earns its tables with a few samples (kwalk_track_user.h) */
		kwt.threshold = opts.npids ? 1 : 16;
		kwt.load_ns_per_s = opts.npids ? 0 : 200000000ull; /* at most 20 % of the consumer */
		if (opts.command)
			kw_preload_command(kwt.l, opts.command[0]);
	}
#endif
	if (opts.command) {
		uint32_t pid = (uint32_t)ptarget_start(opts.command);

		opts.pids[opts.npids++] = pid;
		atexit(ptarget_stop);
	}
	set_filters();
	kcache.n = opts.stack_storage;
	kcache.map = xcalloc(kcache.n, sizeof(*kcache.map));
	err = frames_init(cache_slots_for_machine(), 0);
	if (err)
		die("libdwunw: %s", dwunw_strerror(err));
	frames_use_perf_map = true;

	reader = dwunw_cap_reader_new(skel->obj, opts.perfbuf, 8u << 20, on_record, NULL);
	if (!reader)
		die("cannot open the %s buffer: %s", opts.perfbuf ? "perf" : "ring", strerror(errno));
	err = bpf_program__attach(skel->progs.pr_thread_exit) ? 0 : -errno;
	if (err)
		die("cannot attach sched_process_exit: %s", strerror(-err));
	if (!bpf_program__attach(skel->progs.pr_exec))
		die("cannot attach sched_process_exec: %s", strerror(errno));
	if (mappings_on) {
		struct bpf_link **ml = NULL;
		size_t nml = 0;

		err = mappings_attach(skel->obj, &ml, &nml);
		if (err)
			die("cannot attach the mapping-change programs: %s", strerror(-err));
		free(ml); /* the links live as long as profile */
	}
#ifdef HAVE_KWALK
	if (kwt.l) {
		err = kw_track_attach(&kwt, skel->obj);
		if (err) /* the walker's fallback still reloads a process whose pcs it does not know */
			fprintf(stderr, "profile: no mmap tracing (%s): new mappings load at their "
				"first sample\n", strerror(-err));
		for (size_t i = 0; i < opts.npids; i++)
			if (!opts.command)
				kw_track_reload(&kwt, opts.pids[i], true);
	}
#endif
	attach_events();

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	pr_print_header();
	/* the command's maps before its exec (profile's own image), read while it waits: its first
	 * samples are processed later, perhaps after the exec */
	if (mappings_on && opts.command)
		mappings_seed(opts.pids[opts.npids - 1]);
	ptarget_release();

	uint64_t t0 = mono_ns(), end = opts.duration ? t0 + opts.duration * 1000000000ull : 0;
	uint64_t last_check = t0;

	prs.start_ns = t0;
	while (!exiting) {
		now_ns = mono_ns();
		poll_until = now_ns + 50000000ull;
		err = dwunw_cap_reader_poll(reader, 10);
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "profile: polling the %s buffer: %s\n",
				opts.perfbuf ? "perf" : "ring", strerror(-err));
			break;
		}
		uint64_t now = mono_ns();
		if (end && now >= end)
			break;
		if (now - last_check >= 50000000ull) {
			last_check = now;
			if (opts.command && ptarget_exited(&status))
				break;
			if (all_targets_gone())
				break;
		}
	}
	for (int i = 0; i < nlinks; i++) {
		bpf_link__destroy(links[i]);
		close(pfds[i]);
	}
	prs.end_ns = mono_ns();
	poll_until = UINT64_MAX;
	dwunw_cap_reader_consume(reader); /* the samples already taken */
	{
		uint64_t capc[CAP_CNT_MAX];

		dwunw_cap_counters(skel->obj, capc);
		prs.output_failed = capc[CAP_CNT_OUTPUT_FAILED];
		if (dwunw_cap_reader_lost(reader) > prs.output_failed)
			prs.output_failed = dwunw_cap_reader_lost(reader);
		prs.read_failed = capc[CAP_CNT_READ_FAILED];
	}
	pr_counters(skel->maps.pr_counters);
#ifdef HAVE_KWALK
	if (kwt.l) {
		struct kw_stats ks;
		uint64_t tc[KW_TC_MAX];

		kw_get_stats(kwt.l, &ks);
		kw_track_counters(skel->obj, tc);
		prs.kw_map_bytes = ks.map_bytes;
		prs.kw_table_bytes = ks.table_bytes;
		prs.kw_modules = ks.modules;
		prs.kw_evictions = ks.evictions;
		prs.kw_loads = kwt.loads;
		prs.kw_mmaps = kwt.mmaps;
		prs.kw_exits = kwt.exits;
		prs.kw_deferred = kwt.deferred;
		prs.kw_mmaps_lost = tc[KW_TC_LOST];
	}
#endif
	pr_report();
	dwunw_cap_reader_free(reader);
#ifdef HAVE_KWALK
	if (kwt.l) {
		kw_track_detach(&kwt);
		kw_loader_free(kwt.l);
	}
#endif
	profile_bpf__destroy(skel);
	ptarget_stop();
	frames_shutdown();
	module_warn_flush();
	return 0;
}
