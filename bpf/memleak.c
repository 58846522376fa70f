// SPDX-License-Identifier: GPL-2.0-only
/*
 * memleak: outstanding allocations of a process grouped by stack, compatible in flags and output
 * with libbpf-tools memleak (bcc v0.32.0), with exact stacks on code without frame pointers.
 *
 * --unwind=dwarf (default with HAVE_DWUNW): each recorded allocation's entry probe sends a
 * snapshot of the registers and of the stack window (capture.bpf.h); a drain thread copies the
 * records into a bounded queue (cap_pump.h), and the main thread unwinds them with libdwunw,
 * interns the stack (hash of its pcs and stop reason), symbolizes each new stack once,
 * remembers event id -> stack until the allocation is gone, and prints the reports. Only the
 * main thread touches the unwinder, the stack store and the event table.
 * --unwind=fp: bpf_get_stackid() at the return probe, as upstream.
 * --unwind=kernel (x86_64, arm64): the entry probe walks the stack in BPF (kwalk.bpf.h) from
 * tables loaded here; a walk that stops short carries the dwarf-mode snapshot along.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#ifdef HAVE_DWUNW
#include "dwunw.h"
#endif
#include "cap_pump.h"
#include "capture_user.h"
#include "memleak.h"
#include "memleak_allocs.h"
#include "memleak_mem.h"
#include "uprobe_attach.h"
#include "uprobe_multi.h"
#include "memleak.skel.h"
#include "frames.h"
#include "intern.h"
#include "module_warn.h"
#include "preflight.h"
#include "report_fmt.h"
#include "stack_store.h"
#include "maps_view.h"
#include "syms.h"
#include "target.h"
#include "tool_opts.h"
#include "tool_signals.h"
#include "tool_util.h"
#ifdef HAVE_KWALK
#include "frames_kwalk.h"
#include "kwalk_preload.h"
#include "kwalk_track_user.h"
#include "kwalk_user.h"
#endif

/* ---- Options ---------------------------------------------------------------------------- */

static struct env {
	pid_t pid;
	const char *command;
	char **prog_argv;      /* -- PROG ARGS... */
	bool trace;
	bool show_allocs;
	bool combined;
	uint64_t older_ms;
	uint32_t sample_rate;
	size_t top;
	bool top_given;        /* --folded: every stack unless -T */
	bool weight_allocs;    /* --folded: allocations instead of bytes */
	uint32_t max_frames;
	uint64_t min_size, max_size;
	const char *obj;
	const char *sym_prefix;
	bool verbose;
	int interval;
	long count;            /* reports, -1 = forever */
	int unwind;            /* enum ml_unwind */
	uint32_t stack_size;
	bool folded, json;
	bool nested;
	bool perfbuf;
	size_t buffer_size;    /* 0 = default */
	size_t max_stacks;
	bool fp_ids;
	uint64_t expected_rate; /* allocator calls/s: sizes the ring buffer */
	bool probe_at_entry;    /* no cheap probe places */
	bool no_multi;          /* one link per probe even where multi-uprobe links exist */
	uint64_t table_budget;  /* --table-budget (bytes; 0: the walker's default) */
} env = {
	.older_ms = 500,
	.sample_rate = 1,
	.top = 10,
	.max_frames = TOOL_MAX_FRAMES_DEFAULT,
	.max_size = UINT64_MAX,
	.obj = "libc.so.6",
	.sym_prefix = "",
	.interval = 5,
	.count = -1,
#ifdef HAVE_DWUNW
	.unwind = ML_UNWIND_DWARF,
#else
	.unwind = ML_UNWIND_FP,
#endif
	.stack_size = CAP_DEF_STACK,
	.max_stacks = 65536,
	.fp_ids = true,
	.expected_rate = 100000,
};

enum {
	OPT_UNWIND = 256,
	OPT_STACK_SIZE,
	OPT_FOLDED,
	OPT_JSON,
	OPT_NESTED,
	OPT_PERFBUF,
	OPT_BUFFER_SIZE,
	OPT_MAX_STACKS,
	OPT_NO_FP_FALLBACK,
	OPT_EXPECTED_RATE,
	OPT_PROBE_AT_ENTRY,
	OPT_MAX_FRAMES,
	OPT_WEIGHT,
	OPT_NO_UPROBE_MULTI,
	OPT_TABLE_BUDGET,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "trace", no_argument, NULL, 't' },
	{ "show-allocs", no_argument, NULL, 'a' },
	{ "older", required_argument, NULL, 'o' },
	{ "command", required_argument, NULL, 'c' },
	{ "combined-only", no_argument, NULL, 'C' },
	{ "wa-missing-free", no_argument, NULL, 'F' },
	{ "sample-rate", required_argument, NULL, 's' },
	{ "top", required_argument, NULL, 'T' },
	{ "min-size", required_argument, NULL, 'z' },
	{ "max-size", required_argument, NULL, 'Z' },
	{ "obj", required_argument, NULL, 'O' },
	{ "percpu", no_argument, NULL, 'P' },
	{ "symbols-prefix", required_argument, NULL, 'S' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "stack-size", required_argument, NULL, OPT_STACK_SIZE },
	{ "folded", no_argument, NULL, OPT_FOLDED },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "nested", no_argument, NULL, OPT_NESTED },
	{ "perf-buffer", no_argument, NULL, OPT_PERFBUF },
	{ "buffer-size", required_argument, NULL, OPT_BUFFER_SIZE },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "no-fp-fallback", no_argument, NULL, OPT_NO_FP_FALLBACK },
	{ "expected-rate", required_argument, NULL, OPT_EXPECTED_RATE },
	{ "probe-at-entry", no_argument, NULL, OPT_PROBE_AT_ENTRY },
	{ "max-frames", required_argument, NULL, OPT_MAX_FRAMES },
	{ "weight", required_argument, NULL, OPT_WEIGHT },
	{ "no-uprobe-multi", no_argument, NULL, OPT_NO_UPROBE_MULTI },
	{ "table-budget", required_argument, NULL, OPT_TABLE_BUDGET },
	{},
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: memleak [OPTION...] [INTERVAL [COUNT]] [-- PROG [ARG...]]\n"
"Trace outstanding memory allocations of a process, grouped by stack.\n"
"\n"
"  -p, --pid=PID             process to trace\n"
"  -c, --command=COMMAND     run COMMAND (through /bin/sh -c) and trace it and every\n"
"                            process it forks or execs, from their first instruction\n"
"  -- PROG [ARG...]          the same for PROG run directly (no shell)\n"
"  -t, --trace               print every allocation and free\n"
"  -a, --show-allocs         list the outstanding allocations of each stack\n"
"  -o, --older=AGE_MS        only allocations older than AGE_MS milliseconds (500)\n"
"  -C, --combined-only       per-stack totals only (no age filter)\n"
"  -s, --sample-rate=N       record 1 allocation out of N\n"
"  -T, --top=N               top N stacks by outstanding bytes (text, JSON: 10;\n"
"                            folded: every stack unless given)\n"
"  -z, --min-size=SIZE       ignore allocations smaller than SIZE\n"
"  -Z, --max-size=SIZE       ignore allocations larger than SIZE\n"
"  -O, --obj=OBJ             allocator object (libc.so.6)\n"
"  -S, --symbols-prefix=PFX  allocator symbol prefix (e.g. je_)\n"
"  -F, -P                    kernel-mode options: not supported in user-space mode\n"
"  -v, --verbose             libbpf and unwinder diagnostics\n"
"      --unwind=dwarf|fp|kernel\n"
"                            stack source (default %s); kernel: DWARF tables walked in\n"
"                            the BPF program, a walk that stops short falling back to\n"
"                            the dwarf path for that allocation (x86_64, arm64)\n"
"      --stack-size=BYTES    stack window copied per allocation (16384, max 65536;\n"
"                            kernel: per fallback)\n"
"      --table-budget=MIB    --unwind=kernel: memory for the tables' maps (64)\n"
"      --folded              folded stacks for flamegraph.pl: root;...;leaf WEIGHT, one\n"
"                            line per distinct stack (identical lines merged, weights\n"
"                            summed); WEIGHT is outstanding bytes\n"
"      --weight=allocations  --folded: WEIGHT is the number of outstanding allocations\n"
"      --max-frames=N        frames per stack (128, up to 65536); a stack cut there ends\n"
"                            with [unwind stopped: frame limit reached]\n"
"      --json                one JSON document per report (NDJSON)\n"
"      --nested              also record allocator calls made inside another one\n"
"                            (glibc's mmap inside a large malloc)\n"
"      --perf-buffer         use the perf buffer instead of the ring buffer\n"
"      --expected-rate=N     allocator calls per second to keep up with (100000): the\n"
"                            ring buffer holds 100 ms of them (16 MiB at 100000)\n"
"      --buffer-size=BYTES   ring buffer size (from --expected-rate), or perf buffer\n"
"                            per CPU (8 MiB)\n"
"      --max-stacks=N        distinct stacks kept in user space (65536)\n"
"      --probe-at-entry      probe allocators at their first byte; by default a probe\n"
"                            moves past leading test/cmp to the first instruction\n"
"                            the kernel emulates (x86_64; -v says where)\n"
"      --no-uprobe-multi     one uprobe link per probe, even where the kernel makes one\n"
"                            link for all (Linux 6.6+: attached and detached at once)\n"
"      --no-fp-fallback      dwarf mode: skip the per-event frame-pointer stack id\n"
"  -h, --help                this help\n"
"\n"
"INTERVAL: seconds between reports (5); COUNT: reports before exiting (forever).\n"
"Following a tree, stacks are grouped by process (comm (pid)). SIGINT, SIGTERM, SIGHUP:\n"
"last report, then exit 0; stdout closed: exit 0 at once. Exit status: see README.md.\n",
#ifdef HAVE_DWUNW
		"dwarf"
