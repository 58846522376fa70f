// SPDX-License-Identifier: GPL-2.0-only
/*
 * kwalk-check: differential test and measurement of the in-kernel walker (kwalk.bpf.h).
 *
 * Runs a command, samples it (cpu-clock perf events filtered by its pid, and/or uprobes on
 * named functions), and for every sample gets, in one event, the frames the kernel walker found
 * and the snapshot (registers + stack window). The snapshot is unwound with libdwunw in user space
 * and the two are compared frame by frame. A walk that stopped short (no table yet, a rule it does
 * not evaluate, a fault) must agree on every frame it gave: the hybrid then takes the snapshot's
 * stack for that sample. Every difference is printed with its pc and the rule that produced it.
 *
 * Two more programs on the same samples only walk and count, for timing with
 * kernel.bpf_stats_enabled: the block-index walker alone, and the peer (a plain binary search
 * over the same rows).
 *
 * usage: kwalk-check [options] -- COMMAND [ARGS...]
 */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "dwunw.h"
#include "runtime/capture_user.h"
#include "kwalk_check.h"
#include "kwalk_event.h"
#include "kwalk_preload.h"
#include "kwalk_user.h"
#include "kwalk_check.skel.h"

#define KC_MAX_UPROBES 16
#define KC_LIB_FRAMES  256

/* the command line */
struct kc_opts {
	int json;
	int verbose;
	unsigned freq;
	double duration;
	unsigned frames;
	uint64_t budget;
	uint32_t rows;
	int peer;
	int max_diffs;
	char *uprobes[KC_MAX_UPROBES];
	int nuprobes;
	int no_perf;
	int stop_unknown;
	int preload;
	int micro;
	unsigned micro_op, micro_size, micro_n;
	unsigned floor_n;          /* --floor N: 0 = off */
	char **cmd;
};

struct site {
	char where[160];
	char file[256];            /* the module's path ("" when none) */
	uint64_t lookup;           /* the module address the walker looked up (pc - 1 at a return address) */
	unsigned status, why;
	uint32_t rule;
	uint64_t count;
};

/* kwalk-check's state: one context, passed down from main */
struct kwalk_check {
	struct kc_opts opt;
	struct kw_loader *kl;
	struct dwunw_ctx ctx;
	int pid;
	/* each event is one of: identical (whole stacks), kernel_short, snapshot_short, a difference,
	 * no_lib (no snapshot to compare) */
	uint64_t events, identical, differences, fallback, snapshot_short, kernel_short, complete, no_lib, uprobe_tramp;
	uint64_t by_status[KW_ST_MAX];
	uint64_t frames_walker, frames_lib;
	uint64_t signal_frames, vdso_events, deep_events, max_frames;
	uint64_t hybrid_kernel, hybrid_snapshot, hybrid_mismatch;
	struct kw_event_scratch hs;
	int tids[64];
	int ntids;
	uint64_t last_reload_ns;
	int printed;
	struct site sites[64];
	int nsites;
	void *buf;
	size_t buf_size;
};

static const struct argp_option options[] = {
	{ "json", 'j', NULL, 0, "Print the results as JSON", 0 },
	{ "verbose", 'v', NULL, 0, "Print every fallback too", 0 },
	{ "freq", 'F', "HZ", 0, "cpu-clock sampling frequency (default 997)", 0 },
	{ "duration", 'd', "SEC", 0, "Stop the command after SEC seconds (default 10)", 0 },
	{ "frames", 'f', "N", 0, "Frames the kernel walker goes (<= 128, default 128)", 0 },
	{ "budget", 'b', "MIB", 0, "Memory budget of the walker's maps (default 64)", 0 },
	{ "rows", 'r', "N", 0, "Row capacity (default 2 M, within the budget)", 0 },
	{ "no-peer", 'P', NULL, 0, "Do not run the binary-search peer", 0 },
	{ "uprobe", 'u', "PATH:SYMBOL", 0, "Also sample at this function's entry, or at PATH:+OFFSET "
	  "(a file offset) (repeatable)", 0 },
	{ "no-perf", 'n', NULL, 0, "No cpu-clock sampling (uprobes only)", 0 },
	{ "max-diffs", 'm', "N", 0, "Print at most N differences (default 20)", 0 },
	{ "preload", 'p', NULL, 0, "Load the tables of the command and of the libraries ldd lists "
	  "before it starts", 0 },
	{ "stop-unknown", 's', NULL, 0, "Stop the process at a sample whose mappings are not loaded, "
	  "continue it once they are (short runs)", 0 },
	{ "micro", 'M', "OP:SIZE:N", 0, "Also time N operations per sample: 0 nothing, 1 user read of SIZE "
	  "bytes at sp, 2 row loads at random indices below SIZE, 3 at one index, 4 reads at sp + 64 i", 0 },
	{ "floor", 'L', "N", 0, "Also time the floor of a walker on the same samples: an empty program, and N "
	  "of each: bpf_loop iterations, user reads of 8 and 16 B, hash / array / per-CPU array lookups, "
	  "loads of cold, warm and hot lines; and one read of the stack chunk", 0 },
	{},
};

