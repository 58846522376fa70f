// SPDX-License-Identifier: GPL-2.0-only
/* Tables into the kwalk maps before any process maps their files (kwalk_preload.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kwalk_loader.h"
#include "kwalk_preload.h"

int kw_preload_file(struct kw_loader *l, const char *path)
{
	struct stat st;
	struct kw_umod *um;

	if (stat(path, &st))
		return -errno;
	return kw_mod_of_file(l, path, &st, &um);
}

int kw_preload_vdso(struct kw_loader *l)
{
	char *text = NULL;
	size_t tlen = 0, nm = 0;
	struct dwunw_map *maps = NULL;
	struct kw_umod *um = NULL;
	int err = -ENOENT;

	if (dwunw_maps_read(getpid(), &text, &tlen) != DWUNW_OK)
		return -ESRCH;
	dwunw_maps_parse(text, tlen, NULL, &nm);
	maps = calloc(nm ? nm : 1, sizeof(*maps));
	if (maps && !dwunw_maps_parse(text, tlen, maps, &nm))
		for (size_t i = 0; i < nm; i++)
			if (!strcmp(maps[i].path, "[vdso]")) {
				if (kw_vdso_mod(l, getpid(), maps[i].start, maps[i].end - maps[i].start, &um) || !um)
					break;
				err = kw_mod_ready(l, um, ++l->clock);
				break;
			}
	free(maps);
	free(text);
	return err;
}

/* The command's executable and what `ldd` says it loads: into the maps before it starts. */
void kw_preload_command(struct kw_loader *l, const char *cmd)
{
	char line[1300], exe[1024], q[1200], *p, *e;
	FILE *f;

	/* [vdso]: no file to tell of, so without it every exec would load the process from /proc */
	kw_preload_vdso(l);
	/* a -c command line: its program is the first word (sh -c runs it) */
	snprintf(exe, sizeof(exe), "%s", cmd);
	exe[strcspn(exe, " \t\n")] = 0;
	if (!exe[0] || strchr(exe, '\''))
		return;
	snprintf(q, sizeof(q), "command -v '%s'", exe);
	f = popen(q, "r");
	if (!f)
		return;
	exe[0] = 0;
	if (!fgets(exe, sizeof(exe), f))
		exe[0] = 0;
	pclose(f);
	exe[strcspn(exe, "\n")] = 0;
	if (!exe[0] || !realpath(exe, q))
		return;
	kw_preload_file(l, q);
	snprintf(line, sizeof(line), "ldd '%s' 2>/dev/null", q);
	f = popen(line, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		/* "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "\t/lib64/ld-linux... (0x...)" */
		p = strchr(line, '/');
		if (!p)
			continue;
		e = strstr(p, " (");
		if (e)
			*e = 0;
		p[strcspn(p, "\n")] = 0;
		if (realpath(p, exe))
			kw_preload_file(l, exe);
	}
	pclose(f);
}
