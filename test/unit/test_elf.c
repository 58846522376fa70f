// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of elf.c: libc by path and image, lost section headers, compressed sections, cross files, bad input. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>
#include <elf.h>
#include "elf_file.h"
#include "tap.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define DW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char tmpdir[64];

static const char *const names[DW_SEC_COUNT] = {
	".eh_frame", ".eh_frame_hdr", ".debug_frame", ".symtab", ".strtab", ".dynsym", ".dynstr",
	".gnu_debuglink", ".gnu_debugdata", ".debug_line", ".debug_line_str", ".debug_str",
	".debug_info", ".debug_abbrev", ".debug_str_offsets", ".text", ".got", ".rela.plt", ".rela.dyn",
};

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *tpath(const char *name)
{
	static char bufs[8][512];
	static int k;
	char *b = bufs[k++ & 7];
	snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
	return b;
}

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static int spit(const char *path, const void *buf, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int rc = fwrite(buf, 1, size, f) == size ? 0 : -1;
	return fclose(f) ? -1 : rc;
}

static int shell(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st == 0 ? 0 : -1;
}

/* The output of a command, NUL-terminated (malloc'd), or NULL. */
static char *output(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	if (!p)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 1024) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		}
	}
	pclose(p);
	if (buf)
		buf[len] = 0;
	return buf;
}

/*
 * A copy of `len` bytes that ends right at an unreadable page, so that reading one byte too far
 * faults even without a sanitizer. Released with guarded_free.
 */
struct guarded {
	uint8_t *map;
	size_t maplen;
	uint8_t *data;
};

static struct guarded guarded_copy(const void *src, size_t len)
{
	struct guarded g = { 0 };
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + pg - 1) / pg * pg;
	g.maplen = body + pg;
	g.map = mmap(NULL, g.maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g.map == MAP_FAILED) {
		g.map = NULL;
		return g;
	}
	mprotect(g.map + body, pg, PROT_NONE);
	g.data = g.map + body - len;
	memcpy(g.data, src, len);
	/* Read-only: elf.c must never write a caller's image. */
	mprotect(g.map, body, PROT_READ);
	return g;
}

static void guarded_free(struct guarded *g)
{
	if (g->map)
		munmap(g->map, g->maplen);
	g->map = NULL;
}

struct rsec {
	char name[128];
	char type[32];
	uint64_t addr, off, size;
};

/* readelf -SW, sections 1..n-1. */
static int readelf_sections(const char *path, struct rsec *out, int max)
{
	char *txt = output("readelf -SW '%s' 2>/dev/null", path);
	int n = 0;
	if (!txt)
		return 0;
	for (char *line = strtok(txt, "\n"); line && n < max; line = strtok(NULL, "\n")) {
		int idx;
		char *rb = strchr(line, ']');
		unsigned long long a, o, s;
		if (sscanf(line, " [%d]", &idx) != 1 || idx == 0 || !rb)
			continue;
		if (sscanf(rb + 1, " %127s %31s %llx %llx %llx", out[n].name, out[n].type, &a, &o, &s) != 5)
			continue;
		out[n].addr = a;
		out[n].off = o;
		out[n].size = s;
		n++;
	}
	free(txt);
	return n;
}

/* The section called name (or its .zdebug_ form), or NULL. */
static const struct rsec *find_rsec(const struct rsec *rs, int n, const char *name)
{
	char z[140];
	snprintf(z, sizeof(z), ".z%s", name + 1);
	for (int i = 0; i < n; i++)
		if (strcmp(rs[i].name, name) == 0 || (strncmp(name, ".debug_", 7) == 0 && strcmp(rs[i].name, z) == 0))
			return &rs[i];
	return NULL;
}

/* readelf -nW's build-id in hex, "" when none. */
static void readelf_build_id(const char *path, char *hex, size_t len)
{
	char *txt = output("readelf -nW '%s' 2>/dev/null", path);
	hex[0] = 0;
	char *p = txt ? strstr(txt, "Build ID: ") : NULL;
	if (p)
		snprintf(hex, len, "%.128s", p + 10);
	hex[strcspn(hex, " \t\r\n")] = 0;
	free(txt);
}

/* The span of executable PT_LOADs from readelf -lW. */
static void readelf_exec_span(const char *path, uint64_t *lo, uint64_t *hi)
{
	char *txt = output("readelf -lW '%s' 2>/dev/null", path);
	*lo = *hi = 0;
	int any = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		unsigned long long off, va, pa, fs, ms;
		char rest[64] = "";
		if (sscanf(line, " LOAD %llx %llx %llx %llx %llx %63[^\n]", &off, &va, &pa, &fs, &ms, rest) != 6)
			continue;
		if (!strchr(rest, 'E'))
			continue;
		if (!any || va < *lo)
			*lo = va;
		if (!any || va + ms > *hi)
			*hi = va + ms;
		any = 1;
	}
	free(txt);
}

/* Each section dwunw looks for is there (or NOBITS) exactly when readelf lists it, at its place. */
static void check_vs_readelf(struct dw_elf *e, const char *path, const char *what)
{
	struct rsec rs[512];
	int n = readelf_sections(path, rs, 512), bad = 0;
	for (int id = 0; id < DW_SEC_COUNT; id++) {
		const struct rsec *r = find_rsec(rs, n, names[id]);
		const struct dw_section *s = NULL;
		int rc = dw_elf_section(e, id, &s);
		if (!r) {
			if (rc != DWUNW_ERR_NO_DWARF) {
				printf("  # %s: %s not in readelf but rc %d\n", what, names[id], rc);
				bad++;
			}
			continue;
		}
		if (strcmp(r->type, "NOBITS") == 0) {
			if (rc != DWUNW_ERR_NO_DWARF || !e->sec[id].nobits) {
				printf("  # %s: %s NOBITS but rc %d\n", what, names[id], rc);
				bad++;
			}
			continue;
		}
		if (rc != DWUNW_OK || !s->data || s->addr != r->addr || s->file_off != r->off ||
		    (!s->compressed && (s->size != r->size || s->data != e->image + r->off))) {
			printf("  # %s: %s rc %d addr 0x%llx/0x%llx\n", what, names[id], rc,
			       s ? (unsigned long long)s->addr : 0ull, (unsigned long long)r->addr);
			bad++;
		}
	}
	ok(n > 0 && !bad, "%s: the %d known sections agree with readelf -S (%d listed)", what, DW_SEC_COUNT, n);
}

