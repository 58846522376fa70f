// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit tests of the mips32 (o32, little-endian) backend: the registry entry and its constants,
 * readelf's register names (none), NT_PRSTATUS (the o32 elf_gregset_t), the sigreturn and
 * rt_sigreturn frames built by hand around the real trampoline code, .MIPS.stubs entries (the
 * caller's return address in ra, then in t7), leaf frames; then an offline capture through
 * dwunw_capture of each trampoline in anonymous memory (qemu-user's page).
 */
#include <elf.h>
#include <stdint.h>
#include <string.h>
#include "tap.h"
#include "dwunw.h"

#define BIT(n) (1ull << (n))
#define T7 15
#define GP 28
#define SP 29
#define FP 30
#define RA 31
#define GPRS (BIT(32) - 1)
#define CALLEE ((BIT(24) - BIT(16)) | BIT(GP) | BIT(SP) | BIT(FP))

static const struct dwunw_arch_ops *ops;

struct region {
	uint64_t addr;
	void *buf;
	size_t size;
};

struct fake_mem {
	struct region r[4];
	unsigned n;
};

static int fake_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = arg;

	for (unsigned i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];
		if (addr >= r->addr && len <= r->size && addr - r->addr <= r->size - len) {
			memcpy(buf, (const uint8_t *)r->buf + (addr - r->addr), len);
			return DWUNW_OK;
		}
	}
	return DWUNW_ERR_IO;
}

