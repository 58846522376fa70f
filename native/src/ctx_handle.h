/* SPDX-License-Identifier: GPL-2.0-only */
/* The public handle (struct dwunw_ctx) and the context behind it: where every public call starts.
 * A header of its own, below the files that implement the calls (ctx.c, core.c, proc.c, ...). */
#ifndef DWUNW_CTX_HANDLE_H
#define DWUNW_CTX_HANDLE_H

#include <stddef.h>
#include "dwunw.h"

#define DWUNW_CTX_MAGIC 0x64776e75u /* "dwnu" */

/* The context of a handle that dwunw_init set up, else NULL. */
static inline struct dwunw_ctx_impl *dw_ctx(struct dwunw_ctx *ctx)
{
	return ctx && ctx->magic == DWUNW_CTX_MAGIC ? ctx->impl : NULL;
}

#endif
