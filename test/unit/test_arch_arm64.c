// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit tests of the arm64 backend: the registry entry and its constants, readelf's register
 * names, pointer-authentication stripping, NT_PRSTATUS, signal frames built by hand around the
 * real trampoline code (qemu's page and the kernel's __kernel_rt_sigframe are the same two
 * instructions), PLT stubs, leaf frames, frame records; then two offline captures through
 * dwunw_capture (a trampoline in anonymous memory, a leaf in JIT code).
 */
#include <elf.h>
#include <stdint.h>
#include <string.h>
#include "tap.h"
#include "dwunw.h"

#define BIT(n) (1ull << (n))
#define X29 29
#define X30 30
#define SP 31
#define GPRS (BIT(32) - 1)
#define CALLEE (((BIT(30) - 1) & ~(BIT(19) - 1)) | BIT(SP))

static const struct dwunw_arch_ops *ops;

/* ---- fake target memory ------------------------------------------------------------------ */

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

static void put64(void *base, size_t off, uint64_t v)
{
	uint8_t *p = (uint8_t *)base + off;
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
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
	r->arch = DWUNW_ARCH_ARM64;
	r->pid = 42;
	r->tid = 43;
	r->pc = pc;
	r->valid = GPRS;
	for (unsigned i = 0; i < 32; i++)
		r->regs[i] = 0xa0000000ull + 0x100 * i;
}

/* ---- constants and names ----------------------------------------------------------------- */

static void test_registry(void)
{
	ok(ops != NULL, "registry: arm64 backend");
	if (!ops)
		return;
	is_str(ops->name, "arm64", "registry: name");
	is_int(ops->elf_machine, EM_AARCH64, "registry: EM_AARCH64");
	is_int(ops->elf_class, ELFCLASS64, "registry: ELFCLASS64");
	is_int(ops->addr_size, 8, "registry: 8-byte addresses");
	is_int(ops->nregs, 32, "registry: x0-x30 and sp tracked");
	is_int(ops->sp_reg, 31, "registry: sp is DWARF 31");
	is_int(ops->fp_reg, 29, "registry: fp is x29");
	is_int(ops->ra_reg, 30, "registry: RA column x30");
	is_int(ops->lr_reg, 30, "registry: link register x30");
	is_int(ops->pc_reg, 0xffff, "registry: no DWARF number for the pc");
	is_hex(ops->callee_saved, CALLEE, "registry: callee-saved x19-x29 and sp, not x30");
	ok(dwunw_arch_for_elf(EM_AARCH64, ELFCLASS64) == ops, "registry: for_elf(EM_AARCH64, 64)");
	ok(dwunw_arch_for_elf(EM_AARCH64, ELFCLASS32) == NULL, "registry: ILP32/arm32 class refused");
	ok(ops->sigframe && ops->lr_step && ops->stub_step && ops->fp_step && ops->regs_from_prstatus &&
	   ops->ra_to_pc && ops->reg_name, "registry: every op provided");
}

static void test_names(void)
{
	/* binutils 2.40 readelf --debug-dump=frames-interp */
	static const struct { unsigned reg; const char *name; } want[] = {
		{ 0, "x0" }, { 15, "x15" }, { 29, "x29" }, { 30, "x30" }, { 31, "sp" }, { 33, "elr" },
		{ 46, "vg" }, { 47, "ffr" }, { 48, "p0" }, { 63, "p15" }, { 64, "v0" }, { 72, "v8" },
		{ 95, "v31" }, { 96, "z0" }, { 127, "z31" },
	};
	static const unsigned rn[] = { 32, 34, 45, 128, 4000 };
	int bad = 0;

	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *n = ops->reg_name(want[i].reg);
		if (!n || strcmp(n, want[i].name)) {
			printf("  # reg %u: got %s want %s\n", want[i].reg, n ? n : "NULL", want[i].name);
			bad++;
		}
	}
	ok(!bad, "names: readelf's names");
	bad = 0;
	for (unsigned i = 0; i < sizeof(rn) / sizeof(rn[0]); i++)
		bad += ops->reg_name(rn[i]) != NULL;
	ok(!bad, "names: NULL (readelf prints rN) for 32, 34-45 and beyond 127");
}

