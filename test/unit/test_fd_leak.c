// SPDX-License-Identifier: GPL-2.0-only
/*
 * No file descriptor leaks over 10 000 events: the number of entries in /proc/self/fd is the same
 * before and after
 *  - 5000 dwunw_capture calls on a live child with a 64-byte stack window, so every frame's memory
 *    is read from the process (process_vm_readv), and the maps from /proc/PID/maps;
 *  - 1000 stack reader attach / regs / read / detach cycles on the child;
 *  - 200 attach attempts on a zombie and captures for a pid that does not exist (error paths);
 *  - 5000 dwunw_capture calls and 1000 reader reads with process_vm_readv refused by a seccomp
 *    filter (ENOSYS), so every read goes through /proc/PID/mem (opened per event, closed);
 *  - context init/shutdown and module open/put cycles.
 * Every capture must also give the same frames as the first one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif
#include "dwunw.h"
#include "tap.h"

#define CAPTURES     5000
#define CYCLES       1000
#define WINDOW       64
#define MAXF         64

static int count_fds(char *list, size_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0, self;
	size_t used = 0;

	if (!d)
		return -1;
	self = dirfd(d);
	if (list && len)
		list[0] = 0;
	while ((e = readdir(d))) {
		char path[300], target[256];
		ssize_t k;

		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		n++;
		if (!list)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, target, sizeof(target) - 1);
		target[k > 0 ? k : 0] = 0;
		used += (size_t)snprintf(list + used, used < len ? len - used : 0, "%s=%s ", e->d_name, target);
		if (used >= len)
			used = len;
	}
	closedir(d);
	return n;
}

static void check_fds(int before, const char *what)
{
	char list[2048];
	int after = count_fds(list, sizeof(list));

	if (!ok(after == before, "%s: %d file descriptors before, %d after", what, before, after))
		printf("  # open now: %s\n", list);
}

/* The child: a few frames deep in pause(), until killed. */
__attribute__((noinline)) static void deep(int n)
{
	if (n == 0)
		pause();
	else
		deep(n - 1);
	__asm__ volatile("" ::: "memory");
}

static pid_t start_child(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		deep(6);
		_exit(0);
	}
	/* Wait until it sleeps in pause(). */
	for (int i = 0; pid > 0 && i < 500; i++) {
		char path[64], buf[512], *p;
		int fd;
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S')
			break;
		usleep(10000);
	}
	usleep(50000);
	return pid;
}

static int freeze_regs(pid_t pid, struct dwunw_regs *regs, uint8_t *window)
{
	struct dwunw_stack_reader r;
	int err;

	if (dwunw_stack_reader_init(&r, pid, NULL) != DWUNW_OK)
		return -1;
	err = dwunw_stack_reader_attach(&r, pid);
	if (!err)
		err = dwunw_stack_reader_regs(&r, regs);
	if (!err)
		err = dwunw_stack_reader_read(&r, regs->regs[7], window, WINDOW);
	dwunw_stack_reader_detach(&r);
	if (err)
		return err;
	regs->stack = window;
	regs->stack_start = regs->regs[7];
	regs->stack_size = WINDOW;
	return DWUNW_OK;
}

struct result {
	int err;
	size_t nf;
	uint64_t pcs[MAXF];
	unsigned beyond;
};

