/* SPDX-License-Identifier: GPL-2.0-only */
/* Call-frame information: CIE/FDE parsing (.eh_frame and .debug_frame) and the DW_CFA_* program
 * interpreter that turns an FDE into rows. Works on bytes and addresses; knows nothing of
 * processes, and of ELF only what the caller passes in struct dw_cfi_section. */
#ifndef DWUNW_CFI_H
#define DWUNW_CFI_H

#include <stddef.h>
#include <stdint.h>
#include "dwunw.h"

/* DW_EH_PE_* pointer encodings */
#define DW_EH_PE_absptr   0x00
#define DW_EH_PE_uleb128  0x01
#define DW_EH_PE_udata2   0x02
#define DW_EH_PE_udata4   0x03
#define DW_EH_PE_udata8   0x04
#define DW_EH_PE_sleb128  0x09
#define DW_EH_PE_sdata2   0x0a
#define DW_EH_PE_sdata4   0x0b
#define DW_EH_PE_sdata8   0x0c
#define DW_EH_PE_pcrel    0x10
#define DW_EH_PE_textrel  0x20
#define DW_EH_PE_datarel  0x30
#define DW_EH_PE_funcrel  0x40
#define DW_EH_PE_aligned  0x50
#define DW_EH_PE_indirect 0x80
#define DW_EH_PE_omit     0xff

struct dw_cursor;

/* One .eh_frame or .debug_frame section, as the parser needs it. */
struct dw_cfi_section {
	const uint8_t *data;
	uint64_t size;
	uint64_t vaddr;            /* address of data[0] (pcrel base); .debug_frame: its sh_addr (0) */
	uint8_t is_eh;             /* .eh_frame rules: CIE id 0, CIE pointer relative, 'z' augmentations */
	uint8_t addr_size;         /* pointer size of the ELF class */
	uint16_t machine;          /* EM_*: gives DW_CFA 0x2d its meaning */
	uint8_t size_unknown;      /* size is a bound, not exact (found via PT_GNU_EH_FRAME): stop at a zero terminator */
	uint64_t text_vaddr;       /* DW_EH_PE_textrel base */
	uint64_t data_vaddr;       /* DW_EH_PE_datarel base */
	/* For DW_EH_PE_indirect: read a pointer at a module address. NULL = unsupported. */
	int (*read_mem)(void *arg, uint64_t vaddr, void *buf, size_t len);
	void *arg;
};

/* Decode a DW_EH_PE_* encoded pointer at the cursor. `func_start` is the funcrel base. */
int dw_read_encoded(const struct dw_cfi_section *s, struct dw_cursor *c, uint8_t enc,
		    uint64_t func_start, uint64_t *out);

struct dw_cie {
	uint64_t offset;           /* of the CIE in its section */
	const uint8_t *insns, *insns_end;
	uint64_t code_align;
	int64_t data_align;
	uint64_t personality;
	uint32_t ra_reg;
	uint8_t version;
	uint8_t fde_enc;           /* 'R' (default absptr) */
	uint8_t lsda_enc;          /* 'L' (default omit) */
	uint8_t addr_size;         /* version 4 address_size, else the section's */
	uint8_t seg_size;
	uint8_t has_z;             /* augmentation data length present */
	uint8_t signal;            /* 'S' */
	uint8_t b_key;             /* 'B' (arm64 B-key signing) */
	uint8_t mte;               /* 'G' */
};

struct dw_fde {
	uint64_t offset;           /* of the FDE in its section */
	uint64_t pc_begin, pc_end;
	const uint8_t *insns, *insns_end;
	uint64_t lsda;
	uint32_t cie;              /* index into the scan's CIE array */
};

/* Every CIE and FDE of a section. Entries that cannot be parsed are counted and skipped; a
 * broken length field ends the scan (what was parsed before stays). */
struct dw_cfi_scan {
	struct dw_cie *cies;
	uint32_t ncies, cap_cies;
	struct dw_fde *fdes;
	uint32_t nfdes, cap_fdes;
	uint32_t bad;              /* entries skipped */
	int first_err;             /* DWUNW_ERR_* of the first bad entry, 0 if none */
	uint64_t first_err_off;
};

