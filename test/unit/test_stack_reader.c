// SPDX-License-Identifier: GPL-2.0-only
/* Tests of the stack reader against live children: remote reads, /proc/PID/mem fallback, ptrace attach/detach. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "tap.h"
#include "testutil.h"
#include "dwunw.h"
#include "utils/stack_reader.h"


/* Private bits of dwunw_stack_reader.flags: the signal held for re-delivery. */
#define HELD_SIG(r) (((r)->flags >> 8) & 0xff)

/*
 * Fault injection. A definition of ptrace() in the executable takes precedence over the C
 * library's, so the reader's calls come here. With inject_sig set, PTRACE_INTERRUPT is preceded by
 * that signal: the tracee, already seized, dequeues it into a signal-delivery-stop before the
 * interrupt arrives. That is the race between a signal and attach, made certain.
 */
static volatile int inject_sig;
static int injected;
/* With inject_vfork_fd >= 0, PTRACE_INTERRUPT is preceded by a 'v' written there: the vforker
 * (seized, still running) vforks and waits in state D when the interrupt arrives. */
static volatile int inject_vfork_fd = -1;

static char task_state(pid_t pid, pid_t tid);

long ptrace(enum __ptrace_request req, ...)
{
	va_list ap;
	pid_t pid;
	void *addr, *data;

	va_start(ap, req);
	pid = va_arg(ap, pid_t);
	addr = va_arg(ap, void *);
	data = va_arg(ap, void *);
	va_end(ap);
	if (req == PTRACE_INTERRUPT && inject_sig) {
		struct timespec ms = { 0, 1000000 };
		kill(pid, inject_sig);
		for (int i = 0; i < 2000 && task_state(pid, pid) != 't'; i++)
			nanosleep(&ms, NULL);
		injected++;
	}
	if (req == PTRACE_INTERRUPT && inject_vfork_fd >= 0) {
		struct timespec ms = { 0, 1000000 };
		char c = 'v';
		if (write(inject_vfork_fd, &c, 1) == 1)
			for (int i = 0; i < 2000 && task_state(pid, pid) != 'D'; i++)
				nanosleep(&ms, NULL);
		injected++;
	}
	return syscall(SYS_ptrace, req, pid, addr, data);
}

/* ---- children that are killed if the test times out ---------------------------------------- */

static pid_t kids[64];

static void kid_add(pid_t p)
{
	for (unsigned i = 0; i < 64; i++)
		if (!kids[i]) {
			kids[i] = p;
			return;
		}
}

static void kid_del(pid_t p)
{
	for (unsigned i = 0; i < 64; i++)
		if (kids[i] == p)
			kids[i] = 0;
}

/* At a timeout: no child left (kill only: async-signal-safe). */
static void kill_kids_now(void)
{
	for (unsigned i = 0; i < 64; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
}

static pid_t fork_kid(void)
{
	pid_t p;

	fflush(stdout);
	p = fork();
	if (p > 0)
		kid_add(p);
	return p;
}

/* Collect a child, waiting at most ms: its pid, 0 on timeout, -1 when already gone (ECHILD). */
static pid_t reap(pid_t p, int *status, unsigned ms)
{
	int st = 0;

	for (unsigned i = 0; i <= ms; i++) {
		pid_t w = waitpid(p, &st, WNOHANG | __WALL);
		if (w == p || (w < 0 && errno != EINTR)) {
			kid_del(p);
			if (status)
				*status = st;
			return w;
		}
		sleep_ms(1);
	}
	return 0;
}

/* ---- /proc helpers ------------------------------------------------------------------------- */

static char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Wait until the thread's state is one of `states`; the last state seen. */
static char wait_state(pid_t pid, pid_t tid, const char *states, unsigned ms)
{
	char s = '?';

	for (unsigned i = 0; i <= ms; i++) {
		s = task_state(pid, tid);
		if (strchr(states, s))
			return s;
		sleep_ms(1);
	}
	return s;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* The mapping of pid holding addr is executable and is this test binary. */
static int in_own_text(pid_t pid, uint64_t addr)
{
	char path[64], exe[512], line[1024];
	ssize_t n;
	FILE *f;
	int found = 0;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		char perms[8];
		int off = 0;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) < 3)
			continue;
		if (addr >= lo && addr < hi) {
			char *nl = strchr(line + off, '\n');
			if (nl)
				*nl = 0;
			found = perms[2] == 'x' && off && strcmp(line + off, exe) == 0;
			break;
		}
	}
	fclose(f);
	return found;
}

/* ---- audit / warning sink ------------------------------------------------------------------ */

struct log {
	char lines[32][400];
	unsigned n;
	unsigned attach_ok, detach_ok;
	unsigned holding, redelivering;   /* attach/detach lines about a held signal */
};

static void log_line(void *arg, const char *line)
{
	struct log *l = arg;

	snprintf(l->lines[l->n % 32], sizeof(l->lines[0]), "%s", line);
	l->n++;
	if (strstr(line, ": attach pid ") && strstr(line, ": ok"))
		l->attach_ok++;
	if (strstr(line, ": detach pid ") && strstr(line, ": ok"))
		l->detach_ok++;
	l->holding += strstr(line, ": attach pid ") && strstr(line, "holding signal");
	l->redelivering += strstr(line, ": detach pid ") && strstr(line, "re-delivering signal");
}

/* The most recent line containing s, or NULL. */
static const char *log_find(const struct log *l, const char *s)
{
	for (unsigned i = l->n; i > 0 && l->n - i < 32; i--)
		if (strstr(l->lines[(i - 1) % 32], s))
			return l->lines[(i - 1) % 32];
	return NULL;
}

static void log_reset(struct log *l)
{
	memset(l, 0, sizeof(*l));
}

/* ---- the target child ---------------------------------------------------------------------- */

#define HEAP_SIZE 16384
#define PAT_STACK(i) ((uint8_t)((i) * 7 + 1))
#define PAT_HEAP(i) ((uint8_t)(((i) * 13) ^ 0x5a))

enum { T_SLEEP, T_SPIN, T_THREAD };

struct hello {
	uint64_t stack;     /* 256 pattern bytes on the main thread's stack */
	uint64_t heap;      /* HEAP_SIZE pattern bytes */
	uint64_t edge;      /* 8 readable bytes (0xee) followed by an unmapped page */
	uint64_t spins;     /* T_SPIN: a counter the spin loop increments */
	int32_t tid2;       /* T_THREAD: the second thread */
	int32_t pad;
};

struct target {
	pid_t pid;
	int up;             /* hello, then one 'U' per SIGUSR1 handled */
	int down;           /* 'q': exit */
	struct hello h;
};

static int sig_fd = -1;
static volatile int32_t thread_tid;
static volatile uint64_t spins;

static void on_usr1(int sig)
{
	char c = 'U';
	(void)sig;
	if (write(sig_fd, &c, 1) < 0)
		_exit(9);
}

static void *spin_thread(void *arg)
{
	(void)arg;
	thread_tid = (int32_t)syscall(SYS_gettid);
	for (;;)
		__asm__ volatile("" ::: "memory");
	return NULL;
}

