// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit tests of core.c (dwunw_core_load) on cores built here byte by byte: an x86_64 core with two
 * threads (NT_PRSTATUS), NT_PRPSINFO, NT_AUXV, NT_FILE, an anonymous code segment, a stack
 * segment holding a frame-pointer chain, and this process's own vDSO; the threads, the maps and
 * the memory it registers, unwound; maps given as text with the executable replaced (opts->exe);
 * 32-bit (mips32) and arm64 cores when those backends are built. Then broken cores: every
 * truncation, notes past their segment, an NT_FILE count beyond the note, overlapping segments,
 * a bad header table, not a core, another machine or byte order, and random byte flips: each
 * gives DWUNW_ERR_CORRUPT (with what could be read) or a clean error, never a crash.
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "internal.h"
#include "module.h"
#include "proc.h"
#include "tap.h"

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

static char tmpdir[64];

static const char *tpath(const char *name)
{
	static char bufs[8][512];
	static int n;
	char *b = bufs[n++ & 7];
	snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
	return b;
}

static int spit(const char *path, const void *buf, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t n = fwrite(buf, 1, size, f);
	fclose(f);
	return n == size ? 0 : -1;
}

/* ---- Building cores ------------------------------------------------------------------------- */

struct note {
	uint32_t type;
	const char *name;
	const void *desc;
	uint32_t descsz;
};

struct load {
	uint64_t vaddr, memsz, filesz;
	uint32_t flags;
	const void *data;             /* filesz bytes, or NULL for zeros */
};

struct built {
	uint8_t *p;
	size_t size;
	size_t note_off, note_size;   /* the PT_NOTE segment */
	size_t phoff;
	size_t load_off[8];           /* file offset of each load's bytes */
};

static void put(uint8_t *p, size_t off, uint64_t v, unsigned size)
{
	memcpy(p + off, &v, size); /* little-endian host */
}

/* An ELF core: header, program headers (PT_NOTE first, then the loads), notes, load bytes. */
static struct built build(uint16_t machine, unsigned cls, const struct note *notes, unsigned nn,
			  const struct load *loads, unsigned nl)
{
	struct built b;
	unsigned w = cls == ELFCLASS64 ? 8 : 4;
	size_t ehsz = cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	size_t phsz = cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	size_t off, cap = 1 << 20;

	memset(&b, 0, sizeof(b));
	b.p = calloc(1, cap);
	memcpy(b.p, ELFMAG, SELFMAG);
	b.p[EI_CLASS] = (uint8_t)cls;
	b.p[EI_DATA] = ELFDATA2LSB;
	b.p[EI_VERSION] = EV_CURRENT;
	put(b.p, 16, ET_CORE, 2);
	put(b.p, 18, machine, 2);
	put(b.p, 20, EV_CURRENT, 4);
	b.phoff = ehsz;
	if (cls == ELFCLASS64) {
		put(b.p, 32, ehsz, 8);      /* e_phoff */
		put(b.p, 52, ehsz, 2);      /* e_ehsize */
		put(b.p, 54, phsz, 2);      /* e_phentsize */
		put(b.p, 56, 1 + nl, 2);    /* e_phnum */
	} else {
		put(b.p, 28, ehsz, 4);
		put(b.p, 40, ehsz, 2);
		put(b.p, 42, phsz, 2);
		put(b.p, 44, 1 + nl, 2);
	}
	/* notes */
	off = ehsz + phsz * (1 + nl);
	b.note_off = off;
	for (unsigned i = 0; i < nn; i++) {
		uint32_t namesz = (uint32_t)strlen(notes[i].name) + 1;
		put(b.p, off, namesz, 4);
		put(b.p, off + 4, notes[i].descsz, 4);
		put(b.p, off + 8, notes[i].type, 4);
		memcpy(b.p + off + 12, notes[i].name, namesz);
		off += 12 + ((namesz + 3) & ~3u);
		memcpy(b.p + off, notes[i].desc, notes[i].descsz);
		off += (notes[i].descsz + 3) & ~3u;
	}
	b.note_size = off - b.note_off;
	/* loads, page aligned */
	off = (off + 4095) & ~(size_t)4095;
	for (unsigned i = 0; i < nl; i++) {
		b.load_off[i] = off;
		if (loads[i].data)
			memcpy(b.p + off, loads[i].data, loads[i].filesz);
		off += (loads[i].filesz + 4095) & ~(uint64_t)4095;
	}
	b.size = off;
	/* program headers */
	for (unsigned i = 0; i <= nl; i++) {
		size_t ph = ehsz + i * phsz;
		uint32_t type = i ? PT_LOAD : PT_NOTE;
		uint64_t o = i ? b.load_off[i - 1] : b.note_off, va = i ? loads[i - 1].vaddr : 0;
		uint64_t fs = i ? loads[i - 1].filesz : b.note_size, ms = i ? loads[i - 1].memsz : 0;
		uint32_t fl = i ? loads[i - 1].flags : 0;
		if (cls == ELFCLASS64) {
			put(b.p, ph, type, 4);
			put(b.p, ph + 4, fl, 4);
			put(b.p, ph + 8, o, 8);
			put(b.p, ph + 16, va, 8);
			put(b.p, ph + 32, fs, 8);
			put(b.p, ph + 40, ms, 8);
			put(b.p, ph + 48, i ? 4096 : 4, 8);
		} else {
			put(b.p, ph, type, 4);
			put(b.p, ph + 4, o, 4);
			put(b.p, ph + 8, va, 4);
			put(b.p, ph + 16, fs, 4);
			put(b.p, ph + 20, ms, 4);
			put(b.p, ph + 24, fl, 4);
			put(b.p, ph + 28, i ? 4096 : 4, 4);
		}
	}
	(void)w;
	return b;
}

