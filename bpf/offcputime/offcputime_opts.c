// SPDX-License-Identifier: GPL-2.0-only
/* offcputime's command line: see offcputime_opts.h. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "offcputime_opts.h"
#include "runtime/cpu_budget.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_util.h"

enum {
	OPT_STATE = 256,
	OPT_STACK_STORAGE,
	OPT_MAX_DEPTH,
	OPT_UNWIND,
	OPT_STACK_SIZE,
	OPT_JSON,
	OPT_MAX_STACKS,
	OPT_MAX_KEYS,
	OPT_TABLE_BUDGET,
	OPT_MAX_CPU,
	OPT_WALL,
	OPT_WAKER,
	OPT_AGGREGATE,
	OPT_NO_AGGREGATE,
	OPT_LINES,
	OPT_CACHE_BYTES,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "tid", required_argument, NULL, 't' },
	{ "user-threads-only", no_argument, NULL, 'u' },
	{ "kernel-threads-only", no_argument, NULL, 'k' },
	{ "user-stacks-only", no_argument, NULL, 'U' },
	{ "kernel-stacks-only", no_argument, NULL, 'K' },
	{ "min-block-time", required_argument, NULL, 'm' },
	{ "max-block-time", required_argument, NULL, 'M' },
	{ "folded", no_argument, NULL, 'f' },
	{ "delimited", no_argument, NULL, 'd' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "state", required_argument, NULL, OPT_STATE },
	{ "stack-storage-size", required_argument, NULL, OPT_STACK_STORAGE },
	{ "perf-max-stack-depth", required_argument, NULL, OPT_MAX_DEPTH },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "stack-size", required_argument, NULL, OPT_STACK_SIZE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "max-cpu", required_argument, NULL, OPT_MAX_CPU },
	{ "max-keys", required_argument, NULL, OPT_MAX_KEYS },
	{ "table-budget", required_argument, NULL, OPT_TABLE_BUDGET },
	{ "cache-bytes", required_argument, NULL, OPT_CACHE_BYTES },
	{ "wall", no_argument, NULL, OPT_WALL },
	{ "waker", no_argument, NULL, OPT_WAKER },
	{ "aggregate", no_argument, NULL, OPT_AGGREGATE },
	{ "no-aggregate", no_argument, NULL, OPT_NO_AGGREGATE },
	{ "frequency", required_argument, NULL, 'F' },
	{},
};

static void usage(void)
{
	printf(
"Usage: offcputime [OPTION...] [DURATION] [-- COMMAND [ARG...]]\n"
"Summarize the time threads spend off CPU (blocked, sleeping, waiting) by stack, in\n"
"microseconds: each switch-out's kernel and user stack, summed with the time until the\n"
"thread ran again.\n"
"\n"
"  -p, --pid=PID[,PID...]       only these processes\n"
"  -t, --tid=TID[,TID...]       only these threads\n"
"  -u, --user-threads-only      user threads only (no kernel threads)\n"
"  -k, --kernel-threads-only    kernel threads only\n"
"  -U, --user-stacks-only       user stacks only\n"
"  -K, --kernel-stacks-only     kernel stacks only\n"
"  -m, --min-block-time=US      spans of at least US microseconds (1)\n"
"  -M, --max-block-time=US      spans of at most US microseconds\n"
"      --state=STATE            only threads switched out in this state (0 running,\n"
"                               1 interruptible, 2 uninterruptible; any by default)\n"
"  -f, --folded                 folded stacks (comm;root;...;leaf US) for flamegraph.pl\n"
"  -d, --delimited              '-' between kernel and user stacks\n"
"      --stack-storage-size=N   stack ids kept by bpf_get_stackid (16384)\n"
"      --perf-max-stack-depth=N accepted (frame-pointer stacks hold 127 frames)\n"
"      --unwind=auto|kernel|dwarf|fp|freeze\n"
"                               user stacks: DWARF tables walked in the BPF program\n"
"                               (kernel), DWARF unwinding of the stack window copied at the\n"
"                               switch-out (dwarf, the default), frame pointers (fp,\n"
"                               bpf_get_stackid); auto: kernel where this kernel and build\n"
"                               allow it, else dwarf (one line says why); freeze: the thread\n"
"                               stopped at its switch-in until its stack is read (-p/-t/--)\n"
"      --stack-size=BYTES       stack window copied per switch-out (16384, max 65536)\n"
"      --table-budget=MIB       --unwind=kernel: memory for the tables' maps (64)\n"
"      --cache-bytes=SIZE       memory for the modules' unwind tables and symbols (256m):\n"
"                               past it those used least recently are freed\n"
"      --aggregate              kernel walks: spans summed in BPF maps by stack, drained\n"
"                               each second (a walk that fell back still comes as a record);\n"
"                               the default with --unwind=kernel unless --waker\n"
"      --no-aggregate           kernel walks: one record per span, summed here\n"
"      --json                   NDJSON: one line per stack (count: microseconds), with -f\n"
"                               the folded lines too ({\"folded\":\"comm;...;leaf\",\"count\":US}),\n"
"                               then a summary line\n"
"      --lines                  the source file:line of each named user frame when its\n"
"                               debug info has it (text: \" at FILE:LINE\", JSON: file, line)\n"
"      --max-stacks=N           distinct stacks kept (262144; more: [stack table full])\n"
"      --max-cpu=PCT            offcputime's own CPU under PCT %% of one CPU: 1 in N\n"
"                               snapshots unwound, the others under [not unwound: --max-cpu]\n"
"      --max-keys=N             distinct (pid, comm, stacks) summed (1048576)\n"
"      --wall                   wall-clock profile: also sample the selected threads on CPU\n"
"                               (cpu-clock, -F) and count each sample as its period, so\n"
"                               on-CPU and off-CPU time share one unit; off-CPU stacks end\n"
"                               in an [off-CPU] frame (JSON: \"state\":\"on\"|\"off\")\n"
"  -F, --frequency=HZ           --wall: on-CPU samples per second per CPU (99)\n"
"      --waker                  as offwaketime: also the stacks of the thread that woke each\n"
"                               one (taken at the wakeup; [interrupt] when an interrupt woke\n"
"                               it); folded: wakee;...;--;waker leaf..root;waker comm\n"
"  -v, --verbose                libbpf and unwinder diagnostics\n"
"  -h, --help                   this help\n"
"\n"
"DURATION: seconds (until Ctrl-C, or the end of COMMAND). -- COMMAND: start it and trace it and\n"
"every process it forks, from its first instruction until they exit. Exit status: README.md.\n");
}

void oc_parse_args(struct oc_opts *o, int argc, char **argv)
{
	bool user_only = false, kernel_only = false;
	int c, pos = 0, n = argc;

	*o = (struct oc_opts){
		.user = true,
		.kernel = true,
		.state = -1,
		.min_us = 1,
		.max_us = UINT64_MAX,
		.stack_storage = 16384,
		.unwind = OC_UNWIND_DWARF, /* auto lost more spans under switch storms (doc/bench.md section 10) */
		.stack_size = CAP_DEF_STACK,
		.max_stacks = 1u << 18,
		.max_keys = 1u << 20,
		.freq = 99,
	};
	bool freq_given = false;
	int aggregate = -1; /* --aggregate 1, --no-aggregate 0, else kernel mode's default */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			n = i;
			if (i + 1 < argc)
				o->command = &argv[i + 1];
			else
				tool_usage_error("--: a command is expected after it");
			break;
		}
	opterr = 0;
	while ((c = getopt_long(n, argv, ":p:t:ukUKm:M:F:fdvh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p': o->npids = tool_opt_id_list(optarg, o->pids, o->npids, SEL_MAX_FILTER, "pid", "-p"); break;
		case 't': o->ntids = tool_opt_id_list(optarg, o->tids, o->ntids, SEL_MAX_FILTER, "tid", "-t"); break;
		case 'u': o->user_threads = true; break;
		case 'k': o->kernel_threads = true; break;
		case 'U': user_only = true; break;
		case 'K': kernel_only = true; break;
		case 'm': o->min_us = tool_opt_u64(optarg, "-m", 0, UINT64_MAX / 1000); break;
		case 'M': o->max_us = tool_opt_u64(optarg, "-M", 1, UINT64_MAX / 1000); break;
		case 'F':
			o->freq = (uint32_t)tool_opt_u64(optarg, "-F", 1, 10000);
			freq_given = true;
			break;
		case OPT_WALL: o->wall = true; break;
		case OPT_WAKER: o->waker = true; break;
		case OPT_AGGREGATE: aggregate = 1; break;
		case OPT_NO_AGGREGATE: aggregate = 0; break;
		case 'f': o->folded = true; break;
		case 'd': o->delimiter = true; break;
		case 'v': o->verbose = true; break;
		case 'h': usage(); exit(0);
		case OPT_STATE: o->state = (int64_t)tool_opt_u64(optarg, "--state", 0, 0x7fffffff); break;
		case OPT_STACK_STORAGE:
			o->stack_storage = (uint32_t)tool_opt_u64(optarg, "--stack-storage-size", 16, 1u << 22);
			break;
		case OPT_MAX_DEPTH: tool_opt_u64(optarg, "--perf-max-stack-depth", 8, 127); break;
		case OPT_UNWIND:
			o->freeze = !strcmp(optarg, "freeze");
			if (!strcmp(optarg, "auto"))
				o->unwind = OC_UNWIND_AUTO;
			else if (!strcmp(optarg, "dwarf") || o->freeze)
				o->unwind = OC_UNWIND_DWARF;
			else if (!strcmp(optarg, "fp"))
				o->unwind = OC_UNWIND_FP;
			else if (!strcmp(optarg, "kernel"))
				o->unwind = OC_UNWIND_KERNEL;
			else
				tool_usage_error("--unwind: expected auto, kernel, dwarf, fp or freeze, got %s", optarg);
			break;
		case OPT_STACK_SIZE:
			o->stack_size = (uint32_t)(tool_opt_u64(optarg, "--stack-size", 64, CAP_MAX_STACK) & ~7ull);
			break;
		case OPT_TABLE_BUDGET:
			o->table_budget = tool_opt_u64(optarg, "--table-budget", 1, 4096) << 20;
			break;
		case OPT_CACHE_BYTES: o->cache_bytes = tool_opt_cache_bytes(optarg); break;
		case OPT_JSON: o->json = true; break;
		case OPT_LINES: o->lines = true; break;
		case OPT_MAX_CPU: o->max_cpu = cpu_budget_parse(optarg); break;
		case OPT_MAX_STACKS: o->max_stacks = tool_opt_u64(optarg, "--max-stacks", 16, 1u << 24); break;
		case OPT_MAX_KEYS: o->max_keys = tool_opt_u64(optarg, "--max-keys", 16, 1u << 26); break;
		default:
			tool_bad_option(c, n, argv);
		}
	}
	for (int i = optind; i < n; i++, pos++) {
		if (pos > 0)
			tool_usage_error("unexpected argument: %s (a command to run goes after --)", argv[i]);
		o->duration = tool_opt_u64(argv[i], "duration", 1, 100000000);
	}
	if (user_only && kernel_only)
		tool_usage_error("-U and -K exclude each other");
	if (o->user_threads && o->kernel_threads)
		tool_usage_error("-u and -k exclude each other");
	if (user_only)
		o->kernel = false;
	if (kernel_only)
		o->user = false;
	if (o->npids && o->command)
		tool_usage_error("-p and -- COMMAND exclude each other");
	if (freq_given && !o->wall)
		tool_usage_error("-F is for --wall");
	if (o->lines && o->folded && !o->json)
		tool_usage_error("--lines is for text and JSON output (folded lines carry names only)");
	if (o->wall && o->state != -1)
		tool_usage_error("--wall and --state exclude each other (on-CPU samples have no wait state)");
	/* every thread switched in would be stopped: only chosen ones */
	if (o->freeze && !o->npids && !o->ntids && !o->command)
		tool_usage_error("--unwind=freeze stops the traced threads: give -p, -t or -- COMMAND");
	if (o->min_us > o->max_us)
		tool_usage_error("-m %llu is above -M %llu", (unsigned long long)o->min_us,
				 (unsigned long long)o->max_us);
	if (o->unwind == OC_UNWIND_AUTO) {
		/* -K: no user stacks, nothing to choose */
		o->unwind_auto = true;
		o->unwind = o->user && tool_unwind_auto(NULL) ? OC_UNWIND_KERNEL : OC_UNWIND_DWARF;
		if (o->unwind == OC_UNWIND_DWARF)
			o->table_budget = 0;
	}
	if (o->unwind == OC_UNWIND_KERNEL) {
#ifndef HAVE_KWALK
		tool_usage_error("--unwind=kernel: not in this build (the in-kernel walker is x86_64 and arm64 only)");
#endif
	} else if (o->table_budget) {
		tool_usage_error("--table-budget is for --unwind=kernel");
	}
	/* kernel mode sums its walked spans in the kernel unless told not to: no record per span
	 * (none lost to a full ring buffer under switch storms, ~1/30 of the bytes: doc/offcputime.md) */
	if (aggregate == 1 && (o->unwind != OC_UNWIND_KERNEL || !o->user) && !o->unwind_auto)
		tool_usage_error("--aggregate sums the in-kernel walks' spans: it needs --unwind=kernel and user stacks");
	if (aggregate == 1 && o->waker)
		tool_usage_error("--aggregate and --waker exclude each other (each span carries its waker's stacks)");
	o->aggregate = aggregate != 0 && o->unwind == OC_UNWIND_KERNEL && o->user && !o->waker;
}

void oc_check_targets(const struct oc_opts *o)
{
	char fn[64];

	for (size_t i = 0; i < o->npids; i++) {
		int status;
		const char *why = tool_pid_problem((int)o->pids[i], &status);

		if (why && status != TOOL_EXIT_KTHREAD) /* a kernel thread has kernel stacks */
			tool_fail(status, "%s", why);
	}
	for (size_t i = 0; i < o->ntids; i++) {
		snprintf(fn, sizeof(fn), "/proc/%u/stat", o->tids[i]);
		if (access(fn, R_OK))
			tool_fail(TOOL_EXIT_NO_PROCESS, "tid %u: no such thread", o->tids[i]);
	}
}
