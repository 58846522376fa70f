// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of the bounds-checked byte cursor (bytes.h): fixed-width, LEB128, addresses. */
#include <stdint.h>
#include <stdlib.h>
#include "tap.h"
#include "bytes.h"

/* Decode one ULEB128 from exactly these bytes: it must succeed and consume them all. */
static void uleb_ok(const uint8_t *b, size_t n, uint64_t want, const char *name)
{
	struct dw_cursor c;
	cur_init(&c, b, n);
	uint64_t v = cur_uleb(&c);
	if (!ok(c.err == 0 && v == want && c.p == c.end, "uleb %s", name))
		printf("  # got %llu err %d left %zu\n", (unsigned long long)v, c.err, cur_left(&c));
}

static void sleb_ok(const uint8_t *b, size_t n, int64_t want, const char *name)
{
	struct dw_cursor c;
	cur_init(&c, b, n);
	int64_t v = cur_sleb(&c);
	if (!ok(c.err == 0 && v == want && c.p == c.end, "sleb %s", name))
		printf("  # got %lld err %d left %zu\n", (long long)v, c.err, cur_left(&c));
}

/* Decoding fails: err is CORRUPT, the value 0, and the cursor stopped at the end. */
static void uleb_bad(const uint8_t *b, size_t n, const char *name)
{
	struct dw_cursor c;
	cur_init(&c, b, n);
	uint64_t v = cur_uleb(&c);
	if (!ok(c.err == DWUNW_ERR_CORRUPT && v == 0 && c.p == c.end, "uleb %s is corrupt", name))
		printf("  # got %llu err %d left %zu\n", (unsigned long long)v, c.err, cur_left(&c));
}

static void sleb_bad(const uint8_t *b, size_t n, const char *name)
{
	struct dw_cursor c;
	cur_init(&c, b, n);
	int64_t v = cur_sleb(&c);
	if (!ok(c.err == DWUNW_ERR_CORRUPT && v == 0 && c.p == c.end, "sleb %s is corrupt", name))
		printf("  # got %lld err %d left %zu\n", (long long)v, c.err, cur_left(&c));
}

#define ULEB(want, ...) do { const uint8_t b_[] = { __VA_ARGS__ }; uleb_ok(b_, sizeof(b_), want, #want); } while (0)
#define SLEB(want, ...) do { const uint8_t b_[] = { __VA_ARGS__ }; sleb_ok(b_, sizeof(b_), want, #want); } while (0)
#define ULEB_BAD(name, ...) do { const uint8_t b_[] = { __VA_ARGS__ }; uleb_bad(b_, sizeof(b_), name); } while (0)
#define SLEB_BAD(name, ...) do { const uint8_t b_[] = { __VA_ARGS__ }; sleb_bad(b_, sizeof(b_), name); } while (0)

