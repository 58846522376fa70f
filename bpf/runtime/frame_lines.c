// SPDX-License-Identifier: GPL-2.0-only
/* File and line of stored frames, before a report: see frame_lines.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "frame_lines.h"
#include "frames.h"
#include "intern.h"
#include "tool_util.h"

#ifdef HAVE_DWUNW
/* One distinct (module, address) looked up: its line, or none (src.file NULL). */
struct line_entry {
	const char *module;    /* interned path, as in struct uframe.module */
	uint64_t addr;         /* the address looked up (a return address: its call, pc - 1) */
	struct src_line src;
};

#define ENTRY_BLOCK 1024

struct frame_lines {
	struct line_entry **index; /* open addressing on (module, addr) */
	size_t index_cap, n;
	struct line_entry *block;  /* entries are allocated ENTRY_BLOCK at a time, never moved */
	size_t block_used;
	struct line_entry **blocks;
	size_t nblocks;
	struct {
		uint64_t looked_up; /* distinct addresses */
		uint64_t found;     /* ... with a line */
		uint64_t frames;    /* frames given a line */
		uint64_t ns;        /* CPU time */
	} stats;
};

/* CPU time of this thread (the look-ups' cost, whatever else runs on the machine) */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t key_hash(const char *module, uint64_t addr)
{
	return hash64(hash64(0, (uint64_t)(uintptr_t)module), addr);
}

static void index_put(struct frame_lines *fl, struct line_entry *e)
{
	size_t i = key_hash(e->module, e->addr) & (fl->index_cap - 1);

	while (fl->index[i])
		i = (i + 1) & (fl->index_cap - 1);
	fl->index[i] = e;
}

static struct line_entry *entry_find(const struct frame_lines *fl, const char *module, uint64_t addr)
{
	if (!fl->index_cap)
		return NULL;
	for (size_t i = key_hash(module, addr) & (fl->index_cap - 1); fl->index[i]; i = (i + 1) & (fl->index_cap - 1))
		if (fl->index[i]->module == module && fl->index[i]->addr == addr)
			return fl->index[i];
	return NULL;
}

static struct line_entry *entry_new(struct frame_lines *fl, const char *module, uint64_t addr)
{
	if ((fl->n + 1) * 2 > fl->index_cap) {
		size_t cap = fl->index_cap ? fl->index_cap * 2 : 4096;

		free(fl->index);
		fl->index = xcalloc(cap, sizeof(*fl->index));
		fl->index_cap = cap;
		for (size_t b = 0; b < fl->nblocks; b++)
			for (size_t k = 0; k < (b + 1 < fl->nblocks ? ENTRY_BLOCK : fl->block_used); k++)
				index_put(fl, &fl->blocks[b][k]);
	}
	if (!fl->block || fl->block_used == ENTRY_BLOCK) {
		fl->block = xcalloc(ENTRY_BLOCK, sizeof(*fl->block));
		fl->blocks = xrealloc(fl->blocks, (fl->nblocks + 1) * sizeof(*fl->blocks));
		fl->blocks[fl->nblocks++] = fl->block;
		fl->block_used = 0;
	}
	struct line_entry *e = &fl->block[fl->block_used++];

	e->module = module;
	e->addr = addr;
	index_put(fl, e);
	fl->n++;
	return e;
}

/* A module of this pass: opened once, usable when its build id is the one its frames were
 * unwound with (frames.c's module_seen). */
struct pass_module {
	struct dwunw_module *m;
	int state;             /* 0 not tried, 1 usable, -1 not */
};

static struct dwunw_module *pass_module(struct frames *fr, struct pass_module *pm, const char *path)
{
	size_t k;
	const struct module_seen *seen = frames_module_find(fr, path, &k);
	char bid[129];

	if (!seen)
		return NULL;
	if (!pm[k].state) {
		pm[k].state = -1;
		if (dwunw_module_open(&fr->dctx, path, &pm[k].m) != DWUNW_OK) {
			pm[k].m = NULL;
			return NULL;
		}
		int n = dwunw_module_build_id(pm[k].m, bid, sizeof(bid));
		/* no build id then and none now: the same path and file identity is all there is */
		if (seen->build_id ? n > 0 && !strcmp(bid, seen->build_id) : n <= 0)
			pm[k].state = 1;
	}
	return pm[k].state > 0 ? pm[k].m : NULL;
}

