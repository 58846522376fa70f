// SPDX-License-Identifier: GPL-2.0-only
/* Cheap uprobe places (uprobe_attach.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "insn_x86.h"
#include "uprobe_attach.h"

#define MAX_FUNC_BYTES (1u << 20)
#define MAX_PRELUDE 4

struct func {
	uint64_t addr, size;
	bool found, ifunc;
};

/* The symbol `name` (exact, or name@@version) among STT_FUNC / STT_GNU_IFUNC symbols. */
static void find_sym(Elf *e, Elf64_Word type, const char *name, struct func *f)
{
	Elf_Scn *scn = NULL;
	size_t nl = strlen(name);

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF)
				continue;
			if (GELF_ST_TYPE(s.st_info) != STT_FUNC && GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (!n || strncmp(n, name, nl) || (n[nl] && strncmp(n + nl, "@@", 2)))
				continue;
			f->addr = s.st_value;
			f->size = s.st_size;
			f->ifunc = GELF_ST_TYPE(s.st_info) == STT_GNU_IFUNC;
			f->found = true;
			return;
		}
	}
}

/* Does any function symbol start inside (lo, hi]? (an alias entering the skipped bytes) */
static bool sym_inside(Elf *e, uint64_t lo, uint64_t hi)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			if (gelf_getsym(d, (int)i, &s) && s.st_shndx != SHN_UNDEF && s.st_value > lo &&
			    s.st_value <= hi)
				return true;
		}
	}
	return false;
}

/* File offset of a virtual address in an executable PT_LOAD segment; -1 when none. */
static int64_t vaddr_to_off(Elf *e, uint64_t addr, uint64_t size)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (addr >= ph.p_vaddr && addr + size <= ph.p_vaddr + ph.p_filesz)
			return (int64_t)(addr - ph.p_vaddr + ph.p_offset);
	}
	return -1;
}

/* The probe offset inside the function's bytes, or 0 with the reason in why. */
static uint32_t choose(const uint8_t *code, size_t size, char *why, size_t whylen)
{
	struct ix_insn in;
	size_t off = 0;
	int k;

	for (k = 0; k < MAX_PRELUDE; k++) {
		if (off >= size || ix_decode(code + off, size - off, &in)) {
			snprintf(why, whylen, "entry: undecodable at +%zu", off);
			return 0;
		}
		if (ix_emulated(&in))
			break;
		if (in.kind != IX_FLAGS_ONLY && in.kind != IX_ENDBR) {
			snprintf(why, whylen, "entry: +%zu is neither emulated nor skippable", off);
			return 0;
		}
		off += in.len;
	}
	if (k == MAX_PRELUDE) {
		snprintf(why, whylen, "entry: no emulated instruction in the first %d", MAX_PRELUDE);
		return 0;
	}
	if (off == 0) {
		snprintf(why, whylen, "entry: its first instruction is emulated");
		return 0;
	}
	/* the whole function: no branch into (0, off], no indirect jump */
	for (size_t p = 0; p < size;) {
		if (ix_decode(code + p, size - p, &in)) {
			snprintf(why, whylen, "entry: undecodable at +%zu", p);
			return 0;
		}
		if (in.kind == IX_INDIRECT && code[p] != 0xe8) {
			/* ff /2 (call) returns; ff /4 (jmp) may be a jump table */
			size_t m = p;

			while (m < p + in.len && (code[m] & 0xf0) == 0x40)
				m++;
			if (m + 1 < p + in.len && ((code[m + 1] >> 3) & 7) != 2) {
				snprintf(why, whylen, "entry: indirect jump at +%zu", p);
				return 0;
			}
		}
		if (in.has_target) {
			int64_t t = (int64_t)p + in.target;

			if (t > 0 && (uint64_t)t <= off) {
				snprintf(why, whylen, "entry: branch at +%zu into the skipped bytes", p);
				return 0;
			}
		}
		p += in.len;
	}
	snprintf(why, whylen, "+%zu: first emulated instruction, %d skipped", off, k);
	return (uint32_t)off;
}

int ua_find(const char *path, const char *name, bool cheap, struct ua_site *out)
{
	struct func f = { 0 };
	int fd, err = 0;
	Elf *e;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e) {
		close(fd);
		return -EINVAL;
	}
	find_sym(e, SHT_DYNSYM, name, &f);
	if (!f.found)
		find_sym(e, SHT_SYMTAB, name, &f);
	if (!f.found) {
		err = -ENOENT;
		goto out;
	}
	int64_t off = vaddr_to_off(e, f.addr, f.size);
	if (off < 0) {
		err = -ENOENT;
		goto out;
	}
	out->entry_off = out->probe_off = (uint64_t)off;
	snprintf(out->why, sizeof(out->why), "entry");
	GElf_Ehdr eh;
	if (!cheap || f.ifunc || !gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64 || !f.size ||
	    f.size > MAX_FUNC_BYTES) {
		snprintf(out->why, sizeof(out->why), "entry%s", f.ifunc ? " (ifunc)" : "");
		goto out;
	}
	uint8_t *code = malloc(f.size);
	if (!code) {
		err = -ENOMEM;
		goto out;
	}
	if (pread(fd, code, f.size, off) == (ssize_t)f.size) {
		uint32_t skip = choose(code, f.size, out->why, sizeof(out->why));

		if (skip && sym_inside(e, f.addr, f.addr + skip)) {
			snprintf(out->why, sizeof(out->why), "entry: a symbol starts in the skipped bytes");
			skip = 0;
		}
		out->skip = skip;
		out->probe_off += skip;
	}
	free(code);
out:
	elf_end(e);
	close(fd);
	return err;
}

