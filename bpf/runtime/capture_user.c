// SPDX-License-Identifier: GPL-2.0-only
/* User-space side of the stack capture: see capture_user.h. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
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
#include "mmap_ev.h"
#include "py.h"

/*
 * The perf buffer has one buffer per CPU, each in the order its records were written, none across
 * them: a library's mapping event read after the record of another thread that called into it
 * leaves that record in no module (a tool's views apply events in record order). So the reader
 * orders them as perf does: each pass copies what every CPU's buffer holds into a staging area,
 * sorts it by kernel time, and gives the tool the records older than the pass's start less
 * REORDER_NS (a record's time is taken before it is written: a writer preempted in between
 * commits it late); the younger ones wait for the next pass. Every kind a tool sends has its
 * time registered; a record of a kind without one is counted (dwunw_cap_reader_untimed) and takes
 * the time of the record before them in its CPU's buffer.
 */
#define REORDER_NS (20ull * 1000 * 1000)

struct staged {
	uint64_t ts, seq;
	size_t off;
	uint32_t size;
};

struct dwunw_cap_reader {
	struct ring_buffer *rb;
	struct perf_buffer *pb;
	dwunw_cap_record_fn fn;
	void *ctx;
	uint64_t lost;
	uint64_t untimed;        /* perf buffer: records of a kind with no time registered */
	int stop;                /* perf buffer: a callback asked to stop this pass */
	/* perf buffer only */
	size_t nbufs, cur_buf;
	uint64_t *buf_ts;        /* per CPU buffer: the time of its last record read */
	int ts_off[CAP_KIND_TOOL + 16]; /* a kind's u64 time: its offset, or -1 */
	uint8_t *arena;          /* staged records' bytes */
	size_t arena_len, arena_cap;
	uint8_t *spare;          /* the arena compact() copies into next */
	size_t spare_cap;
	struct staged *st;       /* staged records; [st_head, nst) not given yet */
	size_t nst, st_head, st_cap;
	uint64_t seq;
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

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t nc = *cap ? *cap : 64;
	void *np;

	while (nc < need)
		nc *= 2;
	np = realloc(p, nc * elem);
	if (np)
		*cap = nc;
	return np;
}

/* Copy one record into the staging area with its time. */
static void stage(struct dwunw_cap_reader *r, const void *data, uint32_t size)
{
	const struct cap_rec_hdr *h = data;
	uint64_t ts = r->buf_ts[r->cur_buf];
	int off = size >= sizeof(*h) && h->kind < sizeof(r->ts_off) / sizeof(r->ts_off[0]) ?
			  r->ts_off[h->kind] : -1;
	uint8_t *na;
	struct staged *ns;

	if (off >= 0 && (size_t)off + sizeof(ts) <= size) {
		memcpy(&ts, (const uint8_t *)data + off, sizeof(ts));
		r->buf_ts[r->cur_buf] = ts;
	} else {
		r->untimed++;
	}
	size_t padded = ((size_t)size + 7) & ~(size_t)7;

	if (r->arena_len + padded > r->arena_cap) {
		na = grow(r->arena, &r->arena_cap, r->arena_len + padded, 1);
		if (!na) {
			r->lost++; /* counted as the kernel's own losses are */
			return;
		}
		r->arena = na;
	}
	if (r->nst == r->st_cap) {
		ns = grow(r->st, &r->st_cap, r->nst + 1, sizeof(*ns));
		if (!ns) {
			r->lost++;
			return;
		}
		r->st = ns;
	}
	memcpy(r->arena + r->arena_len, data, size);
	r->st[r->nst++] = (struct staged){ .ts = ts, .seq = r->seq++, .off = r->arena_len, .size = size };
	r->arena_len += padded;
}

static enum bpf_perf_event_ret perf_event_cb(void *ctx, int cpu, struct perf_event_header *ev)
{
	struct dwunw_cap_reader *r = ctx;

	(void)cpu;
	if (ev->type == PERF_RECORD_SAMPLE) {
		const struct perf_sample_rec *s = (const void *)ev;

		if (ev->size >= sizeof(*s) && s->size <= ev->size - sizeof(*s))
			stage(r, s->data, s->size);
	} else if (ev->type == PERF_RECORD_LOST) {
		r->lost += ((const struct perf_lost_rec *)ev)->lost;
	}
	return LIBBPF_PERF_EVENT_CONT;
}

static int by_time(const void *a, const void *b)
{
	const struct staged *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t mono_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t); /* bpf_ktime_get_ns()'s clock */
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/*
 * Give the tool the staged records older than `before`, in time order, until it asks to stop;
 * the rest stay staged. Count of records given.
 */
static int give(struct dwunw_cap_reader *r, uint64_t before)
{
	int n = 0;

	r->stop = 0;
	while (r->st_head < r->nst && r->st[r->st_head].ts < before && !r->stop) {
		const struct staged *x = &r->st[r->st_head++];

		n++;
		if (r->fn(r->ctx, r->arena + x->off, x->size) < 0)
			r->stop = 1; /* this one is taken; the others wait */
	}
	return n;
}

