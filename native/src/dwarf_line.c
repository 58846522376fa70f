// SPDX-License-Identifier: GPL-2.0-only
/* .debug_line (DWARF 2-5): unit headers, the line-number state machine, one sorted row table. */
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "dwarf_line.h"

/* Row.file values that are not file indexes. */
#define FILE_END  UINT32_MAX        /* end of a sequence: the previous row stops here */
#define FILE_NONE (UINT32_MAX - 1)  /* the program named a file the header does not have */

/* Forms (DWARF 5 section 7.5.6) and GNU extensions. */
enum {
	FORM_addr = 0x01, FORM_block2 = 0x03, FORM_block4 = 0x04, FORM_data2 = 0x05,
	FORM_data4 = 0x06, FORM_data8 = 0x07, FORM_string = 0x08, FORM_block = 0x09,
	FORM_block1 = 0x0a, FORM_data1 = 0x0b, FORM_flag = 0x0c, FORM_sdata = 0x0d,
	FORM_strp = 0x0e, FORM_udata = 0x0f, FORM_ref_addr = 0x10, FORM_ref1 = 0x11,
	FORM_ref2 = 0x12, FORM_ref4 = 0x13, FORM_ref8 = 0x14, FORM_ref_udata = 0x15,
	FORM_indirect = 0x16, FORM_sec_offset = 0x17, FORM_exprloc = 0x18,
	FORM_flag_present = 0x19, FORM_strx = 0x1a, FORM_addrx = 0x1b, FORM_ref_sup4 = 0x1c,
	FORM_strp_sup = 0x1d, FORM_data16 = 0x1e, FORM_line_strp = 0x1f, FORM_ref_sig8 = 0x20,
	FORM_implicit_const = 0x21, FORM_loclistx = 0x22, FORM_rnglistx = 0x23,
	FORM_ref_sup8 = 0x24, FORM_strx1 = 0x25, FORM_strx2 = 0x26, FORM_strx3 = 0x27,
	FORM_strx4 = 0x28, FORM_addrx1 = 0x29, FORM_addrx2 = 0x2a, FORM_addrx3 = 0x2b,
	FORM_addrx4 = 0x2c,
	FORM_GNU_addr_index = 0x1f01, FORM_GNU_str_index = 0x1f02,
	FORM_GNU_ref_alt = 0x1f20, FORM_GNU_strp_alt = 0x1f21,
};

/* Line-number content types (DWARF 5 section 6.2.4.1). */
enum { LNCT_path = 1, LNCT_directory_index = 2 };

/* Standard opcodes (DWARF 5 section 6.2.5.2) and how many operands each takes. */
enum {
	LNS_copy = 1, LNS_advance_pc, LNS_advance_line, LNS_set_file, LNS_set_column,
	LNS_negate_stmt, LNS_set_basic_block, LNS_const_add_pc, LNS_fixed_advance_pc,
	LNS_set_prologue_end, LNS_set_epilogue_begin, LNS_set_isa, LNS_COUNT
};
static const uint8_t lns_operands[LNS_COUNT] = { 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1 };

enum { LNE_end_sequence = 1, LNE_set_address = 2, LNE_define_file = 3, LNE_set_discriminator = 4 };

enum { AT_stmt_list = 0x10, AT_comp_dir = 0x1b };

#define MAX_FORMATS 64   /* entry formats per v5 table: real ones have 2-4 */

struct row {
	uint64_t addr;
	uint32_t file;      /* index into dw_lines.files, or FILE_END / FILE_NONE */
	uint32_t line;
};

/* A file name: comp_dir / dir / name, each part joined only while the result is relative. */
struct file {
	const char *comp;
	const char *dir;
	const char *name;
};

struct seq {
	uint64_t start;     /* address of its first row */
	uint64_t first;     /* index of its first row in the builder's rows */
	uint64_t n;         /* rows, end marker included */
};

struct comp_dir {
	uint64_t stmt_list; /* offset of the CU's line program in .debug_line */
	const char *dir;
};

struct dw_lines {
	struct row *rows;
	uint64_t nrows;
	struct file *files;
	uint64_t nfiles;
	struct dw_lines_stats stats;
};

