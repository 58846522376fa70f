/* SPDX-License-Identifier: GPL-2.0-only */
/* Bounds-checked little-endian reader over a byte range. An overrun sets `err` once and every
 * later read returns 0, so parsers check the error at natural boundaries, not after each read. */
#ifndef DWUNW_BYTES_H
#define DWUNW_BYTES_H

#include <stdint.h>
#include <string.h>
#include "dwunw.h"

/* Target words are little-endian whatever the host is (an x86_64 core file may be unwound on
 * another architecture): one load on a little-endian host, not a loop over the bytes. */
static inline uint64_t dw_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint32_t dw_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

struct dw_cursor {
	const uint8_t *p;
	const uint8_t *end;
	int err;
};

static inline void cur_init(struct dw_cursor *c, const void *p, size_t len)
{
	c->p = p;
	c->end = (const uint8_t *)p + len;
	c->err = 0;
}

static inline size_t cur_left(const struct dw_cursor *c) { return (size_t)(c->end - c->p); }

static inline int cur_need(struct dw_cursor *c, size_t n)
{
	if (c->err || cur_left(c) < n) {
		c->err = DWUNW_ERR_CORRUPT;
		c->p = c->end;
		return 0;
	}
	return 1;
}

static inline void cur_skip(struct dw_cursor *c, uint64_t n)
{
	if (cur_need(c, n))
		c->p += n;
}

static inline uint8_t cur_u8(struct dw_cursor *c)
{
	return cur_need(c, 1) ? *c->p++ : 0;
}

static inline uint16_t cur_u16(struct dw_cursor *c)
{
	uint16_t v = 0;
	if (cur_need(c, 2)) { memcpy(&v, c->p, 2); c->p += 2; }
	return v;
}

static inline uint32_t cur_u32(struct dw_cursor *c)
{
	uint32_t v = 0;
	if (cur_need(c, 4)) { memcpy(&v, c->p, 4); c->p += 4; }
	return v;
}

static inline uint64_t cur_u64(struct dw_cursor *c)
{
	uint64_t v = 0;
	if (cur_need(c, 8)) { memcpy(&v, c->p, 8); c->p += 8; }
	return v;
}

/* Unsigned LEB128. Padding bytes are allowed; a value needing more than 64 bits is corrupt. */
static inline uint64_t cur_uleb(struct dw_cursor *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (!cur_need(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 63)
			v |= (uint64_t)(b & 0x7f) << shift;
		else if (b & (shift == 63 ? 0x7e : 0x7f))
			goto bad;
		else if (shift == 63)
			v |= (uint64_t)(b & 1) << 63;
		if (shift < 128)
			shift += 7;
	} while (b & 0x80);
	return v;
bad:
	c->err = DWUNW_ERR_CORRUPT;
	c->p = c->end;
	return 0;
}

/* Signed LEB128; bits beyond 64 must be copies of the sign. */
static inline int64_t cur_sleb(struct dw_cursor *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (!cur_need(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 63) {
			v |= (uint64_t)(b & 0x7f) << shift;
		} else {
			/* bit 63 is this byte's bit 0 (at shift 63) or already set */
			uint8_t sign = shift == 63 ? (b & 1) : (uint8_t)(v >> 63);
			uint8_t pad = (uint8_t)(b & (shift == 63 ? 0x7e : 0x7f));
			if (pad != (sign ? (shift == 63 ? 0x7e : 0x7f) : 0))
				goto bad;
			if (shift == 63)
				v |= (uint64_t)sign << 63;
		}
		if (shift < 128)
			shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
bad:
	c->err = DWUNW_ERR_CORRUPT;
	c->p = c->end;
	return 0;
}

/* An address-sized unsigned value (4 or 8 bytes). */
static inline uint64_t cur_addr(struct dw_cursor *c, unsigned size)
{
	return size == 4 ? cur_u32(c) : size == 8 ? cur_u64(c) : (c->err = DWUNW_ERR_CORRUPT, 0);
}

#endif
