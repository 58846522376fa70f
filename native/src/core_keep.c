// SPDX-License-Identifier: GPL-2.0-only
/* The bytes of loaded core files, kept per context and pid (core_keep.h). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "core_keep.h"
#include "module.h"

struct core_keep {
	struct core_keep *next;
	struct dwunw_ctx_impl *c;
	int32_t pid;
	void *data;
	size_t size;
	int mapped;
	struct dwunw_module *vdso;    /* the vDSO image registered for it, held: never evicted */
};

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_keep *kept;

void dw_core_buf_free(void *data, size_t size, int mapped)
{
	if (!data)
		return;
	if (mapped)
		munmap(data, size);
	else
		free(data);
}

/* Drop what is kept for (c, pid), or for every pid of c when all is set. */
static void keep_drop(struct dwunw_ctx_impl *c, int32_t pid, int all)
{
	struct core_keep **pp, *dead = NULL;

	pthread_mutex_lock(&keep_lock);
	for (pp = &kept; *pp;) {
		struct core_keep *k = *pp;
		if (k->c == c && (all || k->pid == pid)) {
			*pp = k->next;
			k->next = dead;
			dead = k;
		} else {
			pp = &k->next;
		}
	}
	pthread_mutex_unlock(&keep_lock);
	while (dead) {
		struct core_keep *k = dead;
		dead = k->next;
		dw_core_buf_free(k->data, k->size, k->mapped);
		if (k->vdso)
			dw_module_put(k->vdso);
		free(k);
	}
}

int dw_core_keep(struct dwunw_ctx_impl *c, int32_t pid, void *data, size_t size, int mapped,
		 struct dwunw_module *vdso)
{
	struct core_keep *keep = calloc(1, sizeof(*keep));

	if (!keep)
		return DWUNW_ERR_NOMEM;
	keep_drop(c, pid, 0);
	*keep = (struct core_keep){ NULL, c, pid, data, size, mapped, vdso };
	pthread_mutex_lock(&keep_lock);
	keep->next = kept;
	kept = keep;
	pthread_mutex_unlock(&keep_lock);
	return DWUNW_OK;
}

/* Hook of dwunw_maps_forget (proc.c). */
void dw_core_forget(struct dwunw_ctx_impl *c, int32_t pid)
{
	keep_drop(c, pid, 0);
}

/* Hook of dwunw_shutdown (ctx.c), after the process maps are freed. */
void dw_core_forget_all(struct dwunw_ctx_impl *c)
{
	keep_drop(c, 0, 1);
}