#else
		"fp; dwarf needs a build with libdwunw"
#endif
	);
}

#define usage_error tool_usage_error

/* A malformed number is a usage error: one line, "(see dwunw memleak --help)", exit 2. */
static uint64_t opt_u64(const char *s, const char *opt)
{
	return tool_opt_u64(s, opt, 0, UINT64_MAX);
}

static void parse_args(int argc, char **argv)
{
	int c, pos = 0;

	/* -- PROG ARGS: the program to run, not options */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			if (i + 1 < argc)
				env.prog_argv = &argv[i + 1];
			else
				usage_error("--: no program given");
			argc = i;
			break;
		}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:tao:c:CFs:T:z:Z:O:PS:vh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			uint64_t v = opt_u64(optarg, "-p");

			if (v == 0 || v > INT_MAX)
				usage_error("-p: not a process id: %s", optarg);
			env.pid = (pid_t)v;
			break;
		}
		case 't': env.trace = true; break;
		case 'a': env.show_allocs = true; break;
		case 'o': env.older_ms = opt_u64(optarg, "-o"); break;
		case 'c': env.command = optarg; break;
		case 'C': env.combined = true; break;
		case 'F':
		case 'P':
			fprintf(stderr, "memleak: -%c: not supported in user-space mode, ignored\n", c);
			break;
		case 's':
			env.sample_rate = (uint32_t)opt_u64(optarg, "-s");
			if (!env.sample_rate)
				usage_error("-s: invalid sample rate: %s", optarg);
			break;
		case 'T':
			env.top = opt_u64(optarg, "-T");
			env.top_given = true;
			break;
		case 'z': env.min_size = opt_u64(optarg, "-z"); break;
		case 'Z': env.max_size = opt_u64(optarg, "-Z"); break;
		case 'O': env.obj = optarg; break;
		case 'S': env.sym_prefix = optarg; break;
		case 'v': env.verbose = true; break;
		case 'h': usage(stdout); exit(0);
		case OPT_UNWIND:
			if (!strcmp(optarg, "dwarf")) {
#ifndef HAVE_DWUNW
				usage_error("--unwind=dwarf needs a build with libdwunw (HAVE_DWUNW); this build unwinds with frame pointers only");
#endif
				env.unwind = ML_UNWIND_DWARF;
			} else if (!strcmp(optarg, "fp")) {
				env.unwind = ML_UNWIND_FP;
			} else if (!strcmp(optarg, "kernel")) {
#ifndef HAVE_KWALK
				usage_error("--unwind=kernel needs a build with libdwunw on x86_64 or arm64 (the in-kernel walker)");
#endif
				env.unwind = ML_UNWIND_KERNEL;
			} else {
				usage_error("--unwind: expected dwarf, fp or kernel, got %s", optarg);
			}
			break;
		case OPT_STACK_SIZE: {
			uint64_t v = opt_u64(optarg, "--stack-size");

			if (v < 64 || v > CAP_MAX_STACK)
				usage_error("--stack-size: %s out of range (64 .. %d)", optarg, CAP_MAX_STACK);
			env.stack_size = (uint32_t)(v & ~7ull);
			break;
		}
		case OPT_TABLE_BUDGET:
			env.table_budget = tool_opt_u64(optarg, "--table-budget", 1, 4096) << 20;
			break;
		case OPT_FOLDED: env.folded = true; break;
		case OPT_JSON: env.json = true; break;
		case OPT_NESTED: env.nested = true; break;
		case OPT_PERFBUF: env.perfbuf = true; break;
		case OPT_BUFFER_SIZE: env.buffer_size = opt_u64(optarg, "--buffer-size"); break;
		case OPT_MAX_STACKS:
			env.max_stacks = opt_u64(optarg, "--max-stacks");
			if (env.max_stacks < 16 || env.max_stacks > (1u << 24))
				usage_error("--max-stacks: %s out of range (16 .. 16777216)", optarg);
			break;
		case OPT_NO_FP_FALLBACK: env.fp_ids = false; break;
		case OPT_PROBE_AT_ENTRY: env.probe_at_entry = true; break;
		case OPT_NO_UPROBE_MULTI: env.no_multi = true; break;
		case OPT_EXPECTED_RATE:
			env.expected_rate = tool_opt_u64(optarg, "--expected-rate", 1, 100000000);
			break;
		case OPT_MAX_FRAMES:
			env.max_frames = (uint32_t)tool_opt_u64(optarg, "--max-frames", 1,
								TOOL_MAX_FRAMES_LIMIT);
			break;
		case OPT_WEIGHT:
			if (!strcmp(optarg, "allocations"))
				env.weight_allocs = true;
			else if (strcmp(optarg, "bytes"))
				usage_error("--weight: expected bytes or allocations, got %s", optarg);
			break;
		default:
			tool_bad_option(c, argc, argv);
		}
	}
	for (int i = optind; i < argc; i++, pos++) {
		uint64_t v = opt_u64(argv[i], pos == 0 ? "interval" : "count");

		if (pos == 0) {
			if (!v || v > INT_MAX)
				usage_error("invalid interval: %s", argv[i]);
			env.interval = (int)v;
		} else if (pos == 1) {
			if (!v)
				usage_error("invalid count: %s", argv[i]);
			env.count = (long)v;
		} else {
			usage_error("unexpected argument: %s (a program to run goes after --)", argv[i]);
		}
	}
	if (env.folded && env.json)
		usage_error("--folded and --json exclude each other");
	if (!!env.pid + !!env.command + !!env.prog_argv > 1)
		usage_error("-p, -c and -- PROG exclude each other");
	if (env.min_size > env.max_size)
		usage_error("min size (%" PRIu64 ") is larger than max size (%" PRIu64 ")", env.min_size,
		    env.max_size);
	if (env.unwind == ML_UNWIND_KERNEL) {
		if (env.perfbuf)
			usage_error("--unwind=kernel sends its events on the ring buffer: drop --perf-buffer");
	} else if (env.table_budget) {
		usage_error("--table-budget is for --unwind=kernel");
	}
}

/* ---- Small helpers ---------------------------------------------------------------------------- */

/* Following a tree: the process of the stacks interned now (their address space), else 0. */
static uint32_t stack_pid;
static bool following;         /* -c, -- PROG: the command's process tree */

/* ---- Stacks ------------------------------------------------------------------------------------ */

/* Event id (dwarf mode) -> stack: memleak_allocs.c (ml_ev_*). */

/* ---- Symbolization --------------------------------------------------------------------------- */

static struct memleak_bpf *skel;
static pid_t target_pid;

static struct fp_cache fpc;

/* The stack of a bpf_get_stackid() id (optionally with a first frame put in front). */
static int64_t fp_stack(int64_t id, uint64_t first_pc, bool replace_first)
{
	/* following a tree: stack ids are shared by the processes, the cache is not */
	return fp_stack_of(stack_pid ? NULL : &fpc, bpf_map__fd(skel->maps.stack_traces),
			   stack_pid ? (pid_t)stack_pid : target_pid, stack_pid, id, first_pc,
			   replace_first);
}

/* ---- Records ----------------------------------------------------------------------------------- */

static struct unwind_stats stats;
static uint64_t trace_records; /* -t records received */
static uint64_t record_bytes;  /* bytes of all records received */

static uint64_t next_report_ns;

static const char *fn_names[ML_FN_NR] = {
	"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc", "posix_memalign",
	"memalign", "valloc", "pvalloc", "mmap", "free", "munmap",
};

static void on_trace(const struct ml_trace_rec *r)
{
	const char *fn = r->fn < ML_FN_NR ? fn_names[r->fn] : "?";

	if (env.json || env.folded)
		return;
	if (r->fn == ML_FN_FREE || r->fn == ML_FN_MUNMAP)
		printf("[%u] %s: free entered, address = %#llx, size = %llu\n", r->tid, fn,
		       (unsigned long long)r->addr, (unsigned long long)r->size);
	else
		printf("[%u] %s: alloc exited, size = %llu, result = %#llx\n", r->tid, fn,
		       (unsigned long long)r->size, (unsigned long long)r->addr);
}

