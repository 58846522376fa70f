// SPDX-License-Identifier: GPL-2.0-only
/*
 * dwunw_capture against independent oracles:
 *  - glibc backtrace() (libgcc's unwinder) for a snapshot of this process taken deep inside a
 *    call chain through qsort, bsearch and dl_iterate_phdr callbacks, live and offline;
 *  - gdb for children of this binary frozen in known places: blocked in read(), inside a signal
 *    handler (on the normal stack and on a sigaltstack), stopped by a breakpoint at a function's
 *    first instruction;
 * plus truncated snapshots, vanished processes, argument errors, max_frames, and a timing of
 * warm captures (a TAP comment, not an assertion).
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include "tap.h"
#include "dwunw.h"
#include "testutil.h"


#define X_RSP CAPTURE_RSP
#define MAXF 128
#define FAKE_PID 999999 /* above any pid_max: never a live process */

/* ---- children --------------------------------------------------------------------------- */

static pid_t kids[32];

static void kid_add(pid_t p)
{
	for (unsigned i = 0; i < 32; i++)
		if (!kids[i]) {
			kids[i] = p;
			return;
		}
}

static void kill_kids(void)
{
	for (unsigned i = 0; i < 32; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, __WALL);
			kids[i] = 0;
		}
}

/* At a timeout: no child left (kill only: async-signal-safe). */
static void kill_kids_now(void)
{
	for (unsigned i = 0; i < 32; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
}

/* Kill and collect a child (also one already gone). */
static void kid_end(pid_t p)
{
	if (p <= 0)
		return;
	kill(p, SIGKILL);
	while (waitpid(p, NULL, __WALL) < 0 && errno == EINTR)
		;
	for (unsigned i = 0; i < 32; i++)
		if (kids[i] == p)
			kids[i] = 0;
}

static char task_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static char wait_state(pid_t pid, const char *states, unsigned ms)
{
	char s = '?';
	for (unsigned i = 0; i <= ms; i++) {
		s = task_state(pid);
		if (strchr(states, s))
			return s;
		sleep_ms(1);
	}
	return s;
}


/* ---- frames ------------------------------------------------------------------------------ */

static const char *sym_of(struct dwunw_ctx *ctx, const struct dwunw_frame *f, char *buf, size_t len)
{
	struct dwunw_symbol s;
	if (dwunw_symbolize_frame(ctx, f, &s) || !s.name[0])
		snprintf(buf, len, "??");
	else
		snprintf(buf, len, "%s+0x%llx", s.name, (unsigned long long)s.offset);
	return buf;
}

/* The symbol name of a frame (exact lookup at its pc when exact is set), or "". */
static const char *name_of(struct dwunw_ctx *ctx, const struct dwunw_frame *f, int exact, char *buf, size_t len)
{
	struct dwunw_symbol s;
	int err = exact ? dwunw_symbolize(ctx, f->module, f->module_addr, &s) : dwunw_symbolize_frame(ctx, f, &s);
	snprintf(buf, len, "%s", err ? "" : s.name);
	return buf;
}

static void print_frames(struct dwunw_ctx *ctx, const struct dwunw_frame *f, size_t n, const uint64_t *other, size_t nother, const char *other_name)
{
	char b[300];
	for (size_t i = 0; i < n || i < nother; i++) {
		if (i < n)
			printf("  # #%-2zu 0x%012llx sp 0x%llx how %u flags 0x%x %s", i, (unsigned long long)f[i].pc,
			       (unsigned long long)f[i].sp, f[i].how, f[i].flags, sym_of(ctx, &f[i], b, sizeof(b)));
		else
			printf("  # #%-2zu -", i);
		if (other && i < nother)
			printf("   %s 0x%012llx%s", other_name, (unsigned long long)other[i],
			       i < n && other[i] == f[i].pc ? "" : "  <-- differs");
		printf("\n");
	}
}

/* Frames equal in every field a capture computes (module compared by path). */
/* Module paths of self_frames, copied while their context lived (its modules are gone since). */
static char self_paths[128][256];
static const struct dwunw_frame *self_frames_p;

static int same_frames(const struct dwunw_frame *a, size_t na, const struct dwunw_frame *b, size_t nb, uint32_t flag_mask)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++) {
		const char *pa = a[i].module ? dwunw_module_path(a[i].module) : NULL;
		const char *pb = !b[i].module ? NULL : b == self_frames_p ? self_paths[i] : dwunw_module_path(b[i].module);
		if (a[i].pc != b[i].pc || a[i].sp != b[i].sp || a[i].cfa != b[i].cfa ||
		    a[i].module_addr != b[i].module_addr || a[i].how != b[i].how ||
		    (a[i].flags & flag_mask) != (b[i].flags & flag_mask) || !pa != !pb || (pa && strcmp(pa, pb)))
			return 0;
	}
	return 1;
}

static int pcs_equal(const struct dwunw_frame *f, size_t n, const uint64_t *pcs, size_t npcs)
{
	if (n != npcs)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (f[i].pc != pcs[i])
			return 0;
	return 1;
}

static int init_ctx(struct dwunw_ctx *ctx, uint32_t flags, uint32_t max_frames)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .flags = flags | DWUNW_CFG_NO_DEBUG_FILES, .max_frames = max_frames };
	return dwunw_init(ctx, &cfg);
}

/* ---- gdb as the oracle for children ------------------------------------------------------- */

static char gdb_script[64];
static int have_gdb = -1;

static int gdb_ready(void)
{
	if (have_gdb < 0) {
		int fd;
		static const char py[] =
			"import gdb\n"
			"f = gdb.newest_frame()\n"
			"while f is not None:\n"
			"    if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):\n"
			"        print(\"PC 0x%x %d\" % (f.pc(), 1 if f.type() == gdb.SIGTRAMP_FRAME else 0))\n"
			"    f = f.older()\n";
		have_gdb = system("gdb -nx -q -batch -ex 'python print(1)' >/dev/null 2>&1") == 0;
		snprintf(gdb_script, sizeof(gdb_script), "/tmp/dwunw-gdb-XXXXXX.py");
		fd = mkstemps(gdb_script, 3);
		if (fd < 0 || write(fd, py, sizeof(py) - 1) != (ssize_t)(sizeof(py) - 1))
			have_gdb = 0;
		if (fd >= 0)
			close(fd);
	}
	return have_gdb;
}

static void gdb_cleanup(void)
{
	if (gdb_script[0])
		unlink(gdb_script);
}

/*
 * The pcs of the frames of pid's main thread as gdb sees them: the count, or -1. gdb's virtual
 * frames (inlined calls, tail calls it reconstructs from debug information) are left out: they
 * have no frame on the stack. *sigtramp: index of gdb's signal trampoline frame, or -1.
 */
static int gdb_pcs(pid_t pid, uint64_t *pcs, int max, int *sigtramp)
{
	char cmd[512], line[512];
	FILE *p;
	int n = 0;

	if (!gdb_ready())
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "timeout -k 5 60 gdb -nx -q -batch -iex 'set debuginfod enabled off' -p %d "
		 "-ex 'set backtrace past-main on' -ex 'set backtrace past-entry on' -x %s 2>/dev/null",
		 pid, gdb_script);
	fflush(stdout);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	*sigtramp = -1;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v;
		int tramp = 0;
		if (sscanf(line, "PC 0x%llx %d", &v, &tramp) >= 1 && n < max) {
			if (tramp && *sigtramp < 0)
				*sigtramp = n;
			pcs[n++] = v;
		}
	}
	if (pclose(p) != 0 && n == 0)
		return -1;
	return n;
}

