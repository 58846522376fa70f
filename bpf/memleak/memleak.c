// SPDX-License-Identifier: GPL-2.0-only
/*
 * memleak: outstanding allocations of a process grouped by stack, compatible in flags and output
 * with libbpf-tools memleak (bcc v0.32.0), with exact stacks on code without frame pointers.
 *
 * --unwind=dwarf (default with HAVE_DWUNW): each recorded allocation's entry probe sends a
 * snapshot of the registers and of the stack window (capture.bpf.h); a drain thread copies the
 * records into a bounded queue (cap_pump.h), and the main thread unwinds them with libdwunw,
 * interns the stack (hash of its pcs and stop reason), symbolizes each new stack once,
 * remembers event id -> stack until the allocation is gone, and prints the reports. Only the
 * main thread touches the unwinder, the stack store and the event table.
 * --unwind=fp: bpf_get_stackid() at the return probe, as upstream.
 * --unwind=kernel (x86_64, arm64): the entry probe walks the stack in BPF (kwalk.bpf.h) from
 * tables loaded here; a walk that stops short carries the dwarf-mode snapshot along.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#ifdef HAVE_DWUNW
#include "dwunw.h"
#endif
#include "runtime/cap_pump.h"
#include "runtime/py_merge.h"
#include "runtime/capture_user.h"
#include "runtime/frames.h"
#include "runtime/frame_lines.h"
#include "runtime/mappings.h"
#include "memleak_allocs.h"
#include "memleak_attach.h"
#include "memleak_mem.h"
#include "memleak_opts.h"
#include "memleak_records.h"
#include "memleak_report.h"
#include "memleak_state.h"
#include "memleak_target.h"
#include "memleak.skel.h"
#include "runtime/module_warn.h"
#include "runtime/preflight.h"
#include "runtime/stack_store.h"
#include "runtime/syms.h"
#include "runtime/tool_opts.h"
#include "runtime/tool_signals.h"
#include "runtime/tool_util.h"
#ifdef HAVE_KWALK
#include "kwalk/kwalk_preload.h"
#include "kwalk/kwalk_track_user.h"
#include "kwalk/kwalk_user.h"
#endif

/* ---- Setup ------------------------------------------------------------------------------------ */

/*
 * Ring buffer for an expected rate: 100 ms of records of ~1.6 KiB (a snapshot of a stack a dozen
 * frames deep; measured 1.5 KiB average on leaky), rounded up to a power of 2 by
 * dwunw_cap_size_maps. Its pages count twice in RSS (the kernel maps the data area twice).
 */
static size_t ml_ring_bytes(uint64_t rate)
{
	uint64_t b = rate * 160;

	if (b < (1u << 20))
		b = 1u << 20;
	if (b > (1ull << 30))
		b = 1ull << 30;
	return (size_t)b;
}


#ifdef HAVE_DWUNW
/*
 * Every stack runs through the allocator's object: build its unwind table and read its symbols
 * (glibc's debug file included) before the probes fire. Done on the first record instead, that
 * takes 0.1-2 s on a loaded machine, while records pile up faster than the buffers hold them.
 */
static void warm_module(struct memleak_ctx *ml, const char *path)
{
	struct dwunw_table_info ti;
	struct dwunw_symbol sym;
	struct dwunw_module *m;
	uint64_t t0 = mono_ns();

	if (dwunw_module_open(&ml->fr.dctx, path, &m))
		return;
	dwunw_table_info(&ml->fr.dctx, m, &ti);
	dwunw_symbolize(&ml->fr.dctx, m, 0, &sym);
	dwunw_module_put(&ml->fr.dctx, m); /* stays in the module cache */
	if (ml->env.verbose)
		fprintf(stderr, "memleak: %s unwind table and symbols ready in %.0f ms\n", path,
			(double)(mono_ns() - t0) / 1e6);
}
#endif

/* memleak's state (memleak_state.h): here for the atexit handler; passed down from main */
static struct memleak_ctx ctx;

/* The command ended (atexit). */
static void stop_command(void)
{
	command_stop(&ctx.cmd);
}

