// SPDX-License-Identifier: GPL-2.0
/*
 * memleak: outstanding user-space allocations by stack.
 *
 * Entry probes remember each allocator call on a per-thread stack of pending calls
 * (cap_threads), so nested calls (glibc's mmap inside a large malloc, realloc inside
 * reallocarray) never overwrite each other's size. A call made while another allocator call
 * is pending on the same thread is part of that call's work and is not recorded (unless
 * record_nested): the outer call is what the program asked for, counting both would count
 * the memory twice.
 *
 * fp mode: the return probe takes bpf_get_stackid(BPF_F_USER_STACK), as upstream memleak.
 * dwarf mode: the entry probe sends a snapshot (registers + stack window) with a fresh event
 * id as cookie and the frame-pointer stack id as aux; the return probe records the
 * allocation under that event id. User space unwinds the snapshot with libdwunw.
 * kernel mode (x86_64, arm64): as dwarf mode, but the entry probe walks the stack itself
 * (kwalk.bpf.h) and sends the snapshot only when the walk stops short (kwalk_hybrid.bpf.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "runtime/capture.bpf.h"
#include "runtime/python.bpf.h"
#include "runtime/follow.bpf.h"
#include "runtime/freeze.bpf.h"
#include "memleak.h"
#if defined(__TARGET_ARCH_x86) || defined(__TARGET_ARCH_arm64)
#define ML_HAVE_KWALK 1
#include "kwalk/kwalk.bpf.h"
#include "kwalk/kwalk_hybrid.bpf.h"
#endif

char LICENSE[] SEC("license") = "GPL";

PERCPU_COUNTERS(tool_counters, tool_count, ML_CNT_MAX) /* enum ml_counter */

const volatile __u32 target_tgid = 0;        /* -p; 0: any process (or the tree: follow.bpf.h) */
const volatile __u32 unwind_mode = ML_UNWIND_FP;
const volatile __u64 min_size = 0;
const volatile __u64 max_size = ~0ull;
const volatile __u32 sample_rate = 1;
const volatile __u32 trace_all = 0;          /* -t */
const volatile __u32 record_nested = 0;      /* --nested */
const volatile __u32 keep_combined = 0;      /* -C in fp mode */
const volatile __u32 dwarf_fp_ids = 1;       /* dwarf mode: also take bpf_get_stackid() */
const volatile __u32 count_allocated = 0;    /* --allocated: a record per allocation made */

__u64 next_event_id = 1;                     /* dwarf mode event ids (atomic increments) */
__u64 exec_ns = 0;                           /* last exec of the target (its old allocations are gone) */
__u32 exec_gen = 0;                          /* -p: the target's execs (-C: its image in a combined key) */

/* preallocated (as upstream's): an insert costs ~300 ns less than with BPF_F_NO_PREALLOC */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ML_ALLOCS_ENTRIES);
	__type(key, __u64);
	__type(value, struct ml_alloc_info);
} allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ML_COMBINED_ENTRIES);
	__type(key, __u64);
	__type(value, struct ml_combined);
} combined_allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, ML_STACK_MAP_ENTRIES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, ML_MAX_STACK_DEPTH * sizeof(__u64));
} stack_traces SEC(".maps");


static __always_inline int ml_target(__u64 pid_tgid)
{
	return follow_match((__u32)(pid_tgid >> 32), target_tgid);
}

/* the mapping tracker's consumers: mapping changes of the traced processes in order with the
 * records (mmap_ev); --unwind=kernel: their executable mappings for the walker's tables */
#define MMAP_EV_TRACED(tgid) follow_match((tgid), target_tgid)
#include "runtime/mmap_ev.bpf.h"
#ifdef ML_HAVE_KWALK
#define KW_TRACK_SELECTED(tgid, tid) follow_match(tgid, target_tgid)
#define KW_TRACK_CHILD_SELECTED(ptgid) (follow_tree && follow_match(ptgid, target_tgid))
#include "kwalk/kwalk_track.bpf.h"
#define MT_CONSUMERS(X) X(mmap_ev) X(kw_track)
#else
#define MT_CONSUMERS(X) X(mmap_ev)
#endif
#include "runtime/mmap_track.bpf.h"

static __always_inline void ml_trace(void *ctx, __u32 fn, __u64 addr, __u64 size)
{
	struct ml_trace_rec r = {};
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	r.h.kind = ML_REC_TRACE;
	r.h.hdr_size = sizeof(r);
	r.pid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	r.ts = bpf_ktime_get_ns();
	r.addr = addr;
	r.size = size;
	r.fn = fn;
	cap_emit(ctx, &r, sizeof(r));
}

