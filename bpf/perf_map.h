/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * JIT symbols from /tmp/perf-PID.map ("START SIZE name" per line, hex), the file runtimes write
 * for perf (node --perf-basic-prof, the JVM with perf-map-agent), read as perf does. Read once
 * per process, again when a lookup misses and the file grew.
 */
#ifndef DWUNW_PERF_MAP_H
#define DWUNW_PERF_MAP_H

#include <stdint.h>
#include <sys/types.h>

/* The interned name covering pc in pid's perf map (and *off = pc - start), or NULL. */
const char *perf_map_lookup(pid_t pid, uint64_t pc, uint64_t *off);

#endif /* DWUNW_PERF_MAP_H */
