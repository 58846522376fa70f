// SPDX-License-Identifier: GPL-2.0-only
/* Tests of symbols.c: symtabs, debug files, MiniDebugInfo, C++ names, .debug_line 2-5, bad input. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "debuginfo.h"
#include "dwarf_line.h"
#include "dwunw.h"
#include "elf_file.h"
#include "module.h"
#include "symbols.h"
#include "tap.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static char tmpdir[64];
static const char *tprefix = ""; /* binutils of the target: "" or "mipsel-linux-gnu-" */

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *tpath(const char *fmt, ...)
{
	static char bufs[64][512];
	static int k;
	char name[256];
	va_list ap;
	char *b = bufs[k++ & 63];

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
	return b;
}

static int shell(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd) == 0 ? 0 : -1;
}

/* The output of a command, NUL-terminated (malloc'd), or NULL. */
static char *output(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	if (!f || !buf) {
		free(buf);
		if (f)
			pclose(f);
		return NULL;
	}
	for (;;) {
		if (len + 1024 > cap) {
			char *n = realloc(buf, cap *= 2);
			if (!n)
				break;
			buf = n;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		if (!got)
			break;
		len += got;
	}
	buf[len] = 0;
	if (pclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct nm_sym {
	uint64_t addr, size;
	char type;
	char name[256];
};

/* Symbol `want` (exact name, its compiler clone "want.xxx", or "want@VERSION") from `nm -S` of a file. */
static int nm_find(const char *nm_opts, const char *file, const char *want, struct nm_sym *out)
{
	char *text = output("%snm -S %s '%s' 2>/dev/null", tprefix, nm_opts, file);
	int found = 0;
	size_t wl = strlen(want);

	if (!text)
		return 0;
	for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n")) {
		struct nm_sym s = { 0 };
		unsigned long long a, z = 0;
		char t, name[256];
		/* "addr size type name" or "addr type name" */
		if (sscanf(line, "%llx %llx %c %255s", &a, &z, &t, name) != 4) {
			z = 0;
			if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3)
				continue;
		}
		if (strncmp(name, want, wl) != 0 || (name[wl] != 0 && name[wl] != '.' && name[wl] != '@'))
			continue;
		s.addr = a;
		s.size = z;
		s.type = t;
		snprintf(s.name, sizeof(s.name), "%s", name);
		*out = s;
		found = 1;
	}
	free(text);
	return found;
}

/* addr2line's file and line for each of n addresses (one run). 0 when it answered for all. */
static int addr2line_many(const char *file, const uint64_t *addrs, size_t n, char (*paths)[512],
			  unsigned *lines)
{
	size_t cap = 64 + strlen(file) + n * 20, len;
	char *cmd = malloc(cap), *text, *line, *save = NULL;
	size_t i = 0;

	if (!cmd)
		return -1;
	len = (size_t)snprintf(cmd, cap, "%saddr2line -e '%s'", tprefix, file);
	for (size_t k = 0; k < n; k++)
		len += (size_t)snprintf(cmd + len, cap - len, " 0x%llx", (unsigned long long)addrs[k]);
	text = output("%s", cmd);
	free(cmd);
	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line && i < n; line = strtok_r(NULL, "\n", &save), i++) {
		char *disc = strstr(line, " (discriminator");
		if (disc)
			*disc = 0;
		char *colon = strrchr(line, ':');
		if (!colon)
			break;
		*colon = 0;
		snprintf(paths[i], 512, "%s", line);
		lines[i] = (unsigned)strtoul(colon + 1, NULL, 10);
	}
	free(text);
	return i == n ? 0 : -1;
}