/* ---- the self snapshot: a chain through qsort, bsearch and dl_iterate_phdr ----------------- */

struct snap {
	struct dwunw_regs regs;
	uint8_t *stack;
	void *bt[MAXF];
	int nbt;
	char *maps;
	size_t maps_len;
};

static struct snap self;

/* Registers of this function at one instruction, then the stack from rsp to the end of its
 * mapping, then the oracle: backtrace() from the same function. */
__attribute__((no_sanitize_address)) CHAIN static int take_snapshot(struct snap *s)
{
	static uint64_t r[8];

	CAPTURE_REGS(r);
	capture_to_regs(&s->regs, r);
	s->regs.pid = getpid();
	s->regs.tid = s->regs.pid;
	if (self_stack_copy(&s->regs, &s->stack))
		return -1;
	s->nbt = backtrace(s->bt, MAXF);
	{
		/* An interceptor of backtrace() (ASan's, in libasan.so) is frame 0 before its caller:
		 * leading frames outside this function's object go, so frame 0 is the call site here. */
		Dl_info me, at;
		int k = 0;

		if (dladdr((void *)(uintptr_t)take_snapshot, &me))
			while (k < s->nbt && dladdr(s->bt[k], &at) && at.dli_fbase != me.dli_fbase)
				k++;
		if (k > 0 && k < s->nbt) {
			memmove(s->bt, s->bt + k, (size_t)(s->nbt - k) * sizeof(s->bt[0]));
			s->nbt -= k;
		}
	}
	s->maps = read_text("/proc/self/maps", &s->maps_len);
	return 0;
}

static int snap_err = -1;

CHAIN static int snap_entry(int x)
{
	(void)x;
	snap_err = take_snapshot(&self);
	return 0;
}

CALLBACKS_CHAIN(snap_entry)

CHAIN static int make_self_snapshot(void)
{
	int r;
	snap_err = -1;
	r = callbacks_chain();
	BARRIER();
	return r + snap_err;
}

/* ---- (a) (b) self and offline ----------------------------------------------------------- */

static struct dwunw_frame self_frames[MAXF];
static size_t self_nf;

static void test_self(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	size_t nf = MAXF;
	char b1[300], b2[300];
	int err, match = 1, names = 0;
	uint64_t bt[MAXF];

	if (!ok(self.stack && self.nbt > 5, "self: snapshot taken (%llu bytes of stack, backtrace %d frames)",
		(unsigned long long)self.regs.stack_size, self.nbt))
		return;
	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "self: init"))
		return;
	err = dwunw_capture(&ctx, &self.regs, f, &nf);
	is_int(err, DWUNW_OK, "self: capture reached the outermost frame (%s)", dwunw_errname(err));
	for (int i = 0; i < self.nbt; i++)
		bt[i] = (uint64_t)(uintptr_t)self.bt[i];
	/* backtrace()'s frame 0 is its call site in take_snapshot, ours the snapshot's pc there. */
	is_str(name_of(&ctx, &f[0], 1, b1, sizeof(b1)), "take_snapshot", "self: frame 0 in take_snapshot");
	{
		struct dwunw_frame t = f[0];
		t.pc = bt[0];
		t.module_addr = f[0].module_addr + (bt[0] - f[0].pc);
		t.flags &= ~DWUNW_FRAME_EXACT_PC;
		t.how = DWUNW_HOW_CFI;
		is_str(name_of(&ctx, &t, 0, b2, sizeof(b2)), "take_snapshot", "self: backtrace frame 0 in take_snapshot too");
	}
	match = nf == (size_t)self.nbt;
	for (size_t i = 1; match && i < nf; i++)
		match = f[i].pc == bt[i];
	if (!ok(match, "self: %zu frames, same as backtrace() (%d) from frame 1 on", nf, self.nbt))
		print_frames(&ctx, f, nf, bt, (size_t)self.nbt, "backtrace");
	ok(f[0].how == DWUNW_HOW_INITIAL && (f[0].flags & DWUNW_FRAME_EXACT_PC), "self: frame 0 INITIAL, EXACT_PC");
	{
		int how_ok = 1, mod_ok = 1, beyond = 0;
		for (size_t i = 1; i < nf; i++) {
			how_ok &= f[i].how == DWUNW_HOW_CFI && !(f[i].flags & DWUNW_FRAME_EXACT_PC);
			mod_ok &= f[i].module != NULL;
			beyond |= !!(f[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT);
		}
		ok(how_ok, "self: every caller found by CFI");
		ok(mod_ok, "self: every frame has a module");
		ok(!beyond, "self: nothing read beyond the snapshot");
	}
	for (size_t i = 0; i < nf; i++) {
		const char *n = name_of(&ctx, &f[i], i == 0, b1, sizeof(b1));
		static const char *const want[] = { "f1", "on_phdr", "e1", "cmp_b", "d1", "cmp_q", "c1", "main" };
		for (unsigned k = 0; k < sizeof(want) / sizeof(want[0]); k++)
			names += !strcmp(n, want[k]);
	}
	is_int(names, 8, "self: f1, on_phdr, e1, cmp_b, d1, cmp_q, c1, main among the frames");
	{
		int in_libc = 0;
		for (size_t i = 0; i < nf; i++) {
			const char *n = name_of(&ctx, &f[i], i == 0, b1, sizeof(b1));
			in_libc += strstr(n, "qsort") || strstr(n, "bsearch") || strstr(n, "dl_iterate_phdr");
		}
		ok(in_libc >= 3, "self: frames in glibc's qsort, bsearch, dl_iterate_phdr (%d)", in_libc);
	}
	memcpy(self_frames, f, nf * sizeof(f[0]));
	self_nf = nf;
	self_frames_p = self_frames;
	for (size_t i = 0; i < nf && i < 128; i++)
		snprintf(self_paths[i], sizeof(self_paths[i]), "%s", f[i].module ? dwunw_module_path(f[i].module) : "");
	printf("# self chain: %zu frames\n", nf);
	if (getenv("DWUNW_TEST_VERBOSE"))
		print_frames(&ctx, f, nf, bt, (size_t)self.nbt, "backtrace");
	dwunw_module_cache_release(&ctx, f, nf);

	/* The same snapshot unwound twice gives the same frames. */
	nf = MAXF;
	err = dwunw_capture(&ctx, &self.regs, f, &nf);
	ok(err == DWUNW_OK && same_frames(f, nf, self_frames, self_nf, ~DWUNW_FRAME_REF_BITS), "self: a second capture is identical");
	dwunw_module_cache_release(&ctx, f, nf);
	dwunw_shutdown(&ctx);
}

