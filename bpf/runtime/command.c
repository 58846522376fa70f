// SPDX-License-Identifier: GPL-2.0-only
/* The traced command and the followed process set: see command.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "command.h"
#include "tool_opts.h"
#include "tool_signals.h"
#include "tool_util.h"

/* ---- the program ---------------------------------------------------------------------------- */

/* 0 when path can be executed, else the errno execve would give (roughly). */
static int exec_errno(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (access(path, X_OK))
		return errno;
	return 0;
}

static int report_exec_error(const char *prog, int err)
{
	if (err == ENOENT || err == ENOTDIR) {
		if (strchr(prog, '/'))
			fprintf(stderr, "%s: %s: no such file\n", tool_name(), prog);
		else
			fprintf(stderr, "%s: %s: command not found\n", tool_name(), prog);
		return TOOL_EXIT_NOTFOUND;
	}
	if (err == EISDIR)
		fprintf(stderr, "%s: %s: is a directory\n", tool_name(), prog);
	else if (err == EACCES)
		fprintf(stderr, "%s: %s: permission denied (not executable)\n", tool_name(), prog);
	else if (err == ENOEXEC)
		fprintf(stderr, "%s: %s: exec format error (not a program for this machine)\n",
			tool_name(), prog);
	else
		fprintf(stderr, "%s: %s: cannot execute: %s\n", tool_name(), prog, strerror(err));
	return TOOL_EXIT_NOEXEC;
}

int command_check_program(const char *prog)
{
	int err = ENOENT, e;

	if (!*prog)
		return report_exec_error(prog, ENOENT);
	if (strchr(prog, '/')) {
		err = exec_errno(prog);
		return err ? report_exec_error(prog, err) : 0;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		char buf[4096];

		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)n, path, n ? "/" : "", prog);
		e = exec_errno(buf);
		if (!e)
			return 0;
		if (e != ENOENT && e != ENOTDIR)
			err = e; /* found but not executable: execvp reports EACCES */
		path += n + (path[n] == ':');
	}
	return report_exec_error(prog, err);
}

/* Shell builtins and keywords (POSIX sh, dash, bash): a first word that needs no program. */
static const char *const shell_words[] = {
	".", ":", "[", "alias", "bg", "break", "case", "cd", "command", "continue", "echo", "eval",
	"exec", "exit", "export", "false", "fc", "fg", "for", "getopts", "hash", "if", "jobs", "kill",
	"local", "printf", "pwd", "read", "readonly", "return", "set", "shift", "source", "test",
	"times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "until", "wait",
	"while", "{", "!", "time", "nice", "env",
};

const char *command_shell_program(const char *cmd, char *buf, size_t size)
{
	const char *p = cmd, *q;
	size_t n;

	if (strpbrk(cmd, ";|&\n()`<>$*?[{~\\\"") || strstr(cmd, "$("))
		return NULL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\'') { /* one single-quoted first word */
		q = strchr(p + 1, '\'');
		if (!q || (q[1] && q[1] != ' ' && q[1] != '\t'))
			return NULL;
		p++;
		n = (size_t)(q - p);
	} else {
		n = strcspn(p, " \t'");
		if (p[n] == '\'')
			return NULL;
	}
	if (!n || n >= size || memchr(p, '=', n))
		return NULL;
	memcpy(buf, p, n);
	buf[n] = 0;
	for (size_t i = 0; i < sizeof(shell_words) / sizeof(shell_words[0]); i++)
		if (!strcmp(buf, shell_words[i]))
			return NULL;
	return buf;
}

/* ---- the child ------------------------------------------------------------------------------ */

