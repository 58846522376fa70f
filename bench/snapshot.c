// SPDX-License-Identifier: GPL-2.0-only
/*
 * Reference snapshots: registers + a copy of the stack from sp to the top of the stack mapping,
 * taken in this process at known depths (and dwunw-snapshot-1 files written by other tools).
 *
 *  callbacks  ~30 frames: a chain of frames of different shapes through glibc's qsort, bsearch
 *             and dl_iterate_phdr callbacks
 *  deep       ~200 frames: mutual recursion of four frame shapes
 *  signal     inside a SIGUSR1 handler (on the normal stack): the chain goes through
 *             __restore_rt and on to the interrupted raise() and its callers
 *
 * This file is compiled with -O2 -fomit-frame-pointer: rbp is a general register, so only CFI
 * can unwind these frames.
 */
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench.h"
#include "test/unit/testutil.h"

/* ---- the stack copy ------------------------------------------------------------------------ */

static uint64_t stack_top;            /* end of the mapping holding the main thread's stack */
static uint8_t *stack_buf;            /* preallocated: the signal handler must not allocate */
static size_t stack_buf_size;

static int stack_prepare(char *err, size_t errlen)
{
	size_t len;
	char *maps, *p;
	uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);

	if (stack_top)
		return 0;
	maps = read_file("/proc/self/maps", &len);
	if (!maps) {
		snprintf(err, errlen, "/proc/self/maps: %s", strerror(errno));
		return -1;
	}
	for (p = maps; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long long lo, hi;
		if (sscanf(p, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
			stack_top = hi;
			break;
		}
	}
	free(maps);
	if (!stack_top) {
		snprintf(err, errlen, "no mapping holds the stack pointer");
		return -1;
	}
	/* what is used now, plus room for the deepest chain */
	stack_buf_size = (size_t)(stack_top - sp) + (1u << 20);
	stack_buf = malloc(stack_buf_size);
	if (!stack_buf) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static struct bsnap *target;          /* where snap_here writes */
static int snap_status = -1;

#ifdef __x86_64__
/* Registers at one instruction of this function, then the stack from sp to stack_top (raw
 * bytes: under memcheck, reading valgrind's own signal frame here is reported, and harmless). */
CHAIN static int snap_here(void)
{
	static uint64_t r[8];
	struct bsnap *s = target;
	size_t n;

	CAPTURE_REGS(r);
	n = (size_t)(stack_top - r[1]);
	if (n > stack_buf_size)
		return -1;
	memcpy(stack_buf, (const void *)(uintptr_t)r[1], n);
	capture_to_regs(&s->regs, r);
	s->regs.stack_start = r[1];
	s->regs.stack_size = n;
	return 0;
}
#else
CHAIN static int snap_here(void)
{
	return -1;
}
#endif

/* After the chain returned: keep a private copy of the stack bytes. */
static int snap_finish(struct bsnap *s, const char *name, char *err, size_t errlen)
{
	if (snap_status) {
		snprintf(err, errlen, "%s: snapshot not taken", name);
		return -1;
	}
	s->stack = malloc(s->regs.stack_size);
	if (!s->stack) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(s->stack, stack_buf, s->regs.stack_size);
	s->regs.stack = s->stack;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->source, sizeof(s->source), "self");
	s->arch_name = "x86_64";
	s->arch = DWUNW_ARCH_X86_64;
	s->addr_size = 8;
	s->pid = BENCH_SELF_PID;
	s->regs.pid = s->regs.tid = s->pid;
	return 0;
}

/* ---- callbacks: ~30 frames through qsort, bsearch and dl_iterate_phdr -------------------- */

CHAIN static int at_bottom(int x)
{
	(void)x;
	snap_status = snap_here();
	return 0;
}

CALLBACKS_CHAIN(at_bottom)

int snap_take_callbacks(struct bsnap *s, char *err, size_t errlen)
{
	if (stack_prepare(err, errlen))
		return -1;
	memset(s, 0, sizeof(*s));
	target = s;
	snap_status = -1;
	chain_sink = callbacks_chain() & 0;
	return snap_finish(s, "callbacks", err, errlen);
}

/* ---- deep: ~200 frames of recursion -------------------------------------------------------- */

static int deep_left;

CHAIN static int r_plain(int x);
CHAIN static int r_saved(int x);
CHAIN static int r_alloca(int x);
CHAIN static int r_array(int x);

CHAIN static int r_next(int x)
{
	if (--deep_left <= 0) {
		snap_status = snap_here();
		return 0;
	}
	switch (x & 3) {
	case 0: return r_plain(x + 1) + 1;
	case 1: return r_saved(x + 1) + 2;
	case 2: return r_alloca(x + 1) + 3;
	default: return r_array(x + 1) + 4;
	}
}

