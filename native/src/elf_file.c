// SPDX-License-Identifier: GPL-2.0-only
/* ELF files through libelf: headers, build-id, named sections (decompressed lazily), vaddr reads. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include "bytes.h"
#include "elf_file.h"
#include "internal.h"

/* Raw fields (notes, Chdr, headers) are copied out in host order. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dwunw reads little-endian ELF on LE hosts");

#define MAX_DECOMPRESSED (1ull << 30)  /* refuse larger sections: a header can claim anything */
#define MAX_RATIO        2000ull       /* nor more than this times the compressed size */

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2 /* gABI value; glibc < 2.37 does not name it */
#endif

/* dw_section.compressed */
#define COMP_GABI 1 /* SHF_COMPRESSED: Elf32_Chdr/Elf64_Chdr + stream */
#define COMP_GNU  2 /* .zdebug_*: "ZLIB", 8-byte big-endian size, zlib stream */

/* .eh_frame_hdr pointer encodings (the subset an eh_frame_ptr uses). */
#define EH_PE_omit    0xff
#define EH_PE_absptr  0x00
#define EH_PE_udata2  0x02
#define EH_PE_udata4  0x03
#define EH_PE_udata8  0x04
#define EH_PE_sdata2  0x0a
#define EH_PE_sdata4  0x0b
#define EH_PE_sdata8  0x0c
#define EH_PE_pcrel   0x10
#define EH_PE_datarel 0x30
#define EH_PE_indirect 0x80

static const char *const sec_names[DW_SEC_COUNT] = {
	[DW_SEC_EH_FRAME] = ".eh_frame",
	[DW_SEC_EH_FRAME_HDR] = ".eh_frame_hdr",
	[DW_SEC_DEBUG_FRAME] = ".debug_frame",
	[DW_SEC_SYMTAB] = ".symtab",
	[DW_SEC_STRTAB] = ".strtab",
	[DW_SEC_DYNSYM] = ".dynsym",
	[DW_SEC_DYNSTR] = ".dynstr",
	[DW_SEC_GNU_DEBUGLINK] = ".gnu_debuglink",
	[DW_SEC_GNU_DEBUGDATA] = ".gnu_debugdata",
	[DW_SEC_DEBUG_LINE] = ".debug_line",
	[DW_SEC_DEBUG_LINE_STR] = ".debug_line_str",
	[DW_SEC_DEBUG_STR] = ".debug_str",
	[DW_SEC_DEBUG_INFO] = ".debug_info",
	[DW_SEC_DEBUG_ABBREV] = ".debug_abbrev",
	[DW_SEC_DEBUG_STR_OFFSETS] = ".debug_str_offsets",
	[DW_SEC_TEXT] = ".text",
	[DW_SEC_GOT] = ".got",
	[DW_SEC_RELA_PLT] = ".rela.plt",
	[DW_SEC_RELA_DYN] = ".rela.dyn",
};

/*
 * Lazy section loads are serialised per dw_elf. struct dw_elf has no lock of its own, so the
 * lock comes from a small striped table keyed on the object's address: no init or destroy, and
 * loads are rare (once per section), so sharing a stripe now and then costs nothing.
 */
#define LOAD_LOCKS 16
static pthread_mutex_t load_locks[LOAD_LOCKS] = { [0 ... LOAD_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER };

static pthread_mutex_t *load_lock(const struct dw_elf *e)
{
	uintptr_t h = (uintptr_t)e;
	h ^= h >> 7;
	h ^= h >> 13;
	return &load_locks[h % LOAD_LOCKS];
}

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;
static int libelf_ready;

static void libelf_init(void)
{
	libelf_ready = elf_version(EV_CURRENT) != EV_NONE;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* [off, off+len) inside a file of `size` bytes, without overflow. */
static int range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* A table of n entries of ent bytes at off inside the file. */
static int table_ok(uint64_t off, uint64_t n, uint64_t ent, uint64_t size)
{
	return off <= size && (n == 0 || (size - off) / ent >= n);
}

static size_t ehdr_size(unsigned cls) { return cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr); }
static size_t phdr_size(unsigned cls) { return cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr); }
static size_t shdr_size(unsigned cls) { return cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr); }

static void file_id_of(struct dw_file_id *id, const struct stat *st)
{
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_s = st->st_mtim.tv_sec;
	id->mtime_ns = st->st_mtim.tv_nsec;
	id->ctime_s = st->st_ctim.tv_sec;
	id->ctime_ns = st->st_ctim.tv_nsec;
}

/* The file is still what was opened (any write moves ctime). */
static int file_unchanged(const struct dw_elf *e)
{
	struct stat st;
	struct dw_file_id now;

	if (fstat(e->fd, &st) != 0)
		return 0;
	file_id_of(&now, &st);
	return memcmp(&now, &e->id, sizeof(now)) == 0;
}

