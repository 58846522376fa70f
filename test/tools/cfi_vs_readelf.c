// SPDX-License-Identifier: GPL-2.0-only
/*
 * cfi_vs_readelf [-v] [-n MAX] [-p | -d] FILE...
 *
 * Compares dwunw's compiled unwind table of each FILE with what
 * `readelf -W -wN --debug-dump=frames-interp FILE` prints, row by row.
 *
 * Output, one block per file:
 *   OK FILE rows=N fdes=F sources=eh_frame+debug_frame empty=E nonexec=X shadowed=S ignored=I ...
 *   SKIP FILE: reason                      (no CFI, not ELF, relocatable, unsupported machine,
 *                                           no section headers for readelf to find the CFI)
 *   FAIL FILE: mismatches=M rows=N ...     the same fields, then the first MAX mismatches
 *   ERROR FILE: reason                     (dwunw or readelf failed where it should not)
 *   NOTE FILE: ...                         (overlapping FDEs, FDEs readelf could not show, ...)
 * Exit status: 0 when every file is OK or SKIP, 1 otherwise, 2 on usage errors.
 * -v: more detail (notes, timings, up to 50 mismatches). -n MAX: mismatches shown per file.
 * -p: parse readelf's output only and print the rows it implies (no dwunw), for debugging.
 * -d: print dwunw's rows only (no readelf): "ROW PC END FLAGS CFA name=rule ...", FLAGS being
 *     "S" (signal frame), "A" (return address signed) or "-".
 *
 * What is compared (readelf's semantics, checked against binutils 2.40):
 *  - Per section ("Contents of the .eh_frame section" / ".debug_frame section"), each CIE block
 *    ends with its initial row, each FDE block ("... FDE cie=C pc=BEGIN..END") with a header
 *    "LOC CFA <columns>" and rows. A column is any register some rule of the FDE or CIE names;
 *    a missing column and "u" both mean undefined. A DW_CFA_register cell prints as
 *    "r3 (rbx)", so rows are split into cells by the header's column count, not by blanks.
 *  - An FDE whose program is only DW_CFA_nop prints no rows: the CIE's initial row applies.
 *  - A row is printed at every advance, so rows can share a LOC: the last one wins. A row holds
 *    from its LOC to the next row's LOC, the last one up to END; what lies outside
 *    [BEGIN, END) is ignored.
 *  - dwunw merges identical neighbour rows and ends each FDE with an END row ("end") unless the
 *    next FDE starts there. So: every dwunw row overlapping a readelf row must carry the same
 *    CFA and register rules (by name; the return-address column is "ra" in both); every dwunw
 *    non-END row must lie inside an FDE; every END row must start at an FDE's END.
 *  - FDEs dwunw drops on purpose are not compared (and counted): BEGIN == END, and ranges not
 *    inside an executable PT_LOAD. Where both sections describe a pc, .eh_frame wins: .debug_frame
 *    FDEs overlapping any .eh_frame FDE are skipped. Overlapping FDEs of one section: the later
 *    one (by BEGIN) wins from its BEGIN on (NOTE overlap).
 *  - dwunw_table_lookup() of each compared FDE's BEGIN must give the row covering it.
 *  - Sections readelf loads from a separate debug file are ignored (-wN: not followed; dwunw's
 *    table comes from the file itself). FDEs where readelf printed something other than rows
 *    ("DW_CFA_???", "Mismatched DW_CFA_restore_state", ...) are not checked (NOTE unchecked).
 * Uses only the public API (dwunw.h), plus libelf for the program headers.
 * Cost: readelf's output is parsed as it streams in, rows interned, then one linear walk over
 * dwunw's rows (libLLVM, ~1 M rows: ~2 s, most of it readelf's).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dwunw.h"

/* ---- Small helpers --------------------------------------------------------------------- */

#define ARRAY_GROW(arr, n, cap)                                                    \
	do {                                                                       \
		if ((n) >= (cap)) {                                                \
			size_t nc_ = (cap) ? (cap) * 2 : 256;                      \
			void *np_ = realloc((arr), nc_ * sizeof(*(arr)));          \
			if (!np_) {                                                \
				fprintf(stderr, "cfi_vs_readelf: out of memory\n"); \
				exit(3);                                           \
			}                                                          \
			(arr) = np_;                                               \
			(cap) = nc_;                                               \
		}                                                                  \
	} while (0)

