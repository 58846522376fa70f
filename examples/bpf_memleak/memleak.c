// SPDX-License-Identifier: GPL-2.0-only
/*
 * memleak (example): outstanding user-space allocations of a process, grouped by stack, in the
 * manner of libbpf-tools memleak (same main flags, same report format). README.md walks through
 * this tool before and after memleak-dwarf.patch, which turns its frame-pointer stacks into
 * DWARF stacks.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "memleak.skel.h"
#include "memleak.h"
#include "runtime/syms.h"

static struct {
	pid_t pid;
	const char *command;
	bool trace_all;
	bool show_allocs;
	uint64_t min_age_ns;
	uint64_t min_size, max_size;
	uint64_t sample_rate;
	int top;
	const char *object;
	const char *prefix;
	bool verbose;
	int interval, count;
} env = {
	.min_age_ns = 500 * 1000000ull,
	.max_size = UINT64_MAX,
	.sample_rate = 1,
	.top = 10,
	.object = "libc.so.6",
	.prefix = "",
	.interval = 5,
	.count = -1,
};

static const char usage[] =
	"Usage: memleak [-h] [-p PID] [-t] [-a] [-o AGE_MS] [-c COMMAND] [-s SAMPLE_RATE]\n"
	"               [-T TOP] [-z MIN_SIZE] [-Z MAX_SIZE] [-O OBJ] [-S PREFIX] [-v]\n"
	"               [INTERVAL] [COUNT]\n"
	"Trace outstanding memory allocations of a process (user space only).\n"
	"\n"
	"  -p, --pid PID            trace this process\n"
	"  -c, --command CMD        run CMD (words split on spaces) and trace it\n"
	"  -t, --trace              print every allocation and free (bpf_printk, trace_pipe)\n"
	"  -a, --show-allocs        list each outstanding allocation under its stack\n"
	"  -o, --older AGE_MS       skip allocations younger than this (default 500)\n"
	"  -s, --sample-rate N      record one allocation in N (default 1)\n"
	"  -T, --top N              print the N stacks holding the most bytes (default 10)\n"
	"  -z, --min-size N         skip allocations smaller than N bytes\n"
	"  -Z, --max-size N         skip allocations larger than N bytes\n"
	"  -O, --obj OBJ            the allocator's object (default libc.so.6)\n"
	"  -S, --symbols-prefix P   prefix of the allocator's symbols (e.g. je_)\n"
	"  -v, --verbose            libbpf's debug output\n"
	"  INTERVAL [COUNT]         report every INTERVAL seconds (default 5), COUNT times\n";

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },       { "command", required_argument, NULL, 'c' },
	{ "trace", no_argument, NULL, 't' },            { "show-allocs", no_argument, NULL, 'a' },
	{ "older", required_argument, NULL, 'o' },     { "sample-rate", required_argument, NULL, 's' },
	{ "top", required_argument, NULL, 'T' },       { "min-size", required_argument, NULL, 'z' },
	{ "max-size", required_argument, NULL, 'Z' },  { "obj", required_argument, NULL, 'O' },
	{ "symbols-prefix", required_argument, NULL, 'S' }, { "verbose", no_argument, NULL, 'v' },
	{ "combined-only", no_argument, NULL, 'C' },   { "wa-missing-free", no_argument, NULL, 'F' },
	{ "percpu", no_argument, NULL, 'P' },          { "help", no_argument, NULL, 'h' },
	{},
};

static int usage_error(const char *what)
{
	fprintf(stderr, "memleak: %s (see --help)\n", what);
	return 2;
}

static int number(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || !*s || *end || *s == '-' ? -1 : 0;
}

static int parse_args(int argc, char **argv)
{
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "p:c:tao:s:T:z:Z:O:S:vCFPh", long_opts, NULL)) != -1) {
		if (strchr("posTzZ", c) && number(optarg, &v))
			return usage_error("a number was expected");
		switch (c) {
		case 'p': env.pid = (pid_t)v; break;
		case 'c': env.command = optarg; break;
		case 't': env.trace_all = true; break;
		case 'a': env.show_allocs = true; break;
		case 'o': env.min_age_ns = v * 1000000ull; break;
		case 's': env.sample_rate = v ? v : 1; break;
		case 'T': env.top = (int)v; break;
		case 'z': env.min_size = v; break;
		case 'Z': env.max_size = v; break;
		case 'O': env.object = optarg; break;
		case 'S': env.prefix = optarg; break;
		case 'v': env.verbose = true; break;
		case 'C': case 'F': case 'P':
			return usage_error("-C, -F and -P are not in this example (README.md, compatibility)");
		case 'h': fputs(usage, stdout); exit(0);
		default: return 2;
		}
	}
	if (optind < argc) {
		if (number(argv[optind++], &v) || !v)
			return usage_error("INTERVAL: a positive number of seconds");
		env.interval = (int)v;
	}
	if (optind < argc) {
		if (number(argv[optind++], &v) || !v)
			return usage_error("COUNT: a positive number");
		env.count = (int)v;
	}
	if (optind < argc)
		return usage_error("too many arguments");
	if (!env.pid == !env.command)
		return usage_error("give -p PID or -c COMMAND (kernel allocations: see README.md)");
	if (env.min_size > env.max_size)
		return usage_error("-z is larger than -Z");
	return 0;
}

/* ---- target --------------------------------------------------------------------------------- */