static void put32(void *base, size_t off, uint32_t v)
{
	uint8_t *p = (uint8_t *)base + off;
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void regs_init(struct dwunw_regs *r, uint64_t pc)
{
	memset(r, 0, sizeof(*r));
	r->arch = DWUNW_ARCH_MIPS32;
	r->pid = 42;
	r->tid = 43;
	r->pc = pc;
	r->valid = GPRS;
	for (unsigned i = 1; i < 32; i++)
		r->regs[i] = 0x10000000u + 0x100 * i;
}

static void test_registry(void)
{
	ok(ops != NULL, "registry: mips32 backend");
	if (!ops)
		return;
	is_str(ops->name, "mips32", "registry: name");
	is_int(ops->elf_machine, EM_MIPS, "registry: EM_MIPS");
	is_int(ops->elf_class, ELFCLASS32, "registry: ELFCLASS32");
	is_int(ops->addr_size, 4, "registry: 4-byte addresses");
	is_int(ops->nregs, 32, "registry: $0-$31 tracked");
	is_int(ops->sp_reg, 29, "registry: sp $29");
	is_int(ops->fp_reg, 30, "registry: fp $30");
	is_int(ops->ra_reg, 31, "registry: RA column $31");
	is_int(ops->lr_reg, 31, "registry: link register $31");
	is_int(ops->pc_reg, 0xffff, "registry: no DWARF number for the pc");
	is_hex(ops->callee_saved, CALLEE, "registry: callee-saved s0-s7, gp, sp, fp");
	ok(dwunw_arch_for_elf(EM_MIPS, ELFCLASS32) == ops, "registry: for_elf(EM_MIPS, 32)");
	ok(dwunw_arch_for_elf(EM_MIPS, ELFCLASS64) == NULL, "registry: mips64 refused");
	ok(ops->fp_step == NULL, "registry: no frame-pointer convention, no fp_step");
	ok(ops->sigframe && ops->lr_step && ops->stub_step && ops->regs_from_prstatus && ops->ra_to_pc &&
	   ops->reg_name, "registry: the other ops provided");
}

static void test_names(void)
{
	int bad = 0;

	for (unsigned r = 0; r < 200; r++)
		bad += ops->reg_name(r) != NULL;
	ok(!bad, "names: none (readelf prints rN for MIPS)");
	is_hex(ops->ra_to_pc(0x400010e8u, 0), 0x400010e8u, "ra_to_pc: unchanged");
	is_hex(ops->ra_to_pc(0xffffffff800010e8ull, 0), 0x800010e8u, "ra_to_pc: 32 bits (a sign-extended value)");
}

static void test_prstatus(void)
{
	uint8_t buf[45 * 4 + 1];
	struct dwunw_regs out;
	int bad = 0;

	for (unsigned i = 0; i < 45; i++)
		put32(buf + 1, 4 * i, 0x11000000u + i);
	memset(&out, 0xaa, sizeof(out));
	is_int(ops->regs_from_prstatus(buf + 1, 45 * 4, &out), DWUNW_OK, "prstatus: ok (180 bytes, unaligned)");
	is_int(out.arch, DWUNW_ARCH_MIPS32, "prstatus: arch");
	is_hex(out.valid, GPRS, "prstatus: $0-$31 valid");
	is_hex(out.regs[0], 0, "prstatus: $zero is 0 whatever the set says");
	for (unsigned i = 1; i < 32; i++)
		bad += out.regs[i] != 0x11000000u + 6 + i;
	ok(!bad, "prstatus: $1-$31 from words 7-37 (six unused words first)");
	is_hex(out.regs[SP], 0x11000000u + 35, "prstatus: sp = word 35 (MIPS32_EF_R29)");
	is_hex(out.regs[RA], 0x11000000u + 37, "prstatus: ra = word 37 (MIPS32_EF_R31)");
	is_hex(out.pc, 0x11000000u + 40, "prstatus: pc = cp0 epc, word 40");
	bad = 0;
	for (unsigned i = 32; i < DWUNW_MAX_REGS; i++)
		bad += out.regs[i] != 0;
	ok(!bad, "prstatus: lo, hi, status, ... not taken");
	is_int(ops->regs_from_prstatus(buf, 45 * 4 - 1, &out), DWUNW_ERR_INVALID_ARG, "prstatus: short buffer");
	is_int(ops->regs_from_prstatus(buf, 0, &out), DWUNW_ERR_INVALID_ARG, "prstatus: empty");
	{
		static uint8_t wide[45 * 8];
		is_int(ops->regs_from_prstatus(wide, sizeof(wide), &out), DWUNW_ERR_UNSUPPORTED_ARCH,
		       "prstatus: a 64-bit set (n32/n64) refused");
	}
}

#define TRAMP 0x3f7bd000u
#define STK   0x3ffe0000u

static void put_trampolines(uint8_t *code)
{
	put32(code, 0, 0x24021017);  /* li v0, 4119 (sigreturn) */
	put32(code, 4, 0x0000000c);  /* syscall */
	put32(code, 8, 0x24021061);  /* li v0, 4193 (rt_sigreturn) */
	put32(code, 12, 0x0000000c); /* syscall */
}

/* A struct sigcontext at `ctx`: sc_pc, then sc_regs[] in 64-bit slots (sign-extended values, as
 * a 64-bit kernel stores them: the high words must be ignored). */
static void put_sigcontext(uint8_t *stack, size_t ctx, uint32_t base, uint32_t pc)
{
	put32(stack, ctx + 8, pc);
	put32(stack, ctx + 12, (pc & 0x80000000u) ? 0xffffffffu : 0);
	for (unsigned i = 0; i < 32; i++) {
		uint32_t v = i ? base + i : 0xdead; /* $zero garbage: must come out 0 */
		put32(stack, ctx + 16 + 8 * i, v);
		put32(stack, ctx + 16 + 8 * i + 4, 0xffffffffu);
	}
}

static void test_sigframe(void)
{
	static uint8_t code[0x1000], stack[0x1000];
	struct fake_mem m = { .r = { { TRAMP, code, sizeof(code) }, { STK, stack, sizeof(stack) } }, .n = 2 };
	struct dwunw_regs in, out;
	int bad = 0;

	put_trampolines(code);
	/* sigframe at STK+0x100: sigcontext at +24 (pc +32, regs +40) */
	put_sigcontext(stack, 0x100 + 24, 0x7700000, 0x40000f58);
	/* rt_sigframe at STK+0x400: sigcontext at +176 (pc +184, regs +192) */
	put_sigcontext(stack, 0x400 + 176, 0x6600000, 0x400012dc);

	regs_init(&in, TRAMP);
	in.regs[SP] = STK + 0x100;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 1, "sigframe: sigreturn trampoline");
	is_hex(out.pc, 0x40000f58, "sigframe: pc = sc_pc (sp+32)");
	for (unsigned i = 1; i < 32; i++)
		bad += out.regs[i] != 0x7700000u + i;
	ok(!bad, "sigframe: $1-$31 = low words of sc_regs (sp+40+8i)");
	is_hex(out.regs[0], 0, "sigframe: $zero is 0");
	is_hex(out.valid, GPRS, "sigframe: every GPR valid");
	ok(out.pid == 42 && out.arch == DWUNW_ARCH_MIPS32, "sigframe: identity carried over");

	in.pc = TRAMP + 8;
	in.regs[SP] = STK + 0x400;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 1, "rt_sigframe: rt_sigreturn trampoline");
	is_hex(out.pc, 0x400012dc, "rt_sigframe: pc = uc_mcontext.sc_pc (sp+184)");
	bad = 0;
	for (unsigned i = 1; i < 32; i++)
		bad += out.regs[i] != 0x6600000u + i;
	ok(!bad, "rt_sigframe: $1-$31 from sp+192+8i");

	in.pc = TRAMP + 4;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: the syscall instruction alone is not one");
	put32(code, 0x20, 0x24021018);
	put32(code, 0x24, 0x0000000c);
	in.pc = TRAMP + 0x20;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: another syscall number is not one");
	in.pc = TRAMP + 2;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: misaligned pc");
	in.pc = 0x1000;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: unreadable code");
	in.pc = TRAMP;
	in.regs[SP] = STK + 0xf80;
	ok(ops->sigframe(&in, &out, fake_read, &m) < 0, "sigframe: frame beyond readable memory -> error");
	in.valid &= ~BIT(SP);
	is_int(ops->sigframe(&in, &out, fake_read, &m), DWUNW_ERR_INVALID_ARG, "sigframe: no sp -> INVALID_ARG");
}

