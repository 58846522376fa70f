// SPDX-License-Identifier: GPL-2.0-only
/* CIE and FDE parsing for .eh_frame and .debug_frame, and DW_EH_PE_* pointer decoding. */
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "cfi.h"
#include "internal.h"

static uint64_t mask_addr(uint64_t v, unsigned size)
{
	return size == 4 ? (uint32_t)v : v;
}

int dw_read_encoded(const struct dw_cfi_section *s, struct dw_cursor *c, uint8_t enc,
		    uint64_t func_start, uint64_t *out)
{
	uint64_t pos = s->vaddr + (uint64_t)(c->p - s->data);
	uint64_t base = 0, v = 0;
	unsigned asz = s->addr_size;

	*out = 0;
	if (enc == DW_EH_PE_omit)
		return DWUNW_OK;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr: break;
	case DW_EH_PE_pcrel: base = pos; break;
	case DW_EH_PE_textrel: base = s->text_vaddr; break;
	case DW_EH_PE_datarel: base = s->data_vaddr; break;
	case DW_EH_PE_funcrel: base = func_start; break;
	case DW_EH_PE_aligned: {
		/* The value sits at the next address-size boundary (in memory, not in the section). */
		uint64_t pad = (asz - (pos % asz)) % asz;
		cur_skip(c, pad);
		break;
	}
	default:
		return DWUNW_ERR_CORRUPT;
	}
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: v = cur_addr(c, asz); break;
	case DW_EH_PE_uleb128: v = cur_uleb(c); break;
	case DW_EH_PE_udata2: v = cur_u16(c); break;
	case DW_EH_PE_udata4: v = cur_u32(c); break;
	case DW_EH_PE_udata8: v = cur_u64(c); break;
	case DW_EH_PE_sleb128: v = (uint64_t)cur_sleb(c); break;
	case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)cur_u16(c); break;
	case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)cur_u32(c); break;
	case DW_EH_PE_sdata8: v = cur_u64(c); break;
	default:
		return DWUNW_ERR_CORRUPT;
	}
	if (c->err)
		return c->err;
	v = mask_addr(base + v, asz);
	if (enc & DW_EH_PE_indirect) {
		uint8_t buf[8] = { 0 };
		if (!s->read_mem)
			return DWUNW_ERR_UNSUPPORTED_CFI;
		int err = s->read_mem(s->arg, v, buf, asz);
		if (err)
			return err;
		v = 0;
		memcpy(&v, buf, asz);
	}
	*out = v;
	return DWUNW_OK;
}

/* Entry header: its length, where its body starts and ends, and whether it is 64-bit DWARF. */
struct entry {
	uint64_t off;              /* of the length field */
	const uint8_t *body;       /* after the length field */
	const uint8_t *end;
	uint8_t is64;
	uint8_t zero;              /* a zero terminator */
};

static int read_entry(const struct dw_cfi_section *s, uint64_t off, struct entry *e)
{
	struct dw_cursor c;
	uint64_t len;

	if (off > s->size)
		return DWUNW_ERR_CORRUPT;
	cur_init(&c, s->data + off, s->size - off);
	e->off = off;
	e->is64 = 0;
	e->zero = 0;
	len = cur_u32(&c);
	if (len == 0xffffffffu) {
		len = cur_u64(&c);
		e->is64 = 1;
	}
	if (c.err)
		return DWUNW_ERR_CORRUPT;
	if (len == 0) {
		e->zero = 1;
		e->body = e->end = c.p;
		return DWUNW_OK;
	}
	if (len > cur_left(&c))
		return DWUNW_ERR_CORRUPT;
	e->body = c.p;
	e->end = c.p + len;
	return DWUNW_OK;
}

/* CIE id of an entry, and the cursor after it. */
static uint64_t entry_id(const struct dw_cfi_section *s, const struct entry *e, struct dw_cursor *c)
{
	cur_init(c, e->body, (size_t)(e->end - e->body));
	/* .eh_frame's CIE pointer is 4 bytes even in 64-bit entries. */
	return e->is64 && !s->is_eh ? cur_u64(c) : cur_u32(c);
}