static error_t parse_arg(int key, char *arg, struct argp_state *state)
{
	struct kwalk_check *kc = state->input;

	switch (key) {
	case 'j': kc->opt.json = 1; break;
	case 'v': kc->opt.verbose = 1; break;
	case 'F': kc->opt.freq = (unsigned)strtoul(arg, NULL, 0); break;
	case 'd': kc->opt.duration = strtod(arg, NULL); break;
	case 'f': kc->opt.frames = (unsigned)strtoul(arg, NULL, 0); break;
	case 'b': kc->opt.budget = strtoull(arg, NULL, 0) << 20; break;
	case 'r': kc->opt.rows = (uint32_t)strtoul(arg, NULL, 0); break;
	case 'P': kc->opt.peer = 0; break;
	case 'n': kc->opt.no_perf = 1; break;
	case 's': kc->opt.stop_unknown = 1; break;
	case 'p': kc->opt.preload = 1; break;
	case 'm': kc->opt.max_diffs = atoi(arg); break;
	case 'M':
		if (sscanf(arg, "%u:%u:%u", &kc->opt.micro_op, &kc->opt.micro_size, &kc->opt.micro_n) != 3 ||
		    kc->opt.micro_op > 4 || kc->opt.micro_size > 1u << 24 || kc->opt.micro_n > 4096)
			argp_error(state, "--micro OP:SIZE:N (OP 0..4, N <= 4096)");
		kc->opt.micro = 1;
		break;
	case 'L':
		kc->opt.floor_n = (unsigned)strtoul(arg, NULL, 0);
		if (kc->opt.floor_n == 0 || kc->opt.floor_n > 4096)
			argp_error(state, "--floor N: 1..4096");
		break;
	case 'u':
		if (kc->opt.nuprobes >= KC_MAX_UPROBES || !strchr(arg, ':'))
			argp_error(state, "--uprobe PATH:SYMBOL, at most %d", KC_MAX_UPROBES);
		kc->opt.uprobes[kc->opt.nuprobes++] = arg;
		break;
	case ARGP_KEY_ARGS:
		kc->opt.cmd = state->argv + state->next;
		break;
	case ARGP_KEY_END:
		if (!kc->opt.cmd || !kc->opt.cmd[0])
			argp_error(state, "no command");
		if (kc->opt.frames == 0 || kc->opt.frames > KW_MAX_FRAMES)
			argp_error(state, "--frames: 1..%d", KW_MAX_FRAMES);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- Comparison ---------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void where_of(const struct kwalk_check *kc, int pid, uint64_t pc, char *buf, size_t len)
{
	uint64_t a = 0;
	const char *m = kw_pc_module(kc->kl, pid, pc, &a);

	if (m)
		snprintf(buf, len, "%s+0x%llx", strrchr(m, '/') ? strrchr(m, '/') + 1 : m, (unsigned long long)a);
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)pc);
}

/* libdwunw's row for a frame (the rule its step used), in readelf's notation. */
static void lib_rule(struct kwalk_check *kc, const struct dwunw_frame *f, int exact, char *buf, size_t len)
{
	struct dwunw_row_text rt;
	int64_t row;
	size_t n;

	snprintf(buf, len, "-");
	if (!f->module)
		return;
	row = dwunw_table_lookup(&kc->ctx, f->module, exact ? f->module_addr : f->module_addr - 1);
	if (row < 0 || dwunw_table_row(&kc->ctx, f->module, (uint64_t)row, &rt))
		return;
	n = snprintf(buf, len, "cfa=%s", rt.cfa);
	for (uint32_t i = 0; i < rt.nregs && n < len; i++)
		n += snprintf(buf + n, len - n, " %s=%s", rt.regs[i].name, rt.regs[i].rule);
}

/* Where the walker looked: the module's file and the address in it (the test checks that no FDE
 * of the file covers a no-dwarf one, readelf as the oracle). */
static void site_file(struct kwalk_check *kc, const struct kw_event *ev, struct site *s)
{
	unsigned f = ev->stop_frame < KW_MAX_FRAMES ? ev->stop_frame : 0;
	int exact = f == 0 || ev->how[f] == KW_HOW_SIGNAL;
	uint64_t a = 0;
	const char *m = kw_pc_module(kc->kl, (int)ev->pid, ev->stop_pc, &a);

	snprintf(s->file, sizeof(s->file), "%s", m && m[0] == '/' ? m : "");
	s->lookup = exact || !a ? a : a - 1;
}

static void note_site(struct kwalk_check *kc, const struct kw_event *ev)
{
	char where[160];

	where_of(kc, (int)ev->pid, ev->stop_pc, where, sizeof(where));
	for (int i = 0; i < kc->nsites; i++)
		if (kc->sites[i].status == ev->status && kc->sites[i].rule == ev->stop_rule &&
		    !strcmp(kc->sites[i].where, where)) {
			kc->sites[i].count++;
			return;
		}
	if (kc->nsites < (int)(sizeof(kc->sites) / sizeof(kc->sites[0]))) {
		struct site *s = &kc->sites[kc->nsites++];

		snprintf(s->where, sizeof(s->where), "%s", where);
		site_file(kc, ev, s);
		s->status = ev->status;
		s->why = ev->stop_why;
		s->rule = ev->stop_rule;
		s->count = 1;
	}
}