#ifdef HAVE_DWUNW
static void on_snapshot(const void *data, size_t size)
{
	const struct cap_record *rec;
	uint32_t pid = 0;

	/* following a tree, each process is its own address space (stacks grouped by process) */
	if (following && size >= offsetof(struct cap_record, pid) + sizeof(pid))
		memcpy(&pid, (const char *)data + offsetof(struct cap_record, pid), sizeof(pid));
	stack_pid = pid;
	/* frame 0 (the allocator) is not shown */
	int64_t idx = frames_from_snapshot(data, size, 1, pid, &stats, &rec);

	if (idx == FRAMES_BAD) {
		stack_pid = 0;
		return;
	}
	if (idx == FRAMES_FALLBACK) {
		uint64_t ra = 0;

		if (rec->stack_size >= sizeof(ra))
			memcpy(&ra, rec->stack, sizeof(ra));
		idx = fp_stack(rec->aux, ra, true);
	}
	stack_pid = 0;
	ml_ev_put(rec->cookie, (uint32_t)idx);
}
#endif

#ifdef HAVE_KWALK
static struct kw_track kwt;
static struct kwalk_seen kws;

/* A walker event: its stack (the walker's, or the snapshot's it carries) under its event id. */
static void on_kwalk(const void *data, size_t size)
{
	struct kwalk_info ki;
	uint32_t pid = 0;

	if (following && size >= offsetof(struct kw_event, snap))
		memcpy(&pid, (const char *)data + offsetof(struct kw_event, pid), sizeof(pid));
	stack_pid = pid;
	/* frame 0 (the allocator) is not shown */
	int64_t idx = frames_from_kwalk(data, size, 1, pid, &stats, &kws, &ki);

	stack_pid = 0;
	if (idx == FRAMES_BAD)
		return;
	if (kw_wants_reload(ki.status))
		kw_track_reload(&kwt, ki.pid, false);
	if (idx == FRAMES_NOTICE)
		return; /* the walk stopped short: the snapshot record that follows has the stack */
	if (idx == FRAMES_FALLBACK) {
		stack_pid = pid;
		idx = fp_stack(ki.aux, 0, false);
		stack_pid = 0;
	}
	ml_ev_put(ki.cookie, (uint32_t)idx);
}
#endif

static const char *unwind_name(void)
{
	return env.unwind == ML_UNWIND_KERNEL ? "kernel" : env.unwind == ML_UNWIND_DWARF ? "dwarf" : "fp";
}

/* --unwind=kernel: what the walker's events were made of, and the tables' memory */
static void kw_report(bool json)
{
#ifdef HAVE_KWALK
	struct kw_stats ks;
	uint64_t tc[KW_TC_MAX];
	double pct = kws.events ? 100.0 * (double)kws.snapshot / (double)kws.events : 0.0;
	bool c = false;

	if (!kwt.l)
		return;
	kw_get_stats(kwt.l, &ks);
	kw_track_counters(skel->obj, tc);
	if (json) {
		printf(",\"kernel_walk\":{\"events\":%" PRIu64 ",\"from_kernel\":%" PRIu64
		       ",\"fallback\":%" PRIu64 ",\"fallback_pct\":%.2f,\"bad\":%" PRIu64 ",\"by_status\":{",
		       kws.events, kws.kernel, kws.snapshot, pct, kws.bad);
		for (unsigned k = 0; k < KW_ST_MAX; k++)
			if (kws.status[k]) {
				printf("%s\"%s\":%" PRIu64, c ? "," : "", kw_status_name(k), kws.status[k]);
				c = true;
			}
		printf("},\"table_loads\":%" PRIu64 ",\"mmaps\":%" PRIu64 ",\"mmaps_lost\":%" PRIu64
		       ",\"exits\":%" PRIu64 ",\"map_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
		       ",\"modules\":%" PRIu64 ",\"evictions\":%" PRIu64 "}",
		       kwt.loads, kwt.mmaps, tc[KW_TC_LOST], kwt.exits, ks.map_bytes, ks.table_bytes,
		       ks.modules, ks.evictions);
		return;
	}
	printf("kernel walker: %" PRIu64 " events, %.1f%% fell back to the snapshot", kws.events, pct);
	for (unsigned k = KW_ST_NO_PROC; k < KW_ST_MAX; k++)
		if (kws.status[k]) {
			printf("%s%s %" PRIu64, c ? ", " : " (", kw_status_name(k), kws.status[k]);
			c = true;
		}
	printf("%s; tables %.1f MiB of %.1f MiB of maps, %" PRIu64 " modules\n", c ? ")" : "",
	       (double)ks.table_bytes / 1048576.0, (double)ks.map_bytes / 1048576.0, ks.modules);
#else
	(void)json;
#endif
}

static int on_record(void *ctx, const void *data, size_t size)
{
	const struct cap_rec_hdr *h = data;

	(void)ctx;
	if (size < sizeof(*h))
		return 0;
	record_bytes += size;
	if (h->kind == CAP_KIND_SNAPSHOT) {
#ifdef HAVE_DWUNW
		on_snapshot(data, size);
#endif
	} else if (h->kind == CAP_KIND_MAPEV) {
		maps_view_event(data, size);
#ifdef HAVE_KWALK
	} else if (h->kind == KW_KIND_EVENT) {
		on_kwalk(data, size);
	} else if (kw_track_record(&kwt, data, size)) {
		/* an executable mapping or an exit: tables loaded or dropped */
#endif
	} else if (h->kind == ML_REC_TRACE && size >= sizeof(struct ml_trace_rec)) {
		struct ml_trace_rec r;

		memcpy(&r, data, sizeof(r));
		trace_records++;
		on_trace(&r);
	}
	return 0;
}

/* ---- Report ---------------------------------------------------------------------------------- */

struct alloc_ent {
	uint64_t addr;
	struct ml_alloc_info info;
	int64_t next;          /* next allocation of the same stack (-a) */
};

static struct alloc_ent *allocs_v;
static size_t allocs_n, allocs_cap;

static void allocs_push(uint64_t addr, const struct ml_alloc_info *info)
{
	if (allocs_n == allocs_cap) {
		allocs_cap = allocs_cap ? allocs_cap * 2 : 4096;
		allocs_v = xrealloc(allocs_v, allocs_cap * sizeof(*allocs_v));
	}
	allocs_v[allocs_n].addr = addr;
	allocs_v[allocs_n].info = *info;
	allocs_v[allocs_n].next = -1;
	allocs_n++;
}

static uint64_t counter_sum(struct bpf_map *m, uint32_t idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = xcalloc(ncpu, sizeof(*v)), sum = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(m), &idx, v) == 0)
		for (int c = 0; c < ncpu; c++)
			sum += v[c];
	free(v);
	return sum;
}

static struct dwunw_cap_reader *reader;
static struct cap_pump *pump;

static int64_t ml_pseudo(const char *label);

/* Snapshots the drain thread could not queue: their allocations go under a lost stack. */
static void take_dropped(void)
{
	uint64_t *ids;
	size_t n = cap_pump_take_dropped(pump, &ids);

	if (n) {
		int64_t idx = ml_pseudo("[stack lost: record queue full]");

		for (size_t i = 0; i < n; i++)
			ml_ev_put(ids[i], (uint32_t)idx);
	}
	free(ids);
}

/*
 * Process every record the producers submitted until now (the report needs them all). Producers
 * faster than the unwinding for seconds: this report goes on without the records still in the
 * buffers (their allocations under "[stack unknown: record not received]"), rather than wait.
 */
#define SYNC_TIMEOUT_MS 5000
static bool sync_gave_up;      /* in this report */

static void drain(void)
{
	if (!pump)
		return;
	if (sync_gave_up) {
		cap_pump_process(pump, on_record, NULL, 65536);
	} else if (cap_pump_sync(pump, on_record, NULL, SYNC_TIMEOUT_MS) < 0) {
		sync_gave_up = true;
		fprintf(stderr, "memleak: the unwinding is behind the records by more than %d s: this "
			"report does without the records still in the buffers\n", SYNC_TIMEOUT_MS / 1000);
	}
	take_dropped();
}

/* Some queued records: the main loop's step, and between chunks of the report's long loops. */
static void process_some(size_t max)
{
	if (!pump)
		return;
	cap_pump_process(pump, on_record, NULL, max); /* nothing when called from a record */
	take_dropped();
}

static void drain_yield(void)
{
	process_some(16384);
}

/* A pseudo-stack, of the process being counted when following a tree. */
static int64_t ml_pseudo(const char *label)
{
	return stack_get_in(stack_pid, SK_PSEUDO, 0, intern(label), NULL, NULL, 0, NULL, NULL);
}

static int64_t key_stack(uint64_t key)
{
	if (key & ML_KEY_LOST)
		return ml_pseudo(env.perfbuf ? "[stack lost: perf buffer full]"
						: "[stack lost: ring buffer full]");
	if (key & ML_KEY_DWARF) {
		int64_t idx = ml_ev_lookup_live(ML_KEY_VALUE(key));

		if (idx < 0 && ML_KEY_VALUE(key) > ml_ev_max()) {
			drain(); /* submitted after the drain that began the report */
			idx = ml_ev_lookup_live(ML_KEY_VALUE(key));
		}

		if (idx < 0)
			return ml_pseudo("[stack unknown: record not received]");
		return idx;
	}
	if (key & ML_KEY_FPERR)
		return ml_pseudo(fperr_label(ML_KEY_VALUE(key)));
	return fp_stack((int64_t)key, 0, false);
}

