/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * JIT symbols from /tmp/perf-PID.map, parsed by libdwunw (dwunw_perf_map_*, the parser the CLI
 * uses too). Read once per process; when a pc in anonymous executable memory is not found, the
 * lines appended since are read (the runtime names code as it compiles it), at most once per
 * PERF_MAP_RECHECK_NS. Names are interned (they outlive the process's map).
 */
#ifndef DWUNW_PERF_MAP_H
#define DWUNW_PERF_MAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PERF_MAP_RECHECK_NS 20000000ull /* 20 ms */

/*
 * The interned name covering pc in pid's perf map (and *off = pc - start), or NULL. `jit`: pc is
 * in anonymous executable memory, so a miss may be code named since the last read.
 */
const char *perf_map_lookup(pid_t pid, uint64_t pc, bool jit, uint64_t *off);

/* Drop pid's map (the process has exited and its last record is done). */
void perf_map_forget(pid_t pid);

/* Times the file was read or read on from where it ended (for -v and tests). */
uint64_t perf_map_reads(void);

#endif /* DWUNW_PERF_MAP_H */
