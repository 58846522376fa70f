// SPDX-License-Identifier: GPL-2.0-only
/* Record -> frames (DWARF snapshots and frame-pointer stacks): see frames.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "capture_user.h"
#include "frames.h"
#include "freeze.h"
#include "intern.h"
#include "mapped_files.h"
#include "mappings.h"
#include "module_warn.h"
#include "perf_map.h"
#include "syms.h"
#include "tool_util.h"

void frames_setup(struct frames *fr, struct stack_store *st)
{
	memset(fr, 0, sizeof(*fr));
	fr->st = st;
	fr->max = FRAMES_MAX;
	fr->use_perf_map = true;
}

size_t frames_modules(const struct frames *fr, const struct module_seen **out)
{
	*out = fr->mods.v;
	return fr->mods.n;
}

static void mods_put(struct frames *fr, size_t k)
{
	size_t i = hash64(0, (uint64_t)(uintptr_t)fr->mods.v[k].path) & (fr->mods.index_cap - 1);

	while (fr->mods.index[i])
		i = (i + 1) & (fr->mods.index_cap - 1);
	fr->mods.index[i] = (uint32_t)k + 1;
}

const struct module_seen *frames_module_find(const struct frames *fr, const char *path, size_t *index)
{
	if (!path || !fr->mods.index_cap)
		return NULL;
	for (size_t i = hash64(0, (uint64_t)(uintptr_t)path) & (fr->mods.index_cap - 1); fr->mods.index[i];
	     i = (i + 1) & (fr->mods.index_cap - 1))
		if (fr->mods.v[fr->mods.index[i] - 1].path == path) {
			if (index)
				*index = fr->mods.index[i] - 1;
			return &fr->mods.v[fr->mods.index[i] - 1];
		}
	return NULL;
}

/* Remember the module of a frame (path interned); its build id read once. */
static void module_note(struct frames *fr, const char *path, const void *mod)
{
	if (!path || frames_module_find(fr, path, NULL))
		return;
	if (fr->mods.n == fr->mods.cap) {
		fr->mods.cap = fr->mods.cap ? fr->mods.cap * 2 : 64;
		fr->mods.v = xrealloc(fr->mods.v, fr->mods.cap * sizeof(*fr->mods.v));
	}
	fr->mods.v[fr->mods.n].path = path;
	fr->mods.v[fr->mods.n].build_id = NULL;
#ifdef HAVE_DWUNW
	char bid[129];

	if (mod && dwunw_module_build_id(mod, bid, sizeof(bid)) > 0)
		fr->mods.v[fr->mods.n].build_id = intern(bid);
#else
	(void)mod;
#endif
	fr->mods.n++;
	if (fr->mods.n * 2 > fr->mods.index_cap) {
		free(fr->mods.index);
		fr->mods.index_cap = fr->mods.index_cap ? fr->mods.index_cap * 2 : 128;
		fr->mods.index = xcalloc(fr->mods.index_cap, sizeof(*fr->mods.index));
		for (size_t k = 0; k < fr->mods.n; k++)
			mods_put(fr, k);
	} else {
		mods_put(fr, fr->mods.n - 1);
	}
}

static void fill_from_symbol(struct uframe *f, const char *name, uint64_t off, const char *module)
{
	f->module = module ? intern(module) : NULL;
	if (name && *name) {
		f->name = intern(name);
		f->offset = off;
	}
}

/* A frame in no module: named from the JIT's perf map when there is one. */
static void fill_anon(const struct frames *fr, struct uframe *f, pid_t pid)
{
	const char *name;
	uint64_t off;

	/* a pc in no known mapping may be code the JIT made after the maps were read, or in a
	 * process gone since: the perf map is read on for it too (rate-limited) */
	if (!fr->use_perf_map || !pid || !(name = perf_map_lookup(pid, f->pc, true, &off)))
		return;
	f->name = name;
	f->offset = off;
	f->flags |= UF_PERFMAP | UF_JIT;
}