/* NT_PRSTATUS: pr_cursig at 12, pr_pid at 32 (24), pr_reg at 112 (72); `regs` words of `w` bytes. */
static size_t prstatus(uint8_t *d, unsigned w, int32_t tid, int16_t sig, const uint64_t *regs, unsigned nregs)
{
	size_t reg_off = w == 8 ? 112 : 72, size = reg_off + nregs * w + 4;

	size = (size + w - 1) & ~(size_t)(w - 1);
	memset(d, 0, size);
	put(d, 0, (uint32_t)sig, 4);
	put(d, 12, (uint16_t)sig, 2);
	put(d, w == 8 ? 32 : 24, (uint32_t)tid, 4);
	for (unsigned i = 0; i < nregs; i++)
		put(d, reg_off + i * w, regs[i], w);
	return size;
}

/* NT_PRPSINFO: 136 bytes (64-bit) or 128 (32-bit): pid 16 bytes before pr_fname, then pr_psargs. */
static size_t prpsinfo(uint8_t *d, unsigned w, int32_t pid, const char *comm)
{
	size_t size = w == 8 ? 136 : 128, fname = size - 96;

	memset(d, 0, size);
	put(d, fname - 16, (uint32_t)pid, 4);
	strncpy((char *)d + fname, comm, 16);
	strcpy((char *)d + fname + 16, comm);
	return size;
}

struct fmap {
	uint64_t start, end, pgoff;
	const char *path;
};

static size_t nt_file(uint8_t *d, unsigned w, const struct fmap *m, unsigned n, uint64_t count_override)
{
	size_t off = 0;

	put(d, 0, count_override ? count_override : n, w);
	put(d, w, 4096, w);
	off = 2 * w;
	for (unsigned i = 0; i < n; i++) {
		put(d, off, m[i].start, w);
		put(d, off + w, m[i].end, w);
		put(d, off + 2 * w, m[i].pgoff, w);
		off += 3 * w;
	}
	for (unsigned i = 0; i < n; i++) {
		strcpy((char *)d + off, m[i].path);
		off += strlen(m[i].path) + 1;
	}
	return off;
}

/* ---- The x86_64 core -------------------------------------------------------------------------- */

#define X_CODE  0x10000000ull     /* anonymous r-x: the pcs (no module: frame pointers step) */
#define X_STACK 0x7ffd00000000ull /* rw-: the frame-pointer chain */
#define X_EXE   0x555500000000ull /* NT_FILE: the "executable" (a file that does not exist) */
#define X_LIBC  0x7f0000000000ull /* NT_FILE: libc */
#define LIBC    "/lib/x86_64-linux-gnu/libc.so.6"

/* user_regs_struct word indexes */
enum { U_RBP = 4, U_RIP = 16, U_RSP = 19, U_COUNT = 27 };

struct xcore {
	struct built b;
	uint8_t stack[4096];
	uint64_t vdso_addr, vdso_size;
};

static const void *vdso_image(uint64_t *size)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	*size = 0;
	if (!base || !f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &s, &e) == 2 && s == base)
			*size = e - s;
	}
	fclose(f);
	return *size ? (const void *)(uintptr_t)base : NULL;
}

/*
 * Thread 100 (signal 11): pc X_CODE+0x10, rbp -> a chain X_CODE+0x20, X_CODE+0x30, then 0.
 * Thread 101: pc inside the vDSO (when there is one), rsp on the stack.
 */