static void print_diff(struct kwalk_check *kc, const struct kw_event *ev, const struct dwunw_frame *lf, size_t ln, int lerr,
		       unsigned at)
{
	char w1[160], w2[160], rule[256], krule[160];

	if (kc->printed++ >= kc->opt.max_diffs)
		return;
	fprintf(stderr, "difference: event %llu pid %u tid %u: frame %u of %u (walker: %s) vs %zu (libdwunw: %s)\n",
		(unsigned long long)kc->events, ev->pid, ev->tid, at, ev->nframes, kw_status_name(ev->status), ln,
		dwunw_errname(lerr));
	for (unsigned i = at > 2 ? at - 2 : 0; i < at + 2 && (i < ev->nframes || i < ln); i++) {
		w1[0] = w2[0] = 0;
		if (i < ev->nframes)
			where_of(kc, (int)ev->pid, ev->pcs[i], w1, sizeof(w1));
		if (i < ln)
			where_of(kc, (int)ev->pid, lf[i].pc, w2, sizeof(w2));
		rule[0] = 0;
		if (i < ln)
			lib_rule(kc, &lf[i], i == 0 || (lf[i].flags & DWUNW_FRAME_EXACT_PC), rule, sizeof(rule));
		fprintf(stderr, "  #%-3u %s walker %-40s libdwunw %-40s rule %s\n", i, i == at ? "*" : " ",
			i < ev->nframes ? w1 : "-", i < ln ? w2 : "-", rule);
	}
	kw_rule_text(kc->kl, ev->stop_rule, krule, sizeof(krule));
	fprintf(stderr, "  walker stop: %s at pc 0x%llx addr 0x%llx rule %s\n", kw_status_name(ev->status),
		(unsigned long long)ev->stop_pc, (unsigned long long)ev->stop_addr, krule);
}

/*
 * Is pc in the process's [uprobes] page? A sample taken while a uretprobe's handlers run (the
 * thread is in the trampoline's syscall there; any tool's uretprobe on a library the target
 * uses, e.g. another memleak's on libc) has no unwind info at frame 0, for either path.
 */
static int in_uprobes_page(int pid, uint64_t pc)
{
	struct dwunw_map *m;
	size_t n;
	int yes = 0;

	if (pid <= 0 || dwunw_maps_load(pid, &m, &n))
		return 0;
	for (size_t i = 0; i < n && !yes; i++)
		yes = pc >= m[i].start && pc < m[i].end && !strcmp(m[i].path, "[uprobes]");
	free(m);
	return yes;
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct kwalk_check *kc = ctx;
	const struct kw_event *ev = data;
	const struct cap_record *rec;
	struct dwunw_frame lf[KC_LIB_FRAMES];
	struct dwunw_regs regs;
	size_t ln = KC_LIB_FRAMES;
	int lerr, patched = 0;
	unsigned n, k, eq = 1, at = 0;
	uint64_t t;

	if (size < offsetof(struct kw_event, snap) || ev->h.kind != KW_KIND_EVENT)
		return 0;
	kc->events++;
	n = ev->nframes;
	if (ev->status < KW_ST_MAX)
		kc->by_status[ev->status]++;
	kc->frames_walker += n;
	if (n > kc->max_frames)
		kc->max_frames = n;
	for (unsigned i = 0; i < n && i < KW_MAX_FRAMES; i++)
		if (ev->how[i] == KW_HOW_SIGNAL)
			kc->signal_frames++;
	if (n > 1 && KW_ST_COMPLETE(ev->status)) {
		const char *m0 = kw_pc_module(kc->kl, (int)ev->pid, ev->pcs[0], NULL);
		if (m0 && !strcmp(m0, "[vdso]"))
			kc->vdso_events++;
	}
	if (n >= 100)
		kc->deep_events++;
	if (ev->status == KW_ST_NO_MAPPING && ev->stop_frame == 0 && in_uprobes_page((int)ev->pid, ev->stop_pc))
		kc->uprobe_tramp++;
	{
		int seen = 0;
		for (int i = 0; i < kc->ntids; i++)
			seen |= kc->tids[i] == (int)ev->tid;
		if (!seen && kc->ntids < 64)
			kc->tids[kc->ntids++] = (int)ev->tid;
	}
	t = now_ns();
	if (kw_wants_reload(ev->status) &&
	    (t - kc->last_reload_ns > 20000000ull || (kc->opt.stop_unknown && ev->status != KW_ST_NO_TABLE))) {
		kc->last_reload_ns = t;
		int e = kw_load_pid(kc->kl, (int)ev->pid);
		if (e == 0)
			dwunw_maps_refresh(&kc->ctx, (int)ev->pid);
		if (getenv("KC_DEBUG"))
			fprintf(stderr, "reload %u: %d (status %s)\n", ev->pid, e, kw_status_name(ev->status));
		if (kc->opt.stop_unknown)
			kill((pid_t)ev->pid, SIGCONT);
	}
	if (kc->opt.verbose && (!KW_ST_COMPLETE(ev->status) || ev->status == KW_ST_NO_CODE)) {
		char w[160];
		fprintf(stderr, "fallback: event %llu pid %u: %s after %u frames:", (unsigned long long)kc->events,
			ev->pid, kw_status_name(ev->status), n);
		for (unsigned i = 0; i < n && i < KW_MAX_FRAMES; i++) {
			where_of(kc, (int)ev->pid, ev->pcs[i], w, sizeof(w));
			fprintf(stderr, " %s", w);
		}
		fprintf(stderr, "\n");
	}
	if (!(ev->flags & KW_EV_SNAPSHOT)) {
		kc->no_lib++;
		return 0;
	}
	rec = dwunw_cap_prepare(&ev->snap, size - offsetof(struct kw_event, snap), &kc->buf, &kc->buf_size, &patched);
	if (!rec) {
		kc->no_lib++;
		return 0;
	}
	dwunw_cap_to_regs(rec, &regs);
	lerr = dwunw_capture(&kc->ctx, &regs, lf, &ln);
	kc->frames_lib += ln;

	k = n < ln ? n : (unsigned)ln;
	for (unsigned i = 0; i < k; i++)
		if (ev->pcs[i] != lf[i].pc) {
			eq = 0;
			at = i;
			break;
		}
	/* Whole stacks: identical only when both end at the same frame (or the walker at its depth
	 * limit). Equal as far as the shorter goes is counted by its short side, never as identical. */
	if (eq) {
		if (KW_ST_COMPLETE(ev->status)) {
			kc->complete++;
			if (n == ln || (ev->status == KW_ST_DEPTH && ln >= n)) {
				kc->identical++;
			} else if (ln < n && lerr != DWUNW_OK) {
				kc->snapshot_short++; /* libdwunw stopped with an error; the walker read on */
			} else {
				eq = 0;
				at = k;
			}
		} else if (n == ln) {
			kc->identical++;
			kc->fallback++;
			note_site(kc, ev);
		} else if (n < ln) {
			kc->kernel_short++; /* the walker stopped first: the fallback by design */
			kc->fallback++;
			note_site(kc, ev);
		} else if (lerr != DWUNW_OK) {
			kc->snapshot_short++;
			kc->fallback++;
			note_site(kc, ev);
		} else {
			eq = 0;
			at = k;
		}
	}
	if (!eq) {
		kc->differences++;
		print_diff(kc, ev, lf, ln, lerr, at);
	}
	/* What a tool's consumer (kw_event_stack) makes of this event: the walker's pcs when the walk
	 * completed, else libdwunw's unwinding of the snapshot carried along. */
	{
		uint64_t hp[KC_LIB_FRAMES];
		size_t hn = KC_LIB_FRAMES;
		int from = kw_event_stack(NULL, &kc->ctx, data, size, hp, &hn, &kc->hs);
		int ok = from > 0;

		if (from == KW_FROM_KERNEL) {
			kc->hybrid_kernel++;
			ok = hn == n;
			for (size_t i = 0; ok && i < hn; i++)
				ok = hp[i] == ev->pcs[i];
		} else if (from == KW_FROM_SNAPSHOT) {
			kc->hybrid_snapshot++;
			ok = hn == ln;
			for (size_t i = 0; ok && i < hn; i++)
				ok = hp[i] == lf[i].pc;
		}
		if (!ok)
			kc->hybrid_mismatch++;
	}
	dwunw_module_cache_release(&kc->ctx, lf, ln);
	return 0;
}

