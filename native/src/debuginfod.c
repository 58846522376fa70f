// SPDX-License-Identifier: GPL-2.0-only
/*
 * Debug files from debuginfod: see debuginfod.h. Modules lacking .symtab are queued when they
 * load (fetch_queue.c, below module.c and symbols.c); one worker thread looks for a local debug file first, then asks libdebuginfod (its cache,
 * then DEBUGINFOD_URLS, with its timeouts). A symbol index built before the file came is rebuilt
 * with it and swapped in (symbols.c). libdebuginfod is loaded with dlopen: programs that link
 * libdwunw.a need neither it nor its dependencies (curl) unless they turn this on.
 */
#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "debuginfo.h"
#include "debuginfod.h"
#include "fetch_queue.h"
#include "internal.h"
#include "module.h"
#include "symbols.h"

static int stopping(struct dw_fetcher *f)
{
	pthread_mutex_lock(&f->lock);
	int s = f->stop;
	pthread_mutex_unlock(&f->lock);
	return s;
}

/* libdebuginfod calls this while a transfer runs: nonzero aborts it (the context shuts down). */
static int progress(debuginfod_client *cl, long a, long b)
{
	(void)a, (void)b;
	/* the library's own function: the same for every context */
	static void *(*_Atomic user_data)(debuginfod_client *);
	if (!user_data)
		user_data = (void *(*)(debuginfod_client *))dlsym(RTLD_DEFAULT, "debuginfod_get_user_data");
	struct dw_fetcher *f = user_data ? user_data(cl) : NULL;
	return f && stopping(f);
}

static void do_one(struct dwunw_ctx_impl *c, struct dw_fetcher *f, struct fetch *q)
{
	struct dwunw_module *m = q->m; /* the module.c object the queue keeps opaque */
	int state = F_FAILED, err = 0;
	char *path = NULL;

	/* A local debug file first: nothing to fetch then. */
	if (dw_module_get(m, q->gen) == DWUNW_OK) {
		struct dw_elf d;
		const char *mp = m->path && strchr(m->path, '/') ? m->path : NULL;
		int local = !(c->cfg.flags & DWUNW_CFG_NO_DEBUG_FILES) &&
			    dw_debug_file_open(&m->elf, mp, c->sysroot, c->debug_dirs, &d, NULL, 0, NULL, 0) == DWUNW_OK;
		if (local)
			dw_elf_close(&d);
		dw_module_put(m);
		if (local) {
			state = F_LOCAL;
			goto done;
		}
	}
	/* No module reference while the network is asked: the slot stays free to evict. */
	int fd = f->find_debuginfo(f->client, q->build_id, (int)q->build_id_len, &path);
	if (fd >= 0) {
		close(fd);
		state = F_FETCHED;
	} else {
		err = -fd;
	}
done:
	pthread_mutex_lock(&f->lock);
	q->state = state;
	q->err = err;
	if (path)
		snprintf(q->file, sizeof(q->file), "%s", path);
	pthread_mutex_unlock(&f->lock);
	free(path);
	/* An index built before the file came: rebuilt with it. */
	if (state == F_FETCHED && dw_module_get(m, q->gen) == DWUNW_OK) {
		dw_symtab_upgrade(c, m);
		dw_module_grew(m); /* the debug file's sections count toward the byte bound */
		dw_module_put(m);
	}
}

static void *worker(void *arg)
{
	struct dwunw_ctx_impl *c = arg;
	struct dw_fetcher *f = c->fetcher;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->stop && !f->todo)
			pthread_cond_wait(&f->work, &f->lock);
		if (f->stop)
			break;
		struct fetch *q = f->todo;
		f->todo = q->next;
		f->busy = 1;
		pthread_mutex_unlock(&f->lock);
		do_one(c, f, q);
		pthread_mutex_lock(&f->lock);
		f->busy = 0;
		if (!f->todo)
			pthread_cond_broadcast(&f->idle);
	}
	f->busy = 0;
	pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Load libdebuginfod and make a client; DWUNW_ERR_UNSUPPORTED when it cannot be. */
