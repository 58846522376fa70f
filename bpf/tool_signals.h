/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * How the C tools behave as Unix processes (README.md, "Signals"):
 *  - SIGINT, SIGTERM, SIGHUP: tool_stop_requested() turns true; the tool prints its final report,
 *    detaches and exits 0.
 *  - SIGPIPE is ignored; tool_stdout_closed() sees a closed pipe or socket on stdout (poll:
 *    POLLERR/POLLHUP) before anything is written to it, or an EPIPE write: the tool detaches
 *    and exits 0 without a report (`memleak ... | head -1`).
 *  - Started by dwunw (DWUNW_PARENT_PID in the environment): the tool dies with it
 *    (PR_SET_PDEATHSIG SIGTERM), and exits at once when its parent died before that was set.
 */
#ifndef DWUNW_TOOL_SIGNALS_H
#define DWUNW_TOOL_SIGNALS_H

#include <stdbool.h>

/* Install the handlers and the parent-death signal. */
void tool_signals_init(void);

/* A stop signal arrived (or the parent died). */
bool tool_stop_requested(void);

/* Which signal asked to stop (0: none). */
int tool_stop_signal(void);

/* stdout is a pipe or socket whose reader is gone, or a write to it failed with EPIPE. */
bool tool_stdout_closed(void);

/* fflush(stdout); false (and tool_stdout_closed() true from then on) on EPIPE. */
bool tool_flush_stdout(void);

#endif /* DWUNW_TOOL_SIGNALS_H */