void fill_pc(struct frames *fr, pid_t pid, struct uframe *frames, uint32_t i, bool exact)
{
	/* named as it is looked up here, and looked up the same way when named again (debuginfod)
	 * or later (pprof's "exact") */
	if (exact)
		frames[i].flags |= UF_EXACT;
	{
#ifdef HAVE_DWUNW
		struct dwunw_regs r = {
			.arch = DWUNW_ARCH_X86_64,
			.flags = exact ? 0 : DWUNW_REGS_PC_IS_RETADDR,
			.pid = pid,
			.tid = pid,
			.pc = frames[i].pc,
		};
		struct dwunw_frame f;
		struct dwunw_symbol sym;
		size_t nf = 1;

#if defined(__aarch64__)
		r.arch = DWUNW_ARCH_ARM64;
#elif defined(__mips__)
		r.arch = DWUNW_ARCH_MIPS32;
#endif
		dwunw_capture(&fr->dctx, &r, &f, &nf);
		if (nf < 1)
			return;
		if (f.flags & DWUNW_FRAME_JIT)
			frames[i].flags |= UF_JIT;
		const char *mpath = f.module ? mapped_files_name(dwunw_module_path(f.module)) : NULL;

		if (f.module) {
			module_note(fr, intern(mpath), f.module);
			frames[i].maddr = f.module_addr;
		}
		if (f.module && dwunw_symbolize_frame(&fr->dctx, &f, &sym) == DWUNW_OK)
			fill_from_symbol(&frames[i], sym.name, sym.offset, mpath);
		else if (f.module)
			fill_from_symbol(&frames[i], NULL, 0, mpath);
		else
			fill_anon(fr, &frames[i], pid);
		dwunw_module_cache_release(&fr->dctx, &f, nf);
#else
		struct syms_result res;

		syms_resolve(fr->syms, frames[i].pc, exact ? 0 : 1, &res);
		fill_from_symbol(&frames[i], res.name, res.offset, res.module);
		module_note(fr, frames[i].module, NULL);
		if (!res.module)
			fill_anon(fr, &frames[i], pid);
#endif
	}
}

struct fp_fill {
	struct frames *fr;
	pid_t pid;
};

/* fill_fn for frame-pointer stacks (every pc a return address) */
static void fill_fp(void *arg, struct uframe *frames, uint32_t n)
{
	const struct fp_fill *a = arg;

	for (uint32_t i = 0; i < n; i++) {
		/* frame 0 is the pc at the event; each caller was found by frame pointers */
		uf_set_origin(&frames[i], i ? UO_FP : UO_WINDOW);
		fill_pc(a->fr, a->pid, frames, i, false);
	}
}

const char *fperr_label(uint64_t err)
{
	static char buf[96];

	switch (err) {
	case EEXIST:
		return "[stack lost: frame-pointer stack map full (EEXIST)]";
	case EFAULT:
		return "[stack lost: frame-pointer walk failed (EFAULT)]";
	case ENOMEM:
		return "[stack lost: frame-pointer stack map out of memory]";
	default:
		snprintf(buf, sizeof(buf), "[stack lost: bpf_get_stackid error %" PRIu64 "]", err);
		return buf;
	}
}

int64_t fp_stack_of(struct frames *fr, struct fp_cache *cache, int map_fd, pid_t pid, uint64_t space, int64_t id,
		    uint64_t first_pc, bool replace_first)
{
	uint64_t pcs[FRAMES_FP_DEPTH + 1];
	uint64_t raw[FRAMES_FP_DEPTH];
	uint32_t n = 0;

	if (id < 0)
		return pseudo_stack(fr->st, fperr_label((uint64_t)-id));
	if (cache && !replace_first && (uint64_t)id < cache->n && cache->map[id])
		return cache->map[id] - 1;
	memset(raw, 0, sizeof(raw));
	if (bpf_map_lookup_elem(map_fd, &id, raw))
		return pseudo_stack(fr->st, "[stack lost: frame-pointer stack id not found]");
	if (replace_first)
		pcs[n++] = first_pc;
	for (uint32_t i = replace_first ? 1 : 0; i < FRAMES_FP_DEPTH && raw[i]; i++)
		pcs[n++] = raw[i];
	struct fp_fill a = { fr, pid };
	int64_t idx = stack_get_in(fr->st, space, SK_FP, 0, NULL, NULL, pcs, n, fill_fp, &a);

	if (cache && !replace_first && (uint64_t)id < cache->n && fr->st->v[idx].kind == SK_FP)
		cache->map[id] = (int32_t)idx + 1;
	return idx;
}

