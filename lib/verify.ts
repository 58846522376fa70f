// `dwunw verify`: the unwinder against gdb on known stacks, for x86_64, arm64 and mips32.
//
// For each architecture the fixture program (fixtures/arm64/verify_zoo.c, built by
// `make -C fixtures verify-ARCH` in every variant: PIE and static, with and without -g; arm64
// also with pointer authentication, mips32 also with -fasynchronous-unwind-tables) runs under gdb
// (natively on x86_64, under qemu-user's gdbstub with gdb-multiarch for the others), which stops
// at known places: a leaf called from glibc's qsort, glibc functions' first instructions, signal
// handlers (plain and SA_SIGINFO), the signal trampoline itself, a signal that hit a function's
// first instruction, linker stubs (PLT, .MIPS.stubs), a SIGSEGV, an abort, and every instruction
// of some functions. At each stop gdb writes a snapshot (registers, stack, maps) and its own
// frames (the oracle); dwunw unwinds the snapshot offline, as `dwunw unwind-snapshot` does, and
// the two stacks are compared pc for pc. Under qemu the segv and abort programs are also run to
// their death with core dumps on: the guest core (with the maps the program saved, since qemu's
// cores have no NT_FILE) is unwound by the library (dwunw_core_load) and must give the stack gdb
// gave at the same signal ("core_segv", "core_abort").
//
// A stack is
//   match       the same pcs, frame for frame;
//   cfi-absent  the same pcs up to a frame whose code has no CFI at all (checked in dwunw's table:
//               no row covers it), where dwunw stopped (or guessed from the link register) while
//               gdb went on with its prologue analysis: mips glibc's abort(), and the mips fixtures
//               built without CFI. Reported with the function and module, not a failure;
//   gdb-short   every frame gdb gave is dwunw's, but gdb's own walk ended with an error (its
//               prologue analysis gives up, "frame did not save the PC") where dwunw went on:
//               listed with gdb's reason, not a failure, and only the frames gdb has are checked
//               (a last gdb frame in the function of the frame before it is gdb's fallback to a
//               stale ra register, after the frame's own last call, and is not one of them);
//   mismatch    anything else: a failure (exit status 1).
// pointer authentication: qemu 7.2's gdbstub does not describe the PAC key masks, so gdb cannot
// strip signed return addresses; the -mbranch-protection fixtures are therefore run twice, under
// -cpu max,sve=off (PAC signs: the snapshots dwunw unwinds) and -cpu cortex-a57 (the PAC
// instructions are hints that do nothing: gdb's oracle), with identical addresses (qemu-user does
// not randomise) and control flow; the two runs must stop at the same pcs.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Dwunw, type Frame, type Module, howName } from './dwunw.js';
import { type Mark, legendLine, originMark } from './marks.js';
import * as N from './native.js';
import { type Origin, frameOrigins } from './origin.js';
import { killStarted, runCommand } from './run-command.js';
import { type Snapshot, parseSnapshot } from './snapshot.js';
import { ElfFile } from './verify-elf.js';
import { type Breakpoint, type SessionRun, pool, runSession } from './verify-run.js';

export { killStarted } from './run-command.js';

export const VERIFY_ARCHES = ['x86_64', 'arm64', 'mips32'] as const;
export type VerifyArch = (typeof VERIFY_ARCHES)[number];

interface ArchSetup {
  arch: VerifyArch;
  /** fixtures/<dir>/build holds the programs. */
  dir: string;
  variants: string[];
  qemu: string | null;
  sysroot: string | null;
  gdb: string;
  /** The cross compiler `make` needs (null: the host's gcc). */
  cc: string;
  /** A signal handler's return address (its trampoline) at the handler's first instruction. */
  raExpr: string;
  cpu: (variant: string) => string | null;
  /** CPU of the oracle's twin run (pointer authentication), or null: the same run. */
  oracleCpu: (variant: string) => string | null;
  /** The variant whose gdb run is the oracle (the same .text at the same address, built with
   * CFI: gdb's own prologue analysis fails on the code without), or null: the variant itself. */
  oracleVariant: (variant: string) => string | null;
}

const SETUPS: Record<VerifyArch, ArchSetup> = {
  x86_64: {
    arch: 'x86_64',
    dir: 'x86_64',
    variants: ['pie', 'pie-g', 'static', 'static-g'],
    qemu: null,
    sysroot: null,
    gdb: 'gdb',
    cc: 'gcc',
    raExpr: '*(void **)$sp',
    cpu: () => null,
    oracleCpu: () => null,
    oracleVariant: () => null,
  },
  arm64: {
    arch: 'arm64',
    dir: 'arm64',
    variants: ['pie', 'pie-g', 'pie-pac', 'pie-nocfi', 'static', 'static-g', 'static-pac', 'static-nocfi'],
    qemu: 'qemu-aarch64',
    sysroot: '/usr/aarch64-linux-gnu',
    gdb: 'gdb-multiarch',
    cc: 'aarch64-linux-gnu-gcc',
    raExpr: '$x30',
    // cortex-a57: gdb 13 loops on signal frames under qemu's default CPU; max (without SVE,
    // whose registers gdb 13 cannot take over the stub) for real pointer authentication.
    cpu: (v) => (v.endsWith('-pac') ? 'max,sve=off' : 'cortex-a57'),
    oracleCpu: (v) => (v.endsWith('-pac') ? 'cortex-a57' : null),
    // gdb 13 loops on the code without CFI (the same frame 4096 times): its twin with CFI
    oracleVariant: (v) => (v.endsWith('-nocfi') ? v.slice(0, -'-nocfi'.length) : null),
  },
  mips32: {
    arch: 'mips32',
    dir: 'mips32',
    variants: ['pie', 'pie-g', 'pie-async', 'static', 'static-g', 'static-async'],
    qemu: 'qemu-mipsel',
    sysroot: '/usr/mipsel-linux-gnu',
    gdb: 'gdb-multiarch',
    cc: 'mipsel-linux-gnu-gcc',
    raExpr: '$ra',
    cpu: () => null,
    oracleCpu: () => null,
    // (no twin: -fasynchronous-unwind-tables and -g change mipsel GCC's code; the fixtures without
    // CFI are checked against gdb's own frames as far as they go, "gdb-short")
    oracleVariant: () => null,
  },
};