__attribute__((noinline, noreturn))
static void target_main(int out, int in, int mode)
{
	volatile uint8_t sbuf[256];
	struct sigaction sa;
	struct hello h;
	uint8_t *heap = malloc(HEAP_SIZE), *two;
	long pg = sysconf(_SC_PAGESIZE);
	pthread_t th;

	for (unsigned i = 0; i < sizeof(sbuf); i++)
		sbuf[i] = PAT_STACK(i);
	for (unsigned i = 0; heap && i < HEAP_SIZE; i++)
		heap[i] = PAT_HEAP(i);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sig_fd = out;
	memset(&h, 0, sizeof(h));
	if (mode == T_THREAD) {
		if (pthread_create(&th, NULL, spin_thread, NULL) != 0)
			_exit(8);
		while (!thread_tid)
			sched_yield();
		h.tid2 = thread_tid;
	}
	/* The hole last: nothing maps into it afterwards. */
	two = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (two == MAP_FAILED || !heap)
		_exit(7);
	memset(two, 0xee, pg);
	munmap(two + pg, pg);
	h.stack = (uint64_t)(uintptr_t)sbuf;
	h.heap = (uint64_t)(uintptr_t)heap;
	h.edge = (uint64_t)(uintptr_t)(two + pg - 8);
	h.spins = (uint64_t)(uintptr_t)&spins;
	if (write(out, &h, sizeof(h)) != sizeof(h))
		_exit(6);
	if (mode == T_SPIN)
		for (;;) {
			sbuf[0] = sbuf[0];
			spins++;
		}
	for (;;) {
		char c;
		ssize_t n = read(in, &c, 1);
		if (n == 0 || (n == 1 && c == 'q'))
			_exit(0);
	}
}

static int start_target(struct target *t, int mode)
{
	int up[2], down[2];
	struct pollfd p;

	memset(t, 0, sizeof(*t));
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return -1;
	t->pid = fork_kid();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		close(up[0]);
		close(down[1]);
		target_main(up[1], down[0], mode);
	}
	close(up[1]);
	close(down[0]);
	t->up = up[0];
	t->down = down[1];
	p = (struct pollfd){ .fd = t->up, .events = POLLIN };
	if (poll(&p, 1, 5000) != 1 || read(t->up, &t->h, sizeof(t->h)) != sizeof(t->h))
		return -1;
	return 0;
}

static void stop_target(struct target *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		reap(t->pid, NULL, 5000);
	}
	close(t->up);
	close(t->down);
	t->pid = 0;
}

/* 'U' bytes the target's SIGUSR1 handler wrote within ms. */
static int count_acks(struct target *t, unsigned ms)
{
	struct pollfd p = { .fd = t->up, .events = POLLIN };
	int n = 0;
	char c;

	while (poll(&p, 1, (int)ms) == 1 && read(t->up, &c, 1) == 1)
		n += c == 'U';
	return n;
}

static int check_stack(const uint8_t *b, size_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != PAT_STACK(off + i))
			return 0;
	return 1;
}

static int check_heap(const uint8_t *b, size_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != PAT_HEAP(off + i))
			return 0;
	return 1;
}

/* ---- dw_remote ------------------------------------------------------------------------------ */

static void test_remote(struct target *t)
{
	struct dw_remote r;
	struct log log;
	uint8_t sb[256], hb[HEAP_SIZE], a[64], b[100], c[16];
	uint64_t reads;
	int fds = count_fds();

	log_reset(&log);
	dw_remote_begin(&r, t->pid, log_line, &log);
	is_int(r.mem_fd, -1, "remote: no /proc/PID/mem fd before it is needed");
	is_int(dw_remote_read(&r, t->h.stack, sb, sizeof(sb)), DWUNW_OK, "remote: read the stack buffer");
	ok(check_stack(sb, 0, sizeof(sb)), "remote: stack bytes match");
	is_int(dw_remote_read(&r, t->h.heap, hb, sizeof(hb)), DWUNW_OK, "remote: read the heap buffer");
	ok(check_heap(hb, 0, sizeof(hb)), "remote: heap bytes match");
	ok(r.reads == 2 && r.fallback_reads == 0 && r.mem_fd == -1, "remote: two process_vm_readv calls, no fallback");
	is_int(dw_remote_read(&r, t->h.stack, sb, 0), DWUNW_OK, "remote: empty read");

	{
		struct dw_remote_iov v[2] = { { t->h.stack + 16, a, sizeof(a) }, { t->h.heap + 1000, b, sizeof(b) } };
		reads = r.reads;
		is_int(dw_remote_readv(&r, v, 2), DWUNW_OK, "readv: two ranges");
		ok(check_stack(a, 16, sizeof(a)) && check_heap(b, 1000, sizeof(b)), "readv: both ranges match");
		is_int(r.reads - reads, 1, "readv: one system call");
	}
	{
		/* More ranges than IOV_MAX: split in two calls. */
		enum { N = 1500 };
		static struct dw_remote_iov v[N];
		static uint8_t out[N][8];
		int good = 1;
		for (unsigned i = 0; i < N; i++)
			v[i] = (struct dw_remote_iov){ t->h.heap + (i * 8) % (HEAP_SIZE - 8), out[i], i % 100 == 7 ? 0 : 8 };
		memset(out, 0, sizeof(out));
		reads = r.reads;
		is_int(dw_remote_readv(&r, v, N), DWUNW_OK, "readv: 1500 ranges (some empty)");
		for (unsigned i = 0; i < N; i++)
			if (v[i].len && !check_heap(out[i], (i * 8) % (HEAP_SIZE - 8), 8))
				good = 0;
		ok(good, "readv: 1500 ranges match");
		is_int(r.reads - reads, 2, "readv: split into two calls (IOV_MAX)");
	}

	is_int(dw_remote_read(&r, 0x1000, c, 8), DWUNW_ERR_INVALID_ARG, "remote: unmapped address -> INVALID_ARG");
	is_int(r.last_errno, EFAULT, "remote: last_errno EFAULT");
	is_int(r.last_err, DWUNW_ERR_INVALID_ARG, "remote: last_err recorded");
	is_int(dw_remote_read(&r, t->h.edge, c, 8), DWUNW_OK, "remote: last bytes before a hole");
	is_int(dw_remote_read(&r, t->h.edge, c, 16), DWUNW_ERR_INVALID_ARG, "remote: read running into a hole (short) -> INVALID_ARG");
	is_int(dw_remote_read(&r, UINT64_MAX - 3, c, 8), DWUNW_ERR_INVALID_ARG, "remote: wrapping range -> INVALID_ARG");
	{
		struct dw_remote_iov v[3] = {
			{ t->h.stack, a, 32 }, { t->h.edge, c, 16 }, { t->h.heap, b, 32 },
		};
		memset(a, 0, sizeof(a));
		is_int(dw_remote_readv(&r, v, 3), DWUNW_ERR_INVALID_ARG, "readv: partial (middle range hits a hole) -> INVALID_ARG");
		ok(check_stack(a, 0, 32), "readv: the range before the hole was read");
		v[1] = (struct dw_remote_iov){ t->h.stack + 32, c, 16 };
		v[0] = (struct dw_remote_iov){ 0x1000, a, 8 };
		is_int(dw_remote_readv(&r, v, 3), DWUNW_ERR_INVALID_ARG, "readv: first range unmapped -> INVALID_ARG");
		v[0] = (struct dw_remote_iov){ t->h.stack, a, 8 };
		v[2] = (struct dw_remote_iov){ t->h.edge, b, 9 };
		is_int(dw_remote_readv(&r, v, 3), DWUNW_ERR_INVALID_ARG, "readv: last range runs into a hole -> INVALID_ARG");
		ok(check_stack(c, 32, 16), "readv: ranges before it were read");
	}
	is_int(log.n, 0, "remote: no audit line without a fallback");
	dw_remote_end(&r);
	is_int(count_fds(), fds, "remote: no fd left");
}

