// SPDX-License-Identifier: GPL-2.0-only
/* --unwind=freeze, user side: seize, check, let go; the watchdog (freeze.h). */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "capture.h"
#include "freeze.h"
#include "tool_util.h"

#define FRZ_WAIT_MS 2000       /* a seized thread's stop: longer is a thread stuck in the kernel */
#define FRZ_PC_AFTER 16        /* the probed instruction, single-stepped before the stop */
#define FRZ_PC_BEFORE 4        /* a restarted syscall moves ip back over its instruction */
#define FRZ_SP_SLACK 256       /* that instruction's push or pop */
#define STOP_SIGS ((1ull << (SIGSTOP - 1)) | (1ull << (SIGTSTP - 1)) | (1ull << (SIGTTIN - 1)) | \
		   (1ull << (SIGTTOU - 1)))

int freeze_size_maps(struct bpf_object *obj, uint32_t max)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "frz_inflight");

	if (!m)
		return -ENOENT;
	return bpf_map__set_max_entries(m, max ? max : FRZ_MAX_DEFAULT);
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* A signal mask line of /proc/PID[/task/TID]/status ("SigPnd:", "ShdPnd:"); 0 when unreadable. */
static uint64_t status_mask(pid_t pid, pid_t tid, const char *key)
{
	char fn[64], line[256];
	uint64_t v = 0;
	size_t kl = strlen(key);
	FILE *f;

	if (tid)
		snprintf(fn, sizeof(fn), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(fn, sizeof(fn), "/proc/%d/status", pid);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl)) {
			v = strtoull(line + kl, NULL, 16);
			break;
		}
	fclose(f);
	return v;
}

/* Any thread of pid in state T or t (stopped, or traced and stopped). */
static bool any_stopped(pid_t pid)
{
	char fn[64], buf[512];
	bool stopped = false;
	struct dirent *d;
	DIR *dir;

	snprintf(fn, sizeof(fn), "/proc/%d/task", pid);
	dir = opendir(fn);
	if (!dir)
		return false;
	while (!stopped && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(fn, sizeof(fn), "/proc/%d/task/%.16s/stat", pid, d->d_name);
		int fd = open(fn, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		char *p = strrchr(buf, ')');
		if (p && (p[2] == 'T' || p[2] == 't'))
			stopped = true;
	}
	closedir(dir);
	return stopped;
}

/*
 * The watchdog: waits for its pipe to end (the tool exited, however it died), then sends
 * SIGCONT to the processes still holding a freeze slot until none of their threads is stopped
 * (the kernel detaches a dead tracer's tracees after the tool's files are closed: a tracee may
 * still deliver our SIGSTOP after the first SIGCONT, so it checks again for a while).
 */
static void watchdog(int rd, int map_fd)
{
	char c;

	while (read(rd, &c, 1) > 0) {
	}
	for (int round = 0; round < 200; round++) { /* 20 ms apart: 4 s at most */
		uint32_t key, next, *prev = NULL;
		bool any = false, stopped = false;

		while (!bpf_map_get_next_key(map_fd, prev, &next)) {
			key = next;
			prev = &key;
			any = true;
			if (any_stopped((pid_t)key)) {
				stopped = true;
				kill((pid_t)key, SIGCONT);
			}
		}
		/* the tool's probes go with its files: wait out one that was in flight */
		if (round >= 15 && (!any || !stopped))
			break;
		sleep_us(20000);
	}
	_exit(0);
}

int freeze_start(struct freeze *fz, struct bpf_object *obj)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "frz_inflight");
	struct bpf_map *c = bpf_object__find_map_by_name(obj, "frz_counters");
	int p[2];
	const char *hold = getenv("DWUNW_TEST_FREEZE_HOLD_MS");

	fz->map_fd = m ? bpf_map__fd(m) : -1;
	fz->cnt_fd = c ? bpf_map__fd(c) : -1;
	if (fz->map_fd < 0 || fz->cnt_fd < 0)
		return -ENOENT;
	fz->hold_ms = hold ? (uint32_t)atoi(hold) : 0;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	fz->watchdog = fork();
	if (fz->watchdog < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (fz->watchdog == 0) {
		/* only the pipe and the slot map: the probes' links must die with the tool */
		int keep_map = fcntl(fz->map_fd, F_DUPFD_CLOEXEC, 1000);
		int keep_rd = fcntl(p[0], F_DUPFD_CLOEXEC, 1001);
		int nul = open("/dev/null", O_RDWR);

		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
		}
		if (keep_map < 0 || keep_rd < 0)
			_exit(1);
		syscall(SYS_close_range, 3u, 999u, 0u);
		syscall(SYS_close_range, (unsigned)(keep_map > keep_rd ? keep_map : keep_rd) + 1, ~0u, 0u);
		for (int fd = 1000; fd < (keep_map > keep_rd ? keep_map : keep_rd); fd++)
			if (fd != keep_map && fd != keep_rd)
				close(fd);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		prctl(PR_SET_NAME, "dwunw-freezewd");
		watchdog(keep_rd, keep_map);
	}
	close(p[0]);
	fz->pipe_wr = p[1];
	return 0;
}

