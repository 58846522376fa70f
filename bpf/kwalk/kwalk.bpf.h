/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The in-kernel DWARF walker: unwinds the user stack from the tables kwalk_user.c loads into
 * the maps below (layout: kwalk_format.h). Include after vmlinux.h, the libbpf headers and
 * capture.bpf.h (the snapshot half of a hybrid event comes from there).
 *
 * One program body: bpf_loop() runs one frame per iteration (the verifier checks the callback
 * once, whatever kw_max_frames is). Per frame: the mapping (the previous frame's first, else a
 * binary search of the process's sorted mappings), the row (block index, then a binary search
 * of the few rows starting in that block), the rule (deduplicated, one array load), one user
 * read for the return address and saved registers (a 64-byte window below the CFA when every
 * slot lies there).
 *
 * x86_64 only for now (the rules, the signal frame). Where the walker cannot go on (no table,
 * a rule it does not evaluate, a fault) it stops and says where and why: the caller then sends
 * the snapshot with the event (kw_emit) and user space unwinds that one with libdwunw.
 */
#ifndef DWUNW_KWALK_BPF_H
#define DWUNW_KWALK_BPF_H

#include "kwalk_format.h"

#if !defined(__TARGET_ARCH_x86) && !defined(__TARGET_ARCH_arm64)
#error "kwalk.bpf.h: x86_64 or arm64"
#endif

const volatile __u32 kw_max_frames = KW_MAX_FRAMES;
/* Not const: the verifier then sees unknown values, not constants, in the walk's state (the
 * register mask, the frame count), so iterations converge instead of being told apart. */
__u64 kw_all_regs = KW_NREGS == 64 ? ~0ull : (1ull << KW_NREGS) - 1;
__u32 kw_zero = 0;
static const __u32 kw_zero_key = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kw_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kw_blocks SEC(".maps");

/* Peer walker only: the full pc offset (from text_lo) of every row. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kw_peer_pcs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_rule);
} kw_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_mod);
} kw_mods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory as processes come */
	__type(key, __u32);
	__type(value, struct kw_proc);
} kw_procs SEC(".maps");

/*
 * The user stack is read in chunks of kw_chunk bytes into the scratch (a helper call costs about
 * 100 ns here whatever its size up to a few KiB, so one read serves every frame whose 64-byte
 * window lies in the chunk). Power of two, <= KW_CHUNK; 64 reads each window alone (the peer's way).
 */
#define KW_CHUNK 4096
const volatile __u32 kw_chunk = 2048;

/* The registers, apart: a global function given a pointer may write anything there, so the
 * verifier forgets what that memory held (pointers kept elsewhere in kw_walk stay pointers). */
struct kw_regset {
	__u64 regs[KW_NREGS];
	__u64 valid;               /* bit n: regs[n] known */
	__u64 fault;               /* kw_slots_slow: the slot it could not read */
};

/* What every walk touches first, together: the fewest lines cold after the traced program ran. */
struct kw_scratch {
	__u64 busy;
	__u64 cbase;               /* user address of stk[0] */
	__u32 clen;                /* valid bytes in stk (0: none yet in this walk) */
	__u32 hits;                /* this walk: frames whose rule came from kw_cache */
	__u32 reads;               /* this walk: stack chunks read */
	__u32 pad;
	struct kw_regset rs;       /* the walk's registers (not on the 512-byte BPF stack: arm64's 32) */
	__u64 pcs[KW_MAX_FRAMES];
	__u8 how[KW_MAX_FRAMES];
	__u8 stk[KW_CHUNK + 64];
};

/* Frames are written here (the loop's context must live on the 512-byte BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_scratch);
} kw_scratch SEC(".maps");

/*
 * Per-CPU cache of looked-up rules: an entry holds a rule and the module addresses [lo, hi) it
 * covers (its row, cut at the block bounds), for a module slot and its gen. It is indexed by the
 * 256-byte stretch of code an address lies in, so a leaf pc never seen before still hits when
 * its row was looked up for another pc nearby (frame 0's pc differs every sample; the row of a
 * function body spans kilobytes). The frames of the next samples mostly repeat, and one cache
 * line then replaces the module, block index, rows and rule lines, each a cache (and TLB) miss
 * after the traced program ran. Shared by every process mapping the module. A slot's gen is
 * given once, for one file (kwalk_user.c: mod_find_or_add), and its table is always made from
 * that file, so an entry stays right while the table is evicted: nothing to flush.
 *
 * One entry is one cache line (48 B entries straddled two lines half the time). A per-CPU array's
 * values are only 8-byte aligned, so this is a plain mmapable array (values page-aligned), one
 * value per possible CPU (kw_size_maps), indexed by the CPU and looked up once per walk; the
 * scratch's busy flag keeps a nested program on this CPU out of it, as out of the scratch.
 */
#define KW_CACHE_BITS 9
#define KW_CACHE (1 << KW_CACHE_BITS)
#define KW_CACHE_CODE_SHIFT 8      /* the stretch of code an entry is indexed by */
struct kw_cent {
	__u64 lo;                  /* module addresses [lo, hi) the rule covers */
	__u64 hi;
	__u32 mod;
	__u32 gen;                 /* 0: empty */
	__u32 rid;
	struct kw_rule r;
} __attribute__((aligned(64)));

