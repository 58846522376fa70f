/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The traced command (-c COMMAND, -- PROG ARGS) and the set of processes followed (user side of
 * follow.bpf.h), shared by the tools.
 *
 * The command is forked at once and waits on a pipe, before exec, until the tool has loaded and
 * attached its programs and put the child's pid in the followed set (command_go): everything the
 * command and its descendants run, from ld.so's first instruction, is traced. The child dies with
 * the tool (PR_SET_PDEATHSIG) and never runs untraced.
 */
#ifndef DWUNW_COMMAND_H
#define DWUNW_COMMAND_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>
#include "follow.h"

struct bpf_object;
struct bpf_link;

struct command {
	pid_t pid;                 /* the command's process (0: none) */
	int go_fd;                 /* write end of the pipe the child waits on */
	int err_fd;                /* read end: the errno of a failed exec (close-on-exec) */
	const char *what;          /* the program's name, for messages */
};

/*
 * Check that the program would run as execvp runs it (PATH search for a name without '/'):
 * 0, or TOOL_EXIT_NOTFOUND / TOOL_EXIT_NOEXEC with one line on stderr naming it.
 */
int command_check_program(const char *prog);

/*
 * The program of a shell command when it can be known without running a shell: its first word,
 * when the command is a plain simple command and that word is not a shell builtin or keyword
 * (copied into buf). NULL otherwise.
 */
const char *command_shell_program(const char *cmd, char *buf, size_t size);

/* Fork the command, stopped before exec: argv (execvp), or /bin/sh -c cmd when argv is NULL. */
void command_start(struct command *t, char *const *argv, const char *cmd);

/*
 * Let the command exec; returns 0 when it did, or the exit status (126/127) after one line
 * naming the program and the cause, when exec failed.
 */
int command_go(struct command *t);

/* The command exited (reaped): *status gets its wait status. */
bool command_exited(struct command *t, int *status);

/* End the command if it still runs (SIGTERM, then wait), and forget it. */
void command_stop(struct command *t);

/* ---- followed set (follow.bpf.h) ---- */

/* Before load the tool sets its skeleton's rodata follow_tree = 1; the counters are in its bss. */

/* After load: put pid in the set as the root (slot FOLLOW_ROOT_SLOT). */
int follow_add_root(struct bpf_object *obj, pid_t pid);

/* Attach the fork/exec/exit programs; the links are appended to *links (grown with realloc). */
int follow_attach(struct bpf_object *obj, struct bpf_link ***links, size_t *nlinks);

/* Some followed process is still alive. */
bool follow_any_alive(struct bpf_object *obj);

/* A slot's process (tgid, comm, flags); false when unknown. */
bool follow_slot_get(struct bpf_object *obj, unsigned slot, struct follow_slot *out);

#endif /* DWUNW_COMMAND_H */
