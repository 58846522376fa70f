/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BPF side of the stack capture, reusable by any tool: include after vmlinux.h and the libbpf
 * headers. It defines the maps (cap_ringbuf, cap_perfbuf, cap_scratch, cap_threads,
 * cap_counters) and the read-only settings (cap_*), which the tool's loader sizes and sets
 * before load (capture_user.h: dwunw_cap_size_maps, dwunw_cap_scratch_slots).
 *
 * cap_snapshot() fills a struct cap_record (capture.h) with the user registers converted to
 * DWARF numbering, pid/tid/timestamp, a caller cookie, the thread's pending return probes and
 * the stack bytes [sp, sp + n), n = min(window, end of the stack's VMA - sp), then emits it:
 *  - ring buffer (default): reserved in the ring directly and filled in place (no scratch
 *    copy); the reservation size must be a constant for the verifier, so it is the smallest of
 *    1, 2, 4, 8, 16, 32 KiB or the window that holds n (stack_size says how much is valid);
 *  - perf buffer (cap_use_perfbuf): built in a scratch slot, sent as header + n bytes.
 *    Uprobe programs can be preempted (they run under migrate_disable, not preempt_disable),
 *    so the scratch is a pool of slots taken with an atomic exchange, not a per-CPU buffer.
 *
 * Pending return probes: cap_entry_ret() + cap_prune_entry() + cap_push() at a function's
 * entry probe, cap_pending_match() + cap_pop() at its return probe. The entry probe's program runs before the kernel replaces
 * the return address with the [uprobes] trampoline (uprobe handler chain: consumers' entry
 * handlers first, then prepare_uretprobe), so the value read at [sp] is the real one.
 *
 * From a perf event (BPF_PROG_TYPE_PERF_EVENT) pass the user registers:
 *   struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
 * and the program's ctx for the perf-buffer output.
 */
#ifndef DWUNW_CAPTURE_BPF_H
#define DWUNW_CAPTURE_BPF_H

#include "capture.h"
#include "counters.bpf.h"

#ifndef EFAULT
#define EFAULT 14
#endif
#ifndef ENOSPC
#define ENOSPC 28
#endif
#ifndef EBUSY
#define EBUSY 16
#endif

/* ---- Settings (set by user space before load) ---------------------------------------- */

const volatile __u32 cap_use_perfbuf = 0;          /* 1: perf buffer instead of ring buffer */
const volatile __u32 cap_stack_bytes = CAP_DEF_STACK; /* window, <= CAP_MAX_STACK */
const volatile __u32 cap_scratch_slots = 1;        /* entries of cap_scratch (perf buffer mode) */
const volatile __u64 cap_wakeup_bytes = 0;         /* ring buffer: wake the consumer from this much */

/* ---- Maps ------------------------------------------------------------------------------ */

/* Ring buffer: max_entries (bytes, power of 2) set by user space; one page when unused. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} cap_ringbuf SEC(".maps");

/* Perf buffer: one entry per CPU (libbpf sizes it when max_entries is 0), 1 when unused. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} cap_perfbuf SEC(".maps");

struct cap_scratch_slot {
	__u64 busy;
	__u64 pad;
	__u8 data[sizeof(struct cap_record) + CAP_MAX_STACK]; /* a struct cap_record */
};

/* Perf-buffer mode only: cap_scratch_slots entries (2 per CPU); 1 when unused. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cap_scratch_slot);
} cap_scratch SEC(".maps");

/* tid -> calls pending on that thread; entries removed at thread exit (cap_thread_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* an insert per thread only: memory as used */
	__type(key, __u32);
	__type(value, struct cap_thread);
} cap_threads SEC(".maps");

/* All-zero template for new cap_threads entries (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cap_thread);
} cap_zero SEC(".maps");

PERCPU_COUNTERS(cap_counters, cap_count, CAP_CNT_MAX)

/* ---- Architecture ------------------------------------------------------------------------ */