struct kw_cache {
	struct kw_cent e[KW_CACHE];
	/* the mapping of the last walk's frame 0: the next walk's first guess (checked against
	 * the walked process's own mappings, so another process's hint only costs the check) */
	__u32 map_hint;
} __attribute__((aligned(64)));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);    /* possible CPUs (kw_size_maps) */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct kw_cache);
} kw_cache SEC(".maps");

/* Fibonacci hashing of (stretch of code, module slot): the top bits. */
static __always_inline __u32 kw_cache_index(__u64 addr, __u32 mod)
{
	__u32 h = ((__u32)(addr >> KW_CACHE_CODE_SHIFT) ^ mod << 22) * 0x9e3779b1u;

	return h >> (32 - KW_CACHE_BITS);
}

/* One per-CPU value holding every counter: a walk adds its figures after one look-up, to
 * adjacent lines (a key per counter was a look-up and a cold line each). */
struct kw_counts {
	__u64 c[KW_C_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kw_counts);
} kw_counters SEC(".maps");

static __always_inline struct kw_counts *kw_counts(void)
{
	return bpf_map_lookup_elem(&kw_counters, &kw_zero_key);
}

static __always_inline void kw_count(__u32 idx, __u64 n)
{
	struct kw_counts *v = kw_counts();

	if (v && idx < KW_C_MAX)
		v->c[idx] += n; /* per-CPU; a lost increment under preemption only skews a statistic */
}

#define KW_RSP KW_SP
#if KW_ARM64
/* x19 .. x29 keep their values across calls (and sp); x30 only when a rule restores it */
#define KW_CALLEE_SAVED (((1ull << 30) - 1) & ~((1ull << 19) - 1))
#define KW_PAC_MASK 0xffff000000000000ull

/* Register of each slot of struct kw_rule: x19 .. x30. */
static __always_inline __u32 kw_slot_reg(int i)
{
	return 19 + i;
}
#else
#define KW_CALLEE_SAVED ((1u << 3) | (1u << 6) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

/* Register of each slot of struct kw_rule: rbx rbp r12 r13 r14 r15. */
static __always_inline __u32 kw_slot_reg(int i)
{
	return i == 0 ? 3 : i == 1 ? 6 : 10 + i;
}
#endif

struct kw_walk {
	struct kw_regset *rs;      /* in the scratch */
	__u64 pc;
	struct kw_proc *proc;
	struct kw_scratch *out;
	struct kw_cache *cache;    /* this CPU's */
	__u64 stop_pc;
	__u64 stop_addr;
	__u32 n;                   /* frames written */
	__u32 status;              /* KW_ST_*, or KW_ST_MAX while walking */
	__u32 exact;               /* pc is not a return address (frame 0, after a signal) */
	__u32 last;                /* mapping of the previous frame */
	__u32 how;
	__u32 stop_rule;
	__u32 stop_frame;
	__u32 why;
	__u32 peer;                /* binary search over full pcs instead of the block index */
};

/*
 * The inner searches are global functions: the verifier checks each once on its own, so their
 * branches do not multiply with the rest of the frame's (a 128-frame walk then verifies in a few
 * thousand instructions instead of exploding past the 1 M limit).
 */
__noinline int kw_map_search(struct kw_proc *p, __u64 pc)
{
	__u32 lo = 0, hi;

	if (!p)
		return -1;
	hi = p->nmaps;
	if (hi > KW_MAX_MAPS)
		hi = KW_MAX_MAPS;
	for (int k = 0; k < KW_MAP_STEPS; k++) {
		struct kw_map *m;
		__u32 mid;

		if (lo >= hi)
			break;
		mid = (lo + hi) / 2;
		m = &p->maps[mid & (KW_MAX_MAPS - 1)];
		if (pc < m->start)
			hi = mid;
		else if (pc >= m->end)
			lo = mid + 1;
		else
			return (int)(mid & (KW_MAX_MAPS - 1));
	}
	return -1;
}

static __always_inline struct kw_map *kw_map_find(struct kw_walk *w, __u64 pc)
{
	struct kw_proc *p = w->proc;
	__u32 last = w->last;
	struct kw_map *m;
	int i;

	if (!p)
		return NULL;
	if (!w->peer && last < KW_MAX_MAPS) {
		m = &p->maps[last];
		if (pc >= m->start && pc < m->end)
			return m;
	}
	i = kw_map_search(p, pc);
	if (i < 0)
		return NULL;
	w->last = i & (KW_MAX_MAPS - 1);
	return &p->maps[i & (KW_MAX_MAPS - 1)];
}

static __always_inline __u32 kw_row_at(__u32 idx)
{
	__u32 *p = bpf_map_lookup_elem(&kw_rows, &idx);

	return p ? *p : 0;
}

/* Rows lo+1 .. hi start inside (block start, next block start]: 16-bit pcs compare. The index
 * of the last one starting at or before block start + delta (row lo when none), or -1. */