/* ---- pointer authentication -------------------------------------------------------------- */

static void test_pac(void)
{
	is_hex(ops->ra_to_pc(0x5500000f54ull, 0), 0x5500000f54ull, "pac: plain address unchanged");
	is_hex(ops->ra_to_pc(0x5500000f54ull, 1), 0x5500000f54ull, "pac: unsigned address with the flag unchanged");
	/* a signature measured under qemu -cpu max: bits 48-54 and 56-63 */
	is_hex(ops->ra_to_pc(0x00110055028be3b4ull, 1), 0x55028be3b4ull, "pac: signature in bits 48-54 stripped");
	is_hex(ops->ra_to_pc(0x67005502864000ull, 1), 0x5502864000ull, "pac: another signature stripped");
	is_hex(ops->ra_to_pc(0xff7f7ffff7a01234ull, 1), 0x7ffff7a01234ull, "pac: bits 56-63 too (no TBI for code)");
	is_hex(ops->ra_to_pc(0x3a110055028be3b4ull, 0), 0x55028be3b4ull,
	       "pac: stripped without negate_ra_state too (no user code address has bits 48-63)");
	is_hex(ops->ra_to_pc(0x0080ffc010001234ull, 1), 0xffffffc010001234ull,
	       "pac: bit 55 set (kernel half): the bits become ones, as XPACI does");
	is_hex(ops->ra_to_pc(0x0000ffffffffeffcull, 1), 0x0000ffffffffeffcull, "pac: highest 48-bit address kept");
}

/* ---- regs_from_prstatus ------------------------------------------------------------------ */

static void test_prstatus(void)
{
	uint8_t buf[34 * 8 + 1];
	struct dwunw_regs out;
	int bad = 0;

	for (unsigned i = 0; i < 34; i++)
		put64(buf + 1, 8 * i, 0x1111000000000000ull + 0x100 * i + i);
	memset(&out, 0xaa, sizeof(out));
	is_int(ops->regs_from_prstatus(buf + 1, 34 * 8, &out), DWUNW_OK, "prstatus: ok (unaligned buffer)");
	is_int(out.arch, DWUNW_ARCH_ARM64, "prstatus: arch");
	is_hex(out.valid, GPRS, "prstatus: x0-x30 and sp valid");
	for (unsigned i = 0; i < 31; i++)
		bad += out.regs[i] != 0x1111000000000000ull + 0x101 * i;
	ok(!bad, "prstatus: regs[0..30] -> x0-x30");
	is_hex(out.regs[SP], 0x1111000000000000ull + 0x101 * 31, "prstatus: sp (word 31) -> DWARF 31");
	is_hex(out.pc, 0x1111000000000000ull + 0x101 * 32, "prstatus: pc (word 32)");
	bad = 0;
	for (unsigned i = 32; i < DWUNW_MAX_REGS; i++)
		bad += out.regs[i] != 0;
	ok(!bad, "prstatus: pstate and the rest not taken");
	is_int(ops->regs_from_prstatus(buf, 34 * 8 - 1, &out), DWUNW_ERR_INVALID_ARG, "prstatus: short buffer");
	is_int(ops->regs_from_prstatus(buf, 18 * 4, &out), DWUNW_ERR_INVALID_ARG, "prstatus: arm32 compat set refused");
	is_int(ops->regs_from_prstatus(NULL, 34 * 8, &out), DWUNW_ERR_INVALID_ARG, "prstatus: NULL buffer");
}

/* ---- signal frames ----------------------------------------------------------------------- */

#define TRAMP 0x5502864000ull
#define STK   0x5502820000ull

/* The two instructions of qemu's trampoline page and of the kernel's __kernel_rt_sigreturn. */
static void put_trampoline(uint8_t *code, size_t off)
{
	put32(code, off, 0xd2801168); /* mov x8, #139 */
	put32(code, off + 4, 0xd4000001); /* svc #0 */
}