/*
 * DWUNW_NO_KERNEL_BTF (the mips32 build: bpf/Makefile): the object must load in a kernel without
 * BTF, so it has no CO-RE relocation and calls no helper that takes or returns a BTF-typed kernel
 * pointer (bpf_get_current_task_btf, bpf_find_vma). What those give is found another way: the
 * stack's end by probing pages (cap_stack_probe_end), the uretprobe trampoline by user space
 * (capture_user.c), mapped files from /proc (mmap_ev.bpf.h).
 */
#ifdef DWUNW_NO_KERNEL_BTF
#ifndef __TARGET_ARCH_mips
#error "DWUNW_NO_KERNEL_BTF: only the mips32 build has the fixed layouts it needs (pt_regs_mips.h)"
#endif
#define CAP_HAVE_FIND_VMA 0
#else
#define CAP_HAVE_FIND_VMA bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma)
#endif

#if defined(__TARGET_ARCH_x86)
#define CAP_ARCH CAP_ARCH_X86_64
/* At a return probe the stack pointer is 8 above its value at entry (the return popped). */
#define CAP_RET_SP_ADJ 8
#elif defined(__TARGET_ARCH_arm64)
#define CAP_ARCH CAP_ARCH_ARM64
#define CAP_RET_SP_ADJ 0
#elif defined(__TARGET_ARCH_mips)
/* 32-bit mips, o32 (pt_regs_mips.h): registers are 32-bit slots, zero-extended here */
#define CAP_ARCH CAP_ARCH_MIPS32
#define CAP_RET_SP_ADJ 0
#else
#error "capture.bpf.h: define __TARGET_ARCH_x86, __TARGET_ARCH_arm64 or __TARGET_ARCH_mips"
#endif

static __always_inline __u64 cap_regs_sp(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_mips)
	return regs->regs[29];
#else
	return regs->sp;
#endif
}

/* The user registers in DWARF numbering; returns the valid mask. */
static __always_inline __u64 cap_regs_fill(struct cap_record *rec, struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	rec->regs[0] = regs->ax;
	rec->regs[1] = regs->dx;
	rec->regs[2] = regs->cx;
	rec->regs[3] = regs->bx;
	rec->regs[4] = regs->si;
	rec->regs[5] = regs->di;
	rec->regs[6] = regs->bp;
	rec->regs[7] = regs->sp;
	rec->regs[8] = regs->r8;
	rec->regs[9] = regs->r9;
	rec->regs[10] = regs->r10;
	rec->regs[11] = regs->r11;
	rec->regs[12] = regs->r12;
	rec->regs[13] = regs->r13;
	rec->regs[14] = regs->r14;
	rec->regs[15] = regs->r15;
	rec->pc = regs->ip;
	return 0xffffull;
#elif defined(__TARGET_ARCH_arm64)
	/*
	 * arm64: x0..x30 are DWARF 0..30, sp is 31. Unrolled: a uprobe's ctx may be read only at
	 * constant offsets (a load through ctx + index is refused: "dereference of modified ctx ptr").
	 */
#pragma unroll
	for (int i = 0; i < 31; i++)
		rec->regs[i] = regs->regs[i];
	rec->regs[31] = regs->sp;
	rec->pc = regs->pc;
	return 0xffffffffull;
#else
	/* mips: $0..$31 are DWARF 0..31 ($29 sp, $31 ra); the pc is cp0_epc. Unrolled as above. */
#pragma unroll
	for (int i = 0; i < 32; i++)
		rec->regs[i] = regs->regs[i];
	rec->pc = regs->cp0_epc;
	return 0xffffffffull;
#endif
}

/* Where the return address is at a function's entry: its stack slot (0 if in a register). */
static __always_inline void cap_entry_ret(struct pt_regs *regs, __u64 *slot, __u64 *ret)
{
#if defined(__TARGET_ARCH_x86)
	__u64 sp = regs->sp, v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)sp);
	*slot = sp;
	*ret = v;
#elif defined(__TARGET_ARCH_arm64)
	*slot = 0;
	*ret = regs->regs[30];
#else
	*slot = 0;
	*ret = regs->regs[31];
#endif
}

