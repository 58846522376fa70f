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
#include "intern.h"
#include "mapped_files.h"
#include "mappings.h"
#include "module_warn.h"
#include "perf_map.h"
#include "syms.h"
#include "tool_util.h"

#ifdef HAVE_DWUNW
struct dwunw_ctx dctx;
bool dctx_ok;
#else
struct syms_proc *syms;
#endif
bool frames_use_perf_map = true;

static struct {
	struct module_seen *v;
	size_t n, cap;
	uint32_t *index;       /* open addressing on the path pointer: entry + 1 */
	size_t index_cap;
} mods;

size_t frames_modules(const struct module_seen **out)
{
	*out = mods.v;
	return mods.n;
}

static void mods_put(size_t k)
{
	size_t i = hash64(0, (uint64_t)(uintptr_t)mods.v[k].path) & (mods.index_cap - 1);

	while (mods.index[i])
		i = (i + 1) & (mods.index_cap - 1);
	mods.index[i] = (uint32_t)k + 1;
}

/* Remember the module of a frame (path interned); its build id read once. */
static void module_note(const char *path, const void *mod)
{
	size_t i;

	if (!path)
		return;
	if (mods.index_cap)
		for (i = hash64(0, (uint64_t)(uintptr_t)path) & (mods.index_cap - 1); mods.index[i];
		     i = (i + 1) & (mods.index_cap - 1))
			if (mods.v[mods.index[i] - 1].path == path)
				return;
	if (mods.n == mods.cap) {
		mods.cap = mods.cap ? mods.cap * 2 : 64;
		mods.v = xrealloc(mods.v, mods.cap * sizeof(*mods.v));
	}
	mods.v[mods.n].path = path;
	mods.v[mods.n].build_id = NULL;
#ifdef HAVE_DWUNW
	char bid[129];

	if (mod && dwunw_module_build_id(mod, bid, sizeof(bid)) > 0)
		mods.v[mods.n].build_id = intern(bid);
#else
	(void)mod;
#endif
	mods.n++;
	if (mods.n * 2 > mods.index_cap) {
		free(mods.index);
		mods.index_cap = mods.index_cap ? mods.index_cap * 2 : 128;
		mods.index = xcalloc(mods.index_cap, sizeof(*mods.index));
		for (size_t k = 0; k < mods.n; k++)
			mods_put(k);
	} else {
		mods_put(mods.n - 1);
	}
}

void fill_from_symbol(struct uframe *f, const char *name, uint64_t off, const char *module)
{
	f->module = module ? intern(module) : NULL;
	if (name && *name) {
		f->name = intern(name);
		f->offset = off;
	}
}

/* A frame in no module: named from the JIT's perf map when there is one. */
static void fill_anon(struct uframe *f, pid_t pid)
{
	const char *name;
	uint64_t off;

	/* a pc in no known mapping may be code the JIT made after the maps were read, or in a
	 * process gone since: the perf map is read on for it too (rate-limited) */
	if (!frames_use_perf_map || !pid || !(name = perf_map_lookup(pid, f->pc, true, &off)))
		return;
	f->name = name;
	f->offset = off;
	f->flags |= UF_PERFMAP | UF_JIT;
}

#ifdef HAVE_DWUNW
static enum uf_origin origin_of_how(uint32_t how)
{
	switch (how) {
	case DWUNW_HOW_FP:
		return UO_FP;
	case DWUNW_HOW_PROLOGUE:
		return UO_PROLOGUE;
	case DWUNW_HOW_LR:
		return UO_LR;
	case DWUNW_HOW_SIGNAL:
		return UO_SIGNAL;
	default:
		return UO_WINDOW;
	}
}
#endif