static struct xcore x86_core(int with_vdso, uint64_t file_count_override)
{
	static struct xcore x;
	static uint8_t d1[512], d2[512], ps[256], fl[1024], auxv[64];
	uint64_t regs[U_COUNT];
	size_t n1, n2, np, nf;
	const void *vdso;
	struct fmap maps[] = {
		{ X_EXE, X_EXE + 0x1000, 0, "/nonexistent/unit-core-exe" },
		{ X_EXE + 0x1000, X_EXE + 0x3000, 1, "/nonexistent/unit-core-exe" },
		{ X_LIBC, X_LIBC + 0x1000, 0, LIBC },
	};

	memset(&x, 0, sizeof(x));
	/* stack: [rbp] = next rbp, [rbp+8] = return address */
	put(x.stack, 0x100, X_STACK + 0x200, 8);
	put(x.stack, 0x108, X_CODE + 0x21, 8);
	put(x.stack, 0x200, 0, 8);
	put(x.stack, 0x208, X_CODE + 0x31, 8);

	memset(regs, 0, sizeof(regs));
	regs[U_RIP] = X_CODE + 0x10;
	regs[U_RSP] = X_STACK + 0x80;
	regs[U_RBP] = X_STACK + 0x100;
	n1 = prstatus(d1, 8, 100, 11, regs, U_COUNT);
	vdso = with_vdso ? vdso_image(&x.vdso_size) : NULL;
	x.vdso_addr = vdso ? 0x7fff00000000ull : 0;
	regs[U_RIP] = vdso ? x.vdso_addr + 0x10 : X_CODE + 0x40;
	regs[U_RBP] = 0;
	n2 = prstatus(d2, 8, 101, 0, regs, U_COUNT);
	np = prpsinfo(ps, 8, 100, "unit-core");
	nf = nt_file(fl, 8, maps, 3, file_count_override);
	put(auxv, 0, AT_ENTRY, 8);
	put(auxv, 8, X_EXE + 0x1100, 8);
	put(auxv, 16, AT_SYSINFO_EHDR, 8);
	put(auxv, 24, x.vdso_addr, 8);
	put(auxv, 32, AT_NULL, 8);

	struct note notes[] = {
		{ NT_PRSTATUS, "CORE", d1, (uint32_t)n1 },
		{ NT_PRPSINFO, "CORE", ps, (uint32_t)np },
		{ NT_AUXV, "CORE", auxv, 48 },
		{ NT_FILE, "CORE", fl, (uint32_t)nf },
		{ 0x202, "LINUX", d1, 16 },           /* an arch note: ignored */
		{ NT_PRSTATUS, "CORE", d2, (uint32_t)n2 },
	};
	struct load loads[] = {
		{ X_EXE, 0x1000, 0, PF_R, NULL },
		{ X_EXE + 0x1000, 0x2000, 0, PF_R | PF_X, NULL },
		{ X_LIBC, 0x1000, 0x1000, PF_R, NULL },
		{ X_CODE, 0x1000, 0x1000, PF_R | PF_X, NULL },
		{ X_STACK, 0x1000, 0x1000, PF_R | PF_W, x.stack },
		{ x.vdso_addr, x.vdso_size, x.vdso_size, PF_R | PF_X, vdso },
	};
	x.b = build(EM_X86_64, ELFCLASS64, notes, DW_ARRAY_SIZE(notes), loads, vdso ? 6 : 5);
	return x;
}

static struct dwunw_ctx ctx;

static void ctx_new(const char *sysroot)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .flags = DWUNW_CFG_NO_REMOTE_READS, .sysroot = sysroot };
	if (dwunw_init(&ctx, &cfg) != DWUNW_OK) {
		printf("Bail out! dwunw_init\n");
		exit(1);
	}
}

static struct dwunw_core_thread threads[8];
static struct dwunw_core_info info;

static int load_buf(const void *p, size_t size, const struct dwunw_core_options *o, size_t *n)
{
	const char *path = tpath("core");
	*n = DW_ARRAY_SIZE(threads);
	if (spit(path, p, size)) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
	return dwunw_core_load(&ctx, path, o, threads, n, &info);
}

/* The maps the context holds for pid, as "start perms kind path" lines checked one by one. */
static const struct dw_map *map_at(int32_t pid, uint64_t addr, struct dw_proc **pp)
{
	*pp = NULL;
	if (dw_proc_get(dw_ctx(&ctx), pid, pp) != DWUNW_OK)
		return NULL;
	return dw_proc_find(*pp, addr);
}