#define STUBS 0x400017c0u

static void test_stub_lr(void)
{
	static uint8_t stubs[0x40];
	static const uint32_t entry[] = { 0x8f998010, 0x03e07825, 0x0320f809, 0x2418000d };
	static const uint32_t big[] = { 0x8f998010, 0x03e07825, 0x3c180001, 0x0320f809, 0x37180002 };
	struct fake_mem m = { .r = { { STUBS, stubs, sizeof(stubs) } }, .n = 1 };
	struct dwunw_regs in, out;
	static const struct { unsigned off; unsigned reg; const char *what; } at[] = {
		{ 0, RA, "lw t9 (entry): ra" },
		{ 4, RA, "move t7, ra (not run yet): ra" },
		{ 8, T7, "jalr t9: t7" },
		{ 12, T7, "li t8 (delay slot): t7" },
		{ 16 + 8, T7, "lui t8 (large index): t7" },
		{ 16 + 12, T7, "jalr t9 (large index): t7" },
	};

	for (unsigned i = 0; i < 4; i++)
		put32(stubs, 4 * i, entry[i]);
	for (unsigned i = 0; i < 5; i++)
		put32(stubs, 16 + 4 * i, big[i]);
	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		regs_init(&in, STUBS + at[i].off);
		in.regs[RA] = 0x4000114c;
		in.regs[T7] = 0x4000123c;
		if (at[i].reg == T7)
			in.regs[RA] = STUBS + 16; /* what jalr left */
		ok(ops->stub_step(&in, &out, fake_read, &m) == 1 && out.pc == in.regs[at[i].reg] &&
		   out.regs[SP] == in.regs[SP] && out.valid == CALLEE, "stub +%u, %s", at[i].off, at[i].what);
	}
	put32(stubs, 4, 0x03e07821); /* addu t7, ra, zero (older binutils) */
	regs_init(&in, STUBS + 4);
	in.regs[RA] = 0x4000114c;
	ok(ops->stub_step(&in, &out, fake_read, &m) == 1 && out.pc == 0x4000114c, "stub: addu t7, ra, zero: ra");
	regs_init(&in, STUBS + 8);
	in.valid &= ~BIT(T7);
	is_int(ops->stub_step(&in, &out, fake_read, &m), 0, "stub: t7 unknown after the move: refused");
	regs_init(&in, 0x1000);
	is_int(ops->stub_step(&in, &out, fake_read, &m), 0, "stub: unreadable code refused");

	regs_init(&in, 0x40001098);
	in.regs[RA] = 0x400010e8;
	is_int(ops->lr_step(&in, &out), 1, "lr: leaf");
	is_hex(out.pc, 0x400010e8, "lr: pc = $ra");
	is_hex(out.regs[SP], in.regs[SP], "lr: sp unchanged");
	is_hex(out.valid, CALLEE, "lr: ra and caller-saved registers unknown in the caller");
	ok(out.regs[16] == in.regs[16] && out.regs[GP] == in.regs[GP], "lr: s0, gp kept");
	in.regs[RA] = 0;
	is_int(ops->lr_step(&in, &out), 0, "lr: $ra = 0 refused");
	in.regs[RA] = 0x400010ea;
	is_int(ops->lr_step(&in, &out), 0, "lr: misaligned $ra refused");
}

