/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Python frames in the tools' stacks: user space's half of python.bpf.h. Describes each python
 * process to the BPF program (py_procs, from libdwunw's dwunw_py_find / dwunw_py_offsets), keeps
 * each thread's struct py_rec until its stack record arrives, then splices the chain into the
 * interned native stack: each native _PyEval_EvalFrameDefault frame preceded (innermost first) by
 * exactly the Python frames it ran, up to its entry frame — the rule of lib/python.ts placePython.
 * When the counts differ nothing is placed (counted); a chain cut short ends in a marked frame.
 */
#ifndef DWUNW_PY_MERGE_H
#define DWUNW_PY_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frames;
struct proc_slot;
struct tid_slot;
struct dwunw_py_raw;
struct dwunw_py_frame;
struct uframe;

struct py_merge_stats {
	uint64_t procs;        /* python processes described to the BPF program */
	uint64_t records;      /* Python chains received */
	uint64_t merged;       /* stacks with their Python frames placed */
	uint64_t unplaced;     /* chains whose entry frames did not match the native eval frames */
	uint64_t no_thread;    /* samples of a python process whose thread had no thread state */
	uint64_t cut;          /* chains cut: unreadable frame or code object, or PY_MAX_FRAMES */
	uint64_t orphan;       /* chains whose stack record never came (replaced by a newer one) */
	uint64_t missing;      /* samples of a described process that came without a chain (not sent) */
	uint64_t frames;       /* Python frames placed */
	uint64_t describe_ns;  /* time spent naming chains (code objects read from the process) */
};
/* One per tool (in its context); fields are py_merge.c's. */
struct py_merge {
	struct frames *fr;        /* the unwinder (dwunw_py_*) and the stack store */
	int procs_fd, cost_fd;    /* py_procs, py_cost of python.bpf.h */
	bool verbose;
	struct py_merge_stats stats;
	struct proc_slot *procs;
	struct tid_slot *tids;
	/* one chain at a time: its frames described, then the merged stack's frames */
	struct dwunw_py_raw *raw;
	struct dwunw_py_frame *pyf;
	struct uframe *mf;
	uint64_t *mpcs, *mids;
	size_t mcap;
};

/* procs_fd, cost_fd: the py_procs and py_cost maps of python.bpf.h; verbose: one line per
 * process found or refused, and the summary at shutdown. */
void py_merge_init(struct py_merge *pm, struct frames *fr, int procs_fd, int cost_fd, bool verbose);
/* pid runs CPython: describe it to the BPF program (looked at once per pid until forgotten). */
void py_merge_add(struct py_merge *pm, uint32_t pid);
/* pid exec'd or exited. */
void py_merge_forget(struct py_merge *pm, uint32_t pid);
/* A CAP_KIND_PY record: kept for its thread's next stack (true when data is one). */
bool py_merge_record(struct py_merge *pm, const void *data, size_t size);
/* The stack idx (pid/tid's native stack just interned) with the thread's pending Python chain
 * spliced in: a new interned stack, or idx itself when there is none or it cannot be placed.
 * first_exact: the stack's first pc is the event's own (not a return address). */
int64_t py_merge_stack(struct py_merge *pm, int64_t idx, uint32_t pid, uint32_t tid, uint64_t space,
		       bool first_exact);
/* The summary (-v), then everything freed: before the maps are closed. */
void py_merge_shutdown(struct py_merge *pm);

#endif /* DWUNW_PY_MERGE_H */
