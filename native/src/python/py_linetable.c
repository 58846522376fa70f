// SPDX-License-Identifier: GPL-2.0-only
/* 3.11's location table (CPython's Objects/locations.md describes the format): entries of a first
 * byte (bit 7 set; bits 3-6 the kind; bits 0-2 the code units covered, minus one) and the kind's
 * operands: 6-bit varints (bit 6: more follows), the signed ones with the sign in bit 0. */
#include "py_linetable.h"

static int varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;

	for (;;) {
		if (*i >= len || shift > 28)
			return -1;
		uint8_t b = t[(*i)++];
		v |= (uint32_t)(b & 0x3f) << shift;
		shift += 6;
		if (!(b & 0x40))
			break;
	}
	*out = v;
	return 0;
}

static int svarint(const uint8_t *t, size_t len, size_t *i, int32_t *out)
{
	uint32_t v;

	if (varint(t, len, i, &v))
		return -1;
	*out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return 0;
}

int dw_py311_line(const uint8_t *t, size_t len, int firstlineno, uint32_t index)
{
	size_t i = 0;
	uint32_t at = 0, u;
	int32_t line = firstlineno, d;

	while (i < len) {
		uint8_t b = t[i++];
		if (!(b & 0x80))
			return -2;
		unsigned kind = (b >> 3) & 15, units = (b & 7) + 1;
		int none = 0;

		if (kind <= 9) {              /* short form: same line, one column byte */
			i += 1;
		} else if (kind <= 12) {      /* one-line form: line + 0..2, two column bytes */
			line += kind - 10;
			i += 2;
		} else if (kind == 13) {      /* no columns: line delta */
			if (svarint(t, len, &i, &d))
				return -2;
			line += d;
		} else if (kind == 14) {      /* long form: line delta, end line, start and end columns */
			if (svarint(t, len, &i, &d) || varint(t, len, &i, &u) || varint(t, len, &i, &u) ||
			    varint(t, len, &i, &u))
				return -2;
			line += d;
		} else {                      /* 15: no location */
			none = 1;
		}
		if (i > len)
			return -2;
		if (index < at + units)
			return none ? -1 : line;
		at += units;
	}
	return -2;
}
