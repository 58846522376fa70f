// SPDX-License-Identifier: GPL-2.0-only
/* profile's command line: see profile_opts.h. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "profile_opts.h"
#include "runtime/cpu_budget.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_util.h"

static const struct pr_opts opts_defaults = {
	.user = true,
	.kernel = true,
	.freq = 49,
	.cpu = -1,
	.stack_storage = 16384,
	.unwind = PR_UNWIND_AUTO,
	.stack_size = CAP_DEF_STACK,
	.max_stacks = 1u << 18,
	.max_keys = 1u << 20,
};

enum {
	OPT_STACK_STORAGE = 256,
	OPT_UNWIND,
	OPT_STACK_SIZE,
	OPT_JSON,
	OPT_PERFBUF,
	OPT_AGGREGATE,
	OPT_MAX_STACKS,
	OPT_MAX_KEYS,
	OPT_TABLE_BUDGET,
	OPT_DEBUGINFOD,
	OPT_NO_DEBUGINFOD,
	OPT_DEBUG_DIR,
	OPT_INTERVAL,
	OPT_MAX_CPU,
	OPT_LINES,
	OPT_CACHE_BYTES,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "tid", required_argument, NULL, 'L' },
	{ "user-stacks-only", no_argument, NULL, 'U' },
	{ "kernel-stacks-only", no_argument, NULL, 'K' },
	{ "frequency", required_argument, NULL, 'F' },
	{ "count", required_argument, NULL, 'c' },
	{ "cpu", required_argument, NULL, 'C' },
	{ "include-idle", no_argument, NULL, 'I' },
	{ "folded", no_argument, NULL, 'f' },
	{ "delimited", no_argument, NULL, 'd' },
	{ "all", no_argument, NULL, 'a' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "stack-storage-size", required_argument, NULL, OPT_STACK_STORAGE },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "stack-size", required_argument, NULL, OPT_STACK_SIZE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "perf-buffer", no_argument, NULL, OPT_PERFBUF },
	{ "aggregate", no_argument, NULL, OPT_AGGREGATE },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "max-keys", required_argument, NULL, OPT_MAX_KEYS },
	{ "table-budget", required_argument, NULL, OPT_TABLE_BUDGET },
	{ "cache-bytes", required_argument, NULL, OPT_CACHE_BYTES },
	{ "max-cpu", required_argument, NULL, OPT_MAX_CPU },
	{ "debuginfod", no_argument, NULL, OPT_DEBUGINFOD },
	{ "no-debuginfod", no_argument, NULL, OPT_NO_DEBUGINFOD },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{},
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: profile [OPTION...] [DURATION] [-- COMMAND [ARG...]]\n"
"Sample CPU stacks at a fixed rate on every CPU; report the samples by stack at the end.\n"
"\n"
"  -p, --pid=PID[,PID...]     only these processes\n"
"  -L, --tid=TID[,TID...]     only these threads\n"
"  -a, --all                  all processes (the default without -p)\n"
"  -U, --user-stacks-only     user stacks only\n"
"  -K, --kernel-stacks-only   kernel stacks only\n"
"  -F, --frequency=HZ         samples per second per CPU (49; 1 .. %d)\n"
"  -c, --count=PERIOD         one sample every PERIOD events (ns of cpu-clock, or cycles)\n"
"  -C, --cpu=CPU              only this CPU\n"
"  -I, --include-idle         include the idle task (pid 0)\n"
"  -f, --folded               folded stacks (comm;root;...;leaf COUNT) for flamegraph.pl\n"
"  -d, --delimited            '--' between kernel and user stacks (text)\n"
"      --stack-storage-size=N stack ids kept by bpf_get_stackid (16384)\n"
"      --unwind=auto|kernel|dwarf|fp|freeze\n"
"                             user stacks: kernel: DWARF tables walked in the BPF program\n"
"                             (a walk that stops short falls back to the dwarf path for\n"
"                             that sample; its tables load for the next), dwarf: DWARF\n"
"                             unwinding of a stack window in user space, fp: frame\n"
"                             pointers (bpf_get_stackid); auto (default): kernel with -p\n"
"                             or -- COMMAND where this kernel and build allow it, else\n"
"                             dwarf (one line says why); freeze: the thread stopped at\n"
"                             each sample until its stack is read (-p/-L/--, low rates;\n"
"                             README)\n"
"      --stack-size=BYTES     stack window copied per sample (16384, max 65536; kernel:\n"
"                             per fallback)\n"
"      --table-budget=MIB     --unwind=kernel: memory for the tables' maps (64)\n"
"      --cache-bytes=SIZE     memory for the modules' unwind tables and symbols (256m):\n"
"                             past it those used least recently are freed\n"
"      --max-cpu=PCT          profile's own CPU under PCT %% of one CPU: 1 in N snapshots\n"
"                             unwound, the others counted as [not unwound: --max-cpu]\n"
"      --debuginfod           name stripped code with debug files from DEBUGINFOD_URLS, fetched\n"
"                             while sampling (default when it is set); --no-debuginfod: never\n"
"      --debug-dir=DIR[:DIR]  roots of separate debug files (/usr/lib/debug)\n"
"      --json                 NDJSON: one line per stack, then a summary line; with -f,\n"
"                             the folded lines too ({\"folded\":\"comm;...;leaf\",\"count\":N}),\n"
"                             before the summary\n"
"      --lines                the source file:line of each named user frame when its debug\n"
"                             info has it (text: \" at FILE:LINE\", JSON: file, line)\n"
"      --interval=SEC         with --json: every SEC seconds the stacks counted since the\n"
"                             last interval (with thread ids), then an interval line\n"
"      --perf-buffer          perf buffer instead of the ring buffer\n"
"      --aggregate            kernel walks: stacks counted in BPF maps, drained each\n"
"                             second (--interval: each interval); fallbacks as records\n"
"      --max-stacks=N         distinct stacks kept (262144; more: [stack table full])\n"
"      --max-keys=N           distinct (pid, comm, stacks) counted (1048576; more: per-pid\n"
"                             [aggregation table full])\n"
"  -v, --verbose              libbpf and unwinder diagnostics\n"
"  -h, --help                 this help\n"
"\n"
"DURATION: seconds (until Ctrl-C, or the end of COMMAND). -- COMMAND: start it and profile it\n"
"from its first instruction until it exits.\n", PR_MAX_FREQ);
}

static int online_cpus(char *buf, size_t len)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

bool pr_cpu_selected(const struct pr_opts *opts, int cpu)
{
	return opts->cpu < 0 || opts->cpu == cpu;
}

static bool cpu_online(int cpu)
{
	char buf[256], *p, *save = NULL;

	if (online_cpus(buf, sizeof(buf)))
		return cpu < sysconf(_SC_NPROCESSORS_CONF);
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		int a, b;

		if (sscanf(p, "%d-%d", &a, &b) == 2) {
			if (cpu >= a && cpu <= b)
				return true;
		} else if (sscanf(p, "%d", &a) == 1 && a == cpu) {
			return true;
		}
	}
	return false;
}

void pr_parse_args(struct pr_opts *opts, int argc, char **argv)
{
	bool user_only = false, kernel_only = false;
	int c, pos = 0, n = argc, debuginfod = -1;

	*opts = opts_defaults;
	/* -- COMMAND ARGS...: everything after the first "--" */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			n = i;
			if (i + 1 < argc)
				opts->command = &argv[i + 1];
			else
				tool_usage_error("--: a command is expected after it");
			break;
		}
	opterr = 0; /* tool_bad_option says it in one line */
	while ((c = getopt_long(n, argv, ":p:L:UKF:c:C:Ifdavh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p': opts->npids = tool_opt_id_list(optarg, opts->pids, opts->npids, SEL_MAX_FILTER, "pid", "-p"); break;
		case 'L': opts->ntids = tool_opt_id_list(optarg, opts->tids, opts->ntids, SEL_MAX_FILTER, "tid", "-L"); break;
		case 'U': user_only = true; break;
		case 'K': kernel_only = true; break;
		case 'F':
			opts->freq = tool_opt_u64(optarg, "-F", 0, UINT64_MAX);
			if (opts->freq < 1 || opts->freq > PR_MAX_FREQ)
				tool_usage_error("-F %s: out of range (1 .. %d Hz)", optarg, PR_MAX_FREQ);
			break;
		case 'c':
			opts->period = tool_opt_u64(optarg, "-c", 0, UINT64_MAX);
			if (!opts->period)
				tool_usage_error("-c %s: the period must be at least 1", optarg);
			break;
		case 'C': {
			uint64_t v = tool_opt_u64(optarg, "-C", 0, UINT64_MAX);
			char buf[256] = "?";

			if (v > 4096 || !cpu_online((int)v)) {
				online_cpus(buf, sizeof(buf));
				tool_usage_error("-C %s: no such online CPU (online: %s)", optarg, buf);
			}
			opts->cpu = (int)v;
			break;
		}
		case 'I': opts->idle = true; break;
		case 'f': opts->folded = true; break;
		case 'd': opts->delimiter = true; break;
		case 'a': opts->all = true; break;
		case 'v': opts->verbose = true; break;
		case 'h': usage(stdout); exit(0);
		case OPT_STACK_STORAGE: {
			uint64_t v = tool_opt_u64(optarg, "--stack-storage-size", 0, UINT64_MAX);

			if (v < 16 || v > (1u << 22))
				tool_usage_error("--stack-storage-size %s: out of range (16 .. 4194304)", optarg);
			opts->stack_storage = (uint32_t)v;
			break;
		}
		case OPT_UNWIND:
			opts->freeze = !strcmp(optarg, "freeze");
			if (!strcmp(optarg, "auto"))
				opts->unwind = PR_UNWIND_AUTO;
			else if (!strcmp(optarg, "dwarf") || opts->freeze)
				opts->unwind = PR_UNWIND_DWARF;
			else if (!strcmp(optarg, "fp"))
				opts->unwind = PR_UNWIND_FP;
			else if (!strcmp(optarg, "kernel"))
				opts->unwind = PR_UNWIND_KERNEL;
			else
				tool_usage_error("--unwind: expected auto, kernel, dwarf, fp or freeze, got %s", optarg);
			break;
		case OPT_STACK_SIZE: {
			uint64_t v = tool_opt_u64(optarg, "--stack-size", 0, UINT64_MAX);

			if (v < 64 || v > CAP_MAX_STACK)
				tool_usage_error("--stack-size %s: out of range (64 .. %d)", optarg, CAP_MAX_STACK);
			opts->stack_size = (uint32_t)(v & ~7ull);
			break;
		}
		case OPT_DEBUGINFOD:
			if (!getenv("DEBUGINFOD_URLS") || !*getenv("DEBUGINFOD_URLS"))
				tool_usage_error("--debuginfod: DEBUGINFOD_URLS is not set: no server to ask");
			debuginfod = 1;
			break;
		case OPT_NO_DEBUGINFOD:
			debuginfod = 0;
			break;
		case OPT_DEBUG_DIR:
			opts->debug_dir = optarg;
			break;
		case OPT_TABLE_BUDGET: {
			uint64_t v = tool_opt_u64(optarg, "--table-budget", 0, UINT64_MAX);

			if (v < 1 || v > 4096)
				tool_usage_error("--table-budget %s: out of range (1 .. 4096 MiB)", optarg);
			opts->table_budget = v << 20;
			break;
		}
		case OPT_CACHE_BYTES:
			opts->cache_bytes = tool_opt_cache_bytes(optarg);
			break;
		case OPT_MAX_CPU:
			opts->max_cpu = cpu_budget_parse(optarg);
			break;
		case OPT_INTERVAL:
			opts->interval = tool_opt_u64(optarg, "--interval", 0, UINT64_MAX);
			if (!opts->interval || opts->interval > 86400)
				tool_usage_error("--interval %s: out of range (1 .. 86400 seconds)", optarg);
			break;
		case OPT_JSON: opts->json = true; break;
		case OPT_LINES: opts->lines = true; break;
		case OPT_PERFBUF: opts->perfbuf = true; break;
		case OPT_AGGREGATE: opts->aggregate = true; break;
		case OPT_MAX_STACKS:
			opts->max_stacks = tool_opt_u64(optarg, "--max-stacks", 0, UINT64_MAX);
			if (opts->max_stacks < 16 || opts->max_stacks > (1u << 24))
				tool_usage_error("--max-stacks %s: out of range (16 .. 16777216)", optarg);
			break;
		case OPT_MAX_KEYS:
			opts->max_keys = tool_opt_u64(optarg, "--max-keys", 0, UINT64_MAX);
			if (opts->max_keys < 16 || opts->max_keys > (1u << 26))
				tool_usage_error("--max-keys %s: out of range (16 .. 67108864)", optarg);
			break;
		default:
			tool_bad_option(c, n, argv);
		}
	}
	for (int i = optind; i < n; i++, pos++) {
		if (pos > 0)
			tool_usage_error("unexpected argument: %s (a command to run goes after --)", argv[i]);
		opts->duration = tool_opt_u64(argv[i], "duration", 0, UINT64_MAX);
		if (!opts->duration || opts->duration > 100000000)
			tool_usage_error("invalid duration: %s (seconds, at least 1)", argv[i]);
	}
	if (user_only && kernel_only)
		tool_usage_error("-U and -K exclude each other");
	if (user_only)
		opts->kernel = false;
	if (kernel_only)
		opts->user = false;
	if (opts->interval && !opts->json)
		tool_usage_error("--interval is for --json output");
	if (opts->lines && opts->folded && !opts->json)
		tool_usage_error("--lines is for text and JSON output (folded lines carry names only)");
	if (opts->all && (opts->npids || opts->command))
		tool_usage_error("-a excludes -p and -- COMMAND");
	if (opts->npids && opts->command)
		tool_usage_error("-p and -- COMMAND exclude each other");
	/* every sampled thread would be stopped: only chosen processes */
	if (opts->freeze && !opts->npids && !opts->ntids && !opts->command)
		tool_usage_error("--unwind=freeze stops the sampled threads: give -p, -L or -- COMMAND");
	{
		const char *urls = getenv("DEBUGINFOD_URLS");
		opts->debuginfod = debuginfod < 0 ? urls && *urls : debuginfod;
	}
	if (opts->unwind == PR_UNWIND_AUTO) {
		/* -K: no user stacks, nothing to choose */
		opts->unwind_auto = true;
		/* system-wide, a process's first samples fall back until it earns its tables: more
		 * bytes and CPU per sample than dwarf mode (doc/bench.md section 10) */
		const char *dwarf = opts->perfbuf ? "--perf-buffer takes dwarf mode"
				    : !opts->npids && !opts->command
					? "system-wide, most processes' samples would fall back (use -p or -- COMMAND)"
					: NULL;

		opts->unwind = opts->user && tool_unwind_auto(dwarf) ? PR_UNWIND_KERNEL : PR_UNWIND_DWARF;
		if (opts->unwind == PR_UNWIND_DWARF)
			opts->table_budget = 0;
	}
	if (opts->unwind == PR_UNWIND_KERNEL) {
#ifndef HAVE_KWALK
		tool_usage_error("--unwind=kernel: not in this build (the in-kernel walker is x86_64 and arm64 only)");
#endif
		if (opts->perfbuf)
			tool_usage_error("--unwind=kernel sends its events on the ring buffer: drop --perf-buffer");
	} else if (opts->table_budget) {
		tool_usage_error("--table-budget is for --unwind=kernel");
	}
	if (opts->aggregate && (opts->unwind != PR_UNWIND_KERNEL || !opts->user)) {
		if (!opts->unwind_auto)
			tool_usage_error("--aggregate counts the in-kernel walks: it needs --unwind=kernel and user stacks");
		opts->aggregate = false; /* auto chose dwarf: said on its line */
	}
}

void pr_check_targets(const struct pr_opts *opts)
{
	char fn[64];

	for (size_t i = 0; i < opts->npids; i++) {
		snprintf(fn, sizeof(fn), "/proc/%u/stat", opts->pids[i]);
		if ((kill((pid_t)opts->pids[i], 0) && errno == ESRCH) || access(fn, R_OK))
			tool_fail(TOOL_EXIT_NO_PROCESS, "pid %u: no such process", opts->pids[i]);
	}
	for (size_t i = 0; i < opts->ntids; i++) {
		snprintf(fn, sizeof(fn), "/proc/%u/stat", opts->tids[i]);
		if (access(fn, R_OK))
			tool_fail(TOOL_EXIT_NO_PROCESS, "tid %u: no such thread", opts->tids[i]);
	}
}