/* pread all of [off, off+len) into buf, checking the file did not change around it. */
static int read_file(const struct dw_elf *e, uint64_t off, void *buf, uint64_t len)
{
	uint8_t *p = buf;

	if (!file_unchanged(e))
		return DWUNW_ERR_IO;
	while (len) {
		ssize_t n = pread(e->fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return DWUNW_ERR_IO; /* truncated under us, or a read error */
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return file_unchanged(e) ? DWUNW_OK : DWUNW_ERR_IO;
}

/* Make [off, off+len) of the image hold the file's bytes (a no-op for images). The caller checked
 * the range against e->size. Serialised by the load lock after open. */
static int fill(struct dw_elf *e, uint64_t off, uint64_t len)
{
	if (!e->sparse || !len)
		return DWUNW_OK;
	for (uint32_t i = 0; i < e->nfilled; i++)
		if (off >= e->filled[i][0] && off + len <= e->filled[i][1])
			return DWUNW_OK;
	int rc = read_file(e, off, (uint8_t *)e->sparse + off, len);
	if (rc)
		return rc;
	__atomic_fetch_add(&e->held, len, __ATOMIC_RELAXED);
	if (e->nfilled < sizeof(e->filled) / sizeof(e->filled[0])) {
		e->filled[e->nfilled][0] = off;
		e->filled[e->nfilled][1] = off + len;
		e->nfilled++;
	}
	return DWUNW_OK;
}

/* fill() of a range clamped to the file. */
static int fill_clamped(struct dw_elf *e, uint64_t off, uint64_t len)
{
	if (off >= e->size)
		return DWUNW_OK;
	return fill(e, off, len > e->size - off ? e->size - off : len);
}

/*
 * Classify a file from its first `avail` bytes before libelf parses it: libelf calls an unknown
 * class or byte order "not ELF" where we want "unsupported", and it fails on out-of-bounds header
 * tables without saying why.
 */
static int check_header(const uint8_t *h, size_t avail, uint64_t fsize)
{
	if (avail < EI_NIDENT || memcmp(h, ELFMAG, SELFMAG) != 0)
		return DWUNW_ERR_NOT_ELF;
	unsigned cls = h[EI_CLASS];
	if ((cls != ELFCLASS32 && cls != ELFCLASS64) || h[EI_DATA] != ELFDATA2LSB)
		return DWUNW_ERR_UNSUPPORTED_ARCH;
	if (avail < ehdr_size(cls) || fsize < ehdr_size(cls))
		return DWUNW_ERR_NOT_ELF;

	uint64_t phoff, shoff;
	unsigned phnum, phent, shnum, shent;
	if (cls == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, phent = eh.e_phentsize;
		shoff = eh.e_shoff, shnum = eh.e_shnum, shent = eh.e_shentsize;
	} else {
		Elf32_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, phent = eh.e_phentsize;
		shoff = eh.e_shoff, shnum = eh.e_shnum, shent = eh.e_shentsize;
	}
	/* libelf indexes the tables with its own entry size; anything else is misread. */
	if (phnum && (phent != phdr_size(cls) ||
		      (phnum != PN_XNUM && !table_ok(phoff, phnum, phent, fsize))))
		return DWUNW_ERR_CORRUPT;
	/* e_shnum 0 with a table: the count is in section 0, which must then be readable. */
	if (shoff && (shent != shdr_size(cls) || !table_ok(shoff, shnum ? shnum : 1, shent, fsize)))
		return DWUNW_ERR_CORRUPT;
	/* The extended count in section 0's sh_size must fit too (libelf would say "no sections"). */
	if (shoff && !shnum && avail >= shoff + shent) {
		uint64_t count;
		if (cls == ELFCLASS64) {
			Elf64_Shdr s0;
			memcpy(&s0, h + shoff, sizeof(s0));
			count = s0.sh_size;
		} else {
			Elf32_Shdr s0;
			memcpy(&s0, h + shoff, sizeof(s0));
			count = s0.sh_size;
		}
		if (count && !table_ok(shoff, count, shent, fsize))
			return DWUNW_ERR_CORRUPT;
	}
	return DWUNW_OK;
}

static int load_phdrs(struct dw_elf *e, const GElf_Ehdr *eh)
{
	Elf *elf = e->elf;
	size_t n;

	if (elf_getphdrnum(elf, &n) != 0)
		return DWUNW_ERR_CORRUPT;
	if (n == 0)
		return DWUNW_OK;
	/* Again with the real count (PN_XNUM). */
	if (!table_ok(eh->e_phoff, n, phdr_size(e->elf_class), e->size))
		return DWUNW_ERR_CORRUPT;
	e->phdrs = calloc(n, sizeof(*e->phdrs));
	if (!e->phdrs)
		return DWUNW_ERR_NOMEM;
	e->nphdrs = (uint32_t)n;

	int have_load = 0, have_exec = 0;
	uint64_t lo = 0, lo_align = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			return DWUNW_ERR_CORRUPT;
		struct dw_phdr *p = &e->phdrs[i];
		p->type = ph.p_type;
		p->flags = ph.p_flags;
		p->offset = ph.p_offset;
		p->vaddr = ph.p_vaddr;
		p->filesz = ph.p_filesz;
		p->memsz = ph.p_memsz;
		p->align = ph.p_align;
		if (p->type != PT_LOAD)
			continue;
		if (!have_load || p->vaddr < lo) {
			lo = p->vaddr;
			lo_align = p->align;
		}
		have_load = 1;
		if (p->flags & PF_X) {
			uint64_t end = p->memsz > UINT64_MAX - p->vaddr ? UINT64_MAX : p->vaddr + p->memsz;
			if (!have_exec || p->vaddr < e->exec_lo)
				e->exec_lo = p->vaddr;
			if (!have_exec || end > e->exec_hi)
				e->exec_hi = end;
			have_exec = 1;
		}
	}
	if (have_load) {
		/* p_align must be a power of two to be an alignment at all. */
		uint64_t a = (lo_align > 1 && !(lo_align & (lo_align - 1))) ? lo_align : 4096;
		e->vaddr_lo = lo & ~(a - 1);
	}
	return DWUNW_OK;
}

/* The section id for a name; .zdebug_X counts as .debug_X with *gnu_z set. */
static int sec_id_for(const char *name, int *gnu_z)
{
	char buf[64];

	*gnu_z = 0;
	if (strncmp(name, ".zdebug_", 8) == 0 && strlen(name) < sizeof(buf) - 1) {
		snprintf(buf, sizeof(buf), ".debug_%s", name + 8);
		name = buf;
		*gnu_z = 1;
	}
	for (int i = 0; i < DW_SEC_COUNT; i++)
		if (strcmp(name, sec_names[i]) == 0)
			return i;
	return -1;
}

struct note_area {
	uint64_t off, size, align;
	int found;
};

static int load_shdrs(struct dw_elf *e, const GElf_Ehdr *eh, struct note_area *bid_sec)
{
	Elf *elf = e->elf;
	size_t shnum, shstrndx;

	if (elf_getshdrnum(elf, &shnum) != 0)
		return DWUNW_ERR_CORRUPT;
	if (shnum == 0 || eh->e_shoff == 0)
		return DWUNW_OK;
	if (!table_ok(eh->e_shoff, shnum, shdr_size(e->elf_class), e->size))
		return DWUNW_ERR_CORRUPT;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return DWUNW_ERR_CORRUPT;
	/* No name table: sections cannot be told apart, so act as if there were none. */
	if (shstrndx == SHN_UNDEF)
		return DWUNW_OK;
	if (shstrndx >= shnum)
		return DWUNW_ERR_CORRUPT;

	GElf_Shdr sh;
	Elf_Scn *scn = elf_getscn(elf, shstrndx);
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB ||
	    !range_ok(sh.sh_offset, sh.sh_size, e->size))
		return DWUNW_ERR_CORRUPT;

	for (size_t i = 1; i < shnum; i++) {
		scn = elf_getscn(elf, i);
		if (!scn || !gelf_getshdr(scn, &sh))
			return DWUNW_ERR_CORRUPT;
		if (sh.sh_type == SHT_NULL)
			continue;
		/* elf_strptr checks the offset and the terminator against the table. */
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_size && e->nstubs < 6 &&
		    (!strcmp(name, ".plt") || !strcmp(name, ".plt.sec") || !strcmp(name, ".plt.got") ||
		     !strcmp(name, ".iplt") || !strcmp(name, ".MIPS.stubs"))) {
			e->stubs[e->nstubs][0] = sh.sh_addr;
			e->stubs[e->nstubs][1] = sh.sh_addr + sh.sh_size;
			e->nstubs++;
		}
		if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_size && e->machine == EM_X86_64 &&
		    (!strcmp(name, ".init") || !strcmp(name, ".fini")))
			e->entries[name[1] == 'f'] = sh.sh_addr;
		if (sh.sh_type == SHT_NOTE && !bid_sec->found && strcmp(name, ".note.gnu.build-id") == 0) {
			bid_sec->off = sh.sh_offset;
			bid_sec->size = sh.sh_size;
			bid_sec->align = sh.sh_addralign;
			bid_sec->found = 1;
			continue;
		}
		int gnu_z;
		int id = sec_id_for(name, &gnu_z);
		if (id < 0)
			continue;
		struct dw_section *s = &e->sec[id];
		/* First one wins, except that a plain .debug_X beats a .zdebug_X. */
		if (s->index && !(s->compressed == COMP_GNU && !gnu_z))
			continue;
		memset(s, 0, sizeof(*s));
		s->index = (uint32_t)i;
		s->addr = sh.sh_addr;
		s->file_off = sh.sh_offset;
		if (sh.sh_type == SHT_NOBITS) {
			/* A stripped debug file keeps the header of .eh_frame etc. but not the bytes. */
			s->nobits = 1;
			continue;
		}
		s->size = sh.sh_size;
		if (sh.sh_flags & SHF_COMPRESSED)
			s->compressed = COMP_GABI;
		else if (gnu_z)
			s->compressed = COMP_GNU;
	}
	e->has_shdrs = 1;
	return DWUNW_OK;
}

