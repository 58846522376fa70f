/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * profile's `-- COMMAND ARGS...`: the command is forked at once but held until the sampling
 * runs (so it is profiled from its first instruction), then exec'd; ended with SIGTERM if
 * profile stops first. Minimal on purpose: the shared option and process-tree layer replaces it.
 */
#ifndef DWUNW_PROFILE_TARGET_H
#define DWUNW_PROFILE_TARGET_H

#include <stdbool.h>
#include <sys/types.h>

/* Fork the held child for argv (execvp): its pid. Dies on failure. */
pid_t ptarget_start(char **argv);
/* Let the held child exec. */
void ptarget_release(void);
/* Has the started child exited? (reaps it; *status as from waitpid) */
bool ptarget_exited(int *status);
/* End the child if it still runs (SIGTERM, then reap). */
void ptarget_stop(void);

#endif /* DWUNW_PROFILE_TARGET_H */
