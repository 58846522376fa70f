// SPDX-License-Identifier: GPL-2.0-only
/*
 * libunwind's remote API on a snapshot, as a profiler uses it: one address space per target with
 * UNW_CACHE_GLOBAL, our accessors (registers from the snapshot, memory through the bench's
 * reader), and find_proc_info pointing libunwind's own binary search at each module's
 * .eh_frame_hdr (UNW_INFO_FORMAT_REMOTE_TABLE). The Debian build only unwinds x86_64 here.
 */
#include <stdlib.h>
#include <string.h>
#include <libunwind.h>
#include "bench.h"

#ifdef __x86_64__

/* Exported by libunwind-x86_64 but not declared in its headers. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
					      unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* Per module: where its .eh_frame_hdr search table is, found on first use. */
struct lu_mod {
	int state;                  /* 0 not looked at, 1 usable, -1 no table */
	unw_dyn_info_t di;
};

struct peer {
	struct bsnap *s;
	unw_addr_space_t as;
	struct lu_mod *mods;
};

static int ptr_size(unsigned enc)
{
	switch (enc & 0x0f) {
	case 0x02: case 0x0a: return 2;  /* udata2, sdata2 */
	case 0x03: case 0x0b: return 4;  /* udata4, sdata4 */
	case 0x04: case 0x0c: return 8;  /* udata8, sdata8 */
	case 0x00: return 8;             /* absptr */
	default: return -1;
	}
}

/* The search table of module i: header fields read from the mapped file, through the reader. */
static int module_table(struct peer *p, int i)
{
	struct bmod *m = &p->s->space.mods[i];
	struct lu_mod *lm = &p->mods[i];
	uint8_t hdr[4];
	uint64_t base, fde_count = 0;
	int a, b;

	if (lm->state)
		return lm->state;
	lm->state = -1;
	if (!m->eh_hdr_vaddr)
		return -1;
	base = m->bias + m->eh_hdr_vaddr;
	if (bspace_read(&p->s->space, base, hdr, 4) || hdr[0] != 1)
		return -1;
	/* The table must be datarel sdata4 pairs: what libunwind's search reads. */
	a = ptr_size(hdr[1]);
	b = ptr_size(hdr[2]);
	if (a < 0 || b < 0 || hdr[3] != 0x3b || hdr[2] == 0xff)
		return -1;
	if (bspace_read(&p->s->space, base + 4 + (uint64_t)a, &fde_count, (size_t)b))
		return -1;
	memset(&lm->di, 0, sizeof(lm->di));
	lm->di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	lm->di.start_ip = m->text_lo;
	lm->di.end_ip = m->text_hi;
	lm->di.u.rti.segbase = base;
	lm->di.u.rti.table_data = base + 4 + (uint64_t)a + (uint64_t)b;
	lm->di.u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
	lm->state = 1;
	return 1;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct peer *p = arg;
	int i = bspace_module_at(&p->s->space, ip);

	if (i < 0 || module_table(p, i) != 1)
		return -UNW_ENOINFO;
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &p->mods[i].di, pi, need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as;
	(void)pi;
	(void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as;
	(void)addr;
	(void)arg;
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct peer *p = arg;
	(void)as;
	if (write)
		return -UNW_EINVAL;
	return bspace_read(&p->s->space, addr, val, sizeof(*val)) ? -UNW_EINVAL : 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	struct peer *p = arg;
	const struct dwunw_regs *r = &p->s->regs;
	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (reg == UNW_X86_64_RIP) {
		*val = r->pc;
		return 0;
	}
	/* libunwind's x86_64 numbers are the DWARF numbers for rax..r15 */
	if (reg >= 0 && reg < 16 && (r->valid >> reg) & 1) {
		*val = r->regs[reg];
		return 0;
	}
	return -UNW_EBADREG;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg)
{
	(void)as;
	(void)addr;
	(void)buf;
	(void)len;
	(void)off;
	(void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

static int lu_open(struct peer **out, struct bsnap *s, char *reason, size_t len)
{
	struct peer *p;

	*out = NULL;
	if (s->arch != DWUNW_ARCH_X86_64) {
		snprintf(reason, len, "this libunwind build unwinds x86_64 only");
		return 1;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->mods = calloc(s->space.nmods ? s->space.nmods : 1, sizeof(*p->mods)))) {
		free(p);
		snprintf(reason, len, "out of memory");
		return -1;
	}
	p->s = s;
	p->as = unw_create_addr_space(&accessors, 0);
	if (!p->as) {
		free(p->mods);
		free(p);
		snprintf(reason, len, "unw_create_addr_space failed");
		return -1;
	}
	unw_set_caching_policy(p->as, UNW_CACHE_GLOBAL);
	*out = p;
	return 0;
}

static int lu_unwind(struct peer *p, struct bresult *r)
{
	unw_cursor_t c;
	int ret;

	r->n = 0;
	r->ok = 0;
	ret = unw_init_remote(&c, p->as, p);
	if (ret < 0) {
		snprintf(r->stop, sizeof(r->stop), "unw_init_remote: %s", unw_strerror(ret));
		return -1;
	}
	for (;;) {
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0) {
			snprintf(r->stop, sizeof(r->stop), "unw_get_reg(IP) failed");
			return -1;
		}
		r->pcs[r->n++] = ip;
		if (r->n == BENCH_MAXF) {
			snprintf(r->stop, sizeof(r->stop), "more than %d frames", BENCH_MAXF);
			return -1;
		}
		ret = unw_step(&c);
		if (ret == 0) {
			snprintf(r->stop, sizeof(r->stop), "OK");
			r->ok = 1;
			return 0;
		}
		if (ret < 0) {
			snprintf(r->stop, sizeof(r->stop), "unw_step: %s", unw_strerror(ret));
			return -1;
		}
	}
}

static void lu_close(struct peer *p)
{
	if (!p)
		return;
	unw_destroy_addr_space(p->as);
	free(p->mods);
	free(p);
}

#else /* not x86_64 */

static int lu_open(struct peer **out, struct bsnap *s, char *reason, size_t len)
{
	(void)s;
	*out = NULL;
	snprintf(reason, len, "the bench uses libunwind's x86_64 remote API only");
	return 1;
}
static int lu_unwind(struct peer *p, struct bresult *r)
{
	(void)p;
	(void)r;
	return -1;
}
static void lu_close(struct peer *p)
{
	(void)p;
}
#endif

const struct peer_ops peer_libunwind = { "libunwind", lu_open, lu_unwind, lu_close };
