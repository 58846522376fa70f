// SPDX-License-Identifier: GPL-2.0-only
/* unwind_pid.c: freeze thread TID of process PID, take its registers and a window of its stack,
 * resume it, then unwind and symbolize the snapshot with libdwunw (doc/api_usage.md §6.1).
 * Build: make examples (build/examples/api/unwind_pid), or
 *   gcc -O2 -Wall -Wextra -I native/include -o unwind_pid unwind_pid.c build/libdwunw.a \
 *       -lelf -lz -lzstd -llzma -lpthread -ldl
 * Usage: ./unwind_pid PID [TID]   (needs ptrace rights: root or CAP_SYS_PTRACE) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "dwunw.h"

#define WINDOW     (32 * 1024)   /* stack bytes copied at most */
#define PAGE       4096u
#define MAX_FRAMES 64

static void log_line(void *arg, const char *line)
{
	fprintf(stderr, "[%s] %s\n", (const char *)arg, line);
}

static const char *how_name(uint32_t how)
{
	static const char *const names[] = { "initial", "cfi", "signal", "fp", "lr", "prologue" };
	return how < sizeof(names) / sizeof(names[0]) ? names[how] : "?";
}

/* Read page by page from sp until the window is full or an address is not mapped (above the
 * stack's top). Returns the bytes read. */
static size_t read_window(struct dwunw_stack_reader *r, uint64_t sp, uint8_t *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap) {
		uint64_t addr = sp + got;
		size_t chunk = PAGE - (size_t)(addr % PAGE);
		if (chunk > cap - got)
			chunk = cap - got;
		if (dwunw_stack_reader_read(r, addr, buf + got, chunk) != DWUNW_OK)
			break;
		got += chunk;
	}
	return got;
}

int main(int argc, char **argv)
{
	static uint8_t stack[WINDOW];
	struct dwunw_config cfg = {
		.size = sizeof(cfg),
		.audit = log_line, .audit_arg = "audit",
		.warn = log_line, .warn_arg = "warn",
	};
	struct dwunw_ctx ctx;
	struct dwunw_stack_reader reader;
	struct dwunw_regs regs;
	struct dwunw_frame frames[MAX_FRAMES];
	size_t nframes = MAX_FRAMES;
	int err, stop;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PID [TID]\n", argv[0]);
		return 2;
	}
	int32_t pid = atoi(argv[1]), tid = argc > 2 ? atoi(argv[2]) : pid;

	/* 1. The context: 16 module-cache slots, the rest defaults */
	if ((err = dwunw_init(&ctx, &cfg))) {
		fprintf(stderr, "dwunw_init: %s\n", dwunw_strerror(err));
		return 1;
	}

	/* 2. Freeze the thread, take its registers and stack window, resume it at once
	 *    (attach, regs and detach from one thread) */
	if ((err = dwunw_stack_reader_init(&reader, pid, &cfg)) ||
	    (err = dwunw_stack_reader_attach(&reader, tid))) {
		fprintf(stderr, "attach %d/%d: %s\n", pid, tid, dwunw_strerror(err));
		dwunw_shutdown(&ctx);
		return 1;
	}
	err = dwunw_stack_reader_regs(&reader, &regs);
	if (!err) {
		const struct dwunw_arch_ops *arch = dwunw_arch_get(regs.arch);
		uint64_t sp = regs.regs[arch->sp_reg];
		regs.stack_start = sp;
		regs.stack = stack;
		regs.stack_size = read_window(&reader, sp, stack, sizeof(stack));
	}
	dwunw_stack_reader_detach(&reader);
	if (err) {
		fprintf(stderr, "regs: %s\n", dwunw_strerror(err));
		dwunw_shutdown(&ctx);
		return 1;
	}

	/* 3. Unwind: nframes is the capacity on entry, the frames written on return */
	stop = dwunw_capture(&ctx, &regs, frames, &nframes);

	/* 4. Symbolize */
	for (size_t i = 0; i < nframes; i++) {
		const struct dwunw_frame *f = &frames[i];
		struct dwunw_symbol sym;
		const char *mod = f->module ? dwunw_module_path(f->module) : "?";

		printf("#%-2zu 0x%016" PRIx64 " %-7s", i, f->pc, how_name(f->how));
		if (dwunw_symbolize_frame(&ctx, f, &sym) == DWUNW_OK)
			printf(" %s+0x%" PRIx64, sym.name, sym.offset);
		else
			printf(" ??");
		printf(" (%s)", mod);
		if (sym.file[0])
			printf(" %s:%u", sym.file, sym.line);
		printf("\n");
	}
	printf("stop: %s (%s)\n", dwunw_errname(stop), dwunw_strerror(stop));

	/* 5. Give back the module references the frames hold: the slots turn warm, and the next
	 *    capture of the same files hits them */
	dwunw_module_cache_release(&ctx, frames, nframes);

	struct dwunw_cache_stats cs;
	if (dwunw_cache_stats(&ctx, &cs) == DWUNW_OK)
		printf("cache: %u slots, %u active, %u warm, %" PRIu64 " hits, %" PRIu64 " misses\n",
		       cs.slots, cs.active, cs.warm, cs.hits, cs.misses);

	/* 6. Free everything */
	dwunw_shutdown(&ctx);
	return stop == DWUNW_OK ? 0 : 3;
}
