/* SPDX-License-Identifier: GPL-2.0-only */
/* The queue of debug files asked of debuginfod: filled when a module loads (module.c), read when a
 * symbol index is built (symbols.c), worked by debuginfod.c's thread. It knows modules only by
 * their ELF file and an opaque pointer, so module.c and symbols.c do not depend on the worker. */
#ifndef DWUNW_FETCH_QUEUE_H
#define DWUNW_FETCH_QUEUE_H

#include <elfutils/debuginfod.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "elf_file.h"

enum { F_PENDING, F_LOCAL, F_FETCHED, F_FAILED };

struct fetch {
	struct fetch *next;
	void *m;                    /* the module (struct dwunw_module), opaque here */
	uint32_t gen;
	int state;                  /* F_* */
	int err;                    /* errno of a failed fetch */
	uint8_t build_id[64];
	uint32_t build_id_len;
	char module[PATH_MAX];
	char file[PATH_MAX];        /* the debug file (cache path) when F_FETCHED */
};

struct dw_fetcher {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct fetch *head, **tail, *todo;
	uint32_t n, busy;
	int stop;
	int unavailable;            /* DWUNW_ERR_UNSUPPORTED when libdebuginfod cannot be loaded */
	pthread_t thread;
	int have_thread;
	void *so;
	debuginfod_client *client;
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	void (*set_user_data)(debuginfod_client *, void *);
};

/* A module just loaded (m opaque, gen its load): when its file lacks .symtab, ask for its debug
 * file (no I/O here). f NULL: no fetcher. */
void dw_fetcher_module_loaded(struct dw_fetcher *f, void *m, uint32_t gen, const struct dw_elf *e,
			      const char *path);

/* The cache path of e's debug file when the fetcher has it; 0 then, -1 when not (yet). */
int dw_fetcher_path(struct dw_fetcher *f, const struct dw_elf *e, char *buf, size_t len);

#endif
