// SPDX-License-Identifier: GPL-2.0-only
/* The mapping tracker's programs, attached once: see mmap_track.h. */
#include <errno.h>
#include <bpf/libbpf.h>
#include "mmap_track.h"

static const char *const progs[2] = { "mt_sys_enter", "mt_sys_exit" };
static struct bpf_link *links[2];
static unsigned users;

static void destroy(void)
{
	for (int i = 0; i < 2; i++) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
}

int mmap_track_attach(struct bpf_object *obj)
{
	if (users) {
		users++;
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, progs[i]);

		links[i] = p ? bpf_program__attach(p) : NULL;
		if (!links[i]) {
			int err = p ? -errno : -ENOENT;

			destroy();
			return err;
		}
	}
	users = 1;
	return 0;
}

void mmap_track_detach(void)
{
	if (users && --users == 0)
		destroy();
}