void frames_forget_pid(struct frames *fr, uint32_t pid)
{
#ifdef HAVE_DWUNW
	if (fr->dctx_ok)
		dwunw_maps_forget(&fr->dctx, (int32_t)pid);
#endif
	if (fr->maps)
		mappings_forget(fr->maps, pid);
	perf_map_forget((pid_t)pid);
}

void frames_refresh_pid(struct frames *fr, uint32_t pid)
{
#ifdef HAVE_DWUNW
	if (fr->dctx_ok)
		dwunw_maps_refresh(&fr->dctx, (int32_t)pid);
#else
	(void)fr;
	(void)pid;
#endif
}

void frames_shutdown(struct frames *fr)
{
#ifdef HAVE_DWUNW
	if (fr->dctx_ok)
		dwunw_shutdown(&fr->dctx);
	fr->dctx_ok = false;
#else
	syms_proc_free(fr->syms);
	fr->syms = NULL;
#endif
	if (fr->lines_end)
		fr->lines_end(fr); /* frame_lines.c's, when --lines was asked for */
	fr->lines_end = NULL;
	free(fr->frames);
	free(fr->pcs);
	free(fr->ids);
	free(fr->patch_buf);
	fr->frames = fr->pcs = fr->ids = fr->patch_buf = NULL;
	fr->cap = 0;
}

uint64_t frames_modules_held(const struct frames *fr, uint64_t *bytes, uint64_t *bound, uint64_t *evictions)
{
	*bytes = 0;
	if (bound)
		*bound = 0;
	if (evictions)
		*evictions = 0;
#ifdef HAVE_DWUNW
	struct dwunw_cache_stats cs;

	if (fr->dctx_ok && dwunw_cache_stats((struct dwunw_ctx *)&fr->dctx, &cs) == DWUNW_OK) {
		*bytes = cs.bytes;
		if (bound)
			*bound = cs.bytes_bound;
		if (evictions)
			*evictions = cs.bytes_evictions;
		return cs.active + cs.warm;
	}
#else
	(void)fr;
#endif
	return 0;
}

void frames_modules_json(const struct frames *fr)
{
	uint64_t bytes, n = frames_modules_held(fr, &bytes, NULL, NULL);

	printf(",\"module_cache\":{\"modules\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", n, bytes);
}

#ifdef HAVE_DWUNW
static void dw_warn(void *arg, const char *line)
{
	(void)arg;
	if (module_warn_line(line) || debug_refused_line(line))
		return;
	if (tool_verbose())
		fprintf(stderr, "%s: libdwunw: %s\n", tool_name(), line);
}

uint32_t frames_machine_slots(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mib = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz >> 20 : 1024;
	uint64_t slots = mib / 16;

	return (uint32_t)(slots < 256 ? 256 : slots > 4096 ? 4096 : slots);
}

int frames_init(struct frames *fr, uint32_t cache_slots, uint64_t cache_bytes, uint32_t flags,
		const char *debug_dirs)
{
	struct dwunw_config cfg = {
		.size = sizeof(cfg),
		.flags = flags | DWUNW_CFG_NO_LINES,
		.cache_slots = cache_slots,
		.cache_bytes = cache_bytes,
		.debug_dirs = debug_dirs,
		.warn = dw_warn,
	};
	int err = dwunw_init(&fr->dctx, &cfg);
	const char *lag = getenv("DWUNW_TEST_LAG_MS");

	/* tests: a consumer that falls behind (a loaded machine), so records are processed after
	 * what they refer to has changed: each snapshot no earlier than this long after its event */
	if (lag)
		fr->lag_ns = strtoull(lag, NULL, 10) * 1000000ull;
	fr->dctx_ok = err == DWUNW_OK;
	return err;
}

/* Whether the module of a stored frame is one whose debug file was fetched (interned paths). */
static bool in_list(const char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == s)
			return true;
	return false;
}