static void test_remote_fallback(struct target *t)
{
	struct dw_remote r;
	uint8_t sb[256], hb[512], c[16];
	int fds = count_fds();

	dw_remote_begin(&r, t->pid, NULL, NULL);
	r.vm_unusable = 1; /* as after ENOSYS/EPERM */
	memset(sb, 0, sizeof(sb));
	is_int(dw_remote_read(&r, t->h.stack, sb, sizeof(sb)), DWUNW_OK, "fallback: read the stack through /proc/PID/mem");
	ok(check_stack(sb, 0, sizeof(sb)), "fallback: stack bytes match");
	ok(r.reads == 0 && r.fallback_reads >= 1, "fallback: no process_vm_readv, pread used");
	ok(r.mem_fd >= 0, "fallback: /proc/PID/mem open while the event lasts");
	{
		struct dw_remote_iov v[2] = { { t->h.heap + 100, hb, sizeof(hb) }, { t->h.stack + 8, c, 16 } };
		is_int(dw_remote_readv(&r, v, 2), DWUNW_OK, "fallback: readv");
		ok(check_heap(hb, 100, sizeof(hb)) && check_stack(c, 8, 16), "fallback: readv bytes match");
	}
	is_int(dw_remote_read(&r, 0x1000, c, 8), DWUNW_ERR_INVALID_ARG, "fallback: unmapped address -> INVALID_ARG");
	is_int(r.last_errno, EIO, "fallback: last_errno EIO");
	is_int(dw_remote_read(&r, t->h.edge, c, 16), DWUNW_ERR_INVALID_ARG, "fallback: running into a hole -> INVALID_ARG");
	is_int(dw_remote_read(&r, (uint64_t)INT64_MAX + 1, c, 8), DWUNW_ERR_INVALID_ARG, "fallback: offset beyond off_t -> INVALID_ARG");
	is_int(count_fds(), fds + 1, "fallback: one fd while the event lasts");
	dw_remote_end(&r);
	is_int(r.mem_fd, -1, "fallback: closed by dw_remote_end");
	is_int(count_fds(), fds, "fallback: no fd left");
}

/* A process that exited: reaped (no /proc entry) and zombie (no address space). */
static void test_remote_gone(void)
{
	struct dw_remote r;
	uint8_t b[8];
	pid_t p;

	p = fork_kid();
	if (p == 0)
		_exit(0);
	wait_state(p, p, "Z", 2000);
	dw_remote_begin(&r, p, NULL, NULL);
	is_int(dw_remote_read(&r, 0x400000, b, 8), DWUNW_ERR_NO_PROCESS, "gone: zombie -> NO_PROCESS");
	r.vm_unusable = 1;
	is_int(dw_remote_read(&r, 0x400000, b, 8), DWUNW_ERR_NO_PROCESS, "gone: zombie through /proc/PID/mem -> NO_PROCESS");
	dw_remote_end(&r);
	reap(p, NULL, 2000);

	dw_remote_begin(&r, p, NULL, NULL);
	is_int(dw_remote_read(&r, 0x400000, b, 8), DWUNW_ERR_NO_PROCESS, "gone: reaped -> NO_PROCESS");
	is_int(r.last_errno, ESRCH, "gone: ESRCH");
	r.vm_unusable = 1;
	is_int(dw_remote_read(&r, 0x400000, b, 8), DWUNW_ERR_NO_PROCESS, "gone: reaped through /proc/PID/mem -> NO_PROCESS");
	is_int(r.last_errno, ENOENT, "gone: open ENOENT");
	ok(r.mem_unusable, "gone: /proc/PID/mem marked unusable");
	is_int(dw_remote_read(&r, 0x400000, b, 8), DWUNW_ERR_NO_PROCESS, "gone: again, without retrying the open");
	dw_remote_end(&r);
}

/*
 * process_vm_readv refused for real: a child installs a seccomp filter failing it with `err`,
 * then reads the target. Exit status: 0, or the number of the first failed check.
 */
static int seccomp_child(struct target *t, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	struct dwunw_config cfg;
	struct dwunw_stack_reader sr;
	struct dw_remote r;
	struct log log;
	char want[160], eb[64];
	uint8_t sb[64], hb[64];
	uint64_t fb;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 100;
	log_reset(&log);
	dw_remote_begin(&r, t->pid, log_line, &log);
	if (dw_remote_read(&r, t->h.stack, sb, sizeof(sb)) != DWUNW_OK || !check_stack(sb, 0, sizeof(sb)))
		return 1;
	if (!r.vm_unusable || r.reads != 1 || r.fallback_reads < 1)
		return 2;
	snprintf(eb, sizeof(eb), "%s", strerror(err));
	snprintf(want, sizeof(want), "dwunw: pid %d: process_vm_readv: %s; reading /proc/%d/mem", t->pid, eb, t->pid);
	if (log.n != 1 || strcmp(log.lines[0], want) != 0)
		return 3;
	fb = r.fallback_reads;
	{
		struct dw_remote_iov v[2] = { { t->h.heap, hb, 8 }, { t->h.heap + 8, hb + 8, 8 } };
		if (dw_remote_readv(&r, v, 2) != DWUNW_OK || !check_heap(hb, 0, 16))
			return 4;
	}
	if (r.reads != 1 || r.fallback_reads != fb + 2 || log.n != 1)
		return 5; /* straight to the fallback, no second audit line */
	dw_remote_end(&r);

	/* readv meeting the refusal first */
	dw_remote_begin(&r, t->pid, NULL, NULL);
	{
		struct dw_remote_iov v[2] = { { t->h.heap, hb, 8 }, { t->h.stack, sb, 8 } };
		if (dw_remote_readv(&r, v, 2) != DWUNW_OK || !check_heap(hb, 0, 8) || !check_stack(sb, 0, 8) ||
		    !r.vm_unusable)
			return 6;
	}
	dw_remote_end(&r);

	/* the public reader remembers it */
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.audit = log_line;
	cfg.audit_arg = &log;
	log_reset(&log);
	if (dwunw_stack_reader_init(&sr, t->pid, &cfg) != DWUNW_OK)
		return 7;
	if (dwunw_stack_reader_read(&sr, t->h.stack, sb, 8) != DWUNW_OK || !check_stack(sb, 0, 8))
		return 8;
	if (!(sr.flags & DWUNW_READER_NO_VM_READV) || sr.reads != 1 || sr.fallback_reads != 1 || log.n != 1)
		return 9;
	if (dwunw_stack_reader_read(&sr, t->h.heap, hb, 8) != DWUNW_OK || sr.reads != 1 || sr.fallback_reads != 2)
		return 10;
	return 0;
}

static void test_remote_seccomp(struct target *t)
{
	const int errs[2] = { EPERM, ENOSYS };

	for (int i = 0; i < 2; i++) {
		int st = 0;
		pid_t p = fork_kid();
		if (p == 0)
			_exit(seccomp_child(t, errs[i]));
		reap(p, &st, 10000);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 100) {
			SKIP("seccomp filters unavailable");
			continue;
		}
		if (!ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "seccomp: process_vm_readv failing with %s -> /proc/PID/mem, audited",
			errs[i] == EPERM ? "EPERM" : "ENOSYS"))
			printf("  # child status 0x%x (exit %d = failed check)\n", st, WEXITSTATUS(st));
	}
}

/* ---- the public reader ---------------------------------------------------------------------- */