static void test_x86_core(void)
{
	struct xcore x = x86_core(1, 0);
	struct dwunw_frame f[16];
	struct dw_proc *p;
	const struct dw_map *m;
	size_t n, nf;
	int err;

	ctx_new(NULL);
	err = load_buf(x.b.p, x.b.size, NULL, &n);
	is_int(err, DWUNW_OK, "x86_64 core: loads");
	is_int(n, 2, "two threads");
	is_int(info.nthreads, 2, "info: two threads");
	is_int(info.arch, DWUNW_ARCH_X86_64, "info: arch");
	is_int(info.pid, 100, "info: registered under the core's pid");
	is_int(info.core_pid, 100, "info: core pid from NT_PRPSINFO");
	is_str(info.comm, "unit-core", "info: comm");
	is_str(info.exe, "/nonexistent/unit-core-exe", "info: the executable holds AT_ENTRY");
	ok(info.flags & DWUNW_CORE_NT_FILE, "info: maps from NT_FILE");
	ok(!(info.flags & DWUNW_CORE_TRUNCATED), "info: not truncated");
	is_int(info.nsegments, x.vdso_size ? 4 : 3, "info: segments with file bytes registered");
	is_int(threads[0].tid, 100, "thread 0: tid");
	is_int(threads[0].signo, 11, "thread 0: signal");
	is_int(threads[1].tid, 101, "thread 1: tid");
	is_int(threads[1].signo, 0, "thread 1: no signal");
	is_hex(threads[0].regs.pc, X_CODE + 0x10, "thread 0: pc");
	is_hex(threads[0].regs.regs[7], X_STACK + 0x80, "thread 0: rsp (DWARF 7)");
	is_int(threads[0].regs.pid, 100, "thread 0: regs.pid is the registered pid");
	ok(threads[0].regs.stack == NULL && threads[0].regs.stack_size == 0, "thread 0: no stack copy");

	/* the maps */
	m = map_at(100, X_EXE + 0x1800, &p);
	ok(p && p->offline, "pid 100 is offline");
	ok(m && m->kind == DW_MAP_FILE && m->path && !strcmp(m->path, "/nonexistent/unit-core-exe") &&
	   m->offset == 0x1000 && m->prot == (DW_PROT_R | DW_PROT_X), "NT_FILE entry: path, offset in bytes, r-x from its PT_LOAD");
	m = p ? dw_proc_find(p, X_LIBC) : NULL;
	ok(m && m->kind == DW_MAP_FILE && m->prot == DW_PROT_R, "libc entry: r-- from its PT_LOAD");
	m = p ? dw_proc_find(p, X_CODE + 0x10) : NULL;
	ok(m && m->kind == DW_MAP_ANON && m->prot == (DW_PROT_R | DW_PROT_X), "a segment no file covers: anonymous r-x");
	m = p ? dw_proc_find(p, X_STACK) : NULL;
	ok(m && m->kind == DW_MAP_ANON && m->prot == (DW_PROT_R | DW_PROT_W), "the stack segment: anonymous rw-");
	if (x.vdso_size) {
		m = p ? dw_proc_find(p, x.vdso_addr) : NULL;
		ok(m && m->kind == DW_MAP_VDSO, "the segment at AT_SYSINFO_EHDR: [vdso]");
		ok(info.flags & DWUNW_CORE_VDSO, "info: the vDSO image is registered");
	}
	dw_proc_put(dw_ctx(&ctx), p);

	/* thread 0: frame pointers through the core's stack bytes */
	nf = DW_ARRAY_SIZE(f);
	err = dwunw_capture(&ctx, &threads[0].regs, f, &nf);
	ok(nf >= 3, "thread 0: at least 3 frames (%zu, stop %s)", nf, dwunw_errname(err));
	if (nf >= 3) {
		is_hex(f[0].pc, X_CODE + 0x10, "#0 pc");
		is_hex(f[1].pc, X_CODE + 0x21, "#1 pc from the core's stack");
		is_hex(f[2].pc, X_CODE + 0x31, "#2 pc from the core's stack");
		ok(f[1].how == DWUNW_HOW_FP && (f[0].flags & DWUNW_FRAME_JIT), "frame-pointer steps in anonymous code (jit)");
		ok(!(f[1].flags & DWUNW_FRAME_BEYOND_SNAPSHOT), "core memory is not a live read");
	}
	dwunw_module_cache_release(&ctx, f, nf);

	/* thread 1: frame 0 in the vDSO image from the core */
	if (x.vdso_size) {
		nf = DW_ARRAY_SIZE(f);
		dwunw_capture(&ctx, &threads[1].regs, f, &nf);
		ok(nf >= 1 && f[0].module && !strcmp(dwunw_module_path(f[0].module), "[vdso]") &&
		   (f[0].flags & DWUNW_FRAME_VDSO), "thread 1: #0 in the core's [vdso]");
		dwunw_module_cache_release(&ctx, f, nf);
	} else {
		SKIP("no vDSO in this process: skipped");
	}

	/* a capacity smaller than the thread count */
	n = 1;
	err = dwunw_core_load(&ctx, tpath("core"), NULL, threads, &n, &info);
	ok(err == DWUNW_OK && n == 1 && info.nthreads == 2, "capacity 1: one thread written, two counted");
	n = 0;
	err = dwunw_core_load(&ctx, tpath("core"), NULL, NULL, &n, &info);
	ok(err == DWUNW_OK && n == 0 && info.nthreads == 2, "capacity 0, no buffer: counts only");

	/* the caller's pid */
	struct dwunw_core_options o = { .size = sizeof(o), .pid = 4242 };
	err = load_buf(x.b.p, x.b.size, &o, &n);
	ok(err == DWUNW_OK && info.pid == 4242 && info.core_pid == 100 && threads[0].regs.pid == 4242,
	   "opts->pid: registered under 4242");
	m = map_at(4242, X_CODE, &p);
	ok(m != NULL, "pid 4242 has the maps");
	dw_proc_put(dw_ctx(&ctx), p);

	/* forgetting the pid, then loading again */
	dwunw_maps_forget(&ctx, 4242);
	err = load_buf(x.b.p, x.b.size, &o, &n);
	is_int(err, DWUNW_OK, "loads again after dwunw_maps_forget");
	dwunw_shutdown(&ctx);
	free(x.b.p);
}

