// SPDX-License-Identifier: GPL-2.0-only
/* Stack reader: process_vm_readv with a /proc/PID/mem fallback, and ptrace freeze/thaw of a thread. */
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include "internal.h"
#include "utils/stack_reader.h"

/*
 * Threading: nothing here is global; a dw_remote or a dwunw_stack_reader belongs to one caller.
 * ptrace itself binds a tracee to the tracer *thread*: attach, regs and detach of one reader must
 * be called from the same thread (detach from another thread is refused, see below). The reads
 * may come from any thread.
 *
 * A process that is both the caller's child and its tracee: when it exits while being attached,
 * the exit status is collected here (waitpid is the only way to learn of the exit), so the caller's
 * own waitpid later reports ECHILD for it.
 */

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
/* Ranges per process_vm_readv call (the kernel's UIO_MAXIOV); two iovec arrays of this size live
 * on the stack of dw_remote_readv (32 KiB on 64-bit hosts). */
#define READV_BATCH IOV_MAX

/* Private bits of dwunw_stack_reader.flags (the public ones are DWUNW_READER_*). */
#define READER_SIG_SHIFT     8
#define READER_SIG_MASK      (0xffu << READER_SIG_SHIFT) /* signal to re-deliver at detach */
#define READER_DUMP_CHECKED  (1u << 16) /* the non-dumpable heuristic ran for this reader */
#define READER_DUMP_WARNED   (1u << 17) /* the non-dumpable warning was given */
#define READER_STOP_PENDING  (1u << 18) /* r->tid is seized and interrupted but has not stopped yet */

#define ATTACH_TIMEOUT_MS    2000u /* attach_timeout_ms 0 */
#define DETACH_WAIT_MAX_MS   500u  /* detach waits at most this long for a pending stop */

/* Task flags as shown in field 9 of /proc/PID/stat (include/linux/sched.h). */
#define TASK_PF_EXITING 0x00000004ul
#define TASK_PF_KTHREAD 0x00200000ul

/* ---- small helpers ------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned long long us_since(uint64_t t0)
{
	return (unsigned long long)((now_ns() - t0) / 1000u);
}

/* Sleep before the next poll: 50 us first, doubling up to 10 ms, never past the deadline. */
static void poll_pause(uint64_t *pause_ns, uint64_t deadline)
{
	uint64_t now = now_ns(), ns = *pause_ns;
	struct timespec ts;

	if (now >= deadline)
		return;
	if (ns > deadline - now)
		ns = deadline - now;
	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	nanosleep(&ts, NULL); /* EINTR: poll again sooner, harmless */
	*pause_ns = *pause_ns * 2 > 10000000u ? 10000000u : *pause_ns * 2;
}

/* strerror without the static buffer of strerror(). */
static const char *errtext(int e, char *buf, size_t size)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
	return strerror_r(e, buf, size);
#else
	if (strerror_r(e, buf, size) != 0)
		snprintf(buf, size, "errno %d", e);
	return buf;
#endif
}

__attribute__((format(printf, 3, 4)))
static void emit(void (*sink)(void *, const char *), void *arg, const char *fmt, ...)
{
	char line[384];
	va_list ap;

	if (!sink)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sink(arg, line);
}

/* errno of a memory read -> DWUNW_ERR_*. */
static int read_errno_to_err(int e)
{
	switch (e) {
	case ESRCH: return DWUNW_ERR_NO_PROCESS;
	case EIO: case EFAULT: return DWUNW_ERR_INVALID_ARG;
	default: return dw_errno_to_err(e);
	}
}

/* A small /proc file into buf (NUL-terminated); 0 or -errno. */
static int read_small(const char *path, char *buf, size_t size)
{
	ssize_t n;
	size_t got = 0;
	int fd, e = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < size - 1) {
		n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	return e;
}