/*
 * Where a pending uretprobe's return address points (the first slot of the process's uprobe
 * XOL area), for patching it by value on arches whose return address is in a register at entry;
 * 0 on x86_64, whose records name the stack slot.
 */
static __always_inline __u64 cap_uretprobe_tramp(void)
{
#if defined(__TARGET_ARCH_x86) || defined(DWUNW_NO_KERNEL_BTF)
	return 0; /* no kernel BTF: user space reads it from /proc/PID/maps ([uprobes]) */
#else
	struct task_struct *task = bpf_get_current_task_btf();

	return BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
#endif
}

/* ---- Pending calls per thread ---------------------------------------------------------------- */

static __always_inline struct cap_thread *cap_thread_get(__u32 tid, int create)
{
	struct cap_thread *t = bpf_map_lookup_elem(&cap_threads, &tid);
	__u32 zero = 0;

	if (t || !create)
		return t;
	t = bpf_map_lookup_elem(&cap_zero, &zero);
	if (!t)
		return NULL;
	bpf_map_update_elem(&cap_threads, &tid, t, BPF_NOEXIST); /* fails only when full */
	t = bpf_map_lookup_elem(&cap_threads, &tid);
	if (!t)
		cap_count(CAP_CNT_THREADS_FULL);
	return t;
}

/*
 * Drop entries of calls that can no longer be pending: their frame lies below the current
 * stack pointer (left by longjmp, or by a return whose probe did not run). Entries at the
 * same sp stay (a tail call into another probed function shares its caller's slot).
 */
static __always_inline void cap_prune(struct cap_thread *t, __u64 sp)
{
	for (int i = 0; i < CAP_MAX_PENDING; i++) {
		__u32 d = t->depth;

		if (d == 0 || d > CAP_MAX_PENDING)
			break;
		if (t->e[(d - 1) & (CAP_MAX_PENDING - 1)].sp >= sp)
			break;
		t->depth = d - 1;
	}
}

/*
 * At an entry probe: also drop entries left at this very stack pointer whose return address was
 * not replaced by the trampoline (their return probe is not pending: attached after the entry
 * probe, or not armed). A live call that tail-called into this one shares the slot, but its
 * return address there is the trampoline, not the one it recorded.
 */
static __always_inline void cap_prune_entry(struct cap_thread *t, __u64 sp, __u64 slot, __u64 ret)
{
	cap_prune(t, sp);
	for (int i = 0; i < CAP_MAX_PENDING; i++) {
		__u32 d = t->depth;

		if (d == 0 || d > CAP_MAX_PENDING)
			break;
		struct cap_pending *e = &t->e[(d - 1) & (CAP_MAX_PENDING - 1)];
		if (e->sp != sp || e->slot != slot || e->ret != ret)
			break;
		t->depth = d - 1;
	}
}

/*
 * Push a call at its entry probe (after cap_prune_entry with the same slot/ret, from
 * cap_entry_ret); NULL when CAP_MAX_PENDING calls are already pending.
 */
static __always_inline struct cap_pending *cap_push(struct cap_thread *t, struct pt_regs *regs,
						      __u64 slot, __u64 ret)
{
	struct cap_pending *e;
	__u32 d;

	d = t->depth;
	if (d >= CAP_MAX_PENDING) {
		t->overflow++;
		cap_count(CAP_CNT_PENDING_FULL);
		return NULL;
	}
	e = &t->e[d & (CAP_MAX_PENDING - 1)];
	e->sp = cap_regs_sp(regs);
	e->slot = slot;
	e->ret = ret;
	t->depth = d + 1;
	return e;
}

/* At a return probe: the pending entry of the returning call, or NULL (stale ones dropped). */
static __always_inline struct cap_pending *cap_pending_match(struct cap_thread *t,
							      struct pt_regs *regs)
{
	__u64 sp = cap_regs_sp(regs) - CAP_RET_SP_ADJ;