static void test_leb128(void)
{
	/* DWARF 5, section 7.6, figures 22 and 23 */
	ULEB(2, 0x02);
	ULEB(127, 0x7f);
	ULEB(128, 0x80, 0x01);
	ULEB(129, 0x81, 0x01);
	ULEB(130, 0x82, 0x01);
	ULEB(12857, 0xb9, 0x64);
	SLEB(2, 0x02);
	SLEB(-2, 0x7e);
	SLEB(127, 0xff, 0x00);
	SLEB(-127, 0x81, 0x7f);
	SLEB(128, 0x80, 0x01);
	SLEB(-128, 0x80, 0x7f);
	SLEB(129, 0x81, 0x01);
	SLEB(-129, 0xff, 0x7e);

	/* Limits */
	ULEB(0, 0x00);
	ULEB(0, 0x80, 0x80, 0x00);                 /* padded: still one value */
	ULEB(UINT64_MAX, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	ULEB(0x8000000000000000ull, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
	ULEB(0xffffffffull, 0xff, 0xff, 0xff, 0xff, 0x0f);
	SLEB(-1, 0x7f);
	SLEB(0, 0x00);
	SLEB(-64, 0x40);
	SLEB(63, 0x3f);
	SLEB(64, 0xc0, 0x00);
	SLEB(INT64_MAX, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00);
	SLEB(INT64_MIN, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f);
	SLEB(-1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f);
	SLEB((int64_t)-0x80000000ll, 0x80, 0x80, 0x80, 0x80, 0x78);

	/* Overruns: the value stops at the end of the data. */
	ULEB_BAD("with no bytes", 0x80);
	ULEB_BAD("unterminated", 0x80, 0x80, 0x80);
	SLEB_BAD("unterminated", 0xff);
	SLEB_BAD("unterminated", 0x80, 0x80, 0x80);
	{
		struct dw_cursor c;
		cur_init(&c, "", 0);
		ok(cur_uleb(&c) == 0 && c.err == DWUNW_ERR_CORRUPT, "uleb of an empty range is corrupt");
		cur_init(&c, "", 0);
		ok(cur_sleb(&c) == 0 && c.err == DWUNW_ERR_CORRUPT, "sleb of an empty range is corrupt");
	}

	/* More than 64 significant bits */
	ULEB_BAD("of 2^64", 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02);
	ULEB_BAD("of 2^70", 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
	/* Padding bytes are valid LEB128 (assemblers emit fixed-width forms) */
	ULEB(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
	ULEB_BAD("padded with bits beyond 64", 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00);
	SLEB_BAD("of 2^63 (does not fit int64)", 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
	SLEB(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
	SLEB(-1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f);
	SLEB_BAD("padded with the wrong sign", 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x00);

	/* Sequence: values follow each other and a later overrun keeps the earlier ones. */
	{
		const uint8_t seq[] = { 0xe5, 0x8e, 0x26, 0x7f, 0x80 };
		struct dw_cursor c;
		cur_init(&c, seq, sizeof(seq));
		uint64_t a = cur_uleb(&c);
		int64_t b = cur_sleb(&c);
		ok(a == 624485 && b == -1 && c.err == 0 && cur_left(&c) == 1, "uleb then sleb");
		ok(cur_uleb(&c) == 0 && c.err == DWUNW_ERR_CORRUPT && cur_left(&c) == 0,
		   "then an overrun stops at the end");
		ok(cur_u8(&c) == 0 && cur_sleb(&c) == 0 && c.err == DWUNW_ERR_CORRUPT,
		   "every read after an error returns 0");
	}
}

static void test_fixed(void)
{
	const uint8_t b[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
			      0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f };
	struct dw_cursor c;

	cur_init(&c, b, sizeof(b));
	is_int(cur_left(&c), 15, "cur_left of a fresh cursor");
	is_hex(cur_u8(&c), 0x01, "u8");
	is_hex(cur_u16(&c), 0x0302, "u16 little-endian");
	is_hex(cur_u32(&c), 0x07060504, "u32 little-endian");
	is_hex(cur_u64(&c), 0x0f0e0d0c0b0a0908ull, "u64 little-endian");
	ok(c.err == 0 && cur_left(&c) == 0, "all 15 bytes consumed, no error");
	is_hex(cur_u8(&c), 0, "u8 past the end is 0");
	is_int(c.err, DWUNW_ERR_CORRUPT, "and sets CORRUPT");

	/* Each width past the end: 0, CORRUPT, cursor at the end; a short read consumes nothing useful. */
	cur_init(&c, b, 1);
	ok(cur_u16(&c) == 0 && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "u16 with 1 byte left");
	cur_init(&c, b, 3);
	ok(cur_u32(&c) == 0 && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "u32 with 3 bytes left");
	cur_init(&c, b, 7);
	ok(cur_u64(&c) == 0 && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "u64 with 7 bytes left");
	cur_init(&c, b, 4);
	ok(cur_u32(&c) == 0x04030201 && c.err == 0 && c.p == c.end, "u32 with exactly 4 bytes");
	ok(cur_u8(&c) == 0 && c.err == DWUNW_ERR_CORRUPT, "then u8 fails");

	/* The error is sticky even where bytes remain. */
	cur_init(&c, b, sizeof(b));
	c.err = DWUNW_ERR_CORRUPT;
	ok(cur_u8(&c) == 0 && c.p == c.end, "a cursor in error reads nothing");

	/* skip and need */
	cur_init(&c, b, sizeof(b));
	cur_skip(&c, 14);
	ok(c.err == 0 && cur_u8(&c) == 0x0f, "skip 14 then u8");
	cur_init(&c, b, sizeof(b));
	cur_skip(&c, 16);
	ok(c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "skip past the end");
	cur_init(&c, b, sizeof(b));
	cur_skip(&c, UINT64_MAX);
	ok(c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "skip of 2^64-1");
	cur_init(&c, b, sizeof(b));
	ok(cur_need(&c, 15) && c.err == 0 && cur_left(&c) == 15, "need 15 of 15");
	ok(!cur_need(&c, 16) && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "need 16 of 15");

	/* Reads at the very end of a heap block (ASan sees any overrun). */
	uint8_t *h = malloc(3);
	memcpy(h, b, 3);
	cur_init(&c, h, 3);
	ok(cur_u16(&c) == 0x0201 && cur_u16(&c) == 0 && c.err == DWUNW_ERR_CORRUPT,
	   "u16 straddling the end of a heap block");
	cur_init(&c, h + 1, 2);
	ok(cur_u64(&c) == 0 && c.err == DWUNW_ERR_CORRUPT, "u64 from 2 bytes of a heap block");
	h[2] = 0x80;
	cur_init(&c, h, 3);
	ok(cur_uleb(&c) == 1 && cur_uleb(&c) == 2 && cur_uleb(&c) == 0 && c.err == DWUNW_ERR_CORRUPT,
	   "uleb running into the end of a heap block");
	free(h);
}

static void test_addr(void)
{
	const uint8_t b[] = { 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xaa };
	struct dw_cursor c;

	cur_init(&c, b, sizeof(b));
	is_hex(cur_addr(&c, 4), 0x55667788, "cur_addr 4");
	is_int(cur_left(&c), 5, "cur_addr 4 consumed 4 bytes");
	cur_init(&c, b, sizeof(b));
	is_hex(cur_addr(&c, 8), 0x1122334455667788ull, "cur_addr 8");
	is_int(cur_left(&c), 1, "cur_addr 8 consumed 8 bytes");
	ok(cur_addr(&c, 4) == 0 && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "cur_addr 4 past the end");
	cur_init(&c, b, 7);
	ok(cur_addr(&c, 8) == 0 && c.err == DWUNW_ERR_CORRUPT && c.p == c.end, "cur_addr 8 with 7 bytes");
	cur_init(&c, b, sizeof(b));
	ok(cur_addr(&c, 2) == 0 && c.err == DWUNW_ERR_CORRUPT, "cur_addr of size 2 is corrupt");
}

int main(void)
{
	test_leb128();
	test_fixed();
	test_addr();
	return done_testing();
}