/* State letter and PF_* flags of a thread of pid; 0 or -errno (-ENOENT: no such thread in pid). */
static int task_stat(int32_t pid, int32_t tid, char *state, unsigned long *pf)
{
	char path[64], buf[1024], *p;
	int e;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	e = read_small(path, buf, sizeof(buf));
	if (e)
		return e;
	/* "tid (comm) S ppid pgrp session tty_nr tpgid flags ...": comm may hold anything. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", state, pf) != 2)
		return -EIO;
	return 0;
}

/* The process has exited (zombie, dead, or no /proc entry any more). */
static int proc_gone(int32_t pid)
{
	char state;
	unsigned long pf;

	if (task_stat(pid, pid, &state, &pf) != 0)
		return 1;
	return state == 'Z' || state == 'X';
}

/* A number after `key` in /proc/.../status text, or -1. */
static long status_field(const char *text, const char *key, int nth)
{
	const char *p = text;
	size_t klen = strlen(key);
	char *end;
	long v = -1;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0) {
			p += klen;
			for (int i = 0; i <= nth; i++) {
				v = strtol(p, &end, 10);
				if (end == p)
					return -1;
				p = end;
			}
			return v;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

/* Tgid, TracerPid or the effective uid of a task from its status file; -1 when unknown. */
static long task_status(const char *path, const char *key, int nth)
{
	char buf[2048];

	if (read_small(path, buf, sizeof(buf)) != 0)
		return -1;
	return status_field(buf, key, nth);
}

/*
 * Is the process non-dumpable (prctl(PR_SET_DUMPABLE, 0), a set-id exec, or credentials changed
 * by setuid() and friends while fs.suid_dumpable = 0)? Such a process can only be ptraced, and
 * its memory read, with CAP_SYS_PTRACE.
 *
 * The kernel offers no way to read another process's dumpable flag (PR_GET_DUMPABLE is only for
 * the caller), so this is a heuristic. procfs makes the files of a non-dumpable process (every
 * entry but the world-readable directories such as /proc/PID itself, which always show the
 * effective uid) owned by root of the process's user namespace instead of by its effective uid
 * (task_dump_owner() in fs/proc/base.c). So:
 *  - /proc/PID/mem owned by another uid than the effective uid: not dumpable (certain);
 *  - owned by the effective uid but not by the real uid (a set-uid program): set-id programs are
 *    made non-dumpable at exec, so reported not dumpable (wrong only if the program re-enabled
 *    it with prctl);
 *  - real, effective and owner uid all equal (in particular root processes): reported dumpable,
 *    the two cases cannot be told apart.
 * Returns 1 (not dumpable) or 0 (dumpable, or unknown).
 */
static int is_not_dumpable(int32_t pid)
{
	char path[48], buf[2048];
	struct stat st;
	long ruid, euid;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	if (stat(path, &st) != 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small(path, buf, sizeof(buf)) != 0)
		return 0;
	ruid = status_field(buf, "Uid:", 0);
	euid = status_field(buf, "Uid:", 1);
	if (ruid < 0 || euid < 0)
		return 0;
	return (uid_t)euid != st.st_uid || (uid_t)ruid != st.st_uid;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- dw_remote: the reads of one event --------------------------------------------------- */

void dw_remote_begin(struct dw_remote *r, int32_t pid, void (*audit)(void *, const char *), void *audit_arg)
{
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->mem_fd = -1;
	r->audit = audit;
	r->audit_arg = audit_arg;
}

void dw_remote_end(struct dw_remote *r)
{
	if (r && r->mem_fd >= 0) {
		close(r->mem_fd);
		r->mem_fd = -1;
	}
}

static int remote_fail(struct dw_remote *r, int e, int err)
{
	r->last_errno = e;
	r->last_err = err;
	return err;
}

/* process_vm_readv is not usable for this process (ENOSYS: not built in or filtered by seccomp;
 * EPERM: refused): every later read of this event goes to /proc/PID/mem. */
static void vm_give_up(struct dw_remote *r, int e)
{
	char eb[96];

	r->vm_unusable = 1;
	r->last_errno = e;
	r->last_err = read_errno_to_err(e); /* what the read returns when /proc/PID/mem is not an option either */
	emit(r->audit, r->audit_arg, "dwunw: pid %d: process_vm_readv: %s; reading /proc/%d/mem",
	     (int)r->pid, errtext(e, eb, sizeof(eb)), (int)r->pid);
}

static int mem_open(struct dw_remote *r)
{
	char path[48];
	int e, err;

	if (r->mem_fd >= 0)
		return DWUNW_OK;
	if (r->mem_unusable)
		return r->last_err ? r->last_err : DWUNW_ERR_IO;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
	do
		r->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	while (r->mem_fd < 0 && errno == EINTR);
	if (r->mem_fd >= 0)
		return DWUNW_OK;
	e = errno;
	if (e == ENOENT)
		/* No /proc/PID: the process is gone, unless there is no procfs at all. */
		err = access("/proc/self/mem", F_OK) == 0 ? DWUNW_ERR_NO_PROCESS : DWUNW_ERR_UNSUPPORTED;
	else if ((e == EACCES || e == EPERM) && proc_gone(r->pid))
		/* A zombie's files belong to root: refused, but really the process has exited. */
		err = DWUNW_ERR_NO_PROCESS;
	else
		err = read_errno_to_err(e);
	r->mem_unusable = 1;
	return remote_fail(r, e, err);
}

static int mem_read(struct dw_remote *r, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	ssize_t n;
	int err;

	err = mem_open(r);
	if (err)
		return err;
	while (done < len) {
		uint64_t at = addr + done;
		off_t off = (off_t)at;

		/* pread takes a signed offset: the upper half of the address space is out of reach. */
		if (off < 0 || (uint64_t)off != at)
			return remote_fail(r, EINVAL, DWUNW_ERR_INVALID_ARG);
		n = pread(r->mem_fd, (char *)buf + done, len - done, off);
		r->fallback_reads++;
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			/* The kernel reads nothing, without error, once the address space is gone. */
			return remote_fail(r, ESRCH, DWUNW_ERR_NO_PROCESS);
		/* EIO: the first unreadable byte is at addr + done. */
		return remote_fail(r, errno, read_errno_to_err(errno));
	}
	return DWUNW_OK;
}

/* The range is one the kernel could be asked about from this host. */
static int range_ok(uint64_t addr, size_t len)
{
	if (len > SSIZE_MAX || addr + len < addr)
		return 0;
	return (uintmax_t)(addr + len) <= (uintmax_t)UINTPTR_MAX;
}

int dw_remote_read(struct dw_remote *r, uint64_t addr, void *buf, size_t len)
{
	if (!r)
		return DWUNW_ERR_INVALID_ARG;
	if (len == 0)
		return DWUNW_OK;
	if (!buf || r->pid <= 0)
		return remote_fail(r, EINVAL, DWUNW_ERR_INVALID_ARG);
	if (!range_ok(addr, len))
		return remote_fail(r, EFAULT, DWUNW_ERR_INVALID_ARG);

	if (!r->vm_unusable) {
		struct iovec local = { .iov_base = buf, .iov_len = len };
		struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
		ssize_t n;
		int e;

		do {
			n = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);
			r->reads++;
		} while (n < 0 && errno == EINTR);
		if (n == (ssize_t)len)
			return DWUNW_OK;
		if (n >= 0)
			/* Short: the byte at addr + n is not mapped (or not readable). */
			return remote_fail(r, EFAULT, DWUNW_ERR_INVALID_ARG);
		e = errno;
		if (e != ENOSYS && e != EPERM)
			return remote_fail(r, e, read_errno_to_err(e));
		vm_give_up(r, e);
	}
	return mem_read(r, addr, buf, len);
}

int dw_remote_readv(struct dw_remote *r, const struct dw_remote_iov *iov, unsigned n)
{
	struct iovec local[READV_BATCH], remote[READV_BATCH];
	unsigned i = 0;
	int err;

	if (!r || (n && !iov))
		return DWUNW_ERR_INVALID_ARG;
	while (i < n) {
		unsigned j, cnt = 0;
		size_t total = 0, left;
		ssize_t got;

		if (r->vm_unusable || r->pid <= 0) {
			for (; i < n; i++)
				if ((err = dw_remote_read(r, iov[i].addr, iov[i].buf, iov[i].len)))
					return err;
			return DWUNW_OK;
		}
		/* Gather ranges i..j-1 into one call; a range the kernel cannot be asked about is left
		 * to dw_remote_read, which reports it. */
		for (j = i; j < n && cnt < READV_BATCH; j++) {
			if (iov[j].len == 0)
				continue;
			if (!iov[j].buf || !range_ok(iov[j].addr, iov[j].len) ||
			    iov[j].len > (size_t)SSIZE_MAX - total)
				break;
			local[cnt].iov_base = iov[j].buf;
			local[cnt].iov_len = iov[j].len;
			remote[cnt].iov_base = (void *)(uintptr_t)iov[j].addr;
			remote[cnt].iov_len = iov[j].len;
			total += iov[j].len;
			cnt++;
		}
		if (cnt == 0) {
			/* Only empty ranges, or range i is not readable at all. */
			if (j < n && (err = dw_remote_read(r, iov[j].addr, iov[j].buf, iov[j].len)))
				return err;
			i = j + 1;
			continue;
		}
		do {
			got = process_vm_readv(r->pid, local, cnt, remote, cnt, 0);
			r->reads++;
		} while (got < 0 && errno == EINTR);
		if (got == (ssize_t)total) {
			i = j;
			continue;
		}
		if (got < 0) {
			int e = errno;

			if (e == ENOSYS || e == EPERM) {
				vm_give_up(r, e);
				continue; /* the same ranges again, through /proc/PID/mem */
			}
			if (e != EFAULT)
				return remote_fail(r, e, read_errno_to_err(e));
			got = 0;
		}
		/* The kernel copies in order and stops at the first fault: the ranges wholly covered
		 * by `got` are done, the rest are read one by one to find the failing one. */
		left = (size_t)got;
		for (; i < j; i++) {
			if (iov[i].len <= left) {
				left -= iov[i].len;
				continue;
			}
			left = 0;
			if ((err = dw_remote_read(r, iov[i].addr, iov[i].buf, iov[i].len)))
				return err;
		}
	}
	return DWUNW_OK;
}

/* ---- the public reader ------------------------------------------------------------------- */

/* The backend describing this host's ptrace register sets. */
static const struct dwunw_arch_ops *host_arch(void)
{
#if defined(__x86_64__)
	return dwunw_arch_get(DWUNW_ARCH_X86_64);
#elif defined(__aarch64__)
	return dwunw_arch_get(DWUNW_ARCH_ARM64);
#elif defined(__mips__)
	return dwunw_arch_get(DWUNW_ARCH_MIPS32);
#else
	return NULL;
#endif
}

DWUNW_API int dwunw_stack_reader_init(struct dwunw_stack_reader *r, int32_t pid, const struct dwunw_config *cfg)
{
	if (!r)
		return DWUNW_ERR_INVALID_ARG;
	memset(r, 0, sizeof(*r));
	if (pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	if (cfg) {
		if (cfg->size < offsetof(struct dwunw_config, warn_arg) + sizeof(cfg->warn_arg))
			return DWUNW_ERR_INVALID_ARG;
		r->audit = cfg->audit;
		r->audit_arg = cfg->audit_arg;
		r->warn = cfg->warn;
		r->warn_arg = cfg->warn_arg;
		/* A config from before the field (a smaller size): the default. */
		if (cfg->size >= offsetof(struct dwunw_config, attach_timeout_ms) + sizeof(cfg->attach_timeout_ms))
			r->attach_timeout_ms = cfg->attach_timeout_ms;
	}
	if (!r->attach_timeout_ms)
		r->attach_timeout_ms = ATTACH_TIMEOUT_MS;
	r->pid = pid;
	return DWUNW_OK;
}

DWUNW_API int dwunw_stack_reader_read(struct dwunw_stack_reader *r, uint64_t addr, void *buf, size_t len)
{
	struct dw_remote rr;
	int err;

	if (!r || r->pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	/* /proc/PID/mem, when needed, is opened and closed within this call. */
	dw_remote_begin(&rr, r->pid, r->audit, r->audit_arg);
	rr.vm_unusable = !!(r->flags & DWUNW_READER_NO_VM_READV);
	err = dw_remote_read(&rr, addr, buf, len);
	dw_remote_end(&rr);
	if (rr.vm_unusable)
		r->flags |= DWUNW_READER_NO_VM_READV;
	r->reads += rr.reads;
	r->fallback_reads += rr.fallback_reads;
	if (err)
		r->last_errno = rr.last_errno;
	return err;
}

static void warn_not_dumpable(struct dwunw_stack_reader *r, int attached)
{
	if (attached)
		emit(r->warn, r->warn_arg,
		     "dwunw: pid %d is not dumpable (PR_SET_DUMPABLE=0 or changed credentials): "
		     "attached only through CAP_SYS_PTRACE", (int)r->pid);
	else
		emit(r->warn, r->warn_arg,
		     "dwunw: pid %d is not dumpable (PR_SET_DUMPABLE=0 or changed credentials): "
		     "ptrace refused, its stacks cannot be read", (int)r->pid);
	r->flags |= READER_DUMP_WARNED;
}

/* The thread is gone or on its way out (ptrace refuses an exiting task with EPERM). */
static int task_gone(int32_t pid, int32_t tid)
{
	char state;
	unsigned long pf;

	if (task_stat(pid, tid, &state, &pf) != 0)
		return 1;
	return state == 'Z' || state == 'X' || (pf & TASK_PF_EXITING);
}

static int attach_fail(struct dwunw_stack_reader *r, int32_t tid, uint64_t t0, int e, int err,
		       const char *what)
{
	char eb[96];

	r->last_errno = e;
	emit(r->audit, r->audit_arg, "dwunw: attach pid %d tid %d: failed: %s%s%s (%llu us)",
	     (int)r->pid, (int)tid, what, e ? ": " : "", e ? errtext(e, eb, sizeof(eb)) : "",
	     us_since(t0));
	return err;
}

/* The reader's attach timeout in ms (a reader not set up by init has 0: the default). */
static uint32_t attach_timeout(const struct dwunw_stack_reader *r)
{
	return r->attach_timeout_ms ? r->attach_timeout_ms : ATTACH_TIMEOUT_MS;
}

/* The thread's state letter now, '?' when unknown. */
static char state_now(int32_t pid, int32_t tid)
{
	char state;
	unsigned long pf;

	return task_stat(pid, tid, &state, &pf) == 0 ? state : '?';
}

static void forget_pending(struct dwunw_stack_reader *r)
{
	r->flags &= ~(READER_STOP_PENDING | READER_SIG_MASK);
	r->tid = 0;
}

/*
 * The thread did not stop before the deadline. `seized`: it was seized and interrupted, and the
 * stop is still to come: the reader keeps it (READER_STOP_PENDING) for detach to resume it.
 */
static int attach_timed_out(struct dwunw_stack_reader *r, int32_t tid, uint64_t t0, int seized)
{
	char state = state_now(r->pid, tid);

	r->last_errno = ETIMEDOUT;
	if (seized) {
		r->tid = tid;
		r->flags |= READER_STOP_PENDING;
	}
	emit(r->warn, r->warn_arg, "dwunw: pid %d tid %d did not stop within %u ms (state %c): not unwound",
	     (int)r->pid, (int)tid, attach_timeout(r), state);
	emit(r->audit, r->audit_arg,
	     "dwunw: pid %d tid %d did not stop within %u ms (state %c): not unwound (%s; %llu us)",
	     (int)r->pid, (int)tid, attach_timeout(r), state,
	     seized ? "seized, its stop is pending: detach resumes it" : "not seized", us_since(t0));
	return DWUNW_ERR_IO;
}

/*
 * Wait until the seized and interrupted thread reports its first ptrace-stop, polling (waitpid
 * WNOHANG) until `deadline`. Any stop will do for reading registers and memory, and the thread is
 * never resumed before detach:
 *  - PTRACE_EVENT_STOP: the interrupt (SIGTRAP), or a group-stop (SIGSTOP, ...) that was in
 *    effect or began meanwhile; detach leaves a group-stop in place.
 *  - a signal-delivery-stop: a signal was being delivered when the thread was seized. It has
 *    been dequeued, so it is remembered and handed back at detach, never swallowed; the
 *    interrupt still pending is dropped by detach.
 * Returns DWUNW_OK with *sig set, or the error (the thread is then no longer traced, or, on a
 * timeout, pending).
 */
static int wait_first_stop(struct dwunw_stack_reader *r, int32_t tid, uint64_t t0, uint64_t deadline, int *sig)
{
	uint64_t pause = 50000;
	int st, e;

	for (;;) {
		pid_t w = waitpid((pid_t)tid, &st, __WALL | WNOHANG);

		if (w < 0) {
			e = errno;
			if (e == EINTR)
				continue;
			forget_pending(r);
			/* ECHILD: no longer our tracee, i.e. it has exited and been collected. */
			return attach_fail(r, tid, t0, e, e == ECHILD ? DWUNW_ERR_NO_PROCESS : dw_errno_to_err(e),
					   "waitpid");
		}
		if (w == 0) {
			if (now_ns() >= deadline)
				return attach_timed_out(r, tid, t0, 1);
			poll_pause(&pause, deadline);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			/* Reporting the exit ended the tracing: nothing is left attached. */
			forget_pending(r);
			return attach_fail(r, tid, t0, 0, DWUNW_ERR_NO_PROCESS, "thread exited before it stopped");
		}
		if (!WIFSTOPPED(st))
			continue;
		*sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
		return DWUNW_OK;
	}
}

DWUNW_API int dwunw_stack_reader_attach(struct dwunw_stack_reader *r, int32_t tid)
{
	uint64_t t0 = now_ns(), deadline;
	char state, what[96], path[48];
	unsigned long pf;
	int e, err, st, sig = 0;

	if (!r || r->pid <= 0 || tid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	if (r->flags & DWUNW_READER_ATTACHED)
		return r->tid == tid ? DWUNW_OK : DWUNW_ERR_INVALID_ARG;
	deadline = t0 + (uint64_t)attach_timeout(r) * 1000000u;
	if (r->flags & READER_STOP_PENDING) {
		/* An earlier attach timed out with the stop pending: wait for it once more. Another
		 * thread must wait until detach has finished with this one. */
		if (r->tid != tid)
			return DWUNW_ERR_INVALID_ARG;
		goto wait;
	}

	/* The thread must belong to the process whose memory is read, and still run. */
	e = task_stat(r->pid, tid, &state, &pf);
	if (e && e != -ENOENT && e != -ESRCH)
		return attach_fail(r, tid, t0, -e, dw_errno_to_err(-e), "reading /proc/PID/task/TID/stat");
	if (e) {
		long tgid;

		snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
		tgid = task_status(path, "Tgid:", 0);
		if (tgid > 0 && tgid != r->pid) {
			snprintf(what, sizeof(what), "thread %d belongs to pid %ld", (int)tid, tgid);
			return attach_fail(r, tid, t0, 0, DWUNW_ERR_INVALID_ARG, what);
		}
		return attach_fail(r, tid, t0, -e, DWUNW_ERR_NO_PROCESS, "no such thread");
	}
	/*
	 * Uninterruptible (D: a vfork parent waiting for its child, I/O): the interrupt would not stop
	 * it before it leaves that state. Wait for that, up to the deadline, before seizing it: a
	 * thread that never leaves it is not seized at all, so nothing is left behind.
	 */
	if (state == 'D') {
		uint64_t pause = 50000;

		while (state == 'D' && now_ns() < deadline) {
			poll_pause(&pause, deadline);
			if (task_stat(r->pid, tid, &state, &pf) != 0)
				return attach_fail(r, tid, t0, 0, DWUNW_ERR_NO_PROCESS, "thread exited");
		}
		if (state == 'D')
			return attach_timed_out(r, tid, t0, 0);
	}
	if (state == 'Z' || state == 'X' || (pf & TASK_PF_EXITING))
		return attach_fail(r, tid, t0, 0, DWUNW_ERR_NO_PROCESS, "thread exited");

	if (!(r->flags & READER_DUMP_CHECKED)) {
		r->flags |= READER_DUMP_CHECKED;
		if (is_not_dumpable(r->pid))
			r->flags |= DWUNW_READER_NOT_DUMPABLE;
	}

	if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) != 0) {
		long tracer;

		e = errno;
		if (e == ESRCH)
			return attach_fail(r, tid, t0, e, DWUNW_ERR_NO_PROCESS, "ptrace(PTRACE_SEIZE)");
		if (e != EPERM)
			return attach_fail(r, tid, t0, e, dw_errno_to_err(e), "ptrace(PTRACE_SEIZE)");
		if (task_gone(r->pid, tid))
			return attach_fail(r, tid, t0, 0, DWUNW_ERR_NO_PROCESS, "thread exiting (PTRACE_SEIZE refused)");
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)r->pid, (int)tid);
		tracer = task_status(path, "TracerPid:", 0);
		if (tracer > 0)
			snprintf(what, sizeof(what), "already traced by %ld: ptrace(PTRACE_SEIZE)", tracer);
		else if (pf & TASK_PF_KTHREAD)
			snprintf(what, sizeof(what), "kernel thread: ptrace(PTRACE_SEIZE)");
		else if (r->flags & DWUNW_READER_NOT_DUMPABLE)
			snprintf(what, sizeof(what), "not dumpable: ptrace(PTRACE_SEIZE)");
		else
			snprintf(what, sizeof(what), "ptrace(PTRACE_SEIZE)");
		if ((r->flags & DWUNW_READER_NOT_DUMPABLE) && tracer <= 0)
			warn_not_dumpable(r, 0);
		return attach_fail(r, tid, t0, e, DWUNW_ERR_PERM, what);
	}

	if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) != 0) {
		/* Only possible when the tracee vanished: collect it if it is a zombie we trace. */
		e = errno;
		while (waitpid((pid_t)tid, &st, __WALL | WNOHANG) < 0 && errno == EINTR)
			;
		return attach_fail(r, tid, t0, e, e == ESRCH ? DWUNW_ERR_NO_PROCESS : dw_errno_to_err(e),
				   "ptrace(PTRACE_INTERRUPT)");
	}