static int cmp_stack_bytes(const void *a, const void *b)
{
	const struct ustack *x = &st.v[*(const uint32_t *)a], *y = &st.v[*(const uint32_t *)b];

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* The markers shown in this report's text (their legend follows the stacks). */
static uint32_t marks_seen;

static void print_stack_text(const struct ustack *s)
{
	/* in fp mode every frame is found by frame pointers: no [fp] on each line */
	bool fp_marks = env.unwind != ML_UNWIND_FP;
	size_t i;

	printf("%" PRIu64 " bytes in %" PRIu64 " allocations from stack\n", s->bytes, s->count);
	if (env.show_allocs && !env.combined)
		for (int64_t a = s->first_alloc; a >= 0; a = allocs_v[a].next)
			printf("\taddr = %#" PRIx64 " size = %" PRIu64 "\n", allocs_v[a].addr,
			       (uint64_t)allocs_v[a].info.size);
	for (i = 0; i < s->nframes; i++)
		print_frame_text(i, &s->frames[i], fp_marks, &marks_seen);
	if (s->label)
		printf("\t%zu [<%016x>] %s\n", i, 0, s->label);
}

static const char *proc_comm(uint32_t pid);

/* The frames of a folded line, root first (without the weight). */
static void folded_frames(FILE *out, const struct ustack *s, bool by_process)
{
	bool sep = false;

	if (by_process) {
		fprintf(out, "%s (%u)", proc_comm((uint32_t)s->space), (uint32_t)s->space);
		sep = true;
	}
	if (s->label) {
		fprintf(out, "%s%s", sep ? ";" : "", s->label);
		sep = true;
	}
	for (size_t i = s->nframes; i-- > 0;) {
		if (sep)
			fputc(';', out);
		sep = true;
		fprint_frame_folded(out, &s->frames[i]);
	}
}

struct folded_line {
	char *text;
	uint64_t weight;
	uint32_t first;        /* rank of its first stack: merged lines keep the report's order */
};

static int cmp_folded_text(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;
	int c = strcmp(x->text, y->text);

	return c ? c : (x->first < y->first ? -1 : 1);
}

static int cmp_folded_rank(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/* Stacks that fold to the same line (same names, other pcs) are one line, weights summed. */
static void print_folded(const uint32_t *order, size_t shown, bool by_process)
{
	struct folded_line *v = xcalloc(shown, sizeof(*v));
	size_t n = 0;

	for (size_t k = 0; k < shown; k++) {
		const struct ustack *s = &st.v[order[k]];
		size_t len = 0;
		FILE *m = open_memstream(&v[k].text, &len);

		if (!m)
			die("out of memory");
		folded_frames(m, s, by_process);
		fclose(m);
		v[k].weight = env.weight_allocs ? s->count : s->bytes;
		v[k].first = (uint32_t)k;
	}
	qsort(v, shown, sizeof(*v), cmp_folded_text);
	for (size_t k = 0; k < shown; k++) {
		if (n && !strcmp(v[n - 1].text, v[k].text)) {
			v[n - 1].weight += v[k].weight;
			free(v[k].text);
			continue;
		}
		v[n++] = v[k];
	}
	qsort(v, n, sizeof(*v), cmp_folded_rank);
	for (size_t k = 0; k < n; k++) {
		printf("%s %" PRIu64 "\n", v[k].text, v[k].weight);
		free(v[k].text);
	}
	free(v);
}

static void print_stack_json(const struct ustack *s)
{
	printf("{\"bytes\":%" PRIu64 ",\"allocations\":%" PRIu64 ",", s->bytes, s->count);
	if (following) {
		printf("\"pid\":%u,\"comm\":", (uint32_t)s->space);
		json_str(proc_comm((uint32_t)s->space));
		putchar(',');
	}
	printf("\"frames\":[");
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct uframe *f = &s->frames[i];

		if (i)
			putchar(',');
		print_frame_json(f);
	}
	printf("],\"kind\":\"%s\",", s->kind == SK_DWARF ? "dwarf" : s->kind == SK_FP ? "fp" : "none");
	if (s->kind == SK_DWARF)
		printf("\"complete\":%s,\"stop\":", s->stop == 0 ? "true" : "false");
	else
		printf("\"complete\":null,\"stop\":");
	if (s->kind == SK_DWARF)
		json_str(s->stop ? s->stop_name : "OK");
	else if (s->kind == SK_FP)
		json_str("FP");
	else
		json_str("NONE");
	if (s->kind == SK_DWARF) {
		uint32_t live = 0;

		for (uint32_t i = 0; i < s->nframes; i++)
			live += !!(s->frames[i].flags & UF_LIVE);
		printf(",\"beyond_window\":%s,\"live_frames\":%u", s->beyond ? "true" : "false", live);
	}
	if (s->label) {
		printf(",\"reason\":");
		json_str(s->label);
	}
	if (env.show_allocs && !env.combined) {
		printf(",\"allocs\":[");
		bool c = false;
		for (int64_t a = s->first_alloc; a >= 0; a = allocs_v[a].next, c = true)
			printf("%s{\"addr\":\"%#" PRIx64 "\",\"size\":%" PRIu64 "}", c ? "," : "",
			       allocs_v[a].addr, (uint64_t)allocs_v[a].info.size);
		putchar(']');
	}
	putchar('}');
}

/* ---- Processes of a followed tree --------------------------------------------------------------- */

static struct {
	uint32_t pid;
	char comm[16];
} *procs;
static size_t nprocs, procs_cap;

static void proc_note(uint32_t pid, const char *comm)
{
	for (size_t i = nprocs; i-- > 0;)
		if (procs[i].pid == pid) {
			if (*comm)
				snprintf(procs[i].comm, sizeof(procs[i].comm), "%s", comm);
			return;
		}
	if (nprocs == procs_cap)
		procs = xrealloc(procs, (procs_cap = procs_cap ? procs_cap * 2 : 64) * sizeof(*procs));
	procs[nprocs].pid = pid;
	snprintf(procs[nprocs].comm, sizeof(procs[nprocs].comm), "%s", comm);
	nprocs++;
}

static const char *proc_comm(uint32_t pid)
{
	char fn[64];
	FILE *f;

	for (size_t i = nprocs; i-- > 0;)
		if (procs[i].pid == pid && procs[i].comm[0])
			return procs[i].comm;
	/* not seen in a slot (a stack whose allocations are gone): ask /proc while it runs */
	snprintf(fn, sizeof(fn), "/proc/%u/comm", pid);
	f = fopen(fn, "re");
	if (f) {
		char c[16] = "";

		if (fgets(c, sizeof(c), f))
			c[strcspn(c, "\n")] = 0;
		fclose(f);
		if (*c) {
			proc_note(pid, c);
			return proc_comm(pid);
		}
	}
	return "?";
}

/* Slot -> process, read once per report. */
static struct {
	uint32_t gen;
	bool ok;
	struct follow_slot s;
} *slot_cache;
static uint32_t slot_gen;

static const struct follow_slot *slot_info(uint32_t slot)
{
	if (!slot_cache)
		slot_cache = xcalloc(FOLLOW_SLOTS, sizeof(*slot_cache));
	slot %= FOLLOW_SLOTS;
	if (slot_cache[slot].gen != slot_gen) {
		slot_cache[slot].gen = slot_gen;
		slot_cache[slot].ok = follow_slot_get(skel->obj, slot, &slot_cache[slot].s);
		if (slot_cache[slot].ok)
			proc_note(slot_cache[slot].s.tgid, slot_cache[slot].s.comm);
	}
	return slot_cache[slot].ok ? &slot_cache[slot].s : NULL;
}

struct group_key {
	uint32_t pid, rank, group, stack;
};

static int cmp_group_pid(const void *a, const void *b)
{
	const struct group_key *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_group_rank(const void *a, const void *b)
{
	const struct group_key *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static size_t report_outstanding; /* entries of the allocs map at the last report */

struct report_walk {
	uint64_t now, older_ns, exec_cut;
};

/* One outstanding allocation of the map walk: counted under its stack (-a: also listed). */
static void report_alloc(void *ctx, uint64_t addr, const struct ml_alloc_info *info)
{
	struct report_walk *w = ctx;

	if (info->ts < w->exec_cut) {
		/* allocated by the image the target replaced with exec */
		bpf_map_delete_elem(bpf_map__fd(skel->maps.allocs), &addr);
		return;
	}
	if (following) {
		/* the key has the process's slot on top of the address */
		uint32_t slot = (uint32_t)(addr >> FOLLOW_SLOT_SHIFT);
		const struct follow_slot *fs = slot_info(slot);

		if (fs && (fs->flags & FOLLOW_F_EXECED)) {
			/* allocated by an image its process replaced with exec */
			bpf_map_delete_elem(bpf_map__fd(skel->maps.allocs), &addr);
			return;
		}
		stack_pid = fs ? fs->tgid : 0;
		addr &= (1ull << FOLLOW_SLOT_SHIFT) - 1;
	}
	int64_t idx = key_stack(info->key); /* keeps its event, even when too young to show */
	stack_pid = 0;
	if (!env.combined && w->now > info->ts && w->now - info->ts < w->older_ns)
		return;
	if (info->ts > w->now)
		return;
	struct ustack *s = &st.v[idx];
	s->bytes += info->size;
	s->count++;
	if (env.show_allocs) {
		allocs_push(addr, info);
		allocs_v[allocs_n - 1].next = s->first_alloc;
		s->first_alloc = (int64_t)(allocs_n - 1);
	}
}

static void report(void)
{
	uint64_t now = mono_ns(), older_ns = env.older_ms * 1000000ull;
	uint64_t exec_cut = skel->bss->exec_ns;
	uint32_t *order = NULL, nord = 0;
	uint64_t capc[CAP_CNT_MAX], lost;
	struct tm tm;
	time_t t;

	for (size_t k = 0; k < st.n; k++) {
		st.v[k].bytes = st.v[k].count = 0;
		st.v[k].first_alloc = -1;
	}
	slot_gen++;
	sync_gave_up = false;

	if (env.combined && env.unwind == ML_UNWIND_FP) {
		/* the per-stack aggregate kept in BPF, iterated from the first key */
		int fd = bpf_map__fd(skel->maps.combined_allocs);
		uint64_t key, next;
		void *prev = NULL;

		drain();
		allocs_n = 0;
		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			struct ml_combined c;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(fd, &key, &c) || !c.count)
				continue; /* fully freed: not shown */
			int64_t idx = key_stack(key);
			st.v[idx].bytes += c.total_size;
			st.v[idx].count += c.count;
		}
	} else {
		/* drain, then walk the map in chunks (a record still missing is drained then) */
		struct report_walk w = { .now = now, .older_ns = older_ns, .exec_cut = exec_cut };

		drain();
		allocs_n = 0;
		report_outstanding = ml_allocs_walk(bpf_map__fd(skel->maps.allocs), report_alloc, &w);
	}

	/* stacks with outstanding allocations, by bytes */
	order = xcalloc(st.n, sizeof(*order));
	for (size_t k = 0; k < st.n; k++)
		if (st.v[k].count)
			order[nord++] = (uint32_t)k;
	qsort(order, nord, sizeof(*order), cmp_stack_bytes);
	/* -a lists allocations in the order the map gave them */
	for (uint32_t k = 0; k < nord; k++) {
		struct ustack *s = &st.v[order[k]];
		int64_t prev = -1, cur = s->first_alloc;

		while (cur >= 0) {
			int64_t nx = allocs_v[cur].next;

			allocs_v[cur].next = prev;
			prev = cur;
			cur = nx;
		}
		s->first_alloc = prev;
	}
	size_t shown = nord < env.top ? nord : env.top;
	bool by_process = false;

	if (env.folded && !env.top_given)
		shown = nord; /* a flame graph needs every stack */
	if (following) {
		/* more than one process: group the stacks shown by process, the largest stack's first */
		for (size_t k = 1; k < shown && !by_process; k++)
			by_process = st.v[order[k]].space != st.v[order[0]].space;
		if (by_process) {
			struct group_key *g = xcalloc(shown, sizeof(*g));

			for (size_t k = 0; k < shown; k++)
				g[k] = (struct group_key){ (uint32_t)st.v[order[k]].space, (uint32_t)k, 0,
							   order[k] };
			/* rank of a process: the rank of its first (largest) stack */
			qsort(g, shown, sizeof(*g), cmp_group_pid);
			for (size_t k = 0; k < shown; k++)
				g[k].group = k && g[k - 1].pid == g[k].pid ? g[k - 1].group : g[k].rank;
			qsort(g, shown, sizeof(*g), cmp_group_rank);
			for (size_t k = 0; k < shown; k++)
				order[k] = g[k].stack;
			free(g);
		}
	}

	dwunw_cap_counters(skel->obj, capc);
	lost = capc[CAP_CNT_OUTPUT_FAILED];
	if (cap_pump_reader_lost(pump) > lost)
		lost = cap_pump_reader_lost(pump);
	uint64_t qdropped = cap_pump_dropped(pump);
	lost += qdropped;
	uint64_t allocs_full = counter_sum(skel->maps.ml_counters, ML_CNT_ALLOCS_FULL);
	uint64_t no_pending = counter_sum(skel->maps.ml_counters, ML_CNT_NO_PENDING);
	uint64_t combined_full = counter_sum(skel->maps.ml_counters, ML_CNT_COMBINED_FULL);

	/* unwind summary over the stacks shown in this report's aggregate */
	size_t n_dwarf = 0, n_complete = 0, n_stopped = 0, n_fp = 0, n_pseudo = 0, n_beyond = 0, n_stale = 0;
	size_t n_live_complete = 0; /* shown complete on memory read live: only spot-checked */
	char reasons[512] = "";
	{
		const char *rname[32];
		size_t rcount[32], nr = 0;

		for (uint32_t k = 0; k < nord; k++) {
			const struct ustack *s = &st.v[order[k]];

			if (s->kind == SK_FP) {
				n_fp++;
			} else if (s->kind == SK_PSEUDO) {
				n_pseudo++;
			} else {
				n_dwarf++;
				n_beyond += s->beyond;
				if (!s->stop) {
					n_complete++;
					n_live_complete += s->beyond;
					continue;
				}
				n_stopped++;
				n_stale += s->stop_name && !strcmp(s->stop_name, "STALE");
				size_t r;
				for (r = 0; r < nr; r++)
					if (rname[r] == s->stop_name)
						break;
				if (r == nr && nr < 32) {
					rname[nr] = s->stop_name;
					rcount[nr++] = 0;
				}
				if (r < 32)
					rcount[r]++;
			}
		}
		size_t off = 0;
		for (size_t r = 0; r < nr && off < sizeof(reasons) - 64; r++)
			off += (size_t)snprintf(reasons + off, sizeof(reasons) - off, "%s%s %zu",
						r ? ", " : "", rname[r], rcount[r]);
	}

	t = time(NULL);
	localtime_r(&t, &tm);
	if (env.json) {
		printf("{\"time\":\"%d:%d:%d\",\"timestamp\":%lld,\"pid\":%d,\"unwind_mode\":\"%s\",\"stacks\":[",
		       tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)t, target_pid,
		       unwind_name());
		for (size_t k = 0; k < shown; k++) {
			if (k)
				putchar(',');
			print_stack_json(&st.v[order[k]]);
		}
		printf("],\"lost\":%" PRIu64 ",\"untracked\":{\"allocs_full\":%" PRIu64
		       ",\"no_pending\":%" PRIu64 ",\"combined_full\":%" PRIu64 ",\"stack_table_full\":%" PRIu64 "}",
		       lost, allocs_full, no_pending, combined_full, st.full);
		printf(",\"unwind\":{\"stacks\":%zu,\"complete\":%zu,\"stopped\":%zu,\"fp\":%zu,\"pseudo\":%zu,"
		       "\"beyond_window\":%zu,\"complete_live\":%zu,\"records\":%" PRIu64 ",\"patched\":%" PRIu64
		       ",\"fallback\":%" PRIu64 ",\"unwind_ns_avg\":%" PRIu64 ",\"record_bytes_avg\":%" PRIu64
		       ",\"reasons\":{",
		       n_dwarf, n_complete, n_stopped, n_fp, n_pseudo, n_beyond, n_live_complete, stats.records, stats.patched,
		       stats.fallback, stats.timed ? stats.unwind_ns / stats.timed : 0,
		       stats.records ? record_bytes / stats.records : 0);
		{
			bool c = false;
			for (uint32_t k = 0; k < nord; k++) {
				const struct ustack *s = &st.v[order[k]];
				bool dup = false;

				if (s->kind != SK_DWARF || !s->stop)
					continue;
				for (uint32_t j = 0; j < k; j++)
					if (st.v[order[j]].kind == SK_DWARF && st.v[order[j]].stop &&
					    st.v[order[j]].stop_name == s->stop_name)
						dup = true;
				if (dup)
					continue;
				size_t cnt = 0;
				for (uint32_t j = 0; j < nord; j++)
					if (st.v[order[j]].kind == SK_DWARF && st.v[order[j]].stop &&
					    st.v[order[j]].stop_name == s->stop_name)
						cnt++;
				printf("%s", c ? "," : "");
				json_str(s->stop_name);
				printf(":%zu", cnt);
				c = true;
			}
		}
		printf("}},\"queue\":{\"bytes\":%zu,\"peak_records\":%" PRIu64 ",\"dropped\":%" PRIu64 "}",
		       cap_pump_queue_bytes(pump), cap_pump_queue_peak(pump), qdropped);
		kw_report(true);
		maps_view_json();
		ml_mem_json(skel->obj, report_outstanding);
		printf("}\n");
	} else if (env.folded) {
		print_folded(order, shown, by_process);
		putchar('\n');
	} else {
		printf("[%d:%d:%d] Top %zu stacks with outstanding allocations:\n", tm.tm_hour, tm.tm_min,
		       tm.tm_sec, shown);
		marks_seen = 0;
		for (size_t k = 0; k < shown; k++) {
			const struct ustack *s = &st.v[order[k]];

			if (by_process && (k == 0 || st.v[order[k - 1]].space != s->space))
				printf("%s (%u):\n", proc_comm((uint32_t)s->space), (uint32_t)s->space);
			print_stack_text(s);
		}
		fprint_marks_legend(stdout, "", marks_seen);
		if (env.unwind != ML_UNWIND_FP)
			printf("%s: %zu stacks, %zu complete, %zu stopped early%s%s%s, %zu with frames "
			       "read live after the event; %" PRIu64 " records, %.1f us/unwind, %" PRIu64 " patched\n",
			       unwind_name(), n_dwarf, n_complete, n_stopped, *reasons ? " (" : "", reasons,
			       *reasons ? ")" : "", n_beyond, stats.records,
			       stats.timed ? stats.unwind_ns / 1000.0 / (double)stats.timed : 0.0,
			       stats.patched);
		kw_report(false);
		maps_view_text();
		if (env.unwind == ML_UNWIND_DWARF && (n_beyond || n_stale))
			/* a rewrite that leaves the sampled words as they were is not seen: the complete
			 * ones among them are marked [live], counted here, never vouched for */
			printf("%zu stacks needed stack memory above the window, read after the event (%zu found "
			       "changed since, cut there; %zu shown complete with [live] frames, checked at %d "
			       "sampled spots of %d bytes only): --unwind=kernel walks them at the event, a larger "
			       "--stack-size (now %u, at most %d) copies more\n",
			       n_beyond + n_stale, n_stale, n_live_complete, CAP_NSAMPLES, CAP_SAMPLE_BYTES,
			       env.stack_size, CAP_MAX_STACK);
		if (lost > qdropped)
			printf("lost %" PRIu64 " records (%s buffer full)\n", lost - qdropped,
			       env.perfbuf ? "perf" : "ring");
		if (qdropped)
			printf("lost %" PRIu64 " records (record queue full)\n", qdropped);
		if (allocs_full)
			printf("%" PRIu64 " allocations not tracked (allocation table full)\n", allocs_full);
		if (no_pending)
			printf("%" PRIu64 " allocations not tracked (too many nested calls on a thread)\n",
			       no_pending);
		if (combined_full)
			printf("%" PRIu64 " allocations not aggregated (-C table full)\n", combined_full);
		if (st.full)
			printf("%" PRIu64 " stacks not stored (stack table full)\n", st.full);
	}
	fflush(stdout);
	free(order);
	if (env.unwind != ML_UNWIND_FP)
		ml_ev_prune();
}