static void capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs, struct result *out)
{
	struct dwunw_frame f[MAXF];
	size_t nf = MAXF;

	memset(out, 0, sizeof(*out));
	out->err = dwunw_capture(ctx, regs, f, &nf);
	out->nf = nf;
	for (size_t i = 0; i < nf; i++) {
		out->pcs[i] = f[i].pc;
		out->beyond += !!(f[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT);
	}
	dwunw_module_cache_release(ctx, f, nf);
}

static int same(const struct result *a, const struct result *b)
{
	return a->err == b->err && a->nf == b->nf && !memcmp(a->pcs, b->pcs, a->nf * sizeof(a->pcs[0]));
}

static unsigned captures(struct dwunw_ctx *ctx, const struct dwunw_regs *regs, const struct result *ref, unsigned n)
{
	unsigned wrong = 0;
	struct result r;

	for (unsigned i = 0; i < n; i++) {
		capture(ctx, regs, &r);
		wrong += !same(&r, ref);
	}
	return wrong;
}

static unsigned mem_fallbacks;

/* The audit line of an event whose reads fall back to /proc/PID/mem. */
static void audit(void *arg, const char *line)
{
	(void)arg;
	if (strstr(line, "process_vm_readv") && strstr(line, "/mem"))
		mem_fallbacks++;
}

#if defined(__x86_64__)
/* process_vm_readv fails with ENOSYS from now on, in this process. */
static int refuse_vm_readv(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
#endif

int main(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_regs regs, gone;
	struct result ref, r;
	uint8_t window[WINDOW], buf[256];
	struct timespec t0, t1;
	pid_t child, zombie;
	int fds0, fds, err;
	unsigned wrong;

#if !defined(__x86_64__)
	SKIP("x86_64 only (the seccomp filter and the register set)");
	return done_testing();
#else
	/* Warm up what stays open for the whole process (stdio, the libelf init). */
	if (!ok(dwunw_init(&ctx, NULL) == DWUNW_OK, "init"))
		return done_testing();
	child = start_child();
	if (!ok(child > 0, "child started"))
		return done_testing();
	memset(&regs, 0, sizeof(regs));
	err = freeze_regs(child, &regs, window);
	if (!ok(err == DWUNW_OK, "the child's registers and %d bytes of its stack (%s)", WINDOW, dwunw_errname(err)))
		goto out;
	capture(&ctx, &regs, &ref);
	ok(ref.nf >= 8 && ref.beyond > 0, "reference capture: %zu frames, %u read beyond the snapshot, %s", ref.nf,
	   ref.beyond, dwunw_errname(ref.err));

	/* 1. captures through process_vm_readv */
	fds0 = count_fds(NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wrong = captures(&ctx, &regs, &ref, CAPTURES);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	is_int(wrong, 0, "%d captures reading beyond the snapshot (process_vm_readv): all like the first (%.2f s)",
	       CAPTURES, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	check_fds(fds0, "captures via process_vm_readv");

	/* 2. reader cycles */
	fds = count_fds(NULL, 0);
	wrong = 0;
	for (unsigned i = 0; i < CYCLES; i++) {
		struct dwunw_stack_reader rd;
		struct dwunw_regs rr;
		int e = dwunw_stack_reader_init(&rd, child, NULL);
		if (!e)
			e = dwunw_stack_reader_attach(&rd, child);
		if (!e)
			e = dwunw_stack_reader_regs(&rd, &rr);
		if (!e)
			e = dwunw_stack_reader_read(&rd, rr.regs[7], buf, sizeof(buf));
		if (dwunw_stack_reader_detach(&rd) != DWUNW_OK)
			e = e ? e : DWUNW_ERR_IO;
		/* Resumed, pause() is restarted: caught between the restart and the syscall itself,
		 * the pc is the 2-byte syscall instruction before the usual one. */
		wrong += e != DWUNW_OK || (rr.pc != regs.pc && rr.pc != regs.pc - 2);
	}
	is_int(wrong, 0, "%d attach/regs/read/detach cycles", CYCLES);
	check_fds(fds, "stack reader cycles");

	/* 3. error paths: a zombie, a pid that does not exist */
	fds = count_fds(NULL, 0);
	fflush(stdout);
	zombie = fork();
	if (zombie == 0)
		_exit(0);
	{
		/* until it has exited, left unreaped (a sleep is not enough on a loaded machine) */
		siginfo_t si;
		while (waitid(P_PID, (id_t)zombie, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
	}
	wrong = 0;
	for (unsigned i = 0; i < 200; i++) {
		struct dwunw_stack_reader rd;
		dwunw_stack_reader_init(&rd, zombie, NULL);
		wrong += dwunw_stack_reader_attach(&rd, zombie) != DWUNW_ERR_NO_PROCESS;
		wrong += dwunw_stack_reader_read(&rd, regs.regs[7], buf, 8) == DWUNW_OK;
		dwunw_stack_reader_detach(&rd);
	}
	waitpid(zombie, NULL, 0);
	gone = regs;
	gone.pid = gone.tid = zombie;
	for (unsigned i = 0; i < 200; i++) {
		capture(&ctx, &gone, &r);
		wrong += r.err == DWUNW_OK;
		dwunw_maps_forget(&ctx, zombie);
	}
	is_int(wrong, 0, "200 attaches on a zombie (NO_PROCESS), 200 captures of a pid that is gone (errors)");
	check_fds(fds, "error paths");

	/* 4. contexts and modules */
	fds = count_fds(NULL, 0);
	wrong = 0;
	for (unsigned i = 0; i < 200; i++) {
		struct dwunw_ctx c2;
		struct dwunw_module *m;
		if (dwunw_init(&c2, NULL) != DWUNW_OK) {
			wrong++;
			continue;
		}
		if (dwunw_module_open(&c2, "/proc/self/exe", &m) == DWUNW_OK)
			dwunw_module_put(&c2, m);
		else
			wrong++;
		capture(&c2, &regs, &r);
		wrong += !same(&r, &ref);
		dwunw_shutdown(&c2);
	}
	is_int(wrong, 0, "200 contexts: init, module open/put, capture, shutdown");
	check_fds(fds, "context cycles");

	/* 5. the same with process_vm_readv refused: /proc/PID/mem, opened per event */
	if (refuse_vm_readv() != 0) {
		SKIP("cannot install a seccomp filter (%s): /proc/PID/mem path not covered", strerror(errno));
	} else {
		struct dwunw_stack_reader rd;
		struct dwunw_config cfg;
		struct dwunw_ctx c5;
		uint64_t fallback = 0;

		memset(&cfg, 0, sizeof(cfg));
		cfg.size = sizeof(cfg);
		cfg.audit = audit;
		/* Counted before the context: a loaded module keeps its file open until shutdown. */
		fds = count_fds(NULL, 0);
		if (!ok(dwunw_init(&c5, &cfg) == DWUNW_OK, "a context with an audit sink"))
			goto out;
		capture(&c5, &regs, &r);
		ok(same(&r, &ref) && mem_fallbacks == 1,
		   "process_vm_readv refused: the same frames through /proc/PID/mem (%zu, %s, %u fallback)", r.nf,
		   dwunw_errname(r.err), mem_fallbacks);
		mem_fallbacks = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		wrong = captures(&c5, &regs, &ref, CAPTURES);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		is_int(wrong, 0, "%d captures through /proc/PID/mem: all like the first (%.2f s)", CAPTURES,
		       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
		is_int(mem_fallbacks, CAPTURES, "each of them fell back to /proc/PID/mem (audit)");
		dwunw_shutdown(&c5);
		wrong = 0;
		dwunw_stack_reader_init(&rd, child, NULL);
		for (unsigned i = 0; i < CYCLES; i++)
			wrong += dwunw_stack_reader_read(&rd, regs.regs[7], buf, sizeof(buf)) != DWUNW_OK;
		fallback = rd.fallback_reads;
		is_int(wrong, 0, "%d reader reads through /proc/PID/mem (%llu fallback reads)", CYCLES,
		       (unsigned long long)fallback);
		ok(fallback >= CYCLES && (rd.flags & DWUNW_READER_NO_VM_READV), "the reader used /proc/PID/mem");
		check_fds(fds, "captures and reads via /proc/PID/mem");
	}
	check_fds(fds0, "all events");
out:
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	dwunw_shutdown(&ctx);
	return done_testing();
#endif
}
