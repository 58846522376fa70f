/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memleak's records: each snapshot, walker event or -t line from the buffers, its stack kept
 * under the allocation's event id (memleak_allocs.h); the queue they wait in (cap_pump.h), and
 * the stack of an allocation's key at report time.
 */
#ifndef DWUNW_MEMLEAK_RECORDS_H
#define DWUNW_MEMLEAK_RECORDS_H

#include <stddef.h>
#include <stdint.h>

struct memleak_ctx;

/* The capture reader's callback (cap_pump_process); ctx: the memleak_ctx. */
int ml_on_record(void *ctx, const void *data, size_t size);

/* Every record submitted until now (the report needs them all); a new report may wait again. */
void ml_drain(struct memleak_ctx *ml);
void ml_drain_reset(struct memleak_ctx *ml);
/* Up to `max` queued records: the main loop's step. */
void ml_process_some(struct memleak_ctx *ml, size_t max);
/* Some queued records, between chunks of the report's long loops (ml_set_yield; arg: ml). */
void ml_drain_yield(void *ml);

/*
 * The stack of an allocation's key (a stack id, an event id, a lost or failed record); pid:
 * following a tree, the process it belongs to (the stacks' address space), else 0.
 */
int64_t ml_key_stack(struct memleak_ctx *ml, uint64_t key, uint32_t pid);
/* fp mode, after a report: drop the views of the processes that exited since the last one (at
 * most ML_EXITED_MAX wait; beyond, a view goes at its exit and its stacks are shown unnamed) */
#define ML_EXITED_MAX 4096
void ml_forget_exited(struct memleak_ctx *ml);

/*
 * --allocated: the allocations whose record came before their event's stack (perf buffers are
 * per CPU; a snapshot the queue dropped) counted now, after the report's drain; those still
 * without one go under "[stack unknown: record not received]".
 */
void ml_allocated_settle(struct memleak_ctx *ml);

#endif /* DWUNW_MEMLEAK_RECORDS_H */