	cap_prune(t, sp);
	__u32 d = t->depth;
	if (d == 0 || d > CAP_MAX_PENDING)
		goto none;
	struct cap_pending *e = &t->e[(d - 1) & (CAP_MAX_PENDING - 1)];
	if (e->sp != sp)
		goto none;
	return e;
none:
	cap_count(CAP_CNT_RET_UNMATCHED);
	return NULL;
}

/* Remove the entry returned by cap_pending_match (the innermost one). */
static __always_inline void cap_pop(struct cap_thread *t)
{
	if (t->depth > 0)
		t->depth--;
}

/* Call from a sched_process_exit tracepoint: forget the exiting thread. */
static __always_inline void cap_thread_exit(__u32 tid)
{
	bpf_map_delete_elem(&cap_threads, &tid);
}

/* ---- Stack window ------------------------------------------------------------------------- */

#define CAP_START_STACK_SLACK 64

struct cap_vma_ctx {
	__u64 start;
	__u64 end;
};

#ifndef DWUNW_NO_KERNEL_BTF
static long cap_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct cap_vma_ctx *c = data;

	c->start = vma->vm_start;
	c->end = vma->vm_end;
	return 0;
}
#endif

#define CAP_PAGE 4096ull

/*
 * Without bpf_find_vma: the stack's end found by reading one byte at each page boundary above sp
 * (stack pages above sp are present: the thread wrote them), within `want` bytes of sp. The first
 * page that cannot be read ends the stack's mapping (or a hole after it); 0 when every page up to
 * sp + want can be read (the window then fits).
 */
static __always_inline __u64 cap_stack_probe_end(__u64 sp, __u32 want)
{
	__u64 p = (sp + CAP_PAGE) & ~(CAP_PAGE - 1);
	__u8 b;

	for (int i = 0; i < CAP_MAX_STACK / CAP_PAGE + 1; i++) {
		if (p >= sp + want)
			return 0;
		if (bpf_probe_read_user(&b, 1, (void *)p))
			return p;
		p += CAP_PAGE;
	}
	return 0;
}

/* The configured window, within what one record can carry. */
static __always_inline __u32 cap_window(void)
{
	__u32 w = cap_stack_bytes;

	if (w > CAP_MAX_STACK)
		w = CAP_MAX_STACK;
	if (cap_use_perfbuf && w > CAP_PERF_MAX_DATA - sizeof(struct cap_record))
		w = CAP_PERF_MAX_DATA - sizeof(struct cap_record);
	return w;
}

/*
 * Bytes mapped from sp to the end of the stack's VMA, at most `want`: *n, and 1 when known.
 * The VMA comes from the thread's cache (cap_thread.stack_lo/hi) while sp stays inside it,
 * else from bpf_find_vma (which can fail when mmap_lock is contended: 0, size unknown), or
 * without it from probing (then *end_out is 0 when the window ends before the stack).
 */
static __always_inline int cap_stack_avail_end(struct cap_thread *t, __u64 sp, __u32 want, __u64 *n,
					       __u32 *flags, __u64 *end_out)
{
	__u64 end = 0;

	if (t && t->stack_hi && sp >= t->stack_lo && sp < t->stack_hi) {
		end = t->stack_hi;
	} else if (!CAP_HAVE_FIND_VMA) {
		/*
		 * The end found by probing; kept as [sp's page, end): calls deeper than the page
		 * probe again, and find the same end (the range then grows down to their page).
		 */
		end = cap_stack_probe_end(sp, want);
		if (!end) { /* the whole window is mapped */
			*n = want;
			*end_out = 0;
			return 1;
		}
		if (t) {
			t->stack_lo = end == t->stack_hi && t->stack_lo < sp ? t->stack_lo : sp & ~(CAP_PAGE - 1);
			t->stack_hi = end;
		}
	}
#ifndef DWUNW_NO_KERNEL_BTF
	else {
		struct cap_vma_ctx c = {};
		struct task_struct *task = bpf_get_current_task_btf();

		if (bpf_find_vma(task, sp, cap_vma_cb, &c, 0) == 0 && c.end > sp) {
			/*
			 * The main thread's stack holds argv, envp, auxv and their strings above
			 * mm->start_stack (the initial sp, where argc is): no frame lies there, so
			 * stop a little above it (_start's frame is below it).
			 */
			__u64 ss = BPF_CORE_READ(task, mm, start_stack);

			end = c.end;
			if (ss > sp && ss > c.start && ss + CAP_START_STACK_SLACK < c.end)
				end = ss + CAP_START_STACK_SLACK;
#if defined(__TARGET_ARCH_x86)
			/*
			 * A thread's stack mapping ends with its TLS block and thread descriptor,
			 * which the thread pointer (fs base) points into: no frame lies at or above
			 * it (glibc, musl), so stop there (a record of a thread 8 KiB -> 1 KiB).
			 */
			__u64 fs = BPF_CORE_READ(task, thread.fsbase);

			if (fs > sp && fs < end)
				end = fs;
#endif
			if (t) {
				t->stack_lo = c.start;
				t->stack_hi = end;
			}
		}
	}
#endif
	*n = want;
	*end_out = end;
	if (!end)
		return 0;
	if (end - sp < want) {
		*n = end - sp;
		*flags |= CAP_F_VMA_CLAMPED;
	}
	return 1;
}