void freeze_stop(struct freeze *fz)
{
	if (fz->pipe_wr > 0) {
		close(fz->pipe_wr);
		fz->pipe_wr = -1;
	}
}

/* The stopped thread's pc and sp (ptrace's view). */
static bool stop_regs(pid_t tid, uint64_t *pc, uint64_t *sp)
{
#if defined(__x86_64__)
	struct user_regs_struct r;
	struct iovec io = { &r, sizeof(r) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io))
		return false;
	*pc = r.rip;
	*sp = r.rsp;
	return true;
#elif defined(__aarch64__)
	struct user_regs_struct r; /* glibc's sys/user.h: regs[31], sp, pc, pstate */
	struct iovec io = { &r, sizeof(r) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io))
		return false;
	*pc = r.pc;
	*sp = r.sp;
	return true;
#else
	(void)tid, (void)pc, (void)sp;
	return false;
#endif
}

/* waitpid on the seized thread within the deadline: 1 a stop, 0 exited, -1 timed out. */
static int wait_stop(pid_t tid, int *st, uint64_t deadline)
{
	long us = 5;

	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | WNOHANG);

		if (r == tid)
			return WIFSTOPPED(*st) ? 1 : 0;
		if (r < 0 && errno != EINTR)
			return 0;
		if (mono_ns() > deadline)
			return -1;
		sleep_us(us);
		if (us < 1000)
			us *= 2;
	}
}

/* The process's freeze slot holds this event. */
static bool slot_is(const struct freeze *fz, pid_t tgid, uint64_t cookie)
{
	uint32_t key = (uint32_t)tgid;
	uint64_t v;

	return !bpf_map_lookup_elem(fz->map_fd, &key, &v) && v == cookie;
}

