// SPDX-License-Identifier: GPL-2.0-only
/* Multi-uprobe links through bpf(BPF_LINK_CREATE) (uprobe_multi.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include "uprobe_multi.h"

/* union bpf_attr's link_create with its uprobe_multi member (include/uapi/linux/bpf.h, 6.6+). */
struct um_link_create {
	uint32_t prog_fd;
	uint32_t target_fd;    /* 0: unused */
	uint32_t attach_type;  /* UM_ATTACH_TYPE */
	uint32_t flags;        /* 0 */
	uint64_t path;         /* const char * */
	uint64_t offsets;      /* const unsigned long * */
	uint64_t ref_ctr_offsets; /* const unsigned long *, or 0 */
	uint64_t cookies;      /* const __u64 *, or 0 */
	uint32_t cnt;
	uint32_t um_flags;     /* UM_F_RETURN */
	uint32_t pid;          /* 0: every process */
	uint32_t pad;
};

#define UM_F_RETURN 1u         /* BPF_F_UPROBE_MULTI_RETURN */

_Static_assert(offsetof(struct um_link_create, path) == 16, "link_create union at 16");
_Static_assert(offsetof(struct um_link_create, pid) == 56, "uprobe_multi.pid at 56");

static int link_create(const struct um_link_create *a)
{
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, a, sizeof(*a));

	return fd < 0 ? -errno : fd;
}

int um_attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
	      uint32_t cnt, bool ret, pid_t pid)
{
	unsigned long offs[cnt ? cnt : 1];
	struct um_link_create a;

	for (uint32_t i = 0; i < cnt; i++)
		offs[i] = (unsigned long)offsets[i];
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = UM_ATTACH_TYPE;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = cnt;
	a.um_flags = ret ? UM_F_RETURN : 0;
	a.pid = pid > 0 ? (uint32_t)pid : 0;
	return link_create(&a);
}

/* A thread of ours that is not the process's leader: its id is not a process id. */
static int probe_pipe[2];
static pid_t probe_tid;

static void *probe_thread(void *arg)
{
	char c;

	(void)arg;
	__atomic_store_n(&probe_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (read(probe_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static bool probe(void)
{
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = UM_ATTACH_TYPE);
	uint64_t off = 0;
	struct um_link_create a;
	bool ok = false;
	pthread_t th;
	int fd, err;

	fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "um_probe", "GPL", prog, 2, &o);
	if (fd < 0)
		return false;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)fd;
	a.attach_type = UM_ATTACH_TYPE;
	a.path = (uint64_t)(uintptr_t)"/";
	a.offsets = (uint64_t)(uintptr_t)&off;
	a.cnt = 1;
	/* a directory: refused for that (EBADF) only by a kernel that knows these links */
	err = link_create(&a);
	if (err >= 0)
		close(err);
	if (err != -EBADF)
		goto out;
	/* the process filter: a thread id that is not a process id must be refused */
	if (pipe2(probe_pipe, O_CLOEXEC))
		goto out;
	probe_tid = 0;
	if (pthread_create(&th, NULL, probe_thread, NULL) == 0) {
		while (!__atomic_load_n(&probe_tid, __ATOMIC_ACQUIRE))
			usleep(100);
		a.path = (uint64_t)(uintptr_t)"/proc/self/exe";
		a.offsets = 1; /* a bad pointer: a kernel that takes the thread fails here (EFAULT) */
		a.pid = (uint32_t)probe_tid;
		err = link_create(&a);
		if (err >= 0)
			close(err);
		ok = err == -ESRCH;
		close(probe_pipe[1]);
		pthread_join(th, NULL);
	} else {
		close(probe_pipe[1]);
	}
	close(probe_pipe[0]);
out:
	close(fd);
	return ok;
}

bool um_supported(void)
{
	static int known; /* 0: not probed, 1: yes, 2: no */

	if (!known)
		known = probe() ? 1 : 2;
	return known == 1;
}