/* ---- Attaching ---------------------------------------------------------------------------- */

static int perf_open(int pid, int cpu, unsigned freq)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(a),
		.freq = 1,
		.sample_freq = freq,
	};

	/* the target only (inherited by its threads): run_cnt then counts its samples alone */
	a.inherit = 1;
	return (int)syscall(__NR_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* --floor's programs, by number (kwalk_check.bpf.c says what each times) */
static struct bpf_program *floor_prog(struct kwalk_check_bpf *skel, int k)
{
	struct bpf_program *p[KC_FLOOR_PROGS] = {
		skel->progs.kc_floor0, skel->progs.kc_floor1, skel->progs.kc_floor2, skel->progs.kc_floor3,
		skel->progs.kc_floor4, skel->progs.kc_floor5, skel->progs.kc_floor6, skel->progs.kc_floor7,
		skel->progs.kc_floor8, skel->progs.kc_floor9, skel->progs.kc_floor10,
	};

	return p[k];
}

struct links {
	struct bpf_link *l[(6 + KC_FLOOR_PROGS) * 256 + 5 * KC_MAX_UPROBES];
	int n;
	int fds[(6 + KC_FLOOR_PROGS) * 256];
	int nfds;
};

static int attach_all(struct kwalk_check *kc, struct kwalk_check_bpf *skel, int pid, struct links *L)
{
	/* the peer's programs last: --no-peer attaches the first three */
	struct bpf_program *perf_progs[5] = { skel->progs.kc_perf, skel->progs.kc_bench_perf, skel->progs.kc_bench1_perf,
					      skel->progs.kc_peer_perf, skel->progs.kc_peer1_perf };
	struct bpf_program *up_progs[5] = { skel->progs.kc_uprobe, skel->progs.kc_bench_uprobe, skel->progs.kc_bench1_uprobe,
					    skel->progs.kc_peer_uprobe, skel->progs.kc_peer1_uprobe };
	int nprogs = kc->opt.peer ? 5 : 3, ncpu = libbpf_num_possible_cpus();

	if (!kc->opt.no_perf) {
		for (int cpu = 0; cpu < ncpu && cpu < 256; cpu++) {
			for (int p = 0; p < nprogs; p++) {
				int fd = perf_open(pid, cpu, kc->opt.freq);
				struct bpf_link *lk;

				if (fd < 0) {
					if (errno == ENODEV)
						break; /* offline CPU */
					fprintf(stderr, "kwalk-check: perf_event_open: %s\n", strerror(errno));
					return -1;
				}
				L->fds[L->nfds++] = fd;
				lk = bpf_program__attach_perf_event(perf_progs[p], fd);
				if (!lk) {
					fprintf(stderr, "kwalk-check: attach perf event: %s\n", strerror(errno));
					return -1;
				}
				L->l[L->n++] = lk;
			}
		}
	}
	for (int cpu = 0; kc->opt.micro && !kc->opt.no_perf && cpu < ncpu && cpu < 256; cpu++) {
		int fd = perf_open(pid, cpu, kc->opt.freq);
		struct bpf_link *lk;

		if (fd < 0)
			break;
		L->fds[L->nfds++] = fd;
		lk = bpf_program__attach_perf_event(skel->progs.kc_micro_perf, fd);
		if (!lk) {
			fprintf(stderr, "kwalk-check: attach perf event: %s\n", strerror(errno));
			return -1;
		}
		L->l[L->n++] = lk;
	}
	for (int cpu = 0; kc->opt.floor_n && !kc->opt.no_perf && cpu < ncpu && cpu < 256; cpu++) {
		for (int p = 0; p < KC_FLOOR_PROGS; p++) {
			int fd = perf_open(pid, cpu, kc->opt.freq);
			struct bpf_link *lk;

			if (fd < 0)
				break;
			L->fds[L->nfds++] = fd;
			lk = bpf_program__attach_perf_event(floor_prog(skel, p), fd);
			if (!lk) {
				fprintf(stderr, "kwalk-check: attach perf event: %s\n", strerror(errno));
				return -1;
			}
			L->l[L->n++] = lk;
		}
	}
	for (int i = 0; i < kc->opt.nuprobes; i++) {
		char path[512], *sym;

		snprintf(path, sizeof(path), "%s", kc->opt.uprobes[i]);
		sym = strrchr(path, ':');
		*sym++ = 0;
		for (int p = 0; p < nprogs; p++) {
			/* SYMBOL, or +OFFSET: a file offset (a PLT entry has no symbol) */
			LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = sym[0] == '+' ? NULL : sym);
			size_t off = sym[0] == '+' ? strtoul(sym + 1, NULL, 0) : 0;
			struct bpf_link *lk = bpf_program__attach_uprobe_opts(up_progs[p], pid, path, off, &uo);

			if (!lk) {
				fprintf(stderr, "kwalk-check: uprobe %s:%s: %s\n", path, sym, strerror(errno));
				return -1;
			}
			L->l[L->n++] = lk;
		}
	}
	return 0;
}