/* Zero e_shoff/e_shnum/e_shstrndx, as if the section headers were stripped off. */
static void drop_shdrs(uint8_t *buf)
{
	if (buf[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, buf, sizeof(eh));
		eh.e_shoff = 0, eh.e_shnum = 0, eh.e_shstrndx = 0;
		memcpy(buf, &eh, sizeof(eh));
	} else {
		Elf32_Ehdr eh;
		memcpy(&eh, buf, sizeof(eh));
		eh.e_shoff = 0, eh.e_shnum = 0, eh.e_shstrndx = 0;
		memcpy(buf, &eh, sizeof(eh));
	}
}

/* ELF64 section header idx of buf. */
static Elf64_Shdr get_shdr(const uint8_t *buf, unsigned idx)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	memcpy(&eh, buf, sizeof(eh));
	memcpy(&sh, buf + eh.e_shoff + (uint64_t)idx * sizeof(sh), sizeof(sh));
	return sh;
}

static void put_shdr(uint8_t *buf, unsigned idx, const Elf64_Shdr *sh)
{
	Elf64_Ehdr eh;
	memcpy(&eh, buf, sizeof(eh));
	memcpy(buf + eh.e_shoff + (uint64_t)idx * sizeof(*sh), sh, sizeof(*sh));
}

/* Sections that loaded point into the image (or into their own copy) and stay inside it. */
static int sections_in_bounds(struct dw_elf *e)
{
	for (int id = 0; id < DW_SEC_COUNT; id++) {
		const struct dw_section *s;
		if (dw_elf_section(e, id, &s) != DWUNW_OK)
			continue;
		if (!s->data)
			return 0;
		if (s->owned)
			continue;
		if (s->data < e->image || s->data > e->image + e->size ||
		    s->size > (uint64_t)(e->image + e->size - s->data))
			return 0;
	}
	return 1;
}

/* ---- libc ------------------------------------------------------------------------------- */

static char libc_bid[130];
static struct rsec libc_rs[512];
static int libc_nrs;

static void check_libc(struct dw_elf *e, const char *what)
{
	const struct rsec *eh = find_rsec(libc_rs, libc_nrs, ".eh_frame");
	const struct rsec *hdr = find_rsec(libc_rs, libc_nrs, ".eh_frame_hdr");
	const struct rsec *text = find_rsec(libc_rs, libc_nrs, ".text");
	const struct dw_section *s;
	char hex[129];
	uint64_t lo, hi;

	is_int(e->machine, EM_X86_64, "%s: machine EM_X86_64", what);
	is_int(e->elf_class, ELFCLASS64, "%s: ELFCLASS64", what);
	is_int(e->type, ET_DYN, "%s: ET_DYN", what);
	ok(e->arch && e->arch->arch == DWUNW_ARCH_X86_64, "%s: x86_64 backend", what);
	ok(e->has_shdrs, "%s: section headers usable", what);
	is_int(e->build_id_len, 20, "%s: 20-byte build-id", what);
	is_int(dw_elf_build_id_hex(e, hex, sizeof(hex)), 20, "%s: build-id hex length", what);
	is_str(hex, libc_bid, "%s: build-id equals readelf -n", what);
	is_int(dw_elf_build_id_hex(e, hex, 40), DWUNW_ERR_INVALID_ARG, "%s: 40-byte buffer too small", what);

	ok(eh && hdr && text, "%s: readelf lists .eh_frame, .eh_frame_hdr, .text", what);
	if (!eh || !hdr || !text)
		return;
	is_int(dw_elf_section(e, DW_SEC_EH_FRAME, &s), DWUNW_OK, "%s: .eh_frame", what);
	is_hex(s->addr, eh->addr, "%s: .eh_frame address", what);
	is_hex(s->size, eh->size, "%s: .eh_frame size", what);
	ok(s->data == e->image + eh->off && !s->owned, "%s: .eh_frame points into the file", what);
	is_int(dw_elf_section(e, DW_SEC_EH_FRAME_HDR, &s), DWUNW_OK, "%s: .eh_frame_hdr", what);
	is_hex(s->addr, hdr->addr, "%s: .eh_frame_hdr address", what);
	is_hex(s->size, hdr->size, "%s: .eh_frame_hdr size", what);

	readelf_exec_span(LIBC, &lo, &hi);
	is_hex(e->exec_lo, lo, "%s: exec_lo is the R E PT_LOAD start", what);
	is_hex(e->exec_hi, hi, "%s: exec_hi is its end", what);
	ok(e->exec_lo <= text->addr && text->addr + text->size <= e->exec_hi, "%s: exec range covers .text", what);
	is_hex(e->vaddr_lo, 0, "%s: vaddr_lo", what);
	check_vs_readelf(e, LIBC, what);
}

static void test_libc_path(void)
{
	struct dw_elf e;
	const struct dw_section *s;
	uint8_t buf[64];

	is_int(dw_elf_open_path(&e, LIBC), DWUNW_OK, "open %s", LIBC);
	check_libc(&e, "path");

	/* Virtual-address reads. */
	is_int(dw_elf_section(&e, DW_SEC_EH_FRAME, &s), DWUNW_OK, "path: .eh_frame again");
	is_int(dw_elf_read_vaddr(&e, s->addr, buf, sizeof(buf)), DWUNW_OK, "read_vaddr at .eh_frame");
	ok(memcmp(buf, s->data, sizeof(buf)) == 0, "read_vaddr gives the section's bytes");
	is_int(dw_elf_read_vaddr(&e, 0xdead00000000ull, buf, 8), DWUNW_ERR_INVALID_ARG, "read_vaddr unmapped");
	is_int(dw_elf_read_vaddr(&e, s->addr, buf, 0), DWUNW_OK, "read_vaddr of 0 bytes");

	const struct dw_phdr *bss = NULL, *last = NULL;
	for (uint32_t i = 0; i < e.nphdrs; i++)
		if (e.phdrs[i].type == PT_LOAD) {
			last = &e.phdrs[i];
			if (last->memsz > last->filesz + 16)
				bss = last;
		}
	ok(bss != NULL, "libc has a PT_LOAD with bss");
	if (bss) {
		uint8_t want[16];
		/* From the file itself: the image holds only the ranges the library read. */
		int fd = open(LIBC, O_RDONLY);
		ok(fd >= 0 && pread(fd, want, 8, (off_t)(bss->offset + bss->filesz - 8)) == 8,
		   "the file's last bytes before bss");
		if (fd >= 0)
			close(fd);
		memset(want + 8, 0, 8);
		memset(buf, 0xaa, 16);
		is_int(dw_elf_read_vaddr(&e, bss->vaddr + bss->filesz - 8, buf, 16), DWUNW_OK,
		       "read_vaddr across p_filesz");
		ok(memcmp(buf, want, 16) == 0, "file bytes, then zeros past p_filesz");
	}
	if (last)
		is_int(dw_elf_read_vaddr(&e, last->vaddr + last->memsz - 4, buf, 8), DWUNW_ERR_INVALID_ARG,
		       "read_vaddr running past the last PT_LOAD");
	if (e.nphdrs >= 2) {
		const struct dw_phdr *x = NULL;
		for (uint32_t i = 0; i < e.nphdrs; i++)
			if (e.phdrs[i].type == PT_LOAD && e.phdrs[i].flags & PF_X)
				x = &e.phdrs[i];
		ok(x && dw_elf_load_for_offset(&e, x->offset) == x, "load_for_offset of the text segment");
		ok(x && dw_elf_load_for_offset(&e, x->offset + 0x1000) == x, "load_for_offset inside it");
	}
	const struct dw_phdr *p0 = dw_elf_load_for_offset(&e, 0);
	ok(p0 && p0->type == PT_LOAD && p0->offset == 0, "load_for_offset(0) is the first PT_LOAD");
	ok(dw_elf_load_for_offset(&e, e.size + 0x100000) == NULL, "load_for_offset beyond the file");
	is_int(dw_elf_section(&e, DW_SEC_COUNT, &s), DWUNW_ERR_INVALID_ARG, "section id out of range");
	dw_elf_close(&e);
	dw_elf_close(&e); /* twice is harmless */
	ok(e.fd == -1 && e.elf == NULL, "close resets the struct");
}

