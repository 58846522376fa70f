/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Multi-uprobe links (Linux 6.6+, BPF_TRACE_UPROBE_MULTI): one link attaches a program at many
 * offsets of one file, each with its own BPF cookie (bpf_get_attach_cookie), and one close
 * detaches them all with a single wait for the probes in flight, where per-probe links pay that
 * wait each. libbpf 1.1 (Debian 12) has no API for them (no bpf_program__attach_uprobe_multi,
 * no "uprobe.multi" section, and bpf_link_create does not pass their attributes), so the link is
 * made with the bpf() system call directly, with an attribute layout of our own that matches
 * the kernel's union bpf_attr.link_create.
 *
 * A program for such a link must be loaded with expected_attach_type UM_ATTACH_TYPE
 * (bpf_program__set_expected_attach_type before load), and then cannot be attached through a
 * perf event: decide with um_supported() before loading.
 */
#ifndef DWUNW_UPROBE_MULTI_H
#define DWUNW_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define UM_ATTACH_TYPE 48      /* enum bpf_attach_type BPF_TRACE_UPROBE_MULTI */

/*
 * Whether this kernel makes multi-uprobe links that filter by process (probed once, cached):
 * a link on "/" is refused for not being a regular file (EBADF) rather than for an unknown
 * attach type, and a thread id that is not a process id is refused (ESRCH; the first kernels
 * with these links filtered by thread, which would miss the other threads' calls).
 */
bool um_supported(void);

/*
 * Attach prog_fd at offsets[0..cnt) of the file `path`, with cookies[i] for offsets[i], as
 * return probes when `ret`, in process pid only (-1: every process). The link's file
 * descriptor, or a negative errno.
 */
int um_attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
	      uint32_t cnt, bool ret, pid_t pid);

#endif /* DWUNW_UPROBE_MULTI_H */
