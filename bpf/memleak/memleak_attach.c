// SPDX-License-Identifier: GPL-2.0-only
/* memleak's probes and links (memleak_attach.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/libbpf.h>
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
char *ml_resolve_obj(pid_t pid)
{
	const char *name = base_name(env.obj);
	char fn[64], line[4096];
	FILE *f;

	if (strchr(env.obj, '/')) {
		if (access(env.obj, R_OK))
			die("%s: %s", env.obj, strerror(errno));
		return strdup(env.obj);
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0 && !pid)
			continue;
		if (pass == 1 && pid)
			break; /* -p: only what the target maps */
		if (pass == 0)
			snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
		else
			snprintf(fn, sizeof(fn), "/proc/self/maps");
		f = fopen(fn, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char *p = strchr(line, '/');

			if (!p)
				continue;
			p[strcspn(p, "\n")] = 0;
			if (strcmp(base_name(p), name))
				continue;
			fclose(f);
			if (pass == 0) {
				/*
				 * A process in another mount namespace maps another file under
				 * this path: then go through its root (uprobes follow the inode).
				 */
				struct stat here, there;
				char *r;

				if (asprintf(&r, "/proc/%d/root%s", pid, p) < 0)
					die("out of memory");
				if (stat(r, &there) == 0 &&
				    (stat(p, &here) || here.st_dev != there.st_dev ||
				     here.st_ino != there.st_ino))
					return r;
				free(r);
			}
			return strdup(p);
		}
		fclose(f);
	}
	if (pid)
		die("pid %d does not map %s (not a user process, or another allocator: see -O)", pid,
		    env.obj);
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
	die("%s: not found", env.obj);
	return NULL;
}

static struct bpf_link **links;
static size_t nlinks;
static struct uprobe_spec probes[ML_FN_NR];
static struct uprobe_set ups;

/* The allocator's functions: those glibc may lack are optional. */
static void probes_init(void)
{
	const struct uprobe_spec p[] = {
		{ "malloc", skel->progs.malloc_enter, true, false, ML_FN_MALLOC },
		{ "calloc", skel->progs.calloc_enter, true, false, ML_FN_CALLOC },
		{ "realloc", skel->progs.realloc_enter, true, false, ML_FN_REALLOC },
		{ "reallocarray", skel->progs.reallocarray_enter, true, true, ML_FN_REALLOCARRAY },
		{ "aligned_alloc", skel->progs.aligned_alloc_enter, true, true, ML_FN_ALIGNED_ALLOC },
		{ "posix_memalign", skel->progs.posix_memalign_enter, true, false,
		  ML_FN_POSIX_MEMALIGN },
		{ "memalign", skel->progs.memalign_enter, true, true, ML_FN_MEMALIGN },
		{ "valloc", skel->progs.valloc_enter, true, true, ML_FN_VALLOC },
		{ "pvalloc", skel->progs.pvalloc_enter, true, true, ML_FN_PVALLOC },
		{ "mmap", skel->progs.mmap_enter, true, false, ML_FN_MMAP },
		{ "free", skel->progs.free_enter, false, false, ML_FN_FREE },
		{ "munmap", skel->progs.munmap_enter, false, false, ML_FN_MUNMAP },
	};

	memcpy(probes, p, sizeof(p));
	ups = (struct uprobe_set){
		.probes = probes,
		.n = sizeof(p) / sizeof(p[0]),
		.prefix = env.sym_prefix,
		.at_entry = env.probe_at_entry,
		.verbose = env.verbose,
		.ret_prog = skel->progs.alloc_return,
		.multi_entry = skel->progs.ml_multi_enter,
		.multi_ret = skel->progs.ml_multi_return,
	};
}

void ml_attach_choose(void)
{
	probes_init();
	uprobe_set_choose(&ups, env.no_multi);
}

void ml_attach_all(const char *path, pid_t pid)
{
	uprobe_set_attach(&ups, path, pid, &links, &nlinks);
	if (mappings_on) {
		int err = mappings_attach(skel->obj, &links, &nlinks);

		if (err)
			die("cannot attach the mapping-change programs: %s", strerror(-err));
	}
	struct bpf_link *l = bpf_program__attach(skel->progs.ml_exec);
	if (!l)
		die("cannot attach sched_process_exec: %s", strerror(errno));
	links = xrealloc(links, (nlinks + 2) * sizeof(*links));
	links[nlinks++] = l;
	l = bpf_program__attach(skel->progs.ml_thread_exit);
	if (!l)
		die("cannot attach sched_process_exit: %s", strerror(errno));
	links[nlinks++] = l;
}

void ml_attach_follow(void)
{
	int err = follow_attach(skel->obj, &links, &nlinks);

	if (!err)
		err = follow_add_root(skel->obj, target_pid);
	if (err)
		die("cannot follow the command's processes: %s", strerror(-err));
}

void ml_detach_all(void)
{
	tool_links_destroy_fds(links, nlinks, ups.fds, ups.nfds);
}
