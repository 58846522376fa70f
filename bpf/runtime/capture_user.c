// SPDX-License-Identifier: GPL-2.0-only
/* User-space side of the stack capture: see capture_user.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#ifdef HAVE_DWUNW
#include "dwunw.h"
#endif
#include "capture_user.h"
#include "counters.h"

struct dwunw_cap_reader {
	struct ring_buffer *rb;
	struct perf_buffer *pb;
	dwunw_cap_record_fn fn;
	void *ctx;
	uint64_t lost;
	int stop;           /* perf buffer: an earlier callback asked to stop */
};

uint32_t dwunw_cap_scratch_slots(int perfbuf)
{
	int n = libbpf_num_possible_cpus();

	if (!perfbuf || n <= 0)
		return 1;
	return (uint32_t)n * 2;
}

static size_t round_pow2(size_t v)
{
	size_t p = 4096;

	while (p < v && p < ((size_t)1 << 30))
		p <<= 1;
	return p;
}

int dwunw_cap_size_maps(struct bpf_object *obj, int perfbuf, size_t ring_bytes)
{
	struct bpf_map *rb = bpf_object__find_map_by_name(obj, "cap_ringbuf");
	struct bpf_map *pb = bpf_object__find_map_by_name(obj, "cap_perfbuf");
	struct bpf_map *sc = bpf_object__find_map_by_name(obj, "cap_scratch");
	int err;

	if (!rb || !pb || !sc)
		return -ENOENT;
	err = bpf_map__set_max_entries(rb, perfbuf ? 4096 : (uint32_t)round_pow2(ring_bytes));
	if (!err && !perfbuf)
		err = bpf_map__set_max_entries(pb, 1);
	if (!err)
		err = bpf_map__set_max_entries(sc, dwunw_cap_scratch_slots(perfbuf));
	return err;
}

int dwunw_cap_counters(struct bpf_object *obj, uint64_t out[CAP_CNT_MAX])
{
	return percpu_counters_read(obj, "cap_counters", out, CAP_CNT_MAX);
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct dwunw_cap_reader *r = ctx;

	return r->fn(r->ctx, data, size);
}

/* Perf buffer records: samples carry the BPF output, lost records the kernel's drop count. */
struct perf_sample_rec {
	struct perf_event_header h;
	__u32 size;
	__u8 data[];
};

struct perf_lost_rec {
	struct perf_event_header h;
	__u64 id;
	__u64 lost;
};

static enum bpf_perf_event_ret perf_event_cb(void *ctx, int cpu, struct perf_event_header *ev)
{
	struct dwunw_cap_reader *r = ctx;

	(void)cpu;
	if (ev->type == PERF_RECORD_SAMPLE) {
		const struct perf_sample_rec *s = (const void *)ev;

		if (ev->size >= sizeof(*s) && s->size <= ev->size - sizeof(*s) &&
		    r->fn(r->ctx, s->data, s->size) < 0)
			r->stop = 1;
	} else if (ev->type == PERF_RECORD_LOST) {
		r->lost += ((const struct perf_lost_rec *)ev)->lost;
	}
	return LIBBPF_PERF_EVENT_CONT;
}

struct dwunw_cap_reader *dwunw_cap_reader_new(struct bpf_object *obj, int perfbuf,
					      size_t perf_bytes_per_cpu, dwunw_cap_record_fn fn,
					      void *ctx)
{
	struct dwunw_cap_reader *r = calloc(1, sizeof(*r));
	struct bpf_map *m;
	long page = sysconf(_SC_PAGESIZE);

	if (!r)
		return NULL;
	r->fn = fn;
	r->ctx = ctx;
	if (perfbuf) {
		size_t bytes = round_pow2(perf_bytes_per_cpu);
		/* wake the reader when a quarter of a CPU's buffer is filled, not per sample (the
		 * reader also polls with a short timeout) */
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(attr),
			.config = PERF_COUNT_SW_BPF_OUTPUT,
			.sample_type = PERF_SAMPLE_RAW,
			.watermark = 1,
			.wakeup_watermark = (__u32)(bytes / 4),
		};

		m = bpf_object__find_map_by_name(obj, "cap_perfbuf");
		if (m)
			r->pb = perf_buffer__new_raw(bpf_map__fd(m), bytes / (size_t)page, &attr,
						     perf_event_cb, r, NULL);
		if (!r->pb) {
			free(r);
			return NULL;
		}
	} else {
		m = bpf_object__find_map_by_name(obj, "cap_ringbuf");
		if (m)
			r->rb = ring_buffer__new(bpf_map__fd(m), ring_cb, r, NULL);
		if (!r->rb) {
			free(r);
			return NULL;
		}
	}
	return r;
}

