/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's records: each snapshot, walker event or -t line from the buffers, its stack kept
 * under the allocation's event id (memleak_allocs.h); the queue they wait in (cap_pump.h), and
 * the stack of an allocation's key at report time.
 */
#ifndef DWUNW_MEMLEAK_RECORDS_H
#define DWUNW_MEMLEAK_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "runtime/frames.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_frames.h"
#include "kwalk/kwalk_track_user.h"
#endif

struct cap_pump;
struct dwunw_cap_reader;

/* Following a tree: the process of the stacks interned now (their address space), else 0. */
extern uint32_t stack_pid;
extern struct unwind_stats ml_stats;
extern uint64_t ml_record_bytes;  /* bytes of all records received */
extern struct dwunw_cap_reader *ml_reader;
extern struct cap_pump *ml_pump;
extern struct fp_cache ml_fpc;
#ifdef HAVE_KWALK
extern struct kw_track ml_kwt;
extern struct kwalk_seen ml_kws;
#endif

/* The capture reader's callback (cap_pump_process). */
int ml_on_record(void *ctx, const void *data, size_t size);

/* Every record submitted until now (the report needs them all); a new report may wait again. */
void ml_drain(void);
void ml_drain_reset(void);
/* Up to `max` queued records: the main loop's step. */
void ml_process_some(size_t max);
/* Some queued records, between chunks of the report's long loops (ml_set_yield). */
void ml_drain_yield(void);

/* The stack of an allocation's key (a stack id, an event id, a lost or failed record). */
int64_t ml_key_stack(uint64_t key);

#endif /* DWUNW_MEMLEAK_RECORDS_H */
