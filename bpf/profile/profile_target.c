// SPDX-License-Identifier: GPL-2.0-only
/* profile's command target: see profile_target.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "profile_target.h"
#include "runtime/tool_util.h"

static pid_t child;
static int go_fd = -1;

pid_t ptarget_start(char **argv)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		char c;

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(127); /* profile gave up before starting it */
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s: %s\n", tool_name(), argv[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	go_fd = p[1];
	return child;
}

void ptarget_release(void)
{
	if (go_fd < 0)
		return;
	if (write(go_fd, "g", 1) != 1)
		die("cannot start the command: %s", strerror(errno));
	close(go_fd);
	go_fd = -1;
}

bool ptarget_exited(int *status)
{
	if (child <= 0)
		return false;
	if (waitpid(child, status, WNOHANG) == child) {
		child = 0;
		return true;
	}
	return false;
}

void ptarget_stop(void)
{
	if (go_fd >= 0)
		close(go_fd);
	go_fd = -1;
	if (child > 0) {
		if (waitpid(child, NULL, WNOHANG) == 0) {
			kill(child, SIGTERM);
			waitpid(child, NULL, 0);
		}
		child = 0;
	}
}