/* Find NT_GNU_BUILD_ID in a note area; every size is checked against the area. */
static int parse_build_id(struct dw_elf *e, const uint8_t *p, uint64_t len, uint64_t align)
{
	align = align == 8 ? 8 : 4;
	while (len >= 12) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p, 4);
		memcpy(&descsz, p + 4, 4);
		memcpy(&type, p + 8, 4);
		uint64_t name_pad = ((uint64_t)namesz + align - 1) & ~(align - 1);
		uint64_t desc_pad = ((uint64_t)descsz + align - 1) & ~(align - 1);
		if (12 + name_pad + descsz > len)
			return 0;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + 12, "GNU", 4) == 0 &&
		    descsz > 0 && descsz <= sizeof(e->build_id)) {
			memcpy(e->build_id, p + 12 + name_pad, descsz);
			e->build_id_len = descsz;
			return 1;
		}
		uint64_t step = 12 + name_pad + desc_pad;
		if (step >= len)
			return 0;
		p += step;
		len -= step;
	}
	return 0;
}

static void find_build_id(struct dw_elf *e, const struct note_area *bid_sec)
{
	for (uint32_t i = 0; i < e->nphdrs; i++) {
		const struct dw_phdr *p = &e->phdrs[i];
		if (p->type == PT_NOTE && range_ok(p->offset, p->filesz, e->size) &&
		    fill(e, p->offset, p->filesz) == DWUNW_OK &&
		    parse_build_id(e, e->image + p->offset, p->filesz, p->align))
			return;
	}
	if (bid_sec->found && range_ok(bid_sec->off, bid_sec->size, e->size) &&
	    fill(e, bid_sec->off, bid_sec->size) == DWUNW_OK)
		parse_build_id(e, e->image + bid_sec->off, bid_sec->size, bid_sec->align);
}

