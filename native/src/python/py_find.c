// SPDX-License-Identifier: GPL-2.0-only
/* dwunw_py_find: which file of a process holds CPython, its version, and whether the layout table
 * row of that version agrees with the interpreter's own objects. */
#include <elf.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "py_layout.h"
#include "py_mem.h"
#include "../ctx_handle.h"
#include "../internal.h"
#include "../module.h"

enum { SYM_RUNTIME, SYM_VERSION, SYM_CODE_TYPE, SYM_UNICODE_TYPE, SYM_EVAL, NSYMS };
static const char *const sym_names[NSYMS] = {
	"_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "_PyEval_EvalFrameDefault",
};

struct found {
	uint64_t addr[NSYMS], size[NSYMS];
};

/* The exported symbols CPython is recognised by, from .dynsym (module addresses). */
static int find_syms(struct dw_elf *e, struct found *f)
{
	const struct dw_section *sym, *str;
	unsigned got = 0;

	memset(f, 0, sizeof(*f));
	if (e->elf_class != ELFCLASS64 || dw_elf_section(e, DW_SEC_DYNSYM, &sym) || dw_elf_section(e, DW_SEC_DYNSTR, &str) ||
	    !sym->data || !str->data)
		return DWUNW_ERR_NOT_FOUND;
	for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sym->size; off += sizeof(Elf64_Sym)) {
		Elf64_Sym s;

		memcpy(&s, sym->data + off, sizeof(s));
		if (!s.st_value || s.st_shndx == SHN_UNDEF || s.st_name >= str->size)
			continue;
		const char *name = (const char *)str->data + s.st_name;
		size_t max = str->size - s.st_name;
		for (unsigned i = 0; i < NSYMS; i++) {
			if (!f->addr[i] && strnlen(name, max) < max && !strcmp(name, sym_names[i])) {
				f->addr[i] = s.st_value;
				f->size[i] = s.st_size;
				got++;
			}
		}
	}
	return got == NSYMS ? DWUNW_OK : f->addr[SYM_RUNTIME] ? DWUNW_ERR_UNSUPPORTED : DWUNW_ERR_NOT_FOUND;
}

/* PyCode_Type's member list names the co_* offsets; each the table relies on must be there and agree. */
static int check_members(struct dw_py_mem *m, const struct dw_py_layout *L, uint64_t members, char *why, size_t wl)
{
	static const char *const names[] = { "co_firstlineno", "co_filename", "co_name", "co_qualname", "co_linetable" };
	const uint16_t want[] = { L->co_firstlineno, L->co_filename, L->co_name, L->co_qualname, L->co_linetable };
	unsigned seen = 0;

	for (unsigned i = 0; i < 64; i++) {
		uint64_t def[5]; /* PyMemberDef: name, type (int), offset, flags (int), doc */
		char name[32];

		if (dw_py_read(m, members + i * 40, def, sizeof(def))) {
			snprintf(why, wl, "PyCode_Type's member list is unreadable");
			return DWUNW_ERR_IO;
		}
		if (!def[0])
			break;
		if (dw_py_read(m, def[0], name, sizeof(name)))
			continue;
		name[sizeof(name) - 1] = 0;
		for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			if (strcmp(name, names[k]))
				continue;
			if (def[2] != want[k]) {
				snprintf(why, wl, "PyCode_Type says %s is at %llu, the table says %u", name,
					 (unsigned long long)def[2], want[k]);
				return DWUNW_ERR_UNSUPPORTED;
			}
			seen |= 1u << k;
		}
	}
	if (seen != (1u << (sizeof(names) / sizeof(names[0]))) - 1) {
		snprintf(why, wl, "PyCode_Type's member list lacks co_* members the table uses");
		return DWUNW_ERR_UNSUPPORTED;
	}
	return DWUNW_OK;
}

/* The version's row, checked against the type objects of the running interpreter. */
static int check_layout(struct dw_py_mem *m, struct dwunw_py_runtime *rt)
{
	unsigned major = rt->version >> 24, minor = (rt->version >> 16) & 0xff;
	uint32_t index;
	const struct dw_py_layout *L = dw_py_layout_for(major, minor, &index);
	uint64_t code_size, code_members, str_size;

	if (!L) {
		snprintf(rt->why, sizeof(rt->why), "CPython %u.%u: no layout for it in this build", major, minor);
		return DWUNW_ERR_UNSUPPORTED;
	}
	uint64_t code_type = rt->code_type, str_type = rt->str_type;
	if (dw_py_read_u64(m, code_type + L->tp_basicsize, &code_size) ||
	    dw_py_read_u64(m, code_type + L->tp_members, &code_members) ||
	    dw_py_read_u64(m, str_type + L->tp_basicsize, &str_size)) {
		snprintf(rt->why, sizeof(rt->why), "its type objects are unreadable");
		return DWUNW_ERR_IO;
	}
	if (code_size != L->co_code) {
		snprintf(rt->why, sizeof(rt->why), "PyCode_Type's size is %llu, the table's %u.%u layout says %u",
			 (unsigned long long)code_size, major, minor, L->co_code);
		return DWUNW_ERR_UNSUPPORTED;
	}
	if (str_size != L->unicode_basicsize) {
		snprintf(rt->why, sizeof(rt->why), "PyUnicode_Type's size is %llu, the table's %u.%u layout says %u",
			 (unsigned long long)str_size, major, minor, L->unicode_basicsize);
		return DWUNW_ERR_UNSUPPORTED;
	}
	int err = check_members(m, L, code_members, rt->why, sizeof(rt->why));
	if (err)
		return err;
	rt->layout = index;
	return DWUNW_OK;
}