/* An rt_sigframe at `frame` (siginfo 128, ucontext: sigcontext at 304). */
static void put_sigframe(uint8_t *stack, size_t frame, uint64_t base)
{
	for (unsigned i = 0; i < 31; i++)
		put64(stack, frame + 312 + 8 * i, base + i);
	put64(stack, frame + 560, STK + 0x1000); /* sp */
	put64(stack, frame + 568, 0x5500000e28ull); /* pc: a function's first instruction */
	put64(stack, frame + 576, 0x60000000); /* pstate */
}

static void test_sigframe(void)
{
	static uint8_t code[0x1000], stack[0x2000];
	struct fake_mem m = { .r = { { TRAMP, code, sizeof(code) }, { STK, stack, sizeof(stack) } }, .n = 2 };
	struct dwunw_regs in, out;
	int bad = 0;

	memset(code, 0, sizeof(code));
	memset(stack, 0, sizeof(stack));
	put_trampoline(code, 0);
	put_sigframe(stack, 0x100, 0x7700000000ull);
	regs_init(&in, TRAMP);
	in.regs[SP] = STK + 0x100;
	in.flags = DWUNW_REGS_PC_IS_RETADDR;

	is_int(ops->sigframe(&in, &out, fake_read, &m), 1, "sigframe: the trampoline is recognised");
	for (unsigned i = 0; i < 31; i++)
		bad += out.regs[i] != 0x7700000000ull + i;
	ok(!bad, "sigframe: x0-x30 from sigcontext.regs (sp+312)");
	is_hex(out.regs[SP], STK + 0x1000, "sigframe: sp from sp+560");
	is_hex(out.pc, 0x5500000e28ull, "sigframe: pc from sp+568");
	is_hex(out.valid, GPRS, "sigframe: every GPR valid");
	ok(out.pid == 42 && out.tid == 43 && out.arch == DWUNW_ARCH_ARM64, "sigframe: pid, tid, arch carried over");
	ok(!(out.flags & DWUNW_REGS_PC_IS_RETADDR), "sigframe: the interrupted pc is not a return address");

	/* in place */
	out = in;
	is_int(ops->sigframe(&out, &out, fake_read, &m), 1, "sigframe: in == out");
	is_hex(out.pc, 0x5500000e28ull, "sigframe: in == out: pc");

	/* not a trampoline: other code, half of it, misaligned, unreadable */
	put32(code, 0x40, 0xd2801168);
	put32(code, 0x44, 0xd503201f); /* nop instead of svc */
	in.pc = TRAMP + 0x40;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: mov x8, #139 without svc is not one");
	put_trampoline(code, 0x80);
	put32(code, 0x80, 0xd2801128); /* mov x8, #137 */
	in.pc = TRAMP + 0x80;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: another syscall number is not one");
	in.pc = TRAMP + 2;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: misaligned pc");
	in.pc = 0x1000;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: unreadable code is not a trampoline");

	/* a trampoline whose frame cannot be read, or located */
	in.pc = TRAMP;
	in.regs[SP] = STK + 0x1f00;
	ok(ops->sigframe(&in, &out, fake_read, &m) < 0, "sigframe: frame beyond readable memory -> error");
	in.valid &= ~BIT(SP);
	is_int(ops->sigframe(&in, &out, fake_read, &m), DWUNW_ERR_INVALID_ARG, "sigframe: no sp -> INVALID_ARG");
}

/* ---- stubs and leaves -------------------------------------------------------------------- */

#define PLT 0x5500000a90ull