wait:
	err = wait_first_stop(r, tid, t0, deadline, &sig);
	if (err)
		return err;

	r->tid = tid;
	r->flags = (r->flags & ~(READER_SIG_MASK | READER_STOP_PENDING)) | DWUNW_READER_ATTACHED |
		   (((unsigned)sig << READER_SIG_SHIFT) & READER_SIG_MASK);
	if (sig)
		emit(r->audit, r->audit_arg,
		     "dwunw: attach pid %d tid %d: ok, holding signal %d for re-delivery (%llu us)",
		     (int)r->pid, (int)tid, sig, us_since(t0));
	else
		emit(r->audit, r->audit_arg, "dwunw: attach pid %d tid %d: ok (%llu us)",
		     (int)r->pid, (int)tid, us_since(t0));
	if ((r->flags & DWUNW_READER_NOT_DUMPABLE) && !(r->flags & READER_DUMP_WARNED))
		warn_not_dumpable(r, 1);
	return DWUNW_OK;
}

DWUNW_API int dwunw_stack_reader_regs(struct dwunw_stack_reader *r, struct dwunw_regs *out)
{
	const struct dwunw_arch_ops *arch = host_arch();
	uint64_t buf[64];
	struct iovec io = { .iov_base = buf, .iov_len = sizeof(buf) };
	int err;

	if (!r || !out || !(r->flags & DWUNW_READER_ATTACHED))
		return DWUNW_ERR_INVALID_ARG;
	if (!arch || !arch->regs_from_prstatus)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	if (ptrace(PTRACE_GETREGSET, (pid_t)r->tid, (void *)(uintptr_t)NT_PRSTATUS, &io) != 0) {
		r->last_errno = errno;
		/* ESRCH: killed while stopped; detach collects it. */
		return errno == ESRCH ? DWUNW_ERR_NO_PROCESS : dw_errno_to_err(errno);
	}
	/* A shorter set than the host's: a 32-bit (compat) process on a 64-bit kernel. */
	if (io.iov_len < sizeof(elf_gregset_t))
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	memset(out, 0, sizeof(*out));
	err = arch->regs_from_prstatus(buf, io.iov_len, out);
	out->pid = r->pid;
	out->tid = r->tid;
	return err;
}