/*
 * The file bytes behind vaddr: a pointer into the image, the file offset, and how many bytes
 * follow in the same PT_LOAD and in the file. NULL when vaddr is not file-backed.
 */
static const uint8_t *vaddr_ptr(const struct dw_elf *e, uint64_t vaddr, uint64_t *avail, uint64_t *off)
{
	for (uint32_t i = 0; i < e->nphdrs; i++) {
		const struct dw_phdr *p = &e->phdrs[i];
		if (p->type != PT_LOAD || vaddr < p->vaddr || p->offset > e->size)
			continue;
		uint64_t rel = vaddr - p->vaddr;
		uint64_t infile = min_u64(min_u64(p->filesz, p->memsz), e->size - p->offset);
		if (rel >= infile)
			continue;
		*avail = infile - rel;
		*off = p->offset + rel;
		return e->image + *off;
	}
	return NULL;
}

/* An .eh_frame_hdr encoded pointer; -1 for encodings an eh_frame_ptr has no business using. */
static int decode_eh_ptr(const uint8_t *p, uint64_t len, uint8_t enc, unsigned addr_size,
			 uint64_t field_vaddr, uint64_t hdr_vaddr, uint64_t *out)
{
	struct dw_cursor c;
	uint64_t v;

	if (enc == EH_PE_omit || (enc & EH_PE_indirect))
		return -1;
	cur_init(&c, p, len);
	switch (enc & 0x0f) {
	case EH_PE_absptr: v = cur_addr(&c, addr_size); break;
	case EH_PE_udata2: v = cur_u16(&c); break;
	case EH_PE_udata4: v = cur_u32(&c); break;
	case EH_PE_udata8: v = cur_u64(&c); break;
	case EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)cur_u16(&c); break;
	case EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)cur_u32(&c); break;
	case EH_PE_sdata8: v = cur_u64(&c); break;
	default: return -1;
	}
	if (c.err)
		return -1;
	switch (enc & 0x70) {
	case 0: break;
	case EH_PE_pcrel: v += field_vaddr; break;
	case EH_PE_datarel: v += hdr_vaddr; break;
	default: return -1;
	}
	if (addr_size == 4)
		v &= 0xffffffffu;
	*out = v;
	return 0;
}