static void test_reader(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct dwunw_config cfg;
	struct dwunw_regs regs;
	struct log audit, warn;
	uint8_t sb[256];
	char want[96];
	int fds;

	if (!ok(start_target(&t, T_SPIN) == 0, "reader: spinning target started"))
		return;
	log_reset(&audit);
	log_reset(&warn);

	is_int(dwunw_stack_reader_init(&r, 0, NULL), DWUNW_ERR_INVALID_ARG, "init: pid 0 refused");
	is_int(dwunw_stack_reader_init(NULL, 1, NULL), DWUNW_ERR_INVALID_ARG, "init: NULL reader refused");
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = 8;
	is_int(dwunw_stack_reader_init(&r, t.pid, &cfg), DWUNW_ERR_INVALID_ARG, "init: config too small refused");
	is_int(dwunw_stack_reader_init(&r, t.pid, NULL), DWUNW_OK, "init: no config");
	ok(r.pid == t.pid && r.tid == 0 && r.flags == 0 && !r.audit && !r.warn, "init: fields");
	cfg.size = sizeof(cfg);
	cfg.audit = log_line;
	cfg.audit_arg = &audit;
	cfg.warn = log_line;
	cfg.warn_arg = &warn;
	is_int(dwunw_stack_reader_init(&r, t.pid, &cfg), DWUNW_OK, "init: with sinks");
	ok(r.audit == log_line && r.audit_arg == &audit && r.warn == log_line && r.warn_arg == &warn, "init: sinks copied");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "detach: not attached is fine");
	is_int(audit.n, 0, "detach: nothing to audit when not attached");
	is_int(dwunw_stack_reader_regs(&r, &regs), DWUNW_ERR_INVALID_ARG, "regs: not attached refused");

	{
		/* in its loop, not on the way back from write(): the counter moves */
		struct dw_remote dr;
		uint64_t a = 0, b = 0;
		dw_remote_begin(&dr, t.pid, NULL, NULL);
		for (int i = 0; i < 2000 && a == b; i++) {
			dw_remote_read(&dr, t.h.spins, &a, 8);
			sleep_ms(1);
			dw_remote_read(&dr, t.h.spins, &b, 8);
		}
		ok(a != b, "target spinning before attach");
	}
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "attach");
	ok((r.flags & DWUNW_READER_ATTACHED) && r.tid == t.pid, "attach: flags and tid");
	{
		char s = task_state(t.pid, t.pid);
		if (!ok(s == 't', "attach: thread in tracing stop ('t')"))
			printf("  # state '%c'\n", s);
	}
	snprintf(want, sizeof(want), "dwunw: attach pid %d tid %d: ok (", t.pid, t.pid);
	ok(audit.n == 1 && strncmp(audit.lines[0], want, strlen(want)) == 0 && strstr(audit.lines[0], " us)"),
	   "attach: audit line '%s'", audit.n ? audit.lines[0] : "");
	is_int(warn.n, 0, "attach: no warning for a dumpable target");
	ok(!(r.flags & DWUNW_READER_NOT_DUMPABLE), "attach: target not flagged non-dumpable");
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "attach: again to the same thread is a no-op");
	is_int(dwunw_stack_reader_attach(&r, t.pid + 1), DWUNW_ERR_INVALID_ARG, "attach: another thread while attached refused");

	memset(&regs, 0xaa, sizeof(regs));
	is_int(dwunw_stack_reader_regs(&r, &regs), DWUNW_OK, "regs");
	ok(regs.pid == t.pid && regs.tid == t.pid, "regs: pid and tid");
#if defined(__x86_64__)
	is_int(regs.arch, DWUNW_ARCH_X86_64, "regs: arch x86_64");
	is_hex(regs.valid & 0x1ffff, 0x1ffff, "regs: 17 registers valid");
	ok(regs.pc == regs.regs[16], "regs: pc = regs[16]");
	if (!ok(in_own_text(t.pid, regs.pc), "regs: rip in the test binary's code (the spin loop)"))
		printf("  # rip 0x%llx\n", (unsigned long long)regs.pc);
	if (!ok(regs.regs[7] <= t.h.stack && t.h.stack - regs.regs[7] < 65536, "regs: rsp just below the stack buffer"))
		printf("  # rsp 0x%llx buffer 0x%llx\n", (unsigned long long)regs.regs[7], (unsigned long long)t.h.stack);
	{
		/* The registers and the memory agree: the stack holds what the thread wrote. */
		uint64_t word;
		ok(dwunw_stack_reader_read(&r, regs.regs[7], &word, 8) == DWUNW_OK, "regs: stack at rsp readable");
	}
#endif
	memset(sb, 0, sizeof(sb));
	is_int(dwunw_stack_reader_read(&r, t.h.stack, sb, sizeof(sb)), DWUNW_OK, "read: stack buffer");
	ok(check_stack(sb, 0, sizeof(sb)), "read: bytes match");
	ok(r.reads >= 1 && r.fallback_reads == 0, "read: counted as process_vm_readv");
	fds = count_fds();
	r.flags |= DWUNW_READER_NO_VM_READV;
	memset(sb, 0, sizeof(sb));
	is_int(dwunw_stack_reader_read(&r, t.h.stack, sb, sizeof(sb)), DWUNW_OK, "read: through /proc/PID/mem");
	ok(check_stack(sb, 0, sizeof(sb)) && r.fallback_reads >= 1, "read: fallback bytes match, counted");
	is_int(count_fds(), fds, "read: /proc/PID/mem closed after the call");
	is_int(dwunw_stack_reader_read(&r, 0x1000, sb, 8), DWUNW_ERR_INVALID_ARG, "read: unmapped -> INVALID_ARG");
	is_int(r.last_errno, EIO, "read: last_errno");
	r.flags &= ~DWUNW_READER_NO_VM_READV;

	log_reset(&audit);
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "detach");
	ok(!(r.flags & DWUNW_READER_ATTACHED) && r.tid == 0, "detach: flags and tid cleared");
	snprintf(want, sizeof(want), "dwunw: detach pid %d tid %d: ok (", t.pid, t.pid);
	ok(audit.n == 1 && strncmp(audit.lines[0], want, strlen(want)) == 0, "detach: audit line '%s'",
	   audit.n ? audit.lines[0] : "");
	{
		char s = wait_state(t.pid, t.pid, "RS", 1000);
		if (!ok(s == 'R' || s == 'S', "detach: thread runs again"))
			printf("  # state '%c'\n", s);
	}
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "detach: twice is fine");
	is_int(dwunw_stack_reader_regs(&r, &regs), DWUNW_ERR_INVALID_ARG, "regs: after detach refused");
	stop_target(&t);
}

/* A thread other than the main one; tids that are not threads of the process. */
static void test_thread(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct dwunw_regs regs;
	struct log audit;

	if (!ok(start_target(&t, T_THREAD) == 0 && t.h.tid2 > 0, "thread: target with a second thread"))
		return;
	log_reset(&audit);
	{
		struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
		dwunw_stack_reader_init(&r, t.pid, &cfg);
	}
	is_int(dwunw_stack_reader_attach(&r, t.h.tid2), DWUNW_OK, "thread: attach the second thread");
	ok(task_state(t.pid, t.h.tid2) == 't', "thread: it is stopped");
	{
		/* the main thread wrote its hello and goes on into read(): 'R' for a moment (longer
		 * through ASan's interceptors), then 'S'; stopped by the attach it would stay 't' */
		char s = wait_state(t.pid, t.pid, "S", 2000);
		ok(s == 'S', "thread: the main thread is not (state '%c')", s);
	}
	is_int(dwunw_stack_reader_regs(&r, &regs), DWUNW_OK, "thread: regs");
	ok(regs.tid == t.h.tid2 && regs.pid == t.pid, "thread: regs name the thread");
#if defined(__x86_64__)
	ok(in_own_text(t.pid, regs.pc), "thread: rip in the spin loop");
#endif
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "thread: detach");
	ok(strchr("R", wait_state(t.pid, t.h.tid2, "R", 1000)), "thread: running again");

	is_int(dwunw_stack_reader_attach(&r, getpid()), DWUNW_ERR_INVALID_ARG, "thread: a tid of another process refused");
	ok(log_find(&audit, "belongs to pid"), "thread: audit says whose thread it is");
	is_int(dwunw_stack_reader_attach(&r, 0x3ffffff0), DWUNW_ERR_NO_PROCESS, "thread: no such thread -> NO_PROCESS");
	ok(!(r.flags & DWUNW_READER_ATTACHED), "thread: nothing attached after the failures");
	stop_target(&t);
}

