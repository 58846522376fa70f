// SPDX-License-Identifier: GPL-2.0-only
/*
 * elfutils' libdwfl on a snapshot, as perf's libdw path does it but with the Dwfl kept (warm):
 * each module of the maps reported with dwfl_report_elf at its load bias, dwfl_attach_state with
 * our thread callbacks (registers from the snapshot, memory through the bench's reader), then
 * dwfl_getthread_frames per unwind. libdwfl reads the CFI from the module files itself. An
 * architecture its backends cannot unwind (mips) makes dwfl_attach_state fail: not applicable.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <elfutils/libdwfl.h>
#include "bench.h"

struct peer {
	struct bsnap *s;
	Dwfl *dwfl;
	struct bresult *r;          /* the unwind in progress */
};

/* No separate debug files: the peers use the CFI in the module files, as libdwunw is set to. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod;
	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	*debuginfo_file_name = NULL;
	return -1;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = NULL,
	.find_debuginfo = no_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct peer *p = arg;
	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = p;
	return p->s->pid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct peer *p = arg;
	(void)dwfl;
	if (tid != p->s->pid)
		return false;
	*thread_argp = p;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct peer *p = arg;
	(void)dwfl;
	if (p->s->addr_size == 4) {
		uint32_t v;
		if (bspace_read(&p->s->space, addr, &v, 4))
			return false;
		*result = v;
		return true;
	}
	return bspace_read(&p->s->space, addr, result, 8) == 0;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct peer *p = arg;
	const struct dwunw_regs *r = &p->s->regs;

	for (unsigned i = 0; i < DWUNW_MAX_REGS; i++)
		if ((r->valid >> i) & 1) {
			Dwarf_Word v = r->regs[i];
			/* registers the backend does not track are not an error */
			(void)dwfl_thread_state_registers(thread, (int)i, 1, &v);
		}
	dwfl_thread_state_register_pc(thread, r->pc);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
	.detach = NULL,
	.thread_detach = NULL,
};

static int dw_open(struct peer **out, struct bsnap *s, char *reason, size_t len)
{
	struct peer *p = calloc(1, sizeof(*p));
	int reported = 0;

	*out = NULL;
	if (!p) {
		snprintf(reason, len, "out of memory");
		return -1;
	}
	p->s = s;
	p->dwfl = dwfl_begin(&callbacks);
	if (!p->dwfl) {
		snprintf(reason, len, "dwfl_begin: %s", dwfl_errmsg(-1));
		free(p);
		return -1;
	}
	dwfl_report_begin(p->dwfl);
	for (size_t i = 0; i < s->space.nmods; i++) {
		const struct bmod *m = &s->space.mods[i];
		const char *name;
		if (!m->file || !m->text_hi)
			continue; /* not an ELF file with code (a data file, a locale archive) */
		name = strrchr(m->path, '/') ? strrchr(m->path, '/') + 1 : m->path;
		if (m->path[0] == '[') {
			/* an image from the snapshot ([vdso]): libdwfl reads it from a memfd (and closes it) */
			int fd = memfd_create("dwunw-bench-image", MFD_CLOEXEC);
			if (fd < 0 || write(fd, m->file->data, m->file->size) != (ssize_t)m->file->size) {
				if (fd >= 0)
					close(fd);
				continue;
			}
			if (dwfl_report_elf(p->dwfl, m->path, m->path, fd, m->bias, true))
				reported++;
			else
				close(fd);
			continue;
		}
		if (dwfl_report_elf(p->dwfl, name, m->file->path, -1, m->bias, true))
			reported++;
	}
	dwfl_report_end(p->dwfl, NULL, NULL);
	if (!reported) {
		snprintf(reason, len, "dwfl_report_elf: %s", dwfl_errmsg(-1));
		goto fail;
	}
	if (!dwfl_attach_state(p->dwfl, NULL, s->pid, &thread_callbacks, p)) {
		const char *msg = dwfl_errmsg(-1);
		snprintf(reason, len, "%s", msg ? msg : "dwfl_attach_state failed");
		dwfl_end(p->dwfl);
		free(p);
		/* an architecture libdwfl cannot unwind */
		return 1;
	}
	*out = p;
	return 0;
fail:
	dwfl_end(p->dwfl);
	free(p);
	return -1;
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct peer *p = arg;
	Dwarf_Addr pc;
	bool act;

	if (!dwfl_frame_pc(state, &pc, &act)) {
		snprintf(p->r->stop, sizeof(p->r->stop), "dwfl_frame_pc: %s", dwfl_errmsg(-1));
		return DWARF_CB_ABORT;
	}
	p->r->pcs[p->r->n++] = pc;
	if (p->r->n == BENCH_MAXF) {
		snprintf(p->r->stop, sizeof(p->r->stop), "more than %d frames", BENCH_MAXF);
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

static int dw_unwind(struct peer *p, struct bresult *r)
{
	int ret;

	r->n = 0;
	r->ok = 0;
	r->unsupported = 0;
	r->stop[0] = 0;
	p->r = r;
	ret = dwfl_getthread_frames(p->dwfl, p->s->pid, on_frame, p);
	if (ret == 0) {
		snprintf(r->stop, sizeof(r->stop), "OK");
		r->ok = 1;
		return 0;
	}
	if (!r->stop[0])
		snprintf(r->stop, sizeof(r->stop), "%s", ret == -1 ? dwfl_errmsg(-1) : "aborted");
	/* elfutils 0.188 attaches to any architecture, then cannot unwind some (mips) */
	r->unsupported = r->n == 0 && strstr(r->stop, "not supported") != NULL;
	return -1;
}

static void dw_close(struct peer *p)
{
	if (!p)
		return;
	dwfl_end(p->dwfl);
	free(p);
}

const struct peer_ops peer_libdwfl = { "libdwfl", dw_open, dw_unwind, dw_close };
