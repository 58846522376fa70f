// SPDX-License-Identifier: GPL-2.0-only
/* Error codes: text, short names, errno mapping; and the library version. */
#include <errno.h>
#include "internal.h"

#define STR_(x) #x
#define STR(x) STR_(x)

DWUNW_API const char *dwunw_version(void)
{
	return STR(DWUNW_VERSION_MAJOR) "." STR(DWUNW_VERSION_MINOR) "." STR(DWUNW_VERSION_PATCH);
}

static const struct {
	const char *name;
	const char *text;
} errs[] = {
	[0] = { "OK", "success" },
	[-DWUNW_ERR_NO_DWARF] = { "NO_DWARF", "no call-frame information" },
	[-DWUNW_ERR_UNSUPPORTED_ARCH] = { "UNSUPPORTED_ARCH", "unsupported architecture" },
	[-DWUNW_ERR_NOMEM] = { "NOMEM", "out of memory" },
	[-DWUNW_ERR_CORRUPT] = { "CORRUPT", "corrupt ELF or DWARF data" },
	[-DWUNW_ERR_IO] = { "IO", "read failed" },
	[-DWUNW_ERR_INVALID_ARG] = { "INVALID_ARG", "invalid argument or address" },
	[-DWUNW_ERR_CACHE_FULL] = { "CACHE_FULL", "module cache full: every slot is active" },
	[-DWUNW_ERR_PERM] = { "PERM", "permission denied" },
	[-DWUNW_ERR_NO_MODULE] = { "NO_MODULE", "no module mapped at pc" },
	[-DWUNW_ERR_UNSUPPORTED_CFI] = { "UNSUPPORTED_CFI", "unsupported call-frame instruction or expression" },
	[-DWUNW_ERR_NOT_FOUND] = { "NOT_FOUND", "no such file, process or thread" },
	[-DWUNW_ERR_NOT_ELF] = { "NOT_ELF", "not an ELF file" },
	[-DWUNW_ERR_NO_PROGRESS] = { "NO_PROGRESS", "stack pointer did not move outward" },
	[-DWUNW_ERR_DEPTH] = { "DEPTH", "frame limit reached" },
	[-DWUNW_ERR_EXPR] = { "EXPR", "DWARF expression failed" },
	[-DWUNW_ERR_NO_PROCESS] = { "NO_PROCESS", "target process or thread exited" },
	[-DWUNW_ERR_UNSUPPORTED] = { "UNSUPPORTED", "not supported by this build" },
	[-DWUNW_ERR_PROLOGUE] = { "PROLOGUE", "no CFI, and a prologue the analyser does not understand" },
	[-DWUNW_ERR_LIVE_END] = { "LIVE_END", "zero return address read after the event (memory may have changed)" },
	[-DWUNW_ERR_STALE] = { "STALE", "the stack above the window changed since the event" },
	[-DWUNW_ERR_WOULDBLOCK] = { "WOULDBLOCK", "not loaded yet: the capture would block (load it with dwunw_load_for)" },
};

DWUNW_API const char *dwunw_strerror(int err)
{
	if (err > 0 || err < DWUNW_ERR_MIN)
		return "unknown error";
	return errs[-err].text;
}

DWUNW_API const char *dwunw_errname(int err)
{
	if (err > 0 || err < DWUNW_ERR_MIN)
		return "UNKNOWN";
	return errs[-err].name;
}

int dw_errno_to_err(int e)
{
	switch (e) {
	case 0: return DWUNW_OK;
	case ENOMEM: return DWUNW_ERR_NOMEM;
	case EPERM: case EACCES: return DWUNW_ERR_PERM;
	case ENOENT: case ENOTDIR: return DWUNW_ERR_NOT_FOUND;
	case ESRCH: return DWUNW_ERR_NO_PROCESS;
	case EFAULT: case EINVAL: case ERANGE: return DWUNW_ERR_INVALID_ARG;
	case ENOSYS: case EOPNOTSUPP: return DWUNW_ERR_UNSUPPORTED;
	default: return DWUNW_ERR_IO;
	}
}
