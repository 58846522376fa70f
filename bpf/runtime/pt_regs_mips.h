/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The 32-bit mips kernel's register frame (o32 user space), for the cross build's vmlinux.h
 * (bpf/Makefile). Layout of arch/mips/include/asm/ptrace.h with CONFIG_32BIT (the 8-word argument
 * save area first, since Linux 3.13); every slot is a 32-bit `unsigned long` of that kernel, hence
 * __u32 here (BPF's long is 64-bit). Only the general registers and cp0_epc are read: $4..$7 hold
 * the arguments, $2 the return value, $29 the stack pointer, $31 the return address; cp0_epc is
 * the pc. A fixed layout, not CO-RE relocated: the mips build needs no kernel BTF
 * (DWUNW_NO_KERNEL_BTF). The fields read all lie before the ones kernel options add
 * (CONFIG_CPU_HAS_SMARTMIPS: acx after lo; CONFIG_CPU_CAVIUM_OCTEON: mpl/mtp after cp0_epc), except
 * cp0_epc, which follows acx: this layout is the one without SMARTMIPS (Debian's 4kc-malta,
 * every mips32r2 kernel config but the SmartMIPS ones).
 */
#ifndef DWUNW_PT_REGS_MIPS_H
#define DWUNW_PT_REGS_MIPS_H

struct pt_regs {
	__u32 pad0[8];
	__u32 regs[32];
	__u32 cp0_status;
	__u32 hi;
	__u32 lo;
	__u32 cp0_badvaddr;
	__u32 cp0_cause;
	__u32 cp0_epc;
};

#endif