/*
 * Drop what was given: the records still staged move to the front of the other arena (after the
 * sort they are not in the arena's order, so they cannot be moved in place).
 */
static void compact(struct dwunw_cap_reader *r)
{
	size_t k = 0, len = 0, need = 0;
	uint8_t *ns;

	if (!r->st_head)
		return;
	for (size_t i = r->st_head; i < r->nst; i++)
		need += ((size_t)r->st[i].size + 7) & ~(size_t)7;
	if (need > r->spare_cap) {
		ns = grow(r->spare, &r->spare_cap, need, 1);
		if (!ns) { /* keep the bytes where they are */
			memmove(r->st, r->st + r->st_head, (r->nst - r->st_head) * sizeof(*r->st));
			r->nst -= r->st_head;
			r->st_head = 0;
			return;
		}
		r->spare = ns;
	}
	for (size_t i = r->st_head; i < r->nst; i++, k++) {
		struct staged x = r->st[i];

		memcpy(r->spare + len, r->arena + x.off, x.size);
		x.off = len;
		len += ((size_t)x.size + 7) & ~(size_t)7;
		r->st[k] = x;
	}
	ns = r->arena;
	r->arena = r->spare;
	r->spare = ns;
	need = r->arena_cap;
	r->arena_cap = r->spare_cap;
	r->spare_cap = need;
	r->nst = k;
	r->st_head = 0;
	r->arena_len = len;
}

/*
 * One pass: records still staged from a stopped pass go first; then every CPU's buffer is read
 * to its end, and what is old enough (everything with `all`) goes to the tool in time order.
 */
static int perf_pass(struct dwunw_cap_reader *r, bool all)
{
	uint64_t start = mono_now();
	uint64_t before = all ? UINT64_MAX : start > REORDER_NS ? start - REORDER_NS : 0;
	int n = 0;

	compact(r);
	if (r->nst) {
		n = give(r, before);
		compact(r);
		if (r->stop)
			return n; /* the tool is full: the kernel's buffers keep the rest */
	}
	size_t was = r->nst;

	for (r->cur_buf = 0; r->cur_buf < r->nbufs; r->cur_buf++) {
		int err = perf_buffer__consume_buffer(r->pb, r->cur_buf);

		if (err < 0 && err != -ENOENT)
			return err;
	}
	if (r->nst > was)
		qsort(r->st, r->nst, sizeof(*r->st), by_time);
	n += give(r, before);
	compact(r);
	return n;
}

int dwunw_cap_reader_order_by(struct dwunw_cap_reader *r, uint16_t kind, size_t ts_offset)
{
	if (kind >= sizeof(r->ts_off) / sizeof(r->ts_off[0]) || ts_offset > 4096)
		return -EINVAL;
	r->ts_off[kind] = (int)ts_offset;
	return 0;
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
		r->nbufs = r->pb ? perf_buffer__buffer_cnt(r->pb) : 0;
		r->buf_ts = r->nbufs ? calloc(r->nbufs, sizeof(*r->buf_ts)) : NULL;
		if (!r->pb || !r->buf_ts) {
			perf_buffer__free(r->pb);
			free(r);
			return NULL;
		}
		for (size_t k = 0; k < sizeof(r->ts_off) / sizeof(r->ts_off[0]); k++)
			r->ts_off[k] = -1;
		r->ts_off[CAP_KIND_SNAPSHOT] = offsetof(struct cap_record, ts);
		r->ts_off[CAP_KIND_MAPEV] = offsetof(struct mmap_ev_rec, ts);
		r->ts_off[CAP_KIND_PROC] = offsetof(struct cap_proc_rec, ts);
		r->ts_off[CAP_KIND_PY] = offsetof(struct py_rec, ts);
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
	{
		struct pollfd f = { .fd = perf_buffer__epoll_fd(r->pb), .events = POLLIN };

		if (poll(&f, 1, timeout_ms) < 0 && errno != EINTR)
			return -errno;
	}
	return perf_pass(r, false);
}

int dwunw_cap_reader_read(struct dwunw_cap_reader *r, bool all)
{
	if (r->rb)
		return ring_buffer__consume(r->rb);
	return perf_pass(r, all);
}

int dwunw_cap_reader_consume(struct dwunw_cap_reader *r)
{
	return dwunw_cap_reader_read(r, true);
}

int dwunw_cap_reader_fd(const struct dwunw_cap_reader *r)
{
	return r->rb ? ring_buffer__epoll_fd(r->rb) : perf_buffer__epoll_fd(r->pb);
}

uint64_t dwunw_cap_reader_lost(const struct dwunw_cap_reader *r)
{
	return r->lost;
}

uint64_t dwunw_cap_reader_untimed(const struct dwunw_cap_reader *r)
{
	return r->untimed;
}

void dwunw_cap_reader_free(struct dwunw_cap_reader *r)
{
	if (!r)
		return;
	ring_buffer__free(r->rb);
	perf_buffer__free(r->pb);
	free(r->buf_ts);
	free(r->arena);
	free(r->spare);
	free(r->st);
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
