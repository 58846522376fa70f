/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Mapping changes of traced processes as records in the capture channel (reusable: memleak,
 * profile): one consumer of the mapping tracker (mmap_track.bpf.h: the tool lists X(mmap_ev) in
 * MT_CONSUMERS, and the tracker calls mmap_ev_mt_* from its system call programs); the tool defines
 * MMAP_EV_TRACED(tgid) (its process filter), sets mmap_ev_enabled and attaches mmap_ev_exec too.
 *
 * The file of a new mapping is read from its VMA (bpf_find_vma, 5.17+) at the syscall's exit, so
 * the record names what was really mapped (dev, inode, offset, path). Mappings the kernel makes
 * itself at exec (the program, the dynamic loader) are not syscalls: user space reads them from
 * /proc/PID/maps after the exec record (mappings.c). Without bpf_find_vma (before 5.17, or a
 * build for kernels without BTF: DWUNW_NO_KERNEL_BTF) a file mapping's record says only where it
 * lies (MMAP_EV_MMAP_UNKNOWN) and user space reads the rest from /proc.
 */
#ifndef DWUNW_MMAP_EV_BPF_H
#define DWUNW_MMAP_EV_BPF_H

#include "mmap_ev.h"

#ifndef MMAP_EV_TRACED
#error "define MMAP_EV_TRACED(tgid) before including mmap_ev.bpf.h"
#endif

#include "mmap_call.bpf.h"

const volatile __u32 mmap_ev_enabled = 0;      /* set by the tool before load */

struct mmap_ev_vma_ctx {
	__u64 start, end, pgoff, flags;
	__u64 file;            /* struct file *, read with CO-RE below */
};

#ifndef DWUNW_NO_KERNEL_BTF
static long mmap_ev_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct mmap_ev_vma_ctx *c = data;

	c->start = vma->vm_start;
	c->end = vma->vm_end;
	c->pgoff = vma->vm_pgoff;
	c->flags = vma->vm_flags;
	c->file = (__u64)vma->vm_file;
	return 0;
}
#endif

/*
 * Records are built in a per-CPU scratch and copied out (bpf_ringbuf_output / perf output), never
 * reserved in place: a reservation made on one path and submitted on another is what the 6.1
 * verifier cannot follow ("Unreleased reference"), and mapping changes are rare enough for a copy.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mmap_ev_rec);
} mmap_ev_scratch SEC(".maps");

/* A record to fill (this CPU's scratch), its header set; NULL only if the map lookup fails. */
static __always_inline struct mmap_ev_rec *mmap_ev_begin(void)
{
	__u32 key = 0;
	struct mmap_ev_rec *r = bpf_map_lookup_elem(&mmap_ev_scratch, &key);

	if (!r)
		return NULL;
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	r->h.kind = CAP_KIND_MAPEV;
	r->h.hdr_size = sizeof(*r);
	r->h.flags = 0;
	r->pid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->ts = bpf_ktime_get_ns();
	r->op = 0;
	r->prot = 0;
	r->start = r->end = r->offset = r->ino = 0;
	r->dev_major = r->dev_minor = 0;
	r->nparts = 0;
	r->flags = 0;
	r->old_start = r->old_end = 0;
	return r;
}

/*
 * Into the capture channel, in order with the tool's records; a full buffer is counted. A new
 * executable file mapping wakes the reader at once: user space holds its file open as soon as it
 * sees it (mapped_files.h), before the library can be unloaded and deleted; such mappings are rare.
 */
static __always_inline void mmap_ev_end(void *ctx, struct mmap_ev_rec *r)
{
	__u64 wake = r->op == MMAP_EV_MMAP && (r->prot & 4) ? BPF_RB_FORCE_WAKEUP : cap_rb_wakeup();
	long err = cap_use_perfbuf ? bpf_perf_event_output(ctx, &cap_perfbuf, BPF_F_CURRENT_CPU, r, sizeof(*r))
				   : bpf_ringbuf_output(&cap_ringbuf, r, sizeof(*r), wake);

	if (err)
		cap_count(CAP_CNT_OUTPUT_FAILED);
}