static void test_offline(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_regs regs = self.regs;
	size_t nf = MAXF;
	int err;

	if (!self.maps || !self_nf) {
		SKIP("offline: no snapshot");
		return;
	}
	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "offline: init"))
		return;
	is_int(dwunw_maps_set(&ctx, FAKE_PID, self.maps, self.maps_len), DWUNW_OK, "offline: maps_set for pid %d", FAKE_PID);
	regs.pid = regs.tid = FAKE_PID;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	is_int(err, DWUNW_OK, "offline: capture (%s)", dwunw_errname(err));
	if (!ok(same_frames(f, nf, self_frames, self_nf, ~0u), "offline: the same %zu frames as live", nf))
		print_frames(&ctx, f, nf, NULL, 0, "");
	dwunw_module_cache_release(&ctx, f, nf);

	/* The same stack given as offline memory of the pid (as a core file's segments are). */
	{
		struct dwunw_regs r2 = regs;
		r2.stack = NULL;
		r2.stack_size = 0;
		is_int(dwunw_memory_add(&ctx, FAKE_PID, regs.stack_start, regs.stack, regs.stack_size), DWUNW_OK,
		       "offline: memory_add of the stack");
		nf = MAXF;
		err = dwunw_capture(&ctx, &r2, f, &nf);
		ok(err == DWUNW_OK && same_frames(f, nf, self_frames, self_nf, ~0u),
		   "offline: the same %zu frames from offline memory (%s)", nf, dwunw_errname(err));
		dwunw_module_cache_release(&ctx, f, nf);
		dwunw_maps_forget(&ctx, FAKE_PID);
		is_int(dwunw_maps_set(&ctx, FAKE_PID, self.maps, self.maps_len), DWUNW_OK, "offline: maps set again");
	}

	/* Nothing beyond the snapshot can be read offline: a truncated copy stops with IO. */
	regs.stack_size = 512;
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	{
		int prefix = nf >= 1 && nf < self_nf;
		for (size_t i = 0; prefix && i < nf; i++)
			prefix = f[i].pc == self_frames[i].pc && f[i].sp == self_frames[i].sp;
		ok(err == DWUNW_ERR_IO && prefix, "offline, 512 bytes of stack: %zu frames (a prefix), %s", nf, dwunw_errname(err));
	}
	dwunw_module_cache_release(&ctx, f, nf);
	dwunw_shutdown(&ctx);
}

/*
 * A return address at the very start of a module's code, right after its read-only mapping: the
 * look-up (pc - 1) is in one mapping, the frame in the next, both of one module. The second
 * capture takes both places from the context's memo: still one reference, released with the
 * frames (the fuzzer found one left behind).
 */
static void test_code_start_memo(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_cache_stats st;
	struct dwunw_regs regs = self.regs;
	unsigned long long phi = 0, pc = 0;
	char ppath[256] = "";

	if (!self.maps || !self_nf) {
		SKIP("code start: no snapshot");
		return;
	}
	for (const char *s = self.maps, *end = self.maps + self.maps_len; s < end && !pc;) {
		const char *eol = memchr(s, '\n', (size_t)(end - s));
		size_t l = eol ? (size_t)(eol - s) : (size_t)(end - s);
		unsigned long long lo, hi, off;
		char line[1024], perms[8] = "", path[256] = "";

		snprintf(line, sizeof(line), "%.*s", (int)l, s);
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %255s", &lo, &hi, perms, &off, path) == 5) {
			if (perms[2] == 'x' && path[0] == '/' && lo == phi && strcmp(path, ppath) == 0)
				pc = lo;
			phi = hi;
			snprintf(ppath, sizeof(ppath), "%s", path);
		}
		s += l + 1;
	}
	if (!pc) {
		SKIP("code start: no code mapping right after its file's first mapping");
		return;
	}
	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "code start: init"))
		return;
	is_int(dwunw_maps_set(&ctx, FAKE_PID, self.maps, self.maps_len), DWUNW_OK, "code start: maps_set");
	regs.pid = regs.tid = FAKE_PID;
	regs.pc = pc;
	regs.flags |= DWUNW_REGS_PC_IS_RETADDR;
	for (int round = 0; round < 3; round++) {
		size_t nf = MAXF;
		int err = dwunw_capture(&ctx, &regs, f, &nf);

		dwunw_module_cache_release(&ctx, f, nf);
		memset(&st, 0, sizeof(st));
		err = dwunw_cache_stats(&ctx, &st) == DWUNW_OK ? err : DWUNW_ERR_INVALID_ARG;
		ok(nf >= 1 && st.active == 0,
		   "code start, capture %d: %zu frames (%s), no module reference left (%llu active)", round + 1, nf,
		   dwunw_errname(err), (unsigned long long)st.active);
	}
	dwunw_shutdown(&ctx);
}

/*
 * The maps parser on lines whose fields are known (the kernel's format: fs/proc/task_mmu.c),
 * and on /proc/self/maps against its line count.
 */
static void test_maps_parse(void)
{
	static const char lines[] =
		"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234567                    /usr/bin/cat\n"
		"7f0000000000-7f0000001000 rw-s 00001000 00:05 42                         /dev/zero (deleted)\n"
		"7f0000002000-7f0000003000 ---p 00000000 00:00 0 \n"
		"not a mapping\n"
		"7f0000004000-7f0000003000 r-xp 00000000 00:00 0\n"
		"7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]";
	struct dwunw_map m[4];
	char *text = malloc(sizeof(lines)), *self_text;
	size_t n = 0, len, lc = 0;

	memcpy(text, lines, sizeof(lines));
	is_int(dwunw_maps_parse(text, sizeof(lines) - 1, NULL, &n), DWUNW_OK, "maps parse: counted");
	is_int((int)n, 4, "maps parse: 4 mappings (a line that is not one, and end <= start, skipped)");
	ok(!memcmp(text, lines, sizeof(lines)), "maps parse: counting leaves the text as it is");
	n = 2;
	is_int(dwunw_maps_parse(text, sizeof(lines) - 1, m, &n), DWUNW_ERR_INVALID_ARG, "maps parse: 2 slots are too few");
	is_int((int)n, 4, "maps parse: ... and says how many are needed");
	ok(!memcmp(text, lines, sizeof(lines)), "maps parse: ... having written nothing");
	n = 4;
	is_int(dwunw_maps_parse(text, sizeof(lines) - 1, m, &n), DWUNW_OK, "maps parse: parsed");
	ok(m[0].start == 0x55d0c0a00000 && m[0].end == 0x55d0c0a02000 && m[0].offset == 0 &&
	   m[0].dev_major == 0xfd && m[0].dev_minor == 1 && m[0].inode == 1234567 &&
	   m[0].flags == DWUNW_MAP_R && !strcmp(m[0].path, "/usr/bin/cat"), "maps parse: a file mapping");
	ok(m[1].offset == 0x1000 && m[1].dev_major == 0 && m[1].dev_minor == 5 && m[1].inode == 42 &&
	   m[1].flags == (DWUNW_MAP_R | DWUNW_MAP_W | DWUNW_MAP_SHARED | DWUNW_MAP_DELETED) &&
	   !strcmp(m[1].path, "/dev/zero"), "maps parse: shared, deleted: \"%s\"", m[1].path);
	ok(m[2].flags == 0 && !strcmp(m[2].path, ""), "maps parse: anonymous, no access: \"%s\"", m[2].path);
	ok(m[3].flags == (DWUNW_MAP_R | DWUNW_MAP_X) && !strcmp(m[3].path, "[vdso]"),
	   "maps parse: the last line, without a newline: \"%s\"", m[3].path);
	n = 4;
	is_int(dwunw_maps_parse(text, 14, m, &n), DWUNW_ERR_CORRUPT, "maps parse: a cut line is no mapping");
	free(text);

	is_int(dwunw_maps_read(0, &self_text, &len), DWUNW_OK, "maps read: our own");
	for (size_t i = 0; i < len; i++)
		lc += self_text[i] == '\n';
	n = 0;
	is_int(dwunw_maps_parse(self_text, len, NULL, &n), DWUNW_OK, "maps parse: /proc/self/maps");
	is_int((int)n, (int)lc, "maps parse: one mapping a line of /proc/self/maps (%zu)", lc);
	free(self_text);
	is_int(dwunw_maps_read(-1, &self_text, &len), DWUNW_ERR_INVALID_ARG, "maps read: pid -1 refused");
}