static void test_maps_text(void)
{
	struct xcore x = x86_core(0, 0);
	struct dw_proc *p;
	const struct dw_map *m;
	size_t n;
	int err;
	char text[1024], exe[256];

	snprintf(exe, sizeof(exe), "%s/other-exe", tmpdir);
	spit(exe, "x", 1);
	snprintf(text, sizeof(text),
		 "%llx-%llx r--p 00000000 fe:00 77 /nonexistent/unit-core-exe\n"
		 "%llx-%llx r-xp 00001000 fe:00 77                       /nonexistent/unit-core-exe\n"
		 "%llx-%llx rw-p 00000000 00:00 0                        [stack]\n"
		 "garbage line\n",
		 (unsigned long long)X_EXE, (unsigned long long)X_EXE + 0x1000, (unsigned long long)X_EXE + 0x1000,
		 (unsigned long long)X_EXE + 0x3000, (unsigned long long)X_STACK, (unsigned long long)X_STACK + 0x1000);

	ctx_new(NULL);
	struct dwunw_core_options o = { .size = sizeof(o), .maps_text = text, .maps_len = strlen(text) };
	err = load_buf(x.b.p, x.b.size, &o, &n);
	is_int(err, DWUNW_OK, "maps text: loads");
	ok(!(info.flags & DWUNW_CORE_NT_FILE), "maps text: not from NT_FILE");
	is_int(info.nmaps, 3, "maps text: three mappings");
	m = map_at(100, X_EXE + 0x1000, &p);
	ok(m && m->kind == DW_MAP_FILE && m->inode == 77 && m->offset == 0x1000, "maps text: lines kept as given");
	m = p ? dw_proc_find(p, X_CODE) : NULL;
	ok(!m, "maps text: no segment added");
	dw_proc_put(dw_ctx(&ctx), p);

	o.exe = exe;
	err = load_buf(x.b.p, x.b.size, &o, &n);
	is_int(err, DWUNW_OK, "maps text + exe: loads");
	ok(info.flags & DWUNW_CORE_EXE, "info: the executable was replaced");
	is_str(info.exe, "/nonexistent/unit-core-exe", "info: exe is the original path");
	m = map_at(100, X_EXE + 0x2000, &p);
	ok(m && m->path && !strcmp(m->path, exe) && m->offset == 0x1000, "the executable's mappings now name the file given");
	dw_proc_put(dw_ctx(&ctx), p);

	o.exe = "/nonexistent/no-such-exe";
	err = load_buf(x.b.p, x.b.size, &o, &n);
	is_int(err, DWUNW_ERR_NOT_FOUND, "an exe that does not exist: NOT_FOUND");
	is_int(n, 0, "... and no threads");
	dwunw_shutdown(&ctx);

	/* under a sysroot, the exe is served as an image (it is not under the sysroot) */
	ctx_new(tmpdir);
	o.exe = "/proc/self/exe";
	err = load_buf(x.b.p, x.b.size, &o, &n);
	ok(err == DWUNW_OK && (info.flags & DWUNW_CORE_EXE), "sysroot + exe: loads");
	dwunw_shutdown(&ctx);
	free(x.b.p);
}