// ---- results ---------------------------------------------------------------------------------

export interface OracleFrame {
  pc: string;
  type: 'normal' | 'sigtramp';
  name: string | null;
}

export interface ActualFrame {
  pc: string;
  symbol: string | null;
  offset: string | null;
  module: string | null;
  how: string;
  /** Where the frame came from, as unwind-pid and the tools name it (lib/origin.ts). */
  origin: Origin;
}

export type StackStatus = 'match' | 'cfi-absent' | 'gdb-short' | 'mismatch';

export interface CfiGap {
  /** dwunw's frame whose code has no CFI. */
  index: number;
  pc: string;
  symbol: string | null;
  module: string | null;
  /** "stopped" (dwunw ended there) or "lr guess" (dwunw went on from the link register). */
  dwunw: string;
  /** gdb's frames after it (not compared). */
  gdbBeyond: number;
}

export interface StackResult {
  /** Step number for a stepped stop (1-based), else null. */
  step: number | null;
  status: StackStatus;
  expected: OracleFrame[];
  actual: ActualFrame[];
  /** First differing frame, null when none differs (up to the gap). */
  firstDiff: number | null;
  /** The pcs agree there, but not how dwunw found the frame (signal frame or not). */
  howDiff: boolean;
  gap: CfiGap | null;
  dwStop: string;
  gdbError: string | null;
}

export interface StopResult {
  session: string;
  name: string;
  kind: 'stop' | 'steps';
  counts: Record<StackStatus, number>;
  /** stop: its one stack; steps: the first step and every step that is not a match. */
  stacks: StackResult[];
  steps: number;
  /** dwunw frames found by the prologue analyser (code without CFI), over all its stacks. */
  prologueFrames: number;
}

export interface FixtureResult {
  arch: VerifyArch;
  variant: string;
  file: string;
  cpu: string | null;
  oracleCpu: string | null;
  /** The program whose gdb frames are the oracle, when not `file`. */
  oracleFile: string | null;
  stops: StopResult[];
  errors: string[];
  notes: string[];
  counts: Record<StackStatus, number>;
  ms: number;
}

export interface VerifyReport {
  ok: boolean;
  arches: VerifyArch[];
  fixtures: FixtureResult[];
  errors: string[];
  totals: Record<StackStatus, number> & { stops: number; fixtures: number; errors: number; prologueFrames: number };
  ms: number;
}

export interface VerifyOptions {
  arches: VerifyArch[];
  /** Package root (fixtures/, test/oracle/). */
  root: string;
  jobs?: number;
  /** Keep the snapshots here instead of a temporary directory. */
  keep?: string;
  /** Progress lines (stderr). */
  progress?: (line: string) => void;
}

const zero = (): Record<StackStatus, number> => ({ match: 0, 'cfi-absent': 0, 'gdb-short': 0, mismatch: 0 });
const norm = (pc: string | bigint): string => `0x${BigInt(pc).toString(16)}`;
const hex = (v: bigint): string => `0x${v.toString(16)}`;

// ---- breakpoints -----------------------------------------------------------------------------

interface Session {
  name: string;
  args: string[];
  breakpoints: Breakpoint[];
  /** The program dies of this stop's signal: also let it dump a core (qemu guests) and unwind that. */
  core?: string;
}

/** PLT / .MIPS.stubs entries of the PIE, for its first (lazy) call of qsort. */
function stubBreakpoints(arch: VerifyArch, elf: ElfFile): Breakpoint[] {
  const bps: Breakpoint[] = [];
  if (arch === 'mips32') {
    const sec = elf.section('.MIPS.stubs');
    if (!sec) return bps;
    const dyn = elf.symbols(true);
    const want = dyn.find((s) => s.name === 'qsort');
    const b = elf.bytes(sec);
    for (let o = 0; want && o + 16 <= b.length; o += 4) {
      if (((b.readUInt32LE(o) & 0xffff0000) >>> 0) !== 0x8f990000) continue; // lw t9, X(gp): an entry
      let index = -1;
      let hi = 0;
      for (let k = 4; k <= 16 && o + k + 4 <= b.length; k += 4) {
        const w = b.readUInt32LE(o + k);
        if (w >>> 16 === 0x3c18) hi = (w & 0xffff) << 16; // lui t8, hi
        else if (w >>> 16 === 0x2418 || w >>> 16 === 0x3418 || w >>> 16 === 0x3718) {
          index = hi | (w & 0xffff); // li / ori t8, index
          break;
        }
      }
      if (index === want.index) {
        const a = sec.addr + BigInt(o);
        // at the entry the caller's return address is in ra; after `move t7, ra`, in t7
        bps.push({ name: 'stub_entry', module_addr: hex(a) }, { name: 'stub_t7', module_addr: hex(a + 8n) });
        break;
      }
    }
  } else if (arch === 'arm64') {
    const sec = elf.section('.plt');
    const rel = elf.pltSymbols();
    const k = rel.indexOf('qsort');
    const lazy = rel.indexOf('sigemptyset');
    if (!sec || k < 0 || lazy < 0) return bps;
    const b = elf.bytes(sec);
    const adrp: number[] = [];
    for (let o = 0; o + 4 <= b.length; o += 4) if (((b.readUInt32LE(o) & 0x9f00001f) >>> 0) === 0x90000010) adrp.push(o);
    // adrp x16 #0 is PLT0's (after its stp x16, x30, [sp, #-16]!), #k+1 the entry of relocation k
    if (adrp.length > Math.max(k, lazy) + 1) {
      bps.push(
        { name: 'plt_entry', module_addr: hex(sec.addr + BigInt(adrp[k + 1]!)) },
        // PLT0 after its store (sp moved by 16), in the lazy resolution of sigemptyset's first
        // call (zoo_signal), which stops at its PLT entry first. gdb 13's prologue analysis
        // misses PLT0's sp adjustment ("previous frame identical"), so the oracle of that stop
        // is gdb's stack at the PLT entry of the same call, one stop earlier.
        { name: 'plt_lazy_entry', module_addr: hex(sec.addr + BigInt(adrp[lazy + 1]!)), after: 'leaf_entry' },
        { name: 'plt0_after_stp', module_addr: hex(sec.addr + BigInt(adrp[0]!) + 4n), after: 'plt_lazy_entry', oracle_from: 'plt_lazy_entry' },
      );
    }
  } else {
    const sec = elf.section('.plt.sec') ?? elf.section('.plt');
    const k = elf.pltSymbols().indexOf('qsort');
    if (!sec || k < 0) return bps;
    const off = sec.name === '.plt.sec' ? 16n * BigInt(k) : 16n * BigInt(k + 1);
    bps.push({ name: 'plt_entry', module_addr: hex(sec.addr + off) });
  }
  return bps;
}

