// SPDX-License-Identifier: GPL-2.0-only
/*
 * x86_64 instruction lengths and branch targets (insn_x86.h), from the opcode maps of the Intel
 * SDM vol. 2 appendix A: legacy prefixes, REX, one-byte / 0f / 0f38 / 0f3a maps, VEX (c4/c5),
 * ModRM + SIB + displacement, immediates. EVEX, 3DNow! and the few opcodes invalid in 64-bit
 * mode are refused (-1): a caller that cannot decode a function leaves its probe where it was.
 */
#include <string.h>
#include "insn_x86.h"

/* Immediate sizes: z = 4 bytes (2 with 66), v = 8 with REX.W else z. */
enum { I0 = 0, I1, I2, IZ, IV, I3 /* imm16 + imm8 */, IBAD };

static int one_modrm(uint8_t op)
{
	if (op < 0x40)
		return (op & 7) < 4;
	switch (op) {
	case 0x62: case 0x63: case 0x69: case 0x6b:
	case 0xc0: case 0xc1: case 0xc4: case 0xc5: case 0xc6: case 0xc7:
	case 0xd0: case 0xd1: case 0xd2: case 0xd3:
	case 0xf6: case 0xf7: case 0xfe: case 0xff:
		return 1;
	}
	if (op >= 0x80 && op <= 0x8f)
		return 1;
	if (op >= 0xd8 && op <= 0xdf)
		return 1;
	return 0;
}

static int one_imm(uint8_t op, uint8_t modrm_reg)
{
	if (op < 0x40) {
		if ((op & 7) == 4)
			return I1;
		if ((op & 7) == 5)
			return IZ;
		if ((op & 7) >= 6) /* push/pop segment, daa...: invalid in 64-bit mode */
			return IBAD;
		return I0;
	}
	switch (op) {
	case 0x68: case 0x69: case 0x81: case 0xa9: case 0xc7: case 0xe8: case 0xe9:
		return IZ;
	case 0x6a: case 0x6b: case 0x80: case 0x83: case 0xa8: case 0xc0: case 0xc1: case 0xc6:
	case 0xcd: case 0xeb: case 0xe0: case 0xe1: case 0xe2: case 0xe3: case 0xe4: case 0xe5:
	case 0xe6: case 0xe7:
		return I1;
	case 0xc2: case 0xca:
		return I2;
	case 0xc8:
		return I3;
	case 0xf6:
		return modrm_reg < 2 ? I1 : I0;
	case 0xf7:
		return modrm_reg < 2 ? IZ : I0;
	case 0x60: case 0x61: case 0x62: case 0x82: case 0x9a: case 0xc4: case 0xc5: case 0xce:
	case 0xd4: case 0xd5: case 0xd6: case 0xea:
		return IBAD;
	}
	if (op >= 0x70 && op <= 0x7f)
		return I1;
	if (op >= 0xb0 && op <= 0xb7)
		return I1;
	if (op >= 0xb8 && op <= 0xbf)
		return IV;
	return I0;
}

static int two_modrm(uint8_t op)
{
	switch (op) {
	case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0b: case 0x0e:
	case 0x30: case 0x31: case 0x32: case 0x33: case 0x34: case 0x35: case 0x37:
	case 0x77: case 0xa0: case 0xa1: case 0xa2: case 0xa8: case 0xa9: case 0xaa:
		return 0;
	}
	if (op >= 0x80 && op <= 0x8f)
		return 0;
	if (op >= 0xc8 && op <= 0xcf)
		return 0;
	return 1;
}

static int two_imm(uint8_t op)
{
	if (op >= 0x80 && op <= 0x8f)
		return IZ; /* jcc rel32 (always 4 bytes in 64-bit mode) */
	switch (op) {
	case 0x70: case 0x71: case 0x72: case 0x73: case 0xa4: case 0xac: case 0xba:
	case 0xc2: case 0xc4: case 0xc5: case 0xc6:
		return I1;
	case 0x0f: case 0x38: case 0x3a: case 0x0a: case 0x0c: case 0x04: case 0x24: case 0x25:
	case 0x26: case 0x27: case 0x36: case 0x39: case 0x3b: case 0x3c: case 0x3d: case 0x3e:
	case 0x3f: case 0x7a: case 0x7b: case 0xff:
		return IBAD; /* 3DNow!, escapes handled by the caller, or undefined */
	}
	return I0;
}