static void test_libc_image(void)
{
	size_t n;
	uint8_t *file = slurp(LIBC, &n);
	struct dw_elf e;

	ok(file != NULL, "read libc into memory");
	if (!file)
		return;
	/* Read-only and ending at a guard page; start misaligned on purpose in the second round. */
	for (int misalign = 0; misalign < 2; misalign++) {
		struct guarded g = guarded_copy(file, n);
		const void *img = g.data;
		char what[32];
		snprintf(what, sizeof(what), "image%s", misalign ? "+1" : "");
		if (misalign) {
			guarded_free(&g);
			uint8_t *tmp = malloc(n + 1);
			memcpy(tmp + 1, file, n);
			g = guarded_copy(tmp, n + 1);
			free(tmp);
			img = g.data + 1;
		}
		is_int(dw_elf_open_image(&e, img, n), DWUNW_OK, "%s: open", what);
		ok(e.image == img && e.fd == -1, "%s: uses the caller's bytes", what);
		check_libc(&e, what);
		dw_elf_close(&e);
		guarded_free(&g);
	}
	free(file);
}

/* ---- a hand-made core-like file: adjacent segments, bss, a note, nothing else ---------- */

static void test_synthetic(void)
{
	uint8_t img[0x300] = { 0 };
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph[3] = {
		{ .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = 0x100, .p_vaddr = 0x1000,
		  .p_filesz = 0x10, .p_memsz = 0x10, .p_align = 0x1000 },
		{ .p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_offset = 0x200, .p_vaddr = 0x1010,
		  .p_filesz = 0x8, .p_memsz = 0x20, .p_align = 0x1000 },
		{ .p_type = PT_NOTE, .p_offset = 0x280, .p_filesz = 32, .p_align = 4 },
	};
	const uint32_t note[3] = { 4, 8, NT_GNU_BUILD_ID };
	const uint8_t desc[8] = { 1, 2, 3, 4, 5, 6, 7, 0xfe };
	struct dw_elf e;
	uint8_t b[0x18], want[0x18];
	char hex[32];

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph[0]);
	eh.e_phnum = 3;
	memcpy(img, &eh, sizeof(eh));
	memcpy(img + sizeof(eh), ph, sizeof(ph));
	memset(img + 0x100, 0x11, 0x10);
	memset(img + 0x200, 0x22, 0x8);
	memcpy(img + 0x280, note, sizeof(note));
	memcpy(img + 0x28c, "GNU", 4);
	memcpy(img + 0x290, desc, sizeof(desc));

	is_int(dw_elf_open_image(&e, img, sizeof(img)), DWUNW_OK, "synthetic: open");
	is_int(e.type, ET_CORE, "synthetic: ET_CORE");
	ok(!e.has_shdrs && e.nphdrs == 3, "synthetic: 3 program headers, no sections");
	is_hex(e.exec_lo, 0x1000, "synthetic: exec_lo");
	is_hex(e.exec_hi, 0x1010, "synthetic: exec_hi");
	is_hex(e.vaddr_lo, 0x1000, "synthetic: vaddr_lo");
	is_int(dw_elf_build_id_hex(&e, hex, sizeof(hex)), 8, "synthetic: build-id length");
	is_str(hex, "01020304050607fe", "synthetic: build-id");
	memset(want, 0x11, 8);
	memset(want + 8, 0x22, 8);
	memset(want + 16, 0, 8);
	memset(b, 0xaa, sizeof(b));
	is_int(dw_elf_read_vaddr(&e, 0x1008, b, sizeof(b)), DWUNW_OK, "synthetic: read across two PT_LOADs and bss");
	ok(memcmp(b, want, sizeof(b)) == 0, "synthetic: bytes of both, then zeros");
	is_int(dw_elf_read_vaddr(&e, 0x1028, b, 0x10), DWUNW_ERR_INVALID_ARG, "synthetic: read past the end of memsz");
	is_int(dw_elf_read_vaddr(&e, 0xfff, b, 2), DWUNW_ERR_INVALID_ARG, "synthetic: read starting before");
	ok(dw_elf_load_for_offset(&e, 0x100) == &e.phdrs[0], "synthetic: load_for_offset(0x100)");
	ok(dw_elf_load_for_offset(&e, 0x200) == &e.phdrs[1], "synthetic: load_for_offset(0x200)");
	ok(dw_elf_load_for_offset(&e, 0x204) == &e.phdrs[1], "synthetic: load_for_offset(0x204)");
	const struct dw_section *s;
	is_int(dw_elf_section(&e, DW_SEC_EH_FRAME, &s), DWUNW_ERR_NO_DWARF, "synthetic: no .eh_frame");
	dw_elf_close(&e);
}

/* ---- section headers gone: .eh_frame through PT_GNU_EH_FRAME ----------------------------- */

