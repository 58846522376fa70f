// SPDX-License-Identifier: GPL-2.0-only
/*
 * The names every dwunw output gives a frame's origin and the text markers with their legend: one
 * table, read by the tools (bpf/runtime/report_fmt.c) and the CLI (lib/marks.ts, lib/origin.ts).
 */
#include "internal.h"

static const char *const origin_names[DWUNW_ORIGIN_COUNT] = {
	[DWUNW_ORIGIN_WINDOW] = "window",     [DWUNW_ORIGIN_FP] = "fp",
	[DWUNW_ORIGIN_PROLOGUE] = "prologue", [DWUNW_ORIGIN_LR] = "lr",
	[DWUNW_ORIGIN_SIGNAL] = "signal",     [DWUNW_ORIGIN_KERNEL] = "kernel",
	[DWUNW_ORIGIN_KERNEL_WALK] = "kernel-walk", [DWUNW_ORIGIN_PYTHON] = "python",
	[DWUNW_ORIGIN_FROZEN] = "frozen",
	[DWUNW_ORIGIN_LIVE] = "live",
};

static const struct {
	const char *name, *legend;
} marks[DWUNW_MARK_COUNT] = {
	[DWUNW_MARK_LIVE] = { "live", "rests on stack memory read from the process after the event (it may have changed since)" },
	[DWUNW_MARK_FP] = { "fp", "found by frame pointers (no CFI there)" },
	[DWUNW_MARK_PROLOGUE] = { "prologue", "found by decoding the function's prologue (no CFI there)" },
	[DWUNW_MARK_LR] = { "lr", "return address taken where the call left it (no CFI there)" },
	[DWUNW_MARK_JIT] = { "jit", "named from the JIT's /tmp/perf-PID.map" },
	[DWUNW_MARK_UPROBE] = { "uprobe", "pc is the kernel's uretprobe trampoline (the walk ends there: the return address it stands for is kept by the kernel)" },
	[DWUNW_MARK_PY] = { "py", "a Python function from CPython's frame chain (qualified name, file:line), placed before the interpreter call that ran it" },
};

DWUNW_API const char *dwunw_origin_name(uint32_t origin)
{
	return origin < DWUNW_ORIGIN_COUNT ? origin_names[origin] : NULL;
}

DWUNW_API uint32_t dwunw_how_origin(uint32_t how)
{
	switch (how) {
	case DWUNW_HOW_SIGNAL:
		return DWUNW_ORIGIN_SIGNAL;
	case DWUNW_HOW_FP:
		return DWUNW_ORIGIN_FP;
	case DWUNW_HOW_LR:
		return DWUNW_ORIGIN_LR;
	case DWUNW_HOW_PROLOGUE:
		return DWUNW_ORIGIN_PROLOGUE;
	default: /* INITIAL, CFI: the state captured at the event, stepped by CFI */
		return DWUNW_ORIGIN_WINDOW;
	}
}

DWUNW_API int dwunw_origin_mark(uint32_t origin)
{
	switch (origin) {
	case DWUNW_ORIGIN_LIVE:
		return DWUNW_MARK_LIVE;
	case DWUNW_ORIGIN_FP:
		return DWUNW_MARK_FP;
	case DWUNW_ORIGIN_PROLOGUE:
		return DWUNW_MARK_PROLOGUE;
	case DWUNW_ORIGIN_LR:
		return DWUNW_MARK_LR;
	case DWUNW_ORIGIN_PYTHON:
		return DWUNW_MARK_PY;
	default: /* window, signal, kernel, kernel-walk, frozen: event-time state by CFI or the ABI */
		return -1;
	}
}

DWUNW_API const char *dwunw_mark_name(uint32_t mark)
{
	return mark < DWUNW_MARK_COUNT ? marks[mark].name : NULL;
}

DWUNW_API const char *dwunw_mark_legend(uint32_t mark)
{
	return mark < DWUNW_MARK_COUNT ? marks[mark].legend : NULL;
}