void frames_name_fetched(struct frames *fr, uint32_t wait_ms)
{
	struct dwunw_debuginfod_result r;
	const char *fetched[256], *missing[4];
	size_t nfetched = 0, nmissing = 0, shown = 0;
	char why[4][160];

	if (!fr->dctx_ok)
		return;
	int pending = dwunw_debuginfod_wait(&fr->dctx, wait_ms);
	if (pending < 0) {
		fprintf(stderr, "%s: debuginfod: %s (libdebuginfod.so.1): no debug files fetched\n", tool_name(),
			dwunw_strerror(pending));
		return;
	}
	for (uint32_t i = 0; dwunw_debuginfod_result(&fr->dctx, i, &r) == DWUNW_OK; i++) {
		if (r.state == DWUNW_DEBUGINFOD_FETCHED && nfetched < 256)
			fetched[nfetched++] = intern(r.module);
		if (r.state == DWUNW_DEBUGINFOD_FAILED || r.state == DWUNW_DEBUGINFOD_PENDING) {
			if (shown < 4) {
				const char *base = strrchr(r.module, '/');
				missing[shown] = intern(base ? base + 1 : r.module);
				snprintf(why[shown], sizeof(why[0]), "%s",
					 r.state == DWUNW_DEBUGINFOD_PENDING ? "no answer in time" : r.why);
				shown++;
			}
			nmissing++;
		}
	}
	/* Frames of those modules named again, from the index rebuilt with the file (and their
	 * lines looked up then, with --lines). */
	if (nfetched)
		fr->lines_done = 0;
	for (size_t s = 0; s < fr->st->n && nfetched; s++) {
		struct ustack *u = &fr->st->v[s];
		for (uint32_t j = 0; j < u->nframes; j++) {
			struct uframe *f = &u->frames[j];
			struct dwunw_module *m;
			struct dwunw_symbol sym;
			if (!f->module || !f->maddr || (f->flags & UF_PERFMAP) || !in_list(fetched, nfetched, f->module) ||
			    dwunw_module_open(&fr->dctx, f->module, &m) != DWUNW_OK)
				continue;
			bool exact = f->flags & UF_EXACT;
			if (dwunw_symbolize(&fr->dctx, m, exact ? f->maddr : f->maddr - 1, &sym) == DWUNW_OK && sym.name[0])
				fill_from_symbol(f, sym.name, sym.offset + !exact, f->module);
			dwunw_module_put(&fr->dctx, m);
		}
	}
	if (!nmissing)
		return;
	fprintf(stderr, "%s: debuginfod: no debug file for %zu module%s%s: ", tool_name(), nmissing,
		nmissing > 1 ? "s" : "", pending > 0 ? " (some still fetching)" : "");
	for (size_t i = 0; i < shown; i++)
		fprintf(stderr, "%s%s (%s)", i ? ", " : "", missing[i], why[i]);
	fprintf(stderr, "%s; their frames keep [unknown]\n", nmissing > shown ? ", ..." : "");
}

struct dwarf_fill {
	struct frames *fr;
	const struct dwunw_frame *f;
	pid_t pid;
	uint32_t skip;         /* frames dropped before f[0] (a return address looks up pc - 1) */
};

static void fill_dwarf(void *arg, struct uframe *out, uint32_t n)
{
	struct dwarf_fill *d = arg;
	struct frames *fr = d->fr;
	struct mappings *maps = fr->maps;

	for (uint32_t i = 0; i < n; i++) {
		const struct dwunw_frame *f = &d->f[i];
		struct dwunw_symbol sym;

		out[i].how = f->how;
		uf_set_origin(&out[i], (enum uf_origin)dwunw_how_origin(f->how));
		/* as dwunw_symbolize_frame: not a return address (names looked up again later) */
		if ((f->flags & (DWUNW_FRAME_EXACT_PC | DWUNW_FRAME_SIGTRAMP)) || !f->module_addr)
			out[i].flags |= UF_EXACT;
		if (f->how == DWUNW_HOW_FP)
			out[i].flags |= UF_FP;
		if (f->flags & DWUNW_FRAME_JIT)
			out[i].flags |= UF_JIT;
		uint64_t at = out[i].pc - (i + d->skip > 0);

		/* a module that may be another file than the one mapped then: not named from it */
		if (!f->module || (maps && mappings_untrusted(maps, (uint32_t)d->pid, at))) {
			const char *why;
			/* in a file mapping whose file could not be loaded: name the file, as perf does */
			const char *name = maps ? mappings_describe(maps, (uint32_t)d->pid, at, 0, &why) : NULL;

			if (name)
				out[i].module = name;
			else
				fill_anon(fr, &out[i], d->pid);
			continue;
		}
		/* a held file (the library deleted since) by its own path, marked " (deleted)" */
		const char *mpath = mapped_files_name(dwunw_module_path(f->module));

		if (dwunw_symbolize_frame(&fr->dctx, f, &sym) == DWUNW_OK)
			fill_from_symbol(&out[i], sym.name, sym.offset, mpath);
		else
			fill_from_symbol(&out[i], NULL, 0, mpath);
		out[i].maddr = f->module_addr;
		module_note(fr, out[i].module, f->module);
	}
}