void fill_pc(pid_t pid, struct uframe *frames, uint32_t i, bool exact)
{
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
		dwunw_capture(&dctx, &r, &f, &nf);
		if (nf < 1)
			return;
		if (f.flags & DWUNW_FRAME_JIT)
			frames[i].flags |= UF_JIT;
		const char *mpath = f.module ? mapped_files_name(dwunw_module_path(f.module)) : NULL;

		if (f.module) {
			module_note(intern(mpath), f.module);
			frames[i].maddr = f.module_addr;
		}
		if (f.module && dwunw_symbolize_frame(&dctx, &f, &sym) == DWUNW_OK)
			fill_from_symbol(&frames[i], sym.name, sym.offset, mpath);
		else if (f.module)
			fill_from_symbol(&frames[i], NULL, 0, mpath);
		else
			fill_anon(&frames[i], pid);
		dwunw_module_cache_release(&dctx, &f, nf);
#else
		struct syms_result res;

		syms_resolve(syms, frames[i].pc, exact ? 0 : 1, &res);
		fill_from_symbol(&frames[i], res.name, res.offset, res.module);
		module_note(frames[i].module, NULL);
		if (!res.module)
			fill_anon(&frames[i], pid);
#endif
	}
}

void fill_fp(void *arg, struct uframe *frames, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		/* frame 0 is the pc at the event; each caller was found by frame pointers */
		uf_set_origin(&frames[i], i ? UO_FP : UO_WINDOW);
		fill_pc((pid_t)(intptr_t)arg, frames, i, false);
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

int64_t fp_stack_of(struct fp_cache *cache, int map_fd, pid_t pid, uint64_t space, int64_t id,
		    uint64_t first_pc, bool replace_first)
{
	uint64_t pcs[FRAMES_FP_DEPTH + 1];
	uint64_t raw[FRAMES_FP_DEPTH];
	uint32_t n = 0;

	if (id < 0)
		return pseudo_stack(fperr_label((uint64_t)-id));
	if (cache && !replace_first && (uint64_t)id < cache->n && cache->map[id])
		return cache->map[id] - 1;
	memset(raw, 0, sizeof(raw));
	if (bpf_map_lookup_elem(map_fd, &id, raw))
		return pseudo_stack("[stack lost: frame-pointer stack id not found]");
	if (replace_first)
		pcs[n++] = first_pc;
	for (uint32_t i = replace_first ? 1 : 0; i < FRAMES_FP_DEPTH && raw[i]; i++)
		pcs[n++] = raw[i];
	int64_t idx = stack_get_in(space, SK_FP, 0, NULL, NULL, pcs, n, fill_fp,
				   (void *)(intptr_t)pid);
	if (cache && !replace_first && (uint64_t)id < cache->n && st.v[idx].kind == SK_FP)
		cache->map[id] = (int32_t)idx + 1;
	return idx;
}

#ifdef HAVE_DWUNW
static uint64_t lag_ns;

static void dw_warn(void *arg, const char *line)
{
	(void)arg;
	if (module_warn_line(line))
		return;
	if (tool_verbose)
		fprintf(stderr, "%s: libdwunw: %s\n", tool_name, line);
}

int frames_init(uint32_t cache_slots, uint32_t flags)
{
	struct dwunw_config cfg = {
		.size = sizeof(cfg),
		.flags = flags,
		.cache_slots = cache_slots,
		.warn = dw_warn,
	};
	int err = dwunw_init(&dctx, &cfg);
	const char *lag = getenv("DWUNW_TEST_LAG_MS");

	/* tests: a consumer that falls behind (a loaded machine), so records are processed after
	 * what they refer to has changed: each snapshot no earlier than this long after its event */
	if (lag)
		lag_ns = strtoull(lag, NULL, 10) * 1000000ull;
	dctx_ok = err == DWUNW_OK;
	return err;
}

void frames_shutdown(void)
{
	if (dctx_ok)
		dwunw_shutdown(&dctx);
	dctx_ok = false;
}

uint32_t frames_max = FRAMES_MAX;
static struct dwunw_frame *frames;  /* frames_max + 1 */
static uint64_t *frame_pcs;
static uint64_t *frame_ids;         /* file identities (mappings.h), with mapping events */
static uint32_t frames_cap;
static void *patch_buf;
static size_t patch_buf_size;

struct dwarf_fill {
	const struct dwunw_frame *f;
	pid_t pid;
	uint32_t skip;         /* frames dropped before f[0] (a return address looks up pc - 1) */
};

static void fill_dwarf(void *arg, struct uframe *out, uint32_t n)
{
	struct dwarf_fill *d = arg;

	for (uint32_t i = 0; i < n; i++) {
		const struct dwunw_frame *f = &d->f[i];
		struct dwunw_symbol sym;

		out[i].how = f->how;
		uf_set_origin(&out[i], origin_of_how(f->how));
		if (f->how == DWUNW_HOW_FP)
			out[i].flags |= UF_FP;
		if (f->flags & DWUNW_FRAME_JIT)
			out[i].flags |= UF_JIT;
		uint64_t at = out[i].pc - (i + d->skip > 0);

		/* a module that may be another file than the one mapped then: not named from it */
		if (!f->module || (mappings_on && mappings_untrusted((uint32_t)d->pid, at))) {
			const char *why;
			/* in a file mapping whose file could not be loaded: name the file, as perf does */
			const char *name = mappings_on ? mappings_describe((uint32_t)d->pid, at, 0, &why) : NULL;

			if (name)
				out[i].module = name;
			else
				fill_anon(&out[i], d->pid);
			continue;
		}
		/* a held file (the library deleted since) by its own path, marked " (deleted)" */
		const char *mpath = mapped_files_name(dwunw_module_path(f->module));

		if (dwunw_symbolize_frame(&dctx, f, &sym) == DWUNW_OK)
			fill_from_symbol(&out[i], sym.name, sym.offset, mpath);
		else
			fill_from_symbol(&out[i], NULL, 0, mpath);
		out[i].maddr = f->module_addr;
		module_note(out[i].module, f->module);
	}
}

int64_t frames_from_snapshot(const void *data, size_t size, uint32_t skip, uint64_t space,
			     struct unwind_stats *stats, const struct cap_record **recp)
{
	const struct cap_record *rec;
	struct dwunw_regs regs;
	uint64_t *pcs;
	size_t nf = (size_t)frames_max + 1;
	int patched = 0, rc;

	if (frames_cap < frames_max + 1) {
		frames = xrealloc(frames, ((size_t)frames_max + 1) * sizeof(*frames));
		frame_pcs = xrealloc(frame_pcs, ((size_t)frames_max + 1) * sizeof(*frame_pcs));
		frame_ids = xrealloc(frame_ids, ((size_t)frames_max + 1) * sizeof(*frame_ids));
		frames_cap = frames_max + 1;
	}
	pcs = frame_pcs;
	uint64_t t0;
	int64_t idx;

	rec = dwunw_cap_prepare(data, size, &patch_buf, &patch_buf_size, &patched);
	*recp = rec;
	if (!rec) {
		stats->bad++;
		return FRAMES_BAD;
	}
	stats->records++;
	if (lag_ns) {
		uint64_t now = mono_ns();

		if (now < rec->ts + lag_ns)
			usleep((useconds_t)((rec->ts + lag_ns - now) / 1000));
	}
	if (space == FRAMES_SPACE_PID)
		space = rec->pid;
	if (patched)
		stats->patched++;
	dwunw_cap_to_regs(rec, &regs);
	/* the modules mapped when the record was taken (mapping events applied in order) */
	if (mappings_on)
		mappings_sync(rec->pid);
	/* time one unwind in 64 (clock reads cost as much as a short unwind) */
	bool timed = (stats->records & 63) == 1;
	t0 = timed ? mono_ns() : 0;
	struct dwunw_stack_sample samples[CAP_NSAMPLES];
	size_t nsamples = dwunw_cap_samples(rec, samples);

	rc = dwunw_capture_sampled(&dctx, &regs, samples, nsamples, frames, &nf);
	/* a frame in no mapping of the view: anonymous code mapped since (JIT), read once more */
	if (mappings_on)
		for (size_t i = 0; i < nf; i++)
			if (!frames[i].module && mappings_hole(rec->pid, frames[i].pc)) {
				if (mappings_fill_holes(rec->pid)) {
					dwunw_module_cache_release(&dctx, frames, nf);
					mappings_sync(rec->pid);
					nf = (size_t)frames_max + 1;
					rc = dwunw_capture_sampled(&dctx, &regs, samples, nsamples, frames, &nf);
				}
				break;
			}
	/* a frame in a file mapping without a module: its file deleted or replaced since, but held
	 * open since its mapping was seen (mapped_files.h): unwound again through the held file */
	if (mappings_on) {
		bool again = false;

		for (size_t i = 0; i < nf; i++)
			if (!frames[i].module && mappings_use_hold(rec->pid, frames[i].pc - (i > 0)))
				again = true;
		if (again) {
			dwunw_module_cache_release(&dctx, frames, nf);
			mappings_sync(rec->pid);
			nf = (size_t)frames_max + 1;
			rc = dwunw_capture_sampled(&dctx, &regs, samples, nsamples, frames, &nf);
		}
	}
	if (timed) {
		stats->unwind_ns += mono_ns() - t0;
		stats->timed++;
	}
	if (rc == DWUNW_ERR_UNSUPPORTED_ARCH) {
		stats->fallback++;
		dwunw_module_cache_release(&dctx, frames, nf);
		return FRAMES_FALLBACK;
	}
	if (nf == 0) {
		char label[128];

		snprintf(label, sizeof(label), "[unwind failed: %s]", dwunw_strerror(rc));
		idx = pseudo_stack(label);
	} else {
		const char *label = NULL, *stop_name = NULL;
		uint32_t n = (uint32_t)nf - skip;
		bool unknown_mod = false;
		const char *why = NULL;

		for (uint32_t i = 0; i < n; i++) {
			pcs[i] = frames[i + skip].pc;
			if (frames[i + skip].how == DWUNW_HOW_FP)
				stats->frames_fp++;
			if (mappings_on) {
				bool unk;

				/* a return address points after the call: look up the call */
				/* in a file mapping but no module: which file it was is not known */
				uint64_t at = pcs[i] - (i + skip > 0);

				frame_ids[i] = mappings_file_id(rec->pid, at, rec->ts,
								 !frames[i + skip].module ||
									 mappings_untrusted(rec->pid, at),
								 &unk);
				if (unk && !unknown_mod) {
					unknown_mod = true;
					mappings_describe(rec->pid, pcs[i] - (i + skip > 0), rec->ts, &why);
					/* the frames past it cannot be trusted: cut there */
					n = i + 1;
					break;
				}
			}
		}
		if (unknown_mod) {
			mappings_stats.flagged++;
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
		struct dwarf_fill fd = { .f = &frames[skip], .pid = (pid_t)rec->pid, .skip = skip };
		idx = stack_get_ids(space, SK_DWARF, rc, label, stop_name, pcs,
				    mappings_on ? frame_ids : NULL, n, fill_dwarf, &fd);
		/* a frame recovered with memory read live, and every frame found from it, rest on
		 * that memory: marked on the stack (kept by pcs) for any record that needed it */
		struct ustack *s = &st.v[idx];
		for (size_t i = skip; i < nf; i++)
			if (frames[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT) {
				s->beyond = true;
				if (s->kind == SK_DWARF && s->nframes == n)
					for (size_t k = i - skip; k < n; k++)
						s->frames[k].flags |= UF_LIVE;
				break;
			}
	}
	dwunw_module_cache_release(&dctx, frames, nf);
	return idx;
}
#endif
