/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading an interpreter's memory: a core's offline memory (then read-only file data), or the live
 * process. One reader per call of the Python API; nothing is kept between calls. */
#ifndef DWUNW_PY_MEM_H
#define DWUNW_PY_MEM_H

#include <stddef.h>
#include <stdint.h>
#include "../proc.h"
#include "../utils/stack_reader.h"

struct dw_py_mem {
	struct dwunw_ctx_impl *c;
	struct dw_proc *proc;       /* a reference */
	struct dw_remote remote;    /* live process only */
};

/* Open the reader for pid: DWUNW_OK, or the maps' error (no such process). */
int dw_py_mem_open(struct dw_py_mem *m, struct dwunw_ctx_impl *c, int32_t pid);
void dw_py_mem_close(struct dw_py_mem *m);
int dw_py_read(struct dw_py_mem *m, uint64_t addr, void *buf, size_t len);

static inline int dw_py_read_u64(struct dw_py_mem *m, uint64_t addr, uint64_t *v)
{
	return dw_py_read(m, addr, v, 8);
}

#endif
