// SPDX-License-Identifier: GPL-2.0-only
/* Kernel features and target checks made before tracing (preflight.h). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "preflight.h"

const char *dwunw_kernel_lacks(bool need_ringbuf)
{
	int r;

	if (access("/sys/kernel", F_OK))
		return "sysfs is not mounted at /sys (the kernel's BTF and uprobe PMU are read there)";
#ifndef DWUNW_NO_KERNEL_BTF /* the mips32 build's programs need none (bpf/Makefile) */
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		return "the kernel has no BTF (no /sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF=y is needed for CO-RE)";
#endif
	r = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_KPROBE, NULL);
	if (r < 0 && (r == -ENOSYS || errno == ENOSYS))
		return "the kernel has no bpf() system call (CONFIG_BPF_SYSCALL=y is needed)";
	if (r == 0)
		return "the kernel cannot run BPF programs on probes (CONFIG_BPF_EVENTS=y is needed)";
	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK))
		return "the kernel has no uprobes (no /sys/bus/event_source/devices/uprobe: CONFIG_UPROBES=y and CONFIG_UPROBE_EVENTS=y are needed)";
	if (need_ringbuf && libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 0)
		return "the kernel has no BPF ring buffer (Linux 5.8): use --perf-buffer";
	return NULL;
}

int dwunw_exe_is_static(pid_t pid, char *path, size_t n)
{
	char fn[64];
	unsigned char h[EI_NIDENT + 64];
	ssize_t len;
	int fd, interp = 0;

	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
	len = readlink(fn, path, n - 1);
	if (len < 0)
		return -1;
	path[len] = 0;
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (pread(fd, h, sizeof(h), 0) < (ssize_t)sizeof(Elf32_Ehdr) || memcmp(h, ELFMAG, SELFMAG)) {
		close(fd);
		return -1;
	}
	/* the program headers, 32- or 64-bit, in the host's byte order (the tool's own arch) */
	uint64_t phoff;
	unsigned phnum, phentsize;
	if (h[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr e;
		memcpy(&e, h, sizeof(e));
		phoff = e.e_phoff, phnum = e.e_phnum, phentsize = e.e_phentsize;
	} else {
		Elf32_Ehdr e;
		memcpy(&e, h, sizeof(e));
		phoff = e.e_phoff, phnum = e.e_phnum, phentsize = e.e_phentsize;
	}
	if (phnum > 256 || phentsize < 8) {
		close(fd);
		return -1;
	}
	for (unsigned i = 0; i < phnum; i++) {
		uint32_t type;

		if (pread(fd, &type, sizeof(type), (off_t)(phoff + (uint64_t)i * phentsize)) != sizeof(type)) {
			close(fd);
			return -1;
		}
		if (type == PT_INTERP)
			interp = 1;
	}
	close(fd);
	return !interp;
}