static void test_stub_lr(void)
{
	static uint8_t plt[0x100];
	static const uint32_t plt0[] = { 0xa9bf7bf0, 0xf00000f0, 0xf947fe11, 0x913fe210, 0xd61f0220,
					 0xd503201f, 0xd503201f, 0xd503201f };
	static const uint32_t pltn[] = { 0x90000110, 0xf9400211, 0x91000210, 0xd61f0220 };
	struct fake_mem m = { .r = { { PLT, plt, sizeof(plt) } }, .n = 1 };
	struct dwunw_regs in, out;

	for (unsigned i = 0; i < 8; i++)
		put32(plt, 4 * i, plt0[i]);
	for (unsigned e = 0; e < 4; e++)
		for (unsigned i = 0; i < 4; i++)
			put32(plt, 32 + 16 * e + 4 * i, pltn[i]);

	regs_init(&in, PLT + 32 + 16); /* PLT1's first instruction */
	in.regs[SP] = STK + 0x200;
	in.regs[X30] = 0x001100550000109cull; /* signed: stripped */
	is_int(ops->stub_step(&in, &out, fake_read, &m), 1, "stub: PLTn entry");
	is_hex(out.pc, 0x550000109cull, "stub: pc = x30 (signature stripped)");
	is_hex(out.regs[SP], STK + 0x200, "stub: sp unchanged");
	is_hex(out.valid, CALLEE, "stub: valid = callee-saved and sp (x30 and the rest unknown)");
	ok(out.regs[19] == in.regs[19] && out.regs[X29] == in.regs[X29], "stub: callee-saved kept");
	in.pc = PLT + 32 + 16 + 12; /* br x17 of PLT1: PLT0's nops before, no store */
	is_int(ops->stub_step(&in, &out, fake_read, &m), 1, "stub: PLTn's br");
	is_hex(out.regs[SP], STK + 0x200, "stub: PLTn's br: sp unchanged");

	in.pc = PLT; /* PLT0's stp has not run */
	is_int(ops->stub_step(&in, &out, fake_read, &m), 1, "stub: PLT0 entry");
	is_hex(out.regs[SP], STK + 0x200, "stub: PLT0 entry: sp unchanged");
	for (unsigned k = 1; k <= 4; k++) {
		in.pc = PLT + 4 * k; /* after stp x16, x30, [sp, #-16]! */
		is_int(ops->stub_step(&in, &out, fake_read, &m), 1, "stub: PLT0 +%u", 4 * k);
		is_hex(out.regs[SP], STK + 0x210, "stub: PLT0 +%u: sp + 16", 4 * k);
		is_hex(out.pc, 0x550000109cull, "stub: PLT0 +%u: pc = x30", 4 * k);
	}
	in.regs[X30] = 0;
	is_int(ops->stub_step(&in, &out, fake_read, &m), 0, "stub: x30 = 0 refused");
	in.regs[X30] = 0x5500001002ull;
	is_int(ops->stub_step(&in, &out, fake_read, &m), 0, "stub: misaligned x30 refused");
	in.valid &= ~BIT(X30);
	is_int(ops->stub_step(&in, &out, fake_read, &m), 0, "stub: no x30 refused");

	regs_init(&in, 0x5500000f24ull);
	in.regs[SP] = STK + 0x300;
	in.regs[X30] = 0x5500000f54ull;
	is_int(ops->lr_step(&in, &out), 1, "lr: leaf");
	is_hex(out.pc, 0x5500000f54ull, "lr: pc = x30");
	is_hex(out.regs[SP], STK + 0x300, "lr: sp unchanged");
	is_hex(out.valid, CALLEE, "lr: x30 and caller-saved registers unknown in the caller");
	in.valid &= ~BIT(SP);
	is_int(ops->lr_step(&in, &out), 0, "lr: no sp refused");
}

/* ---- frame records ----------------------------------------------------------------------- */

static void test_fp(void)
{
	static uint8_t stack[0x400];
	struct fake_mem m = { .r = { { STK, stack, sizeof(stack) } }, .n = 1 };
	struct dwunw_regs in, out;

	put64(stack, 0x100, STK + 0x200); /* caller's x29 */
	put64(stack, 0x108, 0x0022005500001234ull); /* signed lr */
	regs_init(&in, 0x7f00001000ull);
	in.regs[SP] = STK + 0x80;
	in.regs[X29] = STK + 0x100;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 1, "fp: frame record");
	is_hex(out.pc, 0x5500001234ull, "fp: pc = [x29+8], stripped");
	is_hex(out.regs[X29], STK + 0x200, "fp: x29 = [x29]");
	is_hex(out.regs[SP], STK + 0x110, "fp: sp = x29 + 16");
	is_hex(out.valid, CALLEE, "fp: callee-saved, x29 and sp");
	in.regs[X29] = STK + 0x108;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: misaligned x29 refused");
	in.regs[X29] = STK + 0x40;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: record below sp refused");
	in.regs[X29] = 0;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: x29 = 0 refused");
}