#define OFFLINE_PID 990002

static void test_capture(void)
{
	static uint8_t page[0x1000], stack[0x1000];
	static const char maps[] =
		"3f7bd000-3f7be000 r-xp 00000000 00:00 0 \n"
		"3ffe0000-3ffe1000 rwxp 00000000 00:00 0                                  [stack]\n"
		"40000000-40002000 r-xp 00000000 00:00 0 \n";
	struct dwunw_config cfg = { .size = sizeof(cfg), .flags = DWUNW_CFG_NO_REMOTE_READS };
	struct dwunw_ctx ctx;
	struct dwunw_regs r;
	struct dwunw_frame f[8];
	size_t nf;
	int err;

	if (dwunw_init(&ctx, &cfg) != DWUNW_OK) {
		ok(0, "capture: dwunw_init");
		return;
	}
	put_trampolines(page);
	put_sigcontext(stack, 0x100 + 24, 0x7700000, 0x40000f58);
	put_sigcontext(stack, 0x400 + 176, 0x6600000, 0x400012dc);
	is_int(dwunw_maps_set(&ctx, OFFLINE_PID, maps, sizeof(maps) - 1), DWUNW_OK, "capture: maps");
	is_int(dwunw_memory_add(&ctx, OFFLINE_PID, TRAMP, page, sizeof(page)), DWUNW_OK, "capture: trampoline page");
	for (int rt = 0; rt < 2; rt++) {
		regs_init(&r, TRAMP + (rt ? 8 : 0));
		r.pid = OFFLINE_PID;
		r.regs[SP] = STK + (rt ? 0x400 : 0x100);
		r.stack_start = STK;
		r.stack = stack;
		r.stack_size = sizeof(stack);
		nf = 8;
		err = dwunw_capture(&ctx, &r, f, &nf);
		ok(nf >= 2, "capture %s: %zu frames (%s)", rt ? "rt_sigreturn" : "sigreturn", nf, dwunw_errname(err));
		if (nf >= 2) {
			is_int(f[1].how, DWUNW_HOW_SIGNAL, "capture %s: frame 1 from the signal frame", rt ? "rt" : "non-rt");
			is_hex(f[1].pc, rt ? 0x400012dc : 0x40000f58, "capture %s: frame 1 pc", rt ? "rt" : "non-rt");
			is_hex(f[1].sp, (rt ? 0x6600000u : 0x7700000u) + SP, "capture %s: frame 1 sp", rt ? "rt" : "non-rt");
		}
		dwunw_module_cache_release(&ctx, f, nf);
	}
	dwunw_shutdown(&ctx);
}

/*
 * Prologue analysis on GCC 12's code (verify_zoo's zoo_big, a 100000-byte frame adjusted with
 * lui/ori/subu, and zoo_alloca, whose frame needs fp), placed at FN and stopped at known pcs.
 */
#define FN     0x400017e8u
#define ALLOCA (FN + 0x7c)
#define PSTK   0x7ff00000u
#define BIGSZ  (32752u + 0x106d0u)

