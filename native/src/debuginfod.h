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

/* The queue the worker takes its modules from, and the calls of module.c and symbols.c: fetch_queue.h */

#endif
