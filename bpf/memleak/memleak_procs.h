/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The processes of a followed tree (-c, -- PROG), as a report names them: "comm (pid)" from the
 * follow slots the BPF side keeps, else /proc while the process runs; slots read once a report.
 */
#ifndef DWUNW_MEMLEAK_PROCS_H
#define DWUNW_MEMLEAK_PROCS_H

#include <stdint.h>
#include "runtime/command.h"

struct memleak_ctx;

/* The command name of process pid ("?" when unknown). */
const char *ml_proc_comm(uint32_t pid);

/* The process that holds follow slot `slot` (NULL: none), as of this report. */
const struct follow_slot *ml_slot_info(const struct memleak_ctx *ml, uint32_t slot);
/* A new report: slots are read again. */
void ml_slots_forget(void);

#endif /* DWUNW_MEMLEAK_PROCS_H */