static int go_fd = -1;

/* -c: the child waits on a pipe until the probes are attached, then runs the command. */
static pid_t spawn_command(const char *cmd)
{
	char *copy = strdup(cmd), *argv[32], *save = NULL;
	int n = 0, p[2];
	pid_t pid;

	for (char *w = strtok_r(copy, " ", &save); w && n < 31; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n] = NULL;
	if (!n || pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		char go;
		close(p[1]);
		if (read(p[0], &go, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "memleak: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	go_fd = p[1];
	free(copy);
	return pid;
}

static bool target_alive(void)
{
	if (env.command)
		return waitpid(env.pid, NULL, WNOHANG) == 0;
	return kill(env.pid, 0) == 0 || errno == EPERM;
}

/* ---- probes --------------------------------------------------------------------------------- */

static int attach(struct bpf_program *prog, const char *func, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret);
	char name[128];
	struct bpf_link *l;

	snprintf(name, sizeof(name), "%s%s", env.prefix, func);
	o.func_name = name;
	l = bpf_program__attach_uprobe_opts(prog, env.pid, env.object, 0, &o);
	if (!l) {
		fprintf(stderr, "memleak: cannot attach to %s in %s: %s\n", name, env.object, strerror(errno));
		return -1;
	}
	return 0;
}

static int attach_all(struct memleak_bpf *skel)
{
	struct {
		const char *func;
		struct bpf_program *enter, *exit;
		bool optional;
	} probes[] = {
		{ "malloc", skel->progs.malloc_enter, skel->progs.malloc_exit, false },
		{ "calloc", skel->progs.calloc_enter, skel->progs.calloc_exit, false },
		{ "realloc", skel->progs.realloc_enter, skel->progs.realloc_exit, false },
		{ "free", skel->progs.free_enter_p, NULL, false },
		{ "posix_memalign", skel->progs.posix_memalign_enter, skel->progs.posix_memalign_exit, false },
		{ "aligned_alloc", skel->progs.aligned_alloc_enter, skel->progs.aligned_alloc_exit, true },
		{ "memalign", skel->progs.memalign_enter, skel->progs.memalign_exit, true },
		{ "valloc", skel->progs.valloc_enter, skel->progs.valloc_exit, true },
		{ "pvalloc", skel->progs.pvalloc_enter, skel->progs.pvalloc_exit, true },
	};

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		if (attach(probes[i].enter, probes[i].func, false) ||
		    (probes[i].exit && attach(probes[i].exit, probes[i].func, true))) {
			if (!probes[i].optional)
				return -1;
		}
	}
	return 0;
}

/* ---- report --------------------------------------------------------------------------------- */

struct group {
	int64_t stack;           /* what the allocations share: their stack */
	uint64_t bytes, count;
	uint32_t first;          /* -a: allocations of this group, chained through `next` */
};

struct alloc {
	uint64_t addr, size;
	uint32_t next;
};

static int cmp_bytes(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* The stack an allocation is grouped by. */
static int64_t stack_key(const struct alloc_info *info)
{
	return info->stack_id;
}

/* The pcs of a stack (frame 0 first): how many, 0 when none. */
static int get_stack(struct memleak_bpf *skel, int64_t key, uint64_t *ips)
{
	int n = 0;

	if (key < 0)
		return 0;
	memset(ips, 0, MAX_STACK_DEPTH * sizeof(*ips));
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stack_traces), &(__u32){ (__u32)key }, ips))
		return 0;
	while (n < MAX_STACK_DEPTH && ips[n])
		n++;
	return n;
}

static void print_stack(struct memleak_bpf *skel, struct syms_proc *syms, int64_t key)
{
	uint64_t ips[MAX_STACK_DEPTH];
	int n = get_stack(skel, key, ips);

	if (!n)
		printf("\t[no stack: %s%s]\n", key < 0 ? "bpf_get_stackid: " : "not in the stack map",
		       key < 0 ? strerror((int)-key) : "");
	for (int i = 0; i < n; i++) {
		struct syms_result s;

		syms_resolve(syms, ips[i], 1, &s);
		printf("\t%d [<%016llx>] ", i, (unsigned long long)ips[i]);
		if (s.name)
			printf("%s+0x%llx [%s]\n", s.name, (unsigned long long)s.offset, s.module);
		else if (s.module)
			printf("[%s]\n", s.module);
		else
			printf("<null sym>\n");
	}
}

