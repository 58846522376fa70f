// SPDX-License-Identifier: GPL-2.0-only
/* A command's modules into the kwalk maps before it runs (kwalk_preload.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwalk_preload.h"
#include "kwalk_user.h"

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