static __always_inline int cap_stack_avail(struct cap_thread *t, __u64 sp, __u32 want, __u64 *n,
					   __u32 *flags)
{
	__u64 end;

	return cap_stack_avail_end(t, sp, want, n, flags, &end);
}

/*
 * Samples of the stack between the window's end and the stack's end (capture.h): a few small
 * reads, only for stacks that go on past the window.
 */
#define CAP_SAMPLE_TOP 1024

static __always_inline void cap_sample_above(struct cap_record *rec, __u64 end)
{
	__u64 lo = (rec->stack_start + rec->stack_size + 7) & ~7ull, step;
	__u32 ok = 0;

	rec->sample_lo = lo;
	rec->sample_step = 0;
	rec->sample_ok = 0;
	if (!rec->stack_size || !end || end < lo + CAP_SAMPLE_BYTES)
		return;
	/*
	 * Evenly from the window's end to CAP_SAMPLE_TOP below the stack's end: the last sample
	 * lies in the outermost frames (main's loop), below which the next calls write first.
	 */
	step = end - lo > CAP_SAMPLE_TOP + CAP_SAMPLE_BYTES ? end - CAP_SAMPLE_TOP - lo : end - lo;
	step = (step / (CAP_NSAMPLES - 1)) & ~7ull;
	if (step < CAP_SAMPLE_BYTES)
		step = CAP_SAMPLE_BYTES;
	if (step > 0xffffffffull)
		return;
	for (int i = 0; i < CAP_NSAMPLES; i++) {
		__u64 a = lo + (__u64)i * step;

		if (a + CAP_SAMPLE_BYTES > end)
			break;
		if (bpf_probe_read_user(rec->samples[i], CAP_SAMPLE_BYTES, (void *)a) == 0)
			ok |= 1u << i;
	}
	rec->sample_step = (__u32)step;
	rec->sample_ok = ok;
}

/*
 * Copy the window into dst (room for `room` bytes): n bytes when the size is known, else try
 * `room` and halve on fault (a bounded loop). Returns the bytes copied, 0 when none.
 */
static __always_inline __u32 cap_read_stack(void *dst, __u32 room, __u64 sp, __u64 n, int known,
					    __u32 *flags, struct cap_thread *t)
{
	if (known) {
		if (n > room)
			n = room;
		if (bpf_probe_read_user(dst, n, (void *)sp) == 0)
			return n;
		/* the VMA changed under the cached range, or a page is not readable */
		if (t)
			t->stack_hi = 0;
	}
	*flags |= CAP_F_VMA_UNKNOWN;
	cap_count(CAP_CNT_VMA_UNKNOWN);
	n = room;
	for (int i = 0; i < 10; i++) {
		if (n == 0 || n > room)
			break;
		if (bpf_probe_read_user(dst, n, (void *)sp) == 0)
			return n;
		n >>= 1;
		n &= ~7ull;
	}
	*flags |= CAP_F_READ_FAILED;
	cap_count(CAP_CNT_READ_FAILED);
	return 0;
}