/* Called from another thread of this process than the tracer: say so (audit) and return 1. */
static int refuse_other_thread(struct dwunw_stack_reader *r, int32_t tid, uint64_t t0)
{
	char path[48];
	long tracer;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)r->pid, (int)tid);
	tracer = task_status(path, "TracerPid:", 0);
	if (tracer <= 0 || tracer == (long)my_tid())
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%ld", tracer);
	if (access(path, F_OK) != 0)
		return 0;
	emit(r->audit, r->audit_arg,
	     "dwunw: detach pid %d tid %d: refused: thread %ld of this process is the tracer, "
	     "detach from it (%llu us)", (int)r->pid, (int)tid, tracer, us_since(t0));
	return 1;
}

/*
 * Detach after an attach that timed out with the thread seized: its stop is still to come, and
 * PTRACE_DETACH is refused until it is in a ptrace-stop. Poll for the stop a little (at most
 * DETACH_WAIT_MAX_MS, or the attach timeout if shorter), then detach. If it still has not stopped,
 * it stays with the reader (a later detach or attach tries again) and the kernel releases it when
 * the tracing thread exits: the pending interrupt is then dropped and the thread runs on (a seized
 * thread has no SIGSTOP pending). It is never resumed with a lost signal.
 */
static int detach_pending(struct dwunw_stack_reader *r, uint64_t t0)
{
	uint32_t ms = attach_timeout(r) < DETACH_WAIT_MAX_MS ? attach_timeout(r) : DETACH_WAIT_MAX_MS;
	uint64_t deadline = t0 + (uint64_t)ms * 1000000u, pause = 50000;
	int32_t tid = r->tid;
	char eb[96];
	int st, e;

	/* Only the tracer thread may detach; another thread's waitpid would take its stop report. */
	if (refuse_other_thread(r, tid, t0))
		return DWUNW_ERR_INVALID_ARG;
	for (;;) {
		pid_t w = waitpid((pid_t)tid, &st, __WALL | WNOHANG);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 || (w == tid && (WIFEXITED(st) || WIFSIGNALED(st)))) {
			/* Exited (and collected now, or by someone else: ECHILD). */
			r->last_errno = w < 0 ? errno : 0;
			forget_pending(r);
			emit(r->audit, r->audit_arg,
			     "dwunw: detach pid %d tid %d: the thread exited before its pending stop (%llu us)",
			     (int)r->pid, (int)tid, us_since(t0));
			return DWUNW_ERR_NO_PROCESS;
		}
		if (w == tid && WIFSTOPPED(st)) {
			int sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;

			if (ptrace(PTRACE_DETACH, (pid_t)tid, NULL, (void *)(uintptr_t)sig) == 0) {
				forget_pending(r);
				emit(r->audit, r->audit_arg,
				     "dwunw: detach pid %d tid %d: ok, after its pending stop%s (%llu us)",
				     (int)r->pid, (int)tid, sig ? ", re-delivering its signal" : "", us_since(t0));
				return DWUNW_OK;
			}
			e = errno;
			if (e != ESRCH) {
				r->last_errno = e;
				forget_pending(r);
				emit(r->audit, r->audit_arg, "dwunw: detach pid %d tid %d: failed: %s (%llu us)",
				     (int)r->pid, (int)tid, errtext(e, eb, sizeof(eb)), us_since(t0));
				return dw_errno_to_err(e);
			}
			/* ESRCH: killed while stopped; its exit is collected next. */
		}
		if (now_ns() >= deadline)
			break;
		if (w == 0)
			poll_pause(&pause, deadline);
	}
	r->last_errno = ETIMEDOUT;
	emit(r->audit, r->audit_arg,
	     "dwunw: detach pid %d tid %d: still not stopped after %u ms (state %c): left seized to the kernel, "
	     "which lets it run when this tracer exits; a later detach resumes it (%llu us)",
	     (int)r->pid, (int)tid, ms, state_now(r->pid, tid), us_since(t0));
	return DWUNW_ERR_IO;
}