/*
 * No .eh_frame section: take .eh_frame_hdr from PT_GNU_EH_FRAME and follow its eh_frame_ptr.
 * The header does not give .eh_frame's size, so it runs to the end of its PT_LOAD's file bytes;
 * the CFI parser stops at the zero terminator. Failure just leaves the sections absent.
 */
static void eh_frame_from_phdrs(struct dw_elf *e)
{
	const struct dw_phdr *ph = NULL;
	for (uint32_t i = 0; i < e->nphdrs && !ph; i++)
		if (e->phdrs[i].type == PT_GNU_EH_FRAME)
			ph = &e->phdrs[i];
	if (!ph)
		return;

	uint64_t avail, off;
	const uint8_t *hdr = vaddr_ptr(e, ph->vaddr, &avail, &off);
	uint64_t hsz = ph->filesz ? ph->filesz : ph->memsz;
	if (!hdr || hsz > avail || fill(e, off, hsz))
		return;
	e->eh_frame_hdr_vaddr = ph->vaddr;
	struct dw_section *hs = &e->sec[DW_SEC_EH_FRAME_HDR];
	if (!hs->index) {
		memset(hs, 0, sizeof(*hs));
		hs->data = hdr;
		hs->size = hsz;
		hs->addr = ph->vaddr;
		hs->file_off = off;
		hs->loaded = 1;
	}

	uint64_t eh_vaddr;
	if (hsz < 4 || hdr[0] != 1 ||
	    decode_eh_ptr(hdr + 4, hsz - 4, hdr[1], e->elf_class == ELFCLASS64 ? 8 : 4,
			  ph->vaddr + 4, ph->vaddr, &eh_vaddr) != 0)
		return;
	const uint8_t *eh = vaddr_ptr(e, eh_vaddr, &avail, &off);
	if (!eh || fill(e, off, avail))
		return;
	struct dw_section *s = &e->sec[DW_SEC_EH_FRAME];
	memset(s, 0, sizeof(*s));
	s->data = eh;
	s->size = avail;
	s->addr = eh_vaddr;
	s->file_off = off;
	s->loaded = 1;
}

/* Everything after libelf accepted the file: e->elf, image and size are set. */
static int open_common(struct dw_elf *e)
{
	GElf_Ehdr eh;
	struct note_area bid_sec = { 0 };
	int rc;

	if (elf_kind(e->elf) != ELF_K_ELF)
		return DWUNW_ERR_NOT_ELF;
	/* The file may differ from what was checked before libelf mapped it. */
	rc = check_header(e->image, e->size, e->size);
	if (rc)
		return rc;
	if (!gelf_getehdr(e->elf, &eh))
		return DWUNW_ERR_CORRUPT;
	e->machine = eh.e_machine;
	e->elf_class = eh.e_ident[EI_CLASS];
	e->type = (uint8_t)eh.e_type;
	e->arch = dwunw_arch_for_elf(e->machine, e->elf_class);
	/* MIPS n32 is ELFCLASS32 too, but not the o32 ABI the mips32 backend implements. */
	if (e->machine == EM_MIPS && (eh.e_flags & 0x20 /* EF_MIPS_ABI2 */))
		e->arch = NULL;

	rc = load_phdrs(e, &eh);
	if (!rc)
		rc = load_shdrs(e, &eh, &bid_sec);
	if (rc)
		return rc;
	find_build_id(e, &bid_sec);
	if (!e->sec[DW_SEC_EH_FRAME].index)
		eh_frame_from_phdrs(e);
	return DWUNW_OK;
}

static void reset(struct dw_elf *e)
{
	memset(e, 0, sizeof(*e));
	e->fd = -1;
}

/* Fill the header tables libelf reads at elf_memory() and section look-ups: ELF header, program
 * headers, section headers (with the extended counts of section 0) and the section-name table.
 * check_header() has bounded them by the file's size. */
