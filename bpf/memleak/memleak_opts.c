// SPDX-License-Identifier: GPL-2.0-only
/* memleak's command line (memleak_opts.h). */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/capture.h"
#include "memleak_opts.h"
#include "runtime/cpu_budget.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_format.h"
#endif

static const struct ml_env env_defaults = {
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
	.unwind = ML_UNWIND_AUTO,
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
	OPT_MAX_CPU,
	OPT_ALLOCATED,
	OPT_LINES,
	OPT_CACHE_BYTES,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "trace", no_argument, NULL, 't' },
	{ "show-allocs", no_argument, NULL, 'a' },
	{ "allocated", no_argument, NULL, OPT_ALLOCATED },
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
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "nested", no_argument, NULL, OPT_NESTED },
	{ "perf-buffer", no_argument, NULL, OPT_PERFBUF },
	{ "buffer-size", required_argument, NULL, OPT_BUFFER_SIZE },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "max-cpu", required_argument, NULL, OPT_MAX_CPU },
	{ "no-fp-fallback", no_argument, NULL, OPT_NO_FP_FALLBACK },
	{ "expected-rate", required_argument, NULL, OPT_EXPECTED_RATE },
	{ "probe-at-entry", no_argument, NULL, OPT_PROBE_AT_ENTRY },
	{ "max-frames", required_argument, NULL, OPT_MAX_FRAMES },
	{ "weight", required_argument, NULL, OPT_WEIGHT },
	{ "no-uprobe-multi", no_argument, NULL, OPT_NO_UPROBE_MULTI },
	{ "table-budget", required_argument, NULL, OPT_TABLE_BUDGET },
	{ "cache-bytes", required_argument, NULL, OPT_CACHE_BYTES },
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
"      --allocated           also count every allocation made since the last report,\n"
"                            freed or not, by stack (text: on the stack's line; JSON:\n"
"                            alloc_bytes, alloc_allocations; stacks with none outstanding\n"
"                            shown too)\n"
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
"      --unwind=auto|kernel|dwarf|fp|freeze\n"
"                            stack source (default %s); kernel: DWARF tables walked in\n"
"                            the BPF program, a walk that stops short falling back to\n"
"                            the dwarf path for that allocation (x86_64, arm64);\n"
"                            auto: kernel where this kernel and build allow it, else\n"
"                            dwarf (one line says why); freeze: the thread stopped at\n"
"                            each allocation (SIGSTOP) until its stack is read (low\n"
"                            allocation rates; README)\n"
"      --stack-size=BYTES    stack window copied per allocation (16384, max 65536;\n"
"                            kernel: per fallback)\n"
"      --table-budget=MIB    --unwind=kernel: memory for the tables' maps (64)\n"
"      --cache-bytes=SIZE    memory for the modules' unwind tables and symbols (256m):\n"
"                            past it those used least recently are freed\n"
"      --folded              folded stacks for flamegraph.pl: root;...;leaf WEIGHT, one\n"
"                            line per distinct stack (identical lines merged, weights\n"
"                            summed); WEIGHT is outstanding bytes\n"
"      --weight=allocations  --folded: WEIGHT is the number of outstanding allocations\n"
"      --max-frames=N        frames per stack (128, up to 65536); a stack cut there ends\n"
"                            with [unwind stopped: frame limit reached]\n"
"      --json                one JSON document per report (NDJSON)\n"
"      --lines               the source file:line of each named frame when its debug\n"
"                            info has it (text: \" at FILE:LINE\", JSON: file, line)\n"
"      --nested              also record allocator calls made inside another one\n"
"                            (glibc's mmap inside a large malloc)\n"
"      --perf-buffer         use the perf buffer instead of the ring buffer\n"
"      --expected-rate=N     allocator calls per second to keep up with (100000): the\n"
"                            ring buffer holds 100 ms of them (16 MiB at 100000)\n"
"      --buffer-size=BYTES   ring buffer size (from --expected-rate), or perf buffer\n"
"                            per CPU (8 MiB)\n"
"      --max-stacks=N        distinct stacks kept in user space (65536)\n"
"      --max-cpu=PCT         memleak's own CPU under PCT %% of one CPU: 1 in N snapshots\n"
"                            unwound, the others' blocks under [not unwound: --max-cpu]\n"
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
		"auto"
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

