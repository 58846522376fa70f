// SPDX-License-Identifier: GPL-2.0-only
/*
 * Core files: dwunw_core_load. An ELF ET_CORE file holds the process's memory as PT_LOAD
 * segments (file-backed code usually not dumped: FileSiz 0, or only the page with the ELF
 * header) and its state as notes in PT_NOTE segments:
 *   NT_PRSTATUS  one per thread: pr_cursig, pr_pid (the tid) and pr_reg (the arch's register set
 *                as ptrace's NT_PRSTATUS regset has it), at offsets fixed per ELF class;
 *   NT_PRPSINFO  pr_pid (the process id) and pr_fname (comm), the last fields before pr_psargs;
 *   NT_AUXV      the auxiliary vector (AT_ENTRY locates the main executable, AT_SYSINFO_EHDR the
 *                vDSO);
 *   NT_FILE      the file mappings: count, page size, then (start, end, offset in pages) words
 *                and the paths (kernel cores and gdb's gcore; not qemu-user's guest cores).
 * Everything is read from the file's bytes with every offset and size checked against the file;
 * a malformed part is skipped and reported as DWUNW_ERR_CORRUPT, never read out of bounds.
 *
 * The core's bytes must live as long as the memory regions registered from them: each loaded
 * core is kept per context and pid, and freed when the pid is forgotten or the context shut down
 * (core_keep.c).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core_keep.h"
#include "internal.h"
#include "module.h"
#include "proc.h"

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

#define CORE_COPY_MAX (64ull << 20)   /* smaller cores are read into memory, larger ones mapped */
#define VDSO_MAX      (1u << 20)      /* a vDSO larger than this is not believed */

/* ---- Reading the file --------------------------------------------------------------------- */

static int read_file(const char *path, uint64_t max, void **out, size_t *size, int *mapped)
{
	struct stat st;
	void *buf;
	size_t got = 0;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dw_errno_to_err(errno);
	if (fstat(fd, &st) != 0) {
		err = dw_errno_to_err(errno);
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || (max && (uint64_t)st.st_size > max) ||
	    (uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return DWUNW_ERR_INVALID_ARG;
	}
	*size = (size_t)st.st_size;
	*mapped = 0;
	if (*size > CORE_COPY_MAX) {
		/* Large: mapped (a core is not rewritten in place once written). */
		buf = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
		if (buf == MAP_FAILED)
			return dw_errno_to_err(errno);
		*out = buf;
		*mapped = 1;
		return DWUNW_OK;
	}
	buf = malloc(*size ? *size : 1);
	if (!buf) {
		close(fd);
		return DWUNW_ERR_NOMEM;
	}
	while (got < *size) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, *size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? dw_errno_to_err(errno) : DWUNW_ERR_IO;
			free(buf);
			close(fd);
			return err;
		}
		got += (size_t)n;
	}
	close(fd);
	*out = buf;
	return DWUNW_OK;
}

/* ---- Parsing ------------------------------------------------------------------------------ */

struct seg {
	uint64_t vaddr, memsz;
	uint64_t offset, filesz;    /* filesz clamped to the file */
	uint32_t flags;             /* PF_* */
};

struct core {
	const uint8_t *p;
	uint64_t size;
	unsigned cls;               /* ELFCLASS32 / ELFCLASS64 */
	unsigned asz;               /* 4 or 8 */
	const struct dwunw_arch_ops *arch;
	int corrupt;
	uint32_t flags;             /* DWUNW_CORE_* */
	struct seg *segs;           /* PT_LOADs, sorted by vaddr */
	uint32_t nsegs;
	/* notes */
	int have_psinfo;
	int32_t ps_pid;
	char comm[32];
	uint64_t at_entry, at_sysinfo_ehdr;
	const uint8_t *nt_file;
	uint64_t nt_file_len;
	/* threads */
	struct dwunw_core_thread *out;
	size_t cap, nout;
	uint32_t nthreads;
	int32_t first_tid;
	/* maps, as libdwunw's entries (paths owned in `names` or the caller's text copy) */
	struct dwunw_map *m;
	char **names;               /* owned paths, one per entry (NULL where path points elsewhere) */
	size_t nm, mcap;
	char *text;                 /* the caller's maps text, copied: the parser cuts it in place */
	struct dwunw_module *vdso;    /* the vDSO image, held */
};