__noinline long kw_run_search(__u32 lo, __u32 hi, __u32 bstart16, __u32 delta)
{
	for (int k = 0; k < KW_RUN_STEPS; k++) {
		__u32 mid, rel;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo + 1) / 2;
		rel = (KW_ROW_PC16(kw_row_at(mid)) - bstart16) & 0xffff;
		if (rel <= delta)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo < hi)
		return -1;
	return lo;
}

/*
 * Row covering module address `addr` of module slot `slot` (loaded as `gen`) through the block
 * index: its rule id, or -KW_ST_NO_TABLE (the slot holds no table of that gen), or
 * -KW_ST_NO_DWARF (no row). ce->lo, hi get the addresses the row covers within the block (the
 * row's own start and end, or the block's bounds where the row begins before or ends after it).
 * The search of the run is a global function, the rest inline in the frame: 6.1 refuses a
 * program whose chain of calls (program, loop callback, global functions) needs more than 512
 * bytes of stack together, so the miss path adds no call level nor stack to the callback's
 * (as two nested global functions it did: 544, and 576 as one with the search inline).
 */
static __always_inline long kw_row_find(__u32 slot, __u32 gen, __u64 addr, struct kw_cent *ce)
{
	__u32 shift, b, lo, hi, key, bstart16, delta, row;
	__u64 off, bstart, end;
	struct kw_mod *m;
	long idx;
	__u32 *p;

	m = bpf_map_lookup_elem(&kw_mods, &slot);
	if (!m || !m->gen || m->gen != gen)
		return -KW_ST_NO_TABLE;
	if (!ce)
		return -KW_ST_NO_DWARF;
	shift = m->shift;

	if (addr < m->text_lo || addr >= m->text_hi || shift > KW_MAX_SHIFT)
		return -KW_ST_NO_DWARF;
	off = addr - m->text_lo;
	b = off >> shift;
	if (b >= m->nblocks)
		return -KW_ST_NO_DWARF;
	key = m->blk_base + b;
	p = bpf_map_lookup_elem(&kw_blocks, &key);
	if (!p)
		return -KW_ST_NO_DWARF;
	lo = *p;
	key++;
	p = bpf_map_lookup_elem(&kw_blocks, &key);
	if (!p)
		return -KW_ST_NO_DWARF;
	hi = *p;
	bstart = m->text_lo + ((__u64)b << shift);
	bstart16 = (__u32)bstart & 0xffff;
	delta = (__u32)(off - ((__u64)b << shift));
	idx = kw_run_search(lo, hi, bstart16, delta);
	if (idx < 0)
		return -KW_ST_NO_DWARF;
	row = kw_row_at((__u32)idx);
	/* rows lo+1 .. hi start in (bstart, bstart + 2^shift]: their 16-bit offsets are exact */
	ce->lo = (__u32)idx == lo ? bstart : bstart + ((KW_ROW_PC16(row) - bstart16) & 0xffff);
	end = (__u32)idx < hi ? bstart + ((KW_ROW_PC16(kw_row_at((__u32)idx + 1)) - bstart16) & 0xffff)
			      : bstart + (1ull << shift);
	ce->hi = end < m->text_hi ? end : m->text_hi;
	return KW_ROW_RULE(row);
}

/*
 * The cache entry of module address `addr` (slot, gen): its index, + KW_CACHE when it was a miss
 * (filled from the tables), or -KW_ST_NO_TABLE / -KW_ST_NO_DWARF. The frame reads kw_mods only
 * here, on a miss; that kept the verification short only with the frame's `m->gen == 0` stop
 * before it (without it: 284-297 k instructions, with it 40 k).
 */
static __always_inline long kw_cache_get(struct kw_cache *c, __u64 addr, __u32 slot, __u32 gen)
{
	__u32 i = kw_cache_index(addr, slot), rid;
	struct kw_cent *a;
	struct kw_rule *r;
	long row;

	if (!c)
		return -KW_ST_NO_TABLE;
	a = &c->e[i & (KW_CACHE - 1)];
	if (addr >= a->lo && addr < a->hi && a->mod == slot && a->gen == gen)
		return i;
	a->gen = 0;
	row = kw_row_find(slot, gen, addr, a);
	if (row < 0)
		return row;
	rid = (__u32)row;
	r = bpf_map_lookup_elem(&kw_rules, &rid);
	if (!r)
		return -KW_ST_NO_DWARF;
	a->mod = slot;
	a->rid = rid;
	__builtin_memcpy(&a->r, r, sizeof(*r));
	a->gen = gen;
	return i + KW_CACHE;
}

