/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --unwind=freeze: the stack read from the thread stopped at the event, not copied at it.
 *
 *   BPF (freeze.bpf.h)            at the event: a slot for the process (one per process, at most
 *                                 FRZ_MAX_DEFAULT processes), the snapshot with CAP_F_FROZEN,
 *                                 bpf_send_signal_thread(SIGSTOP): the thread stops before it
 *                                 runs on (the whole process with it: a group stop).
 *   user space (freeze.c)         the record: PTRACE_SEIZE the thread (a stopped task re-traps
 *                                 for its new tracer), wait for its stop, check it is ours (the
 *                                 slot holds this event; the stop is a SIGSTOP; registers where
 *                                 the event left them), walk with the window plus the stopped
 *                                 thread's memory (frames past the window: origin "frozen"),
 *                                 then PTRACE_DETACH, slot freed, SIGCONT unless the stop is
 *                                 someone else's as well (a stop signal pending for the process).
 *   arming (the tool)             skel->bss->frz_armed = 1 once its command has exec'd (or at once
 *                                 with -p): before, a freeze of the waiting child would deadlock.
 *   watchdog (freeze.c)           a child process holding the slot map and a pipe: when the tool
 *                                 dies (even by SIGKILL) the pipe ends, and it sends SIGCONT to
 *                                 every process still holding a slot, until none is stopped.
 *
 * Registers come from the event (the record), not from ptrace: the thread may have executed
 * the probed instruction (a uprobe single-steps it before the signal) or restarted a syscall
 * (its ip moved back); the stack above the event's sp is what such steps never write. ptrace's
 * registers serve only to check that the thread did not run on.
 *
 * Every way a freeze can fail is counted (enum frz_cnt), and the record is then unwound as in
 * --unwind=dwarf (window copy, then live memory with the change check: frames marked [live]).
 */
#ifndef DWUNW_FREEZE_H
#define DWUNW_FREEZE_H

#define FRZ_MAX_DEFAULT 4  /* processes frozen at once */

/* BPF-side counters (per-CPU array frz_counters). */
enum frz_bpf_cnt {
	FRZ_CNT_SENT = 0,     /* SIGSTOP sent */
	FRZ_CNT_BUSY,         /* the process already frozen for another event: copy mode */
	FRZ_CNT_LIMIT,        /* FRZ_MAX_DEFAULT processes frozen: copy mode */
	FRZ_CNT_STOPPING,     /* a stop of someone else's in progress: not ours to end */
	FRZ_CNT_SEND_FAILED,  /* bpf_send_signal_thread refused (EBUSY irq_work, EPERM) */
	FRZ_CNT_EMIT_FAILED,  /* the snapshot was lost: no freeze */
	FRZ_CNT_TRACED,       /* traced by someone else (a debugger would get our SIGSTOP): copy mode */
	FRZ_CNT_OWN_STOP,     /* offcputime: a switch-out into our own stop (its time is the freeze's) */
	FRZ_BPF_CNT_MAX = 8,
};

#ifndef __VMLINUX_H__
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct cap_record;
struct bpf_object;

/* User-side outcomes of frozen records. */
enum frz_ucnt {
	FRZ_U_HELD = 0,       /* read from the stopped thread */
	FRZ_U_NO_SLOT,        /* the slot did not hold this event (the signal was not sent) */
	FRZ_U_EXITED,         /* the thread exited before it could be seized */
	FRZ_U_TRACED,         /* seize refused: already traced (a debugger), or EPERM */
	FRZ_U_RACE,           /* not our stop: SIGCONT came first, or it ran on (registers moved) */
	FRZ_U_TIMEOUT,        /* no stop within FRZ_WAIT_MS */
	FRZ_U_USER_STOP,      /* resumed without SIGCONT: a stop signal of someone else's pending */
	FRZ_U_MAX,
};

struct freeze {
	int map_fd;           /* frz_inflight */
	int cnt_fd;           /* frz_counters */
	int pipe_wr;          /* the watchdog's lifeline */
	pid_t watchdog;
	uint32_t hold_ms;     /* DWUNW_TEST_FREEZE_HOLD_MS: hold each freeze this long (tests) */
	uint64_t u[FRZ_U_MAX];
	uint64_t hold_ns, timed; /* time from the record's event to the resume, summed */
};

/* A thread held by freeze_begin, for freeze_end. */
struct freeze_hold {
	pid_t tid, tgid;
	bool held;            /* seized and stopped at the event */
	bool seized;
	bool group_stop;      /* stopped by the group stop (SIGCONT needed) rather than trapped first */
	bool other_stop;      /* a group stop by another stop signal (SIGTSTP...): someone else's */
	bool own_signal;      /* our SIGSTOP taken at its delivery (dropped at detach: no group stop) */
	int pass_sig;         /* someone else's SIGSTOP taken at its delivery: passed on at detach */
	uint64_t t0;
};

/* Before load: the slot map sized to `max` processes (0: FRZ_MAX_DEFAULT). 0 or -errno. */
int freeze_size_maps(struct bpf_object *obj, uint32_t max);
/* After load: the maps' fds found, the watchdog started. 0 or -errno. */
int freeze_start(struct freeze *fz, struct bpf_object *obj);
/* A record with CAP_F_FROZEN: seize and stop-check its thread. true: held (read its memory now). */
bool freeze_begin(struct freeze *fz, const struct cap_record *rec, struct freeze_hold *h);
/* Let it go (whatever freeze_begin did), its slot freed. */
void freeze_end(struct freeze *fz, struct freeze_hold *h);
/* BPF counters summed into out[FRZ_BPF_CNT_MAX]. */
void freeze_bpf_counters(const struct freeze *fz, uint64_t out[FRZ_BPF_CNT_MAX]);
/* One line of figures (the tools' summaries). */
void freeze_summary(const struct freeze *fz, FILE *out);
/* The same as JSON members (no braces): "frozen":{...} */
void freeze_json(const struct freeze *fz, FILE *out);
/* The watchdog told to stop (the tool exits normally). */
void freeze_stop(struct freeze *fz);
#endif

#endif /* DWUNW_FREEZE_H */
