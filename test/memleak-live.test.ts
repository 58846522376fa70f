// memleak on stacks deeper than its window, rewritten right after each allocation (issue 17): the
// frames read from the live process when a record is unwound may be other frames by then. The
// workload fixtures/x86_64/deep_rewrite leaks 300 blocks, each from the bottom of a recursion
// 40-120 deep with 1 KiB frames, and writes the true stack of each block (known by its size);
// right after each allocation it recurses again along another path (or, with --zero, clears the
// old frames with a large zero-initialised array). With 16 KiB and 64 KiB windows every printed
// stack must be exactly right (down to main, complete) or flagged: a prefix of the truth that
// stops with a reason. Real BPF, real process; the right/flagged split depends on timing and is
// only reported, "wrong and unflagged" must be 0 on every run.
//
// Needs root, BTF and BPF: skipped with the reason, unless DWUNW_REQUIRE_BPF=1 (CI).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, root, skipOrFail } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const fixture = join(root, 'fixtures', 'x86_64', 'build', 'deep_rewrite');
const BLOCKS = 300;
// frames above main in every stack (glibc's start-up code)
const START = new Set(['__libc_start_call_main', '__libc_start_main', '__libc_start_main_impl', '_start']);

const unavailable = (): string | null =>
  bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [fixture, 'make fixtures']]);

interface JStack {
  frames: { symbol: string | null }[];
  complete: boolean | null;
  stop?: string;
  beyond_window?: boolean;
  allocs?: { size: number }[];
}
interface JReport {
  stacks: JStack[];
  lost: number;
  unwind?: { complete_live?: number };
}

interface Counts {
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
}

// Frames a window surely holds: rec_x frames are 1000 bytes and a little (saved registers, return
// address); 1100 per frame leaves room for leak_here, run_one and main's own frames.
const framesIn = (window: number): number => Math.floor(window / 1100);

/** memleak --stack-size WINDOW on deep_rewrite [--zero]: each block's stack against its truth. */
async function run(window: number, variant: string[]): Promise<Counts | string> {
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-live-'));
  const truthFile = join(dir, 'truth');
  try {
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const args = ['--json', '-a', '-o', '0', '-T', '100000', '--max-frames', '256', '--stack-size', String(window),
      '--buffer-size', '64M', '600', '1', '--', fixture, '--count', String(BLOCKS), '--pace-us', '200',
      '--truth', truthFile, '--wait', '3', ...variant];
    const child = spawn(memleakBin, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    const code = await new Promise<number | null>((res) => child.on('close', (c) => res(c)));
    clearTimeout(timer);
    if (code !== 0) return `memleak exited ${code}: ${stderr.trim().split('\n').pop()}`;
    const rep = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as JReport).at(-1);
    if (!rep) return 'no report';
    const truth = new Map<number, string[]>();
    for (const l of readFileSync(truthFile, 'utf8').trim().split('\n')) {
      const [size, chain] = l.split('\t');
      truth.set(Number(size), chain!.split(','));
    }
    const c: Counts = { right: 0, flagged: 0, wrong: 0, live: 0, blocks: 0, lost: rep.lost, reasons: {},
      unmarked: 0, completeLive: 0, summaryLive: rep.unwind?.complete_live ?? -1, short: 0, minFlagged: Infinity, inside: 0, insideRight: 0 };
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
        if (right) c.right++;
        else if (k === names.length && st.complete === false) {
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

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'memleak live-read tests skipped');
} else {
  // [window, what, fixture options, least share of the 300 blocks shown right]. Measured on 2
  // cores: 16 KiB 0 right (every stack deeper than the window, rewritten: flagged); 64 KiB 85
  // (28 %: the stacks that fit, 40-120 frames of 1 KiB); the control 299 of 300 at load 9, 226
  // at load 30 (memleak later than the 20 ms hold): 50 % leaves room for a loaded machine.
  const cases: [number, string, string[], number][] = [
    [16384, 'old frames rewritten by other recursions', [], 0],
    [65536, 'old frames rewritten by other recursions', [], 0.2],
    [16384, 'old frames zeroed', ['--zero'], 0],
    [65536, 'old frames zeroed', ['--zero'], 0.2],
    // control: each allocating call waits 20 ms at the bottom of its recursion, so the stack
    // above stays as it was while memleak unwinds it (right), unless memleak is late (flagged)
    [16384, 'stack held 20 ms after each allocation (control)', ['--keep', '--hold-us', '20000'], 0.5],
  ];
  for (const [window, what, variant, minRight] of cases)
    t.test(`${window / 1024} KiB window, ${what}`, { timeout: 180_000 }, async (t) => {
      const c = await run(window, variant);
      if (typeof c === 'string') {
        t.fail(c);
        return;
      }
      t.comment(`${window / 1024} KiB, ${what}: ${c.right} right, ${c.flagged} flagged ${JSON.stringify(c.reasons)} (${c.minFlagged} frames or more), ${c.wrong} wrong; ${c.live} read beyond the window; ${c.lost} lost; ${c.insideRight} of ${c.inside} inside the window right`);
      t.equal(c.lost, 0, 'no record lost (64 MiB ring buffer, paced workload)');
      t.equal(c.blocks, BLOCKS, `every block found under a stack (${c.blocks} of ${BLOCKS})`);
      t.equal(c.wrong, 0, `no wrong stack shown unflagged${c.firstWrong ? `: ${c.firstWrong}` : ''}`);
      t.equal(c.right + c.flagged, BLOCKS, 'every stack right or flagged at or before its first wrong frame');
      // change detection is a spot check (8 x 64 B above the window): whatever it lets through is
      // marked [live] and counted in the summary, never shown as resting on the event alone
      t.equal(c.unmarked, 0, 'every complete stack deeper than the window is marked as read live');
      t.equal(c.summaryLive, c.completeLive, `the summary counts the complete stacks with [live] frames (${c.completeLive})`);
      t.equal(c.short, 0, `every flagged stack holds the frames inside the window (${framesIn(window)}, or its whole chain; fewest ${c.minFlagged})`);
      // a stack inside the window is read from the copy alone: nothing live, exactly right
      t.equal(c.insideRight, c.inside, `every stack inside the window is right (${c.insideRight} of ${c.inside})`);
      if (window === 65536) t.ok(c.inside >= BLOCKS / 10, `stacks inside the 64 KiB window tested (${c.inside})`);
      t.ok(c.right >= minRight * BLOCKS, `${c.right} of ${BLOCKS} stacks right (>= ${100 * minRight} %)`);
    });
}