DWUNW_API int dwunw_stack_reader_detach(struct dwunw_stack_reader *r)
{
	uint64_t t0 = now_ns();
	char eb[96];
	int32_t tid;
	int sig, e, err, st;

	if (!r)
		return DWUNW_ERR_INVALID_ARG;
	if (r->flags & READER_STOP_PENDING)
		return detach_pending(r, t0);
	if (!(r->flags & DWUNW_READER_ATTACHED))
		return DWUNW_OK;
	tid = r->tid;
	sig = (int)((r->flags & READER_SIG_MASK) >> READER_SIG_SHIFT);

	if (ptrace(PTRACE_DETACH, (pid_t)tid, NULL, (void *)(uintptr_t)sig) == 0) {
		r->flags &= ~(DWUNW_READER_ATTACHED | READER_SIG_MASK);
		r->tid = 0;
		if (sig)
			emit(r->audit, r->audit_arg,
			     "dwunw: detach pid %d tid %d: ok, re-delivering signal %d (%llu us)",
			     (int)r->pid, (int)tid, sig, us_since(t0));
		else
			emit(r->audit, r->audit_arg, "dwunw: detach pid %d tid %d: ok (%llu us)",
			     (int)r->pid, (int)tid, us_since(t0));
		return DWUNW_OK;
	}
	e = errno;
	r->last_errno = e;
	if (e == ESRCH) {
		/* Called from another thread than the tracer? Then the thread is still stopped: say
		 * so and stay attached, the tracer thread must detach. */
		if (refuse_other_thread(r, tid, t0))
			return DWUNW_ERR_INVALID_ARG;
		/*
		 * Not in its ptrace-stop any more: SIGKILL wakes a traced thread, which is now exiting.
		 * Collect the exit (briefly; a dying thread becomes a zombie at once) so that its
		 * parent sees it; should it be stopped after all, detach once more.
		 */
		struct timespec ms = { 0, 1000000 };

		for (int i = 0; i < 1000; i++) {
			pid_t w = waitpid((pid_t)tid, &st, __WALL | WNOHANG);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				break; /* ECHILD: not ours any more */
			if (w == tid && WIFSTOPPED(st)) {
				if (ptrace(PTRACE_DETACH, (pid_t)tid, NULL, (void *)(uintptr_t)sig) == 0) {
					r->flags &= ~(DWUNW_READER_ATTACHED | READER_SIG_MASK);
					r->tid = 0;
					emit(r->audit, r->audit_arg, "dwunw: detach pid %d tid %d: ok (%llu us)",
					     (int)r->pid, (int)tid, us_since(t0));
					return DWUNW_OK;
				}
				break;
			}
			if (w == tid)
				break; /* exited */
			nanosleep(&ms, NULL);
		}
		err = DWUNW_ERR_NO_PROCESS;
	} else if (sig && ptrace(PTRACE_DETACH, (pid_t)tid, NULL, NULL) == 0) {
		/* Not expected (the signal came from the kernel's own report), but a thread must never
		 * stay stopped: resumed without it. */
		r->flags &= ~(DWUNW_READER_ATTACHED | READER_SIG_MASK);
		r->tid = 0;
		emit(r->audit, r->audit_arg, "dwunw: detach pid %d tid %d: ok, but signal %d lost: %s (%llu us)",
		     (int)r->pid, (int)tid, sig, errtext(e, eb, sizeof(eb)), us_since(t0));
		return DWUNW_OK;
	} else {
		err = dw_errno_to_err(e);
	}
	r->flags &= ~(DWUNW_READER_ATTACHED | READER_SIG_MASK);
	r->tid = 0;
	emit(r->audit, r->audit_arg, "dwunw: detach pid %d tid %d: failed: %s (%llu us)",
	     (int)r->pid, (int)tid, err == DWUNW_ERR_NO_PROCESS ? "thread exited" : errtext(e, eb, sizeof(eb)),
	     us_since(t0));
	return err;
}
