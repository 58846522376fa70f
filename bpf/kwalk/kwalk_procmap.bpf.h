/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A process's executable mappings entered in kw_procs by the BPF side (kwalk_format.h), so the
 * first sample after an exec already walks and a new process costs no load from /proc/PID/maps:
 *   exec   the entry is made anew: the new image's executable, its interpreter and [vdso]
 *   fork   the child gets a copy of its parent's
 *   mmap   a file mapped executable is merged in (mappings it overlaps are dropped)
 *   exit   the entry is freed (kw_track_exit)
 * The module of a mapping comes from kw_files, which user space fills as it loads modules; a
 * file not there is told to user space with its path (KW_KIND_FILE), which loads it by that
 * path and enters the mapping (kwalk_track.c). A sample inside execve walks the entry of the
 * calling image, which stays until sched_process_exec. Included by kwalk_track.bpf.h; on with
 * kw_pm_enabled. (Tracepoints only: this machine's kernel has no kprobes nor fentry.)
 */
#ifndef DWUNW_KWALK_PROCMAP_BPF_H
#define DWUNW_KWALK_PROCMAP_BPF_H

const volatile __u32 kw_pm_enabled = 0;      /* set by the tool before load (kw_track_prepare) */
__u32 kw_pm_images = 0;                      /* execs numbered (struct kw_proc.image) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);           /* sized by user space: one per module slot */
	__type(key, struct kw_file_key);
	__type(value, struct kw_file);
} kw_files SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_proc);
} kw_pm_scratch SEC(".maps");

/* A VMA as read in bpf_find_vma's callback (its pointer is valid only there). */
struct kw_pm_vma {
	__u64 start, end, pgoff;
	struct kw_file_key key;
	__u32 exec;
	__u32 file;
	__u64 dentry;              /* the file's (its path, for a file kw_files does not hold) */
};

/* a KW_KIND_FILE record is built here (too large for the BPF stack) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_file_rec);
} kw_pm_filerec SEC(".maps");

static long kw_pm_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct kw_pm_vma *v = data;
	struct file *f = vma->vm_file;

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->pgoff = vma->vm_pgoff;
	v->exec = !!(vma->vm_flags & 0x4 /* VM_EXEC */);
	v->file = f != NULL;
	if (f) {
		struct inode *ino = BPF_CORE_READ(f, f_inode);

		v->key.dev = BPF_CORE_READ(ino, i_sb, s_dev);
		v->key.ino = BPF_CORE_READ(ino, i_ino);
		v->key.size = BPF_CORE_READ(ino, i_size);
		v->dentry = (__u64)BPF_CORE_READ(f, f_path.dentry);
	}
	return 0;
}

#define KW_PATH_DEPTH 16
#define KW_TELL_NS (200ull * 1000 * 1000)

/* file -> when it was last told: told once per KW_TELL_NS however many processes map it while
 * user space builds its table (a busy machine starts hundreds; each record is 600 bytes) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct kw_file_key);
	__type(value, __u64);
} kw_told SEC(".maps");

/* Tell user space of a file kw_files does not hold: its identity, mapping and path. */
static __always_inline void kw_pm_tell_file(void *ctx, __u32 tgid, __u32 image, const struct kw_pm_vma *v)
{
	struct kw_file_rec *r = bpf_map_lookup_elem(&kw_pm_filerec, &kw_zero_key);
	struct dentry *d = (struct dentry *)v->dentry, *names[KW_PATH_DEPTH];
	__u32 depth = 0, off = 0;
	__u64 now = bpf_ktime_get_ns(), *told = bpf_map_lookup_elem(&kw_told, &v->key);

	if (told && now - *told < KW_TELL_NS)
		return; /* its table is on its way; this process's mapping falls back meanwhile */
	bpf_map_update_elem(&kw_told, &v->key, &now, BPF_ANY);
	if (!r)
		return;
	r->h.kind = KW_KIND_FILE;
	r->h.hdr_size = sizeof(*r);
	r->pid = tgid;
	r->image = image;
	r->start = v->start;
	r->end = v->end;
	r->pgoff = v->pgoff;
	r->dev = v->key.dev;
	r->ino = v->key.ino;
	r->size = v->key.size;
	/* leaf to root (the mount's), then written root first */
	for (int i = 0; i < KW_PATH_DEPTH; i++) {
		struct dentry *parent;

		if (!d)
			break;
		parent = BPF_CORE_READ(d, d_parent);
		if (parent == d)
			break;
		names[i] = d;
		depth = i + 1;
		d = parent;
	}
	for (int i = KW_PATH_DEPTH - 1; i >= 0; i--) {
		const unsigned char *name;
		long n;

		if (i >= depth)
			continue;
		/* each name read at an offset below half the buffer, at most half of it long */
		if (off >= KW_PATH_MAX / 2 - 1)
			break;
		r->path[off & (KW_PATH_MAX / 2 - 1)] = '/';
		off++;
		name = BPF_CORE_READ(names[i], d_name.name);
		n = bpf_probe_read_kernel_str(&r->path[off & (KW_PATH_MAX / 2 - 1)], KW_PATH_MAX / 2, name);
		if (n <= 1)
			break;
		off += n - 1;
	}
	r->pathlen = off < KW_PATH_MAX ? off : KW_PATH_MAX - 1;
	if (cap_emit(ctx, r, sizeof(*r)))
		kw_track_count(KW_TC_LOST);
}