/* ---- Setup ------------------------------------------------------------------------------------ */

/*
 * Ring buffer for an expected rate: 100 ms of records of ~1.6 KiB (a snapshot of a stack a dozen
 * frames deep; measured 1.5 KiB average on leaky), rounded up to a power of 2 by
 * dwunw_cap_size_maps. Its pages count twice in RSS (the kernel maps the data area twice).
 */
static size_t ml_ring_bytes(uint64_t rate)
{
	uint64_t b = rate * 160;

	if (b < (1u << 20))
		b = 1u << 20;
	if (b > (1ull << 30))
		b = 1ull << 30;
	return (size_t)b;
}

/* The allocator object's path: from the target's maps (-p), else our own maps, else ldconfig. */
static char *resolve_obj(pid_t pid)
{
	const char *name = base_name(env.obj);
	char fn[64], line[4096];
	FILE *f;

	if (strchr(env.obj, '/')) {
		if (access(env.obj, R_OK))
			die("%s: %s", env.obj, strerror(errno));
		return strdup(env.obj);
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0 && !pid)
			continue;
		if (pass == 1 && pid)
			break; /* -p: only what the target maps */
		if (pass == 0)
			snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
		else
			snprintf(fn, sizeof(fn), "/proc/self/maps");
		f = fopen(fn, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char *p = strchr(line, '/');

			if (!p)
				continue;
			p[strcspn(p, "\n")] = 0;
			if (strcmp(base_name(p), name))
				continue;
			fclose(f);
			if (pass == 0) {
				/*
				 * A process in another mount namespace maps another file under
				 * this path: then go through its root (uprobes follow the inode).
				 */
				struct stat here, there;
				char *r;

				if (asprintf(&r, "/proc/%d/root%s", pid, p) < 0)
					die("out of memory");
				if (stat(r, &there) == 0 &&
				    (stat(p, &here) || here.st_dev != there.st_dev ||
				     here.st_ino != there.st_ino))
					return r;
				free(r);
			}
			return strdup(p);
		}
		fclose(f);
	}
	if (pid)
		die("pid %d does not map %s (not a user process, or another allocator: see -O)", pid,
		    env.obj);
	static const char *dirs[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
				      "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
				      "/lib64", "/usr/lib64", "/lib", "/usr/lib" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *p;

		if (asprintf(&p, "%s/%s", dirs[i], name) < 0)
			die("out of memory");
		if (access(p, R_OK) == 0)
			return p;
		free(p);
	}
	die("%s: not found", env.obj);
	return NULL;
}

