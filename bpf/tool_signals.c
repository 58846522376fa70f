// SPDX-License-Identifier: GPL-2.0-only
/* Signals, the parent's death and a closed stdout: see tool_signals.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "tool_opts.h"
#include "tool_signals.h"

static volatile sig_atomic_t stop_sig;
static bool stdout_gone;

static void on_stop(int sig)
{
	stop_sig = sig;
}

void tool_signals_init(void)
{
	struct sigaction sa;
	const char *parent = getenv("DWUNW_PARENT_PID");

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (parent && *parent) {
		pid_t want = (pid_t)atoi(parent);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		/* the parent may have died before the line above: then we were reparented */
		if (want > 0 && getppid() != want)
			tool_fail(TOOL_EXIT_ERROR, "parent process %d is gone", (int)want);
	}
}

bool tool_stop_requested(void)
{
	return stop_sig != 0;
}

int tool_stop_signal(void)
{
	return stop_sig;
}

bool tool_stdout_closed(void)
{
	struct pollfd p = { .fd = STDOUT_FILENO, .events = 0 };

	if (stdout_gone)
		return true;
	/* a pipe's write end polls POLLERR once no reader is left; a socket POLLHUP */
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
		stdout_gone = true;
	return stdout_gone;
}

bool tool_flush_stdout(void)
{
	if (fflush(stdout) == EOF && errno == EPIPE)
		stdout_gone = true;
	if (ferror(stdout) && errno == EPIPE)
		stdout_gone = true;
	return !stdout_gone;
}