void ml_parse_args(struct ml_env *env, int argc, char **argv)
{
	int c, pos = 0;

	*env = env_defaults;

	/* -- PROG ARGS: the program to run, not options */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			if (i + 1 < argc)
				env->prog_argv = &argv[i + 1];
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
			env->pid = (pid_t)v;
			break;
		}
		case 't': env->trace = true; break;
		case 'a': env->show_allocs = true; break;
		case OPT_ALLOCATED: env->allocated = true; break;
		case 'o': env->older_ms = opt_u64(optarg, "-o"); break;
		case 'c': env->command = optarg; break;
		case 'C': env->combined = true; break;
		case 'F':
		case 'P':
			fprintf(stderr, "memleak: -%c: not supported in user-space mode, ignored\n", c);
			break;
		case 's':
			env->sample_rate = (uint32_t)opt_u64(optarg, "-s");
			if (!env->sample_rate)
				usage_error("-s: invalid sample rate: %s", optarg);
			break;
		case 'T':
			env->top = opt_u64(optarg, "-T");
			env->top_given = true;
			break;
		case 'z': env->min_size = opt_u64(optarg, "-z"); break;
		case 'Z': env->max_size = opt_u64(optarg, "-Z"); break;
		case 'O': env->obj = optarg; break;
		case 'S': env->sym_prefix = optarg; break;
		case 'v': env->verbose = true; break;
		case 'h': usage(stdout); exit(0);
		case OPT_UNWIND:
			env->freeze = false;
			if (!strcmp(optarg, "auto")) {
#ifdef HAVE_DWUNW
				env->unwind = ML_UNWIND_AUTO;
#else
				env->unwind = ML_UNWIND_FP; /* the only stack source of this build */
#endif
			} else if (!strcmp(optarg, "dwarf")) {
#ifndef HAVE_DWUNW
				usage_error("--unwind=dwarf needs a build with libdwunw (HAVE_DWUNW); this build unwinds with frame pointers only");
#endif
				env->unwind = ML_UNWIND_DWARF;
				env->freeze = false;
			} else if (!strcmp(optarg, "freeze")) {
#ifndef HAVE_DWUNW
				usage_error("--unwind=freeze needs a build with libdwunw (HAVE_DWUNW)");
#endif
#ifdef __mips__
				usage_error("--unwind=freeze is not in the mips32 build (its BPF objects need no kernel BTF; stopping a thread at the event needs it)");
#endif
				env->unwind = ML_UNWIND_DWARF;
				env->freeze = true;
			} else if (!strcmp(optarg, "fp")) {
				env->unwind = ML_UNWIND_FP;
			} else if (!strcmp(optarg, "kernel")) {
#ifndef HAVE_KWALK
				usage_error("--unwind=kernel needs a build with libdwunw on x86_64 or arm64 (the in-kernel walker)");
#endif
				env->unwind = ML_UNWIND_KERNEL;
			} else {
				usage_error("--unwind: expected auto, kernel, dwarf, fp or freeze, got %s", optarg);
			}
			break;
		case OPT_STACK_SIZE: {
			uint64_t v = opt_u64(optarg, "--stack-size");

			if (v < 64 || v > CAP_MAX_STACK)
				usage_error("--stack-size: %s out of range (64 .. %d)", optarg, CAP_MAX_STACK);
			env->stack_size = (uint32_t)(v & ~7ull);
			break;
		}
		case OPT_TABLE_BUDGET:
			env->table_budget = tool_opt_u64(optarg, "--table-budget", 1, 4096) << 20;
			break;
		case OPT_FOLDED: env->folded = true; break;
		case OPT_CACHE_BYTES: env->cache_bytes = tool_opt_cache_bytes(optarg); break;
		case OPT_JSON: env->json = true; break;
		case OPT_LINES: env->lines = true; break;
		case OPT_NESTED: env->nested = true; break;
		case OPT_PERFBUF: env->perfbuf = true; break;
		case OPT_BUFFER_SIZE: env->buffer_size = opt_u64(optarg, "--buffer-size"); break;
		case OPT_MAX_CPU:
			env->max_cpu = cpu_budget_parse(optarg);
			break;
		case OPT_MAX_STACKS:
			env->max_stacks = opt_u64(optarg, "--max-stacks");
			if (env->max_stacks < 16 || env->max_stacks > (1u << 24))
				usage_error("--max-stacks: %s out of range (16 .. 16777216)", optarg);
			break;
		case OPT_NO_FP_FALLBACK: env->fp_ids = false; break;
		case OPT_PROBE_AT_ENTRY: env->probe_at_entry = true; break;
		case OPT_NO_UPROBE_MULTI: env->no_multi = true; break;
		case OPT_EXPECTED_RATE:
			env->expected_rate = tool_opt_u64(optarg, "--expected-rate", 1, 100000000);
			break;
		case OPT_MAX_FRAMES:
			env->max_frames = (uint32_t)tool_opt_u64(optarg, "--max-frames", 1,
								TOOL_MAX_FRAMES_LIMIT);
			break;
		case OPT_WEIGHT:
			if (!strcmp(optarg, "allocations"))
				env->weight_allocs = true;
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
			env->interval = (int)v;
		} else if (pos == 1) {
			if (!v)
				usage_error("invalid count: %s", argv[i]);
			env->count = (long)v;
		} else {
			usage_error("unexpected argument: %s (a program to run goes after --)", argv[i]);
		}
	}
	if (env->folded && env->json)
		usage_error("--folded and --json exclude each other");
	if (env->lines && env->folded)
		usage_error("--lines is for text and JSON reports (folded lines carry names only)");
