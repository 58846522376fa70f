/* SPDX-License-Identifier: GPL-2.0-only */
/* CPython 3.11's location table (co_linetable): the line of an instruction. */
#ifndef DWUNW_PY_LINETABLE_H
#define DWUNW_PY_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of code unit `index` (0-based) given the table and co_firstlineno: >= 0, or -1 when the
 * instruction has no line, or -2 when the table is malformed or does not reach the index. */
int dw_py311_line(const uint8_t *tab, size_t len, int firstlineno, uint32_t index);

#endif