static int load_lib(struct dw_fetcher *f)
{
	f->so = dlopen(DEBUGINFOD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!f->so)
		return DWUNW_ERR_UNSUPPORTED;
	*(void **)&f->begin = dlsym(f->so, "debuginfod_begin");
	*(void **)&f->end = dlsym(f->so, "debuginfod_end");
	*(void **)&f->find_debuginfo = dlsym(f->so, "debuginfod_find_debuginfo");
	*(void **)&f->set_progressfn = dlsym(f->so, "debuginfod_set_progressfn");
	*(void **)&f->set_user_data = dlsym(f->so, "debuginfod_set_user_data");
	if (!f->begin || !f->end || !f->find_debuginfo || !(f->client = f->begin()))
		return DWUNW_ERR_UNSUPPORTED;
	if (f->set_user_data && f->set_progressfn) {
		f->set_user_data(f->client, f);
		f->set_progressfn(f->client, progress);
	}
	return DWUNW_OK;
}

void dw_fetcher_start(struct dwunw_ctx_impl *c)
{
	struct dw_fetcher *f = calloc(1, sizeof(*f));

	if (!f)
		return;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, NULL);
	pthread_cond_init(&f->idle, NULL);
	f->tail = &f->head;
	c->fetcher = f;
	/* No server named: nothing would ever be fetched; the library is not even loaded. */
	const char *urls = getenv(DEBUGINFOD_URLS_ENV_VAR);
	if (!urls || !*urls) {
		f->unavailable = DWUNW_ERR_NOT_FOUND;
		return;
	}
	f->unavailable = load_lib(f);
	if (!f->unavailable && pthread_create(&f->thread, NULL, worker, c) == 0)
		f->have_thread = 1;
	else if (!f->unavailable)
		f->unavailable = DWUNW_ERR_NOMEM;
}

void dw_fetcher_stop(struct dwunw_ctx_impl *c)
{
	struct dw_fetcher *f = c->fetcher;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = 1;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	if (f->have_thread)
		pthread_join(f->thread, NULL);
	if (f->client)
		f->end(f->client);
	/* The library stays loaded: curl's global state does not like being unloaded. */
	for (struct fetch *q = f->head, *n; q; q = n) {
		n = q->next;
		free(q);
	}
	pthread_cond_destroy(&f->work);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->lock);
	free(f);
	c->fetcher = NULL;
}

/* ---- public API ------------------------------------------------------------------------------ */

DWUNW_API int dwunw_debuginfod_wait(struct dwunw_ctx *ctx, uint32_t timeout_ms)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_fetcher *f;
	struct timespec until;
	int pending = 0;

	if (!c)
		return DWUNW_ERR_INVALID_ARG;
	f = c->fetcher;
	if (!f)
		return DWUNW_OK;
	if (f->unavailable == DWUNW_ERR_UNSUPPORTED)
		return DWUNW_ERR_UNSUPPORTED;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->lock);
	while ((f->todo || f->busy) && !f->stop)
		if (pthread_cond_timedwait(&f->idle, &f->lock, &until) == ETIMEDOUT)
			break;
	for (struct fetch *q = f->head; q; q = q->next)
		pending += q->state == F_PENDING;
	pthread_mutex_unlock(&f->lock);
	return pending;
}

DWUNW_API int dwunw_debuginfod_result(struct dwunw_ctx *ctx, uint32_t i, struct dwunw_debuginfod_result *out)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_fetcher *f;
	struct fetch *q;

	if (!c || !out)
		return DWUNW_ERR_INVALID_ARG;
	memset(out, 0, sizeof(*out));
	f = c->fetcher;
	if (!f)
		return DWUNW_ERR_NOT_FOUND;
	pthread_mutex_lock(&f->lock);
	for (q = f->head; q && i; q = q->next, i--)
		;
	if (q) {
		static const int32_t pub[] = {
			[F_PENDING] = DWUNW_DEBUGINFOD_PENDING, [F_LOCAL] = DWUNW_DEBUGINFOD_LOCAL,
			[F_FETCHED] = DWUNW_DEBUGINFOD_FETCHED, [F_FAILED] = DWUNW_DEBUGINFOD_FAILED,
		};
		out->state = pub[q->state];
		out->err = q->err;
		for (uint32_t k = 0; k < q->build_id_len; k++)
			snprintf(out->build_id + 2 * k, 3, "%02x", q->build_id[k]);
		snprintf(out->module, sizeof(out->module), "%.*s", (int)sizeof(out->module) - 1, q->module);
		snprintf(out->file, sizeof(out->file), "%.*s", (int)sizeof(out->file) - 1, q->file);
		if (q->state == F_FAILED)
			snprintf(out->why, sizeof(out->why), "%s",
				 q->err == ENOENT ? "not on the server" : strerror(q->err));
	}
	pthread_mutex_unlock(&f->lock);
	return q ? DWUNW_OK : DWUNW_ERR_NOT_FOUND;
}
