/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tool's set of uprobes on one file (an allocator's functions, say): attached either with one
 * link per probe, or with two multi-uprobe links (uprobe_multi.h: entries, returns) where the
 * kernel has them. Both ways probe the same places (uprobe_attach.h) and treat a missing
 * optional function the same way: left out, said with -v.
 */
#ifndef DWUNW_UPROBE_SET_H
#define DWUNW_UPROBE_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_program;
struct bpf_link;

/* One probed function. */
struct uprobe_spec {
	const char *fn;             /* symbol, without the set's prefix */
	struct bpf_program *entry;  /* its entry program (per-probe links) */
	bool ret;                   /* also a return probe */
	bool optional;              /* a file without it is fine */
	uint64_t cookie;            /* the multi links' cookie for it */
};

struct uprobe_set {
	const struct uprobe_spec *probes;
	size_t n;
	const char *prefix;         /* symbol prefix ("" or e.g. "je_") */
	bool at_entry;              /* probe at the first byte, not the first emulated instruction */
	bool verbose;               /* say where each function is probed, and what is missing */
	struct bpf_program *ret_prog;    /* per-probe links: the return program of every function */
	struct bpf_program *multi_entry; /* multi links: the entry and return programs */
	struct bpf_program *multi_ret;
	bool multi;                 /* set by uprobe_set_choose */
	/* the multi links made (released with the tool's links: tool_links_destroy_fds) */
	int fds[2];
	size_t nfds;
};

/*
 * Before the object is loaded: multi links (unless `no_multi` or the kernel has none) or one
 * link per probe; only the chosen way's programs are loaded.
 */
void uprobe_set_choose(struct uprobe_set *s, bool no_multi);

/*
 * Attach every probe to `path` in process pid (-1: every process), per-probe links appended to
 * *links; dies naming what failed.
 */
void uprobe_set_attach(struct uprobe_set *s, const char *path, pid_t pid, struct bpf_link ***links,
		       size_t *nlinks);

#endif /* DWUNW_UPROBE_SET_H */