static __always_inline void combined_add(__u64 key, __u64 size)
{
	struct ml_combined *c = bpf_map_lookup_elem(&combined_allocs, &key);

	if (!c) {
		struct ml_combined init = {};

		bpf_map_update_elem(&combined_allocs, &key, &init, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&combined_allocs, &key);
		if (!c) {
			tool_count(ML_CNT_COMBINED_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&c->total_size, size);
	__sync_fetch_and_add(&c->count, 1);
}

static __always_inline void combined_sub(__u64 key, __u64 size)
{
	struct ml_combined *c = bpf_map_lookup_elem(&combined_allocs, &key);

	if (c) {
		__sync_fetch_and_sub(&c->total_size, size);
		__sync_fetch_and_sub(&c->count, 1);
	}
}

/*
 * -C: the image that made an allocation, put in its combined key (bits ML_KEY_IMAGE_SHIFT..+15),
 * so that user space names the stack with that image's mappings or drops it once the image exec'd:
 * following a tree, the process's slot (a new one at each exec: slot_tag is its follow_tag);
 * else the target's exec count.
 */
static __always_inline __u64 ml_image_tag(__u64 slot_tag)
{
	__u64 img = slot_tag ? slot_tag >> FOLLOW_SLOT_SHIFT : exec_gen;

	return (img & ML_KEY_IMAGE_MASK) << ML_KEY_IMAGE_SHIFT;
}

/* Forget an outstanding allocation (free, munmap, the old block of a realloc). */
static __always_inline void ml_free(void *ctx, __u64 addr, __u32 fn)
{
	struct ml_alloc_info *info;
	__u64 size, key;

	if (!addr)
		return;
	/* following a tree, processes share addresses: the key has the process's slot on top */
	key = addr | follow_tag(bpf_get_current_pid_tgid() >> 32);
	info = bpf_map_lookup_elem(&allocs, &key);
	if (!info)
		return;
	size = info->size;
	if (keep_combined)
		combined_sub(info->key, size);
	bpf_map_delete_elem(&allocs, &key);
	if (trace_all)
		ml_trace(ctx, fn, addr, size);
}

static __always_inline int alloc_enter(struct pt_regs *ctx, __u64 size, __u64 arg, __u32 fn)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct cap_thread *t;
	struct cap_pending *e;
	__u32 flags = 0;
	__u64 cookie = 0, slot, ret;

	if (!ml_target(pid_tgid))
		return 0;
	t = cap_thread_get((__u32)pid_tgid, 1);
	if (!t) {
		tool_count(ML_CNT_NO_PENDING);
		return 0;
	}
	cap_entry_ret(ctx, &slot, &ret);
	cap_prune_entry(t, cap_regs_sp(ctx), slot, ret);
	if (t->depth > 0) {
		flags |= ML_P_NESTED;
		if (!record_nested) {
			flags |= ML_P_SKIP;
			tool_count(ML_CNT_NESTED);
		}
	}
	if (size < min_size || size > max_size)
		flags |= ML_P_SKIP;
	else if (sample_rate > 1 && bpf_get_prandom_u32() % sample_rate)
		flags |= ML_P_SKIP;

	if (unwind_mode == ML_UNWIND_DWARF && !(flags & ML_P_SKIP)) {
		__s64 fpid = -1;

		cookie = __sync_fetch_and_add(&next_event_id, 1);
		if (dwarf_fp_ids)
			fpid = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);
		py_emit(ctx, pid_tgid >> 32, (__u32)pid_tgid);
		/* --unwind=freeze: the thread stopped here, its stack read by user space */
		__u32 cflags = frz_enabled && frz_claim(pid_tgid >> 32, cookie) ? CAP_F_FROZEN : 0;
		long err = cap_snapshot(ctx, ctx, cookie, fpid, cflags, t);

		if (err)
			flags |= ML_P_LOST;
		if (cflags)
			frz_finish(pid_tgid >> 32, err);
	}
#ifdef ML_HAVE_KWALK
	if (unwind_mode == ML_UNWIND_KERNEL && !(flags & ML_P_SKIP)) {
		__s64 fpid = -1;

		cookie = __sync_fetch_and_add(&next_event_id, 1);
		if (dwarf_fp_ids)
			fpid = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);
		py_emit(ctx, pid_tgid >> 32, (__u32)pid_tgid);
		if (kw_hybrid(ctx, ctx, cookie, fpid, t))
			flags |= ML_P_LOST;
	}
