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