PLAIN(r_plain, r_next)
SAVED(r_saved, r_next)
ALLOCA(r_alloca, r_next)
ARRAY(r_array, r_next)

int snap_take_deep(struct bsnap *s, char *err, size_t errlen)
{
	if (stack_prepare(err, errlen))
		return -1;
	memset(s, 0, sizeof(*s));
	target = s;
	snap_status = -1;
	deep_left = 97; /* r_next + one shape per level: ~2 frames per level */
	chain_sink = r_next(0) & 0;
	return snap_finish(s, "deep", err, errlen);
}

/* ---- signal: inside a handler, through __restore_rt ----------------------------------------- */

PLAIN(h2, at_bottom)
ARRAY(h1, h2)

static void on_usr1(int sig)
{
	chain_sink = h1(sig) & 0;
}

CHAIN static int raise_it(int x)
{
	int r = raise(SIGUSR1);
	BARRIER();
	return r + x;
}

SAVED(s3, raise_it)
ALLOCA(s2, s3)
PLAIN(s1, s2)

int snap_take_signal(struct bsnap *s, char *err, size_t errlen)
{
	struct sigaction sa, old;

	if (stack_prepare(err, errlen))
		return -1;
	memset(s, 0, sizeof(*s));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, &old)) {
		snprintf(err, errlen, "sigaction: %s", strerror(errno));
		return -1;
	}
	target = s;
	snap_status = -1;
	chain_sink = s1(0) & 0;
	sigaction(SIGUSR1, &old, NULL);
	return snap_finish(s, "signal", err, errlen);
}

/* ---- the maps of the self snapshots ---------------------------------------------------------- */