bool freeze_begin(struct freeze *fz, const struct cap_record *rec, struct freeze_hold *h)
{
	uint64_t deadline;
	int st;

	memset(h, 0, sizeof(*h));
	h->tid = (pid_t)rec->tid;
	h->tgid = (pid_t)rec->pid;
	h->t0 = rec->ts;
	if (!slot_is(fz, h->tgid, rec->cookie)) {
		fz->u[FRZ_U_NO_SLOT]++; /* the signal was not sent: nothing of ours to undo */
		h->tid = 0;
		return false;
	}
	if (ptrace(PTRACE_SEIZE, h->tid, 0, 0)) {
		fz->u[errno == ESRCH ? FRZ_U_EXITED : FRZ_U_TRACED]++;
		return false;
	}
	h->seized = true;
	/* a thread stopped already re-traps for us (a group stop); one still on its way to our
	 * SIGSTOP traps at once, and goes on to it below */
	ptrace(PTRACE_INTERRUPT, h->tid, 0, 0);
	deadline = mono_ns() + FRZ_WAIT_MS * 1000000ull;
	bool ran_on = false;

	for (int step = 0; step < 8; step++) {
		int r = wait_stop(h->tid, &st, deadline);

		if (r == 0) {
			h->seized = false;
			fz->u[FRZ_U_EXITED]++;
			return false;
		}
		if (r < 0) {
			fz->u[FRZ_U_TIMEOUT]++;
			return false;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;

		if (ev == PTRACE_EVENT_STOP && sig == SIGTRAP) {
			/* our interrupt came first. Our SIGSTOP pending: the thread has not gone back
			 * to user mode since the event, let it take it. Not pending yet but the slot
			 * still ours: it is on its way (sent through irq_work from a perf event or the
			 * scheduler), and must be taken here, never after our SIGCONT: let the thread
			 * run to it (it may run user code meanwhile: not held then) */
			bool pending = status_mask(h->tgid, h->tid, "SigPnd:") & (1ull << (SIGSTOP - 1));

			if (pending || slot_is(fz, h->tgid, rec->cookie)) {
				ran_on |= !pending;
				ptrace(PTRACE_CONT, h->tid, 0, 0);
				continue;
			}
			break; /* no signal of ours to come */
		}
		if (ev == PTRACE_EVENT_STOP) {
			h->group_stop = sig == SIGSTOP; /* stopped already: the group stop */
			h->other_stop = !h->group_stop;
			h->held = h->group_stop;
			break;
		}
		if (ev == 0 && sig == SIGSTOP) {
			siginfo_t si;

			if (!ptrace(PTRACE_GETSIGINFO, h->tid, 0, &si) && si.si_code == SI_KERNEL) {
				h->held = !ran_on; /* ours, delivered while seized: suppressed at detach */
				h->own_signal = true;
				break;
			}
			h->pass_sig = SIGSTOP; /* someone else's: passed on at detach */
			break;
		}
		/* another signal first (it stays pending: dequeued by the kernel again later) or
		 * someone else's SIGSTOP: not a stop at the event */
		if (ev == 0 && sig != SIGSTOP) {
			ran_on = true; /* its handler runs first */
			ptrace(PTRACE_CONT, h->tid, 0, sig);
			continue;
		}
		break;
	}
	uint64_t pc, sp;

	if (h->held && stop_regs(h->tid, &pc, &sp) &&
	    (pc + FRZ_PC_BEFORE < rec->pc || pc > rec->pc + FRZ_PC_AFTER || sp + FRZ_SP_SLACK < rec->stack_start ||
	     sp > rec->stack_start + FRZ_SP_SLACK))
		h->held = false;
	if (!h->held) {
		fz->u[FRZ_U_RACE]++;
		return false;
	}
	fz->u[FRZ_U_HELD]++;
	if (fz->hold_ms)
		sleep_us((long)fz->hold_ms * 1000);
	return true;
}

void freeze_end(struct freeze *fz, struct freeze_hold *h)
{
	uint32_t key = (uint32_t)h->tgid;
	bool suppressed = false;

	if (!h->tid)
		return;
	/* freed first: a thread let go from its own signal's stop runs at once, to its next event */
	bpf_map_delete_elem(fz->map_fd, &key);
	if (h->seized) {
		int st;

		/* a thread not in a ptrace stop (timed out) cannot be detached: trap it first */
		if (ptrace(PTRACE_DETACH, h->tid, 0, h->pass_sig) && errno == ESRCH && !kill(h->tid, 0)) {
			ptrace(PTRACE_INTERRUPT, h->tid, 0, 0);
			waitpid(h->tid, &st, __WALL);
			ptrace(PTRACE_DETACH, h->tid, 0, h->pass_sig);
		}
		/* our SIGSTOP taken at its delivery and dropped there: no group stop to end */
		suppressed = h->own_signal;
	}
	if (!suppressed) {
		/* a stop signal of someone else's waiting: the process stays stopped, as they asked */
		if (h->other_stop || (status_mask(h->tgid, 0, "ShdPnd:") & STOP_SIGS))
			fz->u[FRZ_U_USER_STOP]++;
		else
			kill(h->tgid, SIGCONT);
	}
	fz->hold_ns += mono_ns() - h->t0;
	fz->timed++;
	h->tid = 0;
}

void freeze_bpf_counters(const struct freeze *fz, uint64_t out[FRZ_BPF_CNT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();

	memset(out, 0, FRZ_BPF_CNT_MAX * sizeof(out[0]));
	if (ncpu <= 0 || fz->cnt_fd < 0)
		return;
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v));

	if (!v)
		return;
	for (uint32_t i = 0; i < FRZ_BPF_CNT_MAX; i++)
		if (!bpf_map_lookup_elem(fz->cnt_fd, &i, v))
			for (int c = 0; c < ncpu; c++)
				out[i] += v[c];
	free(v);
}