static int report(struct memleak_bpf *skel, struct syms_proc *syms)
{
	int fd = bpf_map__fd(skel->maps.allocs);
	struct timespec now;
	uint64_t key, next, cutoff;
	struct group *groups = NULL;
	struct alloc *allocs = NULL;
	size_t ng = 0, na = 0, cap_g = 0, cap_a = 0;
	bool first = true;
	time_t t = time(NULL);
	struct tm tm;

	clock_gettime(CLOCK_MONOTONIC, &now);
	cutoff = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec - env.min_age_ns;
	localtime_r(&t, &tm);
	printf("[%d:%d:%d] Top %d stacks with outstanding allocations:\n", tm.tm_hour, tm.tm_min, tm.tm_sec, env.top);
	while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		struct alloc_info info;
		int64_t stack;
		size_t g;

		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &info) || info.ts > cutoff)
			continue;
		stack = stack_key(&info);
		for (g = 0; g < ng && groups[g].stack != stack; g++)
			;
		if (g == ng) {
			if (ng == cap_g && !(groups = realloc(groups, (cap_g = cap_g * 2 + 64) * sizeof(*groups))))
				return -ENOMEM;
			groups[ng++] = (struct group){ .stack = stack, .first = UINT32_MAX };
		}
		groups[g].bytes += info.size;
		groups[g].count++;
		if (env.show_allocs) {
			if (na == cap_a && !(allocs = realloc(allocs, (cap_a = cap_a * 2 + 256) * sizeof(*allocs))))
				return -ENOMEM;
			allocs[na] = (struct alloc){ key, info.size, groups[g].first };
			groups[g].first = (uint32_t)na++;
		}
	}
	qsort(groups, ng, sizeof(*groups), cmp_bytes);
	for (size_t g = 0; g < ng && (int)g < env.top; g++) {
		printf("%llu bytes in %llu allocations from stack\n", (unsigned long long)groups[g].bytes,
		       (unsigned long long)groups[g].count);
		for (uint32_t a = groups[g].first; a != UINT32_MAX; a = allocs[a].next)
			printf("\taddr = %#llx size = %llu\n", (unsigned long long)allocs[a].addr,
			       (unsigned long long)allocs[a].size);
		print_stack(skel, syms, groups[g].stack);
	}
	fflush(stdout);
	free(groups);
	free(allocs);
	return 0;
}

/* ---- main ----------------------------------------------------------------------------------- */

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !env.verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Wait one interval (or until told to stop). */
static void wait_interval(struct memleak_bpf *skel, int seconds)
{
	(void)skel;
	for (int i = 0; i < seconds * 10 && !exiting && target_alive(); i++)
		usleep(100000);
}

int main(int argc, char **argv)
{
	struct memleak_bpf *skel;
	struct syms_proc *syms;
	int err = parse_args(argc, argv);

	if (err)
		return err;
	libbpf_set_print(libbpf_print);
	if (env.command && (env.pid = spawn_command(env.command)) < 0) {
		fprintf(stderr, "memleak: cannot run %s\n", env.command);
		return 1;
	}
	err = 1;
	skel = memleak_bpf__open();
	if (!skel) {
		fprintf(stderr, "memleak: cannot open the BPF object\n");
		goto out;
	}
	skel->rodata->min_size = env.min_size;
	skel->rodata->max_size = env.max_size;
	skel->rodata->sample_rate = env.sample_rate;
	skel->rodata->trace_all = env.trace_all;
	if (memleak_bpf__load(skel)) {
		fprintf(stderr, "memleak: cannot load the BPF programs (need root): %s\n", strerror(errno));
		goto out;
	}
	if (attach_all(skel))
		goto out;
	err = 0;
	syms = syms_proc_new(env.pid);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("Attaching to pid %d, Ctrl+C to quit.\n", env.pid);
	fflush(stdout);
	if (go_fd >= 0 && (write(go_fd, "g", 1) != 1 || close(go_fd))) {
		err = 1;
		goto out;
	}
	for (int n = 0; !exiting && n != env.count; n++) {
		bool alive;

		wait_interval(skel, env.interval);
		alive = target_alive();
		if (alive)
			syms_proc_refresh(syms);
		if ((err = report(skel, syms)))
			break;
		if (!alive) {
			printf("memleak: pid %d has exited\n", env.pid);
			break;
		}
	}
	syms_proc_free(syms);
out:
	memleak_bpf__destroy(skel);
	if (env.command)
		kill(env.pid, SIGTERM);
	return err ? 1 : 0;
}