int main(int argc, char **argv)
{
	struct memleak_ctx *ml = &ctx;
	size_t ring_bytes, perf_bytes;
	char *obj_path;
	int pidfd = -1, err, reports = 0, status = 0;
	const char *why;

	tool_set_name("memleak");
	ml_parse_args(&ml->env, argc, argv);
	tool_set_verbose(ml->env.verbose);
	stack_store_init(&ml->st, ml->env.max_stacks);
	frames_setup(&ml->fr, &ml->st);
	frame_lines_want(&ml->fr, ml->env.lines);
	cpu_budget_init(&ml->budget, ml->env.max_cpu);
#ifdef HAVE_DWUNW
	ml->fr.max = ml->env.max_frames;
#endif
	if (!ml->env.pid && !ml->env.command && !ml->env.prog_argv)
		tool_usage_error("kernel allocations are not traced by this memleak: use -p PID, -c COMMAND or -- PROG ARGS");
	ml->following = ml->env.command || ml->env.prog_argv;
	tool_signals_init();
	if ((why = tool_missing_privileges(true)))
		tool_fail(TOOL_EXIT_PRIVILEGE, "%s", why);
	if (ml->env.pid && (why = tool_pid_problem(ml->env.pid, &status)))
		tool_fail(status, "%s", why);
	if (ml->env.pid) {
		char fn[64];

		snprintf(fn, sizeof(fn), "/proc/%d/maps", ml->env.pid);
		if (access(fn, R_OK))
			tool_fail(TOOL_EXIT_NO_PROCESS, "pid %d: no such process", ml->env.pid);
	}
	obj_path = ml_resolve_obj(ml, ml->env.pid);
	libbpf_set_print(tool_libbpf_print);
	/* a fixed threshold: glibc's moving one keeps freed big tables in the heap (RSS in steps) */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	ml_set_yield(ml_drain_yield, ml);

	const char *lacks = dwunw_kernel_lacks(!ml->env.perfbuf);
	if (lacks)
		die("%s", lacks);

	ml->skel = memleak_bpf__open();
	if (!ml->skel)
		die("cannot open the BPF object: %s", strerror(errno));
	ml->skel->rodata->unwind_mode = (uint32_t)ml->env.unwind;
	ml->skel->rodata->min_size = ml->env.min_size;
	ml->skel->rodata->max_size = ml->env.max_size;
	ml->skel->rodata->sample_rate = ml->env.sample_rate;
	ml->skel->rodata->trace_all = ml->env.trace;
	ml->skel->rodata->record_nested = ml->env.nested;
	ml->skel->rodata->keep_combined = ml->env.combined && ml->env.unwind == ML_UNWIND_FP;
	ml->skel->rodata->dwarf_fp_ids = ml->env.fp_ids;
	ml->skel->rodata->count_allocated = ml->env.allocated;
	ml->skel->rodata->cap_use_perfbuf = ml->env.perfbuf;
	ml->skel->rodata->cap_stack_bytes = ml->env.stack_size;
	ml->skel->rodata->follow_tree = ml->following;
	ml->skel->rodata->frz_enabled = ml->env.freeze;
	/* dwarf mode: mapping changes in order with the records (DWUNW_MAPEV=0: off, to compare);
	 * kernel mode too: a tree's child is often gone before its events are processed, and its
	 * walked pcs are named (its fallbacks unwound) through this view, not its /proc maps */
	if ((ml->env.unwind == ML_UNWIND_DWARF || ml->env.unwind == ML_UNWIND_KERNEL) &&
	    !(getenv("DWUNW_MAPEV") && !strcmp(getenv("DWUNW_MAPEV"), "0")))
		ml->fr.maps = mappings_new();
	ml->skel->rodata->mmap_ev_enabled = ml->fr.maps != NULL;
	/* a followed tree's forks and exits in order with the records: a child's view starts as its
	 * parent's, and goes (with its held files) after its last record */
	ml->skel->rodata->follow_records = ml->following && ml->fr.maps;
	ml->skel->rodata->cap_scratch_slots = dwunw_cap_scratch_slots(ml->env.perfbuf);
	ring_bytes = ml->env.buffer_size && !ml->env.perfbuf ? ml->env.buffer_size : ml_ring_bytes(ml->env.expected_rate);
	ml->skel->rodata->cap_wakeup_bytes = ring_bytes / 8;
	perf_bytes = ml->env.buffer_size && ml->env.perfbuf ? ml->env.buffer_size : 8u << 20;
	if (ml->env.unwind == ML_UNWIND_FP && !ml->env.trace)
		ring_bytes = 1u << 16; /* no snapshots */
	err = dwunw_cap_size_maps(ml->skel->obj, ml->env.perfbuf, ring_bytes);
	if (!err)
		err = freeze_size_maps(ml->skel->obj, ml->env.freeze ? 0 : 1);
	if (!err && !(ml->env.combined && ml->env.unwind == ML_UNWIND_FP))
		err = bpf_map__set_max_entries(ml->skel->maps.combined_allocs, 1);
#ifdef HAVE_KWALK
	struct kw_opts kwo = { .budget = ml->env.table_budget, .cache_bytes = ml->env.cache_bytes };

	if (!err && ml->env.unwind == ML_UNWIND_KERNEL)
		err = kw_size_maps(ml->skel->obj, &kwo);
	ml->skel->rodata->kw_track_enabled = ml->env.unwind == ML_UNWIND_KERNEL;
	/* new processes' mappings entered by the BPF side at exec, fork and mmap: a child of the
	 * tree walks from its first allocation, on tables already loaded (by file) */
	ml->skel->rodata->kw_pm_enabled = ml->skel->rodata->kw_track_enabled;
	if (ml->skel->rodata->kw_pm_enabled)
		kw_track_prepare(&ml->kwt, ml->skel->obj);
#endif
	if (err)
		die("cannot size the maps: %s", strerror(-err));

	if (ml->following) {
		ml_start_command(ml);
		atexit(stop_command);
		ml->target_pid = ml->cmd.pid;
	} else {
		ml->target_pid = ml->env.pid;
		ml->skel->rodata->target_tgid = (uint32_t)ml->target_pid;
	}

	ml_attach_choose(ml);
	err = memleak_bpf__load(ml->skel);
	if (err)
		die("cannot load the BPF programs: %s (run with -v for the verifier log)", strerror(-err));
#ifdef HAVE_KWALK
	if (ml->env.unwind == ML_UNWIND_KERNEL) {
		ml->kwt.l = kw_loader_new(ml->skel->obj, &kwo);
		ml->kwt.fr = &ml->fr;
		if (!ml->kwt.l)
			die("cannot set up the in-kernel walker's tables: %s", strerror(errno));
		if (ml->following) {
			kw_preload_command(ml->kwt.l, ml->env.prog_argv ? ml->env.prog_argv[0] : ml->cmd.what);
			/* a -c command runs through sh first (its allocations before the exec) */
			if (!ml->env.prog_argv)
				kw_preload_command(ml->kwt.l, "/bin/sh");
		}
		else
			kw_track_reload(&ml->kwt, (uint32_t)ml->target_pid, true);
		err = kw_track_attach(&ml->kwt, ml->skel->obj);
		if (err) /* the walker's fallback still reloads a process whose pcs it does not know */
			fprintf(stderr, "memleak: no mmap tracing (%s): new mappings load at their first "
				"allocation\n", strerror(-err));
	}
#endif
#ifdef HAVE_DWUNW
	if (ml->env.freeze) {
		err = freeze_start(&ml->fz, ml->skel->obj);
		if (err)
			die("--unwind=freeze: cannot start its watchdog: %s", strerror(-err));
		ml->fr.fz = &ml->fz;
	}
	err = frames_init(&ml->fr, 64, ml->env.cache_bytes, 0, NULL);
	if (err)
		die("libdwunw: %s", dwunw_strerror(err));
	if (ml->env.unwind == ML_UNWIND_DWARF)
		warm_module(ml, obj_path);
#endif
	py_merge_init(&ml->py, &ml->fr, bpf_map__fd(ml->skel->maps.py_procs),
		      bpf_map__fd(ml->skel->maps.py_cost), ml->env.verbose);
	if (ml->target_pid > 0 && !ml->following && !ml->cmd.pid)
		py_merge_add(&ml->py, (uint32_t)ml->target_pid);
	/*
	 * uprobes are per file: following a tree, every process is probed and the BPF side filters.
	 * Not on mips: its kernels keep the address a probed task resumes at in the probe itself
	 * (arch_uprobe.resume_epc, arch/mips/kernel/uprobes.c), so two processes hitting one probe
	 * at once can resume at each other's address (memleak crashed so at its own malloc in
	 * Debian's mipsel 6.1 kernel). There only the command's process is probed (its threads share
	 * its addresses), not its children and not memleak.
	 */
#ifdef __mips__
	if (ml->following)
		fprintf(stderr, "memleak: mips: only the command's process is traced, not its children "
			"(the kernel's uprobes cannot serve two processes at once)\n");
	ml_attach_all(ml, obj_path, ml->target_pid);
#else
	ml_attach_all(ml, obj_path, ml->following ? -1 : ml->target_pid);
#endif
	if (ml->following)
		ml_attach_follow(ml);

	/* the queue: half the ring buffer again (50 ms at the expected rate), or a CPU's perf buffer */
	ml->pump = cap_pump_new(ml->env.perfbuf ? perf_bytes : ring_bytes / 2);
	if (!ml->pump)
		die("out of memory");
	ml->reader = dwunw_cap_reader_new(ml->skel->obj, ml->env.perfbuf, perf_bytes, cap_pump_record, ml->pump);
	if (!ml->reader)
		die("cannot open the %s buffer: %s", ml->env.perfbuf ? "perf" : "ring", strerror(errno));
	/* -t records are ordered with the allocations' records across CPUs (perf buffer) */
	dwunw_cap_reader_order_by(ml->reader, ML_REC_TRACE, offsetof(struct ml_trace_rec, ts));
	err = cap_pump_start(ml->pump, ml->reader);
	if (err)
		die("cannot start the drain thread: %s", strerror(-err));

#ifndef HAVE_DWUNW
	ml->fr.syms = syms_proc_new(ml->target_pid);
#endif
	ml->fpc.n = 1u << 15;
	ml->fpc.map = xcalloc(ml->fpc.n, sizeof(*ml->fpc.map));

	pidfd = (int)syscall(SYS_pidfd_open, ml->target_pid, 0);
	fprintf(ml->env.json || ml->env.folded ? stderr : stdout, "Attaching to pid %d, Ctrl+C to quit.\n",
		ml->target_pid);
	fflush(stdout);
	if (ml->following && (err = command_go(&ml->cmd))) {
		/* it could not exec: one line said why */
		ml_detach_all(ml);
		exit(err);
	}
	ml->skel->bss->frz_armed = ml->env.freeze; /* the command has exec'd (runtime/freeze.h) */

	uint64_t interval_ns = (uint64_t)ml->env.interval * 1000000000ull;
	uint64_t last_check = 0, last_maps = 0, next_report_ns;
	bool gone = false;

	next_report_ns = mono_ns() + interval_ns;
	while (!tool_stop_requested()) {
		uint64_t now = mono_ns();

		if (now >= next_report_ns) {
			ml_keep_maps(ml);
			ml_report(ml);
			reports++;
			if (!tool_flush_stdout())
				break;
			if (ml->env.count > 0 && reports >= ml->env.count)
				break;
			next_report_ns += interval_ns;
			if (next_report_ns < mono_ns())
				next_report_ns = mono_ns() + interval_ns;
			continue;
		}
		/* the drain thread fills the queue; here records are unwound, a batch at a time */
		int timeout = (int)((next_report_ns - now) / 1000000ull) + 1;
		if (timeout > 10)
			timeout = 10;
		if (cap_pump_wait(ml->pump, timeout))
			ml_process_some(ml, 2048);
		now = mono_ns();
		if (now - last_check >= 50000000ull) {
			last_check = now;
			if (tool_stdout_closed())
				break;
			if (ml_target_gone(ml, pidfd)) {
				gone = true;
				break;
			}
			ml_static_target_check(ml, obj_path);
		}
		if (now - last_maps >= 1000000000ull) {
			last_maps = now;
			ml_keep_maps(ml);
		}
	}
	/* a last report, unless nobody reads it any more */
	if ((gone || tool_stop_requested()) && !tool_stdout_closed()) {
		ml_report(ml);
		tool_flush_stdout();
		if (gone)
			fprintf(stderr, "memleak: target pid %d exited\n", ml->target_pid);
	}

	if (ml->env.verbose) {
		ml_mem_text(stderr, ml->skel->obj, ml->report_outstanding);
		fprintf(stderr, "memleak: record queue %.1f MiB, at most %" PRIu64 " records waiting, %" PRIu64 " dropped\n",
			cap_pump_queue_bytes(ml->pump) / 1048576.0, cap_pump_queue_peak(ml->pump),
			cap_pump_dropped(ml->pump));
	}
	cap_pump_free(ml->pump); /* before the links' helper process is forked */
	ml->pump = NULL;
	ml_detach_all(ml);
	dwunw_cap_reader_free(ml->reader);
#ifdef HAVE_KWALK
	if (ml->kwt.l) {
		kw_track_detach(&ml->kwt);
		kw_loader_free(ml->kwt.l);
	}
#endif
	py_merge_shutdown(&ml->py); /* reads its maps: before they go */
	memleak_bpf__destroy(ml->skel);
	command_stop(&ml->cmd);
	frames_shutdown(&ml->fr);
	mappings_free(ml->fr.maps);
	free(ml->exited);
	module_warn_flush();
	if (pidfd >= 0)
		close(pidfd);
	free(obj_path);
	return 0;
}

