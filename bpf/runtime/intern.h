/* SPDX-License-Identifier: GPL-2.0-only */
/* Interned strings (symbol names, module paths, labels): stored once, compared by pointer. */
#ifndef DWUNW_INTERN_H
#define DWUNW_INTERN_H

/* The one copy of s (NULL stays NULL); never freed. */
const char *intern(const char *s);

#endif /* DWUNW_INTERN_H */