static void *park(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* a child whose main thread pthread_exit()s, another thread parked */
static void leader_exits(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, park, NULL))
		_exit(1);
	pthread_exit(NULL);
}

/* A process whose main thread exited first: /proc/PID/maps is empty, read through another thread. */
static void test_maps_leader_gone(void)
{
	char path[64], *text = NULL;
	size_t len = 0;
	pid_t kid = fork();
	int empty = 0, err;

	if (kid == 0)
		leader_exits();
	kid_add(kid);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)kid);
	/* the leader is gone when its maps read empty (bounded: 30 s) */
	for (int i = 0; i < 3000 && !empty; i++) {
		char c;
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		empty = fd >= 0 && read(fd, &c, 1) == 0;
		if (fd >= 0)
			close(fd);
		if (!empty)
			usleep(10000);
	}
	ok(empty, "maps read, leader gone: /proc/%d/maps is empty", (int)kid);
	err = dwunw_maps_read(kid, &text, &len);
	is_int(err, DWUNW_OK, "maps read, leader gone: read through its other thread");
	if (empty && err == DWUNW_OK) {
		char exe[512];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = 0;
		ok(n > 0 && strstr(text, exe), "maps read, leader gone: our forked image's maps (%zu bytes, %s in them)",
		   len, exe);
	}
	free(text);
	kid_end(kid);
}

/*
 * Maps pinned by the caller (dwunw_maps_pin, as memleak does from mapping events): used as given
 * for a live pid, never re-read, and a file opened only while it is the very file mapped.
 */
static void test_pinned(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_regs regs = self.regs;
	struct dwunw_map *e;
	size_t nf = MAXF, n;
	char *text;
	int err;

	if (!self.maps || !self_nf) {
		SKIP("pinned: no snapshot");
		return;
	}
	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "pinned: init"))
		return;
	regs.pid = regs.tid = getpid();
	is_int(dwunw_maps_pin(&ctx, 0, self.maps, self.maps_len), DWUNW_ERR_INVALID_ARG, "pinned: pid 0 refused");
	is_int(dwunw_maps_pin(&ctx, regs.pid, self.maps, self.maps_len), DWUNW_OK, "pinned: maps of our pid");
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(err == DWUNW_OK && same_frames(f, nf, self_frames, self_nf, ~0u),
	   "pinned: the same %zu frames as live (%s)", nf, dwunw_errname(err));
	dwunw_module_cache_release(&ctx, f, nf);

	/* the same maps as entries (what a tool holds): the same frames */
	text = malloc(self.maps_len + 1);
	memcpy(text, self.maps, self.maps_len);
	text[self.maps_len] = 0;
	n = 0;
	is_int(dwunw_maps_parse(text, self.maps_len, NULL, &n), DWUNW_OK, "pinned: %zu mappings counted", n);
	e = calloc(n, sizeof(*e));
	is_int(dwunw_maps_parse(text, self.maps_len, e, &n), DWUNW_OK, "pinned: parsed into entries");
	is_int(dwunw_maps_pin_entries(&ctx, regs.pid, e, n), DWUNW_OK, "pinned: entries of our pid");
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(err == DWUNW_OK && same_frames(f, nf, self_frames, self_nf, ~0u),
	   "pinned entries: the same %zu frames as live (%s)", nf, dwunw_errname(err));
	dwunw_module_cache_release(&ctx, f, nf);

	/* every file mapping with another inode: no file is the one mapped, so no module (no guess,
	 * no re-read of /proc) */
	for (size_t i = 0; i < n; i++)
		if (e[i].inode)
			e[i].inode += 7777777;
	is_int(dwunw_maps_pin_entries(&ctx, regs.pid, e, n), DWUNW_OK, "pinned: maps of other inodes");
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(nf >= 1 && !f[0].module, "pinned: frame 0 in no module when its file is not the mapped one (%s, %zu frames)",
	   dwunw_errname(err), nf);
	dwunw_module_cache_release(&ctx, f, nf);
	free(e);
	free(text);
	dwunw_shutdown(&ctx);
}

/* A zero return address ends the walk cleanly only when it comes from the copy taken at the
 * event; read from the live process afterwards, it may be a frame rewritten since (LIVE_END). */
__attribute__((noinline)) static void entry_target(void)
{
	chain_sink++;
}

static void test_live_end(void)
{
	static uint64_t slot[4]; /* [0]: the "return address", 0 */
	struct dwunw_ctx ctx;
	struct dwunw_frame f[8];
	struct dwunw_regs r;
	size_t nf;
	int err;

	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "live end: init"))
		return;
	memset(&r, 0, sizeof(r));
	r.arch = DWUNW_ARCH_X86_64;
	r.pid = r.tid = getpid();
	r.pc = (uint64_t)(uintptr_t)entry_target; /* at the entry: CFA = rsp+8, RA at [rsp] */
	r.regs[X_RSP] = (uint64_t)(uintptr_t)slot;
	r.valid = 1ull << X_RSP;
	r.stack = slot;
	r.stack_start = (uint64_t)(uintptr_t)slot;
	r.stack_size = sizeof(slot);
	nf = 8;
	err = dwunw_capture(&ctx, &r, f, &nf);
	ok(err == DWUNW_OK && nf == 1, "live end: zero return address in the copy: a clean end (%s, %zu frames)",
	   dwunw_errname(err), nf);
	dwunw_module_cache_release(&ctx, f, nf);

	r.stack = NULL;
	r.stack_size = 0;
	nf = 8;
	err = dwunw_capture(&ctx, &r, f, &nf);
	ok(err == DWUNW_ERR_LIVE_END && nf == 1, "live end: zero return address read live: LIVE_END (%s, %zu frames)",
	   dwunw_errname(err), nf);
	dwunw_module_cache_release(&ctx, f, nf);

	/* Samples of the memory above the copy, taken "at the event": checked in the first live
	 * read. Unchanged: the walk goes on as without them; changed: STALE at the last frame
	 * recovered from the copy. */
	uint64_t then = 0x1234;
	struct dwunw_stack_sample smp = { (uint64_t)(uintptr_t)&slot[2], &then, sizeof(then) };

	slot[2] = then;
	nf = 8;
	err = dwunw_capture_sampled(&ctx, &r, &smp, 1, f, &nf);
	ok(err == DWUNW_ERR_LIVE_END && nf == 1, "stale: sample unchanged: as without samples (%s, %zu frames)",
	   dwunw_errname(err), nf);
	dwunw_module_cache_release(&ctx, f, nf);
	slot[2] = then + 1;
	nf = 8;
	err = dwunw_capture_sampled(&ctx, &r, &smp, 1, f, &nf);
	ok(err == DWUNW_ERR_STALE && nf == 1 && f[0].pc == r.pc,
	   "stale: sample changed since: STALE after frame 0 (%s, %zu frames)", dwunw_errname(err), nf);
	dwunw_module_cache_release(&ctx, f, nf);
	ok(!strcmp(dwunw_errname(DWUNW_ERR_STALE), "STALE"), "stale: named");
	dwunw_shutdown(&ctx);
}