static const uint32_t fn_code[] = {
	0x3c1c0002, 0x279c8878, 0x0399e021, 0x27bd8010, 0x8f998024, 0x3c030001, 0x3c020002, 0x346306d0,
	0xafb07fe8, 0xafbf7fec, 0x03a3e823, 0x7c042420, 0x27b00018, 0xafbc0010, 0x02028021, 0xa3a40018,
	0xa204869f, 0x0411fe42, 0x00000000, 0x3c080001, 0x93a40018, 0x350806d0, 0x9203869f, 0x03a8e821,
	0x7c042420, 0x7c031420, 0x8fbf7fec, 0x00821021, 0x8fb07fe8, 0x03e00008, 0x27bd7ff0, 0x3c1c0002,
	0x279c87fc, 0x0399e021, 0x24820007, 0x8f998024, 0x27bdffd8, 0x000210c2, 0x2484ffff, 0x000210c0,
	0xafbe0020, 0xafb1001c, 0x03a0f025, 0xafb00018, 0xafbf0024, 0xafbc0010, 0x03a2e823, 0x24020001,
	0x27b10010, 0xa3a20010, 0x24020002, 0x02248021, 0xa2020000, 0x0411fe1e, 0x00000000, 0x93a40010,
	0x92030000, 0x03c0e825, 0x8fbf0024, 0x7c042420, 0x7c031420, 0x8fbe0020, 0x8fb1001c, 0x00821021,
	0x8fb00018, 0x03e00008, 0x27bd0028
};