static int is_cie_id(const struct dw_cfi_section *s, const struct entry *e, uint64_t id)
{
	if (s->is_eh)
		return id == 0;
	return e->is64 ? id == UINT64_MAX : id == 0xffffffffu;
}

static int parse_cie_body(const struct dw_cfi_section *s, const struct entry *e, struct dw_cursor *c,
			  struct dw_cie *cie)
{
	const char *aug;
	const uint8_t *aug_end = NULL;

	memset(cie, 0, sizeof(*cie));
	cie->offset = e->off;
	cie->lsda_enc = DW_EH_PE_omit;
	cie->fde_enc = DW_EH_PE_absptr;
	cie->addr_size = s->addr_size;
	cie->version = cur_u8(c);
	if (cie->version != 1 && cie->version != 3 && cie->version != 4)
		return DWUNW_ERR_UNSUPPORTED_CFI;
	aug = (const char *)c->p;
	{
		const uint8_t *nul = memchr(c->p, 0, cur_left(c));
		if (!nul)
			return DWUNW_ERR_CORRUPT;
		c->p = nul + 1;
	}
	if (cie->version == 4) {
		cie->addr_size = cur_u8(c);
		cie->seg_size = cur_u8(c);
		if (cie->addr_size != 4 && cie->addr_size != 8)
			return DWUNW_ERR_CORRUPT;
	}
	cie->code_align = cur_uleb(c);
	cie->data_align = cur_sleb(c);
	cie->ra_reg = cie->version == 1 ? cur_u8(c) : (uint32_t)cur_uleb(c);
	if (c->err)
		return c->err;

	if (aug[0] == 'z') {
		uint64_t alen = cur_uleb(c);
		if (c->err || alen > cur_left(c))
			return DWUNW_ERR_CORRUPT;
		aug_end = c->p + alen;
		cie->has_z = 1;
		for (const char *a = aug + 1; *a; a++) {
			switch (*a) {
			case 'R':
				cie->fde_enc = cur_u8(c);
				break;
			case 'L':
				cie->lsda_enc = cur_u8(c);
				break;
			case 'P': {
				uint8_t penc = cur_u8(c);
				int err = dw_read_encoded(s, c, penc, 0, &cie->personality);
				/* An unreadable personality does not matter for unwinding. */
				if (err == DWUNW_ERR_CORRUPT)
					return err;
				break;
			}
			case 'S':
				cie->signal = 1;
				break;
			case 'B':
				cie->b_key = 1;
				break;
			case 'G':
				cie->mte = 1;
				break;
			default:
				/* The length lets us skip data we do not understand; the FDE layout
				 * itself is still known because 'z' says where it ends. */
				goto aug_done;
			}
			if (c->err || c->p > aug_end)
				return DWUNW_ERR_CORRUPT;
		}
aug_done:
		c->p = aug_end;
	} else if (strcmp(aug, "eh") == 0) {
		cur_skip(c, s->addr_size); /* old GCC: eh_ptr */
	} else {
		/* Without 'z' only letters that carry no data can be understood (GNU as writes
		 * "S" into .debug_frame for .cfi_signal_frame). */
		for (const char *a = aug; *a; a++) {
			if (*a == 'S')
				cie->signal = 1;
			else if (*a == 'B')
				cie->b_key = 1;
			else if (*a == 'G')
				cie->mte = 1;
			else
				return DWUNW_ERR_UNSUPPORTED_CFI;
		}
	}
	if (c->err)
		return c->err;
	cie->insns = c->p;
	cie->insns_end = e->end;
	return DWUNW_OK;
}

int dw_cfi_parse_cie(const struct dw_cfi_section *s, uint64_t off, struct dw_cie *out)
{
	struct entry e;
	struct dw_cursor c;
	int err = read_entry(s, off, &e);

	if (err)
		return err;
	if (e.zero || !is_cie_id(s, &e, entry_id(s, &e, &c)) || c.err)
		return DWUNW_ERR_CORRUPT;
	return parse_cie_body(s, &e, &c, out);
}