/* Every prefix of the core: never a crash; the whole of it loads. */
static void test_truncated(void)
{
	struct xcore x = x86_core(0, 0);
	size_t n, bad = 0, partial = 0;
	int err;

	ctx_new(NULL);
	for (size_t len = 0; len <= x.b.size; len += len < x.b.note_off + x.b.note_size + 64 ? 1 : 97) {
		err = load_buf(x.b.p, len, NULL, &n);
		if (err != DWUNW_OK && err != DWUNW_ERR_CORRUPT && err != DWUNW_ERR_NOT_ELF)
			bad++;
		if (err == DWUNW_ERR_CORRUPT && n > 0)
			partial++;
		if (len < x.b.size && err == DWUNW_OK && len < x.b.load_off[4] + 0x1000)
			bad++; /* a cut core must say so */
	}
	is_int(bad, 0, "every truncation: OK only when whole, else CORRUPT or NOT_ELF");
	ok(partial > 0, "truncated cores give partial threads (%zu cut points did)", partial);
	err = load_buf(x.b.p, x.b.load_off[4] + 0x800, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 2 && (info.flags & DWUNW_CORE_TRUNCATED) && info.nsegments == 3,
	   "cut inside the stack segment: both threads, what is left of the stack registered, TRUNCATED");
	dwunw_shutdown(&ctx);
	free(x.b.p);
}