int dw_cfi_scan(const struct dw_cfi_section *s, struct dw_cfi_scan *out);
void dw_cfi_scan_free(struct dw_cfi_scan *scan);

/* The FDE at `off` (a directory such as .eh_frame_hdr named it), its CIE parsed into `sc` on
 * first use; sc->fdes is not touched. DWUNW_ERR_CORRUPT when `off` holds no FDE. */
int dw_cfi_fde_at(const struct dw_cfi_section *s, struct dw_cfi_scan *sc, uint64_t off, struct dw_fde *out);

/* Parse one CIE at `off` (for tests and for the scan). */
int dw_cfi_parse_cie(const struct dw_cfi_section *s, uint64_t off, struct dw_cie *out);

/* ---- Interpreting CFA programs ----------------------------------------------------------- */

enum dw_rule_kind {
	DW_RULE_UNSET = 0,         /* never set: readelf 'u' too */
	DW_RULE_UNDEF,
	DW_RULE_SAME,
	DW_RULE_OFFSET,            /* saved at CFA+val */
	DW_RULE_VAL_OFFSET,        /* value is CFA+val */
	DW_RULE_REG,               /* saved in register val */
	DW_RULE_EXPR,              /* saved at the address the expression gives */
	DW_RULE_VAL_EXPR,          /* value is the expression's result */
};

enum dw_cfa_kind {
	DW_CFA_KIND_NONE = 0,      /* no CFA rule yet */
	DW_CFA_KIND_REG,           /* reg + off */
	DW_CFA_KIND_EXPR,
	DW_CFA_KIND_END,           /* gap after an FDE: no CFI here */
};

#define DW_MAX_COLS 128            /* DWARF register columns tracked by the interpreter */
#define DW_MAX_REMEMBER 16         /* DW_CFA_remember_state depth */

struct dw_col {
	uint8_t kind;              /* enum dw_rule_kind */
	uint32_t expr_len;
	int64_t val;
	const uint8_t *expr;
};

struct dw_frame_state {
	uint8_t cfa_kind;
	uint8_t ra_signed;         /* arm64 negate_ra_state toggled an odd number of times */
	uint8_t changed;           /* an FDE's program ran an instruction other than an advance or a
				    * nop: 0 means the state is still its CIE's (rows of it are alike) */
	uint32_t cols_gen;         /* new in one run of a program whenever an instruction may have
				    * changed a register column (same value: the columns are as they were) */
	uint32_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *cfa_expr;
	uint32_t cfa_expr_len;
	uint64_t args_size;        /* DW_CFA_GNU_args_size, kept for completeness */
	uint64_t set[DW_MAX_COLS / 64]; /* columns whose kind is not UNSET */
	struct dw_col col[DW_MAX_COLS];
};

/* Called for each row in pc order: `st` holds for [pc, next row). Non-zero return stops the run. */
typedef int (*dw_row_fn)(void *arg, uint64_t pc, const struct dw_frame_state *st);

/* State after the CIE's initial instructions. */
int dw_cfi_cie_state(const struct dw_cfi_section *s, const struct dw_cie *cie,
		     struct dw_frame_state *st);

/* Run an FDE's program from `initial` (the CIE state), calling `row` for every row inside
 * [pc_begin, pc_end). Errors: DWUNW_ERR_CORRUPT (truncated operand, location moving backward,
 * remember stack over/underflow), DWUNW_ERR_UNSUPPORTED_CFI (unknown opcode, register beyond
 * DW_MAX_COLS). Rows already reported stay reported. */
int dw_cfi_run_fde(const struct dw_cfi_section *s, const struct dw_cie *cie,
		   const struct dw_frame_state *initial, const struct dw_fde *fde,
		   dw_row_fn row, void *arg);

/* The same interpreter on a bare instruction stream (tests, CIE programs). */
int dw_cfi_exec(const struct dw_cfi_section *s, const struct dw_cie *cie,
		const struct dw_frame_state *initial, const uint8_t *insns, const uint8_t *end,
		uint64_t pc_begin, uint64_t pc_end, struct dw_frame_state *st, dw_row_fn row, void *arg);

#endif
