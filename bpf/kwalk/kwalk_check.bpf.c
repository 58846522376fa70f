// SPDX-License-Identifier: GPL-2.0
/*
 * kwalk-check's programs: at each uprobe hit or cpu-clock sample of the target process, walk the
 * user stack in the kernel AND take the snapshot, in one event (kw_event), so user space can
 * unwind the snapshot with libdwunw and compare frame by frame. The peer programs run the same
 * walk with a plain binary search over the rows and only count (their run time is the peer's).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "runtime/capture.bpf.h"
#include "kwalk.bpf.h"
#include "kwalk_check.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid = 0;
const volatile __u32 always_snapshot = 1;
/*
 * --stop-unknown: a sample of a process whose mappings are not loaded yet stops it (SIGSTOP),
 * and user space continues it once its tables are in: a short run (a fixture going through its
 * scenarios in milliseconds) is then walked in the kernel from its second sample on, rather
 * than falling back throughout. At most kc_stops_left times. Test harness only.
 */
const volatile __u32 stop_unknown = 0;
__s32 kc_stops_left = 32;

static __always_inline void kc_after(__u32 status)
{
	if (stop_unknown && (status == KW_ST_NO_PROC || status == KW_ST_NO_MAPPING) &&
	    __sync_fetch_and_add(&kc_stops_left, -1) > 0)
		bpf_send_signal(19 /* SIGSTOP */);
}

static __always_inline int kc_target(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline struct pt_regs *kc_user_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

SEC("uprobe")
int kc_uprobe(struct pt_regs *ctx)
{
	if (!kc_target())
		return 0;
	kc_after(KW_EMIT(ctx, ctx, always_snapshot, KC_WINDOW, 0, 0));
	return 0;
}

SEC("perf_event")
int kc_perf(struct bpf_perf_event_data *ctx)
{
	struct pt_regs *regs;

	if (!kc_target())
		return 0;
	regs = kc_user_regs();
	kc_after(KW_EMIT(ctx, regs, always_snapshot, KC_WINDOW, 0, 0));
	return 0;
}

/* Walk only, for timing: the block-index walker (bench) or the binary-search peer. */
static __always_inline void kc_walk_only(struct pt_regs *regs, int mode)
{
	struct kw_walk w;
	struct kw_scratch *s = kw_walk(&w, regs, (__u32)(bpf_get_current_pid_tgid() >> 32), mode);

	kw_walk_done(s);
}

SEC("uprobe")
int kc_bench_uprobe(struct pt_regs *ctx)
{
	if (kc_target())
		kc_walk_only(ctx, KW_MODE_BENCH);
	return 0;
}

SEC("perf_event")
int kc_bench_perf(struct bpf_perf_event_data *ctx)
{
	if (kc_target())
		kc_walk_only(kc_user_regs(), KW_MODE_BENCH);
	return 0;
}

SEC("uprobe")
int kc_peer_uprobe(struct pt_regs *ctx)
{
	if (kc_target())
		kc_walk_only(ctx, KW_MODE_PEER);
	return 0;
}

SEC("perf_event")
int kc_peer_perf(struct bpf_perf_event_data *ctx)
{
	if (kc_target())
		kc_walk_only(kc_user_regs(), KW_MODE_PEER);
	return 0;
}

SEC("uprobe")
int kc_bench1_uprobe(struct pt_regs *ctx)
{
	if (kc_target())
		kc_walk_only(ctx, KW_MODE_BENCH1);
	return 0;
}

SEC("perf_event")
int kc_bench1_perf(struct bpf_perf_event_data *ctx)
{
	if (kc_target())
		kc_walk_only(kc_user_regs(), KW_MODE_BENCH1);
	return 0;
}

SEC("uprobe")
int kc_peer1_uprobe(struct pt_regs *ctx)
{
	if (kc_target())
		kc_walk_only(ctx, KW_MODE_PEER1);
	return 0;
}

SEC("perf_event")
int kc_peer1_perf(struct bpf_perf_event_data *ctx)
{
	if (kc_target())
		kc_walk_only(kc_user_regs(), KW_MODE_PEER1);
	return 0;
}

/*
 * --micro OP:SIZE:N: where a frame's time goes, one thing at a time. At each sample, N times:
 * OP 0 nothing (the loop alone), 1 bpf_probe_read_user of SIZE bytes at sp, 2 a row load at a
 * pseudo-random index below SIZE (cache/TLB misses across the rows map), 3 the same at one index,
 * 4 bpf_probe_read_user of SIZE bytes at sp + 64 * i (a new line each time).
 */
const volatile __u32 micro_op = 0;
const volatile __u32 micro_size = 8;
const volatile __u32 micro_n = 16;
__u64 kc_micro_faults;

struct kc_micro_buf {
	__u8 b[4096];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kc_micro_buf);
} kc_micro_buf SEC(".maps");

struct kc_micro {
	struct kc_micro_buf *buf;
	__u64 sp;
	__u64 sum;
	__u32 faults;
};

static long kc_micro_cb(__u64 i, void *arg)
{
	struct kc_micro *m = arg;
	__u32 size = micro_size & 4095, idx;

	if (!m->buf)
		return 1;
	switch (micro_op) {
	case 1:
	case 4:
		if (bpf_probe_read_user(m->buf->b, size ? size : 4096,
					(void *)(m->sp + (micro_op == 4 ? 64 * i : 0))))
			m->faults++;
		break;
	case 2:
		idx = (__u32)((i + 1) * 2654435761u + m->sum) % (micro_size ? micro_size : 1);
		m->sum += kw_row_at(idx);
		break;
	case 3:
		m->sum += kw_row_at(7);
		break;
	}
	return 0;
}

