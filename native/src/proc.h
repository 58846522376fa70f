/* SPDX-License-Identifier: GPL-2.0-only */
/* The memory map of a process: /proc/PID/maps parsed and cached per pid (or given offline), and
 * each file mapping's module and load bias, resolved on first use. */
#ifndef DWUNW_PROC_H
#define DWUNW_PROC_H

#include <stdatomic.h>
#include <stdint.h>
#include "module.h"

enum dw_map_kind {
	DW_MAP_FILE,
	DW_MAP_ANON,
	DW_MAP_VDSO,
	DW_MAP_UPROBES,       /* the kernel's uretprobe trampoline page */
	DW_MAP_SPECIAL,       /* [stack], [heap], [vvar], [vsyscall], ... */
};

#define DW_PROT_R 1
#define DW_PROT_W 2
#define DW_PROT_X 4

struct dw_map {
	uint64_t start, end;
	uint64_t offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint8_t prot;
	uint8_t kind;
	uint8_t deleted;      /* "(deleted)": the file is only reachable through map_files */
	uint8_t pad;
	const char *path;     /* in dw_proc.strings; NULL for anonymous memory */
	/* Resolved on first use: the module's load as one word, (generation << 32) | (slot + 1),
	 * 0 = none yet. One word, not a pointer and a generation stored one after the other: a
	 * reader between two such stores paired a slot with another slot's generation, and when
	 * the numbers happened to match it took that slot's module (another file) for this
	 * mapping: a wrong stack (test_nowait under TSan, 1 capture in ~80,000). */
	_Atomic uint64_t mod_load;
	_Atomic int32_t mod_err;  /* sticky: this mapping has no usable module */
	_Atomic uint64_t bias;    /* runtime address - module address (set before mod_load is published) */
};

struct dw_proc {
	int32_t pid;
	uint8_t offline;      /* maps given by dwunw_maps_set: never re-read from /proc */
	uint8_t dead;         /* replaced by a newer snapshot */
	uint8_t published;    /* has been the context's last_proc: freed only when no capture runs */
	uint8_t pinned;       /* live process, maps kept by the caller (dwunw_maps_pin): not re-read */
	uint8_t from_miss;    /* read again for a pc outside the previous maps (dw_proc_refresh) */
	_Atomic uint32_t refcnt;
	struct dw_map *maps;  /* sorted by start */
	uint32_t nmaps;
	_Atomic uint32_t hint; /* indexes of the last two maps dw_proc_find answered (16 bits each) */
	char *strings;
	struct dw_proc *next;
	uint64_t loaded_seq;
	/* Offline memory (core segments), sorted by addr; added before any capture uses the pid. */
	struct dw_mem_region {
		uint64_t addr, len;
		const uint8_t *data;
	} *mem;
	uint32_t nmem;
};

/* A hexadecimal number at *s (before end), *s moved past it: 0, or -1 when there is none or it
 * overflows 64 bits (maps lines, NT_FILE-less sidecars). In maps_parse.c. */
int dw_parse_hex(const char **s, const char *end, uint64_t *out);

/* Offline memory of p: DWUNW_OK with the bytes, or DWUNW_ERR_IO when no region covers them. */
int dw_proc_read_mem(const struct dw_proc *p, uint64_t addr, void *buf, size_t len);

/* The current maps of pid (read from /proc on first use); takes a reference. */
int dw_proc_get(struct dwunw_ctx_impl *c, int32_t pid, struct dw_proc **out);
/*
 * A capture's maps: when pid is the context's last process, no lock and no reference (*ref = 0);
 * the capture counts as a reader until dw_proc_leave, and a process it may see is freed only
 * once no reader is left. Else as dw_proc_get (*ref = 1).
 */
static inline int dw_proc_enter(struct dwunw_ctx_impl *c, int32_t pid, struct dw_proc **out, int *ref)
{
	struct dw_proc *p;

	/* seq_cst, as the readers check of proc_retire: a reader that loads p counted itself first */
	atomic_fetch_add(&c->readers, 1);
	p = atomic_load(&c->last_proc);
	if (p && p->pid == pid) {
		*ref = 0;
		*out = p;
		return DWUNW_OK;
	}
	*ref = 1;
	return dw_proc_get(c, pid, out);
}
/* The same without I/O or waiting: the pid's cached maps, else DWUNW_ERR_WOULDBLOCK. */
int dw_proc_enter_nowait(struct dwunw_ctx_impl *c, int32_t pid, struct dw_proc **out, int *ref);
void dw_proc_put(struct dwunw_ctx_impl *c, struct dw_proc *p);
/* (enter and leave inline: once per capture) */
static inline void dw_proc_leave(struct dwunw_ctx_impl *c, struct dw_proc *p, int ref)
{
	atomic_fetch_sub(&c->readers, 1);
	if (ref)
		dw_proc_put(c, p);
}
/* Re-read /proc/PID/maps (an unknown pc was seen): *p is replaced by the new snapshot, with a
 * reference; the caller still owns (and drops) any reference it had on the old one. */
int dw_proc_refresh(struct dwunw_ctx_impl *c, struct dw_proc **p);
void dw_procs_free(struct dwunw_ctx_impl *c);

/* The mapping containing addr, or NULL. */
const struct dw_map *dw_proc_find(const struct dw_proc *p, uint64_t addr);

/* The module of a file (or vDSO) mapping, with a reference taken; `read` reads process memory
 * (for the vDSO image). */
int dw_map_module(struct dwunw_ctx_impl *c, struct dw_proc *p, struct dw_map *m,
		  int (*read)(void *arg, uint64_t addr, void *buf, size_t len), void *arg,
		  struct dwunw_module **out);
/* The same without I/O or lock: the module this mapping already found (a reference taken), the
 * error its load already gave, or DWUNW_ERR_WOULDBLOCK when it was not loaded yet. */
int dw_map_module_cached(struct dwunw_ctx_impl *c, struct dw_map *m, struct dwunw_module **out);

#endif
