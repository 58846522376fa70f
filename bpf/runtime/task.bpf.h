/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What a tool's sched_process_exit program asks of the exiting task (tp_btf: the kernel's BTF; the
 * mips32 build without it counts threads itself, follow.bpf.h). One place for the rule the tools
 * and the follow set share.
 */
#ifndef DWUNW_TASK_BPF_H
#define DWUNW_TASK_BPF_H

#ifndef DWUNW_NO_KERNEL_BTF
/*
 * sched_process_exit: the exiting thread was its process's last. do_exit takes the thread out of
 * signal->live before the tracepoint fires, so 0 means none is left, whichever thread exits last
 * (the main thread may go first); from now on the tgid may be reused by another process.
 */
static __always_inline int task_last_thread(struct task_struct *t)
{
	return t->signal->live.counter == 0;
}
#endif

#endif /* DWUNW_TASK_BPF_H */
