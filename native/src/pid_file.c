// SPDX-License-Identifier: GPL-2.0-only
/* Files named after a pid in a shared directory (/tmp/perf-PID.map): see dwunw_pid_file_open. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

/* The real and effective uids of pid from /proc/PID/status; -1 when it cannot be read. */
static int target_uids(int32_t pid, uid_t uids[2])
{
	char fn[64], line[256];
	FILE *f;
	int found = -1;

	snprintf(fn, sizeof(fn), "/proc/%d/status", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long r, e;
		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			uids[0] = (uid_t)r;
			uids[1] = (uid_t)e;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

DWUNW_API int dwunw_pid_file_open(int32_t pid, const char *path, char *why, size_t whylen)
{
	struct stat st;
	uid_t uids[2] = { 0, 0 };
	int fd;

	if (why && whylen)
		why[0] = 0;
	if (!path || pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	/* O_NOFOLLOW: a symlink planted at the name is refused, not followed; O_NONBLOCK: a fifo
	 * planted there does not block the open (it is refused below as not a regular file). */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return DWUNW_ERR_NOT_FOUND;
		if (why && whylen)
			snprintf(why, whylen, "%s not used: %s", path,
				 errno == ELOOP ? "a symbolic link" : strerror(errno));
		return errno == ELOOP || errno == EACCES || errno == EPERM ? DWUNW_ERR_PERM : DWUNW_ERR_IO;
	}
	if (fstat(fd, &st)) {
		close(fd);
		return DWUNW_ERR_IO;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (why && whylen)
			snprintf(why, whylen, "%s not used: not a regular file", path);
		return DWUNW_ERR_PERM;
	}
	/* Owned by root or by the process's user: anyone else could have planted it. A process
	 * whose uids cannot be read (gone) is held to root. */
	int have = target_uids(pid, uids) == 0;
	if (st.st_uid != 0 && !(have && (st.st_uid == uids[0] || st.st_uid == uids[1]))) {
		close(fd);
		if (why && whylen) {
			if (have)
				snprintf(why, whylen, "%s not used: owned by uid %u, not by root or the process's user (uid %u)",
					 path, (unsigned)st.st_uid, (unsigned)uids[1]);
			else
				snprintf(why, whylen, "%s not used: owned by uid %u, not by root (pid %d has no readable uid)",
					 path, (unsigned)st.st_uid, (int)pid);
		}
		return DWUNW_ERR_PERM;
	}
	/* Back to blocking reads for the caller. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}
