// SPDX-License-Identifier: GPL-2.0-only
/* A small JSON reader (whole document into a tree), base64, and string output for the bench. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench.h"

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *read_file(const char *path, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	while (buf) {
		ssize_t r;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

/* ---- reader ------------------------------------------------------------------------------- */

struct jp {
	const char *s, *end;
	char *err;
	size_t errlen;
	int depth;
};

static int jfail(struct jp *p, const char *fmt, ...)
{
	va_list ap;
	if (p->err[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err, p->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static void skip_ws(struct jp *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string at p->s (after the opening quote was seen). The decoded text is never longer. */
static int parse_string(struct jp *p, char **out, size_t *outlen)
{
	const char *q = p->s + 1;
	char *buf, *o;

	/* find the end first, to size the buffer */
	while (q < p->end && *q != '"') {
		if (*q == '\\')
			q++;
		q++;
	}
	if (q >= p->end)
		return jfail(p, "unterminated string");
	buf = o = malloc((size_t)(q - p->s));
	if (!buf)
		return jfail(p, "out of memory");
	for (q = p->s + 1; *q != '"'; q++) {
		unsigned cp, lo;
		if ((unsigned char)*q < 0x20) {
			free(buf);
			return jfail(p, "control character in a string");
		}
		if (*q != '\\') {
			*o++ = *q;
			continue;
		}
		switch (*++q) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (p->end - q < 5 || hex4(q + 1, &cp)) {
				free(buf);
				return jfail(p, "bad \\u escape");
			}
			q += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && p->end - q >= 7 && q[1] == '\\' && q[2] == 'u' &&
			    !hex4(q + 3, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				q += 6;
			}
			o += put_utf8(o, cp);
			break;
		default:
			free(buf);
			return jfail(p, "bad escape in a string");
		}
	}
	*o = 0;
	*out = buf;
	*outlen = (size_t)(o - buf);
	p->s = q + 1;
	return 0;
}

static int parse_value(struct jp *p, struct jval *v);

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	void *na;
	if (n < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 8;
	na = realloc(*arr, *cap * size);
	if (!na)
		return -1;
	*arr = na;
	return 0;
}

static int parse_value(struct jp *p, struct jval *v)
{
	memset(v, 0, sizeof(*v));
	skip_ws(p);
	if (p->s >= p->end)
		return jfail(p, "unexpected end of input");
	if (++p->depth > 64)
		return jfail(p, "nested too deeply");
	switch (*p->s) {
	case '{': {
		size_t cap = 0;
		v->t = J_OBJ;
		p->s++;
		skip_ws(p);
		if (p->s < p->end && *p->s == '}') {
			p->s++;
			break;
		}
		for (;;) {
			skip_ws(p);
			if (p->s >= p->end || *p->s != '"')
				return jfail(p, "expected a key");
			if (grow((void **)&v->keys, &cap, v->n, sizeof(char *)))
				return jfail(p, "out of memory");
			{
				size_t kcap = cap;
				/* items grow with keys: same capacity */
				void *ni = realloc(v->items, kcap * sizeof(struct jval));
				if (!ni)
					return jfail(p, "out of memory");
				v->items = ni;
			}
			{
				size_t kl;
				if (parse_string(p, &v->keys[v->n], &kl))
					return -1;
			}
			memset(&v->items[v->n], 0, sizeof(struct jval));
			v->n++;
			skip_ws(p);
			if (p->s >= p->end || *p->s != ':')
				return jfail(p, "expected ':'");
			p->s++;
			if (parse_value(p, &v->items[v->n - 1]))
				return -1;
			skip_ws(p);
			if (p->s < p->end && *p->s == ',') {
				p->s++;
				continue;
			}
			if (p->s < p->end && *p->s == '}') {
				p->s++;
				break;
			}
			return jfail(p, "expected ',' or '}'");
		}
		break;
	}
	case '[': {
		size_t cap = 0;
		v->t = J_ARR;
		p->s++;
		skip_ws(p);
		if (p->s < p->end && *p->s == ']') {
			p->s++;
			break;
		}
		for (;;) {
			if (grow((void **)&v->items, &cap, v->n, sizeof(struct jval)))
				return jfail(p, "out of memory");
			memset(&v->items[v->n], 0, sizeof(struct jval));
			v->n++;
			if (parse_value(p, &v->items[v->n - 1]))
				return -1;
			skip_ws(p);
			if (p->s < p->end && *p->s == ',') {
				p->s++;
				continue;
			}
			if (p->s < p->end && *p->s == ']') {
				p->s++;
				break;
			}
			return jfail(p, "expected ',' or ']'");
		}
		break;
	}
	case '"':
		v->t = J_STR;
		if (parse_string(p, &v->str, &v->len))
			return -1;
		break;
	case 't':
	case 'f':
	case 'n': {
		static const char *const words[] = { "true", "false", "null" };
		int i = *p->s == 't' ? 0 : *p->s == 'f' ? 1 : 2;
		size_t l = strlen(words[i]);
		if ((size_t)(p->end - p->s) < l || memcmp(p->s, words[i], l))
			return jfail(p, "bad literal");
		v->t = i == 2 ? J_NULL : J_BOOL;
		v->b = i == 0;
		p->s += l;
		break;
	}
	default: {
		char tmp[64], *e;
		size_t l = 0;
		while (p->s + l < p->end && l < sizeof(tmp) - 1 && strchr("+-0123456789.eE", p->s[l]))
			l++;
		if (!l)
			return jfail(p, "unexpected character '%c'", *p->s);
		memcpy(tmp, p->s, l);
		tmp[l] = 0;
		v->t = J_NUM;
		v->num = strtod(tmp, &e);
		if (*e)
			return jfail(p, "bad number");
		p->s += l;
	}
	}
	p->depth--;
	return 0;
}

static void jval_clear(struct jval *v)
{
	for (size_t i = 0; i < v->n; i++) {
		if (v->keys)
			free(v->keys[i]);
		if (v->items)
			jval_clear(&v->items[i]);
	}
	free(v->keys);
	free(v->items);
	free(v->str);
}

struct jval *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct jp p = { text, text + len, err, errlen, 0 };
	struct jval *v = calloc(1, sizeof(*v));

	err[0] = 0;
	if (!v)
		return NULL;
	if (parse_value(&p, v) == 0) {
		skip_ws(&p);
		if (p.s == p.end)
			return v;
		jfail(&p, "text after the JSON value");
	}
	jval_clear(v);
	free(v);
	return NULL;
}

void json_free(struct jval *v)
{
	if (v) {
		jval_clear(v);
		free(v);
	}
}

const struct jval *json_get(const struct jval *obj, const char *key)
{
	if (!obj || obj->t != J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

uint8_t *base64_decode(const char *s, size_t len, size_t *out_len)
{
	uint8_t *out, *o;
	uint32_t acc = 0;
	int bits = 0;

	out = o = malloc(len / 4 * 3 + 3);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		int v;
		if (c >= 'A' && c <= 'Z')
			v = c - 'A';
		else if (c >= 'a' && c <= 'z')
			v = c - 'a' + 26;
		else if (c >= '0' && c <= '9')
			v = c - '0' + 52;
		else if (c == '+')
			v = 62;
		else if (c == '/')
			v = 63;
		else if (c == '=')
			break;
		else {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (uint8_t)(acc >> bits);
		}
	}
	*out_len = (size_t)(o - out);
	return out;
}

/* ---- writer ------------------------------------------------------------------------------- */

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}