/* Signals sent to a stopped thread are delivered after detach, exactly once. */
struct sender {
	struct target *t;
	int n, sent, acked, lost;
	volatile int done;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct pollfd p = { .fd = s->t->up, .events = POLLIN };
	char c;

	for (int i = 0; i < s->n; i++) {
		kill(s->t->pid, SIGUSR1);
		s->sent++;
		if (poll(&p, 1, 5000) != 1 || read(s->t->up, &c, 1) != 1) {
			s->lost++;
			break;
		}
		s->acked += c == 'U';
	}
	s->done = 1;
	return NULL;
}

static void test_signals(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	int held = 0, cycles = 0, fails = 0;

	if (!ok(start_target(&t, T_SLEEP) == 0, "signals: sleeping target started"))
		return;
	log_reset(&audit);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "signals: attach");
	kill(t.pid, SIGUSR1);
	is_int(count_acks(&t, 100), 0, "signals: the handler does not run while the thread is stopped");
	ok(task_state(t.pid, t.pid) == 't', "signals: still stopped after the signal");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "signals: detach");
	is_int(count_acks(&t, 2000), 1, "signals: the handler ran exactly once after detach");
	is_int(count_acks(&t, 100), 0, "signals: and not again");

	/* Race signals with attach/detach cycles: none may be lost or doubled. A signal dequeued
	 * between PTRACE_SEIZE and PTRACE_INTERRUPT is reported as a signal-delivery-stop, held and
	 * handed back at detach. */
	{
		struct sender s = { .t = &t, .n = 300 };
		pthread_t th;

		if (!ok(pthread_create(&th, NULL, sender_main, &s) == 0, "signals: sender thread"))
			goto out;
		while (!s.done && cycles < 200000) {
			if (dwunw_stack_reader_attach(&r, t.pid) != DWUNW_OK) {
				fails++;
				continue;
			}
			held += HELD_SIG(&r) != 0;
			if (dwunw_stack_reader_detach(&r) != DWUNW_OK)
				fails++;
			cycles++;
			if (cycles % 4 == 0)
				usleep(20);
		}
		pthread_join(th, NULL);
		is_int(fails, 0, "signals: %d attach/detach cycles under a signal storm", cycles);
		ok(s.lost == 0 && s.acked == s.sent && s.sent == s.n, "signals: %d sent, %d handled, none lost", s.sent, s.acked);
		is_int(count_acks(&t, 100), 0, "signals: none doubled");
		printf("# %d attaches met a signal-delivery-stop (signal held and re-delivered)\n", held);
		ok(audit.holding == (unsigned)held && audit.redelivering == (unsigned)held,
		   "signals: each held signal audited at attach and at detach");
	}
out:
	stop_target(&t);
}

/* The signal-delivery-stop made certain (see ptrace() above): held at attach, re-delivered at detach. */
static void test_held_signal(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct dwunw_regs regs;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	char want[96];

	if (!ok(start_target(&t, T_SLEEP) == 0, "held: target started"))
		return;
	log_reset(&audit);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	inject_sig = SIGUSR1;
	injected = 0;
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "held: attach while SIGUSR1 is being delivered");
	inject_sig = 0;
	is_int(injected, 1, "held: the signal was sent between PTRACE_SEIZE and PTRACE_INTERRUPT");
	is_int(HELD_SIG(&r), SIGUSR1, "held: the signal-delivery-stop's signal is held");
	snprintf(want, sizeof(want), "dwunw: attach pid %d tid %d: ok, holding signal %d", t.pid, t.pid, SIGUSR1);
	ok(log_find(&audit, want), "held: audit '%s'", audit.n ? audit.lines[0] : "");
	ok(task_state(t.pid, t.pid) == 't', "held: thread stopped");
	is_int(dwunw_stack_reader_regs(&r, &regs), DWUNW_OK, "held: registers readable in a signal-delivery-stop");
	is_int(count_acks(&t, 100), 0, "held: handler not run while attached");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "held: detach");
	snprintf(want, sizeof(want), "dwunw: detach pid %d tid %d: ok, re-delivering signal %d", t.pid, t.pid, SIGUSR1);
	ok(log_find(&audit, want), "held: detach audit says the signal is re-delivered");
	is_int(count_acks(&t, 2000), 1, "held: the handler ran exactly once after detach");
	ok(strchr("S", wait_state(t.pid, t.pid, "S", 1000)), "held: the pending interrupt left no stop behind");
	is_int(HELD_SIG(&r), 0, "held: nothing held any more");
	/* a normal cycle afterwards */
	ok(dwunw_stack_reader_attach(&r, t.pid) == DWUNW_OK && HELD_SIG(&r) == 0 &&
	   dwunw_stack_reader_detach(&r) == DWUNW_OK, "held: next cycle is a plain interrupt stop");
	is_int(count_acks(&t, 100), 0, "held: no second delivery");
	stop_target(&t);
}

/* A stopped (SIGSTOP) process stays stopped; a thread killed while attached is collected. */
static void test_stops_and_kills(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct dwunw_regs regs;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	uint8_t b[16];
	int err, st;

	if (!ok(start_target(&t, T_SLEEP) == 0, "stops: target started"))
		return;
	log_reset(&audit);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	kill(t.pid, SIGSTOP);
	ok(wait_state(t.pid, t.pid, "T", 1000) == 'T', "stops: target group-stopped by SIGSTOP");
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "stops: attach to a stopped process");
	is_int(HELD_SIG(&r), 0, "stops: the group-stop is not a signal to re-deliver");
	ok(dwunw_stack_reader_read(&r, t.h.stack, b, 16) == DWUNW_OK && check_stack(b, 0, 16), "stops: read");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "stops: detach");
	sleep_ms(50);
	ok(task_state(t.pid, t.pid) == 'T', "stops: still stopped after detach (as before attach)");
	kill(t.pid, SIGCONT);
	ok(wait_state(t.pid, t.pid, "S", 1000) == 'S', "stops: SIGCONT resumes it");

	/* SIGKILL while attached */
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "kill: attach");
	kill(t.pid, SIGKILL);
	sleep_ms(20);
	err = dwunw_stack_reader_regs(&r, &regs);
	ok(err == DWUNW_ERR_NO_PROCESS || err == DWUNW_OK, "kill: regs of a killed thread: %s", dwunw_errname(err));
	is_int(dwunw_stack_reader_detach(&r), DWUNW_ERR_NO_PROCESS, "kill: detach -> NO_PROCESS");
	ok(!(r.flags & DWUNW_READER_ATTACHED), "kill: no longer attached");
	ok(reap(t.pid, &st, 2000) != 0, "kill: the child's exit was collected (not left a traced zombie)");
	t.pid = 0;
	stop_target(&t);
}

/* ptrace binds the tracee to the attaching thread: detach from another thread is refused. */
struct detacher {
	struct dwunw_stack_reader *r;
	int err;
};

static void *detach_main(void *arg)
{
	struct detacher *d = arg;
	d->err = dwunw_stack_reader_detach(d->r);
	return NULL;
}

static void test_wrong_thread(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	struct detacher d = { .r = &r };
	pthread_t th;

	if (!ok(start_target(&t, T_SLEEP) == 0, "wrong thread: target started"))
		return;
	log_reset(&audit);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "wrong thread: attach");
	if (pthread_create(&th, NULL, detach_main, &d) == 0)
		pthread_join(th, NULL);
	is_int(d.err, DWUNW_ERR_INVALID_ARG, "wrong thread: detach from another thread refused");
	ok((r.flags & DWUNW_READER_ATTACHED) && task_state(t.pid, t.pid) == 't', "wrong thread: still attached and stopped");
	ok(log_find(&audit, "is the tracer"), "wrong thread: audit explains");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "wrong thread: detach from the tracer thread");
	ok(strchr("S", wait_state(t.pid, t.pid, "S", 1000)), "wrong thread: target runs");
	stop_target(&t);
}