int dwunw_cap_reader_poll(struct dwunw_cap_reader *r, int timeout_ms)
{
	int n, m;

	/*
	 * The producers do not wake us per record (cap_wakeup_bytes, perf watermark) and the poll
	 * only reads buffers that signalled: after the wait, read whatever has arrived anyway.
	 */
	if (r->rb) {
		n = ring_buffer__poll(r->rb, timeout_ms);
		if (n < 0)
			return n;
		m = ring_buffer__consume(r->rb);
		return m < 0 ? m : n + m;
	}
	r->stop = 0;
	n = perf_buffer__poll(r->pb, timeout_ms);
	if (n < 0)
		return n;
	m = perf_buffer__consume(r->pb);
	return m < 0 ? m : n;
}

int dwunw_cap_reader_consume(struct dwunw_cap_reader *r)
{
	if (r->rb)
		return ring_buffer__consume(r->rb);
	return perf_buffer__consume(r->pb);
}

int dwunw_cap_reader_fd(const struct dwunw_cap_reader *r)
{
	return r->rb ? ring_buffer__epoll_fd(r->rb) : perf_buffer__epoll_fd(r->pb);
}

uint64_t dwunw_cap_reader_lost(const struct dwunw_cap_reader *r)
{
	return r->lost;
}

void dwunw_cap_reader_free(struct dwunw_cap_reader *r)
{
	if (!r)
		return;
	ring_buffer__free(r->rb);
	perf_buffer__free(r->pb);
	free(r);
}

const struct cap_record *dwunw_cap_check(const void *data, size_t size)
{
	const struct cap_record *rec = data;

	if (size < sizeof(*rec) || rec->h.kind != CAP_KIND_SNAPSHOT ||
	    rec->h.hdr_size != sizeof(*rec) || rec->stack_size > CAP_MAX_STACK ||
	    sizeof(*rec) + (size_t)rec->stack_size > size || rec->npending > CAP_MAX_PENDING)
		return NULL;
	return rec;
}

/* The slot of pending entry i when it lies inside the copy, else NULL (link-register entries too). */
static uint8_t *slot_in_copy(const struct cap_record *rec, unsigned i)
{
	uint64_t slot = rec->pending[i].slot;

	if (!slot || (slot & CAP_SLOT_LR) || slot < rec->stack_start ||
	    slot - rec->stack_start > rec->stack_size ||
	    rec->stack_size - (slot - rec->stack_start) < sizeof(uint64_t))
		return NULL;
	return (uint8_t *)rec->stack + (slot - rec->stack_start);
}

/* Link register and word size of an arch whose return address is in a register at entry; 0: none. */
static unsigned lr_arch(uint32_t arch, unsigned *lr)
{
	switch (arch) {
	case CAP_ARCH_ARM64:
		*lr = 30;
		return 8;
	case CAP_ARCH_MIPS32:
		*lr = 31;
		return 4;
	default:
		return 0;
	}
}

#ifdef DWUNW_NO_KERNEL_BTF
/*
 * The uretprobe trampoline of process pid: the start of its [uprobes] mapping (the kernel's XOL
 * area, whose first slot is the trampoline), which a build without kernel BTF cannot read at the
 * event (capture.bpf.h). Once per process (the area never moves); 0 when it is gone.
 */
static uint64_t uprobes_page(uint32_t pid)
{
	static _Thread_local uint32_t last_pid;
	static _Thread_local uint64_t last;
	char fn[48], line[512];
	unsigned long long lo;
	FILE *f;

	if (pid == last_pid && last)
		return last;
	snprintf(fn, sizeof(fn), "/proc/%u/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	last = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " [uprobes]") && sscanf(line, "%llx-", &lo) == 1) {
			last = lo;
			break;
		}
	fclose(f);
	last_pid = pid;
	return last;
}
#endif

/* The trampoline's address for rec's link-register entries: from the event, or (no BTF) /proc. */
static uint64_t rec_tramp(const struct cap_record *rec)
{
#ifdef DWUNW_NO_KERNEL_BTF
	if (!rec->tramp && rec->npending)
		return uprobes_page(rec->pid);
#endif
	return rec->tramp;
}

/*
 * Link-register entries (CAP_SLOT_LR): the trampoline's address stands in the link register
 * (innermost call, before its prologue saved it) or somewhere in the frame the call's prologue
 * built, between the next inner pending call's entry sp and its own. Replace it by value there:
 * any other word holding the trampoline's address in that range is a dead copy of it, which no
 * walk reads as a return address. Only counts (changes nothing) when `apply` is 0.
 */