struct probe {
	const char *fn;
	struct bpf_program *entry;
	bool ret;
	bool optional;
	uint32_t fn_id;        /* enum ml_fn: the multi link's cookie */
};

static struct bpf_link **links;
static size_t nlinks;
static bool use_multi;         /* two multi-uprobe links instead of one link per probe */
static int mfds[2] = { -1, -1 };
static size_t nmfds;

/* The programs of one way of attaching are loaded, the others not (decided before load). */
static void choose_programs(void)
{
	struct bpf_program *per_probe[] = {
		skel->progs.malloc_enter, skel->progs.calloc_enter, skel->progs.realloc_enter,
		skel->progs.reallocarray_enter, skel->progs.aligned_alloc_enter,
		skel->progs.posix_memalign_enter, skel->progs.memalign_enter,
		skel->progs.valloc_enter, skel->progs.pvalloc_enter, skel->progs.mmap_enter,
		skel->progs.alloc_return, skel->progs.free_enter, skel->progs.munmap_enter,
	};

	use_multi = !env.no_multi && um_supported();
	for (size_t i = 0; i < sizeof(per_probe) / sizeof(per_probe[0]); i++)
		bpf_program__set_autoload(per_probe[i], !use_multi);
	bpf_program__set_autoload(skel->progs.ml_multi_enter, use_multi);
	bpf_program__set_autoload(skel->progs.ml_multi_return, use_multi);
	if (use_multi) {
		bpf_program__set_expected_attach_type(skel->progs.ml_multi_enter, UM_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(skel->progs.ml_multi_return, UM_ATTACH_TYPE);
	}
}

static int attach_one(struct bpf_program *prog, const char *path, const char *fn, bool ret,
		      bool has_ret, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = fn, .retprobe = ret);
	struct ua_site site;
	size_t off = 0;

	/*
	 * At the first instruction the kernel emulates (uprobe_attach.h), else as libbpf would.
	 * Only functions without a return probe move: with one, the entry program must read the
	 * return address before any return probe on the function hijacks it, which only one shared
	 * breakpoint at the entry guarantees (another tracer's return probe at the entry would run
	 * first, and a snapshot would hold the trampoline). Allocators start with an emulated push.
	 */
	if (ua_find(path, fn, !env.probe_at_entry && !has_ret, &site) == 0) {
		uo.func_name = NULL;
		off = site.probe_off;
		if (env.verbose && !ret)
			fprintf(stderr, "memleak: %s probed at %s\n", fn, site.why);
	}
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid, path, off, &uo);

	if (!l)
		return -errno ? -errno : -EINVAL;
	links = xrealloc(links, (nlinks + 1) * sizeof(*links));
	links[nlinks++] = l;
	return 0;
}

struct multi_set {
	uint64_t off[ML_FN_NR], cookie[ML_FN_NR];
	uint32_t n;
};

/* Both links at once: the return probes first, as attach_all does one function at a time. */
static void attach_multi(const char *path, pid_t pid, const struct probe *probes, size_t np)
{
	struct multi_set ent = { .n = 0 }, ret = { .n = 0 };
	char name[256];

	for (size_t i = 0; i < np; i++) {
		struct ua_site site;
		int err;

		snprintf(name, sizeof(name), "%s%s", env.sym_prefix, probes[i].fn);
		/* the same places as attach_one's */
		err = ua_find(path, name, !env.probe_at_entry && !probes[i].ret, &site);
		if (err) {
			if (probes[i].optional) {
				if (env.verbose)
					fprintf(stderr, "memleak: %s not probed in %s: %s\n", name, path,
						strerror(-err));
				continue;
			}
			die("cannot probe %s in %s: %s", name, path, strerror(-err));
		}
		if (env.verbose)
			fprintf(stderr, "memleak: %s probed at %s\n", name, site.why);
		if (probes[i].ret) {
			ret.off[ret.n] = site.entry_off;
			ret.cookie[ret.n++] = probes[i].fn_id;
		}
		ent.off[ent.n] = site.probe_off;
		ent.cookie[ent.n++] = probes[i].fn_id;
	}
	if (ret.n) {
		int fd = um_attach(bpf_program__fd(skel->progs.ml_multi_return), path, ret.off,
				   ret.cookie, ret.n, true, pid);

		if (fd < 0)
			die("cannot attach the return probes to %s: %s", path, strerror(-fd));
		mfds[nmfds++] = fd;
	}
	int fd = um_attach(bpf_program__fd(skel->progs.ml_multi_enter), path, ent.off, ent.cookie,
			   ent.n, false, pid);
	if (fd < 0)
		die("cannot attach the entry probes to %s: %s", path, strerror(-fd));
	mfds[nmfds++] = fd;
}