static __always_inline void cap_fill(struct cap_record *rec, struct pt_regs *regs, __u64 cookie,
				     __s64 aux, __u32 flags, struct cap_thread *t)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	rec->h.kind = CAP_KIND_SNAPSHOT;
	rec->h.hdr_size = sizeof(struct cap_record);
	rec->pid = pid_tgid >> 32;
	rec->tid = (__u32)pid_tgid;
	rec->ts = bpf_ktime_get_ns();
	rec->cookie = cookie;
	rec->aux = aux;
	rec->arch = CAP_ARCH;
	rec->valid = cap_regs_fill(rec, regs);
	for (int i = 16; i < CAP_NREGS; i++)
		if (!(rec->valid & (1ull << i)))
			rec->regs[i] = 0;
	rec->stack_start = cap_regs_sp(regs);
	rec->npending = 0;
	if (t) {
		__u32 d = t->depth, k = 0;

		if (t->overflow)
			flags |= CAP_F_PENDING_FULL;
		/* innermost first; only frames at or above sp can still be pending */
		for (int i = 0; i < CAP_MAX_PENDING; i++) {
			if ((__u32)i >= d)
				break;
			struct cap_pending *e = &t->e[(d - 1 - i) & (CAP_MAX_PENDING - 1)];
			if (e->sp < rec->stack_start)
				continue;
			rec->pending[k & (CAP_MAX_PENDING - 1)].slot = e->slot ? e->slot : (e->sp | CAP_SLOT_LR);
			rec->pending[k & (CAP_MAX_PENDING - 1)].ret = e->ret;
			k++;
		}
		rec->npending = k;
	}
	rec->tramp = rec->npending ? cap_uretprobe_tramp() : 0;
	rec->sample_lo = 0;
	rec->sample_step = 0;
	rec->sample_ok = 0;
	rec->h.flags = flags;
}

/*
 * Ring-buffer wake-ups: with cap_wakeup_bytes set, the consumer is woken only once that much
 * data waits (it polls with a short timeout otherwise), which saves a cross-CPU wake-up per
 * record; 0 = libbpf's adaptive default (wake when the consumer has caught up).
 */