/* The scratch for fr->max + 1 frames. */
static void scratch_fit(struct frames *fr)
{
	size_t n = (size_t)fr->max + 1;

	if (fr->cap >= n)
		return;
	fr->frames = xrealloc(fr->frames, n * sizeof(struct dwunw_frame));
	fr->pcs = xrealloc(fr->pcs, n * sizeof(*fr->pcs));
	fr->ids = xrealloc(fr->ids, n * sizeof(*fr->ids));
	fr->cap = (uint32_t)n;
}

/* One walk of the record (the frames found into fr->frames, *nf of them). */
static int walk(struct frames *fr, const struct dwunw_regs *regs,
		const struct dwunw_stack_sample *samples, size_t nsamples, size_t *nf)
{
	*nf = (size_t)fr->max + 1;
	return dwunw_capture_sampled(&fr->dctx, regs, samples, nsamples, fr->frames, nf);
}

/*
 * After a walk: a frame without a module in a hole of the view (the holes filled from /proc) or in
 * a file mapping whose held file can stand for it (the view names it so): true when the view
 * changed, so another walk may find more.
 */
static bool rewalk_needed(struct frames *fr, uint32_t pid, size_t nf)
{
	const struct dwunw_frame *frames = fr->frames;
	bool holes = false, again = false;

	for (size_t i = 0; i < nf; i++) {
		if (frames[i].module)
			continue;
		if (!holes && mappings_hole(fr->maps, pid, frames[i].pc)) {
			holes = true;
			again |= mappings_fill_holes(fr->maps, pid);
		}
		again |= mappings_use_hold(fr->maps, pid, frames[i].pc - (i > 0));
	}
	return again;
}