/* ---- (4) timing of warm captures ------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_timing(void)
{
	enum { BATCHES = 100, PER = 1000 };
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_regs regs = self.regs;
	uint64_t t[BATCHES];
	size_t nf = MAXF;
	int bad = 0;

	if (!self.maps || !self_nf || init_ctx(&ctx, 0, 0) != DWUNW_OK) {
		SKIP("timing: no snapshot");
		return;
	}
	dwunw_maps_set(&ctx, FAKE_PID, self.maps, self.maps_len);
	regs.pid = regs.tid = FAKE_PID;
	dwunw_capture(&ctx, &regs, f, &nf); /* warm up: modules, tables, mappings */
	dwunw_module_cache_release(&ctx, f, nf);
	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < PER; i++) {
			nf = MAXF;
			bad += dwunw_capture(&ctx, &regs, f, &nf) != DWUNW_OK || nf != self_nf;
			dwunw_module_cache_release(&ctx, f, nf);
		}
		t[b] = now_ns() - t0;
	}
	qsort(t, BATCHES, sizeof(t[0]), cmp_u64);
	is_int(bad, 0, "timing: %d warm captures, all complete", BATCHES * PER);
	{
		double per = (double)t[BATCHES / 2] / PER;
		printf("# warm unwind: %zu frames, %.0f ns median per capture (%.1f ns/frame)\n", self_nf, per, per / (double)self_nf);
		printf("# (capture + release, offline snapshot of %llu bytes; batch min %.0f ns, max %.0f ns)\n",
		       (unsigned long long)regs.stack_size, (double)t[0] / PER, (double)t[BATCHES - 1] / PER);
	}
	dwunw_shutdown(&ctx);
}

/* ---- children of this binary ------------------------------------------------------------- */

enum { K_READ, K_SIGNAL, K_SIGALT, K_BREAK };

struct kid {
	pid_t pid;
	int up, down;
};

static int kid_up = -1, kid_down = -1;

static void kid_ready(void)
{
	char c = 'R';
	if (write(kid_up, &c, 1) != 1)
		_exit(9);
}

static void kid_block(void)
{
	char c;
	for (;;)
		if (read(kid_down, &c, 1) <= 0)
			_exit(0);
}

CHAIN static int kr3(int x) { kid_ready(); kid_block(); BARRIER(); return x; }
CHAIN static int kr2(int x) { int r = kr3(x + 1); BARRIER(); return r + 1; }
CHAIN static int kr1(int x) { volatile int a[8]; a[x & 7] = x; int r = kr2(x + 1); return r + a[x & 7]; }

static void on_usr1(int sig)
{
	(void)sig;
	kid_ready();
	for (;;)
		pause();
}

CHAIN static int ks3(int x) { raise(SIGUSR1); BARRIER(); return x; }
CHAIN static int ks2(int x) { int r = ks3(x + 1); BARRIER(); return r + 1; }
CHAIN static int ks1(int x) { volatile char *p = __builtin_alloca((size_t)(x & 15) + 8); p[0] = 1; int r = ks2(x + 1); return r + p[0]; }

/* The breakpoint target: its first instruction is where the child stops. */
CHAIN int kb_target(int x)
{
	volatile int a[4];
	a[x & 3] = x;
	return a[x & 3] * 3;
}
CHAIN static int kb2(int x) { int r = kb_target(x + 1); BARRIER(); return r + 1; }
CHAIN static int kb1(int x) { int r = kb2(x + 1); BARRIER(); return r + 1; }

CHAIN __attribute__((noreturn)) static void kid_main(int mode)
{
	struct sigaction sa;
	char c;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (mode == K_SIGALT) {
		stack_t ss = { .ss_sp = malloc(1 << 16), .ss_size = 1 << 16 };
		if (!ss.ss_sp || sigaltstack(&ss, NULL))
			_exit(8);
		sa.sa_flags = SA_ONSTACK;
	}
	sigaction(SIGUSR1, &sa, NULL);
	switch (mode) {
	case K_READ:
		kr1(0);
		break;
	case K_SIGNAL:
	case K_SIGALT:
		ks1(0);
		break;
	case K_BREAK:
		kid_ready();
		if (read(kid_down, &c, 1) != 1)
			_exit(0);
		kb1(0);
		kid_block();
		break;
	}
	_exit(0);
}

static int kid_start(struct kid *k, int mode)
{
	int up[2], down[2];
	struct pollfd p;
	char c;

	memset(k, 0, sizeof(*k));
	k->up = k->down = -1;
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		return -1;
	fflush(stdout);
	k->pid = fork();
	if (k->pid < 0)
		return -1;
	if (k->pid == 0) {
		close(up[0]);
		close(down[1]);
		kid_up = up[1];
		kid_down = down[0];
		alarm(120);
		kid_main(mode);
	}
	kid_add(k->pid);
	close(up[1]);
	close(down[0]);
	k->up = up[0];
	k->down = down[1];
	p = (struct pollfd){ .fd = k->up, .events = POLLIN };
	if (poll(&p, 1, 10000) != 1 || read(k->up, &c, 1) != 1 || c != 'R')
		return -1;
	/* blocked (in read or pause) */
	return wait_state(k->pid, "S", 5000) == 'S' ? 0 : -1;
}

static void kid_stop(struct kid *k)
{
	kid_end(k->pid);
	if (k->up >= 0)
		close(k->up);
	if (k->down >= 0)
		close(k->down);
	k->pid = 0;
	k->up = k->down = -1;
}

/* Registers and up to `want` bytes of stack of a child, frozen by the stack reader. */
struct frozen {
	struct dwunw_regs regs;
	uint8_t *stack;
	uint64_t top;      /* end of the stack mapping */
};

static int freeze(pid_t pid, size_t want, struct frozen *fz)
{
	struct dwunw_config cfg = { .size = sizeof(cfg) };
	struct dwunw_stack_reader r;
	uint64_t sp;
	size_t n;
	int err;

	memset(fz, 0, sizeof(*fz));
	dwunw_stack_reader_init(&r, pid, &cfg);
	err = dwunw_stack_reader_attach(&r, pid);
	if (err)
		return err;
	err = dwunw_stack_reader_regs(&r, &fz->regs);
	if (!err) {
		sp = fz->regs.regs[X_RSP];
		fz->top = mapping_end_of(pid, sp);
		n = want;
		if (fz->top && fz->top - sp < n)
			n = (size_t)(fz->top - sp);
		fz->stack = malloc(want ? want : 1);
		while (n && dwunw_stack_reader_read(&r, sp, fz->stack, n) != DWUNW_OK)
			n /= 2;
		fz->regs.stack = fz->stack;
		fz->regs.stack_start = sp;
		fz->regs.stack_size = n;
		fz->regs.pid = pid;
		fz->regs.tid = pid;
	}
	if (dwunw_stack_reader_detach(&r) && !err)
		err = DWUNW_ERR_IO;
	return err;
}