#ifndef DWUNW_NO_KERNEL_BTF
/* The file's path, component by component up to the root, crossing mounts. */
static __always_inline void mmap_ev_path(struct mmap_ev_rec *r, struct file *file)
{
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	struct vfsmount *vmnt = BPF_CORE_READ(file, f_path.mnt);
	struct mount *mnt = container_of(vmnt, struct mount, mnt);
	__u32 n = 0;

	for (int i = 0; i < MMAP_EV_NAME_PARTS + 8; i++) {
		struct dentry *root = BPF_CORE_READ(mnt, mnt.mnt_root);
		struct dentry *parent = BPF_CORE_READ(d, d_parent);

		if (d == root) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

			if (up == mnt) { /* the namespace's root */
				r->nparts = n;
				return;
			}
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			continue;
		}
		if (d == parent) {
			r->nparts = n;
			return;
		}
		if (n >= MMAP_EV_NAME_PARTS)
			break;
		const unsigned char *name = BPF_CORE_READ(d, d_name.name);
		long len = bpf_probe_read_kernel_str(r->parts[n], MMAP_EV_PART_LEN, name);
		__u32 nlen = BPF_CORE_READ(d, d_name.len);

		if (len <= 0 || nlen >= MMAP_EV_PART_LEN)
			break;
		n++;
		d = parent;
	}
	r->flags |= MMAP_EV_F_PATH_CUT;
	r->nparts = n;
}

/* An MMAP record's file, offset and protection from the VMA c; start: where the record begins. */
static __always_inline void mmap_ev_file(struct mmap_ev_rec *r, const struct mmap_ev_vma_ctx *c, __u64 start)
{
	struct file *file = (struct file *)c->file;
	struct inode *ino = BPF_CORE_READ(file, f_inode);
	__u32 dev = BPF_CORE_READ(ino, i_sb, s_dev);

	r->op = MMAP_EV_MMAP;
	r->offset = (c->pgoff << 12) + (start - c->start);
	r->prot = c->flags & 7;
	r->ino = BPF_CORE_READ(ino, i_ino);
	r->dev_major = dev >> 20;
	r->dev_minor = dev & 0xfffff;
	if (c->end < r->end)
		r->end = c->end;
	mmap_ev_path(r, file);
}
#endif

/* saved_auxv's words read when looking for AT_BASE (the kernel's AT_VECTOR_SIZE is 44 to 50) */
#define MMAP_EV_AUXV_WORDS 40

/* Whether the VMA at addr is executable now (mprotect, mremap: only code matters to the view). */
#ifdef DWUNW_NO_KERNEL_BTF
static __always_inline bool mmap_ev_vma_exec(__u64 addr)
{
	return true; /* cannot tell: send it */
}
#else
static long mmap_ev_exec_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(__u64 *)data = vma->vm_flags;
	return 0;
}

static __always_inline bool mmap_ev_vma_exec(__u64 addr)
{
	__u64 flags = 0;

	if (!CAP_HAVE_FIND_VMA)
		return true; /* cannot tell: send it */
	return bpf_find_vma(bpf_get_current_task_btf(), addr, mmap_ev_exec_cb, &flags, 0) == 0 &&
	       (flags & MC_PROT_EXEC);
}
#endif

/*
 * At a call's entry (mmap_track.bpf.h): munmap is sent now; whether the exit of the others is
 * wanted: a file mmap, code made executable, writable or taken away (not data pages: glibc grows
 * its arenas' heaps with mprotect), code moved (glibc's realloc moves large data blocks with
 * mremap: not those).
 */
static __always_inline bool mmap_ev_enter(void *ctx, const struct mmap_call *c)
{
	struct mmap_ev_rec *r;

	if (c->nr == MC_NR_MUNMAP) {
		r = mmap_ev_begin();
		if (!r)
			return false;
		r->op = MMAP_EV_MUNMAP;
		r->start = c->addr;
		r->end = c->addr + MC_PAGES(c->len);
		mmap_ev_end(ctx, r);
		return false;
	}
	if (c->nr == MC_NR_MPROTECT)
		return (c->prot & MC_PROT_EXEC) || mmap_ev_vma_exec(c->addr);
	if (c->nr == MC_NR_MREMAP)
		return mmap_ev_vma_exec(c->addr);
	/* anonymous memory only when mapped executable at once (JIT code): the view then knows it
	 * without reading /proc when a frame lands there (runtime/mappings.c) */
	return !(c->flags & MC_MAP_ANON) || (c->prot & MC_PROT_EXEC);
}

