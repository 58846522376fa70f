// The deep_rewrite workload under memleak, each leaked block's stack checked against its truth
// (shared by memleak-live.test.ts, the dwarf path's live reads, memleak-auto.test.ts, the
// default, and freeze.test.ts, --unwind=freeze): fixtures/x86_64/deep_rewrite leaks BLOCKS blocks, each from the bottom of a recursion
// 40-120 deep with 1 KiB frames, writes the true stack of each block (known by its size), and
// right after each allocation recurses again along another path (or, with --zero, clears the old
// frames).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bpfDir, bpfUnavailable, cliEnv, fixturesX64, jsonLines, run as runCmd } from './helpers.js';

export const memleakBin = join(bpfDir, 'memleak');
export const deepRewrite = join(fixturesX64, 'deep_rewrite');
const fixture = deepRewrite;
export const BLOCKS = 300;
// frames above main in every stack (glibc's start-up code)
const START = new Set(['__libc_start_call_main', '__libc_start_main', '__libc_start_main_impl', '_start']);

export const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [fixture, 'make fixtures']]);

interface JStack {
  frames: { symbol: string | null; origin?: string }[];
  complete: boolean | null;
  stop?: string;
  beyond_window?: boolean;
  allocs?: { size: number }[];
}
interface JReport {
  stacks: JStack[];
  lost: number;
  unwind?: { complete_live?: number };
  unwind_mode?: string;
  kernel_walk?: { fallback: number; by_status: Record<string, number> };
  frozen?: Record<string, number>;
}

export interface Counts {
  right: number;
  flagged: number;
  wrong: number;
  live: number;
  blocks: number;
  lost: number;
  reasons: Record<string, number>;
  firstWrong?: string;
  unmarked: number;        // complete, deeper than the window, yet not marked as read live
  completeLive: number;    // stacks shown complete with frames read live (spot-checked only)
  summaryLive: number;     // the summary's count of them
  short: number;           // flagged with fewer frames than the window holds (an empty stack too)
  minFlagged: number;      // fewest frames of a flagged stack
  inside: number;          // blocks whose whole stack fits in the window
  insideRight: number;     // ... shown right
  walked: number;          // blocks whose frames all come from the in-kernel walker (origin kernel-walk)
  walkedRight: number;     // ... shown right
  mode: string;            // the report's unwind_mode
  fallbacks: number;       // the walker's events that fell back to the snapshot (kernel mode)
  fallbackWhy: Record<string, number>; // the walker's events by status
  frozenFrames: number;    // frames of origin "frozen" in right stacks (--unwind=freeze)
  liveRight: number;       // right stacks with frames read live (origin "live")
  frozen?: Record<string, number>; // the report's freeze counters
  stderr: string;
}

// Frames a window surely holds: rec_x frames are 1000 bytes and a little (saved registers, return
// address); 1100 per frame leaves room for leak_here, run_one and main's own frames.
export const framesIn = (window: number): number => Math.floor(window / 1100);

/**
 * memleak [ARGS] on deep_rewrite [VARIANT]: each block's stack against its truth. `window`: the
 * stack window the run copies (--stack-size in args, or the default 16384).
 */
export async function run(window: number, args0: string[], variant: string[], blocks = BLOCKS,
  extraEnv: Record<string, string> = {}): Promise<Counts | string> {
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-live-'));
  const truthFile = join(dir, 'truth');
  try {
    // the dwarf path goes as deep as asked; the in-kernel walker stops at 128 frames, and auto takes
    // dwarf mode for a deeper --max-frames (the stacks here are 45-125 frames deep)
    const maxFrames = args0.some((a) => /^--unwind=(dwarf|freeze|fp)$/.test(a)) ? '256' : '128';
    const args = [...args0, '--json', '-a', '-o', '0', '-T', '100000', '--max-frames', maxFrames,
      '--buffer-size', '64M', '600', '1', '--', fixture, '--count', String(blocks), '--pace-us', '200',
      '--truth', truthFile, '--wait', '3', ...variant];
    const { status, stdout, stderr } = await runCmd(memleakBin, args, { env: cliEnv(extraEnv), timeoutMs: 120_000 });
    if (status !== 0) return `memleak exited ${status}: ${stderr.trim().split('\n').pop()}`;
    const rep = jsonLines<JReport>(stdout).at(-1);
    if (!rep) return 'no report';
    const truth = new Map<number, string[]>();
    for (const l of readFileSync(truthFile, 'utf8').trim().split('\n')) {
      const [size, chain] = l.split('\t');
      truth.set(Number(size), chain!.split(','));
    }
    const c: Counts = { right: 0, flagged: 0, wrong: 0, live: 0, blocks: 0, lost: rep.lost, reasons: {},
      unmarked: 0, completeLive: 0, summaryLive: rep.unwind?.complete_live ?? -1, short: 0, minFlagged: Infinity, inside: 0, insideRight: 0,
      walked: 0, walkedRight: 0, mode: rep.unwind_mode ?? '?', fallbacks: rep.kernel_walk?.fallback ?? 0,
      fallbackWhy: rep.kernel_walk?.by_status ?? {}, frozenFrames: 0, liveRight: 0, frozen: rep.frozen, stderr };
    for (const st of rep.stacks) if (st.complete === true && st.beyond_window) c.completeLive++;
    for (const st of rep.stacks)
      for (const a of st.allocs ?? []) {
        const want = truth.get(a.size);
        if (!want) continue; // glibc's own allocations
        c.blocks++;
        const names = st.frames.map((f) => f.symbol ?? '?');
        let k = 0;
        while (k < want.length && k < names.length && names[k] === want[k]) k++;
        if (st.beyond_window) c.live++;
        // rec_x frames hold 1000 bytes each (leak_here, run_one and main aside): a chain this
        // deep cannot have fit in the window
        if (st.complete === true && (want.length - 3) * 1000 > window && !st.beyond_window) c.unmarked++;
        const right = k === want.length && st.complete === true && names.slice(k).every((n) => START.has(n));
        // a stack that fits in the window (its frames 1000 bytes each, margin for the rest)
        if (want.length * 1100 <= window) {
          c.inside++;
          if (right) c.insideRight++;
        }
        if (st.frames.length && st.frames.every((f) => f.origin === 'kernel-walk')) {
          c.walked++;
          if (right) c.walkedRight++;
        }
        if (right) {
          c.right++;
          c.frozenFrames += st.frames.filter((f) => f.origin === 'frozen').length;
          if (st.frames.some((f) => f.origin === 'live')) c.liveRight++;
        } else if (k === names.length && st.complete === false) {
          c.flagged++;
          c.minFlagged = Math.min(c.minFlagged, names.length);
          // the window's frames come from the copy taken at the event: a flagged stack has them all
          if (names.length < Math.min(want.length, framesIn(window))) c.short++;
          c.reasons[st.stop ?? '?'] = (c.reasons[st.stop ?? '?'] ?? 0) + 1;
        } else {
          c.wrong++;
          c.firstWrong ??= `block ${a.size}: frame ${k} is ${names[k] ?? '(none)'}, expected ${want[k] ?? '(end)'} (${st.stop}, complete ${st.complete})`;
        }
      }
    return c;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** run() with the window given as --stack-size (freeze.test.ts's form). */
export const runDeepRewrite = (window: number, variant: string[], blocks: number, memleakArgs: string[] = [],
  extraEnv: Record<string, string> = {}): Promise<Counts | string> =>
  run(window, [...memleakArgs, '--stack-size', String(window)], variant, blocks, extraEnv);
