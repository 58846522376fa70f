// SPDX-License-Identifier: GPL-2.0-only
/* memleak's target: the command, its maps, its end (memleak_target.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HAVE_DWUNW
#include "dwunw.h"
#endif
#include "runtime/capture_user.h"
#include "runtime/frames.h"
#include "memleak_opts.h"
#include "memleak_state.h"
#include "memleak_target.h"
#include "runtime/preflight.h"
#include "memleak.skel.h"
#include "runtime/syms.h"
#include "runtime/tool_util.h"

/* A simple command runs as "exec COMMAND": the shell becomes the program (one process less). */
static bool simple_command(const char *c)
{
	const char *p = c;

	if (strpbrk(c, ";|&\n()`") || strstr(c, "$("))
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	/* NAME=value as the first word: an assignment, which exec does not take */
	if (*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) {
		const char *q = p;

		while (*q == '_' || (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
		       (*q >= '0' && *q <= '9'))
			q++;
		if (*q == '=')
			return false;
	}
	return *p != 0;
}

/* Fork the command (stopped before exec); a program that cannot run ends here: 127 or 126. */
void ml_start_command(struct memleak_ctx *ml)
{
	char word[4096], *script = NULL;
	const char *prog;
	int rc;

	if (ml->env.prog_argv) {
		rc = command_check_program(ml->env.prog_argv[0]);
		if (rc)
			exit(rc);
		command_start(&ml->cmd, ml->env.prog_argv, NULL);
		return;
	}
	prog = command_shell_program(ml->env.command, word, sizeof(word));
	if (prog && (rc = command_check_program(prog)))
		exit(rc);
	if (simple_command(ml->env.command) && asprintf(&script, "exec %s", ml->env.command) < 0)
		die("out of memory");
	command_start(&ml->cmd, NULL, script ? script : ml->env.command);
	/* prog points into word, gone with this frame: the preload of the walker's tables
	 * (kw_preload_command) reads the name after we return */
	ml->cmd.what = prog ? strdup(prog) : NULL;
	if (!ml->cmd.what)
		ml->cmd.what = ml->env.command;
	/* script and what stay allocated: the child has its own copy, and they are small */
}

/*
 * fp mode symbolizes at report time, possibly after the target exited: keep a copy of its maps
 * that outlives it (refreshed every second while it runs). dwarf mode symbolizes each stack
 * when its record arrives, with libdwunw's own maps cache (refreshed on unknown pcs).
 */
void ml_keep_maps(struct memleak_ctx *ml)
{
	if (ml->env.unwind != ML_UNWIND_FP)
		return;
#ifdef HAVE_DWUNW
	struct dwunw_map *e = NULL;
	size_t n;

	if (dwunw_maps_load(ml->target_pid, &e, &n) == 0)
		dwunw_maps_set_entries(&ml->fr.dctx, ml->target_pid, e, n);
	free(e);
#else
	syms_proc_refresh(ml->fr.syms);
#endif
}

bool ml_target_gone(struct memleak_ctx *ml, int pidfd)
{
	if (ml->following) {
		int status;

		/* the command's process is gone, and every process it started */
		command_exited(&ml->cmd, &status);
		return ml->cmd.pid <= 0 && !follow_any_alive(ml->skel->obj);
	}
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		return poll(&p, 1, 0) == 1;
	}
	return kill(ml->target_pid, 0) && errno == ESRCH;
}

/*
 * -c, --: once the command runs (neither our fork nor /bin/sh any more), a static executable maps
 * no libc.so.6: the probes cannot see its allocations, say so rather than print empty reports.
 */
void ml_static_target_check(struct memleak_ctx *ml, const char *obj)
{
	static bool done;
	struct stat sh, self, exe;
	char fn[64], path[4096];

	if (done || !ml->following || ml->cmd.pid <= 0 || strchr(ml->env.obj, '/'))
		return;
	snprintf(fn, sizeof(fn), "/proc/%d/exe", ml->target_pid);
	if (stat(fn, &exe) || stat("/proc/self/exe", &self))
		return;
	if (exe.st_dev == self.st_dev && exe.st_ino == self.st_ino)
		return; /* not exec'd yet */
	if (ml->env.command && simple_command(ml->env.command) && stat("/bin/sh", &sh) == 0 && exe.st_dev == sh.st_dev &&
	    exe.st_ino == sh.st_ino)
		return; /* the shell, before its exec of the command */
	done = true;
	if (dwunw_exe_is_static(ml->target_pid, path, sizeof(path)) == 1)
		die("pid %d (%s) is statically linked: it does not use %s, where the probes are (-O %s probes its own allocator)",
		    ml->target_pid, path, obj, path);
}