static void test_corrupt(void)
{
	struct xcore x = x86_core(0, 0);
	uint8_t *c = malloc(x.b.size);
	size_t n;
	int err;

	ctx_new(NULL);

	/* the second note's descsz runs past the segment: the first thread stays */
	memcpy(c, x.b.p, x.b.size);
	{
		size_t off = x.b.note_off;
		uint32_t namesz, descsz;
		memcpy(&namesz, c + off, 4);
		memcpy(&descsz, c + off + 4, 4);
		off += 12 + ((namesz + 3) & ~3u) + ((descsz + 3) & ~3u); /* NT_PRPSINFO */
		put(c, off + 4, 0x7ffffff0, 4);
	}
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 1 && threads[0].tid == 100, "note size past the end: CORRUPT, the thread before it kept");

	/* NT_FILE count far beyond the note */
	{
		struct xcore y = x86_core(0, 0x40000000ull);
		err = load_buf(y.b.p, y.b.size, NULL, &n);
		ok(err == DWUNW_ERR_CORRUPT && n == 2 && info.pid == 100, "NT_FILE count huge: CORRUPT, threads and maps kept");
		free(y.b.p);
	}
	{
		struct xcore y = x86_core(0, UINT64_MAX);
		err = load_buf(y.b.p, y.b.size, NULL, &n);
		ok(err == DWUNW_ERR_CORRUPT && n == 2, "NT_FILE count 2^64-1: CORRUPT");
		free(y.b.p);
	}

	/* overlapping segments: the stack segment's vaddr moved onto the code segment */
	memcpy(c, x.b.p, x.b.size);
	put(c, x.b.phoff + 5 * sizeof(Elf64_Phdr) + 16, X_CODE + 0x800, 8);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 2 && info.nsegments == 2, "overlapping segments: CORRUPT, the overlapping one left out");

	/* a bad program header entry size: nothing can be read */
	memcpy(c, x.b.p, x.b.size);
	put(c, 54, 40, 2);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 0, "e_phentsize wrong: CORRUPT, nothing");

	/* a header table past the end */
	memcpy(c, x.b.p, x.b.size);
	put(c, 56, 0xfff0, 2);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT, "e_phnum past the end of the file: CORRUPT");

	/* PN_XNUM without a section header */
	memcpy(c, x.b.p, x.b.size);
	put(c, 56, PN_XNUM, 2);
	err = load_buf(c, x.b.size, NULL, &n);
	is_int(err, DWUNW_ERR_CORRUPT, "PN_XNUM without section 0: CORRUPT");

	/* a segment with p_offset beyond the file */
	memcpy(c, x.b.p, x.b.size);
	put(c, x.b.phoff + 5 * sizeof(Elf64_Phdr) + 8, UINT64_MAX - 10, 8);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 2 && (info.flags & DWUNW_CORE_TRUNCATED), "p_offset past the end: CORRUPT, TRUNCATED");

	/* vaddr + memsz wrapping */
	memcpy(c, x.b.p, x.b.size);
	put(c, x.b.phoff + 4 * sizeof(Elf64_Phdr) + 16, UINT64_MAX - 0x10, 8);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT && n == 2, "a segment wrapping around the address space: CORRUPT");

	/* a thread note too short for its registers */
	memcpy(c, x.b.p, x.b.size);
	put(c, x.b.note_off + 4, 120, 4);
	err = load_buf(c, x.b.size, NULL, &n);
	ok(err == DWUNW_ERR_CORRUPT, "NT_PRSTATUS too short: CORRUPT");

	/* not a core, another machine, another byte order, not ELF, no file */
	memcpy(c, x.b.p, x.b.size);
	put(c, 16, ET_EXEC, 2);
	is_int(load_buf(c, x.b.size, NULL, &n), DWUNW_ERR_INVALID_ARG, "ET_EXEC: INVALID_ARG");
	memcpy(c, x.b.p, x.b.size);
	put(c, 18, EM_386, 2);
	is_int(load_buf(c, x.b.size, NULL, &n), DWUNW_ERR_UNSUPPORTED_ARCH, "EM_386: UNSUPPORTED_ARCH");
	memcpy(c, x.b.p, x.b.size);
	c[EI_DATA] = ELFDATA2MSB;
	is_int(load_buf(c, x.b.size, NULL, &n), DWUNW_ERR_UNSUPPORTED_ARCH, "big-endian: UNSUPPORTED_ARCH");
	memcpy(c, x.b.p, x.b.size);
	c[EI_CLASS] = 7;
	is_int(load_buf(c, x.b.size, NULL, &n), DWUNW_ERR_UNSUPPORTED_ARCH, "unknown ELF class: UNSUPPORTED_ARCH");
	memcpy(c, x.b.p, x.b.size);
	c[1] = 'X';
	is_int(load_buf(c, x.b.size, NULL, &n), DWUNW_ERR_NOT_ELF, "bad magic: NOT_ELF");
	n = 4;
	is_int(dwunw_core_load(&ctx, "/nonexistent/core", NULL, threads, &n, &info), DWUNW_ERR_NOT_FOUND,
	       "no such file: NOT_FOUND");
	n = 4;
	is_int(dwunw_core_load(&ctx, tmpdir, NULL, threads, &n, &info), DWUNW_ERR_INVALID_ARG, "a directory: INVALID_ARG");
	n = 4;
	is_int(dwunw_core_load(&ctx, tpath("core"), NULL, NULL, &n, &info), DWUNW_ERR_INVALID_ARG,
	       "capacity without a buffer: INVALID_ARG");
	struct dwunw_core_options bad = { .size = 3 };
	n = 4;
	is_int(dwunw_core_load(&ctx, tpath("core"), &bad, threads, &n, &info), DWUNW_ERR_INVALID_ARG,
	       "options with a bad size: INVALID_ARG");

	/* random byte flips in the headers and notes: no crash, a known result */
	{
		unsigned seed = 12345, odd = 0;
		int flips = getenv("DWUNW_CORE_FLIPS") ? atoi(getenv("DWUNW_CORE_FLIPS")) : 3000;
		size_t span = x.b.note_off + x.b.note_size;
		for (int i = 0; i < flips; i++) {
			memcpy(c, x.b.p, x.b.size);
			for (int j = 0; j < 1 + i % 4; j++) {
				seed = seed * 1103515245u + 12345u;
				c[(seed >> 8) % span] ^= (uint8_t)(1u << ((seed >> 4) & 7));
			}
			err = load_buf(c, x.b.size, NULL, &n);
			if (err < DWUNW_ERR_MIN || err > 0 || err == DWUNW_ERR_NOMEM || n > DW_ARRAY_SIZE(threads))
				odd++;
			/* what a loaded core gives must be unwindable without harm */
			for (size_t t = 0; t < n; t++) {
				struct dwunw_frame f[8];
				size_t nf = DW_ARRAY_SIZE(f);
				dwunw_capture(&ctx, &threads[t].regs, f, &nf);
				dwunw_module_cache_release(&ctx, f, nf);
			}
		}
		is_int(odd, 0, "%d cores with flipped bits: every result a known code", flips);
	}
	dwunw_shutdown(&ctx);
	free(c);
	free(x.b.p);
}