struct builder {
	const struct dw_line_input *in;
	struct row *rows;
	uint64_t nrows, rows_cap;
	struct seq *seqs;
	uint64_t nseqs, seqs_cap;
	struct file *files;
	uint64_t nfiles, files_cap;
	int in_seq;
	uint64_t seq_first;
	int info_tried;
	struct comp_dir *cds;
	uint64_t ncds;
	int nomem;
	uint32_t units, bad_units;
};

/* What a form's value is read against. */
struct form_ctx {
	const struct dw_line_input *in;
	int off8;           /* 64-bit DWARF */
	unsigned addr_size;
	unsigned version;
};

/* ---- growable arrays ---------------------------------------------------------------------- */

static int grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint64_t n = *cap ? *cap : 256;
	while (n < need) {
		if (n > (UINT64_MAX / 2) / elem)
			return -1;
		n *= 2;
	}
	if (n > SIZE_MAX / elem)
		return -1;
	void *q = realloc(*p, (size_t)(n * elem));
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

/* ---- strings ------------------------------------------------------------------------------- */

/* A NUL-terminated string at off inside a string section, or NULL. */
static const char *sec_str(const uint8_t *sec, uint64_t size, uint64_t off)
{
	if (!sec || off >= size || !memchr(sec + off, 0, (size_t)(size - off)))
		return NULL;
	return (const char *)sec + off;
}

/* An inline NUL-terminated string; the cursor moves past its NUL. */
static const char *cur_cstr(struct dw_cursor *c)
{
	const uint8_t *nul;

	if (c->err)
		return NULL;
	nul = memchr(c->p, 0, cur_left(c));
	if (!nul) {
		c->err = DWUNW_ERR_CORRUPT;
		c->p = c->end;
		return NULL;
	}
	const char *s = (const char *)c->p;
	c->p = nul + 1;
	return s;
}

static uint64_t cur_offset(struct dw_cursor *c, int off8)
{
	return off8 ? cur_u64(c) : cur_u32(c);
}