/* ---- through dwunw_capture --------------------------------------------------------------- */

#define OFFLINE_PID 990001

static void test_capture(void)
{
	static uint8_t page[0x1000], stack[0x2000];
	static const char maps[] =
		"5500000000-5500001000 r-xp 00000000 00:00 0 \n"
		"5502820000-5502822000 rw-p 00000000 00:00 0                              [stack]\n"
		"5502864000-5502865000 r-xp 00000000 00:00 0 \n";
	struct dwunw_config cfg = { .size = sizeof(cfg), .flags = DWUNW_CFG_NO_REMOTE_READS | DWUNW_CFG_NO_FP_FALLBACK };
	struct dwunw_ctx ctx;
	struct dwunw_regs r;
	struct dwunw_frame f[8];
	size_t nf = 8;
	int err;

	if (dwunw_init(&ctx, &cfg) != DWUNW_OK) {
		ok(0, "capture: dwunw_init");
		return;
	}
	put_trampoline(page, 0);
	put_sigframe(stack, 0x100, 0x7700000000ull);
	is_int(dwunw_maps_set(&ctx, OFFLINE_PID, maps, sizeof(maps) - 1), DWUNW_OK, "capture: maps");
	is_int(dwunw_memory_add(&ctx, OFFLINE_PID, TRAMP, page, sizeof(page)), DWUNW_OK,
	       "capture: the trampoline page as offline memory");

	/* frame 0 at the trampoline (the handler has returned into it) */
	regs_init(&r, TRAMP);
	r.pid = OFFLINE_PID;
	r.regs[SP] = STK + 0x100;
	r.stack_start = STK;
	r.stack = stack;
	r.stack_size = sizeof(stack);
	err = dwunw_capture(&ctx, &r, f, &nf);
	is_int(nf, 2, "capture: trampoline, then the interrupted frame (%s)", dwunw_errname(err));
	if (nf >= 2) {
		ok(f[0].flags & DWUNW_FRAME_JIT, "capture: frame 0 in anonymous code");
		is_int(f[1].how, DWUNW_HOW_SIGNAL, "capture: frame 1 from the signal frame");
		is_hex(f[1].pc, 0x5500000e28ull, "capture: frame 1 pc");
		is_hex(f[1].sp, STK + 0x1000, "capture: frame 1 sp");
		ok(f[1].flags & DWUNW_FRAME_EXACT_PC, "capture: frame 1 pc is exact");
	}
	dwunw_module_cache_release(&ctx, f, nf);

	/* frame 0 a leaf in anonymous code: the link register */
	regs_init(&r, 0x5500000100ull);
	r.pid = OFFLINE_PID;
	r.regs[SP] = STK + 0x100;
	r.regs[X30] = 0x0011005500000200ull;
	r.stack_start = STK;
	r.stack = stack;
	r.stack_size = sizeof(stack);
	nf = 8;
	err = dwunw_capture(&ctx, &r, f, &nf);
	ok(nf >= 2, "capture: a leaf without CFI steps through x30 (%zu frames, %s)", nf, dwunw_errname(err));
	if (nf >= 2) {
		is_int(f[1].how, DWUNW_HOW_LR, "capture: frame 1 how LR");
		is_hex(f[1].pc, 0x5500000200ull, "capture: frame 1 pc = x30, stripped");
		is_hex(f[1].sp, STK + 0x100, "capture: frame 1 sp unchanged");
	}
	dwunw_module_cache_release(&ctx, f, nf);
	dwunw_shutdown(&ctx);
}

/* ---- prologue analysis ------------------------------------------------------------------ */

