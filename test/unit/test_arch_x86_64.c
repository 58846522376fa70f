// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of the x86_64 backend: ptrace register sets, frame-pointer steps, signal frames. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <sys/user.h>
#include "tap.h"
#include "dwunw.h"

enum { RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8, R9, R10, R11, R12, R13, R14, R15, RIP };
#define BIT(n) (1ull << (n))
#define GPRS (BIT(17) - 1)

static const struct dwunw_arch_ops *ops;

/* ---- fake target memory: a few regions at chosen addresses ----------------------------- */

struct region {
	uint64_t addr;
	void *buf;
	size_t size;
};

struct fake_mem {
	struct region r[4];
	unsigned n;
	unsigned reads;
};

static int fake_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = arg;

	m->reads++;
	for (unsigned i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];
		if (addr >= r->addr && len <= r->size && addr - r->addr <= r->size - len) {
			memcpy(buf, (const uint8_t *)r->buf + (addr - r->addr), len);
			return DWUNW_OK;
		}
	}
	return DWUNW_ERR_INVALID_ARG;
}

/* Reads of this process through the kernel, so that a bad address is an error, not a crash. */
static int self_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	(void)arg;
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)len ? DWUNW_OK : DWUNW_ERR_INVALID_ARG;
}

static void put64(void *base, size_t off, uint64_t v)
{
	memcpy((uint8_t *)base + off, &v, 8);
}

/* ---- regs_from_prstatus ------------------------------------------------------------------ */

static void test_prstatus(void)
{
	struct user_regs_struct u;
	struct dwunw_regs out;
	uint8_t unaligned[sizeof(u) + 1];
	uint64_t *w = (uint64_t *)&u;

	for (unsigned i = 0; i < sizeof(u) / 8; i++)
		w[i] = 0x1111000000000000ull + 0x100 * i + i;
	memset(&out, 0xaa, sizeof(out));
	is_int(ops->regs_from_prstatus(&u, sizeof(u), &out), DWUNW_OK, "prstatus: ok");
	is_int(out.arch, DWUNW_ARCH_X86_64, "prstatus: arch");
	is_hex(out.valid, GPRS, "prstatus: rax..r15 and rip valid");
	is_hex(out.pc, u.rip, "prstatus: pc = rip");
	is_hex(out.regs[RIP], u.rip, "prstatus: regs[16] (ra column) = rip");
	{
		const struct { unsigned dw; unsigned long long v; const char *name; } m[] = {
			{ RAX, u.rax, "rax" }, { RDX, u.rdx, "rdx" }, { RCX, u.rcx, "rcx" }, { RBX, u.rbx, "rbx" },
			{ RSI, u.rsi, "rsi" }, { RDI, u.rdi, "rdi" }, { RBP, u.rbp, "rbp" }, { RSP, u.rsp, "rsp" },
			{ R8, u.r8, "r8" }, { R9, u.r9, "r9" }, { R10, u.r10, "r10" }, { R11, u.r11, "r11" },
			{ R12, u.r12, "r12" }, { R13, u.r13, "r13" }, { R14, u.r14, "r14" }, { R15, u.r15, "r15" },
		};
		int bad = 0;
		for (unsigned i = 0; i < sizeof(m) / sizeof(m[0]); i++)
			if (out.regs[m[i].dw] != m[i].v) {
				printf("  # %s: got 0x%llx want 0x%llx\n", m[i].name,
				       (unsigned long long)out.regs[m[i].dw], m[i].v);
				bad++;
			}
		ok(!bad, "prstatus: DWARF numbering of all 16 GPRs");
		bad = 0;
		for (unsigned i = 17; i < DWUNW_MAX_REGS; i++)
			bad += out.regs[i] != 0;
		ok(!bad, "prstatus: registers beyond the GPRs cleared");
	}
	is_int(ops->regs_from_prstatus(&u, sizeof(u) - 1, &out), DWUNW_ERR_INVALID_ARG, "prstatus: short buffer");
	is_int(ops->regs_from_prstatus(&u, 17 * 4, &out), DWUNW_ERR_INVALID_ARG, "prstatus: 32-bit (compat) set refused");
	is_int(ops->regs_from_prstatus(NULL, sizeof(u), &out), DWUNW_ERR_INVALID_ARG, "prstatus: NULL buffer");
	memcpy(unaligned + 1, &u, sizeof(u));
	ok(ops->regs_from_prstatus(unaligned + 1, sizeof(u), &out) == DWUNW_OK && out.regs[RSP] == u.rsp &&
	   out.pc == u.rip, "prstatus: unaligned buffer");
}