/* At the exit of a call mmap_ev_enter wanted (ret: the new address, 0, or -errno). */
static __always_inline void mmap_ev_exit(void *ctx, const struct mmap_call *c, __u64 ret)
{
	struct mmap_ev_rec *r;

	if (MC_FAILED(ret))
		return;
	r = mmap_ev_begin();
	if (!r)
		return;
	if (c->nr == MC_NR_MPROTECT) {
		r->op = MMAP_EV_MPROTECT;
		r->start = c->addr;
		r->end = c->addr + MC_PAGES(c->len);
		r->prot = c->prot & 7;
	} else if (c->nr == MC_NR_MREMAP) {
		r->op = MMAP_EV_MREMAP;
		r->old_start = c->addr;
		r->old_end = c->addr + MC_PAGES(c->len);
		r->start = ret;
		r->end = ret + MC_PAGES(c->new_len);
	} else if (c->flags & MC_MAP_ANON) {
		r->op = MMAP_EV_MMAP_ANON;
		r->start = ret;
		r->end = ret + MC_PAGES(c->len);
		r->prot = c->prot & 7;
	} else {
		r->start = ret;
		r->end = ret + MC_PAGES(c->len);
		r->op = MMAP_EV_MMAP_UNKNOWN;
		r->prot = c->prot & 7; /* the call's (the VMA's, below, when it can be read) */
#ifndef DWUNW_NO_KERNEL_BTF
		struct mmap_ev_vma_ctx v = {};

		if (CAP_HAVE_FIND_VMA &&
		    bpf_find_vma(bpf_get_current_task_btf(), ret, mmap_ev_vma_cb, &v, 0) == 0 && v.file &&
		    v.start <= ret)
			mmap_ev_file(r, &v, ret);
#endif
	}
	mmap_ev_end(ctx, r);
}

#ifndef DWUNW_NO_KERNEL_BTF
/* The file mapping of the VMA holding addr, as an MMAP record; its end in *end (0: none). */
static __always_inline void mmap_ev_image_vma(void *ctx, __u64 addr, __u64 *end)
{
	struct mmap_ev_vma_ctx c = {};
	struct mmap_ev_rec *r;

	*end = 0;
	if (!addr || !CAP_HAVE_FIND_VMA ||
	    bpf_find_vma(bpf_get_current_task_btf(), addr, mmap_ev_vma_cb, &c, 0) || !c.file || c.start > addr)
		return;
	r = mmap_ev_begin();
	if (!r)
		return;
	r->start = c.start;
	r->end = c.end;
	mmap_ev_file(r, &c, c.start);
	mmap_ev_end(ctx, r);
	*end = c.end;
}
#endif

/*
 * A new image: its mappings are the kernel's, user space reads them from /proc when it gets here,
 * which can be after the process is gone (a short-lived one behind a backlog). So the code of the
 * program (the VMA at mm->start_code) and of its interpreter (the VMA after the one at AT_BASE,
 * from the saved auxiliary vector) also come as MMAP records, read now (not without kernel BTF:
 * the exec record alone, user space reads /proc).
 */
SEC("raw_tp/sched_process_exec")
int mmap_ev_exec(void *ctx)
{
	struct mmap_ev_rec *r;

	if (!mmap_ev_enabled || !MMAP_EV_TRACED((__u32)(bpf_get_current_pid_tgid() >> 32)))
		return 0;
	r = mmap_ev_begin();
	if (!r)
		return 0;
	r->op = MMAP_EV_EXEC;
	mmap_ev_end(ctx, r);
#ifndef DWUNW_NO_KERNEL_BTF
	struct mm_struct *mm = BPF_CORE_READ(bpf_get_current_task_btf(), mm);
	__u64 base = 0, end;

	mmap_ev_image_vma(ctx, BPF_CORE_READ(mm, start_code), &end);
	for (int i = 0; i + 1 < MMAP_EV_AUXV_WORDS; i += 2) {
		__u64 type = 0, val = 0;

		bpf_core_read(&type, sizeof(type), &mm->saved_auxv[i]);
		if (type == 0) /* AT_NULL */
			break;
		bpf_core_read(&val, sizeof(val), &mm->saved_auxv[i + 1]);
		if (type == 7) { /* AT_BASE: the interpreter's first (read-only) mapping */
			base = val;
			break;
		}
	}
	mmap_ev_image_vma(ctx, base, &end);
	if (end)
		mmap_ev_image_vma(ctx, end, &end);
#endif
	return 0;
}

/* the mapping tracker's consumer interface (mmap_track.bpf.h): list it as X(mmap_ev) */
#define mmap_ev_mt_enabled mmap_ev_enabled
static __always_inline bool mmap_ev_mt_on(__u32 tgid, __u32 tid)
{
	return mmap_ev_enabled && MMAP_EV_TRACED(tgid);
}
#define mmap_ev_mt_enter(ctx, c) mmap_ev_enter(ctx, c)
#define mmap_ev_mt_exit(ctx, c, ret, tgid) mmap_ev_exit(ctx, c, ret)
#define mmap_ev_mt_lost() ((void)0)

#endif /* DWUNW_MMAP_EV_BPF_H */
