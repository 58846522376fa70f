// SPDX-License-Identifier: GPL-2.0-only
/* C++ names through __cxa_demangle (the process's, else libstdc++.so.6 loaded once), else kept mangled. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "demangle.h"

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

#define MAX_MANGLED 4096 /* longer names are left alone: the demangler recurses on them */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cxa_demangle_fn demangler;

static void find_demangler(void)
{
	void *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");

	if (!sym) {
		/* Kept loaded for the life of the process: the pointer must stay valid. */
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			sym = dlsym(h, "__cxa_demangle");
	}
	/* POSIX guarantees data and function pointers convert; C does not, hence the memcpy. */
	memcpy(&demangler, &sym, sizeof(demangler));
}

int dw_demangler_available(void)
{
	pthread_once(&once, find_demangler);
	return demangler != NULL;
}

static void copy_trunc(char *out, size_t outlen, const char *s, size_t len)
{
	if (len > outlen - 1)
		len = outlen - 1;
	memcpy(out, s, len);
	out[len] = 0;
}

static int demangle_base(const char *name, char *out, size_t outlen);

/* A PLT stub's synthetic "name@plt" keeps its suffix (perf's and gdb's form); a version goes. */
int dw_demangle(const char *name, char *out, size_t outlen)
{
	size_t n = name ? strlen(name) : 0;
	int done = demangle_base(name, out, outlen);

	if (n > 4 && !strcmp(name + n - 4, "@plt") && outlen > 0) {
		size_t have = strlen(out);
		copy_trunc(out + have, outlen - have, "@plt", 4);
	}
	return done;
}

static int demangle_base(const char *name, char *out, size_t outlen)
{
	char stack[256], *mangled = stack, *plain;
	const char *at;
	size_t len;
	int status = -1, done = 0;

	if (!out || !outlen)
		return 0;
	if (!name) {
		out[0] = 0;
		return 0;
	}
	len = strlen(name);
	/* "name@VERSION" / "name@@VERSION" in a .symtab: shown without the version, as gdb does */
	at = strchr(name, '@');
	if (at && at != name)
		len = (size_t)(at - name);
	if (name[0] != '_' || name[1] != 'Z' || len > MAX_MANGLED || !dw_demangler_available()) {
		copy_trunc(out, outlen, name, len);
		return 0;
	}
	size_t base = len;
	if (base + 1 > sizeof(stack)) {
		mangled = malloc(base + 1);
		if (!mangled) {
			copy_trunc(out, outlen, name, len);
			return 0;
		}
	}
	memcpy(mangled, name, base);
	mangled[base] = 0;
	plain = demangler(mangled, NULL, NULL, &status);
	if (plain && status == 0) {
		size_t plen = strlen(plain);
		copy_trunc(out, outlen, plain, plen);
		done = 1;
	} else {
		copy_trunc(out, outlen, name, len);
	}
	free(plain);
	if (mangled != stack)
		free(mangled);
	return done;
}