/* ---- fp_step ----------------------------------------------------------------------------- */

#define STK 0x7ffe0000ull

static void test_fp_step(void)
{
	uint64_t stack[64] = { 0 };
	struct fake_mem m = { .r = { { STK, stack, sizeof(stack) } }, .n = 1 };
	struct dwunw_regs in, out;

	/* frame 0: rsp = STK, rbp = STK+0x20; frame 1: rbp STK+0x60; frame 2: rbp STK+0xa0, whose
	 * saved rbp is 0 (outermost). */
	put64(stack, 0x20, STK + 0x60);
	put64(stack, 0x28, 0x401111);
	put64(stack, 0x60, STK + 0xa0);
	put64(stack, 0x68, 0x402222);
	put64(stack, 0xa0, 0);
	put64(stack, 0xa8, 0x403333);

	memset(&in, 0, sizeof(in));
	in.arch = DWUNW_ARCH_X86_64;
	in.pid = 42;
	in.tid = 43;
	in.pc = 0x400500;
	in.valid = GPRS;
	for (unsigned i = 0; i < 17; i++)
		in.regs[i] = 0xc0de0000 + i;
	in.regs[RSP] = STK;
	in.regs[RBP] = STK + 0x20;
	in.regs[RIP] = in.pc;

	is_int(ops->fp_step(&in, &out, fake_read, &m), 1, "fp: frame 1");
	is_hex(out.pc, 0x401111, "fp: frame 1 pc = [rbp+8]");
	is_hex(out.regs[RSP], STK + 0x30, "fp: frame 1 rsp = rbp+16");
	is_hex(out.regs[RBP], STK + 0x60, "fp: frame 1 rbp = [rbp]");
	is_hex(out.regs[RIP], 0x401111, "fp: frame 1 regs[16] = return address");
	is_hex(out.valid, BIT(RBX) | BIT(RBP) | BIT(RSP) | BIT(R12) | BIT(R13) | BIT(R14) | BIT(R15) | BIT(RIP),
	       "fp: valid = rbp, rsp, rip and the callee-saved rbx, r12-r15");
	ok(out.regs[RBX] == in.regs[RBX] && out.regs[R12] == in.regs[R12] && out.regs[R15] == in.regs[R15],
	   "fp: callee-saved registers keep their values");
	ok(out.pid == 42 && out.tid == 43 && out.arch == DWUNW_ARCH_X86_64, "fp: pid, tid, arch carried over");

	/* Steps in place (in == out), with only rbp/rsp known: nothing else becomes valid. */
	in = out;
	in.valid = BIT(RBP) | BIT(RSP);
	is_int(ops->fp_step(&in, &in, fake_read, &m), 1, "fp: frame 2 (in place)");
	ok(in.pc == 0x402222 && in.regs[RSP] == STK + 0x70 && in.regs[RBP] == STK + 0xa0, "fp: frame 2 registers");
	is_hex(in.valid, BIT(RBP) | BIT(RSP) | BIT(RIP), "fp: frame 2 valid: nothing invented");

	is_int(ops->fp_step(&in, &out, fake_read, &m), 1, "fp: frame 3");
	ok(out.pc == 0x403333 && out.regs[RBP] == 0 && out.regs[RSP] == STK + 0xb0, "fp: frame 3 registers, rbp 0");
	is_int(ops->fp_step(&out, &in, fake_read, &m), 0, "fp: chain ends at rbp = 0");

	/* Refusals. */
	memset(&in, 0, sizeof(in));
	in.arch = DWUNW_ARCH_X86_64;
	in.valid = BIT(RBP) | BIT(RSP);
	in.regs[RSP] = STK;
	in.regs[RBP] = STK + 0x24;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: misaligned rbp refused");
	in.regs[RBP] = STK + 0x20;
	in.regs[RSP] = STK + 0x30;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: new sp not above the old sp refused");
	in.regs[RSP] = STK + 0x28;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 1, "fp: new sp just above the old sp accepted");
	in.regs[RSP] = STK;
	in.valid = BIT(RSP);
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: rbp not valid refused");
	in.valid = BIT(RBP) | BIT(RSP);
	in.regs[RBP] = STK + 0x100; /* [rbp+8] = 0 */
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: return address 0 refused");
	in.regs[RBP] = STK + sizeof(stack) - 8; /* [rbp+8] outside the memory */
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: unreadable frame refused");
	in.regs[RBP] = UINT64_MAX - 7;
	in.regs[RSP] = 0;
	is_int(ops->fp_step(&in, &out, fake_read, &m), 0, "fp: rbp+16 wrapping refused");
}