/*
 * GCC 12's code without CFI (verify_zoo-pie-nocfi): zoo_big (a 100016-byte frame: sub #0x6b0,
 * sub #0x18 lsl 12, x30 at [sp]), zoo_alloca (stp x29,x30 pre-index, mov x29,sp, sub sp,sp,x0)
 * and, from the -mbranch-protection build, zoo_qsort_cmp (paciasp, stp pre-index, str x30).
 */
#define PFN   0x55000015e0ull
#define PALLO (PFN + 0x44)
#define PCMP  0x55000011d0ull
#define PSTK  0x5503000000ull
#define PBIG  (0x6b0ull + 0x18000ull)

static const uint32_t big_alloca[] = {
	0xd11ac3ff, 0x12001c00, 0xd14063ff, 0x914063e1, 0xf90003fe, 0x390043e0, 0x391abc20, 0x97fffeda,
	0x914063e0, 0x394043e1, 0xf94003fe, 0x395abc00, 0x911ac3ff, 0x92401c00, 0x914063ff, 0x8b210000,
	0xd65f03c0, 0xa9be7bfd, 0x91003c01, 0x52800023, 0x910003fd, 0xa90153f3, 0xd1000413, 0x927cec20,
	0xcb2063ff, 0x52800042, 0x910003f4, 0x39000283, 0x38336a82, 0x97fffec4, 0x39400281, 0x38736a80,
	0x910003bf, 0x92401c00, 0x8b210000, 0xa94153f3, 0xa8c27bfd, 0xd65f03c0,
};
static const uint32_t cmp_pac[] = {
	0xd503233f, 0xa9be53f3, 0xb9400014, 0xb9400033, 0xf9000bfe, 0x97fffff3, 0x6b13029f, 0x1a9fd7e1,
	0x1a9fa7e0, 0xf9400bfe, 0x4b000020, 0xa8c253f3, 0xd50323bf, 0xd65f03c0,
};