/* The peer: a plain binary search over the module's full row pcs (what Parca's walker does). */
__noinline long kw_peer_search(__u32 base, __u32 n, __u32 off)
{
	__u32 lo = 0, hi, key;
	__u32 *p;

	if (!n)
		return -1;
	hi = n - 1;
	for (int k = 0; k < 24; k++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo + 1) / 2;
		key = base + mid;
		p = bpf_map_lookup_elem(&kw_peer_pcs, &key);
		if (!p)
			return -1;
		if (*p <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return KW_ROW_RULE(kw_row_at(base + lo));
}

static __always_inline long kw_row_find_peer(const struct kw_mod *m, __u64 addr)
{
	if (addr < m->text_lo || addr >= m->text_hi)
		return -1;
	return kw_peer_search(m->row_base, m->nrows, (__u32)(addr - m->text_lo));
}

static __always_inline int kw_stop(struct kw_walk *w, __u32 status, __u64 addr, __u32 rule)
{
	w->status = status;
	w->stop_pc = w->pc;
	w->stop_addr = addr;
	w->stop_rule = rule;
	w->stop_frame = w->n - 1;
	return 1;
}

#if KW_ARM64
/* The vDSO's __kernel_rt_sigreturn (and qemu's page): mov x8, #139; svc #0. */
static __always_inline int kw_is_restorer(__u64 pc)
{
	__u32 c[2] = {};

	if (bpf_probe_read_user(c, sizeof(c), (void *)pc))
		return 0;
	return c[0] == 0xd2801168 && c[1] == 0xd4000001;
}

/*
 * rt_sigframe at sp: siginfo (128), then ucontext whose uc_mcontext (a sigcontext) is at +176:
 * fault_address, regs[31], sp, pc. Read straight into the register set.
 */
static __always_inline int kw_sigframe(struct kw_walk *w)
{
	__u64 sc = w->rs->regs[KW_SP] + 128 + 176 + 8, sppc[2];

	if (!(w->rs->valid & (1ull << KW_SP)))
		return kw_stop(w, KW_ST_REG_UNKNOWN, 0, ~0u);
	if (bpf_probe_read_user(w->rs->regs, 31 * 8, (void *)sc) ||
	    bpf_probe_read_user(sppc, sizeof(sppc), (void *)(sc + 31 * 8)))
		return kw_stop(w, KW_ST_READ_FAULT, sc, ~0u);
	w->rs->regs[KW_SP] = sppc[0];
	w->pc = sppc[1];
	w->rs->valid = kw_all_regs;
	w->exact = 1;
	w->how = KW_HOW_SIGNAL;
	if (w->pc == 0)
		return kw_stop(w, KW_ST_OK, 0, ~0u);
	return 0;
}
#else
/* glibc's and musl's __restore_rt: mov $15,%rax; syscall (or mov $15,%eax; syscall). */
static __always_inline int kw_is_restorer(__u64 pc)
{
	__u8 c[9] = {};

	if (bpf_probe_read_user(c, sizeof(c), (void *)pc))
		return 0;
	if (c[0] == 0xb8 && c[1] == 0x0f && c[2] == 0 && c[3] == 0 && c[4] == 0 && c[5] == 0x0f &&
	    c[6] == 0x05)
		return 1;
	return c[0] == 0x48 && c[1] == 0xc7 && c[2] == 0xc0 && c[3] == 0x0f && c[4] == 0 && c[5] == 0 &&
	       c[6] == 0 && c[7] == 0x0f && c[8] == 0x05;
}

/*
 * rt_sigframe: at the restorer, rsp = &uc; uc_mcontext's gregs at +40 in the kernel's
 * sigcontext order r8..r15 rdi rsi rbp rbx rdx rax rcx rsp rip.
 */
static __always_inline int kw_sigframe(struct kw_walk *w)
{
	__u64 g[17];

	if (!(w->rs->valid & (1u << KW_RSP)))
		return kw_stop(w, KW_ST_REG_UNKNOWN, 0, ~0u);
	if (bpf_probe_read_user(g, sizeof(g), (void *)(w->rs->regs[KW_RSP] + 40)))
		return kw_stop(w, KW_ST_READ_FAULT, w->rs->regs[KW_RSP] + 40, ~0u);
	w->rs->regs[8] = g[0];
	w->rs->regs[9] = g[1];
	w->rs->regs[10] = g[2];
	w->rs->regs[11] = g[3];
	w->rs->regs[12] = g[4];
	w->rs->regs[13] = g[5];
	w->rs->regs[14] = g[6];
	w->rs->regs[15] = g[7];
	w->rs->regs[5] = g[8];
	w->rs->regs[4] = g[9];
	w->rs->regs[6] = g[10];
	w->rs->regs[3] = g[11];
	w->rs->regs[1] = g[12];
	w->rs->regs[0] = g[13];
	w->rs->regs[2] = g[14];
	w->rs->regs[7] = g[15];
	w->pc = g[16];
	w->rs->valid = 0xffff;
	w->exact = 1;
	w->how = KW_HOW_SIGNAL;
	if (w->pc == 0)
		return kw_stop(w, KW_ST_OK, 0, ~0u);
	return 0;
}
#endif

/* Saved registers slot by slot (not all in the window, or its read failed): 0, or 1 with
 * w->fault = the slot that could not be read. */
__noinline int kw_slots_slow(struct kw_regset *w, const struct kw_rule *r, __u64 cfa, __u64 osp)
{
	__u64 v;

	if (!w || !r)
		return 1;
	for (int i = 0; i < KW_NSAVED; i++) {
		__u32 sreg = kw_slot_reg(i);
		__u64 a = cfa + 8 * (__s64)r->off[i];

		if (!(r->saved & (1u << i)))
			continue;
		if (bpf_probe_read_user(&v, 8, (void *)a)) {
			/* an epilogue slot below sp: the register already holds it (as libdwunw) */
			if (a < osp && (w->valid & (1ull << sreg)))
				continue;
			w->fault = a;
			return 1;
		}
		w->regs[sreg & (KW_NREGS - 1)] = v;
		w->valid |= 1ull << sreg;
	}
	return 0;
}

/*
 * Have the 64 bytes below `cfa` in the stack chunk, reading a new chunk when the window leaves
 * it: 0 (already there), 2 (read), or 1 when unreadable (the caller then reads slot by slot).
 * Near the stack's end a whole chunk may fault: then the rest of the page, or the window alone.
 * `alone`: read just the window (the peer's way). The caller takes the slots from the chunk.
 */
__noinline int kw_window(struct kw_scratch *s, __u64 cfa, int alone)
{
	__u64 a = cfa - 64, off;
	__u32 len = alone ? 64 : kw_chunk, rest;

	if (!s)
		return 1;
	off = a - s->cbase;
	if (!alone && a >= s->cbase && off + 64 <= s->clen)
		return 0;
	if (len > KW_CHUNK || len < 64)
		len = KW_CHUNK;
	if (bpf_probe_read_user(s->stk, len, (void *)a)) {
		rest = 4096 - (a & 4095);
		len = rest >= 64 && rest < len ? rest : 64;
		if (bpf_probe_read_user(s->stk, len & (2 * KW_CHUNK - 1) && len <= KW_CHUNK ? len : 64, (void *)a)) {
			s->clen = 0;
			return 1;
		}
	}
	s->cbase = a;
	s->clen = len;
	return 2;
}

/* One CFI step with `r`: the caller's registers into w. 0 = go on, 1 = stopped. */
static __always_inline int kw_step_cfi(struct kw_walk *w, const struct kw_rule *r, __u32 rid)
{
	__u64 cfa, base, v, osp = w->rs->regs[KW_RSP], opc = w->pc, ra = 0;
	struct kw_scratch *s = w->out;
	__u32 reg = r->cfa_reg & (KW_NREGS - 1);
	int fast = 1;

	ra = 0;

	switch (r->cfa_type) {
	case KW_CFA_REG:
	case KW_CFA_DEREF:
		if (!(w->rs->valid & (1u << reg)))
			return kw_stop(w, KW_ST_REG_UNKNOWN, reg, rid);
		cfa = w->rs->regs[reg] + (__s64)r->cfa_off;
		if (r->cfa_type == KW_CFA_DEREF) {
			base = cfa;
			if (bpf_probe_read_user(&v, 8, (void *)base))
				return kw_stop(w, KW_ST_READ_FAULT, base, rid);
			cfa = v + (__s64)r->cfa_add;
		}
		break;
	case KW_CFA_PLT:
		if (!(w->rs->valid & (1u << KW_RSP)))
			return kw_stop(w, KW_ST_REG_UNKNOWN, KW_RSP, rid);
		cfa = w->rs->regs[KW_RSP] + (__s64)r->cfa_off + ((w->pc & 15) >= (__u64)r->cfa_add ? 8 : 0);
		break;
	case KW_CFA_UNSUP:
		w->why = r->cfa_reg;
		return kw_stop(w, KW_ST_UNSUP, 0, rid);
	default:
		return kw_stop(w, KW_ST_NO_DWARF, 0, rid);
	}

	/* Every slot in [cfa - 64, cfa): one read (may fail on a page never touched: slot by slot). */
	if (!(r->flags & KW_RF_WINDOW) || !s) {
		fast = 0;
	} else {
		int got = kw_window(s, cfa, w->peer);

		fast = got != 1;
		if (got == 2 && !w->peer)
			s->reads++;
	}
	if (fast && s) {
		/* branch-free, so the verifier sees one path whatever the rule saves; the slots straight
		 * from the chunk (the window lies in it: its offset is below KW_CHUNK - 64) */
		__u32 saved = r->saved;
		__u64 *win = (__u64 *)&s->stk[(cfa - 64 - s->cbase) & (KW_CHUNK - 1)];

		ra = win[(r->ra_off + 8) & 7];
#pragma unroll
		for (int i = 0; i < KW_NSAVED; i++) {
			__u32 sreg = kw_slot_reg(i);
			__u64 mask = -(__u64)((saved >> i) & 1);

			v = win[(r->off[i] + 8) & 7];
			w->rs->regs[sreg] = (v & mask) | (w->rs->regs[sreg] & ~mask);
			w->rs->valid |= (1ull << sreg) & mask;
		}
	} else {
		if (!KW_ARM64 && !(r->flags & KW_RF_RA_UNDEF) &&
		    bpf_probe_read_user(&ra, 8, (void *)(cfa + 8 * (__s64)r->ra_off)))
			return kw_stop(w, KW_ST_READ_FAULT, cfa + 8 * (__s64)r->ra_off, rid);
		if (kw_slots_slow(w->rs, r, cfa, osp))
			return kw_stop(w, KW_ST_READ_FAULT, w->rs->fault, rid);
	}
	w->rs->valid &= ~(__u64)r->undef_regs;
	if (r->flags & KW_RF_RA_UNDEF)
		return kw_stop(w, KW_ST_OK, 0, rid);
#if KW_ARM64
	/* the return address is x30: restored by the rule (slot 11), or still there (a leaf) */
	if (!(w->rs->valid & (1ull << KW_LR)))
		return kw_stop(w, KW_ST_OK, 0, rid);
	ra = w->rs->regs[KW_LR] & ~KW_PAC_MASK; /* user addresses: PAC bits stripped */
	w->rs->valid = (w->rs->valid & KW_CALLEE_SAVED) | (1ull << KW_RSP) |
		      ((__u64)((r->saved >> 11) & 1) << KW_LR);
#else
	w->rs->valid = (w->rs->valid & KW_CALLEE_SAVED) | (1u << KW_RSP);
#endif
	w->rs->regs[KW_RSP] = cfa;
	w->pc = ra;
	if (ra == 0) {
		w->pc = opc;
		return kw_stop(w, KW_ST_OK, 0, rid);
	}
	if (w->how != KW_HOW_SIGNAL && (cfa < osp || (cfa == osp && ra == opc))) {
		w->pc = opc;
		return kw_stop(w, KW_ST_NO_PROGRESS, cfa, rid);
	}
	w->exact = 0;
	w->how = KW_HOW_CFI;
	return 0;
}

static long kw_frame_cb(__u64 i, void *arg)
{
	struct kw_walk *w = arg;
	struct kw_scratch *out = w->out;
	struct kw_map *m;
	struct kw_mod *mod;
	struct kw_rule *r;
	struct kw_cache *cache = w->cache;
	struct kw_cent *ce;
	__u64 lookup, addr;
	__u32 n = w->n, rid;
	long row;

	if (!out)
		return 1;
	out->pcs[n & (KW_MAX_FRAMES - 1)] = w->pc;
	out->how[n & (KW_MAX_FRAMES - 1)] = w->how;
	w->n = n + 1;

	lookup = w->exact ? w->pc : w->pc - 1;
	m = kw_map_find(w, lookup);
	if (!m)
		return kw_stop(w, w->proc ? KW_ST_NO_MAPPING : KW_ST_NO_PROC, lookup, ~0u);
	addr = lookup - m->bias;
	if (!m->gen) /* a slot's gens start at 1 */
		return kw_stop(w, KW_ST_NO_TABLE, addr, ~0u);
	if (!cache)
		return 1;
	if (w->peer) {
		/* the peer looks up every time (entry 0 is only where its rule is copied: one
		 * pointer type for the verifier whichever way the rule came) */
		ce = &cache->e[0];
		rid = m->mod;
		mod = bpf_map_lookup_elem(&kw_mods, &rid);
		if (!mod || !mod->gen || mod->gen != m->gen)
			return kw_stop(w, KW_ST_NO_TABLE, addr, ~0u);
		row = kw_row_find_peer(mod, addr);
		if (row < 0)
			return kw_stop(w, KW_ST_NO_DWARF, addr, ~0u);
		rid = (__u32)row;
		r = bpf_map_lookup_elem(&kw_rules, &rid);
		if (!r)
			return kw_stop(w, KW_ST_NO_DWARF, addr, rid);
		ce->lo = addr;
		ce->hi = addr + 1;
		ce->mod = m->mod;
		ce->gen = 0;
		ce->rid = rid;
		__builtin_memcpy(&ce->r, r, sizeof(*r));
		out->hits--; /* counted below for every frame */
	} else {
		row = kw_cache_get(cache, addr, m->mod, m->gen);
		if (row < 0)
			return kw_stop(w, (__u32)-row, addr, ~0u);
		if (row >= KW_CACHE)
			out->hits--; /* a miss, filled */
		ce = &cache->e[row & (KW_CACHE - 1)];
	}
	rid = ce->rid;
	r = &ce->r;
	out->hits++;
	if ((r->cfa_type == KW_CFA_END || (r->flags & KW_RF_SIGNAL)) && kw_is_restorer(w->pc))
		return kw_sigframe(w);
	if (r->cfa_type == KW_CFA_END)
		return kw_stop(w, KW_ST_NO_DWARF, lookup - m->bias, rid);
	return kw_step_cfi(w, r, rid);
}

static long kw_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(__u64 *)data = vma->vm_flags;
	return 0;
}

