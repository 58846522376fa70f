/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Little-endian 32-bit instruction words read through the walk's reader, for the prologue
 * analysers (arm64, mips32): one reader call per 256-byte block, not per instruction; at the
 * end of a mapping, where a whole block cannot be read, word by word.
 */
#ifndef DWUNW_ARCH_CODE_READER_H
#define DWUNW_ARCH_CODE_READER_H

#include <stddef.h>
#include <stdint.h>
#include "dwunw.h"

typedef int (*read_fn)(void *arg, uint64_t addr, void *buf, size_t len);

struct code {
	read_fn read;
	void *arg;
	uint64_t base;
	uint32_t len;
	uint8_t buf[256];
};

static inline int fetch(struct code *c, uint64_t addr, uint32_t *insn)
{
	if (addr < c->base || addr + 4 > c->base + c->len) {
		uint64_t b = addr & ~(uint64_t)(sizeof(c->buf) - 1);
		c->len = 0;
		if (c->read(c->arg, b, c->buf, sizeof(c->buf)) == DWUNW_OK) {
			c->len = sizeof(c->buf);
		} else {
			b = addr;
			if (c->read(c->arg, b, c->buf, 4) != DWUNW_OK)
				return DWUNW_ERR_IO;
			c->len = 4;
		}
		c->base = b;
	}
	{
		const uint8_t *p = c->buf + (addr - c->base);
		*insn = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	}
	return DWUNW_OK;
}

#endif /* DWUNW_ARCH_CODE_READER_H */
