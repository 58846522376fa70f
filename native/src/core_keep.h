/* SPDX-License-Identifier: GPL-2.0-only */
/* The bytes of loaded core files (core.c): memory regions registered from them point into them, so
 * each is kept per context and pid until the pid is forgotten (dwunw_maps_forget, proc.c) or the
 * context shut down (ctx.c). A file of its own, below core.c, proc.c and ctx.c. */
#ifndef DWUNW_CORE_KEEP_H
#define DWUNW_CORE_KEEP_H

#include <stddef.h>
#include <stdint.h>

struct dwunw_ctx_impl;
struct dwunw_module;

/* A core file's bytes: read into memory, or mapped. */
void dw_core_buf_free(void *data, size_t size, int mapped);

/* The bytes (and the vDSO module registered from them, a reference) now belong to (c, pid),
 * replacing what was kept for it; DWUNW_ERR_NOMEM: nothing taken. */
int dw_core_keep(struct dwunw_ctx_impl *c, int32_t pid, void *data, size_t size, int mapped,
		 struct dwunw_module *vdso);

/* What is kept for pid, or for every pid of c, freed. */
void dw_core_forget(struct dwunw_ctx_impl *c, int32_t pid);
void dw_core_forget_all(struct dwunw_ctx_impl *c);

#endif