SEC("perf_event")
int kc_micro_perf(struct bpf_perf_event_data *ctx)
{
	struct kc_micro m = {};
	__u32 zero = 0;

	if (!kc_target())
		return 0;
	m.buf = bpf_map_lookup_elem(&kc_micro_buf, &zero);
	m.sp = kc_user_regs()->sp;
	m.sum = bpf_get_prandom_u32();
	bpf_loop(micro_n, kc_micro_cb, &m, 0);
	if (m.faults)
		__sync_fetch_and_add(&kc_micro_faults, m.faults);
	return 0;
}

/*
 * --floor: the cost of each thing a walker does, on the same samples (each its own program, so
 * each has its own run_time_ns / run_cnt). Every program but the empty one runs floor_n
 * iterations of bpf_loop; the cost of one operation is (its ns/sample - the bare loop's) / n.
 *   0 empty program (entry, bpf_stats timing)      1 bpf_loop, empty callback
 *   2 bpf_probe_read_user 8 B at sp               3 the same, 16 B
 *   4 hash lookup (kw_procs, the pid)              5 array lookup (kw_mods, index i & 7)
 *   6 per-CPU array lookup (kw_cache)              7 a load at a random line of kc_floor_mem (8 MiB)
 *   8 a random line of its first 32 KiB           9 the same line every time
 *  10 bpf_probe_read_user of kw_chunk bytes at sp (once per sample, no loop)
 */
const volatile __u32 floor_n = 32;
const volatile __u32 floor_lines = 1; /* kc_floor_mem entries / 8 */
__u64 kc_floor_faults;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);    /* 1 M (8 MiB) with --floor */
	__type(key, __u32);
	__type(value, __u64);
} kc_floor_mem SEC(".maps");

struct kc_floor {
	__u64 sp;
	__u64 sum;
	__u32 pid;
	__u32 lines;               /* kc_floor_mem entries / 8 */
	__u32 faults;
	__u32 op;
};

static long kc_floor_cb(__u64 i, void *arg)
{
	struct kc_floor *f = arg;
	__u64 buf[2];
	__u32 k;
	void *v;

	switch (f->op) {
	case 2:
		f->faults += !!bpf_probe_read_user(buf, 8, (void *)f->sp);
		f->sum += buf[0];
		break;
	case 3:
		f->faults += !!bpf_probe_read_user(buf, 16, (void *)f->sp);
		f->sum += buf[0];
		break;
	case 4:
		v = bpf_map_lookup_elem(&kw_procs, &f->pid);
		f->sum += v ? *(__u32 *)v : 1;
		break;
	case 5:
		k = (__u32)i & 7;
		v = bpf_map_lookup_elem(&kw_mods, &k);
		f->sum += v ? *(__u32 *)v : 1;
		break;
	case 6:
		v = bpf_map_lookup_elem(&kw_cache, &kw_zero_key);
		f->sum += v ? *(__u64 *)v : 1;
		break;
	case 7:
	case 8:
	case 9:
		/* a multiplicative hash of (i, the previous load): the next line is unknown until the
		 * last load is in (a dependent chain, as the walker's row -> rule -> next frame) */
		k = f->op == 9 ? 0 : (__u32)((i + 1 + f->sum) * 2654435761u) % (f->op == 7 ? f->lines : 512);
		k *= 8;
		v = bpf_map_lookup_elem(&kc_floor_mem, &k);
		f->sum += v ? *(__u64 *)v : 1;
		break;
	}
	return 0;
}

static __always_inline int kc_floor_run(__u32 op)
{
	struct kc_floor f = {};
	struct kw_scratch *s;
	__u32 len = kw_chunk;

	f.op = op;
	f.sp = kc_user_regs()->sp;
	f.pid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	f.lines = floor_lines;
	if (op == 10) {
		s = bpf_map_lookup_elem(&kw_scratch, &kw_zero_key);
		if (!s)
			return 0;
		if (len > KW_CHUNK || len < 64)
			len = KW_CHUNK;
		if (bpf_probe_read_user(s->stk, len, (void *)f.sp))
			__sync_fetch_and_add(&kc_floor_faults, 1);
		return 0;
	}
	if (!f.lines)
		f.lines = 1;
	bpf_loop(floor_n, kc_floor_cb, &f, 0);
	if (f.faults)
		__sync_fetch_and_add(&kc_floor_faults, f.faults);
	return 0;
}

SEC("perf_event")
int kc_floor0(struct bpf_perf_event_data *ctx)
{
	return 0;
}

#define KC_FLOOR_PROG(k)                                                                           \
	SEC("perf_event") int kc_floor##k(struct bpf_perf_event_data *ctx)                         \
	{                                                                                          \
		return kc_floor_run(k);                                                            \
	}
KC_FLOOR_PROG(1)
KC_FLOOR_PROG(2)
KC_FLOOR_PROG(3)
KC_FLOOR_PROG(4)
KC_FLOOR_PROG(5)
KC_FLOOR_PROG(6)
KC_FLOOR_PROG(7)
KC_FLOOR_PROG(8)
KC_FLOOR_PROG(9)
KC_FLOOR_PROG(10)