/* One link per probe: the return probe first, so a call whose entry is seen has its return. */
static void attach_per_probe(const char *path, pid_t pid, const struct probe *probes, size_t np)
{
	char name[256];

	for (size_t i = 0; i < np; i++) {
		int err;

		snprintf(name, sizeof(name), "%s%s", env.sym_prefix, probes[i].fn);
		err = probes[i].ret ? attach_one(skel->progs.alloc_return, path, name, true, true, pid)
				    : 0;
		if (!err)
			err = attach_one(probes[i].entry, path, name, false, probes[i].ret, pid);
		if (err) {
			if (probes[i].optional) {
				if (env.verbose)
					fprintf(stderr, "memleak: %s not probed in %s: %s\n", name, path,
						strerror(-err));
				continue;
			}
			die("cannot probe %s in %s: %s", name, path, strerror(-err));
		}
	}
}

static void attach_all(const char *path, pid_t pid)
{
	struct probe probes[] = {
		{ "malloc", skel->progs.malloc_enter, true, false, ML_FN_MALLOC },
		{ "calloc", skel->progs.calloc_enter, true, false, ML_FN_CALLOC },
		{ "realloc", skel->progs.realloc_enter, true, false, ML_FN_REALLOC },
		{ "reallocarray", skel->progs.reallocarray_enter, true, true, ML_FN_REALLOCARRAY },
		{ "aligned_alloc", skel->progs.aligned_alloc_enter, true, true, ML_FN_ALIGNED_ALLOC },
		{ "posix_memalign", skel->progs.posix_memalign_enter, true, false,
		  ML_FN_POSIX_MEMALIGN },
		{ "memalign", skel->progs.memalign_enter, true, true, ML_FN_MEMALIGN },
		{ "valloc", skel->progs.valloc_enter, true, true, ML_FN_VALLOC },
		{ "pvalloc", skel->progs.pvalloc_enter, true, true, ML_FN_PVALLOC },
		{ "mmap", skel->progs.mmap_enter, true, false, ML_FN_MMAP },
		{ "free", skel->progs.free_enter, false, false, ML_FN_FREE },
		{ "munmap", skel->progs.munmap_enter, false, false, ML_FN_MUNMAP },
	};
	const size_t np = sizeof(probes) / sizeof(probes[0]);
	uint64_t t0 = mono_ns();

	if (use_multi)
		attach_multi(path, pid, probes, np);
	else
		attach_per_probe(path, pid, probes, np);
	if (env.verbose)
		fprintf(stderr, "memleak: uprobes attached in %.1f ms (%s)\n",
			(double)(mono_ns() - t0) / 1e6,
			use_multi ? "two multi-uprobe links" : "one link per probe");
	if (maps_view_on) {
		int err = maps_view_attach(skel->obj, &links, &nlinks);

		if (err)
			die("cannot attach the mapping-change programs: %s", strerror(-err));
	}
	struct bpf_link *l = bpf_program__attach(skel->progs.ml_exec);
	if (!l)
		die("cannot attach sched_process_exec: %s", strerror(errno));
	links = xrealloc(links, (nlinks + 2) * sizeof(*links));
	links[nlinks++] = l;
	l = bpf_program__attach(skel->progs.ml_thread_exit);
	if (!l)
		die("cannot attach sched_process_exit: %s", strerror(errno));
	links[nlinks++] = l;
}

#ifdef HAVE_DWUNW
/*
 * Every stack runs through the allocator's object: build its unwind table and read its symbols
 * (glibc's debug file included) before the probes fire. Done on the first record instead, that
 * takes 0.1-2 s on a loaded machine, while records pile up faster than the buffers hold them.
 */
static void warm_module(const char *path)
{
	struct dwunw_table_info ti;
	struct dwunw_symbol sym;
	struct dwunw_module *m;
	uint64_t t0 = mono_ns();

	if (dwunw_module_open(&dctx, path, &m))
		return;
	dwunw_table_info(&dctx, m, &ti);
	dwunw_symbolize(&dctx, m, 0, &sym);
	dwunw_module_put(&dctx, m); /* stays in the module cache */
	if (env.verbose)
		fprintf(stderr, "memleak: %s unwind table and symbols ready in %.0f ms\n", path,
			(double)(mono_ns() - t0) / 1e6);
}
#endif

/* -c COMMAND, -- PROG ARGS: the command, started stopped before exec (target.c). */
static struct target cmd;