function sessionsFor(setup: ArchSetup, elf: ElfFile): Session[] {
  const fns = elf.functions();
  const at = (sym: string): string => {
    const s = fns.get(sym);
    if (!s) throw new Error(`${elf.path}: no symbol ${sym}`);
    return hex(s.value);
  };
  const ra = setup.raExpr;
  const run: Breakpoint[] = [
    // a leaf called from glibc's qsort, at its first instruction
    { name: 'leaf_entry', module_addr: at('zoo_leaf') },
    // back in the comparator, right after the call (mid-function)
    { name: 'qsort_cmp_after_call', at_expr: ra, after: 'leaf_entry' },
    // glibc functions' first instructions
    { name: 'bsearch_entry', spec: '*bsearch', after: 'leaf_entry' },
    { name: 'raise_entry', spec: '*raise', after: 'leaf_entry' },
    { name: 'bsearch_cmp_entry', module_addr: at('zoo_bsearch_cmp') },
    // a plain handler (mips: the non-RT sigframe), its callee, and its trampoline as frame 0
    { name: 'handler_entry', module_addr: at('zoo_handler') },
    { name: 'handler_leaf', module_addr: at('zoo_sig_leaf') },
    { name: 'sigtramp', at_expr: ra, after: 'handler_entry' },
    // an SA_SIGINFO handler (the rt_sigframe)
    { name: 'rt_handler_entry', module_addr: at('zoo_rt_handler') },
    { name: 'rt_handler_leaf', module_addr: at('zoo_sig_leaf'), after: 'rt_handler_entry' },
    { name: 'rt_sigtramp', at_expr: ra, after: 'rt_handler_entry' },
    // a signal at a function's first instruction
    { name: 'async_leaf', module_addr: at('zoo_async_leaf') },
    // 24 recursive frames
    { name: 'recurse_leaf', module_addr: at('zoo_leaf'), after: 'async_leaf' },
    // a leaf under a frame > 64 KiB (mips: lui/ori), and under an alloca
    { name: 'big_leaf', module_addr: at('zoo_leaf'), after: 'recurse_leaf' },
    { name: 'alloca_leaf', module_addr: at('zoo_leaf'), after: 'big_leaf' },
  ];
  if (setup.arch !== 'x86_64')
    run.push(
      // glibc's allocator entered from glibc (mipsel: none of them has CFI; x86_64's glibc has
      // CFI everywhere, and its gdb did not always stop at `*malloc` there)
      { name: 'strdup_entry', spec: '*strdup', after: 'recurse_leaf' },
      { name: 'malloc_from_strdup', spec: '*malloc', after: 'strdup_entry' },
      // (getline is an inline wrapper of __getdelim in <stdio.h> at -O2)
      { name: 'getdelim_entry', spec: '*__getdelim', after: 'malloc_from_strdup' },
      { name: 'malloc_from_getline', spec: '*malloc', after: 'getdelim_entry' },
    );
  if (elf.type === 3) run.push(...stubBreakpoints(setup.arch, elf));
  const steps = { max: 300 };
  const stepped: Breakpoint[] = [
    { name: 'steps_qsort_cmp', module_addr: at('zoo_qsort_cmp'), steps },
    { name: 'steps_bsearch', spec: '*bsearch', after: 'steps_qsort_cmp', steps },
    { name: 'steps_handler', module_addr: at('zoo_handler'), steps },
    { name: 'steps_rt_handler', module_addr: at('zoo_rt_handler'), steps },
    { name: 'steps_raise_mid', module_addr: at('zoo_raise_mid'), steps, after: 'steps_rt_handler' },
    { name: 'steps_recurse', module_addr: at('zoo_recurse'), steps },
    // every instruction of glibc's malloc (over its calls), of a frame > 64 KiB and of an alloca
    ...(setup.arch !== 'x86_64' ? [{ name: 'steps_malloc', spec: '*malloc', after: 'steps_recurse', steps: { max: 80 } }] : []),
    { name: 'steps_big', module_addr: at('zoo_big'), steps },
    { name: 'steps_alloca', module_addr: at('zoo_alloca'), steps },
  ];
  return [
    { name: 'run', args: ['run', '{maps}'], breakpoints: run },
    { name: 'steps', args: ['run', '{maps}'], breakpoints: stepped },
    { name: 'segv', args: ['segv', '{maps}'], breakpoints: [{ name: 'segv', signal: 'SIGSEGV' }], core: 'segv' },
    { name: 'abort', args: ['abort', '{maps}'], breakpoints: [{ name: 'abort', signal: 'SIGABRT' }], core: 'abort' },
  ];
}

// ---- unwinding a snapshot (as `dwunw unwind-snapshot` does) ----------------------------------

/** The snapshot fields beyond lib/snapshot.ts's: memory regions (qemu's trampoline page). */
interface MemoryRegion {
  start: bigint;
  bytes: Buffer;
}

function memoryOf(text: string): MemoryRegion[] {
  const doc = JSON.parse(text) as { memory?: Array<{ start: string; bytes: string }> };
  return (doc.memory ?? []).map((m) => ({ start: BigInt(m.start), bytes: Buffer.from(m.bytes, 'base64') }));
}

/** One context per session: the maps and memory are the same in all its snapshots. */
class Unwinder {
  private d: Dwunw | null = null;
  private maps: string | null = null;
  private readonly modules = new Map<string, Module | null>();
  private readonly elves = new Map<string, ElfFile | null>();