static void test_prologue(void)
{
	static uint8_t code[sizeof(fn_code)], stack[0x20000];
	static const uint32_t outer[] = { 0x0000f825, 0x03e00008, 0x00000000 }; /* move ra,zero; jr ra; nop */
	static uint8_t outer_code[sizeof(outer)];
	struct fake_mem m = { .r = { { FN, code, sizeof(code) }, { PSTK, stack, sizeof(stack) }, { 0x40002000, outer_code, sizeof(outer_code) } }, .n = 3 };
	struct dwunw_regs in, out;
	const uint64_t S = PSTK + 0x100;

	ok(ops->prologue_step != NULL, "prologue_step provided");
	if (!ops->prologue_step)
		return;
	for (unsigned i = 0; i < sizeof(fn_code) / 4; i++)
		put32(code, 4 * i, fn_code[i]);
	for (unsigned i = 0; i < 3; i++)
		put32(outer_code, 4 * i, outer[i]);
	put32(stack, S + BIGSZ - 4 - PSTK, 0x40001b84); /* zoo_big's saved ra */
	put32(stack, S + BIGSZ - 8 - PSTK, 0x5050);     /* and s0 */

	/* zoo_big at its first instruction: nothing allocated, ra in the register */
	regs_init(&in, FN);
	in.regs[SP] = S + BIGSZ;
	in.regs[RA] = 0x40001b84;
	is_int(ops->prologue_step(&in, &out, FN, 1, fake_read, &m), 1, "prologue: entry");
	ok(out.pc == 0x40001b84 && out.regs[SP] == S + BIGSZ, "prologue: entry: pc = ra, sp unchanged");

	/* after addiu -32752, lui/ori, the saves and subu sp,sp,v1 */
	regs_init(&in, FN + 0x2c);
	in.regs[SP] = S;
	in.regs[RA] = 0x1234;
	is_int(ops->prologue_step(&in, &out, FN, 1, fake_read, &m), 1, "prologue: body of a 100000-byte frame");
	is_hex(out.regs[SP], S + BIGSZ, "prologue: lui/ori/subu frame size");
	is_hex(out.pc, 0x40001b84, "prologue: ra from its slot");
	ok(out.regs[16] == 0x5050 && (out.valid & BIT(16)) && !(out.valid & BIT(RA)), "prologue: s0 from its slot, the caller's ra unknown");
	is_hex(out.valid & BIT(GP), 0, "prologue: .cpload: the caller's gp unknown");

	/* a return address (frame 1): the bal and its delay slot ran; ra itself is not known */
	regs_init(&in, FN + 0x4c);
	in.regs[SP] = S;
	in.valid &= ~BIT(RA);
	is_int(ops->prologue_step(&in, &out, FN, 0, fake_read, &m), 1, "prologue: return address");
	ok(out.pc == 0x40001b84 && out.regs[SP] == S + BIGSZ, "prologue: return address: the same caller");
	/* (the code ahead of that return address is the epilogue: found without the symbol too) */
	is_int(ops->prologue_step(&in, &out, 0, 0, fake_read, &m), 1, "epilogue: ahead of a return address, no symbol needed");
	/* in the body without the symbol: the backward scan finds the function's .cpload */
	regs_init(&in, FN + 0x40);
	in.regs[SP] = S;
	is_int(ops->prologue_step(&in, &out, 0, 1, fake_read, &m), 1, "prologue: no symbol: the start at .cpload");
	ok(out.pc == 0x40001b84 && out.regs[SP] == S + BIGSZ, "prologue: no symbol: the same frame");
	/* ... and without the .cpload either: no jr ra before the function (the mapping's start) */
	put32(code, 8, 0); /* addu gp,gp,t9 -> nop */
	is_int(ops->prologue_step(&in, &out, 0, 1, fake_read, &m), DWUNW_ERR_PROLOGUE, "prologue: no start found: PROLOGUE");
	put32(code, 8, fn_code[2]);

	/* epilogue: addu sp,sp,t0 ran (t0 = 0x106d0): 32752 bytes left, ra and s0 reloads ahead */
	regs_init(&in, FN + 0x60);
	in.regs[SP] = S + 0x106d0;
	in.regs[RA] = 0x1234;
	is_int(ops->prologue_step(&in, &out, FN, 1, fake_read, &m), 1, "epilogue: after the first sp increment");
	ok(out.pc == 0x40001b84 && out.regs[SP] == S + BIGSZ && out.regs[16] == 0x5050, "epilogue: frame and slots from the code ahead");
	/* at jr ra: ra and s0 already reloaded (the registers), the addiu in the delay slot still to run */
	regs_init(&in, FN + 0x74);
	in.regs[SP] = S + 0x106d0;
	in.regs[RA] = 0x40001b88;
	in.regs[16] = 0x6060;
	is_int(ops->prologue_step(&in, &out, FN, 1, fake_read, &m), 1, "epilogue: at jr ra");
	ok(out.pc == 0x40001b88 && out.regs[SP] == S + BIGSZ && out.regs[16] == 0x6060, "epilogue: at jr ra: registers already the caller's");

	/* zoo_alloca after subu sp,sp,v0: the frame from fp (s8 = sp after its addiu -40) */
	put32(stack, S + 36 - PSTK, 0x40001ba4);
	put32(stack, S + 32 - PSTK, 0x7788); /* the caller's fp */
	regs_init(&in, ALLOCA + 0x40);
	in.regs[FP] = S;
	in.regs[SP] = S - 104;
	is_int(ops->prologue_step(&in, &out, ALLOCA, 1, fake_read, &m), 1, "prologue: alloca");
	ok(out.pc == 0x40001ba4 && out.regs[SP] == S + 40 && out.regs[FP] == 0x7788, "prologue: alloca: CFA = fp + 40, fp from its slot");
	/* after move sp,s8 in its epilogue */
	regs_init(&in, ALLOCA + 0x6c);
	in.regs[FP] = S;
	in.regs[SP] = S;
	is_int(ops->prologue_step(&in, &out, ALLOCA, 1, fake_read, &m), 1, "epilogue: alloca after move sp,fp");
	ok(out.pc == 0x40001ba4 && out.regs[SP] == S + 40, "epilogue: alloca: the same caller");
	/* the same pc with fp unknown: no guess */
	regs_init(&in, ALLOCA + 0x40);
	in.valid &= ~BIT(FP);
	is_int(ops->prologue_step(&in, &out, ALLOCA, 1, fake_read, &m), DWUNW_ERR_PROLOGUE, "prologue: alloca without fp: PROLOGUE");
	/* a frame-1 pc in a function that never saved ra: no guess */
	regs_init(&in, FN + 0x4);
	in.valid &= ~BIT(RA);
	is_int(ops->prologue_step(&in, &out, FN, 0, fake_read, &m), DWUNW_ERR_PROLOGUE, "prologue: ra neither saved nor known: PROLOGUE");
	/* move ra, zero: the outermost frame */
	regs_init(&in, 0x40002008);
	is_int(ops->prologue_step(&in, &out, 0x40002000, 0, fake_read, &m), 1, "prologue: move ra, zero");
	is_hex(out.pc, 0, "prologue: move ra, zero: pc 0 ends the walk");
}