static void test_phdr_fallback(const char *orig, const char *what)
{
	struct dw_elf a, b;
	const struct dw_section *eh, *hdr, *eh2, *hdr2;
	char p[600];

	if (dw_elf_open_path(&a, orig) != DWUNW_OK) {
		ok(0, "%s: open original", what);
		return;
	}
	if (dw_elf_section(&a, DW_SEC_EH_FRAME, &eh) || dw_elf_section(&a, DW_SEC_EH_FRAME_HDR, &hdr)) {
		ok(0, "%s: original has .eh_frame and .eh_frame_hdr", what);
		dw_elf_close(&a);
		return;
	}
	size_t n;
	uint8_t *buf = slurp(orig, &n);
	drop_shdrs(buf);
	snprintf(p, sizeof(p), "%s/noshdr-%s", tmpdir, what);
	spit(p, buf, n);

	is_int(dw_elf_open_path(&b, p), DWUNW_OK, "%s without section headers: open", what);
	ok(!b.has_shdrs, "%s: has_shdrs is 0", what);
	ok(b.build_id_len == a.build_id_len && memcmp(b.build_id, a.build_id, a.build_id_len) == 0,
	   "%s: build-id from PT_NOTE", what);
	is_int(dw_elf_section(&b, DW_SEC_EH_FRAME_HDR, &hdr2), DWUNW_OK, "%s: .eh_frame_hdr found", what);
	is_int(dw_elf_section(&b, DW_SEC_EH_FRAME, &eh2), DWUNW_OK, "%s: .eh_frame found", what);
	if (hdr2 && eh2) {
		is_hex(hdr2->addr, hdr->addr, "%s: .eh_frame_hdr address", what);
		is_hex(hdr2->size, hdr->size, "%s: .eh_frame_hdr size", what);
		is_hex(b.eh_frame_hdr_vaddr, hdr->addr, "%s: eh_frame_hdr_vaddr", what);
		is_hex(eh2->addr, eh->addr, "%s: .eh_frame address", what);
		is_hex(eh2->file_off, eh->file_off, "%s: .eh_frame file offset", what);
		ok(eh2->size >= eh->size && memcmp(eh2->data, eh->data, eh->size) == 0,
		   "%s: .eh_frame bytes equal the original's (%llu >= %llu)", what,
		   (unsigned long long)eh2->size, (unsigned long long)eh->size);
	}
	const struct dw_section *s;
	is_int(dw_elf_section(&b, DW_SEC_DYNSYM, &s), DWUNW_ERR_NO_DWARF, "%s: no .dynsym without headers", what);

	/* Other eh_frame_ptr encodings, rewritten in place (64-bit files only need 8 bytes). */
	if (hdr2 && eh2 && hdr->size >= 12) {
		uint64_t hoff = hdr2->file_off, ha = hdr->addr, ea = eh->addr;
		unsigned asz = buf[EI_CLASS] == ELFCLASS64 ? 8 : 4;
		struct { uint8_t enc; int64_t val; unsigned len; int found; const char *name; } cases[] = {
			{ 0x03, (int64_t)ea, 4, 1, "udata4" },
			{ 0x0b, (int64_t)ea, 4, 1, "sdata4" },
			{ 0x04, (int64_t)ea, 8, 1, "udata8" },
			{ 0x00, (int64_t)ea, asz, 1, "absptr" },
			{ 0x33, (int64_t)(ea - ha), 4, 1, "datarel|udata4" },
			{ 0x3c, (int64_t)(ea - ha), 8, 1, "datarel|sdata8" },
			{ 0x1c, (int64_t)(ea - ha - 4), 8, 1, "pcrel|sdata8" },
			{ 0x1b, (int64_t)(ea - ha - 4), 4, 1, "pcrel|sdata4" },
			{ 0x9b, (int64_t)(ea - ha - 4), 4, 0, "indirect" },
			{ 0xff, 0, 4, 0, "omit" },
			{ 0x01, 0, 4, 0, "uleb128 (unsupported)" },
			{ 0x03, 0x7ffffff0, 4, 0, "pointing nowhere" },
		};
		int bad = 0;
		for (size_t i = 0; i < DW_ARRAY_SIZE(cases); i++) {
			uint8_t *c = malloc(n);
			memcpy(c, buf, n);
			c[hoff + 1] = cases[i].enc;
			memcpy(c + hoff + 4, &cases[i].val, cases[i].len);
			struct dw_elf x;
			int rc = dw_elf_open_image(&x, c, n);
			int got = rc == DWUNW_OK && dw_elf_section(&x, DW_SEC_EH_FRAME, &s) == DWUNW_OK;
			if (rc || got != cases[i].found || (got && s->addr != ea)) {
				printf("  # %s: encoding %s: rc %d found %d\n", what, cases[i].name, rc, got);
				bad++;
			}
			if (!rc)
				dw_elf_close(&x);
			free(c);
		}
		ok(!bad, "%s: eh_frame_ptr encodings (%zu cases)", what, DW_ARRAY_SIZE(cases));
		/* A version-2 header is not ours to guess at. */
		uint8_t *c = malloc(n);
		memcpy(c, buf, n);
		c[hoff] = 2;
		struct dw_elf x;
		if (dw_elf_open_image(&x, c, n) == DWUNW_OK) {
			is_int(dw_elf_section(&x, DW_SEC_EH_FRAME, &s), DWUNW_ERR_NO_DWARF, "%s: version 2 header ignored", what);
			dw_elf_close(&x);
		} else {
			ok(0, "%s: version 2 header opens", what);
		}
		free(c);
	}
	dw_elf_close(&b);
	dw_elf_close(&a);
	free(buf);
}

/* ---- compressed sections --------------------------------------------------------------- */

static int have_prog;

static void build_prog(void)
{
	FILE *f = fopen(tpath("prog.c"), "w");
	if (!f)
		return;
	/* Enough functions that compression pays and objcopy really compresses .debug_frame. */
	for (int i = 0; i < 300; i++)
		fprintf(f, "int f%d(volatile int *p) { int s = 0; for (int i = 0; i < *p; i++) s += i * %d; return s; }\n", i, i);
	fprintf(f, "int main(void) { volatile int n = 3; return f0(&n) + f299(&n); }\n");
	fclose(f);
	have_prog = shell("gcc -g -O0 -fno-asynchronous-unwind-tables -o '%s' '%s'", tpath("prog"), tpath("prog.c")) == 0;
	ok(have_prog, "built a -g -fno-asynchronous-unwind-tables program");
}

static const enum dw_sec_id debug_ids[] = {
	DW_SEC_DEBUG_FRAME, DW_SEC_DEBUG_INFO, DW_SEC_DEBUG_ABBREV, DW_SEC_DEBUG_LINE,
	DW_SEC_DEBUG_STR, DW_SEC_DEBUG_LINE_STR, DW_SEC_DEBUG_STR_OFFSETS,
};

struct race {
	struct dw_elf *e;
	pthread_barrier_t *bar;
	const void *ptr[DW_SEC_COUNT];
	int rc[DW_SEC_COUNT];
};