static int addr2line(const char *file, uint64_t addr, char *path, size_t plen, unsigned *line)
{
	char p[1][512];
	if (addr2line_many(file, &addr, 1, p, line))
		return -1;
	snprintf(path, plen, "%s", p[0]);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static const char *case_sysroot; /* cfg.sysroot of the next contexts */

static int ctx_open(struct dwunw_ctx *ctx, const char *debug_dirs, uint32_t flags)
{
	struct dwunw_config cfg = { .size = sizeof(cfg), .debug_dirs = debug_dirs, .flags = flags,
				    .sysroot = case_sysroot };
	return dwunw_init(ctx, &cfg);
}

/*
 * Give back a module's symbol index before the module is put: ctx.c/module.c do not free it
 * yet. Harmless once they do (syms is NULL again afterwards).
 */
static void drop_syms(struct dwunw_module *m)
{
	if (m && m->syms) {
		dw_symtab_free(m->syms);
		m->syms = NULL;
	}
	if (m)
		atomic_store(&m->syms_state, 0);
}

static void put_module(struct dwunw_ctx *ctx, struct dwunw_module *m)
{
	drop_syms(m);
	dwunw_module_put(ctx, m);
}

/* ---- test programs ------------------------------------------------------------------------ */

static const char c_prog[] =
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"\n"
	"static int __attribute__((noinline)) helper_static(int x)\n"
	"{\n"
	"	volatile int v = x;\n"
	"	for (int i = 0; i < x * 3; i++)\n"
	"		v += i * 7;\n"
	"	return v;\n"
	"}\n"
	"\n"
	"static unsigned __attribute__((noinline)) other_static(const char *s)\n"
	"{\n"
	"	unsigned h = 5381;\n"
	"	while (*s)\n"
	"		h = h * 33 + (unsigned char)*s++;\n"
	"	return h;\n"
	"}\n"
	"\n"
	"int __attribute__((noinline)) global_func(int x, const char *s)\n"
	"{\n"
	"	int r = helper_static(x);\n"
	"	r += (int)other_static(s);\n"
	"	return r * 2 + 1;\n"
	"}\n"
	"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	printf(\"%d\\n\", global_func(argc, argv[0]));\n"
	"	return 0;\n"
	"}\n";

static const char cxx_prog[] =
	"#include <cstdio>\n"
	"#include <vector>\n"
	"#include <string>\n"
	"namespace outer {\n"
	"namespace inner {\n"
	"template <typename T> class Box {\n"
	"public:\n"
	"	explicit Box(T v) : v_(v) {}\n"
	"	__attribute__((noinline)) T twice(int n) const\n"
	"	{\n"
	"		T r = v_;\n"
	"		for (int i = 0; i < n; i++)\n"
	"			r = r + v_;\n"
	"		return r;\n"
	"	}\n"
	"private:\n"
	"	T v_;\n"
	"};\n"
	"__attribute__((noinline)) size_t count_all(const std::vector<std::string> &v, char c)\n"
	"{\n"
	"	size_t n = 0;\n"
	"	for (const auto &s : v)\n"
	"		for (char x : s)\n"
	"			n += x == c;\n"
	"	return n;\n"
	"}\n"
	"}\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	outer::inner::Box<double> b(argc);\n"
	"	outer::inner::Box<long> l(argc);\n"
	"	std::vector<std::string> v(argv, argv + argc);\n"
	"	std::printf(\"%f %ld %zu\\n\", b.twice(argc), l.twice(argc), outer::inner::count_all(v, 'a'));\n"
	"	return 0;\n"
	"}\n";

static const char *const c_funcs[] = { "helper_static", "other_static", "global_func", "main" };

/* ---- (a) C program, DWARF 2-5, gcc and clang ------------------------------------------------- */

static void check_c_build(const char *prefix, const char *cc, const char *dwarf)
{
	char prog[512], label[128], want_path[512];
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	int err;

	snprintf(label, sizeof(label), "%s%s %s", prefix, cc, dwarf);
	snprintf(prog, sizeof(prog), "%s", tpath("c_%s%s_%s", prefix, cc, dwarf + 2));
	if (*prefix && shell("command -v %s%s >/dev/null && command -v %saddr2line >/dev/null", prefix, cc, prefix)) {
		SKIP("%s: no %s%s", label, prefix, cc);
		return;
	}
	tprefix = prefix;
	if (shell("%s%s -O2 %s -Wl,--build-id -o '%s' '%s'", prefix, cc, dwarf, prog, tpath("prog.c"))) {
		ok(0, "%s: build the C program", label);
		return;
	}
	if (!ok(ctx_open(&ctx, tpath("no-debug"), 0) == DWUNW_OK, "%s: init", label))
		return;
	err = dwunw_module_open(&ctx, prog, &mod);
	is_int(err, DWUNW_OK, "%s: module open", label);
	for (size_t i = 0; mod && i < sizeof(c_funcs) / sizeof(c_funcs[0]); i++) {
		struct nm_sym ns;
		struct dwunw_symbol sym;
		unsigned want_line;

		if (!nm_find("", prog, c_funcs[i], &ns)) {
			ok(0, "%s: nm has %s", label, c_funcs[i]);
			continue;
		}
		err = dwunw_symbolize(&ctx, mod, ns.addr, &sym);
		is_int(err, DWUNW_OK, "%s: %s found", label, ns.name);
		is_str(sym.name, ns.name, "%s: %s+0 name", label, ns.name);
		is_hex(sym.offset, 0, "%s: %s+0 offset", label, ns.name);
		is_hex(sym.sym_addr, ns.addr, "%s: %s sym_addr", label, ns.name);
		is_hex(sym.flags, 0, "%s: %s from the module's own .symtab", label, ns.name);
		if (addr2line(prog, ns.addr, want_path, sizeof(want_path), &want_line) == 0) {
			is_str(base_name(sym.file), base_name(want_path), "%s: %s file = addr2line's", label, ns.name);
			is_int(sym.line, want_line, "%s: %s line = addr2line's", label, ns.name);
			if (strcmp(sym.file, want_path))
				printf("# %s: full path %s, addr2line %s\n", label, sym.file, want_path);
		}
		if (ns.size > 5) {
			err = dwunw_symbolize(&ctx, mod, ns.addr + 5, &sym);
			is_int(err, DWUNW_OK, "%s: %s+5 found", label, ns.name);
			is_str(sym.name, ns.name, "%s: %s+5 name", label, ns.name);
			is_hex(sym.offset, 5, "%s: %s+5 offset", label, ns.name);
		}
		/* Every address of the function against addr2line. */
		uint64_t addrs[256];
		char (*paths)[512] = malloc(256 * 512);
		unsigned lines[256];
		size_t na = 0;
		int mism = 0;
		for (uint64_t a = ns.addr; a < ns.addr + ns.size && na < 256; a++)
			addrs[na++] = a;
		if (paths && addr2line_many(prog, addrs, na, paths, lines) == 0) {
			for (size_t k = 0; k < na; k++) {
				if (dwunw_symbolize(&ctx, mod, addrs[k], &sym) != DWUNW_OK || strcmp(sym.name, ns.name) ||
				    sym.offset != addrs[k] - ns.addr) {
					mism++;
					continue;
				}
				if (lines[k] != sym.line || strcmp(base_name(paths[k]), base_name(sym.file))) {
					if (mism < 3)
						printf("# %s 0x%llx: ours %s:%u, addr2line %s:%u\n", ns.name,
						       (unsigned long long)addrs[k], sym.file, sym.line, paths[k], lines[k]);
					mism++;
				}
			}
			is_int(mism, 0, "%s: %s: all %zu addresses agree with addr2line", label, ns.name, na);
		}
		free(paths);
	}
	/* dwunw_symbolize_frame: a return address is looked up at pc - 1, offset as gdb shows it. */
	struct nm_sym g;
	if (mod && nm_find("", prog, "global_func", &g)) {
		struct dwunw_frame f = { .module = mod, .module_addr = g.addr + 5, .how = DWUNW_HOW_CFI };
		struct dwunw_symbol sym, at4;
		is_int(dwunw_symbolize_frame(&ctx, &f, &sym), DWUNW_OK, "%s: frame symbolized", label);
		is_str(sym.name, g.name, "%s: frame name", label);
		is_hex(sym.offset, 5, "%s: return address offset counts from the call", label);
		dwunw_symbolize(&ctx, mod, g.addr + 4, &at4);
		is_int(sym.line, at4.line, "%s: return address line is the call's (pc - 1)", label);
		f.how = DWUNW_HOW_INITIAL;
		is_int(dwunw_symbolize_frame(&ctx, &f, &sym), DWUNW_OK, "%s: frame 0", label);
		is_hex(sym.offset, 5, "%s: frame 0 offset", label);
		f.module = NULL;
		is_int(dwunw_symbolize_frame(&ctx, &f, &sym), DWUNW_ERR_NO_MODULE, "%s: no module", label);
	}
	if (mod) {
		struct dwunw_symbol sym;
		is_int(dwunw_symbolize(&ctx, mod, 0x7fff00000000ull, &sym), DWUNW_ERR_NOT_FOUND,
		       "%s: address outside every symbol", label);
		is_str(sym.name, "", "%s: no name then", label);
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
	tprefix = "";
}

/* ---- untyped labels ---------------------------------------------------------------------------- */

static const char asm_prog[] =
	"__asm__(\".text\\n.globl untyped_entry\\nuntyped_entry:\\n\\tnop\\n\\tnop\\n\\tnop\\n\\tret\\n\");\n"
	"int __attribute__((noinline)) typed_fn(int x)\n"
	"{\n"
	"	__asm__ volatile(\".globl label_inside\\nlabel_inside:\\n\\tnop\");\n"
	"	return x * 3 + 1;\n"
	"}\n"
	"int main(int argc, char **argv) { (void)argv; return typed_fn(argc); }\n";

static void check_notype(void)
{
	char prog[512];
	struct dwunw_ctx ctx;
	struct dwunw_module *mod;
	struct nm_sym u, in, f;
	struct dwunw_symbol sym;

	snprintf(prog, sizeof(prog), "%s", tpath("asm_prog"));
	if (write_file(tpath("asm.c"), asm_prog) || shell("gcc -O2 -o '%s' '%s'", prog, tpath("asm.c")) ||
	    !nm_find("", prog, "untyped_entry", &u) || !nm_find("", prog, "label_inside", &in) ||
	    !nm_find("", prog, "typed_fn", &f)) {
		ok(0, "build the program with untyped labels");
		return;
	}
	ctx_open(&ctx, tpath("no-debug"), 0);
	if (dwunw_module_open(&ctx, prog, &mod) == DWUNW_OK) {
		is_int(dwunw_symbolize(&ctx, mod, u.addr + 2, &sym), DWUNW_OK, "untyped label found");
		is_str(sym.name, "untyped_entry", "an untyped code label no function covers names its code");
		is_hex(sym.offset, 2, "untyped label offset");
		is_int(dwunw_symbolize(&ctx, mod, in.addr, &sym), DWUNW_OK, "label inside a function");
		is_str(sym.name, f.name, "a label inside a function does not hide the function");
		is_hex(sym.offset, in.addr - f.addr, "offset from the function");
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
}

/* ---- (b) C++ names ---------------------------------------------------------------------------- */

static void check_cxx(void)
{
	char prog[512];
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	int n = 0;

	snprintf(prog, sizeof(prog), "%s", tpath("cxx"));
	if (shell("g++ -O2 -g -o '%s' '%s'", prog, tpath("prog.cc"))) {
		ok(0, "build the C++ program");
		return;
	}
	ctx_open(&ctx, tpath("no-debug"), 0);
	is_int(dwunw_module_open(&ctx, prog, &mod), DWUNW_OK, "C++: module open");
	char *text = output("nm '%s'", prog);
	for (char *line = text ? strtok(text, "\n") : NULL; line && mod; line = strtok(NULL, "\n")) {
		unsigned long long a;
		char t, name[512];
		if (sscanf(line, "%llx %c %511s", &a, &t, name) != 3 || (t != 't' && t != 'T' && t != 'W'))
			continue;
		if (!strstr(name, "5outer5inner"))
			continue;
		char *want = output("c++filt '%s'", name);
		if (!want)
			continue;
		want[strcspn(want, "\n")] = 0;
		struct dwunw_symbol sym;
		is_int(dwunw_symbolize(&ctx, mod, a, &sym), DWUNW_OK, "C++: %s found", name);
		is_str(sym.name, want, "C++: %s demangled as c++filt does", name);
		char want_path[512];
		unsigned want_line;
		if (addr2line(prog, a, want_path, sizeof(want_path), &want_line) == 0) {
			is_str(base_name(sym.file), base_name(want_path), "C++: %s file = addr2line's", name);
			is_int(sym.line, want_line, "C++: %s line = addr2line's", name);
		}
		free(want);
		n++;
	}
	free(text);
	ok(n >= 3, "C++: %d namespace/class/template functions checked", n);
	if (mod)
		put_module(&ctx, mod);
	dwunw_shutdown(&ctx);
}

/* ---- (c) separate debug files ------------------------------------------------------------------- */

/* Symbolize `func` of the original program in module `path`: its flags, or -1 when misnamed. */
static int debug_case(const char *label, const char *debug_dirs, uint32_t cfg_flags, const char *path,
		      const char *orig, const char *func, int want_found, uint32_t want_flags)
{
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	struct dwunw_symbol sym;
	struct nm_sym ns;
	char want_path[512];
	unsigned want_line;
	int err;

	if (!nm_find("", orig, func, &ns)) {
		ok(0, "%s: nm has %s", label, func);
		return -1;
	}
	ctx_open(&ctx, debug_dirs, cfg_flags);
	err = dwunw_module_open(&ctx, path, &mod);
	is_int(err, DWUNW_OK, "%s: module open", label);
	if (err) {
		dwunw_shutdown(&ctx);
		return -1;
	}
	err = dwunw_symbolize(&ctx, mod, ns.addr + 3, &sym);
	if (want_found) {
		is_int(err, DWUNW_OK, "%s: %s found", label, ns.name);
		is_str(sym.name, ns.name, "%s: %s named", label, ns.name);
		is_hex(sym.offset, 3, "%s: offset", label);
		is_hex(sym.flags, want_flags, "%s: flags", label);
		if (want_flags == DWUNW_SYM_FROM_DEBUG_FILE &&
		    addr2line(orig, ns.addr, want_path, sizeof(want_path), &want_line) == 0) {
			dwunw_symbolize(&ctx, mod, ns.addr, &sym);
			is_str(base_name(sym.file), base_name(want_path), "%s: file from the debug file", label);
			is_int(sym.line, want_line, "%s: line from the debug file", label);
		}
	} else {
		ok(err != DWUNW_OK || strcmp(sym.name, ns.name) != 0, "%s: %s not named (got \"%s\")", label,
		   ns.name, sym.name);
		ok(!(sym.flags & DWUNW_SYM_FROM_DEBUG_FILE), "%s: no debug file used", label);
	}
	put_module(&ctx, mod);
	dwunw_shutdown(&ctx);
	return 0;
}

static void check_debug_files(void)
{
	char orig[512];
	char bid[128];

	snprintf(orig, sizeof(orig), "%s", tpath("dbg_orig"));
	char *text;

	if (shell("gcc -O2 -g -Wl,--build-id -o '%s' '%s'", orig, tpath("prog.c")) ||
	    shell("mkdir -p '%s' '%s' '%s' '%s' '%s/.debug' '%s'", tpath("dbgroot"), tpath("bin"),
		  tpath("link"), tpath("badlink"), tpath("sub"), tpath("nodbg")) ||
	    shell("objcopy --only-keep-debug '%s' '%s'", orig, tpath("dbg_orig.debug")) ||
	    shell("strip --strip-all -o '%s' '%s'", tpath("bin/prog"), orig)) {
		ok(0, "build the stripped program and its debug file");
		return;
	}
	text = output("readelf -n '%s' | awk '/Build ID/ {print $3}'", orig);
	snprintf(bid, sizeof(bid), "%s", text ? text : "");
	bid[strcspn(bid, "\n")] = 0;
	free(text);
	if (!ok(strlen(bid) > 2, "the program has a build-id (%s)", bid))
		return;
	shell("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s/.build-id/%.2s/%s.debug'", tpath("dbgroot"), bid,
	      tpath("dbg_orig.debug"), tpath("dbgroot"), bid, bid + 2);

	/* By build-id; with two roots, the first one empty. */
	char dirs[1100];
	snprintf(dirs, sizeof(dirs), "%s:%s", tpath("nodbg"), tpath("dbgroot"));
	debug_case("build-id", dirs, 0, tpath("bin/prog"), orig, "helper_static", 1, DWUNW_SYM_FROM_DEBUG_FILE);
	debug_case("build-id global", dirs, 0, tpath("bin/prog"), orig, "global_func", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);
	debug_case("DWUNW_CFG_NO_DEBUG_FILES", dirs, DWUNW_CFG_NO_DEBUG_FILES, tpath("bin/prog"), orig,
		   "helper_static", 0, 0);
	debug_case("stripped, no debug file", tpath("nodbg"), 0, tpath("bin/prog"), orig, "other_static", 0, 0);

	/* By .gnu_debuglink in the module's directory (objcopy computes the CRC from the file). */
	shell("cp '%s' '%s/prog.dbg' && cd '%s' && objcopy --add-gnu-debuglink=prog.dbg '%s' prog",
	      tpath("dbg_orig.debug"), tpath("link"), tpath("link"), tpath("bin/prog"));
	debug_case("debuglink", tpath("nodbg"), 0, tpath("link/prog"), orig, "other_static", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);

	/* In its .debug/ subdirectory. */
	shell("cp '%s/prog' '%s/prog' && cp '%s/prog.dbg' '%s/.debug/prog.dbg'", tpath("link"), tpath("sub"),
	      tpath("link"), tpath("sub"));
	debug_case("debuglink .debug/", tpath("nodbg"), 0, tpath("sub/prog"), orig, "other_static", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);

	/* Under ROOT/<module's directory>/. */
	shell("mkdir -p '%s%s' && cp '%s/prog.dbg' '%s%s/prog.dbg' && mkdir -p '%s' && cp '%s/prog' '%s/prog'",
	      tpath("rootlink"), tpath("deep"), tpath("link"), tpath("rootlink"), tpath("deep"), tpath("deep"),
	      tpath("link"), tpath("deep"));
	debug_case("debuglink ROOT/dir", tpath("rootlink"), 0, tpath("deep/prog"), orig, "helper_static", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);

	/* A debug file whose CRC does not match is not used. */
	shell("cp '%s/prog' '%s/prog' && cp '%s/prog.dbg' '%s/prog.dbg' && printf 'x' >> '%s/prog.dbg'",
	      tpath("link"), tpath("badlink"), tpath("link"), tpath("badlink"), tpath("badlink"));
	debug_case("debuglink, wrong CRC", tpath("nodbg"), 0, tpath("badlink/prog"), orig, "other_static", 0, 0);

	/* A build-id path holding the debug file of another build is not used. */
	static const char ida[] = "aaaa56789abcdef0123456789abcdef012345678";
	static const char idb[] = "bbbb56789abcdef0123456789abcdef012345678";
	shell("cd '%s' && gcc -O0 -g -Wl,--build-id=0x%s -o bid_a prog.c && "
	      "gcc -O2 -g -Wl,--build-id=0x%s -o bid_b prog.c && strip -o bid_b.s bid_b && "
	      "mkdir -p wrongroot/.build-id/%.2s && objcopy --only-keep-debug bid_a wrongroot/.build-id/%.2s/%s.debug",
	      tmpdir, ida, idb, idb, idb, idb + 2);
	debug_case("build-id path holding another build", tpath("wrongroot"), 0, tpath("bid_b.s"), tpath("bid_b"),
		   "helper_static", 0, 0);

	/* Under a sysroot: the module path includes it (as the unwinder passes it), the default
	 * /usr/lib/debug is looked up inside it, by build-id and by debuglink. */
	char sysroot[512];
	snprintf(sysroot, sizeof(sysroot), "%s", tpath("sysroot"));
	shell("mkdir -p '%s/usr/bin' '%s/usr/lib/debug/.build-id/%.2s' '%s/usr/lib/debug/usr/bin' && "
	      "cp '%s' '%s/usr/bin/prog' && cp '%s' '%s/usr/lib/debug/.build-id/%.2s/%s.debug' && "
	      "cp '%s/prog' '%s/usr/bin/linked' && cp '%s/prog.dbg' '%s/usr/lib/debug/usr/bin/prog.dbg'",
	      sysroot, sysroot, bid, sysroot, tpath("bin/prog"), sysroot, tpath("dbg_orig.debug"), sysroot, bid,
	      bid + 2, tpath("link"), sysroot, tpath("link"), sysroot);
	case_sysroot = sysroot;
	debug_case("sysroot build-id", NULL, 0, tpath("sysroot/usr/bin/prog"), orig, "helper_static", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);
	shell("rm -rf '%s/usr/lib/debug/.build-id'", sysroot);
	debug_case("sysroot debuglink", NULL, 0, tpath("sysroot/usr/bin/linked"), orig, "helper_static", 1,
		   DWUNW_SYM_FROM_DEBUG_FILE);
	case_sysroot = NULL;

	/* dw_debuglink reads the name and CRC objcopy wrote. */
	struct dw_elf e;
	if (dw_elf_open_path(&e, tpath("link/prog")) == DWUNW_OK) {
		const char *name;
		uint32_t crc;
		char *want = output("python3 -c \"import zlib;print(zlib.crc32(open('%s','rb').read()))\"",
				    tpath("link/prog.dbg"));
		is_int(dw_debuglink(&e, &name, &crc), 0, "dw_debuglink parses .gnu_debuglink");
		is_str(name, "prog.dbg", "debuglink name");
		if (want)
			is_int(crc, strtoull(want, NULL, 10), "debuglink CRC = zlib.crc32 of the file");
		free(want);
		dw_elf_close(&e);
	}
}

/* ---- (d) MiniDebugInfo ---------------------------------------------------------------------------- */

static void check_minidebuginfo(void)
{
	char orig[512];

	snprintf(orig, sizeof(orig), "%s", tpath("mdi_orig"));

	if (shell("command -v xz >/dev/null")) {
		SKIP("MiniDebugInfo: no xz command (xz-utils)");
		return;
	}
	/* As Fedora's find-debuginfo does: the function symbols .dynsym lacks, in an xz'd ELF. */
	int rc = shell("cd '%s' && gcc -O2 -g -Wl,--build-id -o mdi_orig prog.c && "
		       "nm -D mdi_orig --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms && "
		       "nm mdi_orig --format=posix --defined-only | awk '{ if ($2 == \"T\" || $2 == \"t\") print $1 }' "
		       "| sort > funcsyms && comm -13 dynsyms funcsyms > keep_symbols && "
		       "objcopy --only-keep-debug mdi_orig mini && "
		       "objcopy -S --remove-section .gdb_index --remove-section .comment "
		       "--keep-symbols=keep_symbols mini mini.sym && "
		       "rm -f mini.sym.xz && xz -k mini.sym && "
		       "strip --strip-all -o mdi_prog mdi_orig && "
		       "objcopy --add-section .gnu_debugdata=mini.sym.xz mdi_prog",
		       tmpdir);
	if (!ok(rc == 0, "build a MiniDebugInfo binary"))
		return;
	debug_case("MiniDebugInfo", tpath("nodbg"), DWUNW_CFG_NO_DEBUG_FILES, tpath("mdi_prog"), orig,
		   "helper_static", 1, DWUNW_SYM_FROM_DEBUGDATA);
	debug_case("MiniDebugInfo other", tpath("nodbg"), 0, tpath("mdi_prog"), orig, "other_static", 1,
		   DWUNW_SYM_FROM_DEBUGDATA);

	/* A corrupt xz stream is no crash: the static function is simply not named. */
	shell("cd '%s' && head -c 100 mini.sym.xz > bad.xz && head -c 2000 /dev/zero >> bad.xz && "
	      "strip --strip-all -o mdi_bad mdi_orig && objcopy --add-section .gnu_debugdata=bad.xz mdi_bad",
	      tmpdir);
	debug_case("MiniDebugInfo, corrupt xz", tpath("nodbg"), 0, tpath("mdi_bad"), orig, "helper_static", 0, 0);

	/* dw_xz_decode: the output cap holds. */
	FILE *f = fopen(tpath("mini.sym.xz"), "rb");
	if (f) {
		static uint8_t buf[1 << 20];
		size_t n = fread(buf, 1, sizeof(buf), f), size;
		uint8_t *out;
		fclose(f);
		is_int(dw_xz_decode(buf, n, 16 << 20, &out, &size), DWUNW_OK, "xz decodes");
		ok(size > 64 && memcmp(out, "\177ELF", 4) == 0, "into an ELF of %zu bytes", size);
		free(out);
		ok(dw_xz_decode(buf, n, 100, &out, &size) != DWUNW_OK, "a 100-byte cap refuses it");
		ok(dw_xz_decode(buf, n / 2, 16 << 20, &out, &size) != DWUNW_OK, "half a stream is refused");
	}
}

/* ---- (e) the system libc with libc6-dbg ------------------------------------------------------------ */

static void check_libc(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_module *mod = NULL;
	char bid[128], dbg[512];
	char *text;
	struct nm_sym internal, mal;
	const char *cands[] = { "__libc_start_call_main", "_IO_new_file_xsputn", "_int_malloc" };
	int have_internal = 0;

	text = output("readelf -n %s | awk '/Build ID/ {print $3}'", LIBC);
	snprintf(bid, sizeof(bid), "%s", text ? text : "");
	bid[strcspn(bid, "\n")] = 0;
	free(text);
	snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", bid, bid + 2);
	if (access(dbg, R_OK) != 0) {
		SKIP("libc: no debug file %s (libc6-dbg not installed)", dbg);
		return;
	}
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]) && !have_internal; i++) {
		struct nm_sym d;
		if (nm_find("", dbg, cands[i], &internal) && !nm_find("-D", LIBC, cands[i], &d))
			have_internal = 1;
	}
	ok(have_internal, "libc: an internal function from the debug file (%s)", have_internal ? internal.name : "-");
	if (ctx_open(&ctx, NULL, 0) || dwunw_module_open(&ctx, LIBC, &mod)) {
		ok(0, "libc: module open");
		return;
	}
	if (have_internal) {
		struct dwunw_symbol sym;
		char want_path[512];
		unsigned want_line;
		is_int(dwunw_symbolize(&ctx, mod, internal.addr + 2, &sym), DWUNW_OK, "libc: %s found", internal.name);
		is_str(sym.name, internal.name, "libc: %s named", internal.name);
		is_hex(sym.offset, 2, "libc: offset");
		is_hex(sym.flags, DWUNW_SYM_FROM_DEBUG_FILE, "libc: from the debug file");
		/* elfutils' eu-addr2line reads the line table as gdb does; binutils 2.40's addr2line
		 * names the CU's primary file for rows of an included header under DWARF 5. */
		char *eu = output("eu-addr2line -e '%s' 0x%llx 2>/dev/null", dbg,
				  (unsigned long long)(internal.addr + 2));
		if (eu && strrchr(eu, ':')) {
			eu[strcspn(eu, "\n")] = 0;
			char *c2 = strrchr(eu, ':'), *c1;
			*c2 = 0;
			c1 = strrchr(eu, ':');
			/* "path:line:column" or "path:line" */
			if (c1 && strspn(c1 + 1, "0123456789") == strlen(c1 + 1)) {
				*c1 = 0;
				want_line = (unsigned)strtoul(c1 + 1, NULL, 10);
			} else {
				want_line = (unsigned)strtoul(c2 + 1, NULL, 10);
			}
			is_str(sym.file, eu, "libc: file = eu-addr2line's");
			is_int(sym.line, want_line, "libc: line = eu-addr2line's");
		} else if (addr2line(dbg, internal.addr + 2, want_path, sizeof(want_path), &want_line) == 0) {
			is_int(sym.line, want_line, "libc: line = addr2line's");
		}
		free(eu);
		/* DWUNW_CFG_NO_LINES: names only; dwunw_source_line gives the same file:line apart */
		struct dwunw_ctx nl;
		struct dwunw_module *nm;
		if (ctx_open(&nl, NULL, DWUNW_CFG_NO_LINES) == DWUNW_OK && dwunw_module_open(&nl, LIBC, &nm) == DWUNW_OK) {
			struct dwunw_symbol s2;
			char file[256];
			uint32_t line;
			is_int(dwunw_symbolize(&nl, nm, internal.addr + 2, &s2), DWUNW_OK, "NO_LINES: %s found", internal.name);
			is_str(s2.name, sym.name, "NO_LINES: the same name");
			ok(s2.file[0] == 0 && s2.line == 0, "NO_LINES: no file:line from dwunw_symbolize");
			is_int(dwunw_source_line(&nl, nm, internal.addr + 2, file, sizeof(file), &line), DWUNW_OK,
			       "dwunw_source_line: found");
			is_str(file, sym.file, "dwunw_source_line: dwunw_symbolize's file");
			is_int(line, sym.line, "dwunw_source_line: and line");
			is_int(dwunw_source_line(&nl, nm, 0, file, sizeof(file), &line), DWUNW_ERR_NOT_FOUND,
			       "dwunw_source_line: address 0 has none");
			ok(file[0] == 0 && line == 0, "dwunw_source_line: none is \"\" and 0");
			is_int(dwunw_source_line(&nl, NULL, 0, file, sizeof(file), &line), DWUNW_ERR_NO_MODULE,
			       "dwunw_source_line: no module");
			dwunw_module_put(&nl, nm);
			dwunw_shutdown(&nl);
		} else {
			ok(0, "NO_LINES: context and libc opened");
		}
	}
	/* 400 addresses spread over libc's code: line and file name as eu-addr2line (and gdb) give them. */
	if (shell("command -v eu-addr2line >/dev/null") == 0 && mod->elf.exec_hi > mod->elf.exec_lo) {
		enum { N = 400 };
		uint64_t addrs[N];
		size_t cap = 64 + strlen(dbg) + N * 20, len;
		char *cmd = malloc(cap), *text, *save = NULL, *line;
		int agree = 0, none = 0, n = 0;
		uint64_t span = mod->elf.exec_hi - mod->elf.exec_lo;
		len = (size_t)snprintf(cmd, cap, "eu-addr2line -e '%s'", dbg);
		uint32_t x = 2463534242u; /* xorshift32: the same sample every run */
		for (int i = 0; i < N; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			addrs[i] = mod->elf.exec_lo + x % span;
			len += (size_t)snprintf(cmd + len, cap - len, " 0x%llx", (unsigned long long)addrs[i]);
		}
		text = output("%s 2>/dev/null", cmd);
		free(cmd);
		for (line = text ? strtok_r(text, "\n", &save) : NULL; line && n < N; line = strtok_r(NULL, "\n", &save), n++) {
			struct dwunw_symbol sym;
			unsigned want_line = 0;
			char *c2 = strrchr(line, ':'), *c1;
			if (c2) {
				*c2 = 0;
				c1 = strrchr(line, ':');
				if (c1 && strspn(c1 + 1, "0123456789") == strlen(c1 + 1)) {
					*c1 = 0; /* path:line:column */
					want_line = (unsigned)strtoul(c1 + 1, NULL, 10);
				} else {
					want_line = (unsigned)strtoul(c2 + 1, NULL, 10);
				}
			}
			dwunw_symbolize(&ctx, mod, addrs[n], &sym);
			if (!want_line || !strncmp(line, "??", 2)) {
				none++;
				agree += sym.line == 0;
			} else if (sym.line == want_line && !strcmp(base_name(sym.file), base_name(line))) {
				agree++;
			} else if (agree - n > -3) {
				printf("# 0x%llx: ours %s:%u, eu-addr2line %s:%u\n", (unsigned long long)addrs[n], sym.file,
				       sym.line, line, want_line);
			}
		}
		free(text);
		ok(n == N && agree == N, "libc: %d/%d sampled addresses agree with eu-addr2line (%d without lines)",
		   agree, n, none);
	}

	if (!ok(nm_find("-D", LIBC, "malloc", &mal), "libc: nm -D has malloc"))
		mal.addr = 0;
	else {
		struct dwunw_symbol sym;
		is_int(dwunw_symbolize(&ctx, mod, mal.addr + 1, &sym), DWUNW_OK, "libc: malloc found");
		is_str(sym.name, "malloc", "libc: malloc named");
		is_hex(sym.offset, 1, "libc: malloc offset");
	}
	put_module(&ctx, mod);

	/* The same without the debug file: .dynsym names only. */
	dwunw_shutdown(&ctx);
	ctx_open(&ctx, NULL, DWUNW_CFG_NO_DEBUG_FILES);
	if (dwunw_module_open(&ctx, LIBC, &mod) == DWUNW_OK) {
		struct dwunw_symbol sym;
		is_int(dwunw_symbolize(&ctx, mod, mal.addr + 1, &sym), DWUNW_OK, "libc .dynsym: malloc found");
		is_str(sym.name, "malloc", "libc .dynsym: malloc named");
		is_hex(sym.flags, DWUNW_SYM_DYNSYM, "libc .dynsym: flagged DYNSYM");
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);

	/* Figures: symbol index with the debug file, then the first line lookup. */
	ctx_open(&ctx, NULL, 0);
	if (dwunw_module_open(&ctx, LIBC, &mod) == DWUNW_OK) {
		struct dw_symtab *s = NULL;
		struct dw_symtab_stats st;
		struct dwunw_symbol sym;
		uint64_t t0 = now_ns();
		is_int(dw_symtab_build(dw_ctx(&ctx), mod, &s), DWUNW_OK, "libc: dw_symtab_build");
		uint64_t t1 = now_ns();
		dw_symtab_lookup(s, mal.addr, &sym, true);
		uint64_t t2 = now_ns();
		for (int i = 0; i < 100000; i++)
			dw_symtab_lookup(s, mal.addr + (uint64_t)(i % 64), &sym, true);
		uint64_t t3 = now_ns();
		dw_symtab_stats(s, &st);
		printf("# libc symtab build %.2f ms (%llu symbols, debug file %s); first lookup (line table) %.2f ms "
		       "(%llu rows, %llu files, %u units, %u bad, %.1f MiB); lookup %.0f ns\n",
		       (t1 - t0) / 1e6, (unsigned long long)st.nsyms, st.debug_file ? st.debug_file : "-",
		       (t2 - t1) / 1e6, (unsigned long long)st.lines.rows, (unsigned long long)st.lines.files,
		       st.lines.units, st.lines.bad_units, st.lines.bytes / 1048576.0, (t3 - t2) / 1e5);
		ok(st.lines.rows > 10000 && st.lines.bad_units == 0, "libc: line table has %llu rows, no bad unit",
		   (unsigned long long)st.lines.rows);
		dw_symtab_free(s);
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
}

/* ---- concurrency: the lazy builds race ------------------------------------------------------------- */

struct race {
	struct dwunw_ctx *ctx;
	struct dwunw_module *mod;
	uint64_t addr;
	struct dwunw_symbol out;
	int err;
};

static void *race_fn(void *arg)
{
	struct race *r = arg;
	r->err = dwunw_symbolize(r->ctx, r->mod, r->addr, &r->out);
	return NULL;
}

static void check_threads(void)
{
	struct dwunw_ctx ctx;
	struct dwunw_module *mod;
	struct nm_sym ns;
	struct race r[8];
	pthread_t th[8];
	const char *prog = tpath("c_gcc_dwarf-5");

	if (!nm_find("", prog, "helper_static", &ns) || ctx_open(&ctx, tpath("no-debug"), 0))
		return;
	if (dwunw_module_open(&ctx, prog, &mod) == DWUNW_OK) {
		for (int i = 0; i < 8; i++) {
			r[i] = (struct race){ .ctx = &ctx, .mod = mod, .addr = ns.addr + 1 };
			pthread_create(&th[i], NULL, race_fn, &r[i]);
		}
		int same = 1;
		for (int i = 0; i < 8; i++) {
			pthread_join(th[i], NULL);
			same &= r[i].err == DWUNW_OK && strcmp(r[i].out.name, ns.name) == 0 &&
				r[i].out.line == r[0].out.line && r[i].out.line > 0;
		}
		ok(same, "8 threads building the index at once agree");
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
}

/* ---- (f) bad input ------------------------------------------------------------------------------------ */

static int patch_file(const char *path, uint64_t off, const void *bytes, size_t n)
{
	FILE *f = fopen(path, "r+b");
	if (!f)
		return -1;
	int rc = fseek(f, (long)off, SEEK_SET) == 0 && fwrite(bytes, 1, n, f) == n ? 0 : -1;
	return fclose(f) ? -1 : rc;
}

/* Module-level: a copy of the DWARF 5 program with its .debug_line damaged. */
static void bad_line_module(const char *label, uint64_t rel, const void *bytes, size_t n, int want_line0)
{
	const char *src = tpath("c_gcc_dwarf-5"), *dst = tpath("bad_%s", label);
	struct dw_elf e;
	struct dwunw_ctx ctx;
	struct dwunw_module *mod;
	uint64_t off, size;

	if (dw_elf_open_path(&e, src))
		return;
	off = e.sec[DW_SEC_DEBUG_LINE].file_off;
	size = e.sec[DW_SEC_DEBUG_LINE].size;
	dw_elf_close(&e);
	if (shell("cp '%s' '%s'", src, dst) || rel + n > size || patch_file(dst, off + rel, bytes, n)) {
		ok(0, "%s: damage .debug_line", label);
		return;
	}
	ctx_open(&ctx, tpath("no-debug"), 0);
	if (dwunw_module_open(&ctx, dst, &mod) == DWUNW_OK) {
		int good = 1;
		for (size_t i = 0; i < sizeof(c_funcs) / sizeof(c_funcs[0]); i++) {
			struct nm_sym ns;
			struct dwunw_symbol sym;
			if (!nm_find("", dst, c_funcs[i], &ns))
				continue;
			for (uint64_t a = ns.addr; a < ns.addr + ns.size; a++) {
				int err = dwunw_symbolize(&ctx, mod, a, &sym);
				good &= err == DWUNW_OK && strcmp(sym.name, ns.name) == 0;
				if (want_line0)
					good &= sym.line == 0 && sym.file[0] == 0;
			}
		}
		ok(good, "%s: names still right%s", label, want_line0 ? ", no line information" : "");
		put_module(&ctx, mod);
	}
	dwunw_shutdown(&ctx);
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void check_bad_input(void)
{
	uint8_t ff[64];
	memset(ff, 0xff, sizeof(ff));
	/* unit_length: DWARF64 escape followed by a huge length. */
	bad_line_module("unit_length", 0, ff, 12, 1);
	/* version 0xffff. */
	bad_line_module("version", 4, ff, 2, 1);
	/* line_range 0 (v5: length 4, version 2, addr/seg 2, header_length 4, min_inst, max_ops,
	 * default_is_stmt, line_base, then line_range at 16 and opcode_base at 17). */
	uint8_t zero = 0;
	bad_line_module("line_range", 16, &zero, 1, 1);
	bad_line_module("opcode_base", 17, &zero, 1, 1);
	/* header_length past the unit. */
	bad_line_module("header_length", 8, ff, 4, 1);
	/* The whole middle of the program garbled: names stay, lines are whatever remains. */
	bad_line_module("garbled", 60, ff, 40, 0);

	/* Fuzz the parser on the DWARF 4 and 5 sections: random bytes, truncations. */
	const char *progs[] = { tpath("c_gcc_dwarf-4"), tpath("c_gcc_dwarf-5"), tpath("c_clang_dwarf-5"),
				tpath("cxx") };
	int runs = 0, crashes_none = 1;
	for (size_t p = 0; p < sizeof(progs) / sizeof(progs[0]); p++) {
		struct dw_elf e;
		const struct dw_section *ls, *lstr;
		if (dw_elf_open_path(&e, progs[p]) || dw_elf_section(&e, DW_SEC_DEBUG_LINE, &ls)) {
			dw_elf_close(&e);
			continue;
		}
		int have_lstr = dw_elf_section(&e, DW_SEC_DEBUG_LINE_STR, &lstr) == 0;
		uint8_t *buf = malloc(ls->size);
		for (int iter = 0; iter < 400; iter++) {
			memcpy(buf, ls->data, ls->size);
			uint64_t size = ls->size;
			int k = (int)(rnd() % 8) + 1;
			for (int j = 0; j < k; j++)
				buf[rnd() % size] = (uint8_t)rnd();
			if (iter % 4 == 0)
				size = rnd() % size;
			struct dw_line_input in = {
				.line = buf, .line_size = size, .addr_size = 8, .drop_zero = 1,
				.line_str = have_lstr ? lstr->data : NULL, .line_str_size = have_lstr ? lstr->size : 0,
			};
			struct dw_lines *l = NULL;
			if (dw_lines_build(&in, &l) != DWUNW_OK) {
				crashes_none = 0;
				continue;
			}
			char file[256];
			uint32_t line;
			for (uint64_t a = 0; a < 0x4000; a += 7)
				dw_lines_lookup(l, a, file, sizeof(file), &line);
			dw_lines_free(l);
			runs++;
		}
		free(buf);
		dw_elf_close(&e);
	}
	ok(runs > 1000 && crashes_none, "%d damaged .debug_line sections parsed without a crash", runs);

	/* Hand-made DWARF 3 unit: define_file, fixed_advance_pc, const_add_pc, an unknown extended and an
	 * unknown standard opcode (opcode_base 14 declares opcode 13 with 2 operands). */
	static const uint8_t v3[] = {
		0, 0, 0, 0,             /* unit_length, patched below */
		3, 0,                   /* version 3 */
		0, 0, 0, 0,             /* header_length, patched below */
		1,                      /* min_inst_length */
		1,                      /* default_is_stmt */
		(uint8_t)-5,            /* line_base */
		14,                     /* line_range */
		14,                     /* opcode_base */
		0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 2, /* standard_opcode_lengths[1..13] */
		'/', 'i', 'n', 'c', 0, 0,              /* include_directories */
		'a', '.', 'c', 0, 1, 0, 0, 0,          /* file 1: /inc/a.c */
		/* program */
		0, 9, 2, 0x00, 0x10, 0, 0, 0, 0, 0, 0, /* set_address 0x1000 */
		0x01,                   /* copy: 0x1000 line 1 file 1 */
		0, 8, 3, 'b', '.', 'c', 0, 0, 0, 0,   /* define_file b.c, dir 0, mtime, size (file 2) */
		4, 2,                   /* set_file 2 */
		3, 9,                   /* advance_line +9 -> 10 */
		9, 0x10, 0,             /* fixed_advance_pc 0x10 -> 0x1010 */
		0x01,                   /* copy: 0x1010 line 10 file 2 */
		0, 3, 0x80, 1, 2,       /* unknown extended opcode 0x80, 2 operand bytes */
		13, 0x81, 0x01, 5,      /* unknown standard opcode 13: two ULEBs */
		8,                      /* const_add_pc: (255-14)/14 = 17 -> 0x1021 */
		4, 1,                   /* set_file 1 */
		0x01,                   /* copy: 0x1021 line 10 file 1 */
		2, 0x0f,                /* advance_pc 15 -> 0x1030 */
		0, 1, 1,                /* end_sequence at 0x1030 */
	};
	uint8_t unit[sizeof(v3)];
	memcpy(unit, v3, sizeof(v3));
	uint32_t ul = sizeof(v3) - 4, hl = 0;
	/* header ends after the file list: find the program start (the set_address). */
	for (size_t i = 10; i + 2 < sizeof(v3); i++)
		if (v3[i] == 0 && v3[i + 1] == 9 && v3[i + 2] == 2) {
			hl = (uint32_t)(i - 10);
			break;
		}
	memcpy(unit, &ul, 4);
	memcpy(unit + 6, &hl, 4);
	struct dw_line_input in = { .line = unit, .line_size = sizeof(unit), .addr_size = 8 };
	struct dw_lines *l = NULL;
	char file[256];
	uint32_t line;
	is_int(dw_lines_build(&in, &l), DWUNW_OK, "v3: built");
	int found = dw_lines_lookup(l, 0x1000, file, sizeof(file), &line);
	ok(found && line == 1 && !strcmp(file, "/inc/a.c"), "v3: 0x1000 -> %s:%u", file, line);
	found = dw_lines_lookup(l, 0x100f, file, sizeof(file), &line);
	ok(found && line == 1, "v3: 0x100f still line 1");
	found = dw_lines_lookup(l, 0x1010, file, sizeof(file), &line);
	ok(found && line == 10 && !strcmp(file, "b.c"), "v3: define_file + fixed_advance_pc -> %s:%u", file, line);
	found = dw_lines_lookup(l, 0x1021, file, sizeof(file), &line);
	ok(found && line == 10 && !strcmp(file, "/inc/a.c"),
	   "v3: unknown opcodes skipped, const_add_pc -> 0x1021 %s:%u", file, line);
	ok(dw_lines_lookup(l, 0x102f, file, sizeof(file), &line), "v3: last byte of the sequence");
	ok(!dw_lines_lookup(l, 0x1030, file, sizeof(file), &line), "v3: end_sequence ends it");
	ok(!dw_lines_lookup(l, 0xfff, file, sizeof(file), &line), "v3: before the sequence");
	dw_lines_free(l);

	/* Two units: the first corrupt (line_range 0), the second fine, found after skipping. */
	uint8_t two[2 * sizeof(v3)];
	memcpy(two, unit, sizeof(unit));
	memcpy(two + sizeof(unit), unit, sizeof(unit));
	two[13] = 0; /* line_range of the first */
	in.line = two;
	in.line_size = sizeof(two);
	is_int(dw_lines_build(&in, &l), DWUNW_OK, "two units, first corrupt: built");
	struct dw_lines_stats st;
	dw_lines_stats(l, &st);
	ok(st.units == 2 && st.bad_units == 1, "one bad unit of two (%u/%u)", st.bad_units, st.units);
	ok(dw_lines_lookup(l, 0x1010, file, sizeof(file), &line) && line == 10, "the second unit is used");
	dw_lines_free(l);

	/* Truncated at every length: no crash, and never a row beyond what the bytes say. */
	int trunc_ok = 1;
	for (size_t n = 0; n < sizeof(unit); n++) {
		in.line = unit;
		in.line_size = n;
		if (dw_lines_build(&in, &l) != DWUNW_OK) {
			trunc_ok = 0;
			continue;
		}
		dw_lines_lookup(l, 0x1010, file, sizeof(file), &line);
		dw_lines_free(l);
	}
	ok(trunc_ok, "every truncation of a unit parses");
}

/* ---- main ---------------------------------------------------------------------------------------- */

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dwunw-sym-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (write_file(tpath("prog.c"), c_prog) || write_file(tpath("prog.cc"), cxx_prog) ||
	    shell("mkdir -p '%s'", tpath("no-debug"))) {
		ok(0, "write the test programs");
		return done_testing();
	}

	const char *dwarfs[] = { "-gdwarf-2", "-gdwarf-3", "-gdwarf-4", "-gdwarf-5" };
	for (size_t i = 0; i < sizeof(dwarfs) / sizeof(dwarfs[0]); i++)
		check_c_build("", "gcc", dwarfs[i]);
	if (shell("command -v clang >/dev/null") == 0) {
		check_c_build("", "clang", "-gdwarf-4");
		check_c_build("", "clang", "-gdwarf-5");
	}
	/* ELF32 (mips32) and arm64 files, read on this host. */
	check_c_build("mipsel-linux-gnu-", "gcc", "-gdwarf-4");
	check_c_build("mipsel-linux-gnu-", "gcc", "-gdwarf-5");
	check_c_build("aarch64-linux-gnu-", "gcc", "-gdwarf-5");
	check_notype();
	check_cxx();
	check_debug_files();
	check_minidebuginfo();
	check_libc();
	check_threads();
	check_bad_input();

	if (!getenv("DWUNW_KEEP_TMP"))
		shell("rm -rf '%s'", tmpdir);
	return done_testing();
}
