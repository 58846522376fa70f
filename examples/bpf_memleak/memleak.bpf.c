// SPDX-License-Identifier: GPL-2.0-only
/*
 * The example memleak's BPF side, written in the style of libbpf-tools memleak: an entry probe
 * on each allocator keeps the size per thread, the return probe records allocs[address] with the
 * allocation's stack (alloc_exit), free removes the entry.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "memleak.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 min_size = 0;
const volatile __u64 max_size = ~0ull;
const volatile __u64 sample_rate = 1;
const volatile bool trace_all = false;

/* tid -> size asked for, between an allocator's entry and its return */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} sizes SEC(".maps");

/* address -> allocation */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1000000);
	__type(key, __u64);
	__type(value, struct alloc_info);
} allocs SEC(".maps");

/* tid -> posix_memalign's out pointer, read at its return */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} memptrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 10240);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_STACK_DEPTH * sizeof(__u64));
} stack_traces SEC(".maps");

static int alloc_enter(__u64 size)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (size < min_size || size > max_size)
		return 0;
	if (sample_rate > 1 && bpf_ktime_get_ns() % sample_rate != 0)
		return 0;
	bpf_map_update_elem(&sizes, &tid, &size, BPF_ANY);
	if (trace_all)
		bpf_printk("alloc entered, size = %lu", size);
	return 0;
}

static int alloc_exit(struct pt_regs *ctx, __u64 address)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct alloc_info info = {};
	__u64 *size = bpf_map_lookup_elem(&sizes, &tid);

	if (!size)
		return 0; /* filtered out, or the entry was missed */
	info.size = *size;
	bpf_map_delete_elem(&sizes, &tid);
	if (!address)
		return 0;
	info.ts = bpf_ktime_get_ns();
	/* the kernel's frame-pointer walk: broken on code built without frame pointers */
	info.stack_id = bpf_get_stackid(ctx, &stack_traces, BPF_F_USER_STACK);
	bpf_map_update_elem(&allocs, &address, &info, BPF_ANY);
	if (trace_all)
		bpf_printk("alloc exited, size = %lu, result = %lx", info.size, address);
	return 0;
}

static int free_enter(__u64 address)
{
	if (bpf_map_delete_elem(&allocs, &address) == 0 && trace_all)
		bpf_printk("free entered, address = %lx", address);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, size_t size) { return alloc_enter(size); }
SEC("uretprobe")
int BPF_KRETPROBE(malloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(free_enter_p, void *address) { return free_enter((__u64)address); }

SEC("uprobe")
int BPF_KPROBE(calloc_enter, size_t nmemb, size_t size) { return alloc_enter(nmemb * size); }
SEC("uretprobe")
int BPF_KRETPROBE(calloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(realloc_enter, void *ptr, size_t size)
{
	free_enter((__u64)ptr);
	return alloc_enter(size);
}
SEC("uretprobe")
int BPF_KRETPROBE(realloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, void **memptr, size_t alignment, size_t size)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 p = (__u64)memptr;

	bpf_map_update_elem(&memptrs, &tid, &p, BPF_ANY);
	return alloc_enter(size);
}
SEC("uretprobe")
int BPF_KRETPROBE(posix_memalign_exit, int err)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *memptr = bpf_map_lookup_elem(&memptrs, &tid), address = 0;

	if (!memptr)
		return 0;
	if (!err)
		bpf_probe_read_user(&address, sizeof(address), (void *)*memptr);
	bpf_map_delete_elem(&memptrs, &tid);
	return alloc_exit(ctx, address);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_enter, size_t alignment, size_t size) { return alloc_enter(size); }
SEC("uretprobe")
int BPF_KRETPROBE(aligned_alloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(memalign_enter, size_t alignment, size_t size) { return alloc_enter(size); }
SEC("uretprobe")
int BPF_KRETPROBE(memalign_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(valloc_enter, size_t size) { return alloc_enter(size); }
SEC("uretprobe")
int BPF_KRETPROBE(valloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }

SEC("uprobe")
int BPF_KPROBE(pvalloc_enter, size_t size) { return alloc_enter(size); }
SEC("uretprobe")
int BPF_KRETPROBE(pvalloc_exit, void *ret) { return alloc_exit(ctx, (__u64)ret); }