/* Capture with a fresh context; frames into f (released by the caller with the ctx). */
static int capture(struct dwunw_ctx *ctx, const struct dwunw_regs *regs, struct dwunw_frame *f, size_t *nf)
{
	*nf = MAXF;
	return dwunw_capture(ctx, regs, f, nf);
}

/* Our frames against gdb's for the same frozen child. */
static int against_gdb(const char *what, struct dwunw_ctx *ctx, pid_t pid, const struct dwunw_frame *f, size_t nf)
{
	uint64_t g[MAXF];
	int tramp, ng = gdb_pcs(pid, g, MAXF, &tramp);

	if (ng < 0) {
		SKIP("%s: gdb not available", what);
		return -2;
	}
	if (!ok(pcs_equal(f, nf, g, (size_t)ng), "%s: %zu frames, the same pcs as gdb (%d)", what, nf, ng))
		print_frames(ctx, f, nf, g, (size_t)ng, "gdb");
	return tramp;
}

/* ---- (c) (d) (e) a child blocked in read() ------------------------------------------------ */

static void test_child_read(void)
{
	struct kid k;
	struct frozen fz, small;
	struct dwunw_ctx ctx, noremote;
	struct dwunw_frame f[MAXF], p[MAXF], q[MAXF];
	size_t nf = 0, np, nq;
	char b[300];
	int err;

	if (!ok(kid_start(&k, K_READ) == 0, "child: started, blocked in read()")) {
		kid_stop(&k);
		return;
	}
	err = freeze(k.pid, 16384, &fz);
	ok(err == DWUNW_OK && fz.regs.stack_size >= 4096, "child: registers and %llu bytes of stack (%s)",
	   (unsigned long long)fz.regs.stack_size, dwunw_errname(err));
	if (err || init_ctx(&ctx, 0, 0) != DWUNW_OK) {
		free(fz.stack);
		kid_stop(&k);
		return;
	}
	err = capture(&ctx, &fz.regs, f, &nf);
	is_int(err, DWUNW_OK, "child: capture complete (%s)", dwunw_errname(err));
	{
		int seen = 0;
		for (size_t i = 0; i < nf; i++) {
			const char *n = name_of(&ctx, &f[i], i == 0, b, sizeof(b));
			seen += !strcmp(n, "kr3") || !strcmp(n, "kr2") || !strcmp(n, "kr1") || !strcmp(n, "kid_main") || !strcmp(n, "kid_block");
		}
		is_int(seen, 5, "child: kid_block, kr3, kr2, kr1, kid_main among the frames");
	}
	against_gdb("child in read()", &ctx, k.pid, f, nf);

	/* (d) 256 bytes of stack */
	small = fz;
	small.regs.stack_size = 256;
	np = 0;
	if (init_ctx(&noremote, DWUNW_CFG_NO_REMOTE_READS, 0) == DWUNW_OK) {
		int prefix;
		err = capture(&noremote, &small.regs, p, &np);
		prefix = np >= 1 && np < nf;
		for (size_t i = 0; prefix && i < np; i++)
			prefix = p[i].pc == f[i].pc && p[i].sp == f[i].sp && !(p[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT);
		ok(err == DWUNW_ERR_IO && prefix, "256 bytes, no remote reads: %zu of %zu frames, stop %s", np, nf, dwunw_errname(err));
		dwunw_module_cache_release(&noremote, p, np);
		dwunw_shutdown(&noremote);
	}
	err = capture(&ctx, &small.regs, q, &nq);
	{
		int same = err == DWUNW_OK && nq == nf, flagged = 0, first = -1;
		for (size_t i = 0; same && i < nq; i++) {
			same = q[i].pc == f[i].pc && q[i].sp == f[i].sp && q[i].cfa == f[i].cfa;
			if (q[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT) {
				flagged++;
				if (first < 0)
					first = (int)i;
			}
		}
		ok(same, "256 bytes, remote reads: the complete %zu frames (%s)", nq, dwunw_errname(err));
		ok(flagged > 0 && first == (int)np, "256 bytes, remote reads: frames from #%d on BEYOND_SNAPSHOT (%d flagged; %zu within)",
		   first, flagged, np);
		dwunw_module_cache_release(&ctx, q, nq);
	}
	/* No snapshot at all: everything read live. */
	small.regs.stack = NULL;
	small.regs.stack_size = 0;
	err = capture(&ctx, &small.regs, q, &nq);
	ok(err == DWUNW_OK && nq == nf, "no snapshot: %zu frames live (%s)", nq, dwunw_errname(err));
	{
		int same = nq == nf;
		for (size_t i = 0; same && i < nq; i++)
			same = q[i].pc == f[i].pc;
		ok(same, "no snapshot: the same pcs");
	}
	dwunw_module_cache_release(&ctx, q, nq);

	/* (e) max_frames and small buffers */
	{
		struct dwunw_ctx lim;
		if (init_ctx(&lim, 0, 3) == DWUNW_OK) {
			err = capture(&lim, &fz.regs, q, &nq);
			ok(err == DWUNW_ERR_DEPTH && nq == 3 && q[2].pc == f[2].pc, "max_frames 3: 3 frames, DEPTH (%zu, %s)", nq, dwunw_errname(err));
			dwunw_module_cache_release(&lim, q, nq);
			dwunw_shutdown(&lim);
		}
		nq = 2;
		err = dwunw_capture(&ctx, &fz.regs, q, &nq);
		ok(err == DWUNW_ERR_DEPTH && nq == 2, "buffer of 2: 2 frames, DEPTH (%zu, %s)", nq, dwunw_errname(err));
		dwunw_module_cache_release(&ctx, q, nq);
		nq = nf;
		err = dwunw_capture(&ctx, &fz.regs, q, &nq);
		ok(err == DWUNW_OK && nq == nf,
		     "buffer of exactly %zu (the whole stack): complete, OK (%zu, %s)", nf, nq, dwunw_errname(err));
		dwunw_module_cache_release(&ctx, q, nq);
		nq = nf + 1;
		err = dwunw_capture(&ctx, &fz.regs, q, &nq);
		ok(err == DWUNW_OK && nq == nf, "buffer of %zu: complete, OK", nf + 1);
		dwunw_module_cache_release(&ctx, q, nq);
	}

	/* (e) the thread exits before the capture: maps and modules already cached */
	{
		struct frozen live;
		err = freeze(k.pid, 0, &live);
		live.regs.stack = NULL;
		live.regs.stack_size = 0;
		kid_stop(&k);
		err = capture(&ctx, &live.regs, q, &nq);
		ok(nq >= 1 && nq < nf && (err == DWUNW_ERR_NO_PROCESS || err == DWUNW_ERR_IO),
		   "exited, maps cached, no snapshot: %zu frames, %s", nq, dwunw_errname(err));
		is_hex(q[0].pc, live.regs.pc, "exited: frame 0 is the captured pc");
		dwunw_module_cache_release(&ctx, q, nq);
		/* a context that never saw the process */
		{
			struct dwunw_ctx fresh;
			if (init_ctx(&fresh, 0, 0) == DWUNW_OK) {
				err = capture(&fresh, &live.regs, q, &nq);
				is_int(nq, 1, "exited, nothing cached: frame 0 only (%s)", dwunw_errname(err));
				ok(err == DWUNW_ERR_NO_PROCESS || err == DWUNW_ERR_IO,
				     "exited, nothing cached: stop NO_PROCESS (%s)", dwunw_errname(err));
				dwunw_module_cache_release(&fresh, q, nq);
				/* the full snapshot of the dead process: as far as the maps are needed */
				err = capture(&fresh, &fz.regs, q, &nq);
				ok(nq == 1 && err != DWUNW_OK, "exited, nothing cached, with snapshot: frame 0 only (%zu), %s", nq, dwunw_errname(err));
				ok(err == DWUNW_ERR_NO_PROCESS || err == DWUNW_ERR_IO,
				     "exited, nothing cached, with snapshot: stop NO_PROCESS (%s)", dwunw_errname(err));
				dwunw_module_cache_release(&fresh, q, nq);
				dwunw_shutdown(&fresh);
			}
		}
		free(live.stack);
	}
	dwunw_module_cache_release(&ctx, f, nf);
	dwunw_shutdown(&ctx);
	free(fz.stack);
}

static void test_errors(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_regs regs;
	size_t nf;
	int err;
	pid_t dead;

	if (!ok(init_ctx(&ctx, 0, 0) == DWUNW_OK, "errors: init"))
		return;
	regs = self.regs;
	regs.arch = DWUNW_ARCH_UNKNOWN;
	nf = MAXF;
	is_int(dwunw_capture(&ctx, &regs, f, &nf), DWUNW_ERR_UNSUPPORTED_ARCH, "errors: arch UNKNOWN -> UNSUPPORTED_ARCH");
	is_int(nf, 0, "errors: no frame");
	regs.arch = 77;
	nf = MAXF;
	is_int(dwunw_capture(&ctx, &regs, f, &nf), DWUNW_ERR_UNSUPPORTED_ARCH, "errors: arch 77 -> UNSUPPORTED_ARCH");
	regs = self.regs;
	nf = 0;
	is_int(dwunw_capture(&ctx, &regs, f, &nf), DWUNW_ERR_INVALID_ARG, "errors: frame_cnt 0 -> INVALID_ARG");
	nf = MAXF;
	is_int(dwunw_capture(&ctx, &regs, NULL, &nf), DWUNW_ERR_INVALID_ARG, "errors: frames NULL -> INVALID_ARG");
	is_int(nf, 0, "errors: *frame_cnt set to 0");
	is_int(dwunw_capture(&ctx, &regs, f, NULL), DWUNW_ERR_INVALID_ARG, "errors: frame_cnt NULL -> INVALID_ARG");
	nf = MAXF;
	is_int(dwunw_capture(&ctx, NULL, f, &nf), DWUNW_ERR_INVALID_ARG, "errors: regs NULL -> INVALID_ARG");
	nf = MAXF;
	is_int(dwunw_capture(NULL, &regs, f, &nf), DWUNW_ERR_INVALID_ARG, "errors: ctx NULL -> INVALID_ARG");

	/* A pid that no longer exists, with a snapshot. */
	fflush(stdout);
	dead = fork();
	if (dead == 0)
		_exit(0);
	if (dead > 0)
		waitpid(dead, NULL, 0);
	regs = self.regs;
	regs.pid = regs.tid = dead;
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(nf == 1 && f[0].pc == regs.pc && err != DWUNW_OK, "errors: pid %d gone, with snapshot: frame 0 only (%zu), %s", dead, nf, dwunw_errname(err));
	ok(err == DWUNW_ERR_NO_PROCESS, "errors: pid gone: stop NO_PROCESS (%s)", dwunw_errname(err));
	if (nf > 1 && getenv("DWUNW_TEST_VERBOSE"))
		print_frames(&ctx, f, nf, NULL, 0, "");
	dwunw_module_cache_release(&ctx, f, nf);

	/* An offline pid without maps: no module, frame 0 only. */
	regs.pid = regs.tid = FAKE_PID - 1;
	regs.stack = NULL;
	regs.stack_size = 0;
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(nf == 1 && err != DWUNW_OK, "errors: unknown pid, no snapshot: frame 0 only, %s", dwunw_errname(err));
	dwunw_module_cache_release(&ctx, f, nf);

	/* pid 0: offline without maps, snapshot only. */
	regs = self.regs;
	regs.pid = regs.tid = 0;
	nf = MAXF;
	err = dwunw_capture(&ctx, &regs, f, &nf);
	ok(nf >= 1 && err != DWUNW_OK && f[0].pc == regs.pc, "errors: pid 0 (no maps): %zu frames, %s", nf, dwunw_errname(err));
	dwunw_module_cache_release(&ctx, f, nf);

	/* max_frames with the self snapshot */
	{
		struct dwunw_ctx lim;
		if (self_nf > 5 && init_ctx(&lim, 0, 5) == DWUNW_OK) {
			nf = MAXF;
			err = dwunw_capture(&lim, &self.regs, f, &nf);
			ok(err == DWUNW_ERR_DEPTH && nf == 5 && f[4].pc == self_frames[4].pc, "errors: max_frames 5 -> 5 frames, DEPTH");
			dwunw_module_cache_release(&lim, f, nf);
			nf = 3;
			err = dwunw_capture(&lim, &self.regs, f, &nf);
			ok(err == DWUNW_ERR_DEPTH && nf == 3, "errors: buffer 3 < max_frames 5 -> 3 frames, DEPTH");
			dwunw_module_cache_release(&lim, f, nf);
			dwunw_shutdown(&lim);
		}
	}
	dwunw_shutdown(&ctx);
}

/* ---- (f) signal frames -------------------------------------------------------------------- */

static void test_child_signal(int mode)
{
	const char *what = mode == K_SIGALT ? "sigaltstack" : "signal";
	struct kid k;
	struct frozen fz;
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	size_t nf = 0;
	char b[300];
	int err, tramp = -1, gtramp;
	static const uint8_t restore_rt[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };

	if (!ok(kid_start(&k, mode) == 0, "%s: child blocked in a SIGUSR1 handler", what)) {
		kid_stop(&k);
		return;
	}
	err = freeze(k.pid, 16384, &fz);
	if (!ok(err == DWUNW_OK && init_ctx(&ctx, 0, 0) == DWUNW_OK, "%s: frozen (%s)", what, dwunw_errname(err))) {
		free(fz.stack);
		kid_stop(&k);
		return;
	}
	err = capture(&ctx, &fz.regs, f, &nf);
	is_int(err, DWUNW_OK, "%s: capture complete (%s), %zu frames", what, dwunw_errname(err), nf);
	/* The restorer by its code (the child maps the C library where this process does). */
	for (size_t i = 1; i < nf; i++)
		if (!memcmp((const void *)(uintptr_t)f[i].pc, restore_rt, sizeof(restore_rt))) {
			tramp = (int)i;
			break;
		}
	ok(tramp > 0 && !strcmp(name_of(&ctx, &f[tramp - 1], 0, b, sizeof(b)), "on_usr1"),
	   "%s: the handler's caller is __restore_rt (frame %d)", what, tramp);
	if (tramp > 0 && (size_t)tramp + 1 < nf) {
		const struct dwunw_frame *x = &f[tramp + 1];
		int in_ks3 = 0;
		ok(x->how == DWUNW_HOW_SIGNAL && (x->flags & DWUNW_FRAME_EXACT_PC),
		   "%s: the interrupted frame: how SIGNAL, EXACT_PC (how %u flags 0x%x)", what, x->how, x->flags);
		for (size_t i = (size_t)tramp + 1; i < nf; i++)
			in_ks3 |= !strcmp(name_of(&ctx, &f[i], 0, b, sizeof(b)), "ks3");
		ok(in_ks3, "%s: the chain goes on through ks3 (raise's caller)", what);
		if (mode == K_SIGALT) {
			int beyond = 0;
			for (size_t i = (size_t)tramp + 1; i < nf; i++)
				beyond |= !!(f[i].flags & DWUNW_FRAME_BEYOND_SNAPSHOT);
			ok(beyond, "%s: the interrupted stack is outside the snapshot: read live", what);
			ok(f[tramp + 1].sp > f[tramp].sp + 65536 || f[tramp + 1].sp < f[tramp].sp,
			   "%s: the interrupted sp is on another stack", what);
		}
	}
	gtramp = against_gdb(what, &ctx, k.pid, f, nf);
	if (gtramp != -2)
		is_int(gtramp, tramp, "%s: gdb's signal trampoline frame is the same", what);
	dwunw_module_cache_release(&ctx, f, nf);
	dwunw_shutdown(&ctx);
	free(fz.stack);
	kid_stop(&k);
}

/* ---- (g) frame 0 at a function's first instruction ------------------------------------------ */

static int mem_rw(pid_t pid, uint64_t addr, void *buf, size_t len, int write_it)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, (write_it ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = write_it ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

static int wait_stop(pid_t pid, int *sig)
{
	int st;
	for (int i = 0; i < 10000; i++) {
		pid_t w = waitpid(pid, &st, __WALL | WNOHANG);
		if (w == pid) {
			if (!WIFSTOPPED(st))
				return -1;
			*sig = WSTOPSIG(st);
			return 0;
		}
		if (w < 0)
			return -1;
		sleep_ms(1);
	}
	return -1;
}

static void test_breakpoint(void)
{
	struct kid k;
	struct dwunw_ctx ctx;
	struct dwunw_frame f[MAXF];
	struct dwunw_regs regs;
	struct user_regs_struct ur;
	struct iovec io = { &ur, sizeof(ur) };
	const struct dwunw_arch_ops *x86 = dwunw_arch_get(DWUNW_ARCH_X86_64);
	uint64_t entry = (uint64_t)(uintptr_t)kb_target;
	uint8_t orig, cc = 0xcc, *stack = NULL;
	size_t nf = 0, n;
	char b[300];
	int sig = 0, err, stage = 0;

	if (!ok(kid_start(&k, K_BREAK) == 0, "breakpoint: child waiting")) {
		kid_stop(&k);
		return;
	}
	/* Seize, stop, plant int3 at kb_target's entry, let the child call it. */
	if (ptrace(PTRACE_SEIZE, k.pid, NULL, (void *)(uintptr_t)PTRACE_O_EXITKILL))
		goto fail;
	stage++;
	if (ptrace(PTRACE_INTERRUPT, k.pid, NULL, NULL) || wait_stop(k.pid, &sig))
		goto fail;
	stage++;
	if (mem_rw(k.pid, entry, &orig, 1, 0) || mem_rw(k.pid, entry, &cc, 1, 1))
		goto fail;
	stage++;
	if (ptrace(PTRACE_CONT, k.pid, NULL, NULL) || write(k.down, "g", 1) != 1)
		goto fail;
	stage++;
	if (wait_stop(k.pid, &sig) || sig != SIGTRAP)
		goto fail;
	stage++;
	if (ptrace(PTRACE_GETREGSET, k.pid, (void *)(uintptr_t)NT_PRSTATUS, &io) || ur.rip != entry + 1)
		goto fail;
	stage++;
	ur.rip = entry;
	if (ptrace(PTRACE_SETREGSET, k.pid, (void *)(uintptr_t)NT_PRSTATUS, &io) || mem_rw(k.pid, entry, &orig, 1, 1))
		goto fail;
	stage++;
	memset(&regs, 0, sizeof(regs));
	if (!x86 || x86->regs_from_prstatus(&ur, sizeof(ur), &regs))
		goto fail;
	stage++;
	regs.pid = regs.tid = k.pid;
	n = 16384;
	{
		uint64_t top = mapping_end_of(k.pid, ur.rsp);
		if (top && top - ur.rsp < n)
			n = (size_t)(top - ur.rsp);
	}
	stack = malloc(16384);
	if (!stack || mem_rw(k.pid, ur.rsp, stack, n, 0))
		goto fail;
	regs.stack = stack;
	regs.stack_start = ur.rsp;
	regs.stack_size = n;
	ok(1, "breakpoint: child stopped at kb_target's first instruction (0x%llx)", (unsigned long long)entry);

	if (init_ctx(&ctx, 0, 0) == DWUNW_OK) {
		err = capture(&ctx, &regs, f, &nf);
		is_int(err, DWUNW_OK, "breakpoint: capture complete (%s)", dwunw_errname(err));
		ok(nf > 3 && f[0].pc == entry && !strcmp(name_of(&ctx, &f[0], 1, b, sizeof(b)), "kb_target"),
		   "breakpoint: frame 0 at kb_target+0");
		{
			struct dwunw_symbol s;
			ok(dwunw_symbolize_frame(&ctx, &f[0], &s) == DWUNW_OK && s.offset == 0, "breakpoint: symbolized at offset 0");
		}
		ok(nf > 3 && !strcmp(name_of(&ctx, &f[1], 0, b, sizeof(b)), "kb2") &&
		   !strcmp(name_of(&ctx, &f[2], 0, b, sizeof(b)), "kb1") && f[0].cfa == ur.rsp + 8,
		   "breakpoint: callers kb2, kb1; CFA of frame 0 = rsp + 8");
		/* Stop it there for gdb: detach with SIGSTOP. */
		if (ptrace(PTRACE_DETACH, k.pid, NULL, (void *)(uintptr_t)SIGSTOP) == 0 && wait_state(k.pid, "T", 5000) == 'T')
			against_gdb("breakpoint", &ctx, k.pid, f, nf);
		else
			ok(0, "breakpoint: detach with SIGSTOP");
		dwunw_module_cache_release(&ctx, f, nf);
		dwunw_shutdown(&ctx);
	}
	free(stack);
	kid_stop(&k);
	return;
fail:
	ok(0, "breakpoint: setup failed at stage %d: %s", stage, strerror(errno));
	free(stack);
	kid_stop(&k);
}

int main(void)
{
	arm_timeout(300, kill_kids_now);
	signal(SIGPIPE, SIG_IGN);
	atexit(kill_kids);
	atexit(gdb_cleanup);

	/* backtrace() loads libgcc_s on first use: not inside dl_iterate_phdr's lock. */
	{
		void *warm[4];
		backtrace(warm, 4);
	}
	memset(&self, 0, sizeof(self));
	ok(make_self_snapshot() >= 0 && snap_err == 0, "self: snapshot inside qsort -> bsearch -> dl_iterate_phdr callbacks");
	test_self();
	test_offline();
	test_maps_parse();
	test_maps_leader_gone();
	test_pinned();
	test_code_start_memo();
	test_live_end();
	test_timing();
	test_errors();
	test_child_read();
	test_child_signal(K_SIGNAL);
	test_child_signal(K_SIGALT);
	test_breakpoint();
	kill_kids();
	free(self.stack);
	free(self.maps);
	return done_testing();
}