static void *race_thread(void *arg)
{
	struct race *r = arg;
	pthread_barrier_wait(r->bar);
	for (int id = 0; id < DW_SEC_COUNT; id++) {
		const struct dw_section *s = NULL;
		r->rc[id] = dw_elf_section(r->e, id, &s);
		r->ptr[id] = s ? s->data : NULL;
	}
	return NULL;
}

/* Eight threads load the sections of one fresh dw_elf at once: same answers, one copy each. */
static void test_race(const char *path, const char *what)
{
	enum { N = 8 };
	struct dw_elf e;
	pthread_t th[N];
	struct race r[N];
	pthread_barrier_t bar;

	if (dw_elf_open_path(&e, path) != DWUNW_OK) {
		ok(0, "%s: open for the race", what);
		return;
	}
	pthread_barrier_init(&bar, NULL, N);
	for (int i = 0; i < N; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].e = &e;
		r[i].bar = &bar;
		pthread_create(&th[i], NULL, race_thread, &r[i]);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	int bad = 0;
	for (int i = 1; i < N; i++)
		for (int id = 0; id < DW_SEC_COUNT; id++)
			if (r[i].rc[id] != r[0].rc[id] || r[i].ptr[id] != r[0].ptr[id])
				bad++;
	ok(!bad && r[0].rc[DW_SEC_DEBUG_FRAME] == DWUNW_OK, "%s: %d threads loading at once agree", what, N);
	pthread_barrier_destroy(&bar);
	dw_elf_close(&e);
}

/* Corruptions of one compressed file's .debug_frame, through images. */
static void test_corrupt_compressed(const char *path, const char *what, int gnu)
{
	size_t n;
	uint8_t *orig = slurp(path, &n);
	struct dw_elf e;
	const struct dw_section *s;

	if (!orig || dw_elf_open_image(&e, orig, n) != DWUNW_OK) {
		ok(0, "%s: open", what);
		free(orig);
		return;
	}
	struct dw_section sec = e.sec[DW_SEC_DEBUG_FRAME];
	dw_elf_close(&e);
	ok(sec.compressed && sec.index, "%s: .debug_frame is compressed", what);
	if (!sec.compressed)
		goto out;
	uint64_t off = sec.file_off, hlen = gnu ? 12 : sizeof(Elf64_Chdr);

	struct {
		const char *name;
		int want;
	} cases[] = {
		{ "payload overwritten", DWUNW_ERR_CORRUPT },
		{ "size claims 100 GB", DWUNW_ERR_CORRUPT },
		{ "size one too large", DWUNW_ERR_CORRUPT },
		{ "size one too small", DWUNW_ERR_CORRUPT },
		{ "unknown ch_type", gnu ? DWUNW_ERR_CORRUPT : DWUNW_ERR_UNSUPPORTED },
		{ "section shorter than its header", DWUNW_ERR_CORRUPT },
		{ "payload cut short", DWUNW_ERR_CORRUPT },
	};
	for (size_t i = 0; i < DW_ARRAY_SIZE(cases); i++) {
		uint8_t *c = malloc(n);
		memcpy(c, orig, n);
		Elf64_Chdr ch;
		memcpy(&ch, c + off, sizeof(ch));
		uint64_t gsize = 0;
		for (int k = 0; k < 8; k++)
			gsize = gsize << 8 | c[off + 4 + k];
		uint64_t size = gnu ? gsize : ch.ch_size;
		Elf64_Shdr sh = get_shdr(c, sec.index);
		switch (i) {
		case 0: memset(c + off + hlen, 0xa5, 32); break;
		case 1: size = 100000000000ull; break;
		case 2: size++; break;
		case 3: size--; break;
		case 4: if (gnu) memcpy(c + off, "ZLIX", 4); else ch.ch_type = 9; break;
		case 5: sh.sh_size = hlen - 2; break;
		case 6: sh.sh_size = hlen + 6; break;
		}
		if (gnu) {
			for (int k = 0; k < 8; k++)
				c[off + 4 + k] = (uint8_t)(size >> (56 - 8 * k));
		} else {
			ch.ch_size = size;
			memcpy(c + off, &ch, sizeof(ch));
		}
		put_shdr(c, sec.index, &sh);
		struct guarded g = guarded_copy(c, n);
		int rc = dw_elf_open_image(&e, g.data, n);
		if (rc == DWUNW_OK) {
			is_int(dw_elf_section(&e, DW_SEC_DEBUG_FRAME, &s), cases[i].want, "%s: %s", what, cases[i].name);
			is_int(dw_elf_section(&e, DW_SEC_DEBUG_FRAME, &s), cases[i].want, "%s: %s, asked again", what, cases[i].name);
			is_int(dw_elf_section(&e, DW_SEC_DEBUG_INFO, &s), DWUNW_OK, "%s: %s: .debug_info still loads", what, cases[i].name);
			dw_elf_close(&e);
		} else {
			ok(0, "%s: %s: open failed %d", what, cases[i].name, rc);
		}
		guarded_free(&g);
		free(c);
	}
out:
	free(orig);
}

static void test_compressed(void)
{
	struct dw_elf o, c;
	const struct dw_section *so, *sc;
	char *help = output("objcopy --help 2>&1");
	const char *modes[] = { "zlib", "zstd", "zlib-gnu" };

	if (!have_prog)
		return;
	is_int(dw_elf_open_path(&o, tpath("prog")), DWUNW_OK, "open the uncompressed program");
	is_int(dw_elf_section(&o, DW_SEC_DEBUG_FRAME, &so), DWUNW_OK, "it has .debug_frame");
	ok(so && !so->compressed && so->size > 1000, "uncompressed, %llu bytes", so ? (unsigned long long)so->size : 0ull);
	check_vs_readelf(&o, tpath("prog"), "prog");

	for (size_t m = 0; m < DW_ARRAY_SIZE(modes); m++) {
		char name[64], opt[64];
		snprintf(name, sizeof(name), "prog.%s", modes[m]);
		snprintf(opt, sizeof(opt), "=%s", modes[m]);
		strcat(opt, "}");
		/* objcopy --help lists "{none|zlib|zlib-gnu|zlib-gabi|zstd}". */
		char needle[32];
		snprintf(needle, sizeof(needle), "|%s", modes[m]);
		int listed = help && (strstr(help, needle) != NULL);
		if (!listed || shell("objcopy --compress-debug-sections=%s '%s' '%s' 2>/dev/null", modes[m],
				     tpath("prog"), tpath(name)) != 0) {
			SKIP("objcopy --compress-debug-sections=%s is not supported here", modes[m]);
			continue;
		}
		is_int(dw_elf_open_path(&c, tpath(name)), DWUNW_OK, "%s: open", name);
		ok(c.sec[DW_SEC_DEBUG_FRAME].compressed == 1 + (strcmp(modes[m], "zlib-gnu") == 0),
		   "%s: .debug_frame is %s", name, m == 2 ? ".zdebug_frame" : "SHF_COMPRESSED");
		int bad = 0, cnt = 0;
		for (size_t k = 0; k < DW_ARRAY_SIZE(debug_ids); k++) {
			int ro = dw_elf_section(&o, debug_ids[k], &so);
			int rc = dw_elf_section(&c, debug_ids[k], &sc);
			if (ro != rc || (ro == DWUNW_OK && (so->size != sc->size || memcmp(so->data, sc->data, so->size)))) {
				printf("  # %s: %s differs (rc %d/%d)\n", name, names[debug_ids[k]], ro, rc);
				bad++;
			}
			cnt += ro == DWUNW_OK;
		}
		ok(!bad && cnt >= 4, "%s: %d .debug_* sections equal the original byte for byte", name, cnt);
		is_int(dw_elf_section(&c, DW_SEC_DEBUG_FRAME, &sc), DWUNW_OK, "%s: .debug_frame", name);
		ok(sc->owned && sc->loaded, "%s: decompressed copy is owned", name);
		check_vs_readelf(&c, tpath(name), name);
		dw_elf_close(&c);
		if (m == 0)
			test_race(tpath(name), name);
		test_corrupt_compressed(tpath(name), name, m == 2);
	}
	dw_elf_close(&o);
	free(help);
}