int snap_set_self_maps(struct bsnap *snaps, size_t n, char *err, size_t errlen)
{
	size_t len;
	char *maps = read_file("/proc/self/maps", &len);

	if (!maps) {
		snprintf(err, errlen, "/proc/self/maps: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct bsnap *s = &snaps[i];
		s->maps = malloc(len + 1);
		if (!s->maps) {
			free(maps);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(s->maps, maps, len + 1);
		s->maps_len = len;
		if (bspace_init(&s->space, s->maps, s->maps_len, NULL, err, errlen)) {
			free(maps);
			return -1;
		}
		s->space.stack = s->stack;
		s->space.stack_lo = s->regs.stack_start;
		s->space.stack_len = s->regs.stack_size;
		s->space.addr_size = s->addr_size;
	}
	free(maps);
	return 0;
}

/* ---- snapshot files ------------------------------------------------------------------------- */

static int hexval(const struct jval *v, uint64_t *out)
{
	char *e;
	if (!v || v->t != J_STR || strncmp(v->str, "0x", 2) || v->len < 3 || v->len > 18)
		return -1;
	errno = 0;
	*out = strtoull(v->str + 2, &e, 16);
	return *e || errno ? -1 : 0;
}

int snap_load_file(struct bsnap *s, const char *path, int32_t tid, int32_t fake_pid, char *err, size_t errlen)
{
	size_t len, nstack = 0;
	char *text, jerr[160];
	struct jval *doc;
	const struct jval *v, *th = NULL, *regs;
	uint64_t x;
	const char *base;
	int ret = -1;

	memset(s, 0, sizeof(*s));
	text = read_file(path, &len);
	if (!text) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	doc = json_parse(text, len, jerr, sizeof(jerr));
	free(text);
	if (!doc) {
		snprintf(err, errlen, "%s: not JSON: %s", path, jerr);
		return -1;
	}
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); goto out; } while (0)
	v = json_get(doc, "format");
	if (!v || v->t != J_STR || strcmp(v->str, "dwunw-snapshot-1"))
		BAD("%s: not a dwunw-snapshot-1 file", path);
	v = json_get(doc, "arch");
	if (!v || v->t != J_STR)
		BAD("%s: arch: not a string", path);
	if (!strcmp(v->str, "x86_64")) {
		s->arch_name = "x86_64";
		s->arch = DWUNW_ARCH_X86_64;
		s->addr_size = 8;
	} else if (!strcmp(v->str, "arm64")) {
		s->arch_name = "arm64";
		s->arch = DWUNW_ARCH_ARM64;
		s->addr_size = 8;
	} else if (!strcmp(v->str, "mips32")) {
		s->arch_name = "mips32";
		s->arch = DWUNW_ARCH_MIPS32;
		s->addr_size = 4;
	} else {
		BAD("%s: unknown arch %s", path, v->str);
	}
	v = json_get(doc, "maps");
	if (!v || v->t != J_STR)
		BAD("%s: maps: not a string", path);
	s->maps = strdup(v->str);
	s->maps_len = v->len;
	v = json_get(doc, "sysroot");
	if (v && v->t == J_STR && v->len)
		s->sysroot = strdup(v->str);
	v = json_get(doc, "vdso");
	if (v && v->t == J_STR && v->len && !(s->vdso = base64_decode(v->str, v->len, &s->vdso_len)))
		BAD("%s: vdso: not base64", path);
	v = json_get(doc, "memory");
	if (v && v->t == J_ARR && v->n) {
		s->memory = calloc(v->n, sizeof(*s->memory));
		if (!s->memory)
			BAD("out of memory");
		for (size_t i = 0; i < v->n; i++) {
			const struct jval *b = json_get(&v->items[i], "bytes");
			struct bregion *r = &s->memory[s->nmemory];
			size_t n;
			if (hexval(json_get(&v->items[i], "start"), &x) || !b || b->t != J_STR)
				BAD("%s: memory[%zu]: needs start (hex) and bytes (base64)", path, i);
			if (!(r->data = base64_decode(b->str, b->len, &n)))
				BAD("%s: memory[%zu].bytes: not base64", path, i);
			r->start = x;
			r->len = n;
			s->nmemory++;
		}
	}
	v = json_get(doc, "threads");
	if (!v || v->t != J_ARR || !v->n)
		BAD("%s: threads: no thread", path);
	for (size_t i = 0; i < v->n; i++) {
		const struct jval *t = json_get(&v->items[i], "tid");
		if (tid <= 0 || (t && t->t == J_NUM && (int32_t)t->num == tid)) {
			th = &v->items[i];
			break;
		}
	}
	if (!th)
		BAD("%s: no thread %d", path, tid);
	if (hexval(json_get(th, "pc"), &x))
		BAD("%s: pc: not a hex string", path);
	s->regs.pc = x;
	regs = json_get(th, "regs");
	if (!regs || regs->t != J_OBJ)
		BAD("%s: regs: not an object", path);
	for (size_t i = 0; i < regs->n; i++) {
		char *e;
		unsigned long r = strtoul(regs->keys[i], &e, 10);
		if (*e || r >= DWUNW_MAX_REGS || hexval(&regs->items[i], &x))
			BAD("%s: regs[\"%s\"]: bad register", path, regs->keys[i]);
		s->regs.regs[r] = x;
		s->regs.valid |= 1ull << r;
	}
	v = json_get(th, "stack");
	if (v && v->t == J_STR && v->len) {
		if (hexval(json_get(th, "stack_start"), &x))
			BAD("%s: stack_start: not a hex string", path);
		s->stack = base64_decode(v->str, v->len, &nstack);
		if (!s->stack)
			BAD("%s: stack: not base64", path);
		s->regs.stack = s->stack;
		s->regs.stack_start = x;
		s->regs.stack_size = nstack;
	}
	s->regs.arch = s->arch;
	s->pid = fake_pid;
	s->regs.pid = s->regs.tid = fake_pid;
	/* the name: ARCH/BASENAME without .snapshot.json and without an ARCH- prefix */
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (!strncmp(base, s->arch_name, strlen(s->arch_name)) && base[strlen(s->arch_name)] == '-' &&
	    base[strlen(s->arch_name) + 1])
		base += strlen(s->arch_name) + 1;
	snprintf(s->name, sizeof(s->name), "%s/%.*s", s->arch_name,
		 (int)(strstr(base, ".snapshot.json") ? (size_t)(strstr(base, ".snapshot.json") - base) : strlen(base)), base);
	if (tid > 0)
		snprintf(s->source, sizeof(s->source), "%.4000s@%d", path, tid);
	else
		snprintf(s->source, sizeof(s->source), "%s", path);
	if (bspace_init(&s->space, s->maps, s->maps_len, s->sysroot, err, errlen))
		goto out;
	s->space.stack = s->stack;
	s->space.stack_lo = s->regs.stack_start;
	s->space.stack_len = s->regs.stack_size;
	s->space.addr_size = s->addr_size;
	s->space.regions = s->memory;
	s->space.nregions = s->nmemory;
	if (s->vdso && bspace_add_vdso(&s->space, s->vdso, s->vdso_len))
		BAD("%s: vdso: the maps have no [vdso] line", path);
	ret = 0;
#undef BAD
out:
	json_free(doc);
	return ret;
}

void snap_free(struct bsnap *s)
{
	bspace_free(&s->space);
	for (size_t i = 0; i < s->nmemory; i++)
		free((void *)s->memory[i].data);
	free(s->memory);
	free(s->vdso);
	free(s->stack);
	free(s->maps);
	free(s->sysroot);
	memset(s, 0, sizeof(*s));
}