static __always_inline __u64 cap_rb_wakeup(void)
{
	if (!cap_wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&cap_ringbuf, BPF_RB_AVAIL_DATA) >= cap_wakeup_bytes
		       ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/*
 * One ring-buffer record with room for `room` stack bytes (a constant at each call site: the
 * verifier wants a constant reservation size, so snapshots use a few size classes rather than
 * always the full window).
 */
static __always_inline long cap_rb_snapshot(struct pt_regs *regs, __u64 cookie, __s64 aux,
					    __u32 flags, struct cap_thread *t, const __u32 room,
					    __u32 want, __u64 n, int known, __u64 end)
{
	struct cap_record *rec;
	__u64 sp = cap_regs_sp(regs);

	rec = bpf_ringbuf_reserve(&cap_ringbuf, sizeof(struct cap_record) + room, 0);
	if (!rec) {
		cap_count(CAP_CNT_OUTPUT_FAILED);
		return -ENOSPC;
	}
	rec->stack_size = cap_read_stack(rec->stack, room, sp, n, known, &flags, t);
	rec->want = want;
	cap_fill(rec, regs, cookie, aux, flags, t);
	cap_sample_above(rec, end);
	/* a frozen thread waits for this record: wake the consumer now */
	bpf_ringbuf_submit(rec, flags & CAP_F_FROZEN ? BPF_RB_FORCE_WAKEUP : cap_rb_wakeup());
	return 0;
}

/* A free scratch slot (perf-buffer mode), taken atomically; NULL when all are busy. */
static __always_inline struct cap_scratch_slot *cap_scratch_take(void)
{
	__u32 nslots = cap_scratch_slots;
	__u32 base = bpf_get_smp_processor_id() * 2;

	for (__u32 i = 0; i < 2; i++) {
		__u32 key = base + i;
		struct cap_scratch_slot *s;

		if (key >= nslots)
			break;
		s = bpf_map_lookup_elem(&cap_scratch, &key);
		if (s && __sync_lock_test_and_set(&s->busy, 1) == 0)
			return s;
	}
	return NULL;
}

/*
 * Take a snapshot of the user context `regs` and emit it. `ctx` is the program's context
 * (needed by the perf-buffer output), `t` the thread's pending calls (may be NULL).
 * Returns 0, or a negative error when the record was lost (counted in cap_counters).
 */
static __always_inline long cap_snapshot(void *ctx, struct pt_regs *regs, __u64 cookie, __s64 aux,
					 __u32 flags, struct cap_thread *t)
{
	__u32 want = cap_window();
	__u64 sp = cap_regs_sp(regs);
	__u64 n, end = 0;
	int known;
	long err;

	known = cap_stack_avail_end(t, sp, want, &n, &flags, &end);
	if (!cap_use_perfbuf) {
#define CAP_CLASS(c)                                                                        \
		if (known && n <= (c) && want > (c))                                        \
			return cap_rb_snapshot(regs, cookie, aux, flags, t, (c), want, n, known, end)
		CAP_CLASS(1024);
		CAP_CLASS(2048);
		CAP_CLASS(4096);
		CAP_CLASS(8192);
		CAP_CLASS(16384);
		CAP_CLASS(32768);
#undef CAP_CLASS
		return cap_rb_snapshot(regs, cookie, aux, flags, t, want, want, n, known, end);
	} else {
		struct cap_scratch_slot *s = cap_scratch_take();
		struct cap_record *rec;

		if (!s) {
			cap_count(CAP_CNT_OUTPUT_FAILED);
			return -EBUSY;
		}
		rec = (struct cap_record *)s->data;
		if (cap_stack_bytes > want)
			flags |= CAP_F_PERF_CUT;
		n = cap_read_stack(rec->stack, want, sp, n, known, &flags, t);
		rec->stack_size = n;
		rec->want = want;
		cap_fill(rec, regs, cookie, aux, flags, t);
		cap_sample_above(rec, end);
		if (n > CAP_MAX_STACK)
			n = CAP_MAX_STACK;
		err = bpf_perf_event_output(ctx, &cap_perfbuf, BPF_F_CURRENT_CPU, rec,
					    sizeof(struct cap_record) + n);
		asm volatile("" ::: "memory");
		s->busy = 0;
		if (err) {
			cap_count(CAP_CNT_OUTPUT_FAILED);
			return err;
		}
		return 0;
	}
}

/* Emit a small fixed-size record of the tool's own (same channel as the snapshots). */
/* cap_emit waking the consumer at once (ring buffer): for a record the next events depend on */
static __always_inline long cap_emit_wake(void *ctx, void *data, __u32 size, bool now)
{
	long err;

	if (!cap_use_perfbuf)
		err = bpf_ringbuf_output(&cap_ringbuf, data, size, now ? BPF_RB_FORCE_WAKEUP : cap_rb_wakeup());
	else
		err = bpf_perf_event_output(ctx, &cap_perfbuf, BPF_F_CURRENT_CPU, data, size);
	if (err)
		cap_count(CAP_CNT_OUTPUT_FAILED);
	return err;
}

static __always_inline long cap_emit(void *ctx, void *data, __u32 size)
{
	return cap_emit_wake(ctx, data, size, false);
}

/* A process record (capture.h) in the channel, in order with the process's own records. */
static __always_inline void cap_emit_proc(void *ctx, __u32 op, __u32 pid, __u32 parent)
{
	struct cap_proc_rec r = { .h = { .kind = CAP_KIND_PROC, .hdr_size = sizeof(r) }, .op = op, .pid = pid,
				  .parent = parent, .ts = bpf_ktime_get_ns() };

	cap_emit(ctx, &r, sizeof(r));
}

#endif /* DWUNW_CAPTURE_BPF_H */