/* ModRM + SIB + displacement length from byte p[0] (the ModRM); -1 past the end. */
static int modrm_len(const uint8_t *p, size_t avail)
{
	uint8_t m, mod, rm;
	int n = 1;

	if (avail < 1)
		return -1;
	m = p[0];
	mod = m >> 6;
	rm = m & 7;
	if (mod == 3)
		return 1;
	if (rm == 4) {
		if (avail < 2)
			return -1;
		n++;
		if (mod == 0 && (p[1] & 7) == 5)
			n += 4;
	} else if (mod == 0 && rm == 5) {
		n += 4; /* rip-relative */
	}
	if (mod == 1)
		n += 1;
	else if (mod == 2)
		n += 4;
	return n;
}

static int64_t sext(const uint8_t *p, int n)
{
	if (n == 1)
		return (int8_t)p[0];
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

int ix_decode(const uint8_t *p, size_t avail, struct ix_insn *out)
{
	size_t i = 0;
	uint8_t rex = 0, op, reg = 0;
	int p66 = 0, pf3 = 0, nprefix = 0, map = 1, modrm = 0, imm = I0, nimm;

	memset(out, 0, sizeof(*out));
	/* legacy prefixes */
	for (; i < avail && i < 14; i++) {
		uint8_t b = p[i];

		if (b == 0x66)
			p66 = 1;
		else if (b == 0xf3)
			pf3 = 1;
		else if (b == 0xf2 || b == 0xf0 || b == 0x67 || b == 0x2e || b == 0x3e ||
			 b == 0x26 || b == 0x36 || b == 0x64 || b == 0x65)
			;
		else
			break;
		nprefix++;
	}
	if (i < avail && (p[i] & 0xf0) == 0x40)
		rex = p[i++];
	if (i >= avail)
		return -1;
	op = p[i++];
	if (op == 0x62) {
		/* EVEX (64-bit mode only): 3 payload bytes, P0 holds the opcode map */
		if (i + 3 >= avail)
			return -1;
		map = p[i] & 7;
		if (map != 1 && map != 2 && map != 3 && map != 5 && map != 6)
			return -1;
		i += 3;
		op = p[i++];
		modrm = 1;
		imm = map == 3 ? I1 : I0;
		if (map == 1 && ((op >= 0x70 && op <= 0x73) || op == 0xc2 || op == 0xc4 ||
				 op == 0xc5 || op == 0xc6))
			imm = I1;
		map = -map; /* not a legacy map: no class below */
	} else if (op == 0xc4 || op == 0xc5) {
		/* VEX: c5 R.vvvv.L.pp | c4 RXB.mmmmm W.vvvv.L.pp, then opcode and ModRM */
		int n = op == 0xc5 ? 1 : 2;

		if (i + n >= avail)
			return -1;
		map = op == 0xc5 ? 1 : (p[i] & 0x1f);
		if (map < 1 || map > 3)
			return -1;
		i += n;
		op = p[i++];
		modrm = 1;
		imm = map == 3 ? I1 : I0;
		if (map == 1 && ((op >= 0x70 && op <= 0x73) || op == 0xc2 || op == 0xc4 ||
				 op == 0xc5 || op == 0xc6))
			imm = I1;
		if (map == 1 && op == 0x77)
			modrm = 0; /* vzeroupper / vzeroall */
		map = -map; /* not a legacy map: no class below */
	} else if (op == 0x0f) {
		if (i >= avail)
			return -1;
		op = p[i++];
		if (op == 0x38 || op == 0x3a) {
			imm = op == 0x3a ? I1 : I0;
			map = op == 0x38 ? -2 : -3;
			if (i >= avail)
				return -1;
			op = p[i++];
			modrm = 1;
		} else {
			modrm = two_modrm(op);
			imm = two_imm(op);
			if (imm == IBAD)
				return -1;
			map = 0x0f;
		}
	} else {
		map = 0;
		modrm = one_modrm(op);
		if (op == 0x8e)
			return -1; /* segment loads: not in user code we probe */
	}
	if (modrm) {
		int m;

		if (i >= avail)
			return -1;
		reg = (p[i] >> 3) & 7;
		m = modrm_len(p + i, avail - i);
		if (m < 0)
			return -1;
		/* classes decided by the ModRM */
		if (map == 0x0f && op == 0x1f && reg == 0)
			out->kind = IX_NOP;
		if (map == 0 && op == 0xff && (reg == 2 || reg == 4)) /* call / jmp indirect */
			out->kind = IX_INDIRECT;
		if (map == 0 && op == 0xff && (reg == 3 || reg == 5)) /* far call / jmp */
			out->kind = IX_INDIRECT;
		if (map == 0 && (op == 0x84 || op == 0x85 || (op >= 0x38 && op <= 0x3b)))
			out->kind = IX_FLAGS_ONLY;
		if (map == 0 && (op == 0x80 || op == 0x81 || op == 0x83) && reg == 7)
			out->kind = IX_FLAGS_ONLY;
		if (map == 0 && (op == 0xf6 || op == 0xf7) && reg == 0)
			out->kind = IX_FLAGS_ONLY;
		i += (size_t)m;
	}
	if (map == 0) {
		imm = one_imm(op, reg);
		if (imm == IBAD)
			return -1;
		if (op == 0x3c || op == 0x3d || op == 0xa8 || op == 0xa9)
			out->kind = IX_FLAGS_ONLY;
		if (op >= 0x50 && op <= 0x57 && !p66 && (!rex || rex == 0x41))
			out->kind = IX_PUSH;
		if (op == 0x90 && !(rex & 1) && !pf3)
			out->kind = IX_NOP;
		if (op == 0xc3 || op == 0xc2)
			out->kind = IX_RET;
		if (op >= 0xa0 && op <= 0xa3)
			imm = IV; /* moffs: 8 bytes (4 with 67, not expected in compiled code) */
	}
	switch (imm) {
	case I0: nimm = 0; break;
	case I1: nimm = 1; break;
	case I2: nimm = 2; break;
	case I3: nimm = 3; break;
	case IZ:
		nimm = p66 && !(map == 0 && (op == 0xe8 || op == 0xe9)) && map != 0x0f ? 2 : 4;
		break;
	case IV:
		nimm = (rex & 8) ? 8 : (map == 0 && op >= 0xa0 && op <= 0xa3) ? 8 : (p66 ? 2 : 4);
		break;
	default:
		return -1;
	}
	if (i + (size_t)nimm > avail)
		return -1;
	/* relative branches */
	if (map == 0 && ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3) || op == 0xeb ||
			 op == 0xe8 || op == 0xe9)) {
		out->has_target = 1;
		out->target = (int64_t)(i + (size_t)nimm) + sext(p + i, nimm);
		out->kind = op == 0xe8 ? IX_CALL : (op == 0xe9 || op == 0xeb) ? IX_JMP
			  : (op >= 0x70 && op <= 0x7f) ? IX_JCC : IX_OTHER; /* loop, jrcxz */
	} else if (map == 0x0f && op >= 0x80 && op <= 0x8f) {
		out->has_target = 1;
		out->target = (int64_t)(i + 4) + sext(p + i, 4);
		out->kind = IX_JCC;
	}
	if (map == 0x0f && op == 0x1e && pf3 && i == 4 && p[i - 1] == 0xfa)
		out->kind = IX_ENDBR;
	i += (size_t)nimm;
	if (i > 15)
		return -1;
	out->len = (uint8_t)i;
	out->prefix66 = (uint8_t)p66;
	out->prefixed = (uint8_t)(nprefix > 0);
	return 0;
}

int ix_emulated(const struct ix_insn *in)
{
	if (in->prefixed) /* the kernel refuses some prefixes outright: no bet on the others */
		return 0;
	switch (in->kind) {
	case IX_PUSH:
	case IX_NOP:
		return 1;
	case IX_JMP:
	case IX_JCC:
	case IX_CALL:
		return !in->prefix66 && in->len <= 6;
	default:
		return 0;
	}
}
