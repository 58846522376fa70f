// SPDX-License-Identifier: GPL-2.0-only
/*
 * The module cache's byte bound (config cache_bytes): the loaded modules' bytes are counted when
 * one is loaded or builds a table, symbol index or line table, and at dwunw_cache_trim; past the
 * bound the warm modules (refcnt 0) are freed, stale ones first, then the least recently used
 * (released longest ago: warm_seq). A module in use is never freed: a capture holds a reference
 * on every module its frames use, and a slot is emptied only by winning the CAS of its refcnt
 * from 0 to DW_REF_EVICTING, which a reader's lock-free get races against (module.c). The count
 * is a walk of the slots under the context lock: never on the unwinding path, whose only LRU
 * work stays dw_module_put's stamp when a module's last reference goes.
 */
#include <stdatomic.h>
#include "internal.h"
#include "module.h"

/* The warm module to free first, or NULL: stale before fresh, then the oldest release. An image
 * the caller registered cannot be loaded again and stays (as dwunw_cache_trim leaves it). */
static struct dwunw_module *victim(struct dwunw_ctx_impl *c, const uint64_t *bytes)
{
	struct dwunw_module *best = NULL;

	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];

		if (!m->loaded || m->is_image || !bytes[i] || atomic_load(&m->refcnt) != 0)
			continue;
		if (!best || (m->stale && !best->stale) ||
		    (m->stale == best->stale && atomic_load(&m->warm_seq) < atomic_load(&best->warm_seq)))
			best = m;
	}
	return best;
}

void dw_cache_bound_locked(struct dwunw_ctx_impl *c)
{
	uint64_t total = 0, *bytes = c->bound_scratch; /* nslots of them, ours under the lock */
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct dwunw_module *m = &c->slots[i];

		bytes[i] = m->loaded ? dw_module_bytes(m) : 0;
		total += bytes[i];
	}
	while (total > c->bytes_bound) {
		struct dwunw_module *m = victim(c, bytes);
		uint32_t zero = 0;

		if (!m)
			break; /* the rest is in use */
		if (!atomic_compare_exchange_strong(&m->refcnt, &zero, DW_REF_EVICTING)) {
			bytes[m->slot] = 0; /* taken meanwhile: in use, not counted as freeable */
			continue;
		}
		total -= bytes[m->slot];
		bytes[m->slot] = 0;
		dw_module_evict(m);
		atomic_fetch_add(&c->bytes_evictions, 1);
	}
}

void dw_module_grew(struct dwunw_module *m)
{
	struct dwunw_ctx_impl *c = m->ctx;

	pthread_mutex_lock(&c->lock);
	dw_cache_bound_locked(c);
	pthread_mutex_unlock(&c->lock);
}
