/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Tables loaded before any process maps their files: a file's, this process's [vdso], and a
 * command's before it starts (its executable, found on PATH, and the libraries `ldd` says it
 * needs), so the in-kernel walker has them from its first sample on.
 */
#ifndef DWUNW_KWALK_PRELOAD_H
#define DWUNW_KWALK_PRELOAD_H

struct kw_loader;

/* Load the table of an ELF file before any process maps it (a command's executable and the
 * libraries it needs), so its first samples find it: 0 or a negative errno / DWUNW_ERR_*. */
int kw_preload_file(struct kw_loader *l, const char *path);
/* This process's [vdso] (the kernel's image, the same in every process of its ABI): loaded and
 * in kw_files, so the BPF side enters it at exec with no load of the new process. */
int kw_preload_vdso(struct kw_loader *l);
/* The command's executable (found on PATH), what `ldd` says it loads, and [vdso]. */
void kw_preload_command(struct kw_loader *l, const char *cmd);

#endif
