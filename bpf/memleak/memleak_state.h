/* SPDX-License-Identifier: GPL-2.0-only */
/* What every part of memleak's user space shares: its BPF object and its target. */
#ifndef DWUNW_MEMLEAK_STATE_H
#define DWUNW_MEMLEAK_STATE_H

#include <stdbool.h>
#include <sys/types.h>

extern struct memleak_bpf *skel;
extern pid_t target_pid;      /* -p PID, or the command's first process */
extern bool following;        /* -c, -- PROG: the command's process tree */

#endif /* DWUNW_MEMLEAK_STATE_H */