int64_t frames_from_snapshot(struct frames *fr, const void *data, size_t size, uint32_t skip,
			     uint64_t space, struct unwind_stats *stats, const struct cap_record **recp)
{
	struct mappings *maps = fr->maps;
	const struct cap_record *rec;
	struct dwunw_regs regs;
	struct dwunw_frame *frames;
	uint64_t *pcs;
	size_t nf;
	int patched = 0, rc;

	scratch_fit(fr);
	frames = fr->frames;
	pcs = fr->pcs;
	uint64_t t0;
	int64_t idx;

	rec = dwunw_cap_prepare(data, size, &fr->patch_buf, &fr->patch_buf_size, &patched);
	*recp = rec;
	if (!rec) {
		stats->bad++;
		return FRAMES_BAD;
	}
	stats->records++;
	if (fr->lag_ns) {
		uint64_t now = mono_ns();

		if (now < rec->ts + fr->lag_ns)
			usleep((useconds_t)((rec->ts + fr->lag_ns - now) / 1000));
	}
	if (space == FRAMES_SPACE_PID)
		space = rec->pid;
	if (patched)
		stats->patched++;
	dwunw_cap_to_regs(rec, &regs);
	/* the modules mapped when the record was taken (mapping events applied in order) */
	if (maps)
		mappings_sync(maps, rec->pid, &fr->dctx);
	/* time one unwind in 64 (clock reads cost as much as a short unwind) */
	bool timed = (stats->records & 63) == 1;
	t0 = timed ? mono_ns() : 0;
	struct dwunw_stack_sample samples[CAP_NSAMPLES];
	size_t nsamples = dwunw_cap_samples(rec, samples);

	/* what the walk needs is decided before it (mappings_sync pinned the held files of mappings
	 * whose file is gone): the pc itself in no mapping of the view, read /proc once more now */
	if (maps && mappings_hole(maps, rec->pid, regs.pc) && mappings_fill_holes(maps, rec->pid))
		mappings_sync(maps, rec->pid, &fr->dctx);
	/* --unwind=freeze: the thread held stopped at the event while the walk reads its stack */
	struct freeze_hold fh;
	bool freezing = fr->fz && (rec->h.flags & CAP_F_FROZEN);
	bool frozen = freezing && freeze_begin(fr->fz, rec, &fh);

	rc = walk(fr, &regs, samples, nsamples, &nf);
	/* left for a second, counted walk (mappings_rewalked): a caller in code mapped before events
	 * were on, or a file gone since its mapping was last looked at */
	if (maps && rewalk_needed(fr, rec->pid, nf)) {
		mappings_rewalked(maps);
		dwunw_module_cache_release(&fr->dctx, frames, nf);
		mappings_sync(maps, rec->pid, &fr->dctx);
		rc = walk(fr, &regs, samples, nsamples, &nf);
	}
	if (freezing)
		freeze_end(fr->fz, &fh);
	if (timed) {
		stats->unwind_ns += mono_ns() - t0;
		stats->timed++;
	}
	if (rc == DWUNW_ERR_UNSUPPORTED_ARCH) {
		stats->fallback++;
		dwunw_module_cache_release(&fr->dctx, frames, nf);
		return FRAMES_FALLBACK;
	}
	if (nf == 0) {
		char label[128];

		snprintf(label, sizeof(label), "[unwind failed: %s]", dwunw_strerror(rc));
		idx = pseudo_stack(fr->st, label);
	} else {
		const char *label = NULL, *stop_name = NULL;
		uint32_t n = (uint32_t)nf - skip;
		bool unknown_mod = false;
		const char *why = NULL;

		for (uint32_t i = 0; i < n; i++) {
			pcs[i] = frames[i + skip].pc;
			if (frames[i + skip].how == DWUNW_HOW_FP)
				stats->frames_fp++;
			if (maps) {
				bool unk;

				/* a return address points after the call: look up the call */
				/* in a file mapping but no module: which file it was is not known */
				uint64_t at = pcs[i] - (i + skip > 0);

				fr->ids[i] = mappings_file_id(maps, rec->pid, at, rec->ts,
							      !frames[i + skip].module ||
								      mappings_untrusted(maps, rec->pid, at),
							      &unk);
				if (unk && !unknown_mod) {
					unknown_mod = true;
					mappings_describe(maps, rec->pid, pcs[i] - (i + skip > 0), rec->ts, &why);
					/* the frames past it cannot be trusted: cut there */
					n = i + 1;
					break;
				}
			}
		}
		if (unknown_mod) {
			mappings_flagged(maps);
			char buf[160];

			/* why its file could not be loaded (the frame names the file: "PATH (deleted)") */
			snprintf(buf, sizeof(buf), "[unwind stopped: module at capture time unknown%s%s]",
				 why ? ": " : "", why ? why : "");
			label = intern(buf);
			stop_name = intern("MODULE_UNKNOWN");
			if (rc == DWUNW_OK)
				rc = DWUNW_ERR_NO_MODULE;
		} else if (rc != DWUNW_OK) {
			char buf[128];

			if (frames[nf - 1].flags & DWUNW_FRAME_UPROBE_TRAMP) {
				label = intern("[unwind stopped: uretprobe trampoline]");
				stop_name = intern("UPROBE_TRAMPOLINE");
			} else {
				snprintf(buf, sizeof(buf), "[unwind stopped: %s]", dwunw_strerror(rc));
				label = intern(buf);
				stop_name = intern(dwunw_errname(rc));
			}
		}
		struct dwarf_fill fd = { .fr = fr, .f = &frames[skip], .pid = (pid_t)rec->pid, .skip = skip };
		idx = stack_get_ids(fr->st, space, SK_DWARF, rc, label, stop_name, pcs,
				    maps ? fr->ids : NULL, n, fill_dwarf, &fd);
		/* a frame recovered with memory read live, and every frame found from it, rest on
		 * that memory: marked on the stack (kept by pcs) for any record that needed it; read
		 * from the thread held stopped at the event, it is event-time memory ("frozen") */
		struct ustack *s = &fr->st->v[idx];
		for (size_t i = skip; i < nf; i++)
			if (frames[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT) {
				s->beyond = true;
				s->live |= !frozen;
				if (s->kind == SK_DWARF && s->nframes == n) {
					for (size_t k = i - skip; k < n; k++) {
						if (!frozen)
							s->frames[k].flags |= UF_LIVE;
						else if (uf_origin(&s->frames[k]) == UO_WINDOW)
							uf_set_origin(&s->frames[k], UO_FROZEN);
					}
				}
				break;
			}
	}
	dwunw_module_cache_release(&fr->dctx, frames, nf);
	return idx;
}
#endif
