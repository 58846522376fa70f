// SPDX-License-Identifier: GPL-2.0-only
/* Signals, the parent's death and a closed stdout: see tool_signals.h. */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <bpf/libbpf.h>
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

int tool_links_attach(struct bpf_object *obj, const char *const *names, size_t n,
		      struct bpf_link ***links, size_t *nlinks)
{
	for (size_t i = 0; i < n; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, names[i]);
		struct bpf_link *l = p ? bpf_program__attach(p) : NULL;
		struct bpf_link **nl;

		if (!l)
			return p ? -errno : -ENOENT;
		nl = realloc(*links, (*nlinks + 1) * sizeof(**links));
		if (!nl) {
			bpf_link__destroy(l);
			return -ENOMEM;
		}
		*links = nl;
		(*links)[(*nlinks)++] = l;
	}
	return 0;
}

void tool_links_destroy(struct bpf_link **links, size_t n)
{
	tool_links_destroy_fds(links, n, NULL, 0);
}

void tool_links_destroy_fds(struct bpf_link **links, size_t n, int *fds, size_t nfds)
{
	int p[2] = { -1, -1 };
	pid_t pid = n + nfds && pipe2(p, O_CLOEXEC) == 0 ? fork() : -1;

	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		char c;

		/* nobody waits for this process's output: a pipe reader must see end of file now */
		if (fd >= 0)
			for (int i = 0; i < 3; i++)
				dup2(fd, i);
		prctl(PR_SET_PDEATHSIG, 0);
		prctl(PR_SET_NAME, "dwunw-detach");
		/*
		 * Wait for the tool's exit (end of file): whoever closes a link last pays for the
		 * detach, and that must be this process, not the tool.
		 */
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		for (size_t i = 0; i < n; i++)
			if (links[i])
				bpf_link__destroy(links[i]);
		for (size_t i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		_exit(0);
	}
	if (p[0] >= 0)
		close(p[0]); /* p[1] stays open until this process exits */
	if (pid < 0 && p[1] >= 0)
		close(p[1]);
	for (size_t i = 0; i < n; i++) {
		/* the child holds them: ours close when this process exits; no fork: close here */
		if (pid < 0 && links[i])
			bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
	for (size_t i = 0; i < nfds; i++) {
		if (pid < 0 && fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}
