/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Following a process tree (-c COMMAND, -- PROG ARGS): definitions shared by follow.bpf.h and
 * command.c. Every followed process has an entry in follow_procs (tgid -> slot); its slot in
 * follow_slots says who it is (tgid, comm) and whether it exec'd since. A new slot is taken at
 * each fork and each exec, so a tool can key its per-process state (memleak: outstanding
 * allocations) by slot and drop what an image left behind when it exec'd.
 */
#ifndef DWUNW_FOLLOW_H
#define DWUNW_FOLLOW_H

#define FOLLOW_MAX_PROCS 16384 /* processes followed at once */
#define FOLLOW_SLOTS 65536     /* slot numbers (16 bits): reused after this many forks + execs */
#define FOLLOW_SLOT_SHIFT 48   /* memleak: slot << 48 | user address (addresses are < 2^48) */
#define FOLLOW_ROOT_SLOT 1     /* the command's process, put in the set by user space */

#define FOLLOW_F_EXECED (1u << 0) /* the process replaced this image (its memory is gone) */
#define FOLLOW_F_EXITED (1u << 1) /* the process exited */

struct follow_proc {
	__u32 slot;
	__u32 threads;             /* kernels without BTF: its threads besides one (follow.bpf.h) */
};

struct follow_slot {
	__u32 tgid;
	__u32 flags;               /* FOLLOW_F_* */
	char comm[16];
};

#endif /* DWUNW_FOLLOW_H */