/* A frame that can have a line: named from its module's symbols, at a known module address. */
static bool wants_line(const struct uframe *f)
{
	uint32_t o = uf_origin(f);

	return !f->src && f->name && f->module && f->maddr && !(f->flags & UF_PERFMAP) && o != UO_PYTHON &&
	       o != UO_KERNEL;
}

void frames_lines(struct frames *fr, const uint32_t *stacks, size_t n)
{
	struct stack_store *st = fr->st;
	size_t from = stacks ? 0 : fr->lines_done, to = stacks ? n : st->n;

	if (!fr->want_lines || !fr->dctx_ok || from >= to)
		return;
	struct frame_lines *fl = fr->lines ? fr->lines : (fr->lines = xcalloc(1, sizeof(*fr->lines)));
	const struct module_seen *mods;
	size_t nmods = frames_modules(fr, &mods);
	struct pass_module *pm = xcalloc(nmods + 1, sizeof(*pm));
	uint64_t t0 = thread_cpu_ns();
	char file[256];

	for (size_t s = from; s < to; s++) {
		struct ustack *u = &st->v[stacks ? stacks[s] : s];

		for (uint32_t j = 0; j < u->nframes; j++) {
			struct uframe *f = &u->frames[j];

			if (!wants_line(f))
				continue;
			uint64_t addr = f->flags & UF_EXACT ? f->maddr : f->maddr - 1;
			struct dwunw_module *m = pass_module(fr, pm, f->module);

			if (!m)
				continue;
			struct line_entry *e = entry_find(fl, f->module, addr);

			if (!e) {
				uint32_t line;

				e = entry_new(fl, f->module, addr);
				fl->stats.looked_up++;
				if (dwunw_source_line(&fr->dctx, m, addr, file, sizeof(file), &line) == DWUNW_OK && file[0]) {
					e->src.file = intern(file);
					e->src.line = line;
					fl->stats.found++;
				}
			}
			if (e->src.file) {
				f->src = &e->src;
				fl->stats.frames++;
			}
		}
	}
	if (!stacks)
		fr->lines_done = st->n;
	for (size_t k = 0; k < nmods; k++)
		if (pm[k].m)
			dwunw_module_put(&fr->dctx, pm[k].m);
	free(pm);
	fl->stats.ns += thread_cpu_ns() - t0;
}

void frame_lines_summary(const struct frames *fr, FILE *out)
{
	const struct frame_lines *fl = fr->lines;

	if (!fr->want_lines)
		return;
	fprintf(out, "%s: lines: %" PRIu64 " addresses looked up (%" PRIu64 " with a line) for %" PRIu64
		" frames: %.1f ms of CPU\n", tool_name(), fl ? fl->stats.looked_up : 0, fl ? fl->stats.found : 0,
		fl ? fl->stats.frames : 0, fl ? (double)fl->stats.ns / 1e6 : 0.0);
}

void frame_lines_free(struct frame_lines *fl)
{
	if (!fl)
		return;
	for (size_t b = 0; b < fl->nblocks; b++)
		free(fl->blocks[b]);
	free(fl->blocks);
	free(fl->index);
	free(fl);
}
#else
void frames_lines(struct frames *fr, const uint32_t *stacks, size_t n)
{
	(void)fr;
	(void)stacks;
	(void)n;
}

void frame_lines_summary(const struct frames *fr, FILE *out)
{
	(void)fr;
	(void)out;
}

void frame_lines_free(struct frame_lines *fl)
{
	(void)fl;
}
#endif

static void lines_end(struct frames *fr)
{
	frame_lines_summary(fr, stderr);
	frame_lines_free(fr->lines);
	fr->lines = NULL;
}

void frame_lines_want(struct frames *fr, bool want)
{
	fr->want_lines = want;
	fr->lines_end = want ? lines_end : NULL;
}
