/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * How the C tools behave as Unix processes (README.md, "Signals"):
 *  - SIGINT, SIGTERM, SIGHUP: tool_stop_requested() turns true; the tool prints its final report,
 *    detaches and exits 0.
 *  - SIGPIPE is ignored; tool_stdout_closed() sees a closed pipe or socket on stdout (poll:
 *    POLLERR/POLLHUP) before anything is written to it, or an EPIPE write: the tool detaches
 *    and exits 0 without a report (`memleak ... | head -1`).
 *  - Started by dwunw (DWUNW_PARENT_PID in the environment): the tool dies with it
 *    (PR_SET_PDEATHSIG SIGTERM), and exits at once when its parent died before that was set.
 */
#ifndef DWUNW_TOOL_SIGNALS_H
#define DWUNW_TOOL_SIGNALS_H

#include <stdbool.h>
#include <stddef.h>

/* Install the handlers and the parent-death signal. */
void tool_signals_init(void);

/* A stop signal arrived (or the parent died). */
bool tool_stop_requested(void);

/* Which signal asked to stop (0: none). */
int tool_stop_signal(void);

/* stdout is a pipe or socket whose reader is gone, or a write to it failed with EPIPE. */
bool tool_stdout_closed(void);

/* fflush(stdout); false (and tool_stdout_closed() true from then on) on EPIPE. */
bool tool_flush_stdout(void);

struct bpf_link;

/*
 * Detach links without making the tool wait: detaching a uprobe waits for the kernel (~0.1 s per
 * probe here, serialized in the kernel even from several threads), so a tool with 20 probes
 * would take seconds to exit. A child process (stdio on /dev/null) takes over the links and
 * closes them; the tool's own copies close at once when it exits. The probes are gone when that
 * child is (a second or two later). Without fork, they are closed here, one after the other.
 */
void tool_links_destroy(struct bpf_link **links, size_t n);
/* The same, with link file descriptors made without libbpf (uprobe_multi.h) closed with them. */
void tool_links_destroy_fds(struct bpf_link **links, size_t n, int *fds, size_t nfds);

struct bpf_object;
/* Attach the programs named (their own SEC() attach points) and append their links to *links;
 * 0, or -ENOENT for a name not in obj, -errno of the first that fails, -ENOMEM. */
int tool_links_attach(struct bpf_object *obj, const char *const *names, size_t n,
		      struct bpf_link ***links, size_t *nlinks);

#endif /* DWUNW_TOOL_SIGNALS_H */