/* ---- other machines ---------------------------------------------------------------------- */

static void test_cross(const char *cc, const char *tag, unsigned machine, unsigned cls)
{
	char exe[600];
	char *which = output("command -v %s", cc);
	int have = which && which[0];
	free(which);
	if (!have) {
		SKIP("%s not installed", cc);
		return;
	}
	snprintf(exe, sizeof(exe), "%s/prog-%s", tmpdir, tag);
	FILE *f = fopen(tpath("small.c"), "w");
	fprintf(f, "int g(int x) { return x * 3; }\nint main(void) { return g(2); }\n");
	fclose(f);
	int built = shell("%s -O1 -fasynchronous-unwind-tables -Wl,--eh-frame-hdr -o '%s' '%s' 2>/dev/null",
			  cc, exe, tpath("small.c")) == 0;
	if (!built) /* no target libc: an object file is ELF too */
		built = shell("%s -O1 -fasynchronous-unwind-tables -c -o '%s' '%s'", cc, exe, tpath("small.c")) == 0;
	ok(built, "%s: built with %s", tag, cc);
	if (!built)
		return;

	struct dw_elf e;
	char hex[129], want[130];
	is_int(dw_elf_open_path(&e, exe), DWUNW_OK, "%s: open", tag);
	is_int(e.machine, machine, "%s: machine %u", tag, machine);
	is_int(e.elf_class, cls, "%s: class %u", tag, cls == ELFCLASS64 ? 64 : 32);
	ok(e.type == ET_EXEC || e.type == ET_DYN || e.type == ET_REL, "%s: type %u", tag, e.type);
	ok(!e.arch || e.arch->elf_machine == machine, "%s: backend, if any, matches", tag);
	readelf_build_id(exe, want, sizeof(want));
	dw_elf_build_id_hex(&e, hex, sizeof(hex));
	is_str(hex, want, "%s: build-id equals readelf -n", tag);
	check_vs_readelf(&e, exe, tag);
	dw_elf_close(&e);
	if (e.type != ET_REL)
		test_phdr_fallback(exe, tag);
}

/* ---- bad input ------------------------------------------------------------------------- */

static int open_bytes(const char *name, const void *buf, size_t n, struct dw_elf *e)
{
	spit(tpath(name), buf, n);
	return dw_elf_open_path(e, tpath(name));
}

static void test_bad(void)
{
	struct dw_elf e;
	const struct dw_section *s;
	size_t n;
	uint8_t *libc = slurp(LIBC, &n);
	uint8_t *c = malloc(n);
	uint8_t tmp[64];

	is_int(dw_elf_open_path(&e, tpath("does-not-exist")), DWUNW_ERR_NOT_FOUND, "missing file");
	ok(e.fd == -1 && !e.elf, "a failed open leaves a closed struct");
	dw_elf_close(&e);
	is_int(dw_elf_open_path(&e, tmpdir), DWUNW_ERR_INVALID_ARG, "directory");
	is_int(dw_elf_open_path(&e, "/dev/null"), DWUNW_ERR_INVALID_ARG, "character device");
	is_int(open_bytes("empty", "", 0, &e), DWUNW_ERR_NOT_ELF, "empty file");
	const char *txt = "#!/bin/sh\necho this is not an ELF file at all, just a shell script\n";
	is_int(open_bytes("text", txt, strlen(txt), &e), DWUNW_ERR_NOT_ELF, "text file");
	is_int(open_bytes("short", libc, 40, &e), DWUNW_ERR_NOT_ELF, "ELF magic, 40 bytes");
	is_int(dw_elf_open_image(&e, libc, 0), DWUNW_ERR_NOT_ELF, "empty image");
	is_int(dw_elf_open_image(&e, NULL, 10), DWUNW_ERR_INVALID_ARG, "NULL image");
	spit(tpath("noread"), libc, 4096);
	chmod(tpath("noread"), 0);
	if (geteuid() != 0) {
		is_int(dw_elf_open_path(&e, tpath("noread")), DWUNW_ERR_PERM, "unreadable file");
	} else {
		/* Root reads any file: the open runs in a child that dropped to nobody (65534). */
		int st = -1;
		pid_t p;

		fflush(stdout);
		p = fork();
		if (p == 0) {
			if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
				_exit(100);
			_exit(dw_elf_open_path(&e, tpath("noread")) == DWUNW_ERR_PERM ? 0 : 1);
		}
		while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR)
			;
		is_int(p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "unreadable file (as nobody, in a child): PERM");
	}

	memcpy(tmp, libc, 64);
	tmp[EI_DATA] = ELFDATA2MSB;
	is_int(dw_elf_open_image(&e, tmp, 64), DWUNW_ERR_UNSUPPORTED_ARCH, "big-endian header");
	memcpy(c, libc, n);
	c[EI_DATA] = ELFDATA2MSB;
	is_int(open_bytes("bigendian", c, n, &e), DWUNW_ERR_UNSUPPORTED_ARCH, "big-endian file");
	memcpy(tmp, libc, 64);
	tmp[EI_CLASS] = 3;
	is_int(dw_elf_open_image(&e, tmp, 64), DWUNW_ERR_UNSUPPORTED_ARCH, "unknown class");

	is_int(open_bytes("trunc100", libc, 100, &e), DWUNW_ERR_CORRUPT, "truncated to 100 bytes");
	is_int(open_bytes("trunchalf", libc, n / 2, &e), DWUNW_ERR_CORRUPT, "truncated to half");

	/* Half a file whose section headers are gone: the rest is still read, carefully. */
	memcpy(c, libc, n / 2);
	drop_shdrs(c);
	is_int(open_bytes("trunchalf-noshdr", c, n / 2, &e), DWUNW_OK, "half, no section headers: opens");
	is_int(e.build_id_len, 20, "half, no section headers: build-id from PT_NOTE");
	is_int(dw_elf_section(&e, DW_SEC_EH_FRAME_HDR, &s), DWUNW_ERR_NO_DWARF, "half: .eh_frame_hdr beyond the end is absent");
	is_int(dw_elf_section(&e, DW_SEC_EH_FRAME, &s), DWUNW_ERR_NO_DWARF, "half: .eh_frame beyond the end is absent");
	const struct rsec *ehr = find_rsec(libc_rs, libc_nrs, ".eh_frame");
	is_int(dw_elf_read_vaddr(&e, ehr ? ehr->addr : 0, tmp, 8), DWUNW_ERR_INVALID_ARG,
	       "half: read_vaddr of .eh_frame, beyond the end");
	is_int(dw_elf_read_vaddr(&e, 0x40, tmp, 8), DWUNW_OK, "half: read_vaddr inside");
	dw_elf_close(&e);

	free(c);
	free(libc);
}

