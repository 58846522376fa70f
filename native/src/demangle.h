/* SPDX-License-Identifier: GPL-2.0-only */
/* C++ demangling through the C++ runtime's __cxa_demangle, found at run time. */
#ifndef DWUNW_DEMANGLE_H
#define DWUNW_DEMANGLE_H

#include <stddef.h>

/*
 * Copy `name` into out (outlen bytes, always NUL-terminated, truncated when longer), demangled
 * when it is an Itanium C++ name ("_Z...", a "@VERSION" suffix kept) and a demangler is
 * available. Returns 1 when demangled, 0 when copied as is.
 */
int dw_demangle(const char *name, char *out, size_t outlen);

/* 1 when __cxa_demangle could be found (in the process, or in libstdc++.so.6). */
int dw_demangler_available(void);

#endif