/* A 32-bit core: mips32 o32 (pr_reg at 72, 45 words, pc at word 40). */
static void test_mips_core(void)
{
	static uint8_t d[512], ps[256], fl[256], stack[4096];
	uint64_t regs[45];
	size_t n, nd, np, nf;
	struct dw_proc *p;
	const struct dw_map *m;
	int err;

	if (!dwunw_arch_get(DWUNW_ARCH_MIPS32)) {
		SKIP("mips32 backend missing");
		return;
	}
	memset(regs, 0, sizeof(regs));
	regs[6 + 29] = 0x7fff0100; /* sp */
	regs[6 + 31] = 0x00400123; /* ra */
	regs[40] = 0x00400100;     /* epc */
	nd = prstatus(d, 4, 555, 11, regs, 45);
	np = prpsinfo(ps, 4, 555, "mips-core");
	struct fmap maps[] = { { 0x400000, 0x401000, 0, "/nonexistent/mips-exe" } };
	nf = nt_file(fl, 4, maps, 1, 0);
	struct note notes[] = {
		{ NT_PRSTATUS, "CORE", d, (uint32_t)nd },
		{ NT_PRPSINFO, "CORE", ps, (uint32_t)np },
		{ NT_FILE, "CORE", fl, (uint32_t)nf },
	};
	struct load loads[] = {
		{ 0x400000, 0x1000, 0, PF_R | PF_X, NULL },
		{ 0x7fff0000, 0x1000, 0x1000, PF_R | PF_W, stack },
		{ 0xfffff000, 0x2000, 0, PF_R, NULL }, /* wraps a 32-bit address space */
	};
	struct built b = build(EM_MIPS, ELFCLASS32, notes, 3, loads, 3);

	ctx_new(NULL);
	err = load_buf(b.p, b.size, NULL, &n);
	is_int(err, DWUNW_ERR_CORRUPT, "mips32 core: loads, the wrapping segment reported");
	ok(n == 1 && threads[0].tid == 555 && threads[0].signo == 11, "mips32: the thread");
	is_hex(threads[0].regs.pc, 0x400100, "mips32: pc from cp0 epc");
	is_hex(threads[0].regs.regs[29], 0x7fff0100, "mips32: sp");
	ok(info.pid == 555 && !strcmp(info.comm, "mips-core"), "mips32: pid and comm from a 128-byte NT_PRPSINFO");
	m = map_at(555, 0x400800, &p);
	ok(m && m->kind == DW_MAP_FILE && m->prot == (DW_PROT_R | DW_PROT_X), "mips32: 32-bit NT_FILE entry");
	dw_proc_put(dw_ctx(&ctx), p);
	dwunw_shutdown(&ctx);
	free(b.p);
}

/* arm64: pr_reg is x0-x30, sp, pc, pstate. */
static void test_arm64_core(void)
{
	static uint8_t d[512];
	uint64_t regs[34];
	size_t n, nd;
	int err;

	if (!dwunw_arch_get(DWUNW_ARCH_ARM64)) {
		SKIP("arm64 backend missing");
		return;
	}
	memset(regs, 0, sizeof(regs));
	regs[29] = 0x5500010000;
	regs[30] = 0x5500000123;
	regs[31] = 0x5500010000;
	regs[32] = 0x5500000100;
	nd = prstatus(d, 8, 77, 6, regs, 34);
	struct note notes[] = { { NT_PRSTATUS, "CORE", d, (uint32_t)nd } };
	struct load loads[] = { { 0x5500010000, 0x1000, 0x1000, PF_R | PF_W, NULL } };
	struct built b = build(EM_AARCH64, ELFCLASS64, notes, 1, loads, 1);

	ctx_new(NULL);
	err = load_buf(b.p, b.size, NULL, &n);
	is_int(err, DWUNW_OK, "arm64 core without NT_PRPSINFO or NT_FILE: loads");
	ok(n == 1 && threads[0].signo == 6 && threads[0].regs.pc == 0x5500000100 && threads[0].regs.regs[31] == 0x5500010000,
	   "arm64: thread, signal, pc, sp");
	ok(info.pid == 77 && info.comm[0] == 0 && info.nmaps == 1, "arm64: the pid is the first thread's; the segment is the maps");
	dwunw_shutdown(&ctx);
	free(b.p);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dwunw-test-core-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	test_x86_core();
	test_maps_text();
	test_truncated();
	test_corrupt();
	test_mips_core();
	test_arm64_core();
	unlink(tpath("core"));
	unlink(tpath("other-exe"));
	rmdir(tmpdir);
	return done_testing();
}