  private context(snap: Snapshot, memory: MemoryRegion[]): Dwunw {
    if (this.d && this.maps === snap.maps) return this.d;
    this.close();
    const d = new Dwunw({ flags: N.DWUNW_CFG_NO_REMOTE_READS, sysroot: snap.sysroot });
    this.d = d;
    this.maps = snap.maps;
    if (snap.threads.length > 0) d.setMaps(snap.pid, snap.maps);
    if (snap.vdso) this.modules.set('[vdso]', d.openImage('[vdso]', snap.vdso));
    for (const m of memory) d.addMemory(snap.pid, m.start, m.bytes);
    return d;
  }

  unwind(file: string): { threads: Map<number, { frames: Frame[]; stop: string }>; arch: number } {
    const text = readFileSync(file, 'utf8');
    const snap = parseSnapshot(text, (name) => Dwunw.archByName(name)?.arch ?? null);
    const d = this.context(snap, memoryOf(text));
    const threads = new Map<number, { frames: Frame[]; stop: string }>();
    for (const t of snap.threads) {
      const u = d.unwind({ pid: snap.pid, tid: t.tid, regs: t.regs, stack: t.stack }, 256);
      threads.set(t.tid, { frames: u.frames, stop: u.stopName });
    }
    return { threads, arch: snap.threads[0]?.regs.arch ?? 0 };
  }

  /** The first thread of a core (the one that took the fatal signal), with the maps the program saved. */
  unwindCore(core: string, maps: string): { frames: Frame[]; stop: string; signo: number } {
    this.close();
    const d = new Dwunw({ flags: N.DWUNW_CFG_NO_REMOTE_READS });
    this.d = d;
    this.maps = null;
    const l = d.loadCore(core, { maps });
    const t = l.threads[0];
    if (!t) throw new Error('no thread in the core');
    const u = d.unwind({ pid: l.pid, tid: t.tid, regs: t.regs, stack: null }, 256);
    return { frames: u.frames, stop: u.stopName, signo: t.signo };
  }

  /** Whether a table row covers the frame's lookup address (null: no module to ask). */
  hasRow(f: Frame, exact: boolean): boolean | null {
    if (!this.d || f.module === null || f.moduleAddr === null) return null;
    let m = this.modules.get(f.module);
    if (m === undefined) {
      try {
        m = this.d.open(f.module);
      } catch {
        m = null;
      }
      this.modules.set(f.module, m);
    }
    if (!m) return null;
    try {
      return m.lookup(exact ? f.moduleAddr : f.moduleAddr - 1n) !== null;
    } catch {
      return false; // no table at all
    }
  }

  /** Whether the frame's pc is in a linker-stub section of its module. */
  inStub(f: Frame): boolean {
    if (f.module === null || f.moduleAddr === null) return false;
    let e = this.elves.get(f.module);
    if (e === undefined) {
      try {
        e = new ElfFile(f.module);
      } catch {
        e = null;
      }
      this.elves.set(f.module, e);
    }
    const a = f.moduleAddr;
    return !!e && e.stubRanges().some(([lo, hi]) => a >= lo && a < hi);
  }

  close(): void {
    for (const m of this.modules.values()) m?.close();
    this.modules.clear();
    this.d?.close();
    this.d = null;
  }
}

// ---- comparison ------------------------------------------------------------------------------

const prologueCount = (frames: Frame[]): number => frames.filter((f) => f.how === N.DWUNW_HOW_PROLOGUE).length;

function actualOf(f: Frame, origin: Origin): ActualFrame {
  return {
    pc: hex(f.pc),
    symbol: f.symbol?.name ?? null,
    offset: f.symbol ? hex(f.symbol.offset) : null,
    module: f.module,
    how: howName(f.how),
    origin,
  };
}

/** gdb's last frame is in the function of the one before: its fallback to a stale ra register
 * (the return address of the frame's own last call), where it found no save. */
const repeatsLast = (e: OracleFrame[]): boolean => {
  const a = e[e.length - 1];
  const b = e[e.length - 2];
  return !!a && !!b && (norm(a.pc) === norm(b.pc) || (a.name !== null && a.name === b.name));
};

/** One stack against gdb's (see the file's head for the outcomes). */
export function compareStack(
  u: Unwinder,
  frames: Frame[],
  stop: string,
  expected: OracleFrame[],
  gdbError: string | null,
  step: number | null,
): StackResult {
  let n = 0;
  while (n < frames.length && n < expected.length && norm(frames[n]!.pc) === norm(expected[n]!.pc)) n++;
  const equal = n === frames.length && n === expected.length;
  // The first frame whose code has no CFI and from which dwunw stopped or guessed.
  let gap: CfiGap | null = null;
  for (let i = 0; i < frames.length && !gap; i++) {
    const f = frames[i]!;
    const last = i === frames.length - 1;
    const next = frames[i + 1];
    const guessed = next !== undefined && (next.how === N.DWUNW_HOW_LR || next.how === N.DWUNW_HOW_FP) && !u.inStub(f);
    // dwunw ended there: no row and no fallback, or its link-register guess went nowhere
    const stopped = last && (stop === 'NO_DWARF' || stop === 'NO_MODULE' || stop === 'NO_PROGRESS');
    if (!guessed && !stopped) continue;
    const exact = (f.flags & N.DWUNW_FRAME_EXACT_PC) !== 0;
    if (u.hasRow(f, exact) !== false) continue; // CFI covers it, or no module: not "absent"
    gap = {
      index: i,
      pc: hex(f.pc),
      symbol: f.symbol?.name ?? null,
      module: f.module,
      dwunw: stopped ? 'stopped' : 'lr guess',
      gdbBeyond: Math.max(0, expected.length - i - 1),
    };
  }
  // How each equal frame was found: the one after a signal trampoline from the signal frame
  // (an exact pc), the others not (a right pc found the wrong way is not a pass).
  let howBad: number | null = null;
  for (let i = 1; i < n && howBad === null; i++) {
    const afterTramp = expected[i - 1]!.type === 'sigtramp';
    if (afterTramp !== (frames[i]!.how === N.DWUNW_HOW_SIGNAL)) howBad = i;
  }
  let status: StackStatus;
  if (howBad !== null) status = 'mismatch';
  else if (equal) status = 'match';
  else if (gap && n > gap.index) status = 'cfi-absent';
  else if (gdbError && frames.length > n && (n === expected.length || (n === expected.length - 1 && repeatsLast(expected)))) status = 'gdb-short';
  else status = 'mismatch';
  if (howBad !== null) n = howBad;
  return {
    step,
    status,
    expected,
    actual: ((o) => frames.map((f, i) => actualOf(f, o[i]!)))(frameOrigins(frames)),
    firstDiff: status === 'mismatch' ? n : null,
    howDiff: howBad !== null,
    gap: status === 'cfi-absent' ? gap : null,
    dwStop: stop,
    gdbError,
  };
}