static uint64_t rd(const uint8_t *p, unsigned size)
{
	if (size == 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	if (size == 4) {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	{
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
}

static int in_file(const struct core *k, uint64_t off, uint64_t len)
{
	return off <= k->size && len <= k->size - off;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The PT_LOAD containing addr, or NULL. */
static const struct seg *seg_at(const struct core *k, uint64_t addr)
{
	uint32_t lo = 0, hi = k->nsegs;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (k->segs[mid].vaddr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* segments may overlap in a corrupt core: look back a little */
	for (uint32_t i = lo; i > 0 && lo - i < 4; i--) {
		const struct seg *s = &k->segs[i - 1];
		if (addr - s->vaddr < s->memsz)
			return s;
	}
	return NULL;
}

/* ELF header and program headers. */
static int parse_headers(struct core *k, const uint8_t **phdrs, uint64_t *phnum)
{
	const uint8_t *h = k->p;
	uint64_t phoff, shoff, n;
	unsigned phent, shent, type, machine;
	uint32_t eflags;
	size_t ehsz;

	if (k->size < EI_NIDENT || memcmp(h, ELFMAG, SELFMAG) != 0)
		return DWUNW_ERR_NOT_ELF;
	k->cls = h[EI_CLASS];
	if (k->cls != ELFCLASS32 && k->cls != ELFCLASS64)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	if (h[EI_DATA] != ELFDATA2LSB)
		return DWUNW_ERR_UNSUPPORTED_ARCH; /* big-endian: not this build */
	k->asz = k->cls == ELFCLASS64 ? 8 : 4;
	ehsz = k->cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (k->size < ehsz)
		return DWUNW_ERR_NOT_ELF;
	if (k->cls == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		type = eh.e_type, machine = eh.e_machine, eflags = eh.e_flags;
		phoff = eh.e_phoff, n = eh.e_phnum, phent = eh.e_phentsize;
		shoff = eh.e_shoff, shent = eh.e_shentsize;
	} else {
		Elf32_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		type = eh.e_type, machine = eh.e_machine, eflags = eh.e_flags;
		phoff = eh.e_phoff, n = eh.e_phnum, phent = eh.e_phentsize;
		shoff = eh.e_shoff, shent = eh.e_shentsize;
	}
	if (type != ET_CORE)
		return DWUNW_ERR_INVALID_ARG;
	k->arch = dwunw_arch_for_elf(machine, k->cls);
	/* MIPS n32 is ELFCLASS32 too, but not the o32 ABI the mips32 backend implements. */
	if (machine == EM_MIPS && (eflags & 0x20 /* EF_MIPS_ABI2 */))
		k->arch = NULL;
	if (!k->arch || !k->arch->regs_from_prstatus)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	if (n == PN_XNUM) {
		/* More than 65534 segments: the count is section 0's sh_info. */
		size_t shsz = k->cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
		if (shent != shsz || !in_file(k, shoff, shsz))
			return DWUNW_ERR_CORRUPT;
		if (k->cls == ELFCLASS64) {
			Elf64_Shdr sh;
			memcpy(&sh, h + shoff, sizeof(sh));
			n = sh.sh_info;
		} else {
			Elf32_Shdr sh;
			memcpy(&sh, h + shoff, sizeof(sh));
			n = sh.sh_info;
		}
	}
	if (n && phent != (k->cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
		return DWUNW_ERR_CORRUPT;
	if (phoff > k->size)
		return DWUNW_ERR_CORRUPT;
	if (n > (k->size - phoff) / (phent ? phent : 1)) {
		/* A truncated table: the headers that are there. */
		n = (k->size - phoff) / phent;
		k->corrupt = 1;
		k->flags |= DWUNW_CORE_TRUNCATED;
	}
	*phdrs = h + phoff;
	*phnum = n;
	return DWUNW_OK;
}

static void get_phdr(const struct core *k, const uint8_t *p, Elf64_Phdr *ph)
{
	if (k->cls == ELFCLASS64) {
		memcpy(ph, p, sizeof(*ph));
	} else {
		Elf32_Phdr p32;
		memcpy(&p32, p, sizeof(p32));
		ph->p_type = p32.p_type;
		ph->p_flags = p32.p_flags;
		ph->p_offset = p32.p_offset;
		ph->p_vaddr = p32.p_vaddr;
		ph->p_filesz = p32.p_filesz;
		ph->p_memsz = p32.p_memsz;
		ph->p_align = p32.p_align;
	}
}

/* NT_PRSTATUS: one thread. */
static void note_prstatus(struct core *k, const uint8_t *d, uint64_t len)
{
	/* struct elf_prstatus: pr_info (3 ints), pr_cursig (short), pr_sigpend and pr_sighold
	 * (longs), pr_pid, pr_ppid, pr_pgrp, pr_sid, 4 timevals (2 longs each), then pr_reg. */
	uint64_t pid_off = k->asz == 8 ? 32 : 24;
	uint64_t reg_off = k->asz == 8 ? 112 : 72;
	struct dwunw_core_thread t;
	int32_t signo;

	if (len <= reg_off) {
		k->corrupt = 1;
		return;
	}
	memset(&t, 0, sizeof(t));
	t.tid = (int32_t)rd(d + pid_off, 4);
	signo = (int16_t)rd(d + 12, 2);
	if (!signo)
		signo = (int32_t)rd(d, 4); /* pr_info.si_signo */
	t.signo = signo >= 0 && signo < 256 ? signo : 0;
	/* pr_reg is followed by pr_fpvalid (an int) and the padding to the struct's alignment */
	if (k->arch->regs_from_prstatus(d + reg_off, (size_t)(len - reg_off - (len - reg_off > 4 ? 4 : 0)),
					&t.regs) != DWUNW_OK) {
		k->corrupt = 1;
		return;
	}
	t.regs.arch = k->arch->arch;
	t.regs.flags = 0;
	t.regs.tid = t.tid;
	t.regs.stack = NULL;
	t.regs.stack_start = 0;
	t.regs.stack_size = 0;
	if (!k->nthreads)
		k->first_tid = t.tid;
	k->nthreads++;
	if (k->nout < k->cap)
		k->out[k->nout++] = t;
}

/* NT_PRPSINFO: pid and comm, found from the end (pr_psargs[80] is last, pr_fname[16] before it,
 * the four ids before that): the fields in front differ in size between arches. */
static void note_prpsinfo(struct core *k, const uint8_t *d, uint64_t len)
{
	uint64_t fname, pid;

	if (k->have_psinfo)
		return;
	if (len < 120) {
		k->corrupt = 1;
		return;
	}
	fname = len - 80 - 16;
	pid = fname - 16;
	k->ps_pid = (int32_t)rd(d + pid, 4);
	memcpy(k->comm, d + fname, 15); /* a comm has at most 15 characters (qemu fills all 16) */
	k->comm[15] = 0;
	for (char *c = k->comm; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	k->have_psinfo = 1;
}

static void note_auxv(struct core *k, const uint8_t *d, uint64_t len)
{
	for (uint64_t o = 0; o + 2 * k->asz <= len; o += 2 * k->asz) {
		uint64_t type = rd(d + o, k->asz), val = rd(d + o + k->asz, k->asz);
		if (type == AT_NULL)
			break;
		if (type == AT_ENTRY && !k->at_entry)
			k->at_entry = val;
		else if (type == AT_SYSINFO_EHDR && !k->at_sysinfo_ehdr)
			k->at_sysinfo_ehdr = val;
	}
}

static int is_core_name(const uint8_t *name, uint64_t namesz)
{
	return (namesz == 4 || (namesz == 5 && name[4] == 0)) && !memcmp(name, "CORE", 4);
}

/* The notes of one PT_NOTE segment. */
static void parse_notes(struct core *k, const uint8_t *p, uint64_t len, uint64_t align)
{
	align = align == 8 ? 8 : 4;
	while (len > 0) {
		uint64_t namesz, descsz, type, name_pad, desc_off, step;
		const uint8_t *desc;

		if (len < 12) {
			k->corrupt = 1;
			return;
		}
		namesz = rd(p, 4);
		descsz = rd(p + 4, 4);
		type = rd(p + 8, 4);
		name_pad = (namesz + align - 1) & ~(align - 1);
		if (name_pad > len - 12 || descsz > len - 12 - name_pad) {
			k->corrupt = 1;
			return;
		}
		desc_off = 12 + name_pad;
		desc = p + desc_off;
		if (is_core_name(p + 12, namesz)) {
			switch (type) {
			case NT_PRSTATUS:
				note_prstatus(k, desc, descsz);
				break;
			case NT_PRPSINFO:
				note_prpsinfo(k, desc, descsz);
				break;
			case NT_AUXV:
				if (!k->at_entry && !k->at_sysinfo_ehdr)
					note_auxv(k, desc, descsz);
				break;
			case NT_FILE:
				if (!k->nt_file) {
					k->nt_file = desc;
					k->nt_file_len = descsz;
				}
				break;
			}
		}
		step = desc_off + ((descsz + align - 1) & ~(align - 1));
		if (step >= len)
			return;
		p += step;
		len -= step;
	}
}

/* ---- Building the maps -------------------------------------------------------------------- */

/* Add one mapping built here (NT_FILE, the core's segments): `path` is copied, since the core's
 * names are not NUL-terminated; a " (deleted)" at its end becomes the flag, as the parser does. */
static int ment_gen(struct core *k, uint64_t start, uint64_t end, uint32_t pf, uint64_t offset,
		    const char *path, size_t pathlen)
{
	static const char del[] = " (deleted)";
	uint32_t flags = (pf & PF_R ? DWUNW_MAP_R : 0) | (pf & PF_W ? DWUNW_MAP_W : 0) | (pf & PF_X ? DWUNW_MAP_X : 0);
	char *name;

	if (pathlen >= sizeof(del) - 1 && !memcmp(path + pathlen - (sizeof(del) - 1), del, sizeof(del) - 1)) {
		flags |= DWUNW_MAP_DELETED;
		pathlen -= sizeof(del) - 1;
	}
	if (k->nm == k->mcap) {
		size_t cap = k->mcap ? k->mcap * 2 : 64;
		struct dwunw_map *n = realloc(k->m, cap * sizeof(*n));
		char **nn = n ? realloc(k->names, cap * sizeof(*nn)) : NULL;

		if (n)
			k->m = n;
		if (!nn)
			return DWUNW_ERR_NOMEM;
		k->names = nn;
		k->mcap = cap;
	}
	if (!(name = strndup(path, pathlen)))
		return DWUNW_ERR_NOMEM;
	k->names[k->nm] = name;
	k->m[k->nm++] = (struct dwunw_map){ .start = start, .end = end, .offset = offset, .flags = flags, .path = name };
	return DWUNW_OK;
}

/* NT_FILE: every file mapping, with the permissions of the PT_LOAD it lies in. */
static int maps_from_nt_file(struct core *k)
{
	const uint8_t *d = k->nt_file, *names, *end = k->nt_file + k->nt_file_len;
	uint64_t count, page, w = k->asz;
	int err;

	if (k->nt_file_len < 2 * w) {
		k->corrupt = 1;
		return DWUNW_OK;
	}
	count = rd(d, (unsigned)w);
	page = rd(d + w, (unsigned)w);
	if (count > (k->nt_file_len - 2 * w) / (3 * w)) {
		/* More entries than the note holds: those that are there. */
		count = (k->nt_file_len - 2 * w) / (3 * w);
		k->corrupt = 1;
	}
	names = d + 2 * w + count * 3 * w;
	for (uint64_t i = 0; i < count; i++) {
		const uint8_t *e = d + 2 * w + i * 3 * w;
		uint64_t start = rd(e, (unsigned)w), stop = rd(e + w, (unsigned)w), pgoff = rd(e + 2 * w, (unsigned)w);
		const uint8_t *nul;
		const struct seg *s;
		size_t nlen;

		if (names >= end) {
			k->corrupt = 1; /* fewer names than entries */
			break;
		}
		nul = memchr(names, 0, (size_t)(end - names));
		nlen = nul ? (size_t)(nul - names) : (size_t)(end - names);
		if (!nul)
			k->corrupt = 1;
		if (start >= stop || !nlen || memchr(names, '\n', nlen) ||
		    (page && pgoff > UINT64_MAX / page)) {
			k->corrupt = 1;
		} else {
			s = seg_at(k, start);
			err = ment_gen(k, start, stop, s ? s->flags : (PF_R | PF_X), pgoff * page,
				       (const char *)names, nlen);
			if (err)
				return err;
		}
		if (!nul)
			break;
		names = nul + 1;
	}
	k->flags |= DWUNW_CORE_NT_FILE;
	return DWUNW_OK;
}

/* Memory of the core that no file mapping covers: anonymous mappings, the vDSO. */
static int maps_add_anon(struct core *k)
{
	size_t nfile = k->nm;
	int err;

	for (uint32_t i = 0; i < k->nsegs; i++) {
		const struct seg *s = &k->segs[i];
		uint64_t end = s->vaddr + s->memsz;
		const char *name = "";
		int covered = 0;

		if (!s->memsz || end < s->vaddr)
			continue;
		for (size_t j = 0; j < nfile && !covered; j++)
			covered = k->m[j].start < end && s->vaddr < k->m[j].end;
		if (covered)
			continue;
		if (k->at_sysinfo_ehdr && k->at_sysinfo_ehdr - s->vaddr < s->memsz)
			name = "[vdso]";
		else if (k->arch->arch == DWUNW_ARCH_X86_64 && s->vaddr == 0xffffffffff600000ull)
			name = "[vsyscall]";
		err = ment_gen(k, s->vaddr, end, s->flags, 0, name, strlen(name));
		if (err)
			return err;
	}
	return DWUNW_OK;
}

/* The caller's maps text, parsed by libdwunw's one parser on a copy (it works in place). */
static int maps_from_text(struct core *k, const char *text, size_t len)
{
	size_t n = 0;
	int err;

	if (dwunw_maps_parse((char *)text, len, NULL, &n) != DWUNW_OK)
		return DWUNW_OK; /* no mapping in it: the maps are corrupt, said below */
	k->text = malloc(len + 1);
	k->m = malloc(n * sizeof(*k->m));
	k->names = calloc(n, sizeof(*k->names));
	if (!k->text || !k->m || !k->names)
		return DWUNW_ERR_NOMEM;
	memcpy(k->text, text, len);
	k->text[len] = 0;
	err = dwunw_maps_parse(k->text, len, k->m, &n);
	if (err)
		return err;
	k->nm = k->mcap = n;
	return DWUNW_OK;
}

static int ment_is(const struct dwunw_map *m, const char *path)
{
	return m->path && !strcmp(m->path, path);
}

/* The main executable: the file mapping holding AT_ENTRY, else the lowest file mapping. */
static const struct dwunw_map *find_exe(const struct core *k)
{
	const struct dwunw_map *low = NULL;

	for (size_t i = 0; i < k->nm; i++) {
		const struct dwunw_map *m = &k->m[i];
		if (!m->path || m->path[0] != '/')
			continue;
		if (k->at_entry && k->at_entry >= m->start && k->at_entry < m->end)
			return m;
		if (!low || m->start < low->start)
			low = m;
	}
	return k->at_entry ? NULL : low;
}

/* The --exe rewrite: the executable's mappings name the caller's file. */
static void maps_rename(struct core *k, const char *from, const char *to)
{
	for (size_t i = 0; i < k->nm; i++)
		if (ment_is(&k->m[i], from))
			k->m[i].path = to;
}

/*
 * The maps' paths are opened under the sysroot (sysroot + path), the caller's executable is not:
 * its path in the maps is the one that, after the sysroot, names it. The executable's own path
 * when it lies in the sysroot; otherwise up from the sysroot to / ("/../../abs/exe": one ".."
 * per component of the sysroot's real path, and a ".." at / stays there). 0, or -1 when it does
 * not fit.
 */
static int exe_in_sysroot(const char *sysroot, const char *exe, char *out, size_t outlen)
{
	char real[PATH_MAX];
	size_t n, depth = 0, used;

	if (realpath(sysroot, real)) {
		n = strlen(real);
		if (n > 1 && !strncmp(exe, real, n) && exe[n] == '/')
			return snprintf(out, outlen, "%s", exe + n) < (int)outlen ? 0 : -1;
	} else {
		snprintf(real, sizeof(real), "%s", sysroot);
	}
	for (const char *p = real; *p; p++)
		depth += *p == '/' && p[1] && p[1] != '/';
	depth++; /* a relative sysroot's first component, or one to spare */
	used = 0;
	out[used++] = '/';
	for (size_t i = 0; i < depth; i++) {
		if (used + 3 >= outlen)
			return -1;
		memcpy(out + used, "../", 3);
		used += 3;
	}
	return snprintf(out + used, outlen - used, "%s", exe + 1) < (int)(outlen - used) ? 0 : -1;
}

/* ---- Images the context keeps (the vDSO) ---------------------------------------------------- */

/* A copy of `data` on the context's image list (deduplicated; freed at shutdown), registered as
 * the module `name`; the reference is returned in *mod. */
static int keep_image(struct dwunw_ctx_impl *c, const char *name, const void *data, size_t size,
		      struct dwunw_module **mod)
{
	struct dw_image *img = malloc(sizeof(*img) + size), *found = NULL;

	if (!img)
		return DWUNW_ERR_NOMEM;
	memcpy(img->data, data, size);
	img->size = size;
	pthread_mutex_lock(&c->lock);
	for (struct dw_image *i = c->images; i && !found; i = i->next)
		if (i->size == size && !memcmp(i->data, img->data, size))
			found = i;
	if (found) {
		free(img);
		img = found;
	} else {
		img->next = c->images;
		c->images = img;
	}
	pthread_mutex_unlock(&c->lock);
	return dw_module_acquire(c, name, NULL, img->data, img->size, mod);
}

/* ---- The call ----------------------------------------------------------------------------- */

static void core_free(struct core *k)
{
	for (size_t i = 0; i < k->nm && k->names; i++)
		free(k->names[i]);
	free(k->names);
	free(k->m);
	free(k->text);
	free(k->segs);
	if (k->vdso)
		dw_module_put(k->vdso);
}

DWUNW_API int dwunw_core_load(struct dwunw_ctx *ctx, const char *core_path,
			      const struct dwunw_core_options *opts, struct dwunw_core_thread *threads,
			      size_t *nthreads, struct dwunw_core_info *info)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dwunw_core_options o;
	struct core k;
	const uint8_t *phdrs;
	uint64_t phnum;
	void *data = NULL;
	size_t size = 0, cap = 0;
	int mapped = 0, err, maps_ok = 0;
	char exe_from[4096] = "", exe_abs[PATH_MAX], exe_rel[3 * PATH_MAX] = "";
	const struct dwunw_map *exe;
	int exe_deleted = 0;
	int32_t pid;

	if (nthreads) {
		cap = *nthreads;
		*nthreads = 0;
	}
	if (info)
		memset(info, 0, sizeof(*info));
	if (!c || !core_path || !nthreads || (cap && !threads))
		return DWUNW_ERR_INVALID_ARG;
	memset(&o, 0, sizeof(o));
	if (opts) {
		if (opts->size < offsetof(struct dwunw_core_options, pad) || opts->size > 4096)
			return DWUNW_ERR_INVALID_ARG;
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
		if (o.maps_text && !o.maps_len)
			o.maps_len = strlen(o.maps_text);
		if (o.exe) {
			/* The maps need an absolute path (a relative one is not a file mapping). */
			if (!o.exe[0] || strchr(o.exe, '\n'))
				return DWUNW_ERR_INVALID_ARG;
			if (!realpath(o.exe, exe_abs) || access(exe_abs, R_OK) != 0)
				return dw_errno_to_err(errno);
			o.exe = exe_abs;
		}
	}

	err = read_file(core_path, 0, &data, &size, &mapped);
	if (err)
		return err;
	memset(&k, 0, sizeof(k));
	k.p = data;
	k.size = size;
	k.out = threads;
	k.cap = cap;
	err = parse_headers(&k, &phdrs, &phnum);
	if (err) {
		dw_core_buf_free(data, size, mapped);
		return err;
	}

	/* Segments; notes. */
	k.segs = calloc(phnum ? phnum : 1, sizeof(*k.segs));
	if (!k.segs) {
		dw_core_buf_free(data, size, mapped);
		return DWUNW_ERR_NOMEM;
	}
	for (uint64_t i = 0; i < phnum; i++) {
		Elf64_Phdr ph;
		uint64_t filesz;

		get_phdr(&k, phdrs + i * (k.cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)), &ph);
		filesz = ph.p_filesz;
		if (ph.p_offset > k.size || filesz > k.size - ph.p_offset) {
			/* Past the end of the file: a truncated core. */
			filesz = ph.p_offset > k.size ? 0 : k.size - ph.p_offset;
			k.corrupt = 1;
			k.flags |= DWUNW_CORE_TRUNCATED;
		}
		if (ph.p_type == PT_NOTE) {
			if (filesz)
				parse_notes(&k, k.p + ph.p_offset, filesz, ph.p_align);
		} else if (ph.p_type == PT_LOAD) {
			uint64_t lim = k.cls == ELFCLASS64 ? UINT64_MAX : UINT32_MAX;
			if (!ph.p_memsz || ph.p_vaddr > lim || ph.p_memsz - 1 > lim - ph.p_vaddr) {
				if (ph.p_memsz)
					k.corrupt = 1;
				continue;
			}
			if (filesz > ph.p_memsz) {
				filesz = ph.p_memsz;
				k.corrupt = 1;
			}
			k.segs[k.nsegs++] = (struct seg){ ph.p_vaddr, ph.p_memsz, ph.p_offset, filesz, ph.p_flags };
		}
	}
	qsort(k.segs, k.nsegs, sizeof(*k.segs), cmp_seg);

	/* The pid: the caller's, the core's, the first thread's. */
	pid = o.pid > 0 ? o.pid : k.have_psinfo && k.ps_pid > 0 ? k.ps_pid : k.first_tid > 0 ? k.first_tid : 1;

	/* Maps. */
	if (o.maps_text)
		err = maps_from_text(&k, o.maps_text, (size_t)o.maps_len);
	else if (k.nt_file)
		err = maps_from_nt_file(&k);
	if (!err && !o.maps_text)
		err = maps_add_anon(&k);
	exe = err ? NULL : find_exe(&k);
	if (exe && strlen(exe->path) < sizeof(exe_from))
		strcpy(exe_from, exe->path);
	exe_deleted = exe && (exe->flags & DWUNW_MAP_DELETED);
	if (!err && o.exe && exe_from[0] && c->sysroot && c->sysroot[0])
		err = exe_in_sysroot(c->sysroot, o.exe, exe_rel, sizeof(exe_rel)) ? DWUNW_ERR_INVALID_ARG : DWUNW_OK;
	if (err)
		goto out;
	if (o.exe && exe_from[0])
		maps_rename(&k, exe_from, exe_rel[0] ? exe_rel : o.exe);
	if (k.nm && dwunw_maps_set_entries(ctx, pid, k.m, k.nm) == DWUNW_OK) {
		maps_ok = 1;
		if (o.exe && exe_from[0])
			k.flags |= DWUNW_CORE_EXE;
	} else {
		k.corrupt = 1;
	}

	/* Memory, and the vDSO image. */
	if (maps_ok) {
		uint64_t last_end = 0;
		int have_last = 0;

		for (uint32_t i = 0; i < k.nsegs; i++) {
			const struct seg *s = &k.segs[i];
			if (!s->filesz)
				continue;
			if (have_last && s->vaddr < last_end) {
				k.corrupt = 1; /* overlaps the previous segment */
				continue;
			}
			err = dwunw_memory_add(ctx, pid, s->vaddr, k.p + s->offset, s->filesz);
			if (err)
				goto out;
			last_end = s->vaddr + s->filesz;
			have_last = 1;
			if (info)
				info->nsegments++;
		}
		if (k.at_sysinfo_ehdr) {
			const struct seg *s = seg_at(&k, k.at_sysinfo_ehdr);
			int listed = 0;
			for (size_t i = 0; i < k.nm && !listed; i++)
				listed = ment_is(&k.m[i], "[vdso]");
			if (s && listed && k.at_sysinfo_ehdr - s->vaddr < s->filesz) {
				uint64_t rel = k.at_sysinfo_ehdr - s->vaddr, n = s->filesz - rel;
				if (n <= VDSO_MAX &&
				    keep_image(c, "[vdso]", k.p + s->offset + rel, (size_t)n, &k.vdso) == DWUNW_OK)
					k.flags |= DWUNW_CORE_VDSO;
			}
		}
		/* The bytes now belong to the context (replacing an earlier core of this pid). */
		if (dw_core_keep(c, pid, data, size, mapped, k.vdso)) {
			dwunw_maps_forget(ctx, pid);
			err = DWUNW_ERR_NOMEM;
			goto out;
		}
		k.vdso = NULL;
		data = NULL;
	}

	for (size_t i = 0; i < k.nout; i++)
		threads[i].regs.pid = maps_ok ? pid : 0;
	*nthreads = k.nout;
	if (info) {
		info->arch = k.arch->arch;
		info->pid = maps_ok ? pid : 0;
		info->core_pid = k.have_psinfo ? k.ps_pid : k.first_tid;
		info->nthreads = k.nthreads;
		info->flags = k.flags;
		info->nmaps = (uint32_t)k.nm;
		memcpy(info->comm, k.comm, sizeof(k.comm));
		snprintf(info->exe, sizeof(info->exe), "%s%s", exe_from, exe_deleted ? " (deleted)" : "");
	}
	err = k.corrupt ? DWUNW_ERR_CORRUPT : DWUNW_OK;
out:
	if (err && err != DWUNW_ERR_CORRUPT && maps_ok && data)
		dwunw_maps_forget(ctx, pid); /* regions registered from bytes freed below */
	if (err && err != DWUNW_ERR_CORRUPT) {
		*nthreads = 0;
		if (info)
			memset(info, 0, sizeof(*info));
	}
	core_free(&k);
	dw_core_buf_free(data, size, mapped);
	return err;
}
