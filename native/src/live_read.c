// SPDX-License-Identifier: GPL-2.0-only
/* Reads of a capture beyond its snapshot (live_read.h). */
#include <stdlib.h>
#include <string.h>
#include "live_read.h"

static int read_module_data(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	struct dw_map *m;
	struct dwunw_module *mod;
	int err;

	if (!w->proc)
		return DWUNW_ERR_IO;
	m = (struct dw_map *)dw_proc_find(w->proc, addr);
	/* Only data the process cannot have changed: read-only file mappings. */
	if (!m || m->kind != DW_MAP_FILE || (m->prot & DW_PROT_W) || addr + len > m->end)
		return DWUNW_ERR_IO;
	err = w->nowait ? dw_map_module_cached(w->c, m, &mod) : dw_map_module(w->c, w->proc, m, NULL, NULL, &mod);
	if (err)
		return err;
	if (w->nowait && mod->elf.sparse) {
		/* read from the file on demand: I/O. The step may take the failed read for an answer
		 * ("not a trampoline"): the whole capture then says WOULDBLOCK. */
		dw_module_put(mod);
		w->blocked = 1;
		return DWUNW_ERR_WOULDBLOCK;
	}
	err = dw_elf_read_vaddr(&mod->elf, addr - atomic_load_explicit(&m->bias, memory_order_relaxed), buf, len);
	dw_module_put(mod);
	return err ? DWUNW_ERR_IO : DWUNW_OK;
}

/*
 * The first read beyond the snapshot: every sample (dwunw_capture_sampled) read back in the same
 * system call as the span; any difference, or a sample no longer readable, marks the capture
 * stale. Returns DWUNW_OK with the span read, or the span's error.
 */
static int live_fill(struct walk *w, uint64_t lo, uint64_t len, int check)
{
	struct dw_remote_iov iov[1 + DW_SAMPLE_IOV];
	const struct dwunw_stack_sample *smp[DW_SAMPLE_IOV];
	unsigned n = 1, ns = 0;
	uint64_t used = 0;
	int err;

	w->live_len = 0; /* the buffer is rewritten: nothing cached until the read succeeds */
	iov[0] = (struct dw_remote_iov){ lo, w->live_buf, len };
	for (size_t i = 0; check && i < w->nsamples && ns < DW_SAMPLE_IOV; i++) {
		const struct dwunw_stack_sample *sm = &w->samples[i];

		if (!sm->data || !sm->len || sm->len > DW_SAMPLE_MAX - used)
			continue;
		/* inside the snapshot: nothing is read live there */
		if (sm->addr >= w->snap_lo && sm->addr - w->snap_lo < w->snap_len)
			continue;
		iov[n++] = (struct dw_remote_iov){ sm->addr, w->live_buf + DW_LIVE_SPAN + used, sm->len };
		smp[ns++] = sm;
		used += sm->len;
	}
	err = dw_remote_readv(&w->remote, iov, n);
	if (err && n > 1) {
		/* the span alone: a sample that cannot be read any more is memory gone since */
		err = dw_remote_read(&w->remote, lo, w->live_buf, len);
		if (!err)
			w->stale = 1;
	}
	if (err)
		return err;
	for (unsigned i = 0; i < ns && !w->stale; i++)
		if (memcmp(iov[i + 1].buf, smp[i]->data, smp[i]->len))
			w->stale = 1;
	if (check)
		w->checked = 1;
	w->live_lo = lo;
	w->live_len = len;
	return DWUNW_OK;
}

/*
 * Memory beyond the snapshot, read from the live process in batches: the rest of the stack's
 * mapping from the page of the first miss, up to DW_LIVE_SPAN, in one system call (a deep walk
 * past the window costs one read, not one per page or word). A miss outside the known mappings
 * (a main stack grown since the maps were read) tries the whole span, then one page. Once a
 * sample showed a change, nothing more is read: DWUNW_ERR_STALE.
 */