interface GdbFramesFile {
  threads: Record<string, OracleFrame[]>;
  errors: Record<string, string>;
}

const PAC_MASK = (1n << 48n) - 1n;

/**
 * Whether two snapshots are stops in one call of a PLT entry: the same return address in x30, and
 * the later one 16 bytes lower (PLT0's store). null when they are, else why not.
 */
function sameCall(later: string, earlier: string): string | null {
  const a = JSON.parse(readFileSync(later, 'utf8')) as { threads: Array<{ regs: Record<string, string> }> };
  const b = JSON.parse(readFileSync(earlier, 'utf8')) as { threads: Array<{ regs: Record<string, string> }> };
  const ra = a.threads[0]?.regs['30'];
  const rb = b.threads[0]?.regs['30'];
  const sa = a.threads[0]?.regs['31'];
  const sb = b.threads[0]?.regs['31'];
  if (!ra || !rb || !sa || !sb) return 'x30 or sp missing';
  if ((BigInt(ra) & PAC_MASK) !== (BigInt(rb) & PAC_MASK)) return `x30 ${ra} vs ${rb}`;
  if (BigInt(sa) + 16n !== BigInt(sb)) return `sp ${sa} vs ${sb} (not 16 lower)`;
  return null;
}

/** Compare the snapshots of one session run (with a twin oracle run for pointer authentication). */
interface CoreRun {
  /** The stop whose gdb frames the core's stack must equal. */
  stop: string;
  file: string;
  maps: string;
}

function compareSession(
  u: Unwinder,
  session: string,
  bps: Breakpoint[],
  r: SessionRun,
  oracle: SessionRun | null,
  core: CoreRun | null,
  errors: string[],
  notes: string[],
): StopResult[] {
  const out: StopResult[] = [];
  if (!r.index) {
    errors.push(`${session}: ${r.failure}`);
    return out;
  }
  for (const e of r.index.errors) errors.push(`${session}: gdb: ${e}`);
  if (r.index.missing.length) errors.push(`${session}: never reached: ${r.index.missing.join(', ')}`);
  if (oracle && !oracle.index) errors.push(`${session} (oracle run): ${oracle.failure}`);
  for (const x of r.index.snapshots) {
    const bp = bps.find((b) => b.name === x.name);
    let frames = JSON.parse(readFileSync(x.frames, 'utf8')) as GdbFramesFile;
    if (oracle) {
      const o = oracle.index?.snapshots.find((y) => y.name === x.name);
      if (!o) {
        errors.push(`${session}: ${x.name}: the oracle run has no such stop`);
        continue;
      }
      const signed = frames;
      frames = JSON.parse(readFileSync(o.frames, 'utf8')) as GdbFramesFile;
      // The twin runs must have stopped at the same instructions; gdb's frames of the signing
      // run, stripped, must agree with the oracle's as far as gdb got.
      const sk = Object.keys(signed.threads).sort((a, b) => Number(a) - Number(b));
      const ok = Object.keys(frames.threads).sort((a, b) => Number(a) - Number(b));
      if (sk.length !== ok.length) errors.push(`${session}: ${x.name}: ${sk.length} steps, the oracle run ${ok.length}`);
      let agree = 0;
      let total = 0;
      sk.forEach((k, i) => {
        const a = signed.threads[k] ?? [];
        const b = ok[i] !== undefined ? (frames.threads[ok[i]!] ?? []) : [];
        if (a[0]?.pc !== b[0]?.pc) errors.push(`${session}: ${x.name}: step ${i + 1} stopped at ${a[0]?.pc}, ${b[0]?.pc} in the oracle run`);
        for (let j = 0; j < a.length && j < b.length; j++) {
          total++;
          if ((BigInt(a[j]!.pc) & PAC_MASK) === BigInt(b[j]!.pc)) agree++;
          else break;
        }
      });
      if (x.name === r.index.snapshots[0]?.name)
        notes.push(`${session}: the run's own gdb frames (signature bits cleared) agree with the oracle run's for ${agree}/${total} frames (up to where gdb failed: on a signed address, or in code without CFI)`);
      // re-key the oracle's threads by the snapshot's tids (steps are numbered alike)
      const re: GdbFramesFile = { threads: {}, errors: {} };
      sk.forEach((k, i) => {
        const src = ok[i];
        if (src === undefined) return;
        re.threads[k] = frames.threads[src] ?? [];
        if (frames.errors[src]) re.errors[k] = frames.errors[src]!;
      });
      frames = re;
    }
    if (bp?.oracle_from) {
      // the same call, stopped one stop earlier: its callers are this stop's callers
      const o = r.index.snapshots.find((y) => y.name === bp.oracle_from);
      const why = o ? sameCall(x.snapshot, o.snapshot) : `no stop ${bp.oracle_from}`;
      if (why) {
        errors.push(`${session}: ${x.name}: no oracle from ${bp.oracle_from}: ${why}`);
        continue;
      }
      const other = JSON.parse(readFileSync(oracle ? (oracle.index?.snapshots.find((y) => y.name === bp.oracle_from)?.frames ?? o!.frames) : o!.frames, 'utf8')) as GdbFramesFile;
      const [tid, own] = Object.entries(frames.threads)[0] ?? [];
      const theirs = Object.values(other.threads)[0] ?? [];
      if (tid === undefined || !own?.[0] || !theirs.length) {
        errors.push(`${session}: ${x.name}: no frames to build the oracle from ${bp.oracle_from}`);
        continue;
      }
      frames = { threads: { [tid]: [own[0], ...theirs.slice(1)] }, errors: other.errors[Object.keys(other.threads)[0]!] ? { [tid]: other.errors[Object.keys(other.threads)[0]!]! } : {} };
      notes.push(`${session}: ${x.name}: oracle = gdb's frames of ${bp.oracle_from} (the same call) after frame 0`);
    }
    let dw;
    try {
      dw = u.unwind(x.snapshot);
    } catch (e) {
      errors.push(`${session}: ${x.name}: cannot unwind the snapshot: ${(e as Error).message}`);
      continue;
    }
    const steps = Boolean(bp?.steps);
    const stop: StopResult = { session, name: x.name, kind: steps ? 'steps' : 'stop', counts: zero(), stacks: [], steps: 0, prologueFrames: 0 };
    const tids = Object.keys(frames.threads).sort((a, b) => Number(a) - Number(b));
    for (const tid of tids) {
      const t = dw.threads.get(Number(tid));
      if (!t) {
        errors.push(`${session}: ${x.name}: dwunw has no thread ${tid}`);
        continue;
      }
      const res = compareStack(u, t.frames, t.stop, frames.threads[tid]!, frames.errors[tid] ?? null, steps ? stop.steps + 1 : null);
      stop.steps++;
      stop.counts[res.status]++;
      stop.prologueFrames += prologueCount(t.frames);
      if (!steps || stop.stacks.length === 0 || res.status !== 'match') stop.stacks.push(res);
    }
    out.push(stop);
    if (core && x.name === core.stop) {
      const st: StopResult = { session, name: `core_${x.name}`, kind: 'stop', counts: zero(), stacks: [], steps: 1, prologueFrames: 0 };
      try {
        const c = u.unwindCore(core.file, readFileSync(core.maps, 'utf8'));
        const [tid] = Object.keys(frames.threads);
        const res = compareStack(u, c.frames, c.stop, frames.threads[tid!] ?? [], frames.errors[tid!] ?? null, null);
        st.counts[res.status]++;
        st.prologueFrames += prologueCount(c.frames);
        st.stacks.push(res);
        out.push(st);
      } catch (e) {
        errors.push(`${session}: the core ${core.file}: ${(e as Error).message}`);
      }
    }
  }
  return out;
}

