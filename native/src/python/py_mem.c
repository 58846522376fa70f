// SPDX-License-Identifier: GPL-2.0-only
/* py_mem.h */
#include <stdatomic.h>
#include "py_mem.h"
#include "../internal.h"
#include "../module.h"

int dw_py_mem_open(struct dw_py_mem *m, struct dwunw_ctx_impl *c, int32_t pid)
{
	m->c = c;
	m->proc = NULL;
	int err = dw_proc_get(c, pid, &m->proc);
	if (err)
		return err;
	if (!m->proc->offline)
		dw_remote_begin(&m->remote, pid, NULL, NULL);
	return DWUNW_OK;
}

void dw_py_mem_close(struct dw_py_mem *m)
{
	if (!m->proc)
		return;
	if (!m->proc->offline)
		dw_remote_end(&m->remote);
	dw_proc_put(m->c, m->proc);
	m->proc = NULL;
}

/* Data of a read-only file mapping, from the file (a core leaves it out). */
static int read_file_data(struct dw_py_mem *m, uint64_t addr, void *buf, size_t len)
{
	struct dw_map *map = (struct dw_map *)dw_proc_find(m->proc, addr);
	struct dwunw_module *mod;

	if (!map || map->kind != DW_MAP_FILE || (map->prot & DW_PROT_W) || addr + len > map->end)
		return DWUNW_ERR_IO;
	if (dw_map_module(m->c, m->proc, map, NULL, NULL, &mod))
		return DWUNW_ERR_IO;
	int err = dw_elf_read_vaddr(&mod->elf, addr - atomic_load_explicit(&map->bias, memory_order_relaxed), buf, len);
	dw_module_put(mod);
	return err ? DWUNW_ERR_IO : DWUNW_OK;
}

int dw_py_read(struct dw_py_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (!addr)
		return DWUNW_ERR_INVALID_ARG;
	if (!m->proc->offline)
		return dw_remote_read(&m->remote, addr, buf, len);
	if (dw_proc_read_mem(m->proc, addr, buf, len) == DWUNW_OK)
		return DWUNW_OK;
	return read_file_data(m, addr, buf, len);
}