static int add_cie(struct dw_cfi_scan *sc, const struct dw_cie *cie, uint32_t *idx)
{
	uint32_t lo = 0, hi = sc->ncies;

	if (sc->ncies == sc->cap_cies) {
		uint32_t cap = sc->cap_cies ? sc->cap_cies * 2 : 16;
		void *p = realloc(sc->cies, (size_t)cap * sizeof(*sc->cies));
		if (!p)
			return DWUNW_ERR_NOMEM;
		sc->cies = p;
		sc->cap_cies = cap;
	}
	/* Kept sorted by offset; usually appended at the end. */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (sc->cies[mid].offset < cie->offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&sc->cies[lo + 1], &sc->cies[lo], (size_t)(sc->ncies - lo) * sizeof(*sc->cies));
	sc->cies[lo] = *cie;
	sc->ncies++;
	*idx = lo;
	return DWUNW_OK;
}

static int64_t find_cie(const struct dw_cfi_scan *sc, uint64_t off)
{
	uint32_t lo = 0, hi = sc->ncies;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (sc->cies[mid].offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sc->ncies && sc->cies[lo].offset == off ? (int64_t)lo : -1;
}

static void note_bad(struct dw_cfi_scan *sc, int err, uint64_t off)
{
	sc->bad++;
	if (!sc->first_err) {
		sc->first_err = err;
		sc->first_err_off = off;
	}
}

/* The CIE an FDE points at: parsed on first use (CIEs may follow their FDEs in .debug_frame). */
static int cie_for(const struct dw_cfi_section *s, struct dw_cfi_scan *sc, uint64_t cie_off,
		   uint32_t *idx)
{
	int64_t i = find_cie(sc, cie_off);
	struct dw_cie cie;
	int err;

	if (i >= 0) {
		*idx = (uint32_t)i;
		return DWUNW_OK;
	}
	err = dw_cfi_parse_cie(s, cie_off, &cie);
	if (err)
		return err;
	err = add_cie(sc, &cie, idx);
	if (err)
		return err;
	/* Indices of FDEs already stored shift when a CIE lands in the middle. */
	for (uint32_t f = 0; f < sc->nfdes; f++)
		if (sc->fdes[f].cie >= *idx)
			sc->fdes[f].cie++;
	return DWUNW_OK;
}

static int parse_fde(const struct dw_cfi_section *s, struct dw_cfi_scan *sc, const struct entry *e,
		     struct dw_cursor *c, uint64_t id, struct dw_fde *fde)
{
	uint64_t cie_off, range = 0;
	const struct dw_cie *cie;
	uint32_t ci;
	int err;

	memset(fde, 0, sizeof(*fde));
	fde->offset = e->off;
	if (s->is_eh) {
		/* Relative to the CIE-pointer field itself. */
		uint64_t field = (uint64_t)(e->body - s->data);
		if (id > field)
			return DWUNW_ERR_CORRUPT;
		cie_off = field - id;
	} else {
		cie_off = id;
	}
	if (cie_off >= s->size)
		return DWUNW_ERR_CORRUPT;
	err = cie_for(s, sc, cie_off, &ci);
	if (err)
		return err;
	cie = &sc->cies[ci];
	fde->cie = ci;

	if (s->is_eh) {
		err = dw_read_encoded(s, c, cie->fde_enc, 0, &fde->pc_begin);
		if (!err) {
			/* The range uses the value format only, never an application. */
			err = dw_read_encoded(s, c, cie->fde_enc & 0x0f, 0, &range);
		}
		if (err)
			return err;
	} else {
		cur_skip(c, cie->seg_size);
		fde->pc_begin = cur_addr(c, cie->addr_size);
		range = cur_addr(c, cie->addr_size);
	}
	if (cie->has_z) {
		uint64_t alen = cur_uleb(c);
		const uint8_t *aug_end;
		if (c->err || alen > cur_left(c))
			return DWUNW_ERR_CORRUPT;
		aug_end = c->p + alen;
		if (cie->lsda_enc != DW_EH_PE_omit && alen) {
			err = dw_read_encoded(s, c, cie->lsda_enc, fde->pc_begin, &fde->lsda);
			if (err == DWUNW_ERR_CORRUPT)
				return err;
		}
		c->p = aug_end;
	}
	if (c->err)
		return c->err;
	if (cie->addr_size == 4 && (fde->pc_begin > UINT32_MAX || range > UINT32_MAX))
		return DWUNW_ERR_CORRUPT;
	if (range > UINT64_MAX - fde->pc_begin)
		return DWUNW_ERR_CORRUPT;
	fde->pc_end = fde->pc_begin + range;
	fde->insns = c->p;
	fde->insns_end = e->end;
	return DWUNW_OK;
}

int dw_cfi_scan(const struct dw_cfi_section *s, struct dw_cfi_scan *sc)
{
	uint64_t off = 0;

	memset(sc, 0, sizeof(*sc));
	if (!s->data && s->size)
		return DWUNW_ERR_INVALID_ARG;
	while (off < s->size) {
		struct entry e;
		struct dw_cursor c;
		uint64_t id;
		int err;

		if (s->size - off < 4) {
			/* Trailing padding shorter than a length field. */
			if (!s->size_unknown)
				note_bad(sc, DWUNW_ERR_CORRUPT, off);
			break;
		}
		err = read_entry(s, off, &e);
		if (err) {
			/* A broken length hides where the next entry starts: stop here. */
			if (!s->size_unknown)
				note_bad(sc, err, off);
			break;
		}
		if (e.zero) {
			if (s->size_unknown)
				break;
			off += 4;
			continue;
		}
		off = (uint64_t)(e.end - s->data);
		id = entry_id(s, &e, &c);
		if (c.err) {
			note_bad(sc, DWUNW_ERR_CORRUPT, e.off);
			continue;
		}
		if (is_cie_id(s, &e, id)) {
			struct dw_cie cie;
			uint32_t idx;
			if (find_cie(sc, e.off) >= 0)
				continue; /* parsed earlier for a forward reference */
			err = parse_cie_body(s, &e, &c, &cie);
			if (err) {
				note_bad(sc, err, e.off);
				continue;
			}
			err = add_cie(sc, &cie, &idx);
		} else {
			struct dw_fde fde;
			err = parse_fde(s, sc, &e, &c, id, &fde);
			if (err) {
				if (err == DWUNW_ERR_NOMEM)
					return err;
				note_bad(sc, err, e.off);
				continue;
			}
			if (sc->nfdes == sc->cap_fdes) {
				uint32_t cap = sc->cap_fdes ? sc->cap_fdes * 2 : 256;
				void *p = realloc(sc->fdes, (size_t)cap * sizeof(*sc->fdes));
				if (!p)
					return DWUNW_ERR_NOMEM;
				sc->fdes = p;
				sc->cap_fdes = cap;
			}
			sc->fdes[sc->nfdes++] = fde;
		}
		if (err == DWUNW_ERR_NOMEM)
			return err;
	}
	return DWUNW_OK;
}

int dw_cfi_fde_at(const struct dw_cfi_section *s, struct dw_cfi_scan *sc, uint64_t off, struct dw_fde *out)
{
	struct entry e;
	struct dw_cursor c;
	uint64_t id;
	int err = read_entry(s, off, &e);

	if (err)
		return err;
	if (e.zero)
		return DWUNW_ERR_CORRUPT;
	id = entry_id(s, &e, &c);
	if (c.err || is_cie_id(s, &e, id))
		return DWUNW_ERR_CORRUPT;
	return parse_fde(s, sc, &e, &c, id, out);
}

void dw_cfi_scan_free(struct dw_cfi_scan *sc)
{
	free(sc->cies);
	free(sc->fdes);
	memset(sc, 0, sizeof(*sc));
}