// ---- the run ---------------------------------------------------------------------------------

/**
 * Run the program to its fatal signal under qemu-user with core dumps on (no debugger): qemu
 * writes the guest's core, qemu_<exe>_<date>-<time>_<pid>.core, into the working directory
 * (whatever core_pattern says; it has no NT_FILE, so the maps the program saved go with it), and
 * the kernel may write a core of qemu itself there, deleted. Same CPU and options as the gdb run:
 * the addresses are the same, and so must the stack be.
 */
async function runCore(
  qemu: string,
  cpu: string | null,
  sysroot: string | null,
  program: string,
  args: string[],
  dir: string,
  stop: string,
): Promise<CoreRun | string> {
  mkdirSync(dir, { recursive: true });
  const maps = join(dir, 'maps.txt');
  const argv = [qemu, ...(cpu ? ['-cpu', cpu] : []), ...(sysroot ? ['-L', sysroot] : []), program, ...args.map((a) => (a === '{maps}' ? maps : a))];
  const r = await runCommand('sh', ['-c', 'cd "$1" && shift && ulimit -c unlimited && exec "$@"', 'sh', dir, ...argv], 60_000);
  rmSync(join(dir, 'core'), { force: true });
  const file = readdirSync(dir).find((f) => /^qemu_.*\.core$/.test(f));
  if (!file) return `no qemu core in ${dir} (exit ${r.code ?? r.signal}): ${r.stderr.trim().slice(-300)}`;
  if (!existsSync(maps)) return `the program wrote no maps (${maps})`;
  return { stop, file: join(dir, file), maps };
}

/** null when two programs have the same .text bytes at the same address (one oracle for both). */
function sameText(a: ElfFile, b: ElfFile): string | null {
  const sa = a.section('.text');
  const sb = b.section('.text');
  if (!sa || !sb) return 'no .text';
  if (sa.addr !== sb.addr) return `.text at ${hex(sa.addr)} vs ${hex(sb.addr)}`;
  if (!a.bytes(sa).equals(b.bytes(sb))) return '.text differs';
  return null;
}

async function which(cmd: string): Promise<boolean> {
  const r = await runCommand('sh', ['-c', `command -v ${cmd}`], 10_000);
  return r.code === 0;
}

