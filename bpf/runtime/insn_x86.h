/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A small x86_64 instruction decoder: lengths, relative branch targets, and the few classes
 * that decide where a uprobe is cheap (uprobe_attach.c). Not a disassembler: operands beyond
 * what the length and the class need are not decoded.
 */
#ifndef DWUNW_INSN_X86_H
#define DWUNW_INSN_X86_H

#include <stddef.h>
#include <stdint.h>

enum ix_kind {
	IX_OTHER = 0,
	IX_PUSH,       /* push of a register (50+r, REX.B allowed) */
	IX_JMP,        /* jmp rel8 / rel32 */
	IX_JCC,        /* jcc rel8 / rel32, loop, jrcxz */
	IX_CALL,       /* call rel32 */
	IX_NOP,        /* 90, 0f 1f /0 */
	IX_ENDBR,      /* endbr64 */
	IX_FLAGS_ONLY, /* test / cmp: writes only the flags (may read memory) */
	IX_RET,
	IX_INDIRECT,   /* jmp or call through a register or memory */
};

struct ix_insn {
	uint8_t len;
	uint8_t kind;      /* enum ix_kind */
	uint8_t has_target;
	uint8_t prefix66;  /* operand-size prefix present */
	uint8_t prefixed;  /* any legacy prefix present */
	int64_t target;    /* has_target: offset of the branch target from the decoded byte 0 */
};

/* Decode one instruction from p[0..avail): 0, or -1 when it cannot be decoded. */
int ix_decode(const uint8_t *p, size_t avail, struct ix_insn *out);

/*
 * Which instructions the running kernel emulates at a uprobe instead of single-stepping them
 * out of line (x86_64, Linux 6.x arch/x86/kernel/uprobes.c: branch_setup_xol_ops takes nops,
 * jmp, call and jcc without a 66 prefix; push_setup_xol_ops takes push of a register).
 */
int ix_emulated(const struct ix_insn *in);

#endif /* DWUNW_INSN_X86_H */
