/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dwunw-bench: libdwunw against libunwind and libdwfl on the same register + stack snapshots,
 * in one process, through one memory reader. See doc/bench.md.
 */
#ifndef DWUNW_BENCH_H
#define DWUNW_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "dwunw.h"

#define BENCH_MAXF 512          /* frames kept per unwind */
#define BENCH_SELF_PID 999001   /* fake pid of the self snapshots (above any pid_max) */

/* ---- memory reader: the snapshot's stack, then read-only file mappings ------------------- */

/* A file, mapped read-only once for the whole run. */
struct bfile {
	char path[4200];
	const uint8_t *data;
	size_t size;
};

/* A module: the file mappings of one path in the snapshot's maps. */
struct bmod {
	char path[4096];            /* as in the maps */
	struct bfile *file;         /* sysroot applied; NULL when the file cannot be read */
	uint64_t bias;              /* load bias (runtime address - ELF vaddr) */
	uint64_t lo, hi;            /* runtime range of its mappings */
	uint64_t text_lo, text_hi;  /* runtime range of its executable mappings */
	unsigned elf_class, machine, elf_type;
	uint64_t eh_hdr_vaddr;      /* PT_GNU_EH_FRAME, 0 when none */
	uint64_t eh_hdr_size;
};

/* A read-only file mapping: [start, end) holds file bytes from `off`. */
struct bseg {
	uint64_t start, end, off;
	int mod;
};

/* Memory given by the snapshot file besides the stack ("memory": anonymous code pages). */
struct bregion {
	uint64_t start, len;
	const uint8_t *data;
};

struct bspace {
	struct bregion *regions;
	size_t nregions;
	uint64_t vdso_lo, vdso_hi;  /* the [vdso] line of the maps, if any */
	struct bmod *mods;
	size_t nmods;
	struct bseg *segs;          /* sorted by start */
	size_t nsegs;
	size_t last;                /* index of the last segment hit */
	const uint8_t *stack;
	uint64_t stack_lo, stack_len;
	unsigned addr_size;
	uint64_t reads, file_reads; /* statistics */
};

int bspace_init(struct bspace *s, const char *maps, size_t len, const char *sysroot, char *err, size_t errlen);
void bspace_free(struct bspace *s);
/* The snapshot's [vdso] image as the module of the maps' [vdso] range: 0 or -1. */
int bspace_add_vdso(struct bspace *s, const uint8_t *image, size_t len);
/* 0, or -1 when [addr, addr+len) is neither in the stack, nor in a region, nor in a file mapping. */
int bspace_read(struct bspace *s, uint64_t addr, void *buf, size_t len);
/* The module mapped at addr, or -1. */
int bspace_module_at(struct bspace *s, uint64_t addr);

/* ---- snapshots ---------------------------------------------------------------------------- */

struct bsnap {
	char name[128];
	char source[4096];          /* "self" or the snapshot file */
	const char *arch_name;      /* "x86_64", "arm64", "mips32" */
	uint32_t arch;              /* enum dwunw_arch */
	unsigned addr_size;
	int32_t pid;                /* the pid its maps are set for in dwunw */
	struct dwunw_regs regs;     /* pid/tid = pid; stack points into `stack` */
	uint8_t *stack;
	char *maps;
	size_t maps_len;
	char *sysroot;              /* NULL = "/" */
	uint8_t *vdso;              /* the [vdso] image, or NULL */
	size_t vdso_len;
	struct bregion *memory;     /* "memory" of the file (bytes owned here) */
	size_t nmemory;
	struct bspace space;
};

/* The x86_64 snapshots of this process: 0 or -1 (message in err). */
int snap_take_callbacks(struct bsnap *s, char *err, size_t errlen);
int snap_take_deep(struct bsnap *s, char *err, size_t errlen);
int snap_take_signal(struct bsnap *s, char *err, size_t errlen);
/* After every self snapshot is taken: the maps of this process for all of them. */
int snap_set_self_maps(struct bsnap *snaps, size_t n, char *err, size_t errlen);
/* A dwunw-snapshot-1 file (first thread, or thread `tid` when > 0). */
int snap_load_file(struct bsnap *s, const char *path, int32_t tid, int32_t fake_pid, char *err, size_t errlen);
void snap_free(struct bsnap *s);
/* --dump: DIR/N.txt + DIR/N.stack per snapshot (dump.c): 0 or -1. */
int snap_dump(const struct bsnap *snaps, size_t n, const char *dir, char *err, size_t errlen);

/* ---- peers -------------------------------------------------------------------------------- */

/* One unwind's result: pcs, and the reason the walk stopped ("OK" or the unwinder's message). */
struct bresult {
	uint64_t pcs[BENCH_MAXF];
	size_t n;
	char stop[160];
	int ok;                     /* reached the end of the stack without an error */
	int unsupported;            /* the unwinder says it cannot unwind this architecture */
};

struct peer;                    /* an unwinder bound to one snapshot */

struct peer_ops {
	const char *name;
	/* Bind to a snapshot (warm state kept): 0, 1 when not applicable (why in reason), -1 error. */
	int (*open)(struct peer **out, struct bsnap *s, char *reason, size_t len);
	int (*unwind)(struct peer *p, struct bresult *r);
	void (*close)(struct peer *p);
};

extern const struct peer_ops peer_libunwind;
extern const struct peer_ops peer_libdwfl;

/* ---- small helpers ----------------------------------------------------------------------- */

uint64_t now_ns(void);
char *read_file(const char *path, size_t *len);

/* JSON (read): enough for dwunw-snapshot-1 files. */
enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
struct jval {
	enum jtype t;
	double num;
	int b;
	char *str;                  /* J_STR: NUL-terminated (len excludes it) */
	size_t len;
	struct jval *items;         /* J_ARR values, J_OBJ values */
	char **keys;                /* J_OBJ keys */
	size_t n;
};
struct jval *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(struct jval *v);
const struct jval *json_get(const struct jval *obj, const char *key);
/* base64 -> bytes (malloc'd); NULL on bad input. */
uint8_t *base64_decode(const char *s, size_t len, size_t *out_len);

/* JSON (write) */
void json_str(FILE *f, const char *s);

#endif