/* Worth looking at: the main executable (the first file mapping) or a file named like python. */
static int candidate(const struct dw_proc *p, uint32_t i, int first)
{
	const struct dw_map *mp = &p->maps[i];
	const char *base;

	if (mp->kind != DW_MAP_FILE || !mp->path || mp->offset != 0)
		return 0;
	for (uint32_t j = 0; j < i; j++) /* a file once */
		if (p->maps[j].path && p->maps[j].inode == mp->inode && !strcmp(p->maps[j].path, mp->path))
			return 0;
	base = strrchr(mp->path, '/');
	base = base ? base + 1 : mp->path;
	return first || strstr(base, "python") != NULL;
}

DWUNW_API int dwunw_py_find(struct dwunw_ctx *ctx, int32_t pid, struct dwunw_py_runtime *rt)
{
	struct dwunw_ctx_impl *c = dw_ctx(ctx);
	struct dw_py_mem m;
	int err, first = 1, result = DWUNW_ERR_NOT_FOUND;

	if (!c || !rt || rt->size < sizeof(*rt) || pid <= 0)
		return DWUNW_ERR_INVALID_ARG;
	memset(rt, 0, sizeof(*rt));
	rt->size = sizeof(*rt);
	rt->pid = pid;
	err = dw_py_mem_open(&m, c, pid);
	if (err)
		return err;
	for (uint32_t i = 0; i < m.proc->nmaps; i++) {
		struct dw_map *mp = &m.proc->maps[i];
		struct dwunw_module *mod;
		struct found f;

		if (!candidate(m.proc, i, first))
			continue;
		first = 0;
		if (dw_map_module(c, m.proc, mp, NULL, NULL, &mod))
			continue;
		/* a file looked at once: a shell or a compiler started a thousand times is not searched
		 * a thousand times (issue 29) */
		if (atomic_load_explicit(&mod->py_none, memory_order_relaxed)) {
			dw_module_put(mod);
			continue;
		}
		int ferr = find_syms(&mod->elf, &f);
		if (ferr == DWUNW_ERR_NOT_FOUND)
			atomic_store_explicit(&mod->py_none, 1, memory_order_relaxed);
		uint64_t bias = atomic_load_explicit(&mp->bias, memory_order_relaxed);
		uint32_t v = 0;
		if (ferr == DWUNW_OK && dw_elf_read_vaddr(&mod->elf, f.addr[SYM_VERSION], &v, 4))
			ferr = DWUNW_ERR_CORRUPT;
		dw_module_put(mod);
		if (ferr == DWUNW_ERR_NOT_FOUND)
			continue;
		snprintf(rt->path, sizeof(rt->path), "%s", mp->path);
		if (ferr) {
			/* _PyRuntime without the rest: no Py_Version before 3.11 */
			unsigned k = 0;
			while (k < NSYMS - 1 && f.addr[k])
				k++;
			snprintf(rt->why, sizeof(rt->why), "CPython without %s in .dynsym%s: not read", sym_names[k],
				 k == SYM_VERSION ? " (older than 3.11)" : "");
			result = DWUNW_ERR_UNSUPPORTED;
			break;
		}
		rt->version = v;
		rt->runtime_addr = f.addr[SYM_RUNTIME] + bias;
		rt->eval_lo = f.addr[SYM_EVAL] + bias;
		rt->eval_hi = rt->eval_lo + f.size[SYM_EVAL];
		rt->code_type = f.addr[SYM_CODE_TYPE] + bias;
		rt->str_type = f.addr[SYM_UNICODE_TYPE] + bias;
		result = check_layout(&m, rt);
		break;
	}
	dw_py_mem_close(&m);
	if (result == DWUNW_ERR_NOT_FOUND)
		snprintf(rt->why, sizeof(rt->why), "no CPython in the process");
	return result;
}
