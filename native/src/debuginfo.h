/* SPDX-License-Identifier: GPL-2.0-only */
/* Symbols elsewhere than the module: its debug file (build-id, .gnu_debuglink) and MiniDebugInfo. */
#ifndef DWUNW_DEBUGINFO_H
#define DWUNW_DEBUGINFO_H

#include <stddef.h>
#include <stdint.h>
#include "dwarf_line.h"
#include "elf_file.h"

#define DW_DEBUGDATA_MAX (64u << 20)   /* largest decompressed .gnu_debugdata accepted */

/*
 * Find and open the separate debug file of `e`, the ELF of the file at `module_path` (NULL or a
 * name without '/' when it has no directory: then only build-id paths are searched).
 * debug_dirs: ':'-separated roots (NULL = "/usr/lib/debug"), each prefixed by sysroot (may be NULL).
 * Order: ROOT/.build-id/xx/yyyy.debug for each root; then the .gnu_debuglink name in the module's
 * directory, its .debug/ subdirectory, and ROOT/<module's directory>/ for each root (the CRC must
 * match). A candidate must be an ELF of the same machine and, when both have one, the same
 * build-id, and lie where only root writes: the file and every directory above it owned by root
 * (or by the caller's user) and writable by no one else, unless sticky; the first candidate
 * refused for that is named in refused, "PATH (why)" (may be NULL). On success `out` is open and
 * its path copied to found (may be NULL). DWUNW_ERR_NOT_FOUND when there is none.
 */
int dw_debug_file_open(struct dw_elf *e, const char *module_path, const char *sysroot,
		       const char *debug_dirs, struct dw_elf *out, char *found, size_t foundlen,
		       char *refused, size_t refusedlen);

/* Open the debug file at path for e: only when both have a build id and they are equal. */
int dw_debug_file_at(struct dw_elf *e, const char *path, struct dw_elf *out);

/* The .gnu_debuglink of e: file name and CRC. 0 when present and well-formed. */
int dw_debuglink(struct dw_elf *e, const char **name, uint32_t *crc);

/*
 * MiniDebugInfo: decompress e's .gnu_debugdata (xz) and open it as an ELF image. *buf receives
 * the malloc'd image, to free after dw_elf_close(out). DWUNW_ERR_NO_DWARF when e has none.
 */
int dw_debugdata_open(struct dw_elf *e, struct dw_elf *out, void **buf);

/* Decompress an xz stream into a new buffer of at most `cap` bytes. */
int dw_xz_decode(const uint8_t *in, size_t in_size, size_t cap, uint8_t **out, size_t *out_size);

/* What a module's symbol index holds, for tests and measurements. */
struct dw_symtab;
struct dw_symtab_stats {
	uint64_t nsyms;
	uint64_t build_ns;          /* dw_symtab_build */
	uint64_t line_ns;           /* the line table, built on the first lookup */
	const char *debug_file;     /* path of the separate debug file, or NULL */
	int has_debugdata;          /* MiniDebugInfo was read */
	struct dw_lines_stats lines;/* zero until the line table is built */
};
void dw_symtab_stats(const struct dw_symtab *s, struct dw_symtab_stats *out);

#endif