static int fill_headers(struct dw_elf *e)
{
	const uint8_t *h = e->image;
	int rc;

	if ((rc = fill_clamped(e, 0, sizeof(Elf64_Ehdr))))
		return rc;
	unsigned cls = h[EI_CLASS];
	uint64_t phoff, shoff, phnum, shnum, shstrndx, ent = shdr_size(cls);
	if (cls == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, shoff = eh.e_shoff, shnum = eh.e_shnum;
		shstrndx = eh.e_shstrndx;
	} else {
		Elf32_Ehdr eh;
		memcpy(&eh, h, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, shoff = eh.e_shoff, shnum = eh.e_shnum;
		shstrndx = eh.e_shstrndx;
	}
	if (shoff) {
		if ((rc = fill_clamped(e, shoff, ent)))
			return rc;
		uint64_t s0_size, s0_link, s0_info;
		if (cls == ELFCLASS64) {
			Elf64_Shdr s0;
			memcpy(&s0, h + shoff, sizeof(s0));
			s0_size = s0.sh_size, s0_link = s0.sh_link, s0_info = s0.sh_info;
		} else {
			Elf32_Shdr s0;
			memcpy(&s0, h + shoff, sizeof(s0));
			s0_size = s0.sh_size, s0_link = s0.sh_link, s0_info = s0.sh_info;
		}
		if (!shnum)
			shnum = s0_size;
		if (shstrndx == SHN_XINDEX)
			shstrndx = s0_link;
		if (phnum == PN_XNUM)
			phnum = s0_info;
		if (shnum && table_ok(shoff, shnum, ent, e->size) && (rc = fill(e, shoff, shnum * ent)))
			return rc;
		if (shstrndx && shstrndx < shnum && table_ok(shoff, shnum, ent, e->size)) {
			uint64_t off, size;
			if (cls == ELFCLASS64) {
				Elf64_Shdr sh;
				memcpy(&sh, h + shoff + shstrndx * ent, sizeof(sh));
				off = sh.sh_offset, size = sh.sh_size;
			} else {
				Elf32_Shdr sh;
				memcpy(&sh, h + shoff + shstrndx * ent, sizeof(sh));
				off = sh.sh_offset, size = sh.sh_size;
			}
			if (range_ok(off, size, e->size) && (rc = fill(e, off, size)))
				return rc;
		}
	}
	if (phnum && table_ok(phoff, phnum, phdr_size(cls), e->size) &&
	    (rc = fill(e, phoff, phnum * phdr_size(cls))))
		return rc;
	return DWUNW_OK;
}

int dw_elf_open_path(struct dw_elf *e, const char *path)
{
	uint8_t hdr[sizeof(Elf64_Ehdr)];
	struct stat st;
	ssize_t n;
	int fd, rc;

	if (!e || !path)
		return DWUNW_ERR_INVALID_ARG;
	reset(e);
	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ready)
		return DWUNW_ERR_UNSUPPORTED;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dw_errno_to_err(errno);
	if (fstat(fd, &st) != 0) {
		rc = dw_errno_to_err(errno);
		goto fail_fd;
	}
	/* Only regular files have a size to check offsets against. */
	if (!S_ISREG(st.st_mode)) {
		rc = DWUNW_ERR_INVALID_ARG;
		goto fail_fd;
	}
	do
		n = pread(fd, hdr, sizeof(hdr), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		rc = dw_errno_to_err(errno);
		goto fail_fd;
	}
	rc = check_header(hdr, (size_t)n, (uint64_t)st.st_size);
	if (rc)
		goto fail_fd;
	if ((uint64_t)st.st_size > SIZE_MAX / 2) {
		rc = DWUNW_ERR_NOMEM;
		goto fail_fd;
	}

	/*
	 * Neither a mapping of the file (a file rewritten in place turns reads into SIGBUS) nor a copy
	 * of all of it (up to the whole binary, most of it code we never read): a reservation that
	 * costs memory only where a range is read into it.
	 */
	void *img = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (img == MAP_FAILED) {
		rc = DWUNW_ERR_NOMEM;
		goto fail_fd;
	}
	e->fd = fd;
	e->sparse = img;
	e->image = img;
	e->size = (uint64_t)st.st_size;
	file_id_of(&e->id, &st);
	rc = fill_headers(e);
	if (!rc) {
		/* The headers may differ from what was checked before they were read. */
		rc = check_header(e->image, (size_t)e->size, e->size);
	}
	if (!rc) {
		Elf *elf = elf_memory((char *)img, (size_t)e->size);
		if (!elf)
			rc = DWUNW_ERR_CORRUPT;
		e->elf = elf;
	}
	if (!rc)
		rc = open_common(e);
	if (rc)
		dw_elf_close(e);
	return rc;

fail_fd:
	close(fd);
	return rc;
}

int dw_elf_open_image(struct dw_elf *e, const void *image, size_t size)
{
	int rc;

	if (!e || (!image && size))
		return DWUNW_ERR_INVALID_ARG;
	reset(e);
	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ready)
		return DWUNW_ERR_UNSUPPORTED;
	rc = check_header(image, size, size);
	if (rc)
		return rc;
	/* libelf takes a char *; for a little-endian file on this host it only reads it. */
	Elf *elf = elf_memory((char *)(uintptr_t)image, size);
	if (!elf)
		return DWUNW_ERR_CORRUPT;
	e->elf = elf;
	e->image = image;
	e->size = size;
	rc = open_common(e);
	if (rc)
		dw_elf_close(e);
	return rc;
}