/* The mapping at addr of the current task as a kw_map: 1; 0 when it is not an executable file
 * mapping of a known module (*miss: a file kw_files does not hold, told to user space for the
 * entry of that image). */
static __always_inline int kw_pm_map_at(void *ctx, __u32 tgid, __u32 image, struct task_struct *task, __u64 addr,
					int vdso, struct kw_map *out, int *miss)
{
	struct kw_pm_vma v = {};
	struct kw_file *f;
	__u64 off;

	if (!addr || bpf_find_vma(task, addr, kw_pm_vma_cb, &v, 0) || !v.exec)
		return 0;
	if (vdso) {
		v.key.dev = v.key.ino = 0;
		v.key.size = v.end - v.start;
		v.dentry = 0;
	} else if (!v.file) {
		return 0;
	}
	f = bpf_map_lookup_elem(&kw_files, &v.key);
	if (!f) {
		/* 1: told with its path; 2: no path ([vdso]): user space loads the process */
		*miss |= v.dentry ? 1 : 2;
		if (v.dentry)
			kw_pm_tell_file(ctx, tgid, image, &v);
		return 0;
	}
	off = v.pgoff << 12;
	for (int i = 0; i < KW_FILE_SEGS; i++) {
		if (i >= f->nsegs)
			break;
		if (off >= f->segs[i].off_lo && off < f->segs[i].off_hi) {
			out->start = v.start;
			out->end = v.end;
			out->bias = v.start - off - (__u64)f->segs[i].delta;
			out->mod = f->slot;
			out->gen = f->gen;
			return 1;
		}
	}
	return 0;
}

/* kw_pm_merge's state, for bpf_loop (a plain loop over 128 mappings explodes the verifier) */
struct kw_pm_mctx {
	struct kw_proc *out;
	const struct kw_proc *in;
	struct kw_map m;
	__u32 n, done, err;
};

static __always_inline void kw_pm_put(struct kw_pm_mctx *c, const struct kw_map *m)
{
	if (c->n >= KW_MAX_MAPS) {
		c->err = 1;
		return;
	}
	c->out->maps[c->n & (KW_MAX_MAPS - 1)] = *m;
	c->n++;
}

static long kw_pm_merge_cb(__u64 i, void *arg)
{
	struct kw_pm_mctx *c = arg;
	const struct kw_map *o;

	if (!c->in || !c->out || i >= c->in->nmaps || c->err)
		return 1;
	o = &c->in->maps[i & (KW_MAX_MAPS - 1)];
	if (o->start < c->m.end && c->m.start < o->end)
		return 0; /* replaced (a library mapped where another was) */
	if (!c->done && o->start >= c->m.end) {
		kw_pm_put(c, &c->m);
		c->done = 1;
	}
	kw_pm_put(c, o);
	return 0;
}

/* out = in with m merged in, sorted by start; the mappings m overlaps dropped. */
static __always_inline int kw_pm_merge(struct kw_proc *out, const struct kw_proc *in, const struct kw_map *m)
{
	struct kw_pm_mctx c = { .out = out, .in = in, .m = *m };

	bpf_loop(KW_MAX_MAPS, kw_pm_merge_cb, &c, 0);
	if (!c.done && !c.err)
		kw_pm_put(&c, &c.m);
	out->nmaps = c.n;
	return c.err ? -1 : 0;
}

/* mmap exit: the new executable file mapping at addr into tgid's entry (if it has one).
 * 1 when entered, or nothing to enter, or a file kw_files does not hold told with its path;
 * 0 when tgid has no entry (or it could not be made): user space loads the process. */