#endif
	e = cap_push(t, ctx, slot, ret);
	if (!e) {
		tool_count(ML_CNT_NO_PENDING);
		return 0;
	}
	e->arg0 = size;
	e->arg1 = arg;
	e->cookie = cookie;
	e->flags = flags;
	e->kind = fn;
	return 0;
}

static __always_inline int alloc_exit(struct pt_regs *ctx, __u64 addr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ml_alloc_info info = {};
	struct cap_thread *t;
	struct cap_pending *e;
	__u64 size, arg, cookie, key;
	__u32 flags, fn;

	if (!ml_target(pid_tgid))
		return 0;
	t = cap_thread_get((__u32)pid_tgid, 0);
	if (!t)
		return 0;
	e = cap_pending_match(t, ctx);
	if (!e)
		return 0;
	size = e->arg0;
	arg = e->arg1;
	cookie = e->cookie;
	flags = e->flags;
	fn = e->kind;
	cap_pop(t);

	if (fn == ML_FN_POSIX_MEMALIGN) {
		__u64 p = 0;

		if (addr != 0) /* the return value is an error number */
			return 0;
		if (bpf_probe_read_user(&p, sizeof(p), (void *)arg))
			return 0;
		addr = p;
	} else if ((fn == ML_FN_REALLOC || fn == ML_FN_REALLOCARRAY) && !(flags & ML_P_NESTED)) {
		/* the old block is gone when the call succeeded (or freed it: size 0) */
		if (addr || size == 0)
			ml_free(ctx, arg, ML_FN_FREE);
	}
	if (fn == ML_FN_MMAP && addr == ~0ull)
		return 0;
	if (!addr || (flags & ML_P_SKIP))
		return 0;

	info.size = size;
	info.ts = bpf_ktime_get_ns();
	if (unwind_mode != ML_UNWIND_FP) {
		info.key = (flags & ML_P_LOST) ? (ML_KEY_LOST | ML_LOST_OUTPUT)
					       : (ML_KEY_DWARF | cookie);
	} else {
		long id = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);

		if (id < 0) {
			tool_count(ML_CNT_STACKID_FAILED);
			info.key = ML_KEY_FPERR | (__u64)(-id);
		} else {
			info.key = (__u64)id;
		}
	}
	if (count_allocated) {
		/* counted under its stack in user space whatever becomes of it (tracked or not) */
		struct ml_alloc_rec r = { .h = { .kind = ML_REC_ALLOC, .hdr_size = sizeof(r) },
					  .pid = pid_tgid >> 32, .key = info.key, .size = size };

		if (cap_emit(ctx, &r, sizeof(r)))
			tool_count(ML_CNT_ALLOC_LOST);
	}
	key = addr | follow_tag(pid_tgid >> 32);
	if (keep_combined) {
		/* an address seen again without its free: forget the old allocation first */
		struct ml_alloc_info *old = bpf_map_lookup_elem(&allocs, &key);

		if (old)
			combined_sub(old->key, old->size);
		/* the entry's key is its combined key (this mode's report reads no allocs entry) */
		info.key |= ml_image_tag(key & ~((1ull << FOLLOW_SLOT_SHIFT) - 1));
	}
	if (bpf_map_update_elem(&allocs, &key, &info, BPF_ANY)) {
		tool_count(ML_CNT_ALLOCS_FULL);
		return 0;
	}
	if (keep_combined)
		combined_add(info.key, size);
	if (trace_all)
		ml_trace(ctx, fn, addr, size);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, __u64 size)
{
	return alloc_enter(ctx, size, 0, ML_FN_MALLOC);
}

SEC("uprobe")
int BPF_KPROBE(calloc_enter, __u64 nmemb, __u64 size)
{
	return alloc_enter(ctx, nmemb * size, 0, ML_FN_CALLOC);
}

SEC("uprobe")
int BPF_KPROBE(realloc_enter, __u64 ptr, __u64 size)
{
	return alloc_enter(ctx, size, ptr, ML_FN_REALLOC);
}

SEC("uprobe")
int BPF_KPROBE(reallocarray_enter, __u64 ptr, __u64 nmemb, __u64 size)
{
	return alloc_enter(ctx, nmemb * size, ptr, ML_FN_REALLOCARRAY);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_enter, __u64 align, __u64 size)
{
	return alloc_enter(ctx, size, 0, ML_FN_ALIGNED_ALLOC);
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, __u64 memptr, __u64 align, __u64 size)
{
	return alloc_enter(ctx, size, memptr, ML_FN_POSIX_MEMALIGN);
}