static int patch_lr(struct cap_record *rec, int apply)
{
	unsigned lr, w = lr_arch(rec->arch, &lr);
	uint64_t lo = rec->stack_start, tramp;
	int n = 0;

	if (!w || !rec->npending || !(tramp = rec_tramp(rec)))
		return 0;
	for (unsigned i = 0; i < rec->npending && i < CAP_MAX_PENDING; i++) {
		uint64_t slot = rec->pending[i].slot, hi = slot & ~CAP_SLOT_LR;

		if (!(slot & CAP_SLOT_LR))
			continue;
		if (i == 0 && rec->regs[lr] == tramp) {
			if (apply)
				rec->regs[lr] = rec->pending[i].ret;
			n++;
		}
		if (hi > rec->stack_start + rec->stack_size)
			hi = rec->stack_start + rec->stack_size;
		for (uint64_t a = (lo + w - 1) & ~(uint64_t)(w - 1); a + w <= hi; a += w) {
			uint8_t *p = (uint8_t *)rec->stack + (a - rec->stack_start);
			uint64_t v = 0;

			memcpy(&v, p, w); /* little-endian targets: the low bytes first */
			if (v != tramp)
				continue;
			if (apply)
				memcpy(p, &rec->pending[i].ret, w);
			n++;
		}
		if ((slot & ~CAP_SLOT_LR) > lo)
			lo = slot & ~CAP_SLOT_LR;
	}
	return n;
}

int dwunw_cap_patch(struct cap_record *rec)
{
	int n = 0;

	for (unsigned i = 0; i < rec->npending && i < CAP_MAX_PENDING; i++) {
		uint8_t *p = slot_in_copy(rec, i);
		uint64_t v;

		if (!p)
			continue;
		memcpy(&v, p, sizeof(v));
		if (v != rec->pending[i].ret) {
			memcpy(p, &rec->pending[i].ret, sizeof(v));
			n++;
		}
	}
	return n + patch_lr(rec, 1);
}

const struct cap_record *dwunw_cap_prepare(const void *data, size_t size, void **buf,
					   size_t *buf_size, int *patched)
{
	const struct cap_record *rec = dwunw_cap_check(data, size);
	int need = 0;
	size_t len;

	if (patched)
		*patched = 0;
	if (!rec)
		return NULL;
	if ((uintptr_t)data & 7)
		need = 1;
	for (unsigned i = 0; !need && i < rec->npending; i++) {
		uint8_t *p = slot_in_copy(rec, i);
		uint64_t v;

		if (p) {
			memcpy(&v, p, sizeof(v));
			need = v != rec->pending[i].ret;
		}
	}
	if (!need)
		need = patch_lr((struct cap_record *)rec, 0) > 0; /* counts only: rec stays untouched */
	if (!need)
		return rec;
	len = sizeof(*rec) + rec->stack_size;
	if (*buf_size < len) {
		void *nb = realloc(*buf, len);

		if (!nb)
			return NULL;
		*buf = nb;
		*buf_size = len;
	}
	memcpy(*buf, data, len);
	int n = dwunw_cap_patch(*buf);
	if (patched)
		*patched = n;
	return *buf;
}

#ifdef HAVE_DWUNW
void dwunw_cap_to_regs(const struct cap_record *rec, struct dwunw_regs *regs)
{
	memset(regs, 0, sizeof(*regs));
	regs->arch = rec->arch;
	regs->flags = (rec->h.flags & CAP_F_RETPROBE) ? DWUNW_REGS_PC_IS_RETADDR : 0;
	regs->pid = (int32_t)rec->pid;
	regs->tid = (int32_t)rec->tid;
	regs->pc = rec->pc;
	regs->valid = rec->valid;
	for (unsigned i = 0; i < CAP_NREGS && i < DWUNW_MAX_REGS; i++)
		regs->regs[i] = rec->regs[i];
	regs->stack_start = rec->stack_start;
	regs->stack = rec->stack_size ? rec->stack : NULL;
	regs->stack_size = rec->stack_size;
}

size_t dwunw_cap_samples(const struct cap_record *rec, struct dwunw_stack_sample *out)
{
	size_t n = 0;

	for (unsigned i = 0; i < CAP_NSAMPLES; i++)
		if (rec->sample_ok & (1u << i))
			out[n++] = (struct dwunw_stack_sample){
				.addr = rec->sample_lo + (uint64_t)i * rec->sample_step,
				.data = rec->samples[i],
				.len = CAP_SAMPLE_BYTES,
			};
	return n;
}
#endif
