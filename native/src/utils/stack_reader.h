/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading a live process's memory: process_vm_readv first, /proc/PID/mem when that is not
 * possible. The public dwunw_stack_reader_* calls and dwunw_capture's reads beyond the snapshot
 * share this code. */
#ifndef DWUNW_STACK_READER_H
#define DWUNW_STACK_READER_H

#include <stddef.h>
#include <stdint.h>
#include "dwunw.h"

/* The reads of one capture (one event): /proc/PID/mem is opened on first need and closed by
 * dw_remote_end, never kept longer. */
struct dw_remote {
	int32_t pid;
	int mem_fd;                 /* -1 until needed */
	uint8_t vm_unusable;        /* process_vm_readv failed with ENOSYS/EPERM: use /proc/PID/mem */
	uint8_t mem_unusable;       /* /proc/PID/mem could not be opened */
	int last_err;               /* DWUNW_ERR_* of the last failure */
	int last_errno;
	uint64_t reads;             /* process_vm_readv calls */
	uint64_t fallback_reads;    /* /proc/PID/mem reads */
	void (*audit)(void *arg, const char *line);
	void *audit_arg;
};

void dw_remote_begin(struct dw_remote *r, int32_t pid, void (*audit)(void *, const char *), void *audit_arg);
/* All `len` bytes or an error: DWUNW_ERR_PERM (EPERM/EACCES), DWUNW_ERR_NO_PROCESS (ESRCH, or the
 * process is gone), DWUNW_ERR_INVALID_ARG (EFAULT/EIO: address not mapped), DWUNW_ERR_UNSUPPORTED
 * (ENOSYS on both paths), DWUNW_ERR_IO otherwise. */
int dw_remote_read(struct dw_remote *r, uint64_t addr, void *buf, size_t len);
/* Several ranges in one process_vm_readv (batched); returns as dw_remote_read. */
struct dw_remote_iov {
	uint64_t addr;
	void *buf;
	size_t len;
};
int dw_remote_readv(struct dw_remote *r, const struct dw_remote_iov *iov, unsigned n);
void dw_remote_end(struct dw_remote *r);

#endif