static int live_read(struct walk *w, uint64_t addr, void *buf, size_t len)
{
	uint64_t page = addr & ~(uint64_t)(DW_LIVE_PAGE - 1), span = DW_LIVE_SPAN;
	const struct dw_map *m;
	int err;

	if (w->stale)
		return DWUNW_ERR_STALE;
	if (w->live_len && addr >= w->live_lo && addr - w->live_lo <= w->live_len &&
	    len <= w->live_len - (addr - w->live_lo)) {
		memcpy(buf, w->live_buf + (addr - w->live_lo), len);
		return DWUNW_OK;
	}
	if (!w->live_buf)
		w->live_buf = atomic_exchange_explicit(&w->c->live_spare, NULL, memory_order_acquire);
	if (!w->live_buf && !(w->live_buf = malloc(DW_LIVE_SPAN + DW_SAMPLE_MAX)))
		return dw_remote_read(&w->remote, addr, buf, len);
	if (w->proc && (m = dw_proc_find(w->proc, addr)) && m->end > addr && m->end - page < span)
		span = m->end - page;
	if (len > span || addr - page > span - len) {
		/* across the mapping's end or a page edge: read it alone, once the samples are checked */
		if (!w->checked && live_fill(w, page, DW_LIVE_PAGE, 1) == DWUNW_OK && w->stale)
			return DWUNW_ERR_STALE;
		return dw_remote_read(&w->remote, addr, buf, len);
	}
	err = live_fill(w, page, span, !w->checked);
	if (err && span > DW_LIVE_PAGE)
		err = live_fill(w, page, DW_LIVE_PAGE, !w->checked);
	if (err) {
		w->live_len = 0;
		return dw_remote_read(&w->remote, addr, buf, len); /* its own error */
	}
	if (w->stale)
		return DWUNW_ERR_STALE;
	memcpy(buf, w->live_buf + (addr - page), len);
	return DWUNW_OK;
}

/* Code (read to recognise a signal trampoline where no CFI covers the pc, e.g. JIT code) is not
 * stack memory that may hold other frames since the event: read straight, without the mark. The
 * stack's own mapping is never code here, even when it is executable. */
static int code_at(const struct walk *w, uint64_t addr)
{
	const struct dw_map *m;

	if (!w->proc || !(m = dw_proc_find(w->proc, addr)) || !(m->prot & DW_PROT_X))
		return 0;
	return m != dw_proc_find(w->proc, w->snap_lo);
}

/* The capture's reader of the live process, set up on first use. DWUNW_REGS_NOWAIT: no file is
 * opened, so no /proc/PID/mem when process_vm_readv is refused (its error stops the walk). */
static void remote_start(struct walk *w)
{
	if (w->remote_on)
		return;
	dw_remote_begin(&w->remote, w->in->pid, w->c->cfg.audit, w->c->cfg.audit_arg);
	w->remote.mem_unusable = w->nowait;
	w->remote_on = 1;
}

int dw_walk_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct walk *w = arg;
	int err = DWUNW_ERR_IO;

	if (addr >= w->snap_lo && addr - w->snap_lo <= w->snap_len && len <= w->snap_len - (addr - w->snap_lo)) {
		memcpy(buf, w->snap + (addr - w->snap_lo), len);
		return DWUNW_OK;
	}
	if (w->proc && w->proc->nmem && dw_proc_read_mem(w->proc, addr, buf, len) == DWUNW_OK)
		return DWUNW_OK;
	if (w->in->pid > 0 && !(w->c->cfg.flags & DWUNW_CFG_NO_REMOTE_READS) &&
	    !(w->proc && w->proc->offline)) {
		remote_start(w);
		if (code_at(w, addr) && dw_remote_read(&w->remote, addr, buf, len) == DWUNW_OK)
			return DWUNW_OK;
		err = live_read(w, addr, buf, len);
		if (!err) {
			w->beyond = 1;
			return DWUNW_OK;
		}
		if (err == DWUNW_ERR_STALE)
			return err;
	}
	return read_module_data(w, addr, buf, len) == DWUNW_OK ? DWUNW_OK : err;
}

int dw_walk_image_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct walk *w = arg;

	if (w->in->pid <= 0)
		return DWUNW_ERR_IO;
	remote_start(w);
	return dw_remote_read(&w->remote, addr, buf, len);
}
