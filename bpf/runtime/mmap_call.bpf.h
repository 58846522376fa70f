/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The mapping system calls as the tracker (mmap_track.bpf.h) sees them: their numbers per
 * architecture and their arguments decoded once into a struct mmap_call, which the consumers
 * (mmap_ev.bpf.h, kwalk_track.bpf.h) read at the call's entry and exit.
 */
#ifndef DWUNW_MMAP_CALL_BPF_H
#define DWUNW_MMAP_CALL_BPF_H

#if defined(__TARGET_ARCH_x86)
#define MC_NR_MMAP     9
#define MC_NR_MUNMAP   11
#define MC_NR_MMAP2    -1
#define MC_NR_MPROTECT 10
#define MC_NR_MREMAP   25
#define MC_MAP_ANON    0x20
#define MC_EXIT_NR(regs) BPF_CORE_READ(regs, orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define MC_NR_MMAP     222
#define MC_NR_MUNMAP   215
#define MC_NR_MMAP2    -1
#define MC_NR_MPROTECT 226
#define MC_NR_MREMAP   216
#define MC_MAP_ANON    0x20
#define MC_EXIT_NR(regs) BPF_CORE_READ(regs, syscallno)
#elif defined(__TARGET_ARCH_mips)
/* o32; its pt_regs (pt_regs_mips.h) has no call number: the exit looks the thread up instead */
#define MC_NR_MMAP     4090
#define MC_NR_MUNMAP   4091
#define MC_NR_MMAP2    4210
#define MC_NR_MPROTECT 4125
#define MC_NR_MREMAP   4167
#define MC_MAP_ANON    0x800
#else
#error "mmap_call.bpf.h: no syscall numbers for this architecture"
#endif

#define MC_PROT_EXEC 4   /* PROT_EXEC and VM_EXEC alike */
#define MC_FAILED(ret) ((__u64)(ret) >= (__u64)-4095)
#define MC_PAGES(len) (((len) + 4095) & ~4095ull)

/* a call in flight on a thread (decoded at entry, kept until its exit) */
struct mmap_call {
	__u64 addr, len;
	__u64 new_len;           /* mremap's */
	__u32 nr;
	__u32 prot;              /* mmap's, mprotect's */
	__u32 flags;             /* mmap's */
	__s32 fd;                /* mmap's (x86, arm64; -1 elsewhere) */
	__u32 want;              /* the consumers that want its exit (mmap_track.bpf.h) */
	__u32 pad;
};

static __always_inline bool mmap_call_nr(long id)
{
	return id == MC_NR_MMAP || id == MC_NR_MUNMAP || id == MC_NR_MMAP2 || id == MC_NR_MPROTECT ||
	       id == MC_NR_MREMAP;
}

#ifdef DWUNW_NO_KERNEL_BTF
/* the system call's argument n (1..4) from the kernel's pt_regs at its fixed layout: $4..$7 */
static __always_inline __u64 mc_arg(struct pt_regs *regs, int n)
{
	__u32 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &regs->regs[3 + n]);
	return v;
}
#define MC_ARG(regs, n) mc_arg(regs, n)
#else
#define MC_ARG(regs, n) PT_REGS_PARM##n##_CORE_SYSCALL(regs)
#endif

static __always_inline void mmap_call_decode(struct mmap_call *c, struct pt_regs *regs, long id)
{
	c->nr = (__u32)id;
	c->addr = MC_ARG(regs, 1);
	c->len = MC_ARG(regs, 2);
	if (id == MC_NR_MREMAP) {
		c->new_len = MC_ARG(regs, 3);
		return;
	}
	c->prot = (__u32)MC_ARG(regs, 3);
	c->fd = -1;
	if (id != MC_NR_MMAP && id != MC_NR_MMAP2)
		return;
	c->flags = (__u32)MC_ARG(regs, 4);
#if defined(__TARGET_ARCH_x86) || defined(__TARGET_ARCH_arm64)
	c->fd = (__s32)PT_REGS_PARM5_CORE_SYSCALL(regs);
#endif
}

#endif /* DWUNW_MMAP_CALL_BPF_H */
