// SPDX-License-Identifier: GPL-2.0-only
/* Public calls not implemented yet: they say so instead of pretending to work. */
#include "internal.h"
#include "module.h"

void dw_procs_free(struct dwunw_ctx_impl *c) { (void)c; }

DWUNW_API int dwunw_capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs,
			    struct dwunw_frame *frames, size_t *frame_cnt)
{
	(void)ctx; (void)regs; (void)frames;
	if (frame_cnt)
		*frame_cnt = 0;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_maps_set(struct dwunw_ctx *ctx, int32_t pid, const char *maps_text, size_t len)
{
	(void)ctx; (void)pid; (void)maps_text; (void)len;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API void dwunw_maps_forget(struct dwunw_ctx *ctx, int32_t pid) { (void)ctx; (void)pid; }

DWUNW_API int dwunw_symbolize(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t addr,
			      struct dwunw_symbol *out)
{
	(void)ctx; (void)mod; (void)addr; (void)out;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_symbolize_frame(struct dwunw_ctx *ctx, const struct dwunw_frame *frame,
				    struct dwunw_symbol *out)
{
	(void)ctx; (void)frame; (void)out;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_stack_reader_init(struct dwunw_stack_reader *r, int32_t pid, const struct dwunw_config *cfg)
{
	(void)r; (void)pid; (void)cfg;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_stack_reader_attach(struct dwunw_stack_reader *r, int32_t tid)
{
	(void)r; (void)tid;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_stack_reader_read(struct dwunw_stack_reader *r, uint64_t addr, void *buf, size_t len)
{
	(void)r; (void)addr; (void)buf; (void)len;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_stack_reader_regs(struct dwunw_stack_reader *r, struct dwunw_regs *out)
{
	(void)r; (void)out;
	return DWUNW_ERR_UNSUPPORTED;
}

DWUNW_API int dwunw_stack_reader_detach(struct dwunw_stack_reader *r)
{
	(void)r;
	return DWUNW_ERR_UNSUPPORTED;
}