#ifndef HAVE_DWUNW
	if (env->lines)
		usage_error("--lines needs a build with libdwunw");
#endif
	if (!!env->pid + !!env->command + !!env->prog_argv > 1)
		usage_error("-p, -c and -- PROG exclude each other");
	/* every allocating process would be stopped: only a chosen one (or tree) */
	if (env->freeze && !env->pid && !env->command && !env->prog_argv)
		usage_error("--unwind=freeze stops the allocating threads: give -p, -c or -- PROG");
	if (env->min_size > env->max_size)
		usage_error("min size (%" PRIu64 ") is larger than max size (%" PRIu64 ")", env->min_size,
		    env->max_size);
	if (env->unwind == ML_UNWIND_AUTO) {
		env->unwind_auto = true;
		const char *conflict = env->perfbuf ? "--perf-buffer takes dwarf mode" : NULL;
#ifdef HAVE_KWALK
		char deeper[96];

		/* the walker stops at its depth: deeper stacks come whole only from the dwarf path */
		if (!conflict && env->max_frames > KW_MAX_FRAMES) {
			snprintf(deeper, sizeof(deeper), "--max-frames %u is above the in-kernel walker's %u",
				 env->max_frames, KW_MAX_FRAMES);
			conflict = deeper;
		}
#endif
		env->unwind = tool_unwind_auto(conflict) ? ML_UNWIND_KERNEL : ML_UNWIND_DWARF;
		if (env->unwind == ML_UNWIND_DWARF)
			env->table_budget = 0;
	}
	if (env->unwind == ML_UNWIND_KERNEL) {
		if (env->perfbuf)
			usage_error("--unwind=kernel sends its events on the ring buffer: drop --perf-buffer");
	} else if (env->table_budget) {
		usage_error("--table-budget is for --unwind=kernel");
	}
}
