/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * arm64's register frame, for the cross build's vmlinux.h (bpf/Makefile): the layout of
 * arch/arm64/include/asm/ptrace.h (user_pt_regs is UAPI). Marked preserve_access_index like the
 * rest of vmlinux.h, so every access is CO-RE relocated against the target kernel's BTF; the
 * fields after pstate are the kernel's business and left out, but for syscallno.
 */
#ifndef DWUNW_PT_REGS_ARM64_H
#define DWUNW_PT_REGS_ARM64_H

struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
} __attribute__((preserve_access_index));

struct pt_regs {
	union {
		struct user_pt_regs user_regs;
		struct {
			__u64 regs[31];
			__u64 sp;
			__u64 pc;
			__u64 pstate;
		};
	};
	__u64 orig_x0;
	__s32 syscallno;   /* the system call of a sys_exit tracepoint (kwalk_track.bpf.h) */
} __attribute__((preserve_access_index));

#endif