void freeze_summary(const struct freeze *fz, FILE *out)
{
	uint64_t b[FRZ_BPF_CNT_MAX];

	freeze_bpf_counters(fz, b);
	fprintf(out, "frozen: %llu sent, %llu held (%.0f us each from the event to the resume); not held: "
		"%llu slot gone, %llu exited, %llu traced, %llu race, %llu timeout; %llu left stopped for "
		"another's stop; copy mode instead: %llu busy, %llu over the limit, %llu stopping, %llu traced, "
		"%llu signal refused; %llu switch-outs into our own stop left out\n",
		(unsigned long long)b[FRZ_CNT_SENT], (unsigned long long)fz->u[FRZ_U_HELD],
		fz->timed ? (double)fz->hold_ns / (double)fz->timed / 1000.0 : 0.0,
		(unsigned long long)fz->u[FRZ_U_NO_SLOT], (unsigned long long)fz->u[FRZ_U_EXITED],
		(unsigned long long)fz->u[FRZ_U_TRACED], (unsigned long long)fz->u[FRZ_U_RACE],
		(unsigned long long)fz->u[FRZ_U_TIMEOUT], (unsigned long long)fz->u[FRZ_U_USER_STOP],
		(unsigned long long)b[FRZ_CNT_BUSY], (unsigned long long)b[FRZ_CNT_LIMIT],
		(unsigned long long)b[FRZ_CNT_STOPPING], (unsigned long long)b[FRZ_CNT_TRACED],
		(unsigned long long)b[FRZ_CNT_SEND_FAILED], (unsigned long long)b[FRZ_CNT_OWN_STOP]);
}

void freeze_json(const struct freeze *fz, FILE *out)
{
	uint64_t b[FRZ_BPF_CNT_MAX];

	freeze_bpf_counters(fz, b);
	fprintf(out, "\"frozen\":{\"sent\":%llu,\"held\":%llu,\"hold_ns\":%llu,\"slot_gone\":%llu,\"exited\":%llu,"
		"\"traced\":%llu,\"race\":%llu,\"timeout\":%llu,\"user_stop\":%llu,\"busy\":%llu,\"limit\":%llu,"
		"\"stopping\":%llu,\"traced_at_event\":%llu,\"send_failed\":%llu,\"emit_failed\":%llu,\"own_stop\":%llu}",
		(unsigned long long)b[FRZ_CNT_SENT], (unsigned long long)fz->u[FRZ_U_HELD],
		(unsigned long long)(fz->timed ? fz->hold_ns / fz->timed : 0),
		(unsigned long long)fz->u[FRZ_U_NO_SLOT], (unsigned long long)fz->u[FRZ_U_EXITED],
		(unsigned long long)fz->u[FRZ_U_TRACED], (unsigned long long)fz->u[FRZ_U_RACE],
		(unsigned long long)fz->u[FRZ_U_TIMEOUT], (unsigned long long)fz->u[FRZ_U_USER_STOP],
		(unsigned long long)b[FRZ_CNT_BUSY], (unsigned long long)b[FRZ_CNT_LIMIT],
		(unsigned long long)b[FRZ_CNT_STOPPING], (unsigned long long)b[FRZ_CNT_TRACED],
		(unsigned long long)b[FRZ_CNT_SEND_FAILED], (unsigned long long)b[FRZ_CNT_EMIT_FAILED],
		(unsigned long long)b[FRZ_CNT_OWN_STOP]);
}