/*
 * A function of a stripped library (no symbol, no CFI) with an early return before the code pc
 * is in, written as gcc writes them (glibc's static functions): the backward scan would take the
 * early `jr ra` for the previous function's end; the paths from pc reach the real epilogue.
 */
static const uint32_t early_code[] = {
	0x3c1c0016, /* 0x00 lui gp,0x16 */
	0x279ccc10, /* 0x04 addiu gp,gp,-13296 */
	0x0399e021, /* 0x08 addu gp,gp,t9 */
	0x27bdffd0, /* 0x0c addiu sp,sp,-48 */
	0xafbf002c, /* 0x10 sw ra,44(sp) */
	0xafb00028, /* 0x14 sw s0,40(sp) */
	0xafbc0010, /* 0x18 sw gp,16(sp) */
	0x10800007, /* 0x1c beqz a0,0x3c */
	0x00808025, /* 0x20 move s0,a0 */
	0x8fbf002c, /* 0x24 lw ra,44(sp)   the early return */
	0x02001025, /* 0x28 move v0,s0 */
	0x8fb00028, /* 0x2c lw s0,40(sp) */
	0x03e00008, /* 0x30 jr ra */
	0x27bd0030, /* 0x34 addiu sp,sp,48 */
	0x00000000, /* 0x38 nop */
	0x8f9998a4, /* 0x3c lw t9,-26460(gp) */
	0x0320f809, /* 0x40 jalr t9 */
	0x00002025, /* 0x44 move a0,zero */
	0x8fbc0010, /* 0x48 lw gp,16(sp)   pc: the return address */
	0x1040fffb, /* 0x4c beqz v0,0x3c   (a loop back to the call) */
	0x00408025, /* 0x50 move s0,v0 */
	0x1000fff3, /* 0x54 b 0x24 */
	0x00000000, /* 0x58 nop */
};

static void test_paths(void)
{
	static uint8_t code[sizeof(early_code)], stack[0x400];
	const uint64_t F = 0x40010000, S = PSTK + 0x100;
	struct fake_mem m = { .r = { { F, code, sizeof(code) }, { PSTK, stack, sizeof(stack) } }, .n = 2 };
	struct dwunw_regs in, out;

	if (!ops->prologue_step)
		return;
	for (unsigned i = 0; i < sizeof(early_code) / 4; i++)
		put32(code, 4 * i, early_code[i]);
	put32(stack, S + 44 - PSTK, 0x40001b84); /* the saved ra */
	put32(stack, S + 40 - PSTK, 0x5050);     /* and s0 */
	regs_init(&in, F + 0x48);
	in.regs[SP] = S;
	in.valid &= ~BIT(RA);
	is_int(ops->prologue_step(&in, &out, 0, 0, fake_read, &m), 1, "paths: no symbol, an early return behind pc");
	ok(out.pc == 0x40001b84 && out.regs[SP] == S + 48 && out.regs[16] == 0x5050 && (out.valid & BIT(16)),
	   "paths: the frame, ra and s0 from the epilogue after the loop");
	/* the way out of the loop leads to code that cannot be read: no return reached, no guess */
	put32(code, 0x54, 0x10000002); /* b 0x60 (past the end) */
	is_int(ops->prologue_step(&in, &out, 0, 0, fake_read, &m), DWUNW_ERR_PROLOGUE, "paths: no return reached: PROLOGUE");
}

int main(void)
{
	ops = dwunw_arch_get(DWUNW_ARCH_MIPS32);
	test_registry();
	if (ops) {
		test_names();
		test_prstatus();
		test_sigframe();
		test_stub_lr();
		test_capture();
		test_prologue();
		test_paths();
	}
	return done_testing();
}