void command_start(struct command *t, char *const *argv, const char *cmd)
{
	pid_t parent = getpid();
	int go[2], err[2];
	pid_t pid;

	memset(t, 0, sizeof(*t));
	t->go_fd = t->err_fd = -1;
	t->what = argv ? argv[0] : cmd;
	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		tool_fail(TOOL_EXIT_ERROR, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		tool_fail(TOOL_EXIT_ERROR, "fork: %s", strerror(errno));
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		/* dies with the tool; a tool that died before this line was not our parent any more */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(TOOL_EXIT_ERROR);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(TOOL_EXIT_ERROR); /* the tool gave up */
		if (argv)
			execvp(argv[0], argv);
		else
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		e = errno;
		if (write(err[1], &e, sizeof(e)) != sizeof(e))
			_exit(TOOL_EXIT_NOEXEC);
		_exit(e == ENOENT ? TOOL_EXIT_NOTFOUND : TOOL_EXIT_NOEXEC);
	}
	close(go[0]);
	close(err[1]);
	t->pid = pid;
	t->go_fd = go[1];
	t->err_fd = err[0];
}

int command_go(struct command *t)
{
	ssize_t r;
	int e = 0;

	if (t->go_fd < 0)
		return 0;
	if (write(t->go_fd, "g", 1) != 1)
		tool_fail(TOOL_EXIT_ERROR, "cannot start the command: %s", strerror(errno));
	close(t->go_fd);
	t->go_fd = -1;
	/* end of file: exec succeeded (the pipe is close-on-exec); else its errno */
	do
		r = read(t->err_fd, &e, sizeof(e));
	while (r < 0 && errno == EINTR);
	close(t->err_fd);
	t->err_fd = -1;
	if (r != sizeof(e))
		return 0;
	waitpid(t->pid, NULL, 0);
	t->pid = 0;
	return report_exec_error(t->what, e);
}

bool command_exited(struct command *t, int *status)
{
	if (t->pid <= 0)
		return true;
	if (waitpid(t->pid, status, WNOHANG) == t->pid) {
		t->pid = 0;
		return true;
	}
	return false;
}

void command_stop(struct command *t)
{
	if (t->go_fd >= 0)
		close(t->go_fd);
	if (t->err_fd >= 0)
		close(t->err_fd);
	t->go_fd = t->err_fd = -1;
	if (t->pid > 0 && waitpid(t->pid, NULL, WNOHANG) == 0) {
		kill(t->pid, SIGTERM);
		waitpid(t->pid, NULL, 0);
	}
	t->pid = 0;
}

/* ---- the followed set ----------------------------------------------------------------------- */

static int map_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
}

int follow_add_root(struct bpf_object *obj, pid_t pid)
{
	struct follow_proc p = { .slot = FOLLOW_ROOT_SLOT };
	struct follow_slot s = { .tgid = (__u32)pid };
	__u32 key = (__u32)pid, slot = FOLLOW_ROOT_SLOT;
	char fn[64];
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/comm", pid);
	f = fopen(fn, "re");
	if (f) {
		if (fgets(s.comm, sizeof(s.comm), f))
			s.comm[strcspn(s.comm, "\n")] = 0;
		fclose(f);
	}
	if (bpf_map_update_elem(map_fd(obj, "follow_slots"), &slot, &s, BPF_ANY))
		return -errno;
	if (bpf_map_update_elem(map_fd(obj, "follow_procs"), &key, &p, BPF_ANY))
		return -errno;
	return 0;
}

int follow_attach(struct bpf_object *obj, struct bpf_link ***links, size_t *nlinks)
{
	static const char *const progs[] = { "follow_fork", "follow_exec", "follow_exit" };

	return tool_links_attach(obj, progs, sizeof(progs) / sizeof(progs[0]), links, nlinks);
}

bool follow_any_alive(struct bpf_object *obj)
{
	__u32 key;

	return bpf_map_get_next_key(map_fd(obj, "follow_procs"), NULL, &key) == 0;
}

bool follow_slot_get(struct bpf_object *obj, unsigned slot, struct follow_slot *out)
{
	__u32 key = slot;

	if (bpf_map_lookup_elem(map_fd(obj, "follow_slots"), &key, out))
		return false;
	return out->tgid != 0;
}
