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

/* -c COMMAND, -- PROG ARGS: the command, started stopped before exec (runtime/command.c). */
struct command ml_cmd;

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
void ml_start_command(void)
{
	char word[4096], *script = NULL;
	const char *prog;
	int rc;

	if (env.prog_argv) {
		rc = command_check_program(env.prog_argv[0]);
		if (rc)
			exit(rc);
		command_start(&ml_cmd, env.prog_argv, NULL);
		return;
	}
	prog = command_shell_program(env.command, word, sizeof(word));
	if (prog && (rc = command_check_program(prog)))
		exit(rc);
	if (simple_command(env.command) && asprintf(&script, "exec %s", env.command) < 0)
		die("out of memory");
	command_start(&ml_cmd, NULL, script ? script : env.command);
	ml_cmd.what = prog ? prog : env.command;
	/* script stays allocated: the child has its own copy, and it is small */
}

void ml_stop_command(void)
{
	command_stop(&ml_cmd);
}

/*
 * fp mode symbolizes at report time, possibly after the target exited: keep a copy of its maps
 * that outlives it (refreshed every second while it runs). dwarf mode symbolizes each stack
 * when its record arrives, with libdwunw's own maps cache (refreshed on unknown pcs).
 */
void ml_keep_maps(void)
{
	if (env.unwind != ML_UNWIND_FP)
		return;
#ifdef HAVE_DWUNW
	char fn[64], *text = NULL;
	size_t len = 0, cap = 0;
	ssize_t r;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", target_pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		if (cap - len < 4096)
			text = xrealloc(text, cap = cap ? cap * 2 : 65536);
		r = read(fd, text + len, cap - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (len)
		dwunw_maps_set(&dctx, target_pid, text, len);
	free(text);
#else
	syms_proc_refresh(syms);
#endif
}

bool ml_target_gone(int pidfd)
{
	if (following) {
		int status;

		/* the command's process is gone, and every process it started */
		command_exited(&ml_cmd, &status);
		return ml_cmd.pid <= 0 && !follow_any_alive(skel->obj);
	}
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		return poll(&p, 1, 0) == 1;
	}
	return kill(target_pid, 0) && errno == ESRCH;
}

/*
 * -c, --: once the command runs (neither our fork nor /bin/sh any more), a static executable maps
 * no libc.so.6: the probes cannot see its allocations, say so rather than print empty reports.
 */
void ml_static_target_check(const char *obj)
{
	static bool done;
	struct stat sh, self, exe;
	char fn[64], path[4096];

	if (done || !following || ml_cmd.pid <= 0 || strchr(env.obj, '/'))
		return;
	snprintf(fn, sizeof(fn), "/proc/%d/exe", target_pid);
	if (stat(fn, &exe) || stat("/proc/self/exe", &self))
		return;
	if (exe.st_dev == self.st_dev && exe.st_ino == self.st_ino)
		return; /* not exec'd yet */
	if (env.command && simple_command(env.command) && stat("/bin/sh", &sh) == 0 && exe.st_dev == sh.st_dev &&
	    exe.st_ino == sh.st_ino)
		return; /* the shell, before its exec of the command */
	done = true;
	if (dwunw_exe_is_static(target_pid, path, sizeof(path)) == 1)
		die("pid %d (%s) is statically linked: it does not use %s, where the probes are (-O %s probes its own allocator)",
		    target_pid, path, obj, path);
}
