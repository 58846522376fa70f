/* SPDX-License-Identifier: GPL-2.0-only */
/* One ELF file, read through libelf: its program headers, the sections dwunw uses (decompressed
 * on first use), its build-id. Knows nothing of processes or of CFI. */
#ifndef DWUNW_ELF_FILE_H
#define DWUNW_ELF_FILE_H

#include <stddef.h>
#include <stdint.h>
#include "dwunw.h"

enum dw_sec_id {
	DW_SEC_EH_FRAME,
	DW_SEC_EH_FRAME_HDR,
	DW_SEC_DEBUG_FRAME,
	DW_SEC_SYMTAB,
	DW_SEC_STRTAB,
	DW_SEC_DYNSYM,
	DW_SEC_DYNSTR,
	DW_SEC_GNU_DEBUGLINK,
	DW_SEC_GNU_DEBUGDATA,
	DW_SEC_DEBUG_LINE,
	DW_SEC_DEBUG_LINE_STR,
	DW_SEC_DEBUG_STR,
	DW_SEC_DEBUG_INFO,
	DW_SEC_DEBUG_ABBREV,
	DW_SEC_DEBUG_STR_OFFSETS,
	DW_SEC_TEXT,
	DW_SEC_GOT,
	DW_SEC_RELA_PLT,
	DW_SEC_RELA_DYN,
	DW_SEC_COUNT
};

struct dw_section {
	const uint8_t *data;        /* NULL until loaded, or when absent */
	uint64_t size;
	uint64_t addr;              /* sh_addr (0 for non-alloc sections) */
	uint64_t file_off;
	uint32_t index;             /* section index, 0 = absent */
	uint8_t loaded;             /* data/size are final (decompressed) */
	uint8_t compressed;         /* SHF_COMPRESSED or .zdebug */
	uint8_t nobits;
	uint8_t pad;
	void *owned;                /* decompressed copy we free */
};

struct dw_phdr {
	uint32_t type;
	uint32_t flags;
	uint64_t offset;
	uint64_t vaddr;
	uint64_t filesz;
	uint64_t memsz;
	uint64_t align;
};

/* What a file looked like when opened: a later read checks it still does. */
struct dw_file_id {
	uint64_t dev, ino, size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
};

struct dw_elf {
	void *elf;                  /* Elf * */
	int fd;                     /* the file, read on demand; -1 for images */
	/* The file's bytes at their offsets. A caller's image; or, for a file, an anonymous private
	 * reservation of its size into which only the ranges dwunw uses are read (pread): pages never
	 * read hold no memory, and a file truncated or rewritten later can never fault us. */
	const uint8_t *image;
	uint64_t size;
	void *sparse;               /* that reservation (munmap'd on close), NULL for images */
	struct dw_file_id id;
	uint64_t held;              /* bytes read into it, plus decompressed copies */
	uint64_t filled[32][2];     /* ranges read (a range inside one is not read again) */
	uint32_t nfilled;
	uint16_t machine;
	uint8_t elf_class;
	uint8_t type;               /* ET_EXEC, ET_DYN, ET_CORE, ... */
	const struct dwunw_arch_ops *arch; /* NULL when the machine is unsupported */
	struct dw_phdr *phdrs;
	uint32_t nphdrs;
	uint32_t has_shdrs;         /* section headers present and usable */
	uint64_t exec_lo, exec_hi;  /* vaddr span of executable PT_LOADs (0,0 if none) */
	uint64_t vaddr_lo;          /* lowest PT_LOAD vaddr, page aligned down */
	uint8_t build_id[64];
	uint32_t build_id_len;
	struct dw_section sec[DW_SEC_COUNT];
	/* Linker stubs (.plt, .plt.sec, .plt.got, .iplt, .MIPS.stubs): code without CFI entered by a
	 * call, where the return address is where the call put it. */
	uint64_t stubs[6][2];
	uint32_t nstubs;
	/* x86_64: the first instruction of .init and .fini (crti.S's _init and _fini, assembled
	 * without CFI; the loader calls them at load and at exit): the return address is at [rsp]
	 * there and only there (the next instruction moves rsp). 0: none. */
	uint64_t entries[2];
	/* Found through PT_GNU_EH_FRAME when there are no section headers. */
	uint64_t eh_frame_hdr_vaddr;
};

/* Open a file: headers are read now, sections when first asked for; the fd stays open. */
int dw_elf_open_path(struct dw_elf *e, const char *path);
/* Use a caller's image (not copied: it must outlive the dw_elf). */
int dw_elf_open_image(struct dw_elf *e, const void *image, size_t size);
void dw_elf_close(struct dw_elf *e);

/* Section data, decompressed on first call. Returns DWUNW_OK, DWUNW_ERR_NO_DWARF when absent,
 * or the error that loading it met (corrupt, unsupported compression, out of memory). */
int dw_elf_section(struct dw_elf *e, enum dw_sec_id id, const struct dw_section **out);

/* The file's bytes [off, off+len) at *out, read on first use. DWUNW_ERR_CORRUPT when out of
 * bounds, DWUNW_ERR_IO when the read fails or the file changed since it was opened. */
int dw_elf_raw(struct dw_elf *e, uint64_t off, uint64_t len, const uint8_t **out);

/* CRC-32 (gnu_debuglink's) of the whole file, streamed for files. */
int dw_elf_crc32(struct dw_elf *e, uint32_t *out);

/* Copy `len` bytes at virtual address `vaddr` from the file's PT_LOAD contents (bytes inside
 * p_memsz but beyond p_filesz read as zero). DWUNW_ERR_INVALID_ARG when not covered. */
int dw_elf_read_vaddr(const struct dw_elf *e, uint64_t vaddr, void *buf, size_t len);

/* The PT_LOAD whose file range holds `file_off` (to compute a mapping's load bias), or NULL. */
const struct dw_phdr *dw_elf_load_for_offset(const struct dw_elf *e, uint64_t file_off);

/* Hex form of the build-id into buf (>= 2*len+1); returns its byte length, 0 when none. */
int dw_elf_build_id_hex(const struct dw_elf *e, char *buf, size_t buflen);

#endif