/* ---- Figures ------------------------------------------------------------------------------ */

struct prog_fig {
	uint64_t run_ns, run_cnt;
	uint32_t insns;
};

static void prog_fig(struct bpf_program *p, struct prog_fig *f)
{
	struct bpf_prog_info info = {};
	uint32_t len = sizeof(info);

	if (!bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len)) {
		f->run_ns += info.run_time_ns;
		f->run_cnt += info.run_cnt;
		if (info.verified_insns > f->insns)
			f->insns = info.verified_insns;
	}
}

static void counters(struct bpf_object *obj, uint64_t out[KW_C_MAX])
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "kw_counters"));
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc((size_t)ncpu * KW_C_MAX, sizeof(*v)); /* one value per CPU: every counter */
	uint32_t zero = 0;

	memset(out, 0, sizeof(uint64_t) * KW_C_MAX);
	if (v && !bpf_map_lookup_elem(fd, &zero, v))
		for (int c = 0; c < ncpu; c++)
			for (uint32_t k = 0; k < KW_C_MAX; k++)
				out[k] += v[(size_t)c * KW_C_MAX + k];
	free(v);
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* --floor's figures: ns per sample of each program, and what one operation costs. */
static void print_floor(const struct prog_fig *f, unsigned n, unsigned chunk, uint64_t faults, int json)
{
	static const char *const name[KC_FLOOR_PROGS] = {
		"entry_ns", "loop_iter_ns", "read_user_8_ns", "read_user_16_ns", "hash_lookup_ns",
		"array_lookup_ns", "percpu_lookup_ns", "cold_line_ns", "warm_line_ns", "hot_line_ns", "chunk_read_ns",
	};
	double per[KC_FLOOR_PROGS];
	double t[KC_FLOOR_PROGS];

	for (int k = 0; k < KC_FLOOR_PROGS; k++)
		t[k] = ratio((double)f[k].run_ns, (double)f[k].run_cnt);
	per[0] = t[0];
	per[1] = (t[1] - t[0]) / n;
	for (int k = 2; k < 10; k++)
		per[k] = (t[k] - t[1]) / n;
	per[10] = t[10] - t[0];
	if (json) {
		printf(",\"floor\":{\"n\":%u,\"chunk_bytes\":%u,\"samples\":%llu,\"faults\":%llu", n, chunk,
		       (unsigned long long)f[0].run_cnt, (unsigned long long)faults);
		for (int k = 0; k < KC_FLOOR_PROGS; k++)
			printf(",\"%s\":%.1f", name[k], per[k]);
		printf("}");
		return;
	}
	printf("floor (%llu samples, %u per loop, %llu faults):", (unsigned long long)f[0].run_cnt, n,
	       (unsigned long long)faults);
	for (int k = 0; k < KC_FLOOR_PROGS; k++)
		printf(" %s %.1f", name[k], per[k]);
	printf("\n");
}

