/* SPDX-License-Identifier: GPL-2.0-only */
/* Debug files from debuginfod servers (DEBUGINFOD_URLS), fetched on a worker thread so that no
 * capture or symbol look-up waits on the network; libdebuginfod is loaded with dlopen. */
#ifndef DWUNW_DEBUGINFOD_H
#define DWUNW_DEBUGINFOD_H

#include <stddef.h>
#include "elf_file.h"

struct dwunw_ctx_impl;
struct dwunw_module;

/* Start the fetcher of a context made with DWUNW_CFG_DEBUGINFOD (dwunw_init); stop it. */
void dw_fetcher_start(struct dwunw_ctx_impl *c);
void dw_fetcher_stop(struct dwunw_ctx_impl *c);

/* A module just loaded: when it lacks .symtab, ask for its debug file (no I/O here). */
void dw_fetcher_module_loaded(struct dwunw_ctx_impl *c, struct dwunw_module *m);

/* The cache path of e's debug file when the fetcher has it; 0 then, -1 when not (yet). */
int dw_fetcher_path(struct dwunw_ctx_impl *c, const struct dw_elf *e, char *buf, size_t len);

#endif