/* Targets that exit while being attached: never a hang, never a thread left stopped. */
static void test_exit_race(void)
{
	static const char *const reasons[4] = { "no such thread", "thread exited (", "PTRACE_SEIZE refused", "before it stopped" };
	int okc = 0, gone = 0, other = 0, stuck = 0, stopped = 0, why[4] = { 0 };
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };

	for (int i = 0; i < 200; i++) {
		struct dwunw_stack_reader r;
		pid_t p = fork_kid();
		int err, st;

		if (p == 0) {
			/* exit at once, or after a few microseconds of work */
			volatile unsigned spin = 0;
			for (unsigned k = 0; k < (unsigned)(i % 8) * 2000; k++)
				spin++;
			_exit(0);
		}
		if (i % 4 == 1)
			usleep((useconds_t)(i % 50));
		else if (i % 4 == 2)
			wait_state(p, p, "Z", 1000); /* certainly exited */
		log_reset(&audit);
		dwunw_stack_reader_init(&r, p, &cfg);
		err = dwunw_stack_reader_attach(&r, p);
		if (err == DWUNW_ERR_NO_PROCESS)
			for (unsigned k = 0; k < 4; k++)
				if (log_find(&audit, reasons[k]))
					why[k]++;
		if (err == DWUNW_OK) {
			okc++;
			if (task_state(p, p) != 't')
				stopped++; /* attached but not stopped?! */
			if (dwunw_stack_reader_detach(&r) != DWUNW_OK)
				other++;
		} else if (err == DWUNW_ERR_NO_PROCESS) {
			gone++;
		} else {
			other++;
			printf("  # iteration %d: %s\n", i, dwunw_errname(err));
		}
		if (r.flags & DWUNW_READER_ATTACHED)
			other++;
		/* The child must finish on its own: its pid, or ECHILD when the reader collected it. */
		if (reap(p, &st, 3000) == 0) {
			stuck++;
			kill(p, SIGKILL);
			reap(p, NULL, 3000);
		}
	}
	printf("# exit race: %d attached, %d gone (%d no thread, %d exited, %d seize, %d waitpid)\n",
	       okc, gone, why[0], why[1], why[2], why[3]);
	is_int(other, 0, "exit race: only OK or NO_PROCESS, nothing left attached");
	is_int(stopped, 0, "exit race: attached threads were stopped");
	is_int(stuck, 0, "exit race: no child left stopped (all 200 exited)");
	ok(okc + gone == 200, "exit race: 200 attempts");
}

/* A thread traced by another tracer: PERM, naming the tracer. */
static void test_traced(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	int ack[2];
	pid_t tracer;
	char c, want[64];

	if (!ok(start_target(&t, T_SLEEP) == 0 && pipe2(ack, O_CLOEXEC) == 0, "traced: target started"))
		return;
	tracer = fork_kid();
	if (tracer == 0) {
		c = ptrace(PTRACE_SEIZE, t.pid, NULL, NULL) == 0 ? 'y' : 'n';
		if (write(ack[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	if (!ok(read(ack[0], &c, 1) == 1 && c == 'y', "traced: another process seized the target")) {
		kill(tracer, SIGKILL);
		reap(tracer, NULL, 2000);
		stop_target(&t);
		return;
	}
	log_reset(&audit);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_ERR_PERM, "traced: attach -> PERM");
	is_int(r.last_errno, EPERM, "traced: last_errno EPERM");
	snprintf(want, sizeof(want), "already traced by %d", tracer);
	ok(log_find(&audit, want) && log_find(&audit, ": failed: "), "traced: audit '%s'", audit.n ? audit.lines[0] : "");
	ok(!(r.flags & DWUNW_READER_ATTACHED), "traced: not attached");
	ok(strchr("S", wait_state(t.pid, t.pid, "S", 1000)), "traced: target not stopped");
	kill(tracer, SIGKILL);
	reap(tracer, NULL, 2000);
	/* The tracer's exit releases the target. */
	for (int i = 0; i < 1000; i++) {
		if (dwunw_stack_reader_attach(&r, t.pid) == DWUNW_OK)
			break;
		sleep_ms(1);
	}
	ok(r.flags & DWUNW_READER_ATTACHED, "traced: attach once the other tracer is gone");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "traced: detach");
	close(ack[0]);
	close(ack[1]);
	stop_target(&t);
}

/* ---- non-dumpable targets (needs root to change uids) --------------------------------------- */

#define NOBODY 65534

static int drop_to_nobody(void)
{
	return setresgid(NOBODY, NOBODY, NOBODY) || setgroups(0, NULL) || setresuid(NOBODY, NOBODY, NOBODY);
}

/* A target running as NOBODY, dumpable or not. */
static int start_nobody_target(struct target *t, int dumpable)
{
	int up[2], down[2];
	struct pollfd p;

	memset(t, 0, sizeof(*t));
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return -1;
	t->pid = fork_kid();
	if (t->pid == 0) {
		close(up[0]);
		close(down[1]);
		if (drop_to_nobody() || prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0))
			_exit(5);
		target_main(up[1], down[0], T_SLEEP);
	}
	close(up[1]);
	close(down[0]);
	t->up = up[0];
	t->down = down[1];
	p = (struct pollfd){ .fd = t->up, .events = POLLIN };
	if (poll(&p, 1, 5000) != 1 || read(t->up, &t->h, sizeof(t->h)) != sizeof(t->h))
		return -1;
	return 0;
}

/* An unprivileged reader: exit 0, or the number of the failed check. */
static int nobody_reader(struct target *t, int expect_perm)
{
	struct dwunw_stack_reader r;
	struct log audit, warn;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit,
				    .warn = log_line, .warn_arg = &warn };
	uint8_t b[16];
	int err;

	if (drop_to_nobody())
		return 100;
	log_reset(&audit);
	log_reset(&warn);
	dwunw_stack_reader_init(&r, t->pid, &cfg);
	err = dwunw_stack_reader_attach(&r, t->pid);
	if (expect_perm) {
		if (err != DWUNW_ERR_PERM)
			return 1;
		if (!(r.flags & DWUNW_READER_NOT_DUMPABLE))
			return 2;
		if (warn.n != 1 || !strstr(warn.lines[0], "not dumpable") || !strstr(warn.lines[0], "refused"))
			return 3;
		if (!log_find(&audit, "not dumpable: ptrace(PTRACE_SEIZE): Operation not permitted"))
			return 4;
		if (r.flags & DWUNW_READER_ATTACHED)
			return 5;
		if (dwunw_stack_reader_read(&r, t->h.stack, b, 8) != DWUNW_ERR_PERM)
			return 6; /* process_vm_readv EPERM, then /proc/PID/mem EACCES */
		if (!(r.flags & DWUNW_READER_NO_VM_READV) || !log_find(&audit, "process_vm_readv: Operation not permitted"))
			return 7;
		return 0;
	}
	if (err != DWUNW_OK)
		return 11;
	if (warn.n != 0 || (r.flags & DWUNW_READER_NOT_DUMPABLE))
		return 12;
	if (dwunw_stack_reader_read(&r, t->h.stack, b, 16) != DWUNW_OK || !check_stack(b, 0, 16))
		return 13;
	if (dwunw_stack_reader_detach(&r) != DWUNW_OK)
		return 14;
	return 0;
}