int main(int argc, char **argv)
{
	static const struct argp argp = { options, parse_arg, "-- COMMAND [ARGS...]",
		"Differential test and figures of the in-kernel DWARF walker", NULL, NULL, NULL };
	struct dwunw_config cfg = { .size = sizeof(cfg), .cache_slots = 64,
				    .flags = DWUNW_CFG_NO_REMOTE_READS | DWUNW_CFG_NO_DEBUG_FILES };
	struct kw_opts ko = {};
	struct kwalk_check_bpf *skel = NULL;
	struct dwunw_cap_reader *rd = NULL;
	static struct links L;
	struct prog_fig main_f = {}, bench_f = {}, peer_f = {}, bench1_f = {}, peer1_f = {}, micro_f = {};
	struct prog_fig floor_f[KC_FLOOR_PROGS] = {};
	struct kw_stats ks;
	uint64_t c[KW_C_MAX], t0;
	int go[2], stats_fd, status = 0, exited = 0, rc = 1;
	pid_t pid;
	/* the state (large: its sites and scratch), not on the stack */
	static struct kwalk_check ctx = {
		.opt = { .freq = 997, .duration = 10, .frames = KW_MAX_FRAMES, .peer = 1, .max_diffs = 20 },
	};
	struct kwalk_check *kc = &ctx;

	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, kc))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (pipe(go))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		char b;

		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(127);
		close(go[0]);
		if (kc->opt.json)
			dup2(open("/dev/null", O_WRONLY), STDOUT_FILENO);
		execvp(kc->opt.cmd[0], kc->opt.cmd);
		fprintf(stderr, "kwalk-check: %s: %s\n", kc->opt.cmd[0], strerror(errno));
		_exit(127);
	}
	close(go[0]);
	kc->pid = pid;

	skel = kwalk_check_bpf__open();
	if (!skel) {
		fprintf(stderr, "kwalk-check: open: %s\n", strerror(errno));
		goto out;
	}
	skel->rodata->target_tgid = (uint32_t)pid;
	skel->rodata->always_snapshot = 1;
	skel->rodata->stop_unknown = (uint32_t)kc->opt.stop_unknown;
	skel->rodata->kw_max_frames = kc->opt.frames;
	skel->rodata->cap_stack_bytes = KC_WINDOW;
	ko.budget = kc->opt.budget;
	ko.rows = kc->opt.rows;
	ko.peer = kc->opt.peer;
	if (dwunw_cap_size_maps(skel->obj, 0, 32u << 20) || kw_size_maps(skel->obj, &ko)) {
		fprintf(stderr, "kwalk-check: sizing maps failed\n");
		goto out;
	}
	if (getenv("KC_CHUNK")) /* the walker's stack chunk (bytes), for measuring */
		skel->rodata->kw_chunk = (uint32_t)strtoul(getenv("KC_CHUNK"), NULL, 0);
	skel->rodata->micro_op = kc->opt.micro_op;
	skel->rodata->micro_size = kc->opt.micro_size;
	skel->rodata->micro_n = kc->opt.micro_n;
	if (!kc->opt.micro)
		bpf_program__set_autoload(skel->progs.kc_micro_perf, false);
	skel->rodata->floor_n = kc->opt.floor_n;
	for (int k = 0; k < KC_FLOOR_PROGS && !kc->opt.floor_n; k++)
		bpf_program__set_autoload(floor_prog(skel, k), false);
	if (kc->opt.floor_n) {
		bpf_map__set_max_entries(skel->maps.kc_floor_mem, 1u << 20); /* 8 MiB: beyond L2 */
		skel->rodata->floor_lines = (1u << 20) / 8;
	}
	if (!kc->opt.peer) {
		bpf_program__set_autoload(skel->progs.kc_peer_perf, false);
		bpf_program__set_autoload(skel->progs.kc_peer_uprobe, false);
		bpf_program__set_autoload(skel->progs.kc_peer1_perf, false);
		bpf_program__set_autoload(skel->progs.kc_peer1_uprobe, false);
	}
	if (kwalk_check_bpf__load(skel)) {
		fprintf(stderr, "kwalk-check: load: %s\n", strerror(errno));
		goto out;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	kc->kl = kw_loader_new(skel->obj, &ko);
	if (!kc->kl || dwunw_init(&kc->ctx, &cfg) != DWUNW_OK) {
		fprintf(stderr, "kwalk-check: loader/libdwunw init failed\n");
		goto out;
	}
	if (kc->opt.preload)
		kw_preload_command(kc->kl, kc->opt.cmd[0]);
	rd = dwunw_cap_reader_new(skel->obj, 0, 0, on_record, kc);
	if (!rd || attach_all(kc, skel, pid, &L))
		goto out;
	if (write(go[1], "g", 1) != 1)
		goto out;
	close(go[1]);
	t0 = now_ns();
	for (;;) {
		dwunw_cap_reader_poll(rd, 20);
		/* Every stop's event was handled in the poll (tables loaded, then SIGCONT); continue
		 * again anyway: a stop delivered after its SIGCONT (the signal is sent from the BPF
		 * program asynchronously) must not hang the run. */
		if (kc->opt.stop_unknown)
			kill(pid, SIGCONT);
		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		if (exited)
			break;
		if (now_ns() - t0 > (uint64_t)(kc->opt.duration * 1e9)) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			exited = 2;
			break;
		}
	}
	for (int i = 0; i < L.n; i++)
		bpf_link__destroy(L.l[i]);
	L.n = 0;
	while (dwunw_cap_reader_consume(rd) > 0)
		;
	prog_fig(skel->progs.kc_perf, &main_f);
	prog_fig(skel->progs.kc_uprobe, &main_f);
	prog_fig(skel->progs.kc_bench_perf, &bench_f);
	prog_fig(skel->progs.kc_bench_uprobe, &bench_f);
	prog_fig(skel->progs.kc_bench1_perf, &bench1_f);
	prog_fig(skel->progs.kc_bench1_uprobe, &bench1_f);
	if (kc->opt.peer) {
		prog_fig(skel->progs.kc_peer_perf, &peer_f);
		prog_fig(skel->progs.kc_peer_uprobe, &peer_f);
		prog_fig(skel->progs.kc_peer1_perf, &peer1_f);
		prog_fig(skel->progs.kc_peer1_uprobe, &peer1_f);
	}
	if (kc->opt.micro)
		prog_fig(skel->progs.kc_micro_perf, &micro_f);
	for (int k = 0; k < KC_FLOOR_PROGS && kc->opt.floor_n; k++)
		prog_fig(floor_prog(skel, k), &floor_f[k]);
	counters(skel->obj, c);
	kw_get_stats(kc->kl, &ks);
	{
		double ident_pct = 100.0 * ratio((double)kc->identical, (double)kc->events);
		double fb_pct = 100.0 * ratio((double)kc->fallback, (double)kc->events);
		double bpr = ratio((double)ks.table_bytes, (double)ks.src_rows);
		double krow = ratio((double)(ks.rows * 4 + ks.blocks * 4), (double)ks.src_rows);
		double b_fps = ratio((double)c[KW_C_BENCH_FRAMES], (double)c[KW_C_BENCH_SAMPLES]);
		double p_fps = ratio((double)c[KW_C_PEER_FRAMES], (double)c[KW_C_PEER_SAMPLES]);
		/* the cost of one frame more: (full walk - one-frame walk) / (frames - 1), per sample */
		double b_first = ratio((double)bench1_f.run_ns, (double)bench1_f.run_cnt);
		double p_first = ratio((double)peer1_f.run_ns, (double)peer1_f.run_cnt);
		double b_extra = b_fps > 1 ? (ratio((double)bench_f.run_ns, (double)bench_f.run_cnt) - b_first) / (b_fps - 1) : 0;
		double p_extra = p_fps > 1 ? (ratio((double)peer_f.run_ns, (double)peer_f.run_cnt) - p_first) / (p_fps - 1) : 0;
		unsigned long long lost = c[KW_C_LOST];

		if (kc->opt.json) {
			printf("{\"command\":\"%s\",\"exit\":%d,\"events\":%llu,\"identical\":%llu,\"identical_pct\":%.3f,"
			       "\"differences\":%llu,\"fallback\":%llu,\"complete\":%llu,\"snapshot_short\":%llu,"
			       "\"kernel_short\":%llu,\"lost\":%llu,"
			       "\"no_snapshot\":%llu,\"signal_frames\":%llu,\"vdso_events\":%llu,\"deep_events\":%llu,"
			       "\"max_frames\":%llu,\"threads\":%d,\"hybrid_kernel\":%llu,\"hybrid_snapshot\":%llu,"
			       "\"hybrid_mismatch\":%llu,\"uprobe_tramp\":%llu,\"by_status\":{",
			       kc->opt.cmd[0], exited == 2 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			       (unsigned long long)kc->events, (unsigned long long)kc->identical, ident_pct,
			       (unsigned long long)kc->differences, (unsigned long long)kc->fallback,
			       (unsigned long long)kc->complete, (unsigned long long)kc->snapshot_short,
			       (unsigned long long)kc->kernel_short, lost,
			       (unsigned long long)kc->no_lib, (unsigned long long)kc->signal_frames,
			       (unsigned long long)kc->vdso_events, (unsigned long long)kc->deep_events,
			       (unsigned long long)kc->max_frames, kc->ntids, (unsigned long long)kc->hybrid_kernel,
			       (unsigned long long)kc->hybrid_snapshot, (unsigned long long)kc->hybrid_mismatch,
			       (unsigned long long)kc->uprobe_tramp);
			for (int i = 0, first = 1; i < KW_ST_MAX; i++)
				if (kc->by_status[i]) {
					printf("%s\"%s\":%llu", first ? "" : ",", kw_status_name(i),
					       (unsigned long long)kc->by_status[i]);
					first = 0;
				}
			printf("},\"fallback_sites\":[");
			for (int i = 0; i < kc->nsites; i++) {
				char r[160];
				kw_rule_text(kc->kl, kc->sites[i].rule, r, sizeof(r));
				printf("%s{\"where\":\"%s\",\"status\":\"%s\",\"why\":\"%s\",\"rule\":\"%s\",\"count\":%llu,"
				       "\"file\":\"%s\",\"lookup\":\"0x%llx\"}",
				       i ? "," : "", kc->sites[i].where, kw_status_name(kc->sites[i].status),
				       kw_why_name(kc->sites[i].why), r, (unsigned long long)kc->sites[i].count,
				       kc->sites[i].file, (unsigned long long)kc->sites[i].lookup);
			}
			printf("],\"kernel\":{\"ns_per_sample\":%.1f,\"ns_per_frame\":%.1f,\"frames_per_sample\":%.2f,"
			       "\"bytes_per_row\":%.3f,\"row_index_bytes_per_row\":%.3f,\"map_bytes\":%llu,\"verifier_insns\":%u,"
			       "\"fallback_pct\":%.3f,\"samples\":%llu,\"src_rows\":%llu,\"rows\":%llu,\"blocks\":%llu,"
			       "\"rules\":%llu,\"unsupported_rules\":%llu,\"modules\":%llu,\"evictions\":%llu,"
			       "\"skipped_modules\":%llu,\"emit_ns_per_sample\":%.1f,\"emit_verifier_insns\":%u,"
			       "\"ns_first_frame\":%.1f,\"ns_per_extra_frame\":%.1f,\"cache_hit_pct\":%.1f,"
			       "\"chunk_reads_per_sample\":%.2f}",
			       ratio((double)bench_f.run_ns, (double)bench_f.run_cnt),
			       ratio((double)bench_f.run_ns, (double)c[KW_C_BENCH_FRAMES]), b_fps, bpr, krow,
			       (unsigned long long)ks.map_bytes, bench_f.insns, fb_pct,
			       (unsigned long long)c[KW_C_BENCH_SAMPLES], (unsigned long long)ks.src_rows,
			       (unsigned long long)ks.rows, (unsigned long long)ks.blocks, (unsigned long long)ks.rules,
			       (unsigned long long)ks.unsup_rules, (unsigned long long)ks.modules,
			       (unsigned long long)ks.evictions, (unsigned long long)ks.skipped,
			       ratio((double)main_f.run_ns, (double)main_f.run_cnt), main_f.insns, b_first, b_extra,
			       100.0 * ratio((double)c[KW_C_CACHE_HITS], (double)c[KW_C_BENCH_FRAMES]),
			       ratio((double)c[KW_C_CHUNK_READS], (double)c[KW_C_BENCH_SAMPLES]));
			if (kc->opt.peer)
				printf(",\"peer\":{\"ns_per_sample\":%.1f,\"ns_per_frame\":%.1f,\"frames_per_sample\":%.2f,"
				       "\"bytes_per_row\":%.3f,\"verifier_insns\":%u,\"fallback_pct\":%.3f,\"samples\":%llu,"
				       "\"ns_first_frame\":%.1f,\"ns_per_extra_frame\":%.1f}",
				       ratio((double)peer_f.run_ns, (double)peer_f.run_cnt),
				       ratio((double)peer_f.run_ns, (double)c[KW_C_PEER_FRAMES]), p_fps,
				       ratio((double)(ks.rows * 8) + (double)ks.rules * sizeof(struct kw_rule), (double)ks.src_rows),
				       peer_f.insns, 100.0 * ratio((double)c[KW_C_PEER_FALLBACK], (double)c[KW_C_PEER_SAMPLES]),
				       (unsigned long long)c[KW_C_PEER_SAMPLES], p_first, p_extra);
			if (kc->opt.micro)
				printf(",\"micro\":{\"op\":%u,\"size\":%u,\"n\":%u,\"ns_per_sample\":%.1f,\"samples\":%llu,"
				       "\"faults\":%llu}", kc->opt.micro_op, kc->opt.micro_size, kc->opt.micro_n,
				       ratio((double)micro_f.run_ns, (double)micro_f.run_cnt), (unsigned long long)micro_f.run_cnt,
				       (unsigned long long)skel->bss->kc_micro_faults);
			if (kc->opt.floor_n)
				print_floor(floor_f, kc->opt.floor_n, skel->rodata->kw_chunk, skel->bss->kc_floor_faults, 1);
			printf(",\"bpf_stats\":%s}\n", stats_fd >= 0 ? "true" : "false");
		} else {
			printf("%s: %llu events, %llu identical (%.3f%%), %llu differences, %llu fell back (%.3f%%), "
			       "%llu short on the walker's side, %llu on libdwunw's, %llu lost\n", kc->opt.cmd[0],
			       (unsigned long long)kc->events, (unsigned long long)kc->identical, ident_pct,
			       (unsigned long long)kc->differences, (unsigned long long)kc->fallback, fb_pct,
			       (unsigned long long)kc->kernel_short, (unsigned long long)kc->snapshot_short, lost);
			printf("walker: %.0f ns/sample, %.1f ns/frame (first %.0f, then %.1f each), %.1f frames/sample, "
			       "%.2f B/row, %llu map bytes, %u insns verified\n",
			       ratio((double)bench_f.run_ns, (double)bench_f.run_cnt),
			       ratio((double)bench_f.run_ns, (double)c[KW_C_BENCH_FRAMES]), b_first, b_extra, b_fps, bpr,
			       (unsigned long long)ks.map_bytes, bench_f.insns);
			printf("walker: rule cache hits %.1f %% of frames, %.2f stack chunks read per sample\n",
			       100.0 * ratio((double)c[KW_C_CACHE_HITS], (double)c[KW_C_BENCH_FRAMES]),
			       ratio((double)c[KW_C_CHUNK_READS], (double)c[KW_C_BENCH_SAMPLES]));
			if (kc->opt.peer)
				printf("peer (binary search): %.0f ns/sample, %.1f ns/frame (first %.0f, then %.1f each), "
				       "%.1f frames/sample, %u insns\n", ratio((double)peer_f.run_ns, (double)peer_f.run_cnt),
				       ratio((double)peer_f.run_ns, (double)c[KW_C_PEER_FRAMES]), p_first, p_extra, p_fps,
				       peer_f.insns);
			if (kc->opt.micro)
				printf("micro op %u size %u x%u: %.0f ns/sample over %llu samples, %llu faults\n",
				       kc->opt.micro_op, kc->opt.micro_size, kc->opt.micro_n,
				       ratio((double)micro_f.run_ns, (double)micro_f.run_cnt),
				       (unsigned long long)micro_f.run_cnt, (unsigned long long)skel->bss->kc_micro_faults);
			if (kc->opt.floor_n)
				print_floor(floor_f, kc->opt.floor_n, skel->rodata->kw_chunk, skel->bss->kc_floor_faults, 0);
			for (int i = 0; i < kc->nsites; i++) {
				char r[160];
				kw_rule_text(kc->kl, kc->sites[i].rule, r, sizeof(r));
				printf("fallback: %-48s %-17s %s x%llu\n", kc->sites[i].where,
				       kw_status_name(kc->sites[i].status), r, (unsigned long long)kc->sites[i].count);
			}
		}
	}
	rc = kc->differences ? 3 : 0;
out:
	if (!exited && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	for (int i = 0; i < L.n; i++)
		bpf_link__destroy(L.l[i]);
	for (int i = 0; i < L.nfds; i++)
		close(L.fds[i]);
	dwunw_cap_reader_free(rd);
	kw_loader_free(kc->kl);
	if (kc->kl)
		dwunw_shutdown(&kc->ctx);
	kwalk_check_bpf__destroy(skel);
	free(kc->buf);
	free(kc->hs.buf);
	return rc;
}
