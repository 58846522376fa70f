/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where to attach a function's uprobe so the kernel emulates the probed instruction instead of
 * single-stepping it out of line (which costs microseconds under virtualization).
 *
 * The entry probe may move past leading instructions that only set the flags (test, cmp,
 * endbr64) to the first instruction the kernel emulates (push of a register, jmp, call, jcc,
 * nop), when the function (its bytes and size from the ELF symbol table, decoded by
 * insn_x86.c) has no branch and no other symbol into the bytes skipped, and no indirect jump
 * (whose targets cannot be checked). The skipped instructions change neither the argument
 * registers nor the stack pointer nor memory, so the probe still sees every call once with its
 * arguments. Otherwise, and on other architectures, the probe stays at the entry. Callers keep
 * functions with a return probe at the entry (see uprobe_set.c attach_one).
 */
#ifndef DWUNW_UPROBE_ATTACH_H
#define DWUNW_UPROBE_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ua_site {
	uint64_t entry_off;    /* file offset of the function's first byte */
	uint64_t probe_off;    /* file offset to attach at */
	uint32_t skip;         /* probe_off - entry_off */
	char why[96];          /* what was decided, for -v */
};

/*
 * Find function `name` in the ELF file `path` (dynamic symbols, then .symtab) and choose its
 * probe place (cheap: look for an emulated instruction; else the entry). 0, or -ENOENT when the
 * symbol is absent, or another negative errno.
 */
int ua_find(const char *path, const char *name, bool cheap, struct ua_site *out);

#endif /* DWUNW_UPROBE_ATTACH_H */
