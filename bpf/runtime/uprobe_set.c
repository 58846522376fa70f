// SPDX-License-Identifier: GPL-2.0-only
/* A set of uprobes on one file, per-probe or multi-uprobe links (uprobe_set.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "tool_util.h"
#include "uprobe_attach.h"
#include "uprobe_multi.h"
#include "uprobe_set.h"

void uprobe_set_choose(struct uprobe_set *s, bool no_multi)
{
	s->multi = !no_multi && um_supported();
	for (size_t i = 0; i < s->n; i++)
		bpf_program__set_autoload(s->probes[i].entry, !s->multi);
	bpf_program__set_autoload(s->ret_prog, !s->multi);
	bpf_program__set_autoload(s->multi_entry, s->multi);
	bpf_program__set_autoload(s->multi_ret, s->multi);
	if (s->multi) {
		bpf_program__set_expected_attach_type(s->multi_entry, UM_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(s->multi_ret, UM_ATTACH_TYPE);
	}
}

/* A function that cannot be probed: left out when optional, else the end. */
static void probe_failed(const struct uprobe_set *s, const struct uprobe_spec *p, const char *name,
			 const char *path, int err)
{
	if (!p->optional)
		die("cannot probe %s in %s: %s", name, path, strerror(-err));
	if (s->verbose)
		fprintf(stderr, "%s: %s not probed in %s: %s\n", tool_name(), name, path, strerror(-err));
}

struct link_list {
	struct bpf_link ***v;
	size_t *n;
};

static int attach_one(const struct uprobe_set *s, struct link_list *out, struct bpf_program *prog,
		      const char *path, const char *fn, bool ret, bool has_ret, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = fn, .retprobe = ret);
	struct ua_site site;
	size_t off = 0;

	/*
	 * At the first instruction the kernel emulates (uprobe_attach.h), else as libbpf would.
	 * Only functions without a return probe move: with one, the entry program must read the
	 * return address before any return probe on the function hijacks it, which only one shared
	 * breakpoint at the entry guarantees (another tracer's return probe at the entry would run
	 * first, and a snapshot would hold the trampoline). Allocators start with an emulated push.
	 */
	if (ua_find(path, fn, !s->at_entry && !has_ret, &site) == 0) {
		uo.func_name = NULL;
		off = site.probe_off;
		if (s->verbose && !ret)
			fprintf(stderr, "%s: %s probed at %s\n", tool_name(), fn, site.why);
	}
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid, path, off, &uo);

	if (!l)
		return -errno ? -errno : -EINVAL;
	*out->v = xrealloc(*out->v, (*out->n + 1) * sizeof(**out->v));
	(*out->v)[(*out->n)++] = l;
	return 0;
}

/* One link per probe: the return probe first, so a call whose entry is seen has its return. */
static void attach_per_probe(const struct uprobe_set *s, struct link_list *out, const char *path,
			     pid_t pid)
{
	char name[256];

	for (size_t i = 0; i < s->n; i++) {
		const struct uprobe_spec *p = &s->probes[i];
		int err;

		snprintf(name, sizeof(name), "%s%s", s->prefix, p->fn);
		err = p->ret ? attach_one(s, out, s->ret_prog, path, name, true, true, pid) : 0;
		if (!err)
			err = attach_one(s, out, p->entry, path, name, false, p->ret, pid);
		if (err)
			probe_failed(s, p, name, path, err);
	}
}

/* Both links at once: the return probes first, as attach_per_probe does one function at a time. */
static void attach_multi(struct uprobe_set *s, const char *path, pid_t pid)
{
	uint64_t *off = xcalloc(2 * s->n, sizeof(*off)), *cookie = xcalloc(2 * s->n, sizeof(*cookie));
	uint64_t *ret_off = off + s->n, *ret_cookie = cookie + s->n;
	uint32_t n = 0, nret = 0;
	char name[256];

	for (size_t i = 0; i < s->n; i++) {
		const struct uprobe_spec *p = &s->probes[i];
		struct ua_site site;
		int err;

		snprintf(name, sizeof(name), "%s%s", s->prefix, p->fn);
		/* the same places as attach_one's */
		err = ua_find(path, name, !s->at_entry && !p->ret, &site);
		if (err) {
			probe_failed(s, p, name, path, err);
			continue;
		}
		if (s->verbose)
			fprintf(stderr, "%s: %s probed at %s\n", tool_name(), name, site.why);
		if (p->ret) {
			ret_off[nret] = site.entry_off;
			ret_cookie[nret++] = p->cookie;
		}
		off[n] = site.probe_off;
		cookie[n++] = p->cookie;
	}
	if (nret) {
		int fd = um_attach(bpf_program__fd(s->multi_ret), path, ret_off, ret_cookie, nret, true,
				   pid);

		if (fd < 0)
			die("cannot attach the return probes to %s: %s", path, strerror(-fd));
		s->fds[s->nfds++] = fd;
	}
	int fd = um_attach(bpf_program__fd(s->multi_entry), path, off, cookie, n, false, pid);
	if (fd < 0)
		die("cannot attach the entry probes to %s: %s", path, strerror(-fd));
	s->fds[s->nfds++] = fd;
	free(off);
	free(cookie);
}

void uprobe_set_attach(struct uprobe_set *s, const char *path, pid_t pid, struct bpf_link ***links,
		       size_t *nlinks)
{
	struct link_list out = { links, nlinks };
	uint64_t t0 = mono_ns();

	if (s->multi)
		attach_multi(s, path, pid);
	else
		attach_per_probe(s, &out, path, pid);
	if (s->verbose)
		fprintf(stderr, "%s: uprobes attached in %.1f ms (%s)\n", tool_name(),
			(double)(mono_ns() - t0) / 1e6,
			s->multi ? "two multi-uprobe links" : "one link per probe");
}
