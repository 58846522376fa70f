// SPDX-License-Identifier: GPL-2.0-only
/* Address spaces of a tool's stacks: see spaces.h. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include "spaces.h"
#include "tool_util.h"

#define SPACES_TOMB UINT32_MAX
#define SPACES_SEEN (1u << 31)

static uint32_t *slot(struct spaces *s, uint32_t pid, bool add)
{
	size_t i;

	if (add && (s->n + s->tomb + 1) * 2 > s->cap) {
		/* grown when live entries fill it, rehashed in place when dropped ones do */
		size_t ncap = !s->cap ? 256 : s->n * 4 > s->cap ? s->cap * 2 : s->cap;
		uint32_t *np = xcalloc(ncap, sizeof(*np)), *ng = xcalloc(ncap, sizeof(*ng));

		for (size_t k = 0; k < s->cap; k++)
			if (s->pid[k] && s->pid[k] != SPACES_TOMB) {
				for (i = hash64(0, s->pid[k]) & (ncap - 1); np[i]; i = (i + 1) & (ncap - 1))
					;
				np[i] = s->pid[k];
				ng[i] = s->gen[k];
			}
		free(s->pid);
		free(s->gen);
		s->pid = np;
		s->gen = ng;
		s->cap = ncap;
		s->tomb = 0;
	}
	if (!s->cap)
		return NULL;
	for (i = hash64(0, pid + 1) & (s->cap - 1); s->pid[i]; i = (i + 1) & (s->cap - 1))
		if (s->pid[i] == pid + 1)
			return &s->gen[i];
	if (!add)
		return NULL;
	s->pid[i] = pid + 1;
	s->gen[i] = 0;
	s->n++;
	return &s->gen[i];
}

void spaces_new_image(struct spaces *s, uint32_t pid, bool same_process)
{
	uint32_t *g = slot(s, pid, true);

	s->seq = (s->seq + 1) & ~SPACES_SEEN;
	*g = (same_process ? *g & SPACES_SEEN : 0) | s->seq;
}

void spaces_drop(struct spaces *s, uint32_t pid)
{
	uint32_t *g = slot(s, pid, false);

	if (!g)
		return;
	s->pid[g - s->gen] = SPACES_TOMB;
	s->n--;
	s->tomb++;
}

uint64_t spaces_of(struct spaces *s, uint32_t pid)
{
	uint32_t *g = slot(s, pid, false);

	return (uint64_t)(g ? *g & ~SPACES_SEEN : 0) << 32 | pid;
}

bool spaces_live(struct spaces *s, uint64_t space)
{
	uint32_t *g = slot(s, (uint32_t)space, false);

	return g && (*g & ~SPACES_SEEN) == (uint32_t)(space >> 32);
}

bool spaces_mark_seen(struct spaces *s, uint32_t pid)
{
	uint32_t *g = slot(s, pid, true);

	if (*g & SPACES_SEEN)
		return false;
	*g |= SPACES_SEEN;
	return true;
}

size_t spaces_sweep(struct spaces *s)
{
	size_t n = 0;

	for (size_t k = 0; k < s->cap; k++)
		if (s->pid[k] && s->pid[k] != SPACES_TOMB && !(s->gen[k] & ~SPACES_SEEN) &&
		    kill((pid_t)(s->pid[k] - 1), 0) && errno == ESRCH) {
			s->pid[k] = SPACES_TOMB;
			s->n--;
			s->tomb++;
			n++;
		}
	return n;
}

void spaces_free(struct spaces *s)
{
	free(s->pid);
	free(s->gen);
	*s = (struct spaces){ 0 };
}