/* Is addr in an executable VMA of the current task? (bpf_find_vma: microseconds, so rarely) */
static __always_inline int kw_is_code(__u64 addr)
{
	__u64 flags = 0;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		return 1;
	long err = bpf_find_vma(bpf_get_current_task_btf(), addr, kw_vma_cb, &flags, 0);

	if (err == -16 /* EBUSY: mmap_lock contended */)
		return 1; /* unknown: fall back rather than end the chain */
	if (err)
		return 0; /* no VMA there */
	return !!(flags & 0x4 /* VM_EXEC */);
}

/* kw_walk modes: which counters a walk adds to */
#define KW_MODE_MAIN  0
#define KW_MODE_PEER  1            /* binary search over full pcs (the peer) */
#define KW_MODE_BENCH 2            /* the block index, walk only (timing) */
#define KW_MODE_BENCH1 3           /* the same, one frame only (the fixed cost per sample) */
#define KW_MODE_PEER1 4            /* the peer, one frame only */

/*
 * Walk the user stack of `regs` (the current task's) into the per-CPU scratch. Returns the
 * scratch (pcs/how, w->n frames), or NULL when it is taken by a program this one interrupted
 * (w->status = KW_ST_BUSY). Release it with kw_walk_done().
 */
static __always_inline struct kw_scratch *kw_walk(struct kw_walk *w, struct pt_regs *regs, __u32 pid,
						  int mode)
{
	__u32 zero = 0, max = kw_max_frames;
	struct kw_counts *cnt;
	struct kw_scratch *s;

	__builtin_memset(w, 0, sizeof(*w));
	w->status = KW_ST_MAX;
	w->stop_rule = ~0u;
	w->peer = mode == KW_MODE_PEER || mode == KW_MODE_PEER1;
#if KW_ARM64
	w->pc = regs->pc;
#else
	w->pc = regs->ip;
#endif
	w->n = kw_zero;
	w->exact = 1;
	w->how = KW_HOW_INITIAL;
	w->last = ~0u;
	s = bpf_map_lookup_elem(&kw_scratch, &zero);
	if (!s || __sync_lock_test_and_set(&s->busy, 1)) {
		w->status = KW_ST_BUSY;
		w->stop_pc = w->pc;
		return NULL;
	}
	w->out = s;
	w->rs = &s->rs;
	zero = bpf_get_smp_processor_id();
	w->cache = bpf_map_lookup_elem(&kw_cache, &zero);
	if (!w->cache) { /* kw_cache not sized to the CPUs (kw_size_maps): no walk */
		w->status = KW_ST_BUSY;
		w->stop_pc = w->pc;
	}
#if KW_ARM64
	/* unrolled: regs may be the program's context, read only at constant offsets */
#pragma unroll
	for (int i = 0; i < 31; i++)
		w->rs->regs[i] = regs->regs[i];
	w->rs->regs[31] = regs->sp;
#else
	w->rs->regs[0] = regs->ax;
	w->rs->regs[1] = regs->dx;
	w->rs->regs[2] = regs->cx;
	w->rs->regs[3] = regs->bx;
	w->rs->regs[4] = regs->si;
	w->rs->regs[5] = regs->di;
	w->rs->regs[6] = regs->bp;
	w->rs->regs[7] = regs->sp;
	w->rs->regs[8] = regs->r8;
	w->rs->regs[9] = regs->r9;
	w->rs->regs[10] = regs->r10;
	w->rs->regs[11] = regs->r11;
	w->rs->regs[12] = regs->r12;
	w->rs->regs[13] = regs->r13;
	w->rs->regs[14] = regs->r14;
	w->rs->regs[15] = regs->r15;
#endif
	w->rs->valid = kw_all_regs;
	w->rs->fault = 0;
	s->clen = 0;
	s->hits = 0;
	s->reads = 0;
	w->proc = bpf_map_lookup_elem(&kw_procs, &pid);
	/* frame 0's mapping is most likely the last walk's (a search touches a line per step):
	 * found here, its frame then checks that one mapping again, on a warm line */
	if (w->proc && w->cache && !w->peer) {
		if (w->cache->map_hint < w->proc->nmaps)
			w->last = w->cache->map_hint;
		if (kw_map_find(w, w->pc))
			w->cache->map_hint = w->last;
	}
	if (max > KW_MAX_FRAMES || max == 0)
		max = KW_MAX_FRAMES;
	if (mode == KW_MODE_BENCH1 || mode == KW_MODE_PEER1)
		max = 1;
	if (!w->cache)
		max = 0;
	if (max)
		bpf_loop(max, kw_frame_cb, w, 0);
	if (w->status == KW_ST_MAX) {
		w->status = KW_ST_DEPTH;
		w->stop_pc = w->pc;
		w->stop_frame = w->n;
	}
	/* Not in a loaded mapping: new code (a dlopen, JIT) falls back; no code at all ends the
	 * chain (a garbage return address past the outermost frame). Once per walk, not per frame. */
	if (w->status == KW_ST_NO_MAPPING && w->n > 1 && !kw_is_code(w->stop_addr))
		w->status = KW_ST_NO_CODE;
	cnt = kw_counts();
	if (!cnt)
		return s;
	if (mode == KW_MODE_BENCH1) {
		cnt->c[KW_C_BENCH1_SAMPLES]++;
	} else if (mode == KW_MODE_PEER1) {
		cnt->c[KW_C_PEER1_SAMPLES]++;
	} else if (mode == KW_MODE_BENCH) {
		cnt->c[KW_C_BENCH_SAMPLES]++;
		cnt->c[KW_C_BENCH_FRAMES] += w->n;
		cnt->c[KW_C_CACHE_HITS] += s->hits;
		cnt->c[KW_C_CHUNK_READS] += s->reads;
	} else if (mode == KW_MODE_PEER) {
		cnt->c[KW_C_PEER_SAMPLES]++;
		cnt->c[KW_C_PEER_FRAMES] += w->n;
		if (!KW_ST_COMPLETE(w->status))
			cnt->c[KW_C_PEER_FALLBACK]++;
	} else {
		__u32 k = w->status < KW_ST_MAX ? w->status : 0;

		cnt->c[KW_C_SAMPLES]++;
		cnt->c[KW_C_FRAMES] += w->n;
		if (!KW_ST_COMPLETE(w->status))
			cnt->c[KW_C_FALLBACK]++;
		/* bounded where it is used: 6.1's verifier lost the bound of an index the compiler
		 * added to before checking it (the arm64 build) */
		k += KW_C_ST_BASE;
		asm volatile("" : "+r"(k));
		if (k < KW_C_MAX)
			cnt->c[k]++;
	}
	return s;
}