/* Damaged headers, each opened by path and as a guarded image: same answer, no crash. */
static void test_bad_headers(void)
{
	size_t n;
	uint8_t *libc = slurp(LIBC, &n);
	struct dw_elf e;
	const struct dw_section *s;
	Elf64_Ehdr eh0;
	unsigned eh_idx;

	if (dw_elf_open_image(&e, libc, n) != DWUNW_OK) {
		ok(0, "open libc image");
		free(libc);
		return;
	}
	eh_idx = e.sec[DW_SEC_EH_FRAME].index;
	/* The build-id note's header sits 16 bytes before its descriptor (12 + "GNU\0"). */
	const uint8_t *desc = memmem(libc, n, e.build_id, e.build_id_len);
	uint64_t note_off = desc ? (uint64_t)(desc - libc) - 16 : 0;
	uint64_t eh_addr = e.sec[DW_SEC_EH_FRAME].addr;
	dw_elf_close(&e);
	memcpy(&eh0, libc, sizeof(eh0));

	struct {
		const char *name;
		int want;          /* from open */
		int want_eh;       /* from dw_elf_section(.eh_frame) when open succeeds */
	} cases[] = {
		{ "e_shoff past EOF", DWUNW_ERR_CORRUPT, 0 },
		{ "section header table straddles EOF", DWUNW_ERR_CORRUPT, 0 },
		{ "e_shstrndx past e_shnum", DWUNW_ERR_CORRUPT, 0 },
		{ "e_shstrndx names a non-string table", DWUNW_ERR_CORRUPT, 0 },
		{ "e_phoff past EOF", DWUNW_ERR_CORRUPT, 0 },
		{ "e_phentsize wrong", DWUNW_ERR_CORRUPT, 0 },
		{ "e_shentsize wrong", DWUNW_ERR_CORRUPT, 0 },
		{ "e_phnum huge", DWUNW_ERR_CORRUPT, 0 },
		{ "string table past EOF", DWUNW_ERR_CORRUPT, 0 },
		{ "e_shstrndx SHN_UNDEF: program headers used", DWUNW_OK, DWUNW_OK },
		{ "e_shnum 0 with e_shoff set", DWUNW_OK, DWUNW_OK },
		{ ".eh_frame sh_size past EOF", DWUNW_OK, DWUNW_ERR_CORRUPT },
		{ ".eh_frame sh_offset near 2^64", DWUNW_OK, DWUNW_ERR_CORRUPT },
		{ ".eh_frame sh_offset past EOF", DWUNW_OK, DWUNW_ERR_CORRUPT },
		{ ".eh_frame sh_name out of the table: found through PT_GNU_EH_FRAME", DWUNW_OK, DWUNW_OK },
		{ ".eh_frame NOBITS", DWUNW_OK, DWUNW_ERR_NO_DWARF },
		{ "build-id note namesz huge", DWUNW_OK, DWUNW_OK },
		{ "PT_LOADs past EOF", DWUNW_OK, DWUNW_OK },
	};
	uint8_t *c = malloc(n);
	for (size_t i = 0; i < DW_ARRAY_SIZE(cases); i++) {
		memcpy(c, libc, n);
		Elf64_Ehdr eh = eh0;
		Elf64_Shdr sh = get_shdr(c, eh_idx);
		Elf64_Shdr str = get_shdr(c, eh0.e_shstrndx);
		uint32_t huge = 0xffffffffu;
		switch (i) {
		case 0: eh.e_shoff = n + 4096; break;
		case 1: eh.e_shoff = n - 100; break;
		case 2: eh.e_shstrndx = eh.e_shnum + 5; break;
		case 3: eh.e_shstrndx = (uint16_t)eh_idx; break;
		case 4: eh.e_phoff = n + 8; break;
		case 5: eh.e_phentsize = 40; break;
		case 6: eh.e_shentsize = 32; break;
		case 7: eh.e_phnum = 0xfffe; break;
		case 8: str.sh_offset = n - 10; break;
		case 9: eh.e_shstrndx = 0; break;
		case 10: eh.e_shnum = 0; break;
		case 11: sh.sh_size = n; break;
		case 12: sh.sh_offset = UINT64_MAX - 4; break;
		case 13: sh.sh_offset = n + 1; break;
		case 14: sh.sh_name = 0x7fffffff; break;
		case 15: sh.sh_type = SHT_NOBITS; break;
		case 16:
			memcpy(c + note_off, &huge, 4);
			break;
		case 17:
			for (unsigned k = 0; k < eh.e_phnum; k++) {
				Elf64_Phdr ph;
				memcpy(&ph, c + eh.e_phoff + k * sizeof(ph), sizeof(ph));
				if (ph.p_type == PT_LOAD && ph.p_offset > 0) {
					ph.p_offset += n;
					memcpy(c + eh.e_phoff + k * sizeof(ph), &ph, sizeof(ph));
				}
			}
			break;
		}
		memcpy(c, &eh, sizeof(eh));
		if (i >= 11 && i <= 15)
			put_shdr(c, eh_idx, &sh);
		if (i == 8)
			put_shdr(c, eh0.e_shstrndx, &str);

		char name[32];
		snprintf(name, sizeof(name), "hdr-%zu", i);
		int rp = open_bytes(name, c, n, &e);
		if (rp == DWUNW_OK)
			dw_elf_close(&e);
		struct guarded g = guarded_copy(c, n);
		int ri = dw_elf_open_image(&e, g.data, n);
		is_int(ri, cases[i].want, "%s", cases[i].name);
		is_int(rp, ri, "%s: same by path", cases[i].name);
		if (ri == DWUNW_OK) {
			int rc = dw_elf_section(&e, DW_SEC_EH_FRAME, &s);
			is_int(rc, cases[i].want_eh, "%s: .eh_frame", cases[i].name);
			if (rc == DWUNW_OK && i != 17)
				is_hex(s->addr, eh_addr, "%s: .eh_frame address", cases[i].name);
			ok(sections_in_bounds(&e), "%s: every section loaded lies inside the file", cases[i].name);
			if (i == 16)
				is_int(e.build_id_len, 0, "%s: no build-id", cases[i].name);
			if (i == 17) {
				uint8_t b[8];
				is_int(dw_elf_read_vaddr(&e, eh_addr, b, 8), DWUNW_ERR_INVALID_ARG,
				       "%s: read_vaddr of bytes not in the file", cases[i].name);
			}
			dw_elf_close(&e);
		}
		guarded_free(&g);
	}
	free(c);
	free(libc);
}