export async function verify(o: VerifyOptions): Promise<VerifyReport> {
  const t0 = Date.now();
  const jobs = o.jobs ?? Math.max(2, availableParallelism());
  const progress = o.progress ?? (() => {});
  const report: VerifyReport = {
    ok: false,
    arches: o.arches,
    fixtures: [],
    errors: [],
    totals: { ...zero(), stops: 0, fixtures: 0, errors: 0, prologueFrames: 0 },
    ms: 0,
  };
  const work = o.keep ?? mkdtempSync(join(tmpdir(), 'dwunw-verify-'));
  const script = join(o.root, 'test', 'oracle', 'gdb_snapshot.py');
  const onSignal = (): void => killStarted();
  process.once('exit', onSignal);
  try {
    // Tools, then the fixtures.
    const setups: ArchSetup[] = [];
    for (const a of o.arches) {
      const s = SETUPS[a];
      const tools = [s.cc, s.gdb, ...(s.qemu ? [s.qemu] : []), 'timeout', 'make'];
      const missing: string[] = [];
      for (const tool of tools) if (!(await which(tool))) missing.push(tool);
      if (missing.length) {
        report.errors.push(`${a}: missing ${missing.join(', ')} (scripts/ensure-deps installs them)`);
        continue;
      }
      if (s.sysroot && !existsSync(s.sysroot)) {
        report.errors.push(`${a}: no ${s.sysroot} (the cross C library: libc6-dev-*-cross)`);
        continue;
      }
      setups.push(s);
    }
    if (!existsSync(script)) report.errors.push(`no ${script}`);
    if (setups.length && existsSync(script)) {
      progress(`building the fixtures (make -C fixtures ${setups.map((s) => `verify-${s.arch}`).join(' ')})`);
      const mk = await runCommand('make', ['-s', '-C', join(o.root, 'fixtures'), `-j${jobs}`, ...setups.map((s) => `verify-${s.arch}`)], 600_000);
      if (mk.code !== 0) {
        report.errors.push(`make -C fixtures failed: ${mk.stderr.trim().slice(-2000)}`);
        setups.length = 0;
      }
    }

    // Every session of every variant, at most `jobs` at a time.
    interface Job {
      fx: FixtureResult;
      session: Session;
      run: () => Promise<[SessionRun, SessionRun | null, CoreRun | string | null]>;
    }
    const all: Job[] = [];
    for (const s of setups) {
      for (const variant of s.variants) {
        const file = join(o.root, 'fixtures', s.dir, 'build', `verify_zoo-${variant}`);
        const fx: FixtureResult = {
          arch: s.arch,
          variant,
          file,
          cpu: s.cpu(variant),
          oracleCpu: s.oracleCpu(variant),
          oracleFile: null,
          stops: [],
          errors: [],
          notes: [],
          counts: zero(),
          ms: 0,
        };
        report.fixtures.push(fx);
        let sessions: Session[];
        try {
          const elf = new ElfFile(file);
          sessions = sessionsFor(s, elf);
          const ov = s.oracleVariant(variant);
          if (ov) {
            const twin = join(o.root, 'fixtures', s.dir, 'build', `verify_zoo-${ov}`);
            const why = sameText(elf, new ElfFile(twin));
            if (why) throw new Error(`the oracle's twin ${twin}: ${why}`);
            fx.oracleFile = twin;
            // gdb's nexti steps over calls by its own unwinding, which loops in this program:
            // no stepped session (the twin's stops are at the same pcs only for breakpoints)
            sessions = sessions.filter((x) => x.name !== 'steps');
            fx.notes.push('steps: not run (gdb cannot step over calls in code it cannot unwind); the stops of the other sessions are compared with the twin run with CFI');
          }
        } catch (e) {
          fx.errors.push((e as Error).message);
          continue;
        }
        for (const session of sessions) {
          const spec = (cpu: string | null, tag: string) => ({
            program: file,
            args: session.args,
            breakpoints: session.breakpoints,
            qemu: s.qemu,
            cpu,
            sysroot: s.sysroot,
            gdb: s.gdb,
            script,
            out: join(work, s.arch, variant, `${session.name}${tag}`),
            timeoutSec: 120,
          });
          all.push({
            fx,
            session,
            run: async () => {
              const main = await runSession({ ...spec(fx.cpu, ''), maxFrames: fx.oracleFile ? 1 : undefined });
              const oracle =
                fx.oracleCpu || fx.oracleFile
                  ? await runSession({ ...spec(fx.oracleCpu ?? fx.cpu, '-oracle'), program: fx.oracleFile ?? file })
                  : null;
              const core =
                session.core && s.qemu
                  ? await runCore(s.qemu, fx.cpu, s.sysroot, file, session.args, join(work, s.arch, variant, `${session.name}-core`), session.core)
                  : null;
              return [main, oracle, core];
            },
          });
        }
      }
    }
    progress(`${all.length} gdb sessions (${report.fixtures.length} fixtures), ${jobs} at a time`);
    const runs = pool(
      all.map((j) => j.run),
      jobs,
    );
    // Unwind and compare as the sessions finish, one fixture's sessions in one context each.
    for (const [i, j] of all.entries()) {
      let r: [SessionRun, SessionRun | null, CoreRun | string | null];
      try {
        r = await runs[i]!;
      } catch (e) {
        j.fx.errors.push(`${j.session.name}: ${(e as Error).message}`);
        continue;
      }
      j.fx.ms += r[0].ms + (r[1]?.ms ?? 0);
      const u = new Unwinder();
      try {
        if (typeof r[2] === 'string') j.fx.errors.push(`${j.session.name}: core: ${r[2]}`);
        const core = typeof r[2] === 'string' ? null : r[2];
        const stops = compareSession(u, j.session.name, j.session.breakpoints, r[0], r[1], core, j.fx.errors, j.fx.notes);
        j.fx.stops.push(...stops);
      } finally {
        u.close();
      }
      progress(`${j.fx.arch} ${j.fx.variant} ${j.session.name}: ${r[0].index?.snapshots.length ?? 0} stops, ${(r[0].ms / 1000).toFixed(1)} s`);
    }
  } finally {
    process.removeListener('exit', onSignal);
    killStarted();
    if (!o.keep) rmSync(work, { recursive: true, force: true });
  }
  for (const fx of report.fixtures) {
    for (const s of fx.stops) for (const k of Object.keys(fx.counts) as StackStatus[]) fx.counts[k] += s.counts[k];
    for (const k of Object.keys(fx.counts) as StackStatus[]) report.totals[k] += fx.counts[k];
    report.totals.stops += fx.stops.length;
    for (const st of fx.stops) report.totals.prologueFrames += st.prologueFrames;
    report.totals.errors += fx.errors.length;
  }
  report.totals.fixtures = report.fixtures.length;
  report.totals.errors += report.errors.length;
  report.ok = report.totals.mismatch === 0 && report.totals.errors === 0 && report.totals.stops > 0;
  report.ms = Date.now() - t0;
  return report;
}

// ---- printing --------------------------------------------------------------------------------

function oracleLabel(f: OracleFrame | undefined): string {
  if (!f) return '';
  return `${norm(f.pc)} ${f.type === 'sigtramp' ? '<signal trampoline>' : (f.name ?? '??')}`;
}

/** dwunw's frame with its marker as unwind-pid and the tools print it ([fp], [prologue], [lr]); the markers shown go to seen. */
function actualLabel(f: ActualFrame | undefined, seen?: Set<Mark>): string {
  if (!f) return '';
  const sym = f.symbol ? (f.offset && BigInt(f.offset) !== 0n ? `${f.symbol}+${f.offset}` : f.symbol) : '[unknown]';
  const mod = f.module ? f.module.slice(f.module.lastIndexOf('/') + 1) : '-';
  const m = originMark(f.origin);
  if (m) seen?.add(m);
  return `${norm(f.pc)} ${sym} (${mod})${m ? ` [${m}]` : ''}`;
}

