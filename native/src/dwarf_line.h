/* SPDX-License-Identifier: GPL-2.0-only */
/* Address -> file:line from a .debug_line section (DWARF 2-5), compiled into one sorted row table. */
#ifndef DWUNW_DWARF_LINE_H
#define DWUNW_DWARF_LINE_H

#include <stddef.h>
#include <stdint.h>

struct dw_lines;

/* The sections a line table reads. Only `line` is required; the others may be NULL/0. */
struct dw_line_input {
	const uint8_t *line;        /* .debug_line */
	uint64_t line_size;
	const uint8_t *line_str;    /* .debug_line_str (DW_FORM_line_strp) */
	uint64_t line_str_size;
	const uint8_t *str;         /* .debug_str (DW_FORM_strp) */
	uint64_t str_size;
	unsigned addr_size;         /* the ELF's address size (4 or 8): tombstone addresses */
	int drop_zero;              /* drop sequences starting at address 0 (code the linker discarded) */
	/*
	 * DWARF 2-4 line tables do not name the compilation directory: it is the CU's
	 * DW_AT_comp_dir in .debug_info. Called at most once, when the first such unit is met, to
	 * fetch .debug_info and .debug_abbrev; NULL, or a non-zero return, leaves those paths
	 * relative.
	 */
	int (*get_info)(void *arg, const uint8_t **info, uint64_t *info_size,
			const uint8_t **abbrev, uint64_t *abbrev_size);
	void *get_info_arg;
};

struct dw_lines_stats {
	uint64_t rows;              /* rows kept, end-of-sequence markers included */
	uint64_t sequences;
	uint64_t files;
	uint32_t units;             /* line-number programs read */
	uint32_t bad_units;         /* programs skipped or cut short as corrupt */
	uint64_t bytes;             /* memory held */
};

/* Parse every line-number program of the section. Corrupt units are skipped; only running out
 * of memory fails (DWUNW_ERR_NOMEM). An empty section gives an empty table. */
int dw_lines_build(const struct dw_line_input *in, struct dw_lines **out);
void dw_lines_free(struct dw_lines *l);
void dw_lines_stats(const struct dw_lines *l, struct dw_lines_stats *out);

/*
 * The row covering `addr`: 1 and file (full path, truncated to filelen, "" when unknown) and
 * line (0 when the row has none); 0 when no sequence covers addr. The section data must still
 * be mapped: file names point into it.
 */
int dw_lines_lookup(const struct dw_lines *l, uint64_t addr, char *file, size_t filelen, uint32_t *line);

#endif