SEC("uprobe")
int BPF_KPROBE(memalign_enter, __u64 align, __u64 size)
{
	return alloc_enter(ctx, size, 0, ML_FN_MEMALIGN);
}

SEC("uprobe")
int BPF_KPROBE(valloc_enter, __u64 size)
{
	return alloc_enter(ctx, size, 0, ML_FN_VALLOC);
}

SEC("uprobe")
int BPF_KPROBE(pvalloc_enter, __u64 size)
{
	return alloc_enter(ctx, size, 0, ML_FN_PVALLOC);
}

SEC("uprobe")
int BPF_KPROBE(mmap_enter, __u64 addr, __u64 len)
{
	return alloc_enter(ctx, len, 0, ML_FN_MMAP);
}

/* One return program for every allocator: the pending entry says which call returns. */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret)
{
	return alloc_exit(ctx, ret);
}

SEC("uprobe")
int BPF_KPROBE(free_enter, __u64 addr)
{
	if (!ml_target(bpf_get_current_pid_tgid()))
		return 0;
	ml_free(ctx, addr, ML_FN_FREE);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(munmap_enter, __u64 addr)
{
	if (!ml_target(bpf_get_current_pid_tgid()))
		return 0;
	ml_free(ctx, addr, ML_FN_MUNMAP);
	return 0;
}

/*
 * The same probes through two multi-uprobe links (uprobe_multi.h), when the kernel has them:
 * one entry program for every function, told which by the link's cookie (enum ml_fn), and one
 * return program. Loaded instead of the programs above (memleak_attach.c decides before load).
 */
SEC("uprobe")
int BPF_KPROBE(ml_multi_enter, __u64 a0, __u64 a1, __u64 a2)
{
	__u64 fn = bpf_get_attach_cookie(ctx), size = a0, arg = 0;

	switch (fn) {
	case ML_FN_FREE:
	case ML_FN_MUNMAP:
		if (ml_target(bpf_get_current_pid_tgid()))
			ml_free(ctx, a0, (__u32)fn);
		return 0;
	case ML_FN_CALLOC:
		size = a0 * a1;
		break;
	case ML_FN_REALLOC:
		size = a1;
		arg = a0;
		break;
	case ML_FN_REALLOCARRAY:
		size = a1 * a2;
		arg = a0;
		break;
	case ML_FN_ALIGNED_ALLOC:
	case ML_FN_MEMALIGN:
	case ML_FN_MMAP:
		size = a1;
		break;
	case ML_FN_POSIX_MEMALIGN:
		size = a2;
		arg = a0;
		break;
	case ML_FN_MALLOC:
	case ML_FN_VALLOC:
	case ML_FN_PVALLOC:
		break;
	default:
		return 0;
	}
	return alloc_enter(ctx, size, arg, (__u32)fn);
}

SEC("uretprobe")
int BPF_KRETPROBE(ml_multi_return, __u64 ret)
{
	return alloc_exit(ctx, ret);
}

/* The target replaced its image: its outstanding allocations are gone (user space drops them). */
SEC("raw_tp/sched_process_exec")
int ml_exec(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!ml_target(pid_tgid))
		return 0;
	if (target_tgid) {
		exec_ns = bpf_ktime_get_ns();
		__sync_fetch_and_add(&exec_gen, 1);
	}
	/* the old image's pending calls and stack range are gone with it */
	cap_thread_exit((__u32)pid_tgid);
	return 0;
}

/* A thread's exit: its pending calls go (a hash delete; whether or not the follow set still
 * holds the process: its own exit program may run first). The last thread's (whichever it is:
 * the main thread may go first), in kernel mode: the process's walker entry and tables. */
#ifdef DWUNW_NO_KERNEL_BTF
SEC("raw_tp/sched_process_exit")
int ml_thread_exit(void *ctx)
#else
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ml_thread_exit, struct task_struct *task)
#endif
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

#ifdef ML_HAVE_KWALK
	__u32 tgid = pid_tgid >> 32;

	/* an entry the BPF side made is freed even when the follow set forgot the process first */
	if (unwind_mode == ML_UNWIND_KERNEL && task_last_thread(task) &&
	    (ml_target(pid_tgid) || bpf_map_lookup_elem(&kw_procs, &tgid)))
		kw_track_exit(ctx, tgid);
#endif
	cap_thread_exit((__u32)pid_tgid);
	return 0;
}