static int run_nobody_reader(struct target *t, int expect_perm)
{
	int st = 0;
	pid_t p = fork_kid();

	if (p == 0)
		_exit(nobody_reader(t, expect_perm));
	if (reap(p, &st, 10000) <= 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
}

static void test_dumpable(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct log audit, warn;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit,
				    .warn = log_line, .warn_arg = &warn };
	uint8_t b[16];
	int ret;

	if (geteuid() != 0) {
		SKIP("non-dumpable targets: not root");
		return;
	}
	if (!ok(start_nobody_target(&t, 0) == 0, "dumpable: non-dumpable target (uid %d)", NOBODY))
		return;
	/* root attaches anyway (CAP_SYS_PTRACE), with a warning */
	log_reset(&audit);
	log_reset(&warn);
	dwunw_stack_reader_init(&r, t.pid, &cfg);
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "dumpable: root attaches to a non-dumpable target");
	ok(r.flags & DWUNW_READER_NOT_DUMPABLE, "dumpable: flagged NOT_DUMPABLE");
	ok(warn.n == 1 && strstr(warn.lines[0], "not dumpable") && strstr(warn.lines[0], "CAP_SYS_PTRACE"),
	   "dumpable: warning '%s'", warn.n ? warn.lines[0] : "");
	ok(dwunw_stack_reader_read(&r, t.h.stack, b, 16) == DWUNW_OK && check_stack(b, 0, 16), "dumpable: read");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "dumpable: detach");
	is_int(dwunw_stack_reader_attach(&r, t.pid), DWUNW_OK, "dumpable: attach again");
	is_int(warn.n, 1, "dumpable: warned once per reader");
	dwunw_stack_reader_detach(&r);
	/* an unprivileged tracer is refused */
	ret = run_nobody_reader(&t, 1);
	if (ret == 100)
		SKIP("cannot switch to uid %d", NOBODY);
	else if (!ok(ret == 0, "dumpable: unprivileged attach -> PERM, NOT_DUMPABLE, warning; read -> PERM"))
		printf("  # failed check %d\n", ret);
	stop_target(&t);

	/* the same uid, dumpable: no false alarm */
	if (!ok(start_nobody_target(&t, 1) == 0, "dumpable: dumpable target (uid %d)", NOBODY))
		return;
	ret = run_nobody_reader(&t, 0);
	if (ret == 100)
		SKIP("cannot switch to uid %d", NOBODY);
	else if (!ok(ret == 0, "dumpable: unprivileged attach to a dumpable target of the same uid, no warning"))
		printf("  # failed check %d\n", ret);
	stop_target(&t);
}

/* ---- attach timeout: a thread that cannot stop (vfork parent, state D) ---------------------- */

#define VFORK_SLEEP_MS 3000

/* A child that vforks on request: on 'v' from the test, a grandchild that sleeps VFORK_SLEEP_MS and
 * _exits (the vfork parent waits in state D meanwhile), then 'r' back. 'h' once it is running. */
struct vforker {
	pid_t pid;
	int cmd;            /* 'v': vfork */
	int ack;            /* 'h', then 'r' after each vfork returned */
};

__attribute__((noreturn))
static void vforker_main(int in, int out)
{
	char c = 'h';

	if (write(out, &c, 1) != 1)
		_exit(6);
	for (;;) {
		ssize_t n = read(in, &c, 1);
		pid_t g;

		if (n == 0)
			_exit(0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(5);
		}
		if (c != 'v')
			continue;
		g = vfork();
		if (g == 0) {
			struct timespec ts = { VFORK_SLEEP_MS / 1000, (VFORK_SLEEP_MS % 1000) * 1000000L };
			nanosleep(&ts, NULL);
			_exit(0);
		}
		if (g > 0)
			while (waitpid(g, NULL, 0) < 0 && errno == EINTR)
				;
		c = 'r';
		if (write(out, &c, 1) != 1)
			_exit(4);
	}
}

static int start_vforker(struct vforker *v)
{
	int cmd[2], ack[2];
	struct pollfd p;
	char c = 0;

	memset(v, 0, sizeof(*v));
	if (pipe2(cmd, O_CLOEXEC) || pipe2(ack, O_CLOEXEC))
		return -1;
	v->pid = fork_kid();
	if (v->pid < 0)
		return -1;
	if (v->pid == 0) {
		close(cmd[1]);
		close(ack[0]);
		vforker_main(cmd[0], ack[1]);
	}
	close(cmd[0]);
	close(ack[1]);
	v->cmd = cmd[1];
	v->ack = ack[0];
	p = (struct pollfd){ .fd = v->ack, .events = POLLIN };
	if (poll(&p, 1, 5000) != 1 || read(v->ack, &c, 1) != 1 || c != 'h')
		return -1;
	return 0;
}

/* The vforker wrote 'r' (its vfork returned and it ran on) within ms. */
static int vforker_ran(struct vforker *v, unsigned ms)
{
	struct pollfd p = { .fd = v->ack, .events = POLLIN };
	char c = 0;

	return poll(&p, 1, (int)ms) == 1 && read(v->ack, &c, 1) == 1 && c == 'r';
}

static void stop_vforker(struct vforker *v)
{
	if (v->pid > 0) {
		kill(v->pid, SIGKILL);
		reap(v->pid, NULL, 5000);
	}
	close(v->cmd);
	close(v->ack);
	v->pid = 0;
}

static long tracer_of(pid_t pid)
{
	char path[64], buf[2048], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "TracerPid:");
	return p ? strtol(p + 10, NULL, 10) : -1;
}

static unsigned ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (unsigned)((t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000);
}

/* In a child process (the tracer): attach with the stop pending, detach gives up, exit. */
static int pending_tracer(struct vforker *v)
{
	struct dwunw_stack_reader r;
	struct dwunw_config cfg = { .size = sizeof(cfg), .attach_timeout_ms = 300 };

	dwunw_stack_reader_init(&r, v->pid, &cfg);
	inject_vfork_fd = v->cmd;
	if (dwunw_stack_reader_attach(&r, v->pid) != DWUNW_ERR_IO || r.last_errno != ETIMEDOUT)
		return 11;
	inject_vfork_fd = -1;
	if (tracer_of(v->pid) != getpid())
		return 12;
	if (dwunw_stack_reader_detach(&r) != DWUNW_ERR_IO || r.last_errno != ETIMEDOUT)
		return 13;
	return 0; /* exits: the kernel detaches the seized thread */
}

