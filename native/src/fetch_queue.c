// SPDX-License-Identifier: GPL-2.0-only
/* The queue of debug files asked of debuginfod: see fetch_queue.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fetch_queue.h"

static int has_data(const struct dw_elf *e, enum dw_sec_id id)
{
	return e->sec[id].index && !e->sec[id].nobits;
}

void dw_fetcher_module_loaded(struct dw_fetcher *f, void *m, uint32_t gen, const struct dw_elf *e,
			      const char *path)
{
	struct fetch *q;

	if (!f || f->unavailable || !e->build_id_len || e->build_id_len > sizeof(q->build_id) ||
	    has_data(e, DW_SEC_SYMTAB))
		return;
	pthread_mutex_lock(&f->lock);
	/* One request per build id: a module loaded again finds the first one's answer. */
	for (q = f->head; q; q = q->next)
		if (q->build_id_len == e->build_id_len && !memcmp(q->build_id, e->build_id, q->build_id_len))
			break;
	if (!q && (q = calloc(1, sizeof(*q)))) {
		q->m = m;
		q->gen = gen;
		q->build_id_len = e->build_id_len;
		memcpy(q->build_id, e->build_id, q->build_id_len);
		snprintf(q->module, sizeof(q->module), "%s", path ? path : "");
		*f->tail = q;
		f->tail = &q->next;
		f->n++;
		if (!f->todo)
			f->todo = q;
		pthread_cond_signal(&f->work);
	}
	pthread_mutex_unlock(&f->lock);
}

int dw_fetcher_path(struct dw_fetcher *f, const struct dw_elf *e, char *buf, size_t len)
{
	int rc = -1;

	if (!f || !e->build_id_len)
		return -1;
	pthread_mutex_lock(&f->lock);
	for (struct fetch *q = f->head; q; q = q->next)
		if (q->state == F_FETCHED && q->build_id_len == e->build_id_len &&
		    !memcmp(q->build_id, e->build_id, q->build_id_len)) {
			snprintf(buf, len, "%s", q->file);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