/* ---- sigframe ---------------------------------------------------------------------------- */

#define CODE 0x401000ull
#define SIGSTK 0x7ffd0000ull

static const uint8_t restore_rt[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };

static void test_sigframe(void)
{
	static const int gidx[17] = {
		[RAX] = REG_RAX, [RDX] = REG_RDX, [RCX] = REG_RCX, [RBX] = REG_RBX, [RSI] = REG_RSI,
		[RDI] = REG_RDI, [RBP] = REG_RBP, [RSP] = REG_RSP, [R8] = REG_R8, [R9] = REG_R9,
		[R10] = REG_R10, [R11] = REG_R11, [R12] = REG_R12, [R13] = REG_R13, [R14] = REG_R14,
		[R15] = REG_R15, [RIP] = REG_RIP,
	};
	uint8_t code[32];
	/* what the handler's ret leaves: struct rt_sigframe minus pretcode, i.e. the ucontext */
	union { ucontext_t uc; uint8_t raw[sizeof(ucontext_t) + 128]; } frame;
	struct fake_mem m;
	struct dwunw_regs in, out;
	int bad = 0;

	memset(code, 0x90, sizeof(code));
	memcpy(code, restore_rt, sizeof(restore_rt));
	memset(&frame, 0, sizeof(frame));
	for (int i = 0; i < NGREG; i++)
		frame.uc.uc_mcontext.gregs[i] = (greg_t)(0x5100000000000000ull + 0x1000ull * (uint64_t)i);
	m = (struct fake_mem){ .r = { { CODE, code, sizeof(code) }, { SIGSTK, &frame, sizeof(frame) } }, .n = 2 };

	memset(&in, 0, sizeof(in));
	in.arch = DWUNW_ARCH_X86_64;
	in.flags = DWUNW_REGS_PC_IS_RETADDR;
	in.pid = 7;
	in.pc = CODE;
	in.regs[RSP] = SIGSTK;
	in.regs[RIP] = CODE;
	in.valid = BIT(RSP) | BIT(RIP);
	memset(&out, 0xaa, sizeof(out));
	is_int(ops->sigframe(&in, &out, fake_read, &m), 1, "sigframe: __restore_rt recognised");
	is_hex(out.valid, GPRS, "sigframe: 17 registers valid");
	for (unsigned r = 0; r < 17; r++)
		if (out.regs[r] != (uint64_t)frame.uc.uc_mcontext.gregs[gidx[r]]) {
			printf("  # DWARF %u (%s): got 0x%llx\n", r, ops->reg_name(r), (unsigned long long)out.regs[r]);
			bad++;
		}
	ok(!bad, "sigframe: each register from its REG_* slot");
	is_hex(out.pc, (uint64_t)frame.uc.uc_mcontext.gregs[REG_RIP], "sigframe: pc = REG_RIP");
	ok(out.pid == 7 && out.arch == DWUNW_ARCH_X86_64, "sigframe: pid and arch carried over");
	ok(!(out.flags & DWUNW_REGS_PC_IS_RETADDR), "sigframe: the interrupted pc is exact");

	/* The 32-bit move variant of the restorer. */
	{
		static const uint8_t short_rt[] = { 0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
		memset(code, 0x90, sizeof(code));
		memcpy(code, short_rt, sizeof(short_rt));
		is_int(ops->sigframe(&in, &out, fake_read, &m), 1, "sigframe: mov $15,%%eax; syscall recognised");
	}
	/* Not a trampoline. */
	{
		static const uint8_t prologue[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc3 };
		static const uint8_t other_syscall[] = { 0x48, 0xc7, 0xc0, 0x0e, 0x00, 0x00, 0x00, 0x0f, 0x05 };
		memcpy(code, prologue, sizeof(prologue));
		is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: function prologue is not a trampoline");
		memcpy(code, other_syscall, sizeof(other_syscall));
		is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: mov $14,%%rax; syscall is not");
		memcpy(code, restore_rt, sizeof(restore_rt));
		code[8] = 0x06;
		is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: last byte differs: not");
	}
	/* pc unreadable: not a trampoline. */
	memcpy(code, restore_rt, sizeof(restore_rt));
	in.pc = 0x1000;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: unreadable pc -> 0");
	/* The long form cut by the end of the mapping. */
	memcpy(code + sizeof(code) - 7, restore_rt, 7);
	in.pc = CODE + sizeof(code) - 7;
	is_int(ops->sigframe(&in, &out, fake_read, &m), 0, "sigframe: restorer cut by the end of memory -> 0");
	/* A trampoline whose ucontext cannot be read: the read's error. */
	in.pc = CODE;
	in.regs[RSP] = 0x2000;
	is_int(ops->sigframe(&in, &out, fake_read, &m), DWUNW_ERR_INVALID_ARG, "sigframe: unreadable ucontext -> read error");
	in.valid = BIT(RIP);
	is_int(ops->sigframe(&in, &out, fake_read, &m), DWUNW_ERR_INVALID_ARG, "sigframe: no sp -> error");
}

/* ---- a real signal ----------------------------------------------------------------------- */

static volatile sig_atomic_t rs_ran;
static int rs_ret;
static uint64_t rs_sp, rs_uc, rs_ra;
static struct dwunw_regs rs_out;
static ucontext_t rs_uc_copy;

__attribute__((noinline))
static void real_handler(int sig, siginfo_t *si, void *ucv)
{
	struct dwunw_regs in;

	(void)sig;
	(void)si;
	/* The handler was entered as if called from the restorer: the return address is
	 * sa_restorer, and after the return (pop) the stack pointer is the ucontext's address. With a
	 * frame pointer (forced by __builtin_frame_address) that is rbp + 16. */
	rs_ra = (uint64_t)(uintptr_t)__builtin_return_address(0);
	rs_sp = (uint64_t)(uintptr_t)__builtin_frame_address(0) + 16;
	rs_uc = (uint64_t)(uintptr_t)ucv;
	memcpy(&rs_uc_copy, ucv, sizeof(rs_uc_copy));
	memset(&in, 0, sizeof(in));
	in.arch = DWUNW_ARCH_X86_64;
	in.pc = rs_ra;
	in.regs[RSP] = rs_sp;
	in.valid = BIT(RSP);
	rs_ret = ops->sigframe(&in, &rs_out, self_read, NULL);
	rs_ran = 1;
}

static void test_real_signal(void)
{
	struct sigaction sa, old;
	const greg_t *g;
	int bad = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = real_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (!ok(sigaction(SIGUSR1, &sa, &old) == 0, "real signal: handler installed"))
		return;
	raise(SIGUSR1);
	sigaction(SIGUSR1, &old, NULL);
	if (!ok(rs_ran, "real signal: handler ran"))
		return;
	is_hex(rs_sp, rs_uc, "real signal: stack pointer after the handler's return = ucontext address");
	is_int(rs_ret, 1, "real signal: the handler's return address is a recognised trampoline");
	g = rs_uc_copy.uc_mcontext.gregs;
	is_hex(rs_out.pc, (uint64_t)g[REG_RIP], "real signal: pc = REG_RIP");
	is_hex(rs_out.regs[RSP], (uint64_t)g[REG_RSP], "real signal: rsp = REG_RSP");
	bad += rs_out.regs[RBP] != (uint64_t)g[REG_RBP];
	bad += rs_out.regs[RBX] != (uint64_t)g[REG_RBX];
	bad += rs_out.regs[RAX] != (uint64_t)g[REG_RAX];
	bad += rs_out.regs[RDI] != (uint64_t)g[REG_RDI];
	bad += rs_out.regs[R12] != (uint64_t)g[REG_R12];
	bad += rs_out.regs[R15] != (uint64_t)g[REG_R15];
	ok(!bad, "real signal: other registers from the kernel's frame");
	is_hex(rs_out.valid, GPRS, "real signal: 17 registers valid");
}

int main(void)
{
	ops = dwunw_arch_get(DWUNW_ARCH_X86_64);
	if (!ok(ops != NULL, "x86_64 backend"))
		return done_testing();
	ok(ops->sigframe && ops->fp_step && ops->regs_from_prstatus && ops->stub_step && !ops->ra_to_pc && !ops->lr_step,
	   "ops: sigframe, fp_step, regs_from_prstatus, stub_step set; ra_to_pc NULL (identity); no lr_step");
	is_str(ops->reg_name(16), "rip", "reg_name kept");
	is_int(ops->pc_reg, RIP, "pc_reg: rip");
	is_hex(ops->callee_saved, BIT(RBX) | BIT(RBP) | BIT(R12) | BIT(R13) | BIT(R14) | BIT(R15),
	       "callee_saved: rbx, rbp, r12-r15");
	ok(ops->sp_reg == RSP && ops->fp_reg == RBP && ops->ra_reg == RIP && ops->nregs == 17 &&
	   ops->lr_reg == 0xffff && ops->addr_size == 8, "register roles");
	test_prstatus();
	test_fp_step();
	test_sigframe();
	test_real_signal();
	return done_testing();
}