static __always_inline void kw_walk_done(struct kw_scratch *s)
{
	if (s) {
		asm volatile("" ::: "memory");
		s->busy = 0;
	}
}

/* An event's head (every field before its pcs): who, when, and how the walk ended. */
static __always_inline void kw_event_head(struct kw_event *ev, const struct kw_walk *w, __u32 hdr_size,
					  __u32 pid, __u32 tid, __u32 flags, __u64 cookie, __s64 aux)
{
	ev->h.kind = KW_KIND_EVENT;
	ev->h.hdr_size = hdr_size;
	ev->h.flags = 0;
	ev->pid = pid;
	ev->tid = tid;
	ev->ts = bpf_ktime_get_ns();
	ev->cookie = cookie;
	ev->aux = aux;
	ev->flags = flags;
	ev->nframes = w->n > KW_MAX_FRAMES ? KW_MAX_FRAMES : w->n;
	ev->status = w->status;
	ev->stop_why = w->why;
	ev->stop_rule = w->stop_rule;
	ev->stop_frame = w->stop_frame;
	ev->stop_pc = w->stop_pc;
	ev->stop_addr = w->stop_addr;
}

static __always_inline void kw_event_fill(struct kw_event *ev, struct kw_walk *w, struct kw_scratch *s,
					  __u32 pid, __u32 tid, __u32 flags, __u64 cookie, __s64 aux)
{
	kw_event_head(ev, w, sizeof(struct kw_event), pid, tid, flags, cookie, aux);
	if (s) {
		bpf_probe_read_kernel(ev->pcs, sizeof(ev->pcs), s->pcs);
		bpf_probe_read_kernel(ev->how, sizeof(ev->how), s->how);
	} else {
		ev->nframes = 0;
	}
}