/* Every prefix length that matters: no crash, no section outside what is there. */
static void test_truncations(const uint8_t *file, size_t n, const char *what)
{
	int bad = 0, opened = 0, tried = 0;
	for (size_t len = 0; len <= n; len += len < 600 ? 1 : (n / 97 | 1)) {
		struct guarded g = guarded_copy(file, len);
		struct dw_elf e;
		uint8_t b[16];
		int rc = dw_elf_open_image(&e, g.data, len);
		tried++;
		if (rc == DWUNW_OK) {
			opened++;
			if (!sections_in_bounds(&e))
				bad++;
			for (uint32_t i = 0; i < e.nphdrs; i++)
				dw_elf_read_vaddr(&e, e.phdrs[i].vaddr + e.phdrs[i].filesz / 2, b, sizeof(b));
			dw_elf_close(&e);
		} else if (rc != DWUNW_ERR_CORRUPT && rc != DWUNW_ERR_NOT_ELF) {
			bad++;
		}
		guarded_free(&g);
	}
	ok(!bad, "%s: %d truncations (%d opened) stay in bounds", what, tried, opened);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random damage to headers and tables; only surviving (and staying in bounds) counts. */
static void test_fuzz(const char *path, const char *what, int rounds)
{
	size_t n;
	uint8_t *file = slurp(path, &n);
	if (!file) {
		SKIP("fuzzing %s: not built", what);
		return;
	}
	int opened = 0, bad = 0;
	int is64 = file[EI_CLASS] == ELFCLASS64;
	uint64_t phoff, shoff;
	if (is64) {
		Elf64_Ehdr eh;
		memcpy(&eh, file, sizeof(eh));
		phoff = eh.e_phoff, shoff = eh.e_shoff;
	} else {
		Elf32_Ehdr eh;
		memcpy(&eh, file, sizeof(eh));
		phoff = eh.e_phoff, shoff = eh.e_shoff;
	}
	uint8_t *c = malloc(n);
	for (int r = 0; r < rounds; r++) {
		memcpy(c, file, n);
		int muts = 1 + (int)(rnd() % 6);
		for (int k = 0; k < muts; k++) {
			uint64_t pos, sel = rnd() % 10;
			if (sel < 3)
				pos = rnd() % 64;
			else if (sel < 5)
				pos = phoff + rnd() % 512;
			else if (sel < 8)
				pos = shoff + rnd() % (n - shoff);
			else
				pos = rnd() % n;
			if (pos >= n)
				continue;
			uint64_t v;
			switch (rnd() % 5) {
			case 0: v = 0; break;
			case 1: v = ~0ull; break;
			case 2: v = rnd() % 256; break;
			case 3: v = n - rnd() % 64; break;
			default: v = rnd(); break;
			}
			size_t w = (size_t)1 << (rnd() % 4);
			if (pos + w > n)
				w = n - pos;
			memcpy(c + pos, &v, w);
		}
		struct guarded g = guarded_copy(c, n);
		struct dw_elf e;
		if (dw_elf_open_image(&e, g.data, n) == DWUNW_OK) {
			uint8_t b[32];
			char hex[129];
			opened++;
			if (!sections_in_bounds(&e))
				bad++;
			for (uint32_t i = 0; i < e.nphdrs && i < 64; i++) {
				dw_elf_read_vaddr(&e, e.phdrs[i].vaddr, b, sizeof(b));
				dw_elf_load_for_offset(&e, e.phdrs[i].offset);
			}
			dw_elf_build_id_hex(&e, hex, sizeof(hex));
			dw_elf_close(&e);
		}
		guarded_free(&g);
	}
	ok(!bad, "%s: %d damaged copies (%d opened) survive and stay in bounds", what, rounds, opened);
	free(c);
	free(file);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dwunw-elf-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	readelf_build_id(LIBC, libc_bid, sizeof(libc_bid));
	libc_nrs = readelf_sections(LIBC, libc_rs, 512);
	ok(strlen(libc_bid) == 40 && libc_nrs > 20, "readelf knows libc (build-id %s)", libc_bid);

	test_libc_path();
	test_libc_image();
	test_phdr_fallback(LIBC, "libc");
	test_synthetic();
	build_prog();
	if (have_prog)
		test_phdr_fallback(tpath("prog"), "prog");
	test_compressed();
	test_cross("mipsel-linux-gnu-gcc", "mipsel", EM_MIPS, ELFCLASS32);
	test_cross("aarch64-linux-gnu-gcc", "aarch64", EM_AARCH64, ELFCLASS64);
	test_bad();
	test_bad_headers();
	{
		size_t n;
		uint8_t *f = slurp(LIBC, &n);
		if (f) {
			test_truncations(f, n, "libc");
			drop_shdrs(f);
			test_truncations(f, n, "libc without section headers");
			free(f);
		}
	}
	if (have_prog) {
		test_fuzz(tpath("prog"), "prog", 3000);
		test_fuzz(tpath("prog.zlib"), "prog.zlib", 2000);
		test_fuzz(tpath("prog.zstd"), "prog.zstd", 2000);
		test_fuzz(tpath("prog.zlib-gnu"), "prog.zlib-gnu", 1000);
	}
	test_fuzz(tpath("prog-mipsel"), "mipsel", 2000);

	shell("rm -rf '%s'", tmpdir);
	return done_testing();
}