static int verbose;
static int max_show = 5;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int is_hex_token(const char *s, size_t len)
{
	if (!len)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* ---- String interning: canonical row texts get small ids ------------------------------- */

/* Reserved ids: a range whose rules are not checked (readelf could not show the FDE). */
#define ID_IGNORE 0u
#define ID_NONE   UINT32_MAX

static struct {
	char *arena;
	size_t used, cap;
	size_t *offs;              /* id -> offset in arena */
	size_t n, ncap;
	uint32_t *slots;           /* id + 1, 0 = empty */
	size_t mask;
} strs;

static uint64_t hash_str(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static const char *str_of(uint32_t id)
{
	return strs.arena + strs.offs[id];
}

static void strs_rehash(size_t nslots)
{
	free(strs.slots);
	strs.slots = calloc(nslots, sizeof(*strs.slots));
	if (!strs.slots) {
		fprintf(stderr, "cfi_vs_readelf: out of memory\n");
		exit(3);
	}
	strs.mask = nslots - 1;
	for (size_t id = 0; id < strs.n; id++) {
		const char *s = str_of((uint32_t)id);
		size_t h = hash_str(s, strlen(s)) & strs.mask;

		while (strs.slots[h])
			h = (h + 1) & strs.mask;
		strs.slots[h] = (uint32_t)id + 1;
	}
}

static uint32_t intern(const char *s)
{
	size_t len = strlen(s), h;

	if (!strs.slots)
		strs_rehash(1024);
	h = hash_str(s, len) & strs.mask;
	while (strs.slots[h]) {
		uint32_t id = strs.slots[h] - 1;

		if (strcmp(str_of(id), s) == 0)
			return id;
		h = (h + 1) & strs.mask;
	}
	while (strs.used + len + 1 > strs.cap) {
		size_t nc = strs.cap ? strs.cap * 2 : 1 << 16;
		char *np = realloc(strs.arena, nc);

		if (!np) {
			fprintf(stderr, "cfi_vs_readelf: out of memory\n");
			exit(3);
		}
		strs.arena = np;
		strs.cap = nc;
	}
	ARRAY_GROW(strs.offs, strs.n, strs.ncap);
	memcpy(strs.arena + strs.used, s, len + 1);
	strs.offs[strs.n] = strs.used;
	strs.used += len + 1;
	strs.slots[h] = (uint32_t)strs.n + 1;
	strs.n++;
	if (strs.n * 2 > strs.mask + 1)
		strs_rehash((strs.mask + 1) * 2);
	return (uint32_t)strs.n - 1;
}

/* Every file starts from an empty table; id 0 is the "ignore" marker. */
static void strs_reset(void)
{
	strs.used = 0;
	strs.n = 0;
	if (strs.slots)
		memset(strs.slots, 0, (strs.mask + 1) * sizeof(*strs.slots));
	intern("<not checked>");
}

/* ---- Canonical row text: "CFA name=rule name=rule ..." with "u" rules left out, by name -- */

struct cell {
	const char *name;
	const char *rule;
};

static int cell_cmp(const struct cell *a, const struct cell *b)
{
	return strcmp(a->name, b->name);
}

/* Writes the canonical text of a row into buf (cells are sorted in place). */
static void canon(char *buf, size_t len, const char *cfa, struct cell *cells, unsigned n)
{
	size_t o;

	/* insertion sort: rows have a handful of cells */
	for (unsigned i = 1; i < n; i++) {
		struct cell c = cells[i];
		unsigned j = i;

		while (j > 0 && cell_cmp(&cells[j - 1], &c) > 0) {
			cells[j] = cells[j - 1];
			j--;
		}
		cells[j] = c;
	}
	o = (size_t)snprintf(buf, len, "%s", cfa);
	for (unsigned i = 0; i < n && o < len; i++) {
		if (strcmp(cells[i].rule, "u") == 0)
			continue;
		o += (size_t)snprintf(buf + o, len - o, " %s=%s", cells[i].name, cells[i].rule);
	}
}

/* ---- What readelf printed ---------------------------------------------------------------- */

enum { SEC_NONE = 0, SEC_EH = 1, SEC_DEBUG = 2 };
static const char *const sec_names[] = { "?", ".eh_frame", ".debug_frame" };

enum fde_state {
	FDE_KEEP = 0,
	FDE_EMPTY,                 /* BEGIN == END: dropped by dwunw */
	FDE_NONEXEC,               /* not inside an executable PT_LOAD: dropped by dwunw */
	FDE_BAD,                   /* END < BEGIN (wraps): dropped */
	FDE_SHADOWED,              /* .debug_frame FDE overlapping an .eh_frame FDE */
};

struct cie_rec {
	uint64_t off;
	uint32_t id;               /* canonical text of its last (initial) row, ID_NONE if none */
	uint8_t sec;
};

struct fde_rec {
	uint64_t begin, end, eff_end;
	uint64_t off, cie_off;
	uint32_t row0, nrows;      /* into rows[] */
	uint32_t order;            /* position in readelf's output */
	uint8_t sec;
	uint8_t state;             /* enum fde_state */
	uint8_t ignore;            /* kept, but its rules are not checked (see why) */
	const char *why;           /* interned reason for `ignore` */
};

struct row_rec {
	uint64_t pc;
	uint32_t id;
};

/* A range of addresses and the readelf row that holds there. */
struct seg {
	uint64_t a, b;
	uint64_t next;             /* coverage by dwunw rows: checked up to here */
	uint32_t id;
	uint32_t fde;              /* index in fdes[] */
	uint8_t first;             /* first segment of its FDE */
};

struct parsed {
	struct cie_rec *cies;
	size_t ncies, cap_cies;
	struct fde_rec *fdes;
	size_t nfdes, cap_fdes;
	struct row_rec *rows;
	size_t nrows, cap_rows;
	unsigned addr_digits;      /* 8 or 16, from the LOC width */
	unsigned notes;            /* lines readelf printed that are not part of any row */
	char first_note[160];
	unsigned other_sections;   /* sections loaded from another file (ignored) */
	unsigned sections;         /* .eh_frame/.debug_frame sections of the file itself */
};

static void parsed_free(struct parsed *p)
{
	free(p->cies);
	free(p->fdes);
	free(p->rows);
	memset(p, 0, sizeof(*p));
}

#define MAX_COLS 128
#define MAX_TOK  (MAX_COLS * 2 + 8)

/* Parser state for the entry (CIE or FDE) being read. */
struct entry {
	int kind;                  /* 0 none, 1 CIE, 2 FDE */
	struct cie_rec cie;
	struct fde_rec fde;
	char colnames[MAX_COLS][24];
	unsigned ncols;
	int have_header;
	uint32_t last_id;
	const char *bad;           /* first line that could not be understood, interned */
	uint64_t last_pc;
	int nonmono;
};

/* Splits line at blanks; returns the number of tokens (at most max). */
static unsigned split(char *line, char **tok, unsigned max)
{
	unsigned n = 0;
	char *s = line;

	while (*s && n < max) {
		while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
			s++;
		if (!*s)
			break;
		tok[n++] = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			s++;
		if (*s)
			*s++ = '\0';
	}
	return n;
}

static void entry_finish(struct parsed *p, struct entry *e)
{
	if (e->kind == 1) {
		e->cie.id = e->bad ? ID_NONE : e->last_id;
		ARRAY_GROW(p->cies, p->ncies, p->cap_cies);
		p->cies[p->ncies++] = e->cie;
	} else if (e->kind == 2) {
		struct fde_rec *f = &e->fde;

		f->nrows = (uint32_t)(p->nrows - f->row0);
		if (e->bad) {
			f->ignore = 1;
			f->why = e->bad;
		} else if (e->nonmono) {
			f->ignore = 1;
			f->why = str_of(intern("rows out of address order (DW_CFA_set_loc backwards)"));
		}
		f->order = (uint32_t)p->nfdes;
		ARRAY_GROW(p->fdes, p->nfdes, p->cap_fdes);
		p->fdes[p->nfdes++] = *f;
	}
	e->kind = 0;
	e->have_header = 0;
	e->ncols = 0;
	e->bad = NULL;
	e->last_id = ID_NONE;
	e->nonmono = 0;
}

static void entry_bad(struct entry *e, const char *why, const char *line)
{
	char buf[200];

	if (e->bad)
		return;
	snprintf(buf, sizeof(buf), "%s: %.150s", why, line);
	buf[strcspn(buf, "\n")] = '\0';
	e->bad = str_of(intern(buf));
}

static void note_line(struct parsed *p, const char *line)
{
	if (!p->notes++) {
		snprintf(p->first_note, sizeof(p->first_note), "%s", line);
		p->first_note[strcspn(p->first_note, "\n")] = '\0';
	}
}

/* "OFF LEN ID CIE "aug" cf=.. df=.. ra=.." / "OFF LEN ID FDE cie=C pc=[SEG:]B..E" */
static int parse_entry_header(struct parsed *p, struct entry *e, int sec, char **tok, unsigned n,
			      const char *line)
{
	if (n >= 2 && strcmp(tok[1], "ZERO") == 0)
		return 1;
	if (n < 4 || (strcmp(tok[3], "CIE") != 0 && strcmp(tok[3], "FDE") != 0))
		return 0;
	if (!is_hex_token(tok[0], strlen(tok[0])))
		return 0;
	if (strcmp(tok[3], "CIE") == 0) {
		e->kind = 1;
		memset(&e->cie, 0, sizeof(e->cie));
		e->cie.off = strtoull(tok[0], NULL, 16);
		e->cie.sec = (uint8_t)sec;
		e->cie.id = ID_NONE;
		return 1;
	}
	e->kind = 2;
	memset(&e->fde, 0, sizeof(e->fde));
	e->fde.off = strtoull(tok[0], NULL, 16);
	e->fde.sec = (uint8_t)sec;
	e->fde.row0 = (uint32_t)p->nrows;
	e->last_pc = 0;
	{
		const char *c = NULL, *pc = NULL;

		for (unsigned i = 4; i < n; i++) {
			if (strncmp(tok[i], "cie=", 4) == 0)
				c = tok[i] + 4;
			else if (strncmp(tok[i], "pc=", 3) == 0)
				pc = tok[i] + 3;
		}
		if (!c || !pc) {
			entry_bad(e, "FDE header not understood", line);
			return 1;
		}
		e->fde.cie_off = strtoull(c, NULL, 16);
		if (strchr(pc, ':') && strchr(pc, ':') < strstr(pc, ".."))
			pc = strchr(pc, ':') + 1;       /* segment selector */
		char *dots;
		e->fde.begin = strtoull(pc, &dots, 16);
		if (strncmp(dots, "..", 2) != 0) {
			entry_bad(e, "FDE range not understood", line);
			return 1;
		}
		e->fde.end = strtoull(dots + 2, NULL, 16);
	}
	return 1;
}

/* A row line: "LOC CFA cell cell ..." with as many cells as the header has columns. */
static void parse_row(struct parsed *p, struct entry *e, char **tok, unsigned n, const char *line)
{
	struct cell cells[MAX_COLS];
	unsigned nc = 0, i;
	char buf[4096];
	uint64_t pc;

	if (!e->have_header) {
		entry_bad(e, "row before a header", line);
		return;
	}
	if (!p->addr_digits)
		p->addr_digits = (unsigned)strlen(tok[0]);
	pc = strtoull(tok[0], NULL, 16);
	for (i = 2; i < n && nc < MAX_COLS; i++) {
		char *cell = tok[i];

		/* "r3 (rbx)": a register rule printed as two tokens, one blank apart. split()
		 * cut that blank: put it back, and the cell spans both tokens. */
		if (cell[0] == 'r' && isdigit((unsigned char)cell[1]) && i + 1 < n &&
		    tok[i + 1][0] == '(' && tok[i + 1] == cell + strlen(cell) + 1) {
			cell[strlen(cell)] = ' ';
			i++;
		}
		cells[nc].name = nc < e->ncols ? e->colnames[nc] : "?";
		cells[nc].rule = cell;
		nc++;
	}
	if (nc != e->ncols || i < n) {
		entry_bad(e, "row with a wrong number of cells", line);
		return;
	}
	canon(buf, sizeof(buf), tok[1], cells, nc);
	if (e->kind == 2) {
		if (p->nrows > e->fde.row0 && pc < e->last_pc)
			e->nonmono = 1;
		e->last_pc = pc;
		ARRAY_GROW(p->rows, p->nrows, p->cap_rows);
		p->rows[p->nrows].pc = pc;
		p->rows[p->nrows].id = intern(buf);
		p->nrows++;
	} else {
		e->last_id = intern(buf);
	}
}

/*
 * Reads readelf's output for `path` from `in`. Sections loaded from another file (a separate
 * debug file) are ignored. Returns 0, or -1 on a read error.
 */
static int parse_readelf(FILE *in, const char *path, struct parsed *p)
{
	char *line = NULL, *copy = NULL;
	size_t cap = 0, copy_cap = 0;
	ssize_t len;
	int sec = SEC_NONE;
	struct entry *e = calloc(1, sizeof(*e));
	char *tok[MAX_TOK];

	if (!e)
		return -1;
	e->last_id = ID_NONE;
	while ((len = getline(&line, &cap, in)) >= 0) {
		unsigned n;

		if (strncmp(line, "Contents of the ", 16) == 0) {
			const char *name = line + 16, *from = strstr(line, "(loaded from ");
			entry_finish(p, e);
			sec = SEC_NONE;
			if (from) {
				const char *f = from + 13, *end = strstr(f, "):");
				if (!end || (size_t)(end - f) != strlen(path) || strncmp(f, path, (size_t)(end - f)) != 0) {
					p->other_sections++;
					continue;
				}
			}
			if (strncmp(name, ".eh_frame section", 17) == 0)
				sec = SEC_EH;
			else if (strncmp(name, ".debug_frame section", 20) == 0)
				sec = SEC_DEBUG;
			if (sec != SEC_NONE)
				p->sections++;
			continue;
		}
		if (sec == SEC_NONE)
			continue;
		if ((size_t)len + 1 > copy_cap) {
			copy_cap = (size_t)len + 1;
			copy = realloc(copy, copy_cap);
			if (!copy)
				return -1;
		}
		memcpy(copy, line, (size_t)len + 1);
		n = split(copy, tok, MAX_TOK);
		if (n == 0) {              /* blank line: the entry is complete */
			entry_finish(p, e);
			continue;
		}
		if (is_hex_token(tok[0], strlen(tok[0])) && n >= 2 &&
		    (strcmp(tok[1], "ZERO") == 0 || (n >= 4 && (!strcmp(tok[3], "CIE") || !strcmp(tok[3], "FDE"))))) {
			entry_finish(p, e);
			parse_entry_header(p, e, sec, tok, n, line);
			continue;
		}
		if (e->kind && strcmp(tok[0], "LOC") == 0 && n >= 2 && strcmp(tok[1], "CFA") == 0) {
			if (n - 2 > MAX_COLS) {
				entry_bad(e, "too many columns", line);
				continue;
			}
			e->ncols = n - 2;
			for (unsigned i = 2; i < n; i++)
				snprintf(e->colnames[i - 2], sizeof(e->colnames[0]), "%s", tok[i]);
			e->have_header = 1;
			continue;
		}
		if (e->kind && e->have_header && is_hex_token(tok[0], strlen(tok[0])) && n >= 2) {
			parse_row(p, e, tok, n, line);
			continue;
		}
		/* Anything else: readelf's complaints ("DW_CFA_??? ...", "Mismatched
		 * DW_CFA_restore_state", bad register, ...) inside an entry make its rows
		 * untrustworthy; outside one they are only noted. */
		if (e->kind)
			entry_bad(e, "readelf printed", line);
		else
			note_line(p, line);
	}
	entry_finish(p, e);
	free(e);
	free(line);
	free(copy);
	return ferror(in) ? -1 : 0;
}

/* ---- Running readelf -------------------------------------------------------------------- */

/* Single-quotes s for the shell. */
static char *shell_quote(const char *s)
{
	size_t n = 3;
	char *q, *o;

	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	q = malloc(n);
	if (!q)
		return NULL;
	o = q;
	*o++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *c;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

/* Runs readelf on path and parses its output; readelf's stderr goes to errbuf (first line). */
static int run_readelf(const char *path, struct parsed *p, char *errbuf, size_t errlen)
{
	char errtmp[] = "/tmp/cfi_vs_readelf.XXXXXX";
	char *q = shell_quote(path), *cmd = NULL;
	int fd = mkstemp(errtmp), rc, st;
	FILE *f;

	errbuf[0] = '\0';
	if (!q || fd < 0 ||
	    asprintf(&cmd, "LC_ALL=C exec readelf -W -wN --debug-dump=frames-interp -- %s 2>%s", q, errtmp) < 0) {
		free(q);
		if (fd >= 0) {
			close(fd);
			unlink(errtmp);
		}
		snprintf(errbuf, errlen, "cannot run readelf");
		return -1;
	}
	free(q);
	f = popen(cmd, "r");
	free(cmd);
	if (!f) {
		close(fd);
		unlink(errtmp);
		snprintf(errbuf, errlen, "popen: %s", strerror(errno));
		return -1;
	}
	rc = parse_readelf(f, path, p);
	st = pclose(f);
	{
		FILE *ef = fdopen(fd, "r");
		if (ef) {
			if (fgets(errbuf, (int)errlen, ef))
				errbuf[strcspn(errbuf, "\n")] = '\0';
			fclose(ef);
		} else {
			close(fd);
		}
		unlink(errtmp);
	}
	if (rc < 0)
		return -1;
	if (st == -1 || !WIFEXITED(st))
		return -1;
	/* readelf exits 1 after warnings while still printing everything it could */
	return WEXITSTATUS(st) > 1 ? -1 : 0;
}

/* ---- Executable ranges from the program headers ----------------------------------------- */

struct elf_facts {
	unsigned machine, elf_class, type;
	uint64_t (*xr)[2];
	size_t nxr;
};

/* 0 ok, else a SKIP reason in why. */
static int read_elf_facts(const char *path, struct elf_facts *ef, char *why, size_t wlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	GElf_Ehdr eh;
	size_t phnum = 0;
	int rc = 0;

	memset(ef, 0, sizeof(*ef));
	if (fd < 0) {
		snprintf(why, wlen, "cannot open: %s", strerror(errno));
		return -1;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		snprintf(why, wlen, "not an ELF file");
		rc = -1;
		goto out;
	}
	ef->machine = eh.e_machine;
	ef->elf_class = eh.e_ident[EI_CLASS];
	ef->type = eh.e_type;
	if (elf_getphdrnum(elf, &phnum) != 0)
		phnum = 0;
	ef->xr = calloc(phnum ? phnum : 1, sizeof(*ef->xr));
	if (!ef->xr) {
		rc = -1;
		snprintf(why, wlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			ef->xr[ef->nxr][0] = ph.p_vaddr;
			ef->xr[ef->nxr][1] = ph.p_vaddr + ph.p_memsz;
			ef->nxr++;
		}
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

static int in_exec(const struct elf_facts *ef, uint64_t b, uint64_t e)
{
	if (!ef->nxr)
		return 1;
	for (size_t i = 0; i < ef->nxr; i++)
		if (b >= ef->xr[i][0] && e <= ef->xr[i][1])
			return 1;
	return 0;
}

/* ---- Building readelf's address map ------------------------------------------------------ */

struct plan {
	struct seg *segs;
	size_t nsegs, cap_segs;
	uint64_t *ends;            /* END of every kept FDE, sorted */
	size_t nends;
	size_t kept, empty, nonexec, bad, shadowed, ignored, overlaps;
	uint64_t overlap_pc[2];    /* first overlap: the two BEGINs */
	const char *first_ignore;
	uint64_t first_ignore_pc;
};

static const struct fde_rec *sort_fdes;

static int cmp_fde_idx(const void *pa, const void *pb)
{
	const struct fde_rec *a = &sort_fdes[*(const uint32_t *)pa], *b = &sort_fdes[*(const uint32_t *)pb];

	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

static int cmp_cie(const void *pa, const void *pb)
{
	const struct cie_rec *a = pa, *b = pb;

	if (a->sec != b->sec)
		return a->sec - b->sec;
	return a->off < b->off ? -1 : a->off > b->off;
}

static uint32_t cie_id(const struct parsed *p, uint8_t sec, uint64_t off)
{
	size_t lo = 0, hi = p->ncies;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct cie_rec *c = &p->cies[mid];

		if (c->sec < sec || (c->sec == sec && c->off < off))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->ncies && p->cies[lo].sec == sec && p->cies[lo].off == off)
		return p->cies[lo].id;
	return ID_NONE;
}

/* Sorted indexes of the kept FDEs of one section, overlaps resolved (eff_end). */
static uint32_t *section_order(struct parsed *p, struct plan *pl, uint8_t sec, size_t *count)
{
	uint32_t *idx = malloc((p->nfdes ? p->nfdes : 1) * sizeof(*idx));
	size_t n = 0;

	if (!idx) {
		fprintf(stderr, "cfi_vs_readelf: out of memory\n");
		exit(3);
	}
	for (size_t i = 0; i < p->nfdes; i++)
		if (p->fdes[i].sec == sec && p->fdes[i].state == FDE_KEEP)
			idx[n++] = (uint32_t)i;
	sort_fdes = p->fdes;
	qsort(idx, n, sizeof(*idx), cmp_fde_idx);
	for (size_t k = 0; k < n; k++) {
		struct fde_rec *f = &p->fdes[idx[k]];

		f->eff_end = f->end;
		if (k + 1 < n && p->fdes[idx[k + 1]].begin < f->end) {
			if (!pl->overlaps++) {
				pl->overlap_pc[0] = f->begin;
				pl->overlap_pc[1] = p->fdes[idx[k + 1]].begin;
			}
			f->eff_end = p->fdes[idx[k + 1]].begin;
		}
	}
	*count = n;
	return idx;
}

static void add_seg(struct plan *pl, uint64_t a, uint64_t b, uint32_t id, uint32_t fde, int *first)
{
	if (a >= b)
		return;
	ARRAY_GROW(pl->segs, pl->nsegs, pl->cap_segs);
	pl->segs[pl->nsegs++] = (struct seg){ .a = a, .b = b, .next = a, .id = id, .fde = fde,
					      .first = (uint8_t)*first };
	*first = 0;
}

static void build_plan(struct parsed *p, const struct elf_facts *ef, struct plan *pl)
{
	uint32_t *eh, *dbg, *all;
	size_t neh, ndbg, nall = 0;
	uint64_t *eh_maxend = NULL;

	qsort(p->cies, p->ncies, sizeof(*p->cies), cmp_cie);
	for (size_t i = 0; i < p->nfdes; i++) {
		struct fde_rec *f = &p->fdes[i];

		if (f->end < f->begin) {
			f->state = FDE_BAD;
			pl->bad++;
		} else if (f->end == f->begin) {
			f->state = FDE_EMPTY;
			pl->empty++;
		} else if (!in_exec(ef, f->begin, f->end)) {
			f->state = FDE_NONEXEC;
			pl->nonexec++;
		}
	}
	eh = section_order(p, pl, SEC_EH, &neh);
	/* .debug_frame FDEs overlapping any kept .eh_frame FDE are skipped */
	if (neh) {
		eh_maxend = malloc(neh * sizeof(*eh_maxend));
		if (!eh_maxend)
			exit(3);
		for (size_t k = 0; k < neh; k++) {
			uint64_t e = p->fdes[eh[k]].end;
			eh_maxend[k] = k && eh_maxend[k - 1] > e ? eh_maxend[k - 1] : e;
		}
	}
	for (size_t i = 0; i < p->nfdes; i++) {
		struct fde_rec *f = &p->fdes[i];
		size_t lo = 0, hi = neh;

		if (f->sec != SEC_DEBUG || f->state != FDE_KEEP || !neh)
			continue;
		/* last .eh_frame FDE with begin < f->end */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (p->fdes[eh[mid]].begin < f->end)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo > 0 && eh_maxend[lo - 1] > f->begin) {
			f->state = FDE_SHADOWED;
			pl->shadowed++;
		}
	}
	free(eh_maxend);
	dbg = section_order(p, pl, SEC_DEBUG, &ndbg);

	/* both sections' FDEs, by BEGIN: they no longer overlap across sections */
	all = malloc((neh + ndbg + 1) * sizeof(*all));
	if (!all)
		exit(3);
	memcpy(all, eh, neh * sizeof(*all));
	memcpy(all + neh, dbg, ndbg * sizeof(*all));
	nall = neh + ndbg;
	sort_fdes = p->fdes;
	qsort(all, nall, sizeof(*all), cmp_fde_idx);
	free(eh);
	free(dbg);

	pl->ends = malloc((nall + 1) * sizeof(*pl->ends));
	if (!pl->ends)
		exit(3);
	for (size_t k = 0; k < nall; k++) {
		uint32_t fi = all[k];
		struct fde_rec *f = &p->fdes[fi];
		int first = 1;

		pl->kept++;
		pl->ends[pl->nends++] = f->end;
		if (!f->ignore && f->nrows == 0) {
			uint32_t id = cie_id(p, f->sec, f->cie_off);
			if (id == ID_NONE) {
				f->ignore = 1;
				f->why = str_of(intern("all-nop FDE and its CIE printed no row"));
			} else {
				add_seg(pl, f->begin, f->eff_end, id, fi, &first);
				continue;
			}
		}
		if (f->ignore) {
			if (!pl->ignored++) {
				pl->first_ignore = f->why;
				pl->first_ignore_pc = f->begin;
			}
			add_seg(pl, f->begin, f->eff_end, ID_IGNORE, fi, &first);
			continue;
		}
		for (uint32_t r = 0; r < f->nrows; r++) {
			const struct row_rec *row = &p->rows[f->row0 + r];
			uint64_t a = row->pc > f->begin ? row->pc : f->begin;
			uint64_t b = r + 1 < f->nrows ? p->rows[f->row0 + r + 1].pc : f->end;

			if (b > f->eff_end)
				b = f->eff_end;
			add_seg(pl, a, b, row->id, fi, &first);
		}
	}
	free(all);
	qsort(pl->ends, pl->nends, sizeof(*pl->ends), cmp_u64);
}

static int is_end(const struct plan *pl, uint64_t pc)
{
	size_t lo = 0, hi = pl->nends;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pl->ends[mid] < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pl->nends && pl->ends[lo] == pc;
}

/* ---- The comparison ---------------------------------------------------------------------- */

struct cmp {
	const char *path;
	const struct parsed *p;
	const struct plan *pl;
	unsigned digits;
	size_t mismatches;
	char (*lines)[512];        /* the first mismatches, printed after the FAIL line */
	size_t nlines;
};

static void fde_desc(const struct cmp *c, const struct seg *s, char *buf, size_t len)
{
	const struct fde_rec *f;

	if (!s) {
		snprintf(buf, len, "no FDE");
		return;
	}
	f = &c->p->fdes[s->fde];
	snprintf(buf, len, "FDE %s+0x%" PRIx64 " pc=%0*" PRIx64 "..%0*" PRIx64, sec_names[f->sec], f->off,
		 c->digits, f->begin, c->digits, f->end);
}

static void mismatch(struct cmp *c, uint64_t pc, const char *what, const struct seg *s,
		     const char *readelf_text, uint64_t row, const char *dwunw_text)
{
	char fd[160];

	if (c->mismatches++ >= (size_t)max_show)
		return;
	fde_desc(c, s, fd, sizeof(fd));
	snprintf(c->lines[c->nlines++], sizeof(c->lines[0]),
		 "  pc=%0*" PRIx64 " %s [%s]\n    readelf: %s\n    dwunw:   %s (row %" PRIu64 ")",
		 c->digits, pc, what, fd, readelf_text ? readelf_text : "-", dwunw_text ? dwunw_text : "-", row);
}

/* Canonical text of a dwunw row. */
static void dwunw_canon(const struct dwunw_row_text *r, char *buf, size_t len)
{
	struct cell cells[DWUNW_ROW_MAX_REGS];
	unsigned n = 0;

	for (uint32_t i = 0; i < r->nregs && i < DWUNW_ROW_MAX_REGS; i++) {
		cells[n].name = r->regs[i].is_ra ? "ra" : r->regs[i].name;
		cells[n].rule = r->regs[i].rule;
		n++;
	}
	canon(buf, len, r->cfa, cells, n);
}

/*
 * Walks dwunw's rows (all of them, in order) against readelf's segments (sorted, disjoint).
 * Returns -1 when dwunw fails to give a row.
 */
static int compare(struct dwunw_ctx *ctx, struct dwunw_module *mod, uint64_t nrows, struct cmp *c,
		   struct plan *pl, char *err, size_t errlen)
{
	struct dwunw_row_text row;
	char text[4096];
	size_t j = 0;              /* first segment not yet retired */
	uint64_t prev_end = 0;
	struct seg *segs = pl->segs;
	size_t nsegs = pl->nsegs;

	for (uint64_t i = 0; i < nrows; i++) {
		int rc = dwunw_table_row(ctx, mod, i, &row);
		int is_end_row;
		uint64_t p, e, cursor;

		if (rc) {
			snprintf(err, errlen, "dwunw_table_row(%" PRIu64 "): %s", i, dwunw_errname(rc));
			return -1;
		}
		p = row.pc;
		e = row.end;
		is_end_row = strcmp(row.cfa, "end") == 0;
		if (i > 0 && p < prev_end)
			mismatch(c, p, "dwunw rows out of order", NULL, NULL, i, row.cfa);
		prev_end = e > p ? e : p;
		if (is_end_row) {
			if (!is_end(pl, p))
				mismatch(c, p, "END row not at an FDE's end", NULL, NULL, i, "end");
		} else {
			dwunw_canon(&row, text, sizeof(text));
		}
		if (e <= p) {
			/* Only the last row has no extent; a non-END one there is CFI past every FDE. */
			if (i + 1 < nrows)
				mismatch(c, p, "dwunw row with no extent (two rows at one pc)", NULL, NULL, i,
					 is_end_row ? "end" : text);
			else if (!is_end_row)
				mismatch(c, p, "last dwunw row is not an END row", NULL, NULL, i, text);
			continue;
		}
		/* retire segments that end at or before this row */
		while (j < nsegs && segs[j].b <= p) {
			if (segs[j].next < segs[j].b && segs[j].id != ID_IGNORE)
				mismatch(c, segs[j].next, "no dwunw row here", &segs[j], str_of(segs[j].id),
					 i, "(none)");
			j++;
		}
		cursor = p;
		for (size_t k = j; k < nsegs && segs[k].a < e; k++) {
			struct seg *s = &segs[k];
			uint64_t oa = s->a > p ? s->a : p, ob = s->b < e ? s->b : e;

			if (!is_end_row && oa > cursor)
				mismatch(c, cursor, "dwunw row outside every FDE", NULL, NULL, i, text);
			if (s->id != ID_IGNORE) {
				if (oa > s->next)
					mismatch(c, s->next, "no dwunw row here", s, str_of(s->id), i, "(none)");
				if (is_end_row)
					mismatch(c, oa, "dwunw END row inside an FDE", s, str_of(s->id), i, "end");
				else if (strcmp(str_of(s->id), text) != 0)
					mismatch(c, oa, "rules differ", s, str_of(s->id), i, text);
			}
			if (s->first && s->a >= p) {
				int64_t got = dwunw_table_lookup(ctx, mod, s->a);
				if (got != (int64_t)i) {
					char g[64];
					snprintf(g, sizeof(g), "lookup gave %" PRId64, got);
					mismatch(c, s->a, "dwunw_table_lookup(BEGIN) is not the row covering it",
						 s, str_of(s->id), i, g);
				}
			}
			s->next = ob;
			cursor = ob;
		}
		if (!is_end_row && cursor < e)
			mismatch(c, cursor, "dwunw row outside every FDE", NULL, NULL, i, text);
	}
	for (; j < nsegs; j++)
		if (segs[j].next < segs[j].b && segs[j].id != ID_IGNORE)
			mismatch(c, segs[j].next, "no dwunw row here", &segs[j], str_of(segs[j].id), nrows, "(none)");
	return 0;
}

/* ---- Per file ------------------------------------------------------------------------------ */

static const char *sources_text(uint32_t src)
{
	switch (src & (DWUNW_TABLE_SRC_EH_FRAME | DWUNW_TABLE_SRC_DEBUG_FRAME)) {
	case DWUNW_TABLE_SRC_EH_FRAME: return "eh_frame";
	case DWUNW_TABLE_SRC_DEBUG_FRAME: return "debug_frame";
	case DWUNW_TABLE_SRC_EH_FRAME | DWUNW_TABLE_SRC_DEBUG_FRAME: return "eh_frame+debug_frame";
	default: return "none";
	}
}

/* -p: print the rows readelf's output implies. */
static void dump_plan(const char *path, const struct parsed *p, const struct plan *pl)
{
	unsigned d = p->addr_digits ? p->addr_digits : 16;

	printf("# %s: %zu segments, %zu FDEs kept\n", path, pl->nsegs, pl->kept);
	for (size_t i = 0; i < pl->nsegs; i++) {
		const struct seg *s = &pl->segs[i];
		printf("%0*" PRIx64 "..%0*" PRIx64 " %s\n", d, s->a, d, s->b, str_of(s->id));
	}
}

static int parse_only, dump_only;

/* -d: dwunw's rows in canonical text. */
static int dump_rows(struct dwunw_ctx *ctx, const char *path)
{
	struct dwunw_module *mod;
	struct dwunw_table_info info;
	struct dwunw_row_text row;
	char text[4096];
	int rc = dwunw_module_open(ctx, path, &mod);

	if (rc == DWUNW_OK) {
		rc = dwunw_table_info(ctx, mod, &info);
		for (uint64_t i = 0; rc == DWUNW_OK && i < info.rows; i++) {
			rc = dwunw_table_row(ctx, mod, i, &row);
			if (rc)
				break;
			dwunw_canon(&row, text, sizeof(text));
			printf("ROW %016" PRIx64 " %016" PRIx64 " %s%s%s %s\n", row.pc, row.end,
			       row.flags & DWUNW_ROW_SIGNAL ? "S" : "", row.flags & DWUNW_ROW_RA_SIGNED ? "A" : "",
			       row.flags & (DWUNW_ROW_SIGNAL | DWUNW_ROW_RA_SIGNED) ? "" : "-", text);
		}
		dwunw_module_put(ctx, mod);
	}
	if (rc) {
		printf("ERROR %s: dwunw error %s (%s)\n", path, dwunw_errname(rc), dwunw_strerror(rc));
		return 1;
	}
	printf("DUMPED %s rows=%" PRIu64 " sources=%s\n", path, info.rows, sources_text(info.sources));
	return 0;
}

/* 0 OK or SKIP, 1 FAIL or ERROR. */
static int check_file(struct dwunw_ctx *ctx, const char *path)
{
	struct elf_facts ef;
	struct parsed p;
	struct plan pl;
	struct dwunw_module *mod = NULL;
	struct dwunw_table_info info;
	char why[256], rerr[256];
	double t0 = now_ms(), t_readelf, t_table;
	int rc, ret = 0;
	struct cmp c;
	const struct dwunw_arch_ops *arch;

	memset(&p, 0, sizeof(p));
	memset(&pl, 0, sizeof(pl));
	memset(&info, 0, sizeof(info));
	if (read_elf_facts(path, &ef, why, sizeof(why)) != 0) {
		printf("SKIP %s: %s\n", path, why);
		free(ef.xr);
		return 0;
	}
	if (ef.type == ET_REL || ef.type == ET_CORE) {
		printf("SKIP %s: %s\n", path, ef.type == ET_REL ? "relocatable object (no load addresses)" : "core file");
		free(ef.xr);
		return 0;
	}
	arch = dwunw_arch_for_elf(ef.machine, ef.elf_class);
	if (!arch && !parse_only) {
		printf("SKIP %s: unsupported machine %u (ELFCLASS%u)\n", path, ef.machine,
		       ef.elf_class == ELFCLASS32 ? 32 : 64);
		free(ef.xr);
		return 0;
	}
	strs_reset();
	if (run_readelf(path, &p, rerr, sizeof(rerr)) != 0) {
		printf("ERROR %s: readelf failed%s%s\n", path, rerr[0] ? ": " : "", rerr);
		ret = 1;
		goto out;
	}
	t_readelf = now_ms();
	build_plan(&p, &ef, &pl);
	if (parse_only) {
		dump_plan(path, &p, &pl);
		goto out;
	}
	rc = dwunw_module_open(ctx, path, &mod);
	if (rc == DWUNW_ERR_UNSUPPORTED_ARCH) {
		printf("SKIP %s: unsupported machine %u (dwunw: %s)\n", path, ef.machine, dwunw_errname(rc));
		goto out;
	}
	if (rc == DWUNW_OK)
		rc = dwunw_table_info(ctx, mod, &info);
	t_table = now_ms();
	if (rc == DWUNW_ERR_NO_DWARF && pl.nsegs == 0) {
		printf("SKIP %s: no CFI (readelf: %zu FDEs, none usable)\n", path, p.nfdes);
		goto out;
	}
	if (rc) {
		printf("ERROR %s: dwunw error %s (%s); readelf shows %zu usable FDEs\n", path, dwunw_errname(rc),
		       dwunw_strerror(rc), pl.kept);
		ret = 1;
		goto out;
	}
	if (info.rows == 0 && pl.nsegs == 0) {
		printf("SKIP %s: no CFI (readelf: %zu FDEs, none usable)\n", path, p.nfdes);
		goto out;
	}
	if (p.sections == 0) {
		/* No section headers (or none for the CFI): dwunw found it through
		 * PT_GNU_EH_FRAME, readelf cannot show it. Nothing to compare with. */
		printf("SKIP %s: no CFI section for readelf (dwunw: %" PRIu64 " rows from the program headers)\n",
		       path, info.rows);
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.path = path;
	c.p = &p;
	c.pl = &pl;
	c.digits = p.addr_digits ? p.addr_digits : (ef.elf_class == ELFCLASS32 ? 8 : 16);
	c.lines = calloc((size_t)max_show + 1, sizeof(*c.lines));
	if (!c.lines)
		exit(3);
	if (compare(ctx, mod, info.rows, &c, &pl, why, sizeof(why)) != 0) {
		printf("ERROR %s: %s\n", path, why);
		free(c.lines);
		ret = 1;
		goto out;
	}
	if (pl.overlaps)
		printf("NOTE overlap %s: %zu FDEs overlap the next one (first: %0*" PRIx64 " and %0*" PRIx64 ")\n",
		       path, pl.overlaps, c.digits, pl.overlap_pc[0], c.digits, pl.overlap_pc[1]);
	if (pl.ignored)
		printf("NOTE unchecked %s: %zu FDEs readelf did not fully show (first at %0*" PRIx64 ": %s)\n",
		       path, pl.ignored, c.digits, pl.first_ignore_pc, pl.first_ignore);
	if (verbose && p.notes)
		printf("NOTE readelf %s: %u other lines (first: %s)\n", path, p.notes, p.first_note);
	if (verbose && rerr[0])
		printf("NOTE readelf-stderr %s: %s\n", path, rerr);
	{
		char stats[512];
		int o = snprintf(stats, sizeof(stats),
				 "rows=%" PRIu64 " fdes=%zu sources=%s readelf_rows=%zu empty=%zu nonexec=%zu "
				 "shadowed=%zu ignored=%zu overlaps=%zu dwunw_dropped=%" PRIu64,
				 info.rows, pl.kept, sources_text(info.sources), p.nrows, pl.empty, pl.nonexec,
				 pl.shadowed, pl.ignored, pl.overlaps, info.fdes_dropped);
		if (info.first_error && o > 0 && (size_t)o < sizeof(stats))
			o += snprintf(stats + o, sizeof(stats) - (size_t)o, " first_error=%s@%s+0x%" PRIx64,
				      dwunw_errname(info.first_error),
				      info.first_error_source == DWUNW_TABLE_SRC_DEBUG_FRAME ? ".debug_frame" : ".eh_frame",
				      info.first_error_offset);
		if (verbose && o > 0 && (size_t)o < sizeof(stats))
			snprintf(stats + o, sizeof(stats) - (size_t)o, " readelf_ms=%.1f table_ms=%.1f compare_ms=%.1f",
				 t_readelf - t0, t_table - t_readelf, now_ms() - t_table);
		if (c.mismatches) {
			printf("FAIL %s: mismatches=%zu %s\n", path, c.mismatches, stats);
			for (size_t i = 0; i < c.nlines; i++)
				printf("%s\n", c.lines[i]);
			if (c.mismatches > c.nlines)
				printf("  ... %zu more\n", c.mismatches - c.nlines);
			ret = 1;
		} else {
			printf("OK %s %s\n", path, stats);
		}
	}
	free(c.lines);
out:
	fflush(stdout);
	if (mod)
		dwunw_module_put(ctx, mod);
	parsed_free(&p);
	free(pl.segs);
	free(pl.ends);
	free(ef.xr);
	return ret;
}

static void usage(void)
{
	fprintf(stderr, "usage: cfi_vs_readelf [-v] [-n MAX_MISMATCHES] [-p | -d] FILE...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct dwunw_ctx ctx;
	struct dwunw_config cfg;
	int opt, failed = 0, rc;

	while ((opt = getopt(argc, argv, "vn:pd")) != -1) {
		switch (opt) {
		case 'v':
			verbose = 1;
			if (max_show < 50)
				max_show = 50;
			break;
		case 'n':
			max_show = atoi(optarg);
			if (max_show < 0)
				usage();
			break;
		case 'p':
			parse_only = 1;
			break;
		case 'd':
			dump_only = 1;
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	if (elf_version(EV_CURRENT) == EV_NONE) {
		fprintf(stderr, "cfi_vs_readelf: libelf too old\n");
		return 2;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = sizeof(cfg);
	cfg.flags = DWUNW_CFG_NO_DEBUG_FILES;
	cfg.cache_slots = 2;       /* tables of big libraries are large: keep few */
	rc = dwunw_init(&ctx, &cfg);
	if (rc) {
		fprintf(stderr, "cfi_vs_readelf: dwunw_init: %s\n", dwunw_strerror(rc));
		return 2;
	}
	for (int i = optind; i < argc; i++)
		failed |= dump_only ? dump_rows(&ctx, argv[i]) : check_file(&ctx, argv[i]);
	dwunw_shutdown(&ctx);
	return failed ? 1 : 0;
}