/* Little-endian unsigned of n (1..8) bytes. */
static uint64_t cur_uint(struct dw_cursor *c, unsigned n)
{
	uint64_t v = 0;

	if (!cur_need(c, n))
		return 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

/*
 * Read (or skip) one value of `form`: constants into *num, strings into *str (NULL when the form
 * names a string this reader cannot resolve). -1 for a form whose size is unknown.
 */
static int form_value(struct dw_cursor *c, uint64_t form, const struct form_ctx *fc, uint64_t *num,
		      const char **str, int depth)
{
	const struct dw_line_input *in = fc->in;
	uint64_t off;

	*num = 0;
	*str = NULL;
	switch (form) {
	case FORM_string: *str = cur_cstr(c); break;
	case FORM_strp:
		off = cur_offset(c, fc->off8);
		*str = sec_str(in->str, in->str_size, off);
		break;
	case FORM_line_strp:
		off = cur_offset(c, fc->off8);
		*str = sec_str(in->line_str, in->line_str_size, off);
		break;
	case FORM_strp_sup: case FORM_GNU_strp_alt: case FORM_GNU_ref_alt: case FORM_sec_offset:
		*num = cur_offset(c, fc->off8);
		break;
	case FORM_ref_addr:
		*num = fc->version <= 2 ? cur_uint(c, fc->addr_size) : cur_offset(c, fc->off8);
		break;
	case FORM_addr:
		if (fc->addr_size < 1 || fc->addr_size > 8)
			return -1;
		*num = cur_uint(c, fc->addr_size);
		break;
	case FORM_data1: case FORM_ref1: case FORM_flag: case FORM_strx1: case FORM_addrx1:
		*num = cur_u8(c);
		break;
	case FORM_data2: case FORM_ref2: case FORM_strx2: case FORM_addrx2:
		*num = cur_u16(c);
		break;
	case FORM_strx3: case FORM_addrx3:
		*num = cur_uint(c, 3);
		break;
	case FORM_data4: case FORM_ref4: case FORM_ref_sup4: case FORM_strx4: case FORM_addrx4:
		*num = cur_u32(c);
		break;
	case FORM_data8: case FORM_ref8: case FORM_ref_sig8: case FORM_ref_sup8:
		*num = cur_u64(c);
		break;
	case FORM_data16: cur_skip(c, 16); break;
	case FORM_udata: case FORM_ref_udata: case FORM_strx: case FORM_addrx: case FORM_loclistx:
	case FORM_rnglistx: case FORM_GNU_addr_index: case FORM_GNU_str_index:
		*num = cur_uleb(c);
		break;
	case FORM_sdata: *num = (uint64_t)cur_sleb(c); break;
	case FORM_block1: cur_skip(c, cur_u8(c)); break;
	case FORM_block2: cur_skip(c, cur_u16(c)); break;
	case FORM_block4: cur_skip(c, cur_u32(c)); break;
	case FORM_block: case FORM_exprloc: cur_skip(c, cur_uleb(c)); break;
	case FORM_flag_present: *num = 1; break;
	case FORM_implicit_const: break; /* the value is in the abbreviation: the caller has it */
	case FORM_indirect:
		if (depth > 0)
			return -1;
		form = cur_uleb(c);
		if (c->err || form == FORM_indirect)
			return -1;
		return form_value(c, form, fc, num, str, depth + 1);
	default:
		return -1;
	}
	return c->err ? -1 : 0;
}

/* ---- DW_AT_comp_dir of the CUs, for DWARF 2-4 line tables --------------------------------- */

/* The abbreviation `code` of the table at abbrev[off]: a cursor on its attribute specs. */
static int find_abbrev(const uint8_t *abbrev, uint64_t size, uint64_t off, uint64_t code,
		       struct dw_cursor *out)
{
	struct dw_cursor c;

	if (off >= size)
		return -1;
	cur_init(&c, abbrev + off, (size_t)(size - off));
	for (;;) {
		uint64_t k = cur_uleb(&c);
		if (c.err || k == 0)
			return -1;
		cur_uleb(&c); /* tag */
		cur_u8(&c);   /* children */
		if (k == code) {
			*out = c;
			return c.err ? -1 : 0;
		}
		for (;;) {
			uint64_t at = cur_uleb(&c), form = cur_uleb(&c);
			if (form == FORM_implicit_const)
				cur_sleb(&c);
			if (c.err)
				return -1;
			if (at == 0 && form == 0)
				break;
		}
	}
}


/* DW_AT_stmt_list and DW_AT_comp_dir of the unit DIE of the CU at unit[0 .. len): 0 when both. */
static int scan_cu(const struct dw_line_input *in, const uint8_t *unit, uint64_t len, int off8,
		   const uint8_t *abbrev, uint64_t abbrev_size, struct comp_dir *out)
{
	struct dw_cursor c, a;
	struct form_ctx fc = { .in = in, .off8 = off8 };
	uint64_t aoff;
	int have_stmt = 0;

	out->dir = NULL;
	cur_init(&c, unit, (size_t)len);
	fc.version = cur_u16(&c);
	if (fc.version < 2 || fc.version > 5)
		return -1;
	if (fc.version >= 5) {
		uint8_t type = cur_u8(&c);
		fc.addr_size = cur_u8(&c);
		aoff = cur_offset(&c, off8);
		if (type == 4 || type == 5)       /* skeleton, split_compile: dwo_id */
			cur_skip(&c, 8);
		else if (type == 2 || type == 6)  /* type units: signature + type offset */
			cur_skip(&c, 8 + (off8 ? 8 : 4));
	} else {
		aoff = cur_offset(&c, off8);
		fc.addr_size = cur_u8(&c);
	}
	uint64_t code = cur_uleb(&c);
	if (c.err || code == 0 || find_abbrev(abbrev, abbrev_size, aoff, code, &a))
		return -1;
	for (;;) {
		uint64_t at = cur_uleb(&a), form = cur_uleb(&a), num;
		int64_t implicit = form == FORM_implicit_const ? cur_sleb(&a) : 0;
		const char *str;
		if (a.err || (at == 0 && form == 0))
			break;
		if (form_value(&c, form, &fc, &num, &str, 0))
			break;
		if (form == FORM_implicit_const)
			num = (uint64_t)implicit;
		if (at == AT_stmt_list && form != FORM_string && form != FORM_strp &&
		    form != FORM_line_strp) {
			out->stmt_list = num;
			have_stmt = 1;
		} else if (at == AT_comp_dir && str && *str) {
			out->dir = str;
		}
		if (have_stmt && out->dir)
			return 0;
	}
	return -1;
}

static int cmp_cd(const void *x, const void *y)
{
	const struct comp_dir *a = x, *b = y;
	return a->stmt_list < b->stmt_list ? -1 : a->stmt_list > b->stmt_list;
}

/* Every CU's (stmt_list, comp_dir), sorted; fetched the first time a DWARF 2-4 unit needs it. */
static void load_comp_dirs(struct builder *b)
{
	const uint8_t *info = NULL, *abbrev = NULL;
	uint64_t isize = 0, asize = 0, off = 0, cap = 0;

	b->info_tried = 1;
	if (!b->in->get_info ||
	    b->in->get_info(b->in->get_info_arg, &info, &isize, &abbrev, &asize) || !info || !abbrev)
		return;
	while (off < isize) {
		struct dw_cursor c;
		struct comp_dir cd;
		int off8 = 0;

		cur_init(&c, info + off, (size_t)(isize - off));
		uint64_t len = cur_u32(&c);
		if (len == 0xffffffff) {
			len = cur_u64(&c);
			off8 = 1;
		} else if (len >= 0xfffffff0) {
			break;
		}
		if (c.err || len > cur_left(&c))
			break;
		if (scan_cu(b->in, c.p, len, off8, abbrev, asize, &cd) == 0) {
			if (grow((void **)&b->cds, &cap, b->ncds + 1, sizeof(*b->cds))) {
				b->nomem = 1;
				return;
			}
			b->cds[b->ncds++] = cd;
		}
		off = (uint64_t)(c.p - info) + len;
	}
	if (b->ncds)
		qsort(b->cds, (size_t)b->ncds, sizeof(*b->cds), cmp_cd);
}

static const char *comp_dir_for(struct builder *b, uint64_t unit_off)
{
	uint64_t lo = 0, hi;

	if (!b->info_tried)
		load_comp_dirs(b);
	hi = b->ncds;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (b->cds[mid].stmt_list < unit_off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b->ncds && b->cds[lo].stmt_list == unit_off ? b->cds[lo].dir : NULL;
}

/* ---- rows and sequences --------------------------------------------------------------------- */

static int push_row(struct builder *b, uint64_t addr, uint32_t file, uint32_t line)
{
	if (grow((void **)&b->rows, &b->rows_cap, b->nrows + 1, sizeof(*b->rows))) {
		b->nomem = 1;
		return -1;
	}
	b->rows[b->nrows++] = (struct row){ .addr = addr, .file = file, .line = line };
	return 0;
}

static int tombstone(const struct builder *b, uint64_t addr)
{
	if (b->in->drop_zero && addr == 0)
		return 1;
	/* lld marks code it discarded with -1 or -2 (in the ELF's address size). */
	return b->in->addr_size == 4 ? addr >= 0xfffffffeull : addr >= UINT64_MAX - 1;
}

/* End the open sequence: give it an end marker (at its last row when the program gave none),
 * then record it, or drop it when it covers nothing or starts at a tombstone. */
static void seq_close(struct builder *b)
{
	if (!b->in_seq)
		return;
	b->in_seq = 0;
	if (b->nrows == b->seq_first)
		return;
	if (b->rows[b->nrows - 1].file != FILE_END &&
	    push_row(b, b->rows[b->nrows - 1].addr, FILE_END, 0))
		return;
	uint64_t n = b->nrows - b->seq_first;
	uint64_t start = b->rows[b->seq_first].addr;
	if (n < 2 || tombstone(b, start)) {
		b->nrows = b->seq_first;
		return;
	}
	if (grow((void **)&b->seqs, &b->seqs_cap, b->nseqs + 1, sizeof(*b->seqs))) {
		b->nomem = 1;
		return;
	}
	b->seqs[b->nseqs++] = (struct seq){ .start = start, .first = b->seq_first, .n = n };
}

/* Drop an open sequence the unit never ended (a truncated or corrupt program). */
static void seq_abandon(struct builder *b)
{
	if (b->in_seq)
		b->nrows = b->seq_first;
	b->in_seq = 0;
}

/*
 * Append a row to the open sequence. A row at the same address as the one before replaces it
 * (the last row for an address is the one that counts, as in addr2line); a row repeating the
 * file and line of the one before adds nothing and is not kept; an address going backwards ends
 * the sequence and starts another.
 */
static void add_row(struct builder *b, uint64_t addr, uint32_t file, uint32_t line, int end)
{
	if (b->in_seq && b->nrows > b->seq_first) {
		struct row *last = &b->rows[b->nrows - 1];
		if (addr == last->addr) {
			last->file = end ? FILE_END : file;
			last->line = end ? 0 : line;
			/* Now equal to the row before it? Then it is redundant too. */
			if (!end && b->nrows - b->seq_first >= 2 && last[-1].file == last->file &&
			    last[-1].line == last->line)
				b->nrows--;
			if (end)
				seq_close(b);
			return;
		}
		if (addr < last->addr)
			seq_close(b);
		else if (!end && last->file == file && last->line == line)
			return;
	}
	if (!b->in_seq) {
		if (end)
			return;
		b->in_seq = 1;
		b->seq_first = b->nrows;
	}
	if (push_row(b, addr, end ? FILE_END : file, end ? 0 : line))
		return;
	if (end)
		seq_close(b);
}

static int add_file(struct builder *b, const char *comp, const char *dir, const char *name)
{
	if (grow((void **)&b->files, &b->files_cap, b->nfiles + 1, sizeof(*b->files))) {
		b->nomem = 1;
		return -1;
	}
	b->files[b->nfiles++] = (struct file){ .comp = comp, .dir = dir, .name = name };
	return 0;
}

/* ---- one line-number program ----------------------------------------------------------------- */

struct unit {
	unsigned version;
	uint8_t min_inst;
	uint8_t max_ops;
	int8_t line_base;
	uint8_t line_range;
	uint8_t opcode_base;
	const uint8_t *std_lens;    /* opcode_base - 1 operand counts */
	uint64_t file_base;         /* its first file in b->files */
	uint64_t nfiles;
	const char *comp;           /* DWARF 2-4: the CU's comp_dir, or NULL */
	const char **dirs;
	uint64_t ndirs;
};

/* DWARF 2-4 include_directories and file_names. */
static int header_v4(struct builder *b, struct dw_cursor *h, struct unit *u)
{
	uint64_t cap = 0;

	for (;;) {
		const char *d = cur_cstr(h);
		if (!d)
			return -1;
		if (!*d)
			break;
		if (grow((void **)&u->dirs, &cap, u->ndirs + 1, sizeof(*u->dirs))) {
			b->nomem = 1;
			return -1;
		}
		u->dirs[u->ndirs++] = d;
	}
	for (;;) {
		const char *name = cur_cstr(h);
		if (!name)
			return -1;
		if (!*name)
			break;
		uint64_t di = cur_uleb(h);
		cur_uleb(h); /* mtime */
		cur_uleb(h); /* length */
		if (h->err)
			return -1;
		const char *dir = di >= 1 && di <= u->ndirs ? u->dirs[di - 1] : NULL;
		if (add_file(b, u->comp, dir, name))
			return -1;
		u->nfiles++;
	}
	return 0;
}

/* A DWARF 5 entry-format list: (content type, form) pairs. */
static int read_formats(struct dw_cursor *h, uint64_t (*fmt)[2], unsigned *n)
{
	*n = cur_u8(h);
	if (*n > MAX_FORMATS)
		return -1;
	for (unsigned i = 0; i < *n; i++) {
		fmt[i][0] = cur_uleb(h);
		fmt[i][1] = cur_uleb(h);
	}
	return h->err ? -1 : 0;
}

/* One v5 directory or file entry: its path and directory index. */
static int read_entry(struct dw_cursor *h, uint64_t (*fmt)[2], unsigned nfmt, const struct form_ctx *fc,
		      const char **path, uint64_t *dir)
{
	*path = NULL;
	*dir = 0;
	for (unsigned i = 0; i < nfmt; i++) {
		uint64_t num;
		const char *str;
		if (form_value(h, fmt[i][1], fc, &num, &str, 0))
			return -1;
		if (fmt[i][0] == LNCT_path)
			*path = str;
		else if (fmt[i][0] == LNCT_directory_index)
			*dir = num;
	}
	return 0;
}

/* DWARF 5 directory and file tables (entry 0 is the CU's own directory and primary file). */
static int header_v5(struct builder *b, struct dw_cursor *h, struct unit *u, const struct form_ctx *fc)
{
	uint64_t fmt[MAX_FORMATS][2], count;
	unsigned nfmt;

	if (read_formats(h, fmt, &nfmt))
		return -1;
	count = cur_uleb(h);
	/* Every entry takes at least one byte, so the count cannot exceed what is left. */
	if (h->err || (count && (nfmt == 0 || count > cur_left(h))))
		return -1;
	if (count) {
		u->dirs = calloc((size_t)count, sizeof(*u->dirs));
		if (!u->dirs) {
			b->nomem = 1;
			return -1;
		}
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t ignored;
		if (read_entry(h, fmt, nfmt, fc, &u->dirs[i], &ignored))
			return -1;
	}
	u->ndirs = count;

	if (read_formats(h, fmt, &nfmt))
		return -1;
	count = cur_uleb(h);
	if (h->err || (count && (nfmt == 0 || count > cur_left(h))))
		return -1;
	for (uint64_t i = 0; i < count; i++) {
		const char *name, *dir, *comp;
		uint64_t di;
		if (read_entry(h, fmt, nfmt, fc, &name, &di))
			return -1;
		/* Directory 0 is the compilation directory; the others may be relative to it. */
		dir = di < u->ndirs ? u->dirs[di] : NULL;
		comp = di != 0 && u->ndirs ? u->dirs[0] : NULL;
		if (add_file(b, comp, dir, name ? name : ""))
			return -1;
		u->nfiles++;
	}
	return 0;
}

static uint32_t file_id(const struct unit *u, uint64_t reg)
{
	/* DWARF 5 numbers files from 0, earlier versions from 1. */
	uint64_t i = u->version >= 5 ? reg : reg - 1;
	if ((u->version < 5 && reg == 0) || i >= u->nfiles)
		return FILE_NONE;
	return (uint32_t)(u->file_base + i);
}

static uint32_t line_value(uint64_t line)
{
	return line > UINT32_MAX ? 0 : (uint32_t)line;
}

/* Run the line-number program in p[0 .. len). 0 when it ran to its end without error. */
static int run_program(struct builder *b, struct unit *u, const uint8_t *p, uint64_t len)
{
	struct dw_cursor c;
	/* The line register is unsigned: wrapping arithmetic, never signed overflow. */
	uint64_t addr = 0, file = 1, op_index = 0, line = 1;

	cur_init(&c, p, (size_t)len);
#define ADVANCE(adv) do { \
		uint64_t a_ = (adv); \
		if (u->max_ops == 1) { \
			addr += (uint64_t)u->min_inst * a_; \
		} else { \
			uint64_t t_ = op_index + a_; \
			addr += (uint64_t)u->min_inst * (t_ / u->max_ops); \
			op_index = t_ % u->max_ops; \
		} \
	} while (0)

	while (cur_left(&c) && !b->nomem) {
		uint8_t op = cur_u8(&c);

		if (op >= u->opcode_base) {
			unsigned adj = op - u->opcode_base;
			ADVANCE(adj / u->line_range);
			line += (uint64_t)(int64_t)(u->line_base + (int)(adj % u->line_range));
			add_row(b, addr, file_id(u, file), line_value(line), 0);
			continue;
		}
		if (op == 0) {
			uint64_t elen = cur_uleb(&c);
			if (c.err || elen > cur_left(&c))
				return -1;
			if (elen == 0)
				continue;
			struct dw_cursor e;
			cur_init(&e, c.p, (size_t)elen);
			c.p += elen;
			uint8_t sub = cur_u8(&e);
			switch (sub) {
			case LNE_end_sequence:
				add_row(b, addr, 0, 0, 1);
				addr = 0;
				op_index = 0;
				file = 1;
				line = 1;
				break;
			case LNE_set_address:
				/* Operand of the target's address size; accept any width up to 8. */
				if (elen - 1 >= 1 && elen - 1 <= 8) {
					addr = cur_uint(&e, (unsigned)(elen - 1));
					op_index = 0;
				}
				break;
			case LNE_define_file:
				if (u->version < 5) {
					const char *name = cur_cstr(&e);
					uint64_t di = cur_uleb(&e);
					if (!e.err && name) {
						const char *dir = di >= 1 && di <= u->ndirs ? u->dirs[di - 1] : NULL;
						if (add_file(b, u->comp, dir, name) == 0)
							u->nfiles++;
					}
				}
				break;
			default: /* set_discriminator and unknown: skipped whole */
				break;
			}
			continue;
		}

		unsigned nargs = u->std_lens[op - 1];
		if (op >= LNS_COUNT || lns_operands[op] != nargs) {
			/* Unknown, or declared with operands we do not expect: skip by its length. */
			for (unsigned i = 0; i < nargs; i++)
				cur_uleb(&c);
			continue;
		}
		switch (op) {
		case LNS_copy:
			add_row(b, addr, file_id(u, file), line_value(line), 0);
			break;
		case LNS_advance_pc: ADVANCE(cur_uleb(&c)); break;
		case LNS_advance_line: line += (uint64_t)cur_sleb(&c); break;
		case LNS_set_file: file = cur_uleb(&c); break;
		case LNS_set_column: cur_uleb(&c); break;
		case LNS_const_add_pc: ADVANCE((255u - u->opcode_base) / u->line_range); break;
		case LNS_fixed_advance_pc:
			addr += cur_u16(&c);
			op_index = 0;
			break;
		case LNS_set_isa: cur_uleb(&c); break;
		default: /* negate_stmt, set_basic_block, set_prologue_end, set_epilogue_begin */
			break;
		}
	}
#undef ADVANCE
	return c.err ? -1 : 0;
}

/* The program at sec[off ..]: `unit` is what follows its unit_length, `len` bytes. */
static int parse_unit(struct builder *b, uint64_t off, const uint8_t *unit, uint64_t len, int off8)
{
	struct dw_cursor c, h;
	struct unit u = { 0 };
	struct form_ctx fc = { .in = b->in, .off8 = off8, .addr_size = b->in->addr_size };
	int rc = -1;

	cur_init(&c, unit, (size_t)len);
	u.version = cur_u16(&c);
	if (c.err || u.version < 2 || u.version > 5)
		return -1;
	fc.version = u.version;
	if (u.version >= 5) {
		fc.addr_size = cur_u8(&c);
		cur_u8(&c); /* segment_selector_size */
	}
	uint64_t hlen = cur_offset(&c, off8);
	if (c.err || hlen > cur_left(&c))
		return -1;
	const uint8_t *prog = c.p + hlen;
	cur_init(&h, c.p, (size_t)hlen);
	u.min_inst = cur_u8(&h);
	u.max_ops = u.version >= 4 ? cur_u8(&h) : 1;
	cur_u8(&h); /* default_is_stmt */
	u.line_base = (int8_t)cur_u8(&h);
	u.line_range = cur_u8(&h);
	u.opcode_base = cur_u8(&h);
	if (h.err || u.line_range == 0 || u.opcode_base == 0)
		return -1;
	if (u.max_ops == 0)
		u.max_ops = 1;
	u.std_lens = h.p;
	cur_skip(&h, u.opcode_base - 1u);
	u.file_base = b->nfiles;
	if (u.version < 5)
		u.comp = comp_dir_for(b, off);
	if (!h.err && !b->nomem &&
	    (u.version >= 5 ? header_v5(b, &h, &u, &fc) : header_v4(b, &h, &u)) == 0)
		rc = run_program(b, &u, prog, (uint64_t)((unit + len) - prog));
	if (rc)
		seq_abandon(b);
	else
		seq_close(b); /* a program that forgot its last end_sequence */
	free(u.dirs);
	return rc;
}

/* ---- the table ------------------------------------------------------------------------------- */

static int cmp_seq(const void *x, const void *y)
{
	const struct seq *a = x, *b = y;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->first < b->first ? -1 : a->first > b->first;
}

/* Sequences in address order, one after another; one overlapping an earlier one is dropped. */
static int finish(struct builder *b, struct dw_lines *l)
{
	uint64_t n = 0, hi = 0;

	if (b->nseqs)
		qsort(b->seqs, (size_t)b->nseqs, sizeof(*b->seqs), cmp_seq);
	if (b->nrows) {
		l->rows = malloc((size_t)(b->nrows * sizeof(*l->rows)));
		if (!l->rows)
			return -1;
	}
	for (uint64_t i = 0; i < b->nseqs; i++) {
		const struct seq *s = &b->seqs[i];
		if (n && s->start < hi)
			continue;
		memcpy(&l->rows[n], &b->rows[s->first], (size_t)(s->n * sizeof(*l->rows)));
		n += s->n;
		hi = l->rows[n - 1].addr;
		l->stats.sequences++;
	}
	l->nrows = n;
	return 0;
}

int dw_lines_build(const struct dw_line_input *in, struct dw_lines **out)
{
	struct builder b = { .in = in };
	struct dw_lines *l;
	uint64_t off = 0;
	int rc = DWUNW_OK;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return DWUNW_ERR_NOMEM;
	while (in->line && off < in->line_size && !b.nomem) {
		struct dw_cursor c;
		int off8 = 0;

		cur_init(&c, in->line + off, (size_t)(in->line_size - off));
		uint64_t len = cur_u32(&c);
		if (len == 0xffffffff) {
			len = cur_u64(&c);
			off8 = 1;
		} else if (len >= 0xfffffff0) {
			b.bad_units++;
			break; /* reserved: the next unit cannot be found */
		}
		if (c.err || len > cur_left(&c)) {
			b.bad_units++;
			break;
		}
		if (len) {
			b.units++;
			if (parse_unit(&b, off, c.p, len, off8))
				b.bad_units++;
		}
		off = (uint64_t)(c.p - in->line) + len;
	}
	if (b.nomem || finish(&b, l)) {
		rc = DWUNW_ERR_NOMEM;
		free(l->rows);
		free(l);
		l = NULL;
	} else {
		l->files = b.files;
		l->nfiles = b.nfiles;
		b.files = NULL;
		/* Give back what growth over-allocated. */
		if (l->nfiles) {
			struct file *f = realloc(l->files, (size_t)(l->nfiles * sizeof(*f)));
			if (f)
				l->files = f;
		}
		l->stats.rows = l->nrows;
		l->stats.files = l->nfiles;
		l->stats.units = b.units;
		l->stats.bad_units = b.bad_units;
		l->stats.bytes = sizeof(*l) + l->nrows * sizeof(*l->rows) + l->nfiles * sizeof(*l->files);
	}
	free(b.rows);
	free(b.seqs);
	free(b.files);
	free(b.cds);
	*out = l;
	return rc;
}

void dw_lines_free(struct dw_lines *l)
{
	if (!l)
		return;
	free(l->rows);
	free(l->files);
	free(l);
}

void dw_lines_stats(const struct dw_lines *l, struct dw_lines_stats *out)
{
	if (l)
		*out = l->stats;
	else
		memset(out, 0, sizeof(*out));
}

/* Append s to buf[*n ..] (size cap), always NUL-terminated. */
static void append(char *buf, size_t cap, size_t *n, const char *s)
{
	size_t len = strlen(s);
	if (*n + 1 >= cap)
		return;
	if (len > cap - 1 - *n)
		len = cap - 1 - *n;
	memcpy(buf + *n, s, len);
	*n += len;
	buf[*n] = 0;
}

/* name if absolute, else dir/name if dir is absolute, else comp/dir/name (parts that exist). */
static void file_path(const struct file *f, char *buf, size_t cap)
{
	const char *parts[3] = { f->comp, f->dir, f->name };
	int first = 0;
	size_t n = 0;

	buf[0] = 0;
	if (!f->name || !*f->name)
		return;
	if (f->name[0] == '/')
		first = 2;
	else if (f->dir && f->dir[0] == '/')
		first = 1;
	for (int i = first; i < 3; i++) {
		if (!parts[i] || !*parts[i])
			continue;
		if (n && buf[n - 1] != '/')
			append(buf, cap, &n, "/");
		append(buf, cap, &n, parts[i]);
	}
}

int dw_lines_lookup(const struct dw_lines *l, uint64_t addr, char *file, size_t filelen, uint32_t *line)
{
	uint64_t lo = 0, hi;

	if (file && filelen)
		file[0] = 0;
	if (line)
		*line = 0;
	if (!l)
		return 0;
	/* The last row at or below addr. */
	hi = l->nrows;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (l->rows[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	const struct row *r = &l->rows[lo - 1];
	if (r->file == FILE_END)
		return 0;
	if (line)
		*line = r->line;
	if (file && filelen && r->file < l->nfiles)
		file_path(&l->files[r->file], file, filelen);
	return 1;
}