static void test_prologue(void)
{
	static uint8_t code[sizeof(big_alloca)], code2[sizeof(cmp_pac)], stack[0x20000];
	struct fake_mem m = { .r = { { PFN, code, sizeof(code) }, { PCMP, code2, sizeof(code2) }, { PSTK, stack, sizeof(stack) } }, .n = 3 };
	struct dwunw_regs in, out;
	const uint64_t S = PSTK + 0x100;

	ok(ops->prologue_step != NULL, "prologue_step provided");
	if (!ops->prologue_step)
		return;
	for (unsigned i = 0; i < sizeof(big_alloca) / 4; i++)
		put32(code, 4 * i, big_alloca[i]);
	for (unsigned i = 0; i < sizeof(cmp_pac) / 4; i++)
		put32(code2, 4 * i, cmp_pac[i]);
	put64(stack, S - PSTK, 0x5500001a00ull); /* zoo_big's x30 at [sp] */

	/* zoo_big after both sub sp and str x30 */
	regs_init(&in, PFN + 0x14);
	in.regs[SP] = S;
	is_int(ops->prologue_step(&in, &out, PFN, 1, fake_read, &m), 1, "prologue: 100016-byte frame");
	ok(out.pc == 0x5500001a00ull && out.regs[SP] == S + PBIG, "prologue: sub #imm, sub #imm lsl 12; x30 from [sp]");
	/* between its two sub sp: x30 still in the register */
	regs_init(&in, PFN + 0x4);
	in.regs[SP] = S + 0x18000;
	in.regs[X30] = 0x5500001a04ull;
	is_int(ops->prologue_step(&in, &out, PFN, 1, fake_read, &m), 1, "prologue: inside the prologue");
	ok(out.pc == 0x5500001a04ull && out.regs[SP] == S + PBIG, "prologue: inside: x30, sp + 0x6b0");
	/* epilogue after the first add sp: x30 reloaded, 0x18000 left */
	regs_init(&in, PFN + 0x34);
	in.regs[SP] = S + 0x6b0;
	in.regs[X30] = 0x5500001a08ull;
	is_int(ops->prologue_step(&in, &out, PFN, 1, fake_read, &m), 1, "epilogue: between the two add sp");
	ok(out.pc == 0x5500001a08ull && out.regs[SP] == S + PBIG, "epilogue: the add ahead is the frame left");
	/* a return address after bl (frame 1, x30 unknown) */
	regs_init(&in, PFN + 0x20);
	in.regs[SP] = S;
	in.valid &= ~BIT(X30);
	is_int(ops->prologue_step(&in, &out, PFN, 0, fake_read, &m), 1, "prologue: return address");
	ok(out.pc == 0x5500001a00ull && out.regs[SP] == S + PBIG && !(out.valid & BIT(X30)), "prologue: return address: caller, its x30 unknown");

	/* zoo_alloca after sub sp,sp,x0: CFA = x29 + 32; x29, x30 at [x29], x19, x20 at [x29+16] */
	put64(stack, S - PSTK, 0x7777);
	put64(stack, S + 8 - PSTK, 0x5500001a40ull);
	put64(stack, S + 16 - PSTK, 0x1919);
	regs_init(&in, PALLO + 0x24);
	in.regs[X29] = S;
	in.regs[SP] = S - 0x70;
	is_int(ops->prologue_step(&in, &out, PALLO, 1, fake_read, &m), 1, "prologue: alloca");
	ok(out.pc == 0x5500001a40ull && out.regs[SP] == S + 32 && out.regs[X29] == 0x7777 && out.regs[19] == 0x1919,
	   "prologue: alloca: CFA from x29, x29/x30/x19 from their slots");
	/* epilogue after mov sp,x29: ldp x19,x20 and ldp x29,x30,[sp],#32 ahead */
	regs_init(&in, PALLO + 0x20 + 0x8);
	in.regs[X29] = S;
	in.regs[SP] = S;
	is_int(ops->prologue_step(&in, &out, PALLO, 1, fake_read, &m), 1, "epilogue: alloca after mov sp, x29");
	ok(out.pc == 0x5500001a40ull && out.regs[SP] == S + 32 && out.regs[X29] == 0x7777, "epilogue: the same caller");
	/* alloca with x29 unknown: no guess */
	regs_init(&in, PALLO + 0x24);
	in.valid &= ~BIT(X29);
	is_int(ops->prologue_step(&in, &out, PALLO, 1, fake_read, &m), DWUNW_ERR_PROLOGUE, "prologue: alloca without x29: PROLOGUE");

	/* paciasp: the saved x30 is signed; the pc comes out stripped */
	put64(stack, S + 16 - PSTK, 0x003c005500001a80ull);
	regs_init(&in, PCMP + 0x18);
	in.regs[SP] = S;
	in.valid &= ~BIT(X30);
	is_int(ops->prologue_step(&in, &out, PCMP, 0, fake_read, &m), 1, "prologue: paciasp");
	ok(out.pc == 0x5500001a80ull && out.regs[SP] == S + 32, "prologue: signed x30 stripped, CFA sp + 32");
	/* after ldp x19,x20,[sp],#32 (sp restored), autiasp and ret ahead: x30 is the register */
	regs_init(&in, PCMP + 0x30);
	in.regs[SP] = S + 32;
	in.regs[X30] = 0x003c005500001a84ull;
	is_int(ops->prologue_step(&in, &out, PCMP, 1, fake_read, &m), 1, "epilogue: before autiasp");
	ok(out.pc == 0x5500001a84ull && out.regs[SP] == S + 32, "epilogue: before autiasp: x30 stripped, sp unchanged");
	/* no symbol, and no ret before the function: no guess */
	regs_init(&in, PFN + 0x14);
	is_int(ops->prologue_step(&in, &out, 0, 1, fake_read, &m), DWUNW_ERR_PROLOGUE, "prologue: no start found: PROLOGUE");
}

int main(void)
{
	ops = dwunw_arch_get(DWUNW_ARCH_ARM64);
	test_registry();
	if (ops) {
		test_names();
		test_pac();
		test_prstatus();
		test_sigframe();
		test_stub_lr();
		test_fp();
		test_capture();
		test_prologue();
	}
	return done_testing();
}
