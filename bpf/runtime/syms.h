/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Minimal symbolizer for builds without libdwunw: /proc/PID/maps + ELF .symtab/.dynsym of the
 * mapped files (no debug files). The maps are re-read when an address is in no known mapping,
 * and the last good copy is kept after the process exits.
 */
#ifndef DWUNW_SYMS_H
#define DWUNW_SYMS_H

#include <stdint.h>

struct syms_proc;

struct syms_result {
	const char *name;    /* NULL when unknown (valid until syms_proc_free) */
	uint64_t offset;     /* pc - symbol start */
	const char *module;  /* mapped file, NULL when pc is in no file mapping */
};

struct syms_proc *syms_proc_new(int pid);
void syms_proc_free(struct syms_proc *p);
/* Re-read the maps now (e.g. at every report while the process lives). */
void syms_proc_refresh(struct syms_proc *p);
/* is_ret: pc is a return address (look up pc - 1). */
void syms_resolve(struct syms_proc *p, uint64_t pc, int is_ret, struct syms_result *out);

#endif /* DWUNW_SYMS_H */