static void test_attach_timeout(void)
{
	struct vforker v;
	struct dwunw_stack_reader r;
	struct log audit, warn;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit,
				    .warn = log_line, .warn_arg = &warn, .attach_timeout_ms = 300 };
	struct dwunw_config old = cfg;
	struct timespec t0;
	char want[160];
	unsigned ms;
	int err, st = 0;
	pid_t helper;

	/* the default, and a config from before the field */
	dwunw_stack_reader_init(&r, getpid(), NULL);
	is_int(r.attach_timeout_ms, 2000, "timeout: 2000 ms without a config");
	old.size = offsetof(struct dwunw_config, attach_timeout_ms);
	dwunw_stack_reader_init(&r, getpid(), &old);
	is_int(r.attach_timeout_ms, 2000, "timeout: 2000 ms from a config without the field");
	dwunw_stack_reader_init(&r, getpid(), &cfg);
	is_int(r.attach_timeout_ms, 300, "timeout: from the config");

	/* 1. already in state D: not seized at all */
	if (!ok(start_vforker(&v) == 0, "timeout: vforker started"))
		return;
	log_reset(&audit);
	log_reset(&warn);
	if (write(v.cmd, "v", 1) != 1 || !ok(wait_state(v.pid, v.pid, "D", 2000) == 'D', "timeout: vfork parent in state D")) {
		stop_vforker(&v);
		return;
	}
	dwunw_stack_reader_init(&r, v.pid, &cfg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = dwunw_stack_reader_attach(&r, v.pid);
	ms = ms_since(&t0);
	is_int(err, DWUNW_ERR_IO, "timeout: attach to a thread in D -> IO");
	is_int(r.last_errno, ETIMEDOUT, "timeout: last_errno ETIMEDOUT");
	ok(ms >= 290 && ms < 1000, "timeout: returned after the 300 ms timeout (%u ms)", ms);
	ok(!(r.flags & DWUNW_READER_ATTACHED), "timeout: not attached");
	snprintf(want, sizeof(want), "dwunw: pid %d tid %d did not stop within 300 ms (state D): not unwound", v.pid, v.pid);
	ok(warn.n == 1 && strcmp(warn.lines[0], want) == 0, "timeout: warning '%s'", warn.n ? warn.lines[0] : "");
	ok(log_find(&audit, want) != NULL, "timeout: audit line");
	is_int(tracer_of(v.pid), 0, "timeout: a thread in D is not seized");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "timeout: detach is a no-op");
	ok(vforker_ran(&v, VFORK_SLEEP_MS + 3000), "timeout: the vfork parent runs on once the child exits");
	ok(strchr("SR", wait_state(v.pid, v.pid, "S", 1000)), "timeout: not left stopped (state %c)", task_state(v.pid, v.pid));

	/* 2. enters D after it was seized: the stop is pending; detach waits for it, in vain, then
	 * (after the grandchild exits and the thread stopped) resumes it */
	log_reset(&audit);
	log_reset(&warn);
	dwunw_stack_reader_init(&r, v.pid, &cfg);
	inject_vfork_fd = v.cmd;
	injected = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = dwunw_stack_reader_attach(&r, v.pid);
	ms = ms_since(&t0);
	inject_vfork_fd = -1;
	is_int(injected, 1, "pending: the vfork began between PTRACE_SEIZE and PTRACE_INTERRUPT");
	is_int(err, DWUNW_ERR_IO, "pending: attach -> IO");
	is_int(r.last_errno, ETIMEDOUT, "pending: last_errno ETIMEDOUT");
	ok(ms < 1000, "pending: attach returned within 1 s (%u ms)", ms);
	ok(warn.n == 1 && strcmp(warn.lines[0], want) == 0, "pending: warning '%s'", warn.n ? warn.lines[0] : "");
	ok(log_find(&audit, "stop is pending") != NULL, "pending: audit says the stop is pending");
	is_int(tracer_of(v.pid), getpid(), "pending: seized");
	ok(!(r.flags & DWUNW_READER_ATTACHED), "pending: not attached");
	is_int(dwunw_stack_reader_attach(&r, v.pid + 100000), DWUNW_ERR_INVALID_ARG, "pending: attach to another thread refused");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = dwunw_stack_reader_detach(&r);
	ms = ms_since(&t0);
	is_int(err, DWUNW_ERR_IO, "pending: detach while still in D -> IO");
	ok(ms >= 250 && ms < 1000, "pending: detach waited a bounded time (%u ms)", ms);
	snprintf(want, sizeof(want), "dwunw: detach pid %d tid %d: still not stopped", v.pid, v.pid);
	ok(log_find(&audit, want) != NULL, "pending: audit says it is left to the kernel");
	ok(wait_state(v.pid, v.pid, "t", VFORK_SLEEP_MS + 3000) == 't', "pending: the stop came once the vfork child exited");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "pending: detach after the late stop");
	snprintf(want, sizeof(want), "dwunw: detach pid %d tid %d: ok, after its pending stop", v.pid, v.pid);
	ok(log_find(&audit, want) != NULL, "pending: audit of the late detach");
	ok(vforker_ran(&v, 3000), "pending: the vfork parent runs on");
	ok(strchr("SR", wait_state(v.pid, v.pid, "S", 1000)), "pending: not left stopped (state %c)", task_state(v.pid, v.pid));
	is_int(tracer_of(v.pid), 0, "pending: no tracer left");
	is_int(dwunw_stack_reader_detach(&r), DWUNW_OK, "pending: detach again is a no-op");

	/* 3. the tracer exits while the stop is pending: the kernel lets the thread run */
	helper = fork_kid();
	if (helper == 0)
		_exit(pending_tracer(&v));
	ok(reap(helper, &st, 5000) == helper && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "kernel: the tracer timed out, detach gave up, it exited (status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	is_int(tracer_of(v.pid), 0, "kernel: no tracer left");
	ok(vforker_ran(&v, VFORK_SLEEP_MS + 3000), "kernel: the vfork parent runs on once the child exits");
	ok(strchr("SR", wait_state(v.pid, v.pid, "S", 1000)), "kernel: not left stopped (state %c)", task_state(v.pid, v.pid));
	stop_vforker(&v);
}

/* ---- resources ------------------------------------------------------------------------------ */

static void test_no_leak(void)
{
	struct target t;
	struct dwunw_stack_reader r;
	struct dwunw_regs regs;
	struct log audit;
	struct dwunw_config cfg = { .size = sizeof(cfg), .audit = log_line, .audit_arg = &audit };
	uint8_t b[64];
	int before, after, fails = 0;

	if (!ok(start_target(&t, T_SLEEP) == 0, "leak: target started"))
		return;
	log_reset(&audit);
	before = count_fds();
	for (int i = 0; i < 1000; i++) {
		struct dw_remote dr;

		dwunw_stack_reader_init(&r, t.pid, &cfg);
		if (i & 1)
			r.flags |= DWUNW_READER_NO_VM_READV;
		fails += dwunw_stack_reader_read(&r, t.h.stack, b, sizeof(b)) != DWUNW_OK || !check_stack(b, 0, sizeof(b));
		fails += dwunw_stack_reader_attach(&r, t.pid) != DWUNW_OK;
		fails += dwunw_stack_reader_regs(&r, &regs) != DWUNW_OK;
		fails += dwunw_stack_reader_read(&r, t.h.heap, b, sizeof(b)) != DWUNW_OK || !check_heap(b, 0, sizeof(b));
		fails += dwunw_stack_reader_read(&r, 0x1000, b, 8) != DWUNW_ERR_INVALID_ARG;
		fails += dwunw_stack_reader_detach(&r) != DWUNW_OK;
		dw_remote_begin(&dr, t.pid, NULL, NULL);
		dr.vm_unusable = 1;
		fails += dw_remote_read(&dr, t.h.heap, b, 8) != DWUNW_OK;
		dw_remote_end(&dr);
	}
	after = count_fds();
	is_int(fails, 0, "leak: 1000 read + attach/regs/read/detach cycles");
	is_int(after, before, "leak: no fd left (%d before, %d after)", before, after);
	ok(audit.attach_ok == 1000 && audit.detach_ok == 1000, "leak: audit saw %u attaches, %u detaches",
	   audit.attach_ok, audit.detach_ok);
	ok(strchr("S", wait_state(t.pid, t.pid, "S", 1000)), "leak: target not left stopped");
	stop_target(&t);
}

int main(void)
{
	struct target t;
	arm_timeout(240, kill_kids_now);
	signal(SIGPIPE, SIG_IGN);

	if (!ok(start_target(&t, T_SLEEP) == 0, "target started"))
		return done_testing();
	test_remote(&t);
	test_remote_fallback(&t);
	test_remote_seccomp(&t);
	stop_target(&t);
	test_remote_gone();
	test_reader();
	test_thread();
	test_signals();
	test_held_signal();
	test_stops_and_kills();
	test_wrong_thread();
	test_exit_race();
	test_traced();
	test_dumpable();
	test_attach_timeout();
	test_no_leak();
	return done_testing();
}