/*
 * Walk and emit one event on cap_ringbuf: the walker's frames alone when the walk completed,
 * with the snapshot (registers + `room` bytes of stack, a constant) when it stopped short or
 * when `always_snapshot` (the differential test). `cookie` and `aux` go into the event and its
 * snapshot, as cap_snapshot()'s do. Evaluates to the walk's status (enum
 * kw_status), or -1 when the event could not be output (counted: KW_C_LOST).
 */
#define KW_EMIT(ctx, regs, always_snapshot, room, cookie, aux)                                     \
	({                                                                                         \
		struct kw_walk __w;                                                                \
		__u64 __pt = bpf_get_current_pid_tgid();                                           \
		__u32 __pid = __pt >> 32, __tid = (__u32)__pt;                                     \
		struct kw_scratch *__s = kw_walk(&__w, (regs), __pid, KW_MODE_MAIN);                          \
		long __err = 0;                                                                    \
		if (!(always_snapshot) && KW_ST_COMPLETE(__w.status)) {                             \
			struct kw_event *__ev = bpf_ringbuf_reserve(&cap_ringbuf,                  \
					offsetof(struct kw_event, snap), 0);                       \
			if (__ev) {                                                                \
				kw_event_fill(__ev, &__w, __s, __pid, __tid, 0, (cookie), (aux));  \
				bpf_ringbuf_submit(__ev, cap_rb_wakeup());                         \
			} else {                                                                   \
				__err = -ENOSPC;                                                   \
			}                                                                          \
		} else {                                                                           \
			struct kw_event *__ev = bpf_ringbuf_reserve(&cap_ringbuf,                  \
					sizeof(struct kw_event) + (room), 0);                      \
			if (__ev) {                                                                \
				__u32 __fl = 0;                                                    \
				__u64 __n, __sp = cap_regs_sp(regs);                               \
				int __known = cap_stack_avail(NULL, __sp, (room), &__n, &__fl);    \
				kw_event_fill(__ev, &__w, __s, __pid, __tid, KW_EV_SNAPSHOT,       \
					      (cookie), (aux));                                    \
				__ev->snap.stack_size = cap_read_stack(__ev->snap.stack, (room),   \
						__sp, __n, __known, &__fl, NULL);                  \
				__ev->snap.want = (room);                                          \
				cap_fill(&__ev->snap, (regs), (cookie), (aux), __fl, NULL);        \
				bpf_ringbuf_submit(__ev, cap_rb_wakeup());                         \
			} else {                                                                   \
				__err = -ENOSPC;                                                   \
			}                                                                          \
		}                                                                                  \
		kw_walk_done(__s);                                                                 \
		if (__err)                                                                         \
			kw_count(KW_C_LOST, 1);                                                    \
		__err ? -1 : (int)__w.status;                                                      \
	})

#endif /* DWUNW_KWALK_BPF_H */