/* A simple command runs as "exec COMMAND": the shell becomes the program (one process less). */
static bool simple_command(const char *c)
{
	const char *p = c;

	if (strpbrk(c, ";|&\n()`") || strstr(c, "$("))
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	/* NAME=value as the first word: an assignment, which exec does not take */
	if (*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) {
		const char *q = p;

		while (*q == '_' || (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
		       (*q >= '0' && *q <= '9'))
			q++;
		if (*q == '=')
			return false;
	}
	return *p != 0;
}

/* Fork the command (stopped before exec); a program that cannot run ends here: 127 or 126. */
static void start_command(void)
{
	char word[4096], *script = NULL;
	const char *prog;
	int rc;

	if (env.prog_argv) {
		rc = target_check_program(env.prog_argv[0]);
		if (rc)
			exit(rc);
		target_start(&cmd, env.prog_argv, NULL);
		return;
	}
	prog = target_shell_program(env.command, word, sizeof(word));
	if (prog && (rc = target_check_program(prog)))
		exit(rc);
	if (simple_command(env.command) && asprintf(&script, "exec %s", env.command) < 0)
		die("out of memory");
	target_start(&cmd, NULL, script ? script : env.command);
	cmd.what = prog ? prog : env.command;
	/* script stays allocated: the child has its own copy, and it is small */
}

static void cleanup_exit(void)
{
	target_stop(&cmd);
}

/*
 * fp mode symbolizes at report time, possibly after the target exited: keep a copy of its maps
 * that outlives it (refreshed every second while it runs). dwarf mode symbolizes each stack
 * when its record arrives, with libdwunw's own maps cache (refreshed on unknown pcs).
 */
static void keep_maps(void)
{
	if (env.unwind != ML_UNWIND_FP)
		return;
#ifdef HAVE_DWUNW
	char fn[64], *text = NULL;
	size_t len = 0, cap = 0;
	ssize_t r;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", target_pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		if (cap - len < 4096)
			text = xrealloc(text, cap = cap ? cap * 2 : 65536);
		r = read(fd, text + len, cap - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (len)
		dwunw_maps_set(&dctx, target_pid, text, len);
	free(text);
#else
	syms_proc_refresh(syms);
#endif
}

static bool target_gone(int pidfd)
{
	if (following) {
		int status;

		/* the command's process is gone, and every process it started */
		target_exited(&cmd, &status);
		return cmd.pid <= 0 && !follow_any_alive(skel->obj);
	}
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		return poll(&p, 1, 0) == 1;
	}
	return kill(target_pid, 0) && errno == ESRCH;
}

/*
 * -c, --: once the command runs (neither our fork nor /bin/sh any more), a static executable maps
 * no libc.so.6: the probes cannot see its allocations, say so rather than print empty reports.
 */
static void static_target_check(const char *obj)
{
	static bool done;
	struct stat sh, self, exe;
	char fn[64], path[4096];

	if (done || !following || cmd.pid <= 0 || strchr(env.obj, '/'))
		return;
	snprintf(fn, sizeof(fn), "/proc/%d/exe", target_pid);
	if (stat(fn, &exe) || stat("/proc/self/exe", &self))
		return;
	if (exe.st_dev == self.st_dev && exe.st_ino == self.st_ino)
		return; /* not exec'd yet */
	if (env.command && simple_command(env.command) && stat("/bin/sh", &sh) == 0 && exe.st_dev == sh.st_dev &&
	    exe.st_ino == sh.st_ino)
		return; /* the shell, before its exec of the command */
	done = true;
	if (dwunw_exe_is_static(target_pid, path, sizeof(path)) == 1)
		die("pid %d (%s) is statically linked: it does not use %s, where the probes are (-O %s probes its own allocator)",
		    target_pid, path, obj, path);
}

int main(int argc, char **argv)
{
	size_t ring_bytes, perf_bytes;
	char *obj_path;
	int pidfd = -1, err, reports = 0, status = 0;
	const char *why;

	tool_name = "memleak";
	parse_args(argc, argv);
	tool_verbose = env.verbose;
	st.max = env.max_stacks;
#ifdef HAVE_DWUNW
	frames_max = env.max_frames;
#endif
	if (!env.pid && !env.command && !env.prog_argv)
		usage_error("kernel allocations are not traced by this memleak: use -p PID, -c COMMAND or -- PROG ARGS");
	following = env.command || env.prog_argv;
	tool_signals_init();
	if ((why = tool_missing_privileges(true)))
		tool_fail(TOOL_EXIT_PRIVILEGE, "%s", why);
	if (env.pid && (why = tool_pid_problem(env.pid, &status)))
		tool_fail(status, "%s", why);
	if (env.pid) {
		char fn[64];

		snprintf(fn, sizeof(fn), "/proc/%d/maps", env.pid);
		if (access(fn, R_OK))
			tool_fail(TOOL_EXIT_NO_PROCESS, "pid %d: no such process", env.pid);
	}
	obj_path = resolve_obj(env.pid);
	libbpf_set_print(tool_libbpf_print);
	/* a fixed threshold: glibc's moving one keeps freed big tables in the heap (RSS in steps) */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	ml_set_yield(drain_yield);

	const char *lacks = dwunw_kernel_lacks(!env.perfbuf);
	if (lacks)
		die("%s", lacks);

	skel = memleak_bpf__open();
	if (!skel)
		die("cannot open the BPF object: %s", strerror(errno));
	skel->rodata->unwind_mode = (uint32_t)env.unwind;
	skel->rodata->min_size = env.min_size;
	skel->rodata->max_size = env.max_size;
	skel->rodata->sample_rate = env.sample_rate;
	skel->rodata->trace_all = env.trace;
	skel->rodata->record_nested = env.nested;
	skel->rodata->keep_combined = env.combined && env.unwind == ML_UNWIND_FP;
	skel->rodata->dwarf_fp_ids = env.fp_ids;
	skel->rodata->cap_use_perfbuf = env.perfbuf;
	skel->rodata->cap_stack_bytes = env.stack_size;
	skel->rodata->follow_tree = following;
	/* dwarf mode: mapping changes in order with the records (DWUNW_MAPEV=0: off, to compare) */
	maps_view_on = env.unwind == ML_UNWIND_DWARF && !(getenv("DWUNW_MAPEV") &&
							  !strcmp(getenv("DWUNW_MAPEV"), "0"));
	skel->rodata->mapev_enabled = maps_view_on;
	skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(env.perfbuf);
	ring_bytes = env.buffer_size && !env.perfbuf ? env.buffer_size : ml_ring_bytes(env.expected_rate);
	skel->rodata->cap_wakeup_bytes = ring_bytes / 8;
	perf_bytes = env.buffer_size && env.perfbuf ? env.buffer_size : 8u << 20;
	if (env.unwind == ML_UNWIND_FP && !env.trace)
		ring_bytes = 1u << 16; /* no snapshots */
	err = dwunw_cap_size_maps(skel->obj, env.perfbuf, ring_bytes);
	if (!err && !(env.combined && env.unwind == ML_UNWIND_FP))
		err = bpf_map__set_max_entries(skel->maps.combined_allocs, 1);
#ifdef HAVE_KWALK
	struct kw_opts kwo = { .budget = env.table_budget };

	if (!err && env.unwind == ML_UNWIND_KERNEL)
		err = kw_size_maps(skel->obj, &kwo);
	kw_track_autoload(skel->obj, env.unwind == ML_UNWIND_KERNEL);
#endif
	if (err)
		die("cannot size the maps: %s", strerror(-err));

	if (following) {
		start_command();
		atexit(cleanup_exit);
		target_pid = cmd.pid;
	} else {
		target_pid = env.pid;
		skel->rodata->target_tgid = (uint32_t)target_pid;
	}

	choose_programs();
	err = memleak_bpf__load(skel);
	if (err)
		die("cannot load the BPF programs: %s (run with -v for the verifier log)", strerror(-err));
#ifdef HAVE_KWALK
	if (env.unwind == ML_UNWIND_KERNEL) {
		kwt.l = kw_loader_new(skel->obj, &kwo);
		if (!kwt.l)
			die("cannot set up the in-kernel walker's tables: %s", strerror(errno));
		if (following)
			kw_preload_command(kwt.l, env.prog_argv ? env.prog_argv[0] : cmd.what);
		else
			kw_track_reload(&kwt, (uint32_t)target_pid, true);
		err = kw_track_attach(&kwt, skel->obj);
		if (err) /* the walker's fallback still reloads a process whose pcs it does not know */
			fprintf(stderr, "memleak: no mmap tracing (%s): new mappings load at their first "
				"allocation\n", strerror(-err));
	}
#endif
#ifdef HAVE_DWUNW
	err = frames_init(64, 0);
	if (err)
		die("libdwunw: %s", dwunw_strerror(err));
	if (env.unwind == ML_UNWIND_DWARF)
		warm_module(obj_path);
#endif
	/* uprobes are per file: following a tree, every process is probed and the BPF side filters */
	attach_all(obj_path, following ? -1 : target_pid);
	if (following) {
		err = follow_attach(skel->obj, &links, &nlinks);
		if (!err)
			err = follow_add_root(skel->obj, target_pid);
		if (err)
			die("cannot follow the command's processes: %s", strerror(-err));
	}

	/* the queue: half the ring buffer again (50 ms at the expected rate), or a CPU's perf buffer */
	pump = cap_pump_new(env.perfbuf ? perf_bytes : ring_bytes / 2);
	if (!pump)
		die("out of memory");
	reader = dwunw_cap_reader_new(skel->obj, env.perfbuf, perf_bytes, cap_pump_record, pump);
	if (!reader)
		die("cannot open the %s buffer: %s", env.perfbuf ? "perf" : "ring", strerror(errno));
	err = cap_pump_start(pump, reader);
	if (err)
		die("cannot start the drain thread: %s", strerror(-err));

#ifndef HAVE_DWUNW
	syms = syms_proc_new(target_pid);
#endif
	fpc.n = 1u << 15;
	fpc.map = xcalloc(fpc.n, sizeof(*fpc.map));

	pidfd = (int)syscall(SYS_pidfd_open, target_pid, 0);
	fprintf(env.json || env.folded ? stderr : stdout, "Attaching to pid %d, Ctrl+C to quit.\n",
		target_pid);
	fflush(stdout);
	if (following && (err = target_go(&cmd))) {
		/* it could not exec: one line said why */
		tool_links_destroy_fds(links, nlinks, mfds, nmfds);
		exit(err);
	}

	uint64_t interval_ns = (uint64_t)env.interval * 1000000000ull;
	uint64_t last_check = 0, last_maps = 0;
	bool gone = false;

	next_report_ns = mono_ns() + interval_ns;
	while (!tool_stop_requested()) {
		uint64_t now = mono_ns();

		if (now >= next_report_ns) {
			keep_maps();
			report();
			reports++;
			if (!tool_flush_stdout())
				break;
			if (env.count > 0 && reports >= env.count)
				break;
			next_report_ns += interval_ns;
			if (next_report_ns < mono_ns())
				next_report_ns = mono_ns() + interval_ns;
			continue;
		}
		/* the drain thread fills the queue; here records are unwound, a batch at a time */
		int timeout = (int)((next_report_ns - now) / 1000000ull) + 1;
		if (timeout > 10)
			timeout = 10;
		if (cap_pump_wait(pump, timeout))
			process_some(2048);
		now = mono_ns();
		if (now - last_check >= 50000000ull) {
			last_check = now;
			if (tool_stdout_closed())
				break;
			if (target_gone(pidfd)) {
				gone = true;
				break;
			}
			static_target_check(obj_path);
		}
		if (now - last_maps >= 1000000000ull) {
			last_maps = now;
			keep_maps();
		}
	}
	/* a last report, unless nobody reads it any more */
	if ((gone || tool_stop_requested()) && !tool_stdout_closed()) {
		report();
		tool_flush_stdout();
		if (gone)
			fprintf(stderr, "memleak: target pid %d exited\n", target_pid);
	}

	if (env.verbose) {
		ml_mem_text(stderr, skel->obj, report_outstanding);
		fprintf(stderr, "memleak: record queue %.1f MiB, at most %" PRIu64 " records waiting, %" PRIu64 " dropped\n",
			cap_pump_queue_bytes(pump) / 1048576.0, cap_pump_queue_peak(pump),
			cap_pump_dropped(pump));
	}
	cap_pump_free(pump); /* before the links' helper process is forked */
	pump = NULL;
	tool_links_destroy_fds(links, nlinks, mfds, nmfds);
	dwunw_cap_reader_free(reader);
#ifdef HAVE_KWALK
	if (kwt.l) {
		kw_track_detach(&kwt);
		kw_loader_free(kwt.l);
	}
#endif
	memleak_bpf__destroy(skel);
	target_stop(&cmd);
#ifdef HAVE_DWUNW
	frames_shutdown();
#else
	syms_proc_free(syms);
#endif
	module_warn_flush();
	if (pidfd >= 0)
		close(pidfd);
	free(obj_path);
	return 0;
}
