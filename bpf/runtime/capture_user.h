/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * User-space side of the stack capture (capture.bpf.h): sizing the maps before load, reading
 * records from the ring buffer or the perf buffer, patching pending uretprobe return
 * addresses back into a snapshot, and turning a record into struct dwunw_regs.
 *
 * Loading, in order:
 *   skel = X__open();
 *   skel->rodata->cap_use_perfbuf = ...; skel->rodata->cap_stack_bytes = ...;
 *   skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(perfbuf);
 *   skel->rodata->cap_wakeup_bytes = ring_bytes / 8;   (optional: fewer wake-ups)
 *   dwunw_cap_size_maps(skel->obj, perfbuf, ring_bytes);
 *   X__load(skel);
 *   r = dwunw_cap_reader_new(skel->obj, perfbuf, perf_bytes_per_cpu, on_record, ctx);
 *   loop: dwunw_cap_reader_poll(r, timeout_ms);
 * With cap_wakeup_bytes (ring buffer), and always with the perf buffer (woken at a quarter
 * full), the reader is not woken per record: poll with a short timeout (10 ms).
 */
#ifndef DWUNW_CAPTURE_USER_H
#define DWUNW_CAPTURE_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "capture.h"

struct bpf_object;
struct dwunw_regs;

/* cap_scratch entries the BPF side needs (2 per possible CPU with the perf buffer, else 1). */
uint32_t dwunw_cap_scratch_slots(int perfbuf);

/*
 * Size the capture maps of `obj` (not loaded yet): the ring buffer to ring_bytes (rounded up to
 * a power of 2) or one page when unused; the perf event array to one entry when unused; the
 * scratch pool. 0 or a negative errno.
 */
int dwunw_cap_size_maps(struct bpf_object *obj, int perfbuf, size_t ring_bytes);

/* Sum of the per-CPU capture counters (enum cap_counter). 0 or a negative errno. */
int dwunw_cap_counters(struct bpf_object *obj, uint64_t out[CAP_CNT_MAX]);

/*
 * Called for every record in order: the ring buffer's global order; the perf buffer's records
 * sorted by kernel time across the CPUs' buffers (see capture_user.c: younger records wait for a
 * later pass; a kind's time is found with dwunw_cap_reader_order_by). `data` is only valid during
 * the call, and read-only. A negative return stops the current poll early: that record is taken,
 * the ones after it are left for the next one.
 */
typedef int (*dwunw_cap_record_fn)(void *ctx, const void *data, size_t size);

struct dwunw_cap_reader;

struct dwunw_cap_reader *dwunw_cap_reader_new(struct bpf_object *obj, int perfbuf,
					      size_t perf_bytes_per_cpu, dwunw_cap_record_fn fn,
					      void *ctx);
/* Wait up to timeout_ms for records and process them: count processed, or a negative errno. */
int dwunw_cap_reader_poll(struct dwunw_cap_reader *r, int timeout_ms);
/* Process whatever is available without waiting (perf buffer: every record read, young or not). */
int dwunw_cap_reader_consume(struct dwunw_cap_reader *r);
/* Process what is available without waiting; perf buffer: without `all`, the youngest records wait. */
int dwunw_cap_reader_read(struct dwunw_cap_reader *r, bool all);
/* Perf buffer: records of `kind` carry their kernel time as a u64 at `ts_offset` (the runtime's
 * kinds are known; a tool names its own). 0 or -EINVAL. */
int dwunw_cap_reader_order_by(struct dwunw_cap_reader *r, uint16_t kind, size_t ts_offset);
/* A file descriptor that polls readable when records have arrived (for a poll() of one's own). */
int dwunw_cap_reader_fd(const struct dwunw_cap_reader *r);
/* Records the kernel dropped in the perf buffer (reported by perf's lost records). */
uint64_t dwunw_cap_reader_lost(const struct dwunw_cap_reader *r);
/* Perf buffer: records read of a kind with no time registered (ordered by the one before them on
 * their CPU, not by their own time): 0 when every kind the tool sends is registered. */
uint64_t dwunw_cap_reader_untimed(const struct dwunw_cap_reader *r);
void dwunw_cap_reader_free(struct dwunw_cap_reader *r);

/*
 * Check a snapshot record (kind, sizes): the record, or NULL when it is malformed.
 */
const struct cap_record *dwunw_cap_check(const void *data, size_t size);

/*
 * Write the original return addresses of pending return probes back into the record's
 * stack copy where their slots lie inside it (x86_64), or where the trampoline's address stands
 * in the frame of a call whose return address was in the link register at entry, and in that
 * register (arm64, mips: CAP_SLOT_LR). Returns the number of words changed.
 */
int dwunw_cap_patch(struct cap_record *rec);

/*
 * A record ready to unwind: `data` itself when it is aligned and needs no patch, else a
 * patched copy in `buf` (grown with realloc as needed; free it when done). NULL when the
 * record is malformed or memory runs out.
 */
const struct cap_record *dwunw_cap_prepare(const void *data, size_t size, void **buf,
					   size_t *buf_size, int *patched);

#ifdef HAVE_DWUNW
/* struct dwunw_regs for dwunw_capture: registers, pc, pid/tid, and the stack copy. */
void dwunw_cap_to_regs(const struct cap_record *rec, struct dwunw_regs *regs);
/* The record's samples above the window (capture.h) into out[CAP_NSAMPLES], for
 * dwunw_capture_sampled: how many. */
struct dwunw_stack_sample;
size_t dwunw_cap_samples(const struct cap_record *rec, struct dwunw_stack_sample *out);
#endif

#endif /* DWUNW_CAPTURE_USER_H */