void dw_elf_close(struct dw_elf *e)
{
	if (!e)
		return;
	for (int i = 0; i < DW_SEC_COUNT; i++)
		free(e->sec[i].owned);
	free(e->phdrs);
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	if (e->sparse)
		munmap(e->sparse, e->size);
	reset(e);
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* Make s->data/size final. Called with the load lock held; s has bytes in the file. */
static int load_section(struct dw_elf *e, struct dw_section *s)
{
	if (!range_ok(s->file_off, s->size, e->size))
		return DWUNW_ERR_CORRUPT;
	int frc = fill(e, s->file_off, s->size);
	if (frc)
		return frc;
	const uint8_t *p = e->image + s->file_off;
	if (!s->compressed) {
		s->data = p;
		return DWUNW_OK;
	}

	uint64_t raw_size, hlen;
	uint32_t type;
	if (s->compressed == COMP_GNU) {
		hlen = 12;
		if (s->size < hlen || memcmp(p, "ZLIB", 4) != 0)
			return DWUNW_ERR_CORRUPT;
		type = ELFCOMPRESS_ZLIB;
		raw_size = be64(p + 4);
	} else if (e->elf_class == ELFCLASS64) {
		Elf64_Chdr ch;
		hlen = sizeof(ch);
		if (s->size < hlen)
			return DWUNW_ERR_CORRUPT;
		memcpy(&ch, p, sizeof(ch));
		type = ch.ch_type;
		raw_size = ch.ch_size;
	} else {
		Elf32_Chdr ch;
		hlen = sizeof(ch);
		if (s->size < hlen)
			return DWUNW_ERR_CORRUPT;
		memcpy(&ch, p, sizeof(ch));
		type = ch.ch_type;
		raw_size = ch.ch_size;
	}
	if (type != ELFCOMPRESS_ZLIB && type != ELFCOMPRESS_ZSTD)
		return DWUNW_ERR_UNSUPPORTED;
	const uint8_t *src = p + hlen;
	uint64_t src_len = s->size - hlen;
	/* Bound the allocation before trusting the header's size. */
	if (raw_size > MAX_DECOMPRESSED || raw_size > src_len * MAX_RATIO)
		return DWUNW_ERR_CORRUPT;

	uint8_t *buf = malloc(raw_size ? raw_size : 1);
	if (!buf)
		return DWUNW_ERR_NOMEM;
	int rc = DWUNW_OK;
	if (type == ELFCOMPRESS_ZLIB) {
		uLongf got = (uLongf)raw_size;
		int zr = uncompress(buf, &got, src, (uLong)src_len);
		if (zr == Z_MEM_ERROR)
			rc = DWUNW_ERR_NOMEM;
		else if (zr != Z_OK || got != raw_size)
			rc = DWUNW_ERR_CORRUPT;
	} else {
		size_t got = ZSTD_decompress(buf, (size_t)raw_size, src, (size_t)src_len);
		if (ZSTD_isError(got) || got != raw_size)
			rc = DWUNW_ERR_CORRUPT;
	}
	if (rc) {
		free(buf);
		return rc;
	}
	s->owned = buf;
	s->data = buf;
	s->size = raw_size;
	__atomic_fetch_add(&e->held, raw_size, __ATOMIC_RELAXED);
	return DWUNW_OK;
}

int dw_elf_section(struct dw_elf *e, enum dw_sec_id id, const struct dw_section **out)
{
	if (!e || !out || (unsigned)id >= DW_SEC_COUNT)
		return DWUNW_ERR_INVALID_ARG;
	struct dw_section *s = &e->sec[id];
	/* Acquire pairs with the release below: a reader seeing loaded sees data and size. */
	if (__atomic_load_n(&s->loaded, __ATOMIC_ACQUIRE)) {
		*out = s;
		return DWUNW_OK;
	}
	if (!s->index || s->nobits)
		return DWUNW_ERR_NO_DWARF;

	pthread_mutex_t *m = load_lock(e);
	int rc = DWUNW_OK;
	pthread_mutex_lock(m);
	if (!s->loaded) {
		/* A failure is not remembered: the next call tries again (and fails the same way). */
		rc = load_section(e, s);
		if (!rc)
			__atomic_store_n(&s->loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(m);
	if (!rc)
		*out = s;
	return rc;
}

int dw_elf_read_vaddr(const struct dw_elf *e, uint64_t vaddr, void *buf, size_t len)
{
	uint8_t *out = buf;

	if (!e || (!buf && len))
		return DWUNW_ERR_INVALID_ARG;
	while (len) {
		const struct dw_phdr *p = NULL;
		for (uint32_t i = 0; i < e->nphdrs; i++) {
			const struct dw_phdr *q = &e->phdrs[i];
			if (q->type == PT_LOAD && vaddr >= q->vaddr && vaddr - q->vaddr < q->memsz) {
				p = q;
				break;
			}
		}
		if (!p)
			return DWUNW_ERR_INVALID_ARG;
		uint64_t rel = vaddr - p->vaddr;
		uint64_t chunk = min_u64(len, p->memsz - rel);
		uint64_t filesz = min_u64(p->filesz, p->memsz);
		uint64_t from_file = rel < filesz ? min_u64(chunk, filesz - rel) : 0;
		if (from_file) {
			/* A PT_LOAD reaching past the end of the file (a debug file, a truncated one). */
			if (p->offset > e->size || rel > e->size - p->offset ||
			    !range_ok(p->offset + rel, from_file, e->size))
				return DWUNW_ERR_INVALID_ARG;
			if (e->sparse) {
				int rc = read_file(e, p->offset + rel, out, from_file);
				if (rc)
					return rc;
			} else {
				memcpy(out, e->image + p->offset + rel, from_file);
			}
		}
		memset(out + from_file, 0, chunk - from_file);
		out += chunk;
		len -= chunk;
		vaddr += chunk;
		if (len && vaddr == 0)
			return DWUNW_ERR_INVALID_ARG; /* wrapped around */
	}
	return DWUNW_OK;
}

/*
 * The PT_LOAD behind a mapping at file offset `off`. A mapping starts at its segment's p_offset
 * rounded down to a page, and segments can share a page or lie inside each other's page range,
 * so rank the candidates: exact start, start within this 4 KiB page, containing the offset
 * (page-congruent first), start within a 16/64 KiB page (larger-page kernels).
 */
const struct dw_phdr *dw_elf_load_for_offset(const struct dw_elf *e, uint64_t file_off)
{
	const struct dw_phdr *best = NULL;
	int best_score = 0;

	if (!e)
		return NULL;
	for (uint32_t i = 0; i < e->nphdrs; i++) {
		const struct dw_phdr *p = &e->phdrs[i];
		if (p->type != PT_LOAD)
			continue;
		int score = 0;
		if (p->offset == file_off)
			score = 6;
		else if ((p->offset & ~4095ull) == file_off)
			score = 5;
		else if (file_off > p->offset && file_off - p->offset < p->filesz)
			score = ((file_off - p->offset) & 4095) == 0 ? 4 : 3;
		else if ((p->offset & ~16383ull) == file_off)
			score = 2;
		else if ((p->offset & ~65535ull) == file_off)
			score = 1;
		if (score > best_score) {
			best = p;
			best_score = score;
		}
	}
	return best;
}

int dw_elf_build_id_hex(const struct dw_elf *e, char *buf, size_t buflen)
{
	static const char hex[] = "0123456789abcdef";

	if (!e || !buf)
		return DWUNW_ERR_INVALID_ARG;
	if ((size_t)e->build_id_len * 2 + 1 > buflen) {
		if (buflen)
			buf[0] = 0;
		return DWUNW_ERR_INVALID_ARG;
	}
	for (uint32_t i = 0; i < e->build_id_len; i++) {
		buf[2 * i] = hex[e->build_id[i] >> 4];
		buf[2 * i + 1] = hex[e->build_id[i] & 15];
	}
	buf[2 * e->build_id_len] = 0;
	return (int)e->build_id_len;
}

int dw_elf_raw(struct dw_elf *e, uint64_t off, uint64_t len, const uint8_t **out)
{
	int rc;

	if (!e || !out)
		return DWUNW_ERR_INVALID_ARG;
	if (!range_ok(off, len, e->size))
		return DWUNW_ERR_CORRUPT;
	pthread_mutex_t *m = load_lock(e);
	pthread_mutex_lock(m);
	rc = fill(e, off, len);
	pthread_mutex_unlock(m);
	if (!rc)
		*out = e->image + off;
	return rc;
}

int dw_elf_crc32(struct dw_elf *e, uint32_t *out)
{
	enum { CHUNK = 1 << 16 };
	uLong crc = crc32(0L, Z_NULL, 0);
	uint8_t *buf = NULL;
	int rc = DWUNW_OK;

	if (!e || !out)
		return DWUNW_ERR_INVALID_ARG;
	/* Read through a buffer: the checksum must not make the whole file resident. */
	if (e->sparse && !(buf = malloc(CHUNK)))
		return DWUNW_ERR_NOMEM;
	for (uint64_t off = 0; off < e->size && !rc;) {
		uint64_t n = e->size - off < CHUNK ? e->size - off : CHUNK;
		const uint8_t *p = e->image + off;
		if (buf) {
			rc = read_file(e, off, buf, n);
			p = buf;
		}
		if (!rc)
			crc = crc32(crc, p, (uInt)n);
		off += n;
	}
	free(buf);
	if (!rc)
		*out = (uint32_t)crc;
	return rc;
}
