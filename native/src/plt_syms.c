/* SPDX-License-Identifier: MIT */
/* Synthetic `name@plt` symbols: each PLT stub decoded to the GOT slot it jumps through, the slot's
 * relocation naming the dynamic symbol. Decoding the stub (not counting entries) serves .plt,
 * .plt.sec and .plt.got alike, with or without IBT's endbr64. */
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwunw.h"
#include "plt_syms.h"

#define MAX_STUB_BYTES (1u << 20)

struct slot {
	uint64_t got;               /* the GOT slot's address */
	uint32_t sym;               /* .dynsym index; 0 for an IRELATIVE slot */
	uint64_t addend;            /* an IRELATIVE slot's resolver */
};

static int cmp_slot(const void *x, const void *y)
{
	const struct slot *a = x, *b = y;
	return a->got < b->got ? -1 : a->got > b->got;
}

/* JUMP_SLOT, GLOB_DAT and IRELATIVE relocations of a .rela section, appended to *v. */
static int add_slots(struct dw_elf *e, enum dw_sec_id id, struct slot **v, size_t *n, size_t *cap)
{
	const struct dw_section *s;

	if (dw_elf_section(e, id, &s) || !s->data || s->nobits)
		return DWUNW_OK;
	for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= s->size; off += sizeof(Elf64_Rela)) {
		Elf64_Rela r;
		memcpy(&r, s->data + off, sizeof(r));
		uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
		if (type == R_X86_64_IRELATIVE)
			sym = 0;
		else if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !sym)
			continue;
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			struct slot *nv = realloc(*v, nc * sizeof(*nv));
			if (!nv)
				return DWUNW_ERR_NOMEM;
			*v = nv, *cap = nc;
		}
		(*v)[(*n)++] = (struct slot){ .got = r.r_offset, .sym = sym, .addend = (uint64_t)r.r_addend };
	}
	return DWUNW_OK;
}

static const struct slot *find_slot(const struct slot *v, size_t n, uint64_t got)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].got < got)
			lo = mid + 1;
		else if (v[mid].got > got)
			hi = mid;
		else
			return &v[mid];
	}
	return NULL;
}

/* The name of .dynsym entry i, or NULL. */
static const char *dynsym_name(struct dw_elf *e, uint32_t i)
{
	const struct dw_section *sym, *str;
	Elf64_Sym s;

	if (dw_elf_section(e, DW_SEC_DYNSYM, &sym) || dw_elf_section(e, DW_SEC_DYNSTR, &str) || !sym->data ||
	    !str->data || (uint64_t)i * sizeof(s) + sizeof(s) > sym->size)
		return NULL;
	memcpy(&s, sym->data + (uint64_t)i * sizeof(s), sizeof(s));
	if (!s.st_name || s.st_name >= str->size || !memchr(str->data + s.st_name, 0, str->size - s.st_name))
		return NULL;
	return (const char *)str->data + s.st_name;
}

struct found {
	uint64_t addr, end;
	const struct slot *slot;
};

/* The stub's name without "@plt": the symbol's, or objdump's and perf's *ABS*+0xADDEND for an
 * IRELATIVE slot (an ifunc resolved at load); 0 when there is none. */
static size_t slot_name(struct dw_elf *e, const struct slot *s, char *buf, size_t len)
{
	if (!s->sym)
		return (size_t)snprintf(buf, len, "*ABS*+0x%" PRIx64, s->addend);
	const char *name = dynsym_name(e, s->sym);
	return name ? (size_t)snprintf(buf, len, "%s", name) : 0;
}

int dw_plt_syms(struct dw_elf *e, struct dw_plt_sym **out, size_t *n, char **strings)
{
	struct slot *slots = NULL;
	size_t nslots = 0, cap = 0, nfound = 0, fcap = 0, bytes = 0;
	struct found *found = NULL;
	uint8_t *code = NULL;
	int rc = DWUNW_OK;

	*out = NULL, *n = 0, *strings = NULL;
	if (e->machine != EM_X86_64 || e->elf_class != ELFCLASS64 || !e->nstubs)
		return DWUNW_OK;
	rc = add_slots(e, DW_SEC_RELA_PLT, &slots, &nslots, &cap);
	if (!rc)
		rc = add_slots(e, DW_SEC_RELA_DYN, &slots, &nslots, &cap);
	if (rc || !nslots)
		goto out;
	qsort(slots, nslots, sizeof(*slots), cmp_slot);

	for (uint32_t r = 0; r < e->nstubs && !rc; r++) {
		uint64_t lo = e->stubs[r][0], hi = e->stubs[r][1];
		if (hi <= lo || hi - lo > MAX_STUB_BYTES)
			continue;
		uint8_t *c = realloc(code, hi - lo);
		if (!c) {
			rc = DWUNW_ERR_NOMEM;
			break;
		}
		code = c;
		if (dw_elf_read_vaddr(e, lo, code, hi - lo))
			continue;
		/* jmp *disp32(%rip) (ff 25), perhaps after bnd (f2) and endbr64 (f3 0f 1e fa) */
		for (uint64_t k = 0; k + 6 <= hi - lo; k++) {
			if (code[k] != 0xff || code[k + 1] != 0x25)
				continue;
			int32_t disp;
			memcpy(&disp, code + k + 2, 4);
			const struct slot *s = find_slot(slots, nslots, lo + k + 6 + (int64_t)disp);
			if (!s)
				continue;
			uint64_t start = k;
			if (start >= 1 && code[start - 1] == 0xf2)
				start--;
			if (start >= 4 && !memcmp(code + start - 4, "\xf3\x0f\x1e\xfa", 4))
				start -= 4;
			char name[512];
			size_t len = slot_name(e, s, name, sizeof(name));
			if (!len || len >= sizeof(name))
				continue;
			if (nfound == fcap) {
				size_t nc = fcap ? fcap * 2 : 64;
				struct found *nv = realloc(found, nc * sizeof(*nv));
				if (!nv) {
					rc = DWUNW_ERR_NOMEM;
					break;
				}
				found = nv, fcap = nc;
			}
			found[nfound++] = (struct found){ .addr = lo + start, .end = hi, .slot = s };
			bytes += len + sizeof("@plt");
			k += 5;
		}
	}
	if (rc || !nfound)
		goto out;
	*out = malloc(nfound * sizeof(**out));
	*strings = malloc(bytes);
	if (!*out || !*strings) {
		free(*out), free(*strings);
		*out = NULL, *strings = NULL;
		rc = DWUNW_ERR_NOMEM;
		goto out;
	}
	char *p = *strings;
	for (size_t i = 0; i < nfound; i++) {
		size_t len = slot_name(e, found[i].slot, p, bytes - (size_t)(p - *strings));
		memcpy(p + len, "@plt", sizeof("@plt"));
		(*out)[i] = (struct dw_plt_sym){ .addr = found[i].addr, .end = found[i].end, .name = p };
		p += len + sizeof("@plt");
	}
	*n = nfound;
out:
	free(slots);
	free(found);
	free(code);
	return rc;
}