/**
 * Both stacks side by side: ' ' equal, '!' different, '~' beyond a frame without CFI (not
 * compared).
 */
export function sideBySide(s: StackResult, seen?: Set<Mark>): string {
  const n = Math.max(s.expected.length, s.actual.length);
  const left = Array.from({ length: n }, (_, i) => oracleLabel(s.expected[i]));
  const width = Math.min(64, Math.max(16, ...left.map((x) => x.length)));
  const rows = [`    ${'#'.padEnd(4)}${'expected (gdb)'.padEnd(width)} | actual (dwunw)`];
  for (let i = 0; i < n; i++) {
    const e = s.expected[i];
    const a = s.actual[i];
    const same = e !== undefined && a !== undefined && norm(e.pc) === norm(a.pc) && !(s.howDiff && i === s.firstDiff);
    const mark = same ? ' ' : (s.gap && i > s.gap.index) || (s.status === 'gdb-short' && i >= s.expected.length) ? '~' : '!';
    rows.push(`  ${mark} ${String(i).padEnd(4)}${left[i]!.padEnd(width)} | ${actualLabel(a, seen)}`.trimEnd());
  }
  return rows.join('\n');
}

export function stackSummary(s: StackResult): string {
  const eq = s.status === 'match' || s.status === 'gdb-short' ? s.expected.length : s.gap ? s.gap.index + 1 : (s.firstDiff ?? 0);
  const stop = `dwunw stop ${s.dwStop}${s.gdbError ? `; gdb: ${s.gdbError}` : ''}`;
  if (s.status === 'match') return `MATCH: ${eq} frames equal (${stop})`;
  if (s.status === 'gdb-short') return `GDB SHORT: all ${eq} frames of gdb equal; gdb stops there (${s.gdbError}), dwunw has ${s.actual.length - eq} more (not compared) (${stop})`;
  if (s.status === 'cfi-absent') {
    const g = s.gap!;
    const where = `${g.symbol ?? '[unknown]'} (${g.module ? g.module.slice(g.module.lastIndexOf('/') + 1) : '-'})`;
    return `CFI ABSENT at #${g.index} ${norm(g.pc)} ${where}: ${eq} frames equal up to it; dwunw ${g.dwunw === 'stopped' ? 'stops there' : 'guesses from the link register after it'}, gdb has ${g.gdbBeyond} more frame(s) from its prologue analysis (not compared) (${stop})`;
  }
  if (s.howDiff) return `MISMATCH at #${s.firstDiff}: the same pc, but dwunw found it by "${s.actual[s.firstDiff!]?.how}" where gdb's previous frame is ${s.expected[s.firstDiff! - 1]?.type === 'sigtramp' ? 'a signal trampoline' : 'not a signal trampoline'} (${stop})`;
  return `MISMATCH at #${s.firstDiff}: ${eq} frames equal, dwunw ${s.actual.length} / gdb ${s.expected.length} frames (${stop})`;
}

const countText = (c: Record<StackStatus, number>): string => `${c.match} match, ${c['cfi-absent']} cfi-absent, ${c['gdb-short']} gdb-short, ${c.mismatch} mismatch`;

/** The text report: per fixture every stop's stacks side by side and a summary, then a total. */
export function reportText(r: VerifyReport): string {
  const out: string[] = [];
  const seen = new Set<Mark>();
  for (const fx of r.fixtures) {
    const cpu =
      (fx.cpu ? ` (qemu -cpu ${fx.cpu}${fx.oracleCpu ? `; oracle -cpu ${fx.oracleCpu}` : ''})` : '') +
      (fx.oracleFile ? ` (oracle: gdb on ${fx.oracleFile}, the same .text with CFI)` : '');
    out.push(`=== ${fx.arch} ${fx.variant}: ${fx.file}${cpu}`);
    for (const s of fx.stops) {
      if (s.kind === 'stop') {
        const st = s.stacks[0]!;
        out.push(`--- ${s.session}/${s.name}: ${stackSummary(st)}`);
        out.push(sideBySide(st, seen));
      } else {
        out.push(`--- ${s.session}/${s.name}: ${s.steps} steps: ${countText(s.counts)}`);
        for (const st of s.stacks.filter((x) => x.status !== 'match').slice(0, 3)) {
          out.push(`  step ${st.step}: ${stackSummary(st)}`);
          out.push(sideBySide(st, seen));
        }
        const more = s.stacks.filter((x) => x.status !== 'match').length - 3;
        if (more > 0) out.push(`  ... ${more} more step(s) not shown (--json has them)`);
      }
    }
    for (const n of fx.notes) out.push(`note: ${n}`);
    for (const e of fx.errors) out.push(`ERROR: ${e}`);
    const stacks = fx.counts.match + fx.counts['cfi-absent'] + fx.counts['gdb-short'] + fx.counts.mismatch;
    const pro = fx.stops.reduce((a, st) => a + st.prologueFrames, 0);
    out.push(`summary ${fx.arch} ${fx.variant}: ${fx.stops.length} stops, ${stacks} stacks: ${countText(fx.counts)}; ${pro} frames by prologue analysis; ${fx.errors.length} error(s); ${(fx.ms / 1000).toFixed(1)} s of gdb sessions`);
    out.push('');
  }
  for (const e of r.errors) out.push(`ERROR: ${e}`);
  // dwunw's frames carry the tools' markers: explained once, as memleak and unwind-pid do
  const legend = legendLine(seen);
  if (legend) out.push(legend);
  const t = r.totals;
  const stacks = t.match + t['cfi-absent'] + t['gdb-short'] + t.mismatch;
  out.push(
    `total: ${t.fixtures} fixtures (${r.arches.join(', ')}), ${t.stops} stops, ${stacks} stacks: ${countText(t)}; ${t.prologueFrames} frames by prologue analysis; ${t.errors} error(s); ${(r.ms / 1000).toFixed(1)} s: ${r.ok ? 'PASS' : 'FAIL'}`,
  );
  return out.join('\n') + '\n';
}

/** The JSON report (--json). */
export function reportJson(r: VerifyReport): unknown {
  return r;
}