static __always_inline int kw_pm_mmap(void *ctx, __u64 addr, __u32 tgid)
{
	struct kw_proc *p, *s;
	struct kw_map m = {};
	int miss = 0;

	if (!kw_pm_enabled)
		return 0;
	p = bpf_map_lookup_elem(&kw_procs, &tgid);
	if (!p)
		return 0;
	if (!kw_pm_map_at(ctx, tgid, p->image, bpf_get_current_task_btf(), addr, 0, &m, &miss)) {
		if (miss)
			kw_track_count(KW_TC_PM_MISS);
		return miss & 2 ? 0 : 1;
	}
	s = bpf_map_lookup_elem(&kw_pm_scratch, &kw_zero_key);
	if (!s)
		return 0;
	s->image = p->image;
	if (kw_pm_merge(s, p, &m) || bpf_map_update_elem(&kw_procs, &tgid, s, BPF_EXIST)) {
		kw_track_count(KW_TC_PM_FULL);
		return 0;
	}
	kw_track_count(KW_TC_PM_ADD);
	return 1;
}

static __always_inline void kw_pm_swap(struct kw_map *a, struct kw_map *b)
{
	if (b->start < a->start) {
		struct kw_map t = *a;

		*a = *b;
		*b = t;
	}
}

/* sched_process_exec of a followed process: its entry anew. 0 when user space must load the
 * process (a mapping it could not enter nor tell of). */
static __always_inline int kw_pm_exec(void *ctx, struct task_struct *task, __u32 tgid)
{
	struct kw_map m[3] = {};
	struct kw_proc *s;
	struct pt_regs *regs;
	struct mm_struct *mm;
	int miss = 0, n = 0;
	__u32 image;

	if (!kw_pm_enabled)
		return 0;
	image = __sync_fetch_and_add(&kw_pm_images, 1) + 1;
	if (!image) /* 0 is user space's */
		image = __sync_fetch_and_add(&kw_pm_images, 1) + 1;
	s = bpf_map_lookup_elem(&kw_pm_scratch, &kw_zero_key);
	mm = BPF_CORE_READ(task, mm);
	if (!s || !mm)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	/* the executable's text (start_code lies in its executable segment), the entry point
	 * (the interpreter's, or the executable's again), [vdso] */
	if (kw_pm_map_at(ctx, tgid, image, task, BPF_CORE_READ(mm, start_code), 0, &m[0], &miss))
		n = 1;
	if (kw_pm_map_at(ctx, tgid, image, task, PT_REGS_IP_CORE(regs), 0, &m[1], &miss) &&
	    (!n || m[1].start != m[0].start))
		n |= 2;
	if (kw_pm_map_at(ctx, tgid, image, task, (__u64)BPF_CORE_READ(mm, context.vdso), 1, &m[2], &miss))
		n |= 4;
	/* unused ones sort last */
	if (!(n & 1))
		m[0].start = ~0ull;
	if (!(n & 2))
		m[1].start = ~0ull;
	if (!(n & 4))
		m[2].start = ~0ull;
	kw_pm_swap(&m[0], &m[1]);
	kw_pm_swap(&m[1], &m[2]);
	kw_pm_swap(&m[0], &m[1]);
	s->nmaps = 0;
	s->image = image;
	for (int i = 0; i < 3; i++) {
		if (m[i].start == ~0ull)
			break;
		s->maps[i] = m[i];
		s->nmaps = i + 1;
	}
	if (bpf_map_update_elem(&kw_procs, &tgid, s, BPF_ANY)) {
		bpf_map_delete_elem(&kw_procs, &tgid); /* never the old program's mappings */
		kw_track_count(KW_TC_PM_FULL);
		return 0;
	}
	kw_track_count(KW_TC_PM_EXEC);
	if (miss)
		kw_track_count(KW_TC_PM_MISS);
	return !(miss & 2);
}

/* sched_process_fork of a new process: the child's entry is its parent's. */
static __always_inline void kw_pm_fork(__u32 parent, __u32 child)
{
	struct kw_proc *p;

	if (!kw_pm_enabled)
		return;
	p = bpf_map_lookup_elem(&kw_procs, &parent);
	if (!p)
		return;
	if (bpf_map_update_elem(&kw_procs, &child, p, BPF_ANY))
		kw_track_count(KW_TC_PM_FULL);
	else
		kw_track_count(KW_TC_PM_FORK);
}

/* At exit: the entry goes. */
static __always_inline void kw_pm_exit(__u32 tgid)
{
	if (kw_pm_enabled && !bpf_map_delete_elem(&kw_procs, &tgid))
		kw_track_count(KW_TC_PM_EXIT);
}

#endif /* DWUNW_KWALK_PROCMAP_BPF_H */
