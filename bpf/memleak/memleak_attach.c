// SPDX-License-Identifier: GPL-2.0-only
/* memleak's probes and links (memleak_attach.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "dwunw.h"
#include "runtime/mappings.h"
#include "memleak_attach.h"
#include "memleak_opts.h"
#include "memleak_state.h"
#include "memleak.skel.h"
#include "runtime/command.h"
#include "runtime/tool_signals.h"
#include "runtime/tool_util.h"
#include "runtime/uprobe_set.h"

/* The allocator object's path: from the target's maps (-p), else our own maps, else ldconfig. */
char *ml_resolve_obj(const struct memleak_ctx *ml, pid_t pid)
{
	const char *name = base_name(ml->env.obj);

	if (strchr(ml->env.obj, '/')) {
		if (access(ml->env.obj, R_OK))
			die("%s: %s", ml->env.obj, strerror(errno));
		return strdup(ml->env.obj);
	}
	for (int pass = 0; pass < 2; pass++) {
		struct dwunw_map *e;
		char *found = NULL;
		size_t n;

		if (pass == 0 && !pid)
			continue;
		if (pass == 1 && pid)
			break; /* -p: only what the target maps */
		if (dwunw_maps_load(pass == 0 ? pid : 0, &e, &n))
			continue;
		for (size_t i = 0; i < n && !found; i++) {
			const char *p = e[i].path;

			if (p[0] != '/' || (e[i].flags & DWUNW_MAP_DELETED) || strcmp(base_name(p), name))
				continue;
			if (pass == 0) {
				/*
				 * A process in another mount namespace maps another file under
				 * this path: then go through its root (uprobes follow the inode).
				 */
				struct stat here, there;

				if (asprintf(&found, "/proc/%d/root%s", pid, p) < 0)
					die("out of memory");
				if (stat(found, &there) == 0 &&
				    (stat(p, &here) || here.st_dev != there.st_dev ||
				     here.st_ino != there.st_ino))
					break;
				free(found);
			}
			found = strdup(p);
		}
		free(e);
		if (found)
			return found;
	}
	if (pid)
		die("pid %d does not map %s (not a user process, or another allocator: see -O)", pid,
		    ml->env.obj);
	static const char *dirs[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
				      "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
				      "/lib64", "/usr/lib64", "/lib", "/usr/lib" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *p;

		if (asprintf(&p, "%s/%s", dirs[i], name) < 0)
			die("out of memory");
		if (access(p, R_OK) == 0)
			return p;
		free(p);
	}
	die("%s: not found", ml->env.obj);
	return NULL;
}

/* The allocator's functions: those glibc may lack are optional. */
static void probes_init(struct memleak_ctx *ml)
{
	const struct uprobe_spec p[] = {
		{ "malloc", ml->skel->progs.malloc_enter, true, false, ML_FN_MALLOC },
		{ "calloc", ml->skel->progs.calloc_enter, true, false, ML_FN_CALLOC },
		{ "realloc", ml->skel->progs.realloc_enter, true, false, ML_FN_REALLOC },
		{ "reallocarray", ml->skel->progs.reallocarray_enter, true, true, ML_FN_REALLOCARRAY },
		{ "aligned_alloc", ml->skel->progs.aligned_alloc_enter, true, true, ML_FN_ALIGNED_ALLOC },
		{ "posix_memalign", ml->skel->progs.posix_memalign_enter, true, false,
		  ML_FN_POSIX_MEMALIGN },
		{ "memalign", ml->skel->progs.memalign_enter, true, true, ML_FN_MEMALIGN },
		{ "valloc", ml->skel->progs.valloc_enter, true, true, ML_FN_VALLOC },
		{ "pvalloc", ml->skel->progs.pvalloc_enter, true, true, ML_FN_PVALLOC },
		{ "mmap", ml->skel->progs.mmap_enter, true, false, ML_FN_MMAP },
		{ "free", ml->skel->progs.free_enter, false, false, ML_FN_FREE },
		{ "munmap", ml->skel->progs.munmap_enter, false, false, ML_FN_MUNMAP },
	};

	memcpy(ml->probes, p, sizeof(p));
	ml->ups = (struct uprobe_set){
		.probes = ml->probes,
		.n = sizeof(p) / sizeof(p[0]),
		.prefix = ml->env.sym_prefix,
		.at_entry = ml->env.probe_at_entry,
		.verbose = ml->env.verbose,
		.ret_prog = ml->skel->progs.alloc_return,
		.multi_entry = ml->skel->progs.ml_multi_enter,
		.multi_ret = ml->skel->progs.ml_multi_return,
	};
}

void ml_attach_choose(struct memleak_ctx *ml)
{
	probes_init(ml);
	uprobe_set_choose(&ml->ups, ml->env.no_multi);
}

void ml_attach_all(struct memleak_ctx *ml, const char *path, pid_t pid)
{
	uprobe_set_attach(&ml->ups, path, pid, &ml->links, &ml->nlinks);
	if (ml->fr.maps) {
		int err = mappings_attach(ml->skel->obj, &ml->links, &ml->nlinks);

		if (err)
			die("cannot attach the mapping-change programs: %s", strerror(-err));
	}
	struct bpf_link *l = bpf_program__attach(ml->skel->progs.ml_exec);
	if (!l)
		die("cannot attach sched_process_exec: %s", strerror(errno));
	ml->links = xrealloc(ml->links, (ml->nlinks + 2) * sizeof(*ml->links));
	ml->links[ml->nlinks++] = l;
	l = bpf_program__attach(ml->skel->progs.ml_thread_exit);
	if (!l)
		die("cannot attach sched_process_exit: %s", strerror(errno));
	ml->links[ml->nlinks++] = l;
}

void ml_attach_follow(struct memleak_ctx *ml)
{
	int err = follow_attach(ml->skel->obj, &ml->links, &ml->nlinks);

	if (!err)
		err = follow_add_root(ml->skel->obj, ml->target_pid);
	if (err)
		die("cannot follow the command's processes: %s", strerror(-err));
}

void ml_detach_all(struct memleak_ctx *ml)
{
	tool_links_destroy_fds(ml->links, ml->nlinks, ml->ups.fds, ml->ups.nfds);
}
