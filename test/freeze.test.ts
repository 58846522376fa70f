// memleak --unwind=freeze (issue 31): the allocating thread stopped at the event by the BPF program
// (SIGSTOP), seized by memleak, its stack read from the stopped thread, then let go.
//  1. On deep_rewrite (stacks 40-120 KiB deep, rewritten right after each allocation; see
//     memleak-live.test.ts) with a 16 KiB window, where --unwind=dwarf shows none right: every
//     block right or flagged, none wrong, and the frames beyond the window read frozen.
//  3. memleak killed with SIGKILL while it holds a thread frozen: no thread of the target is left
//     stopped (its watchdog sends SIGCONT), and the target runs on to its end.
// Real BPF, real ptrace, real signals. Needs root, BTF and BPF: skipped with the reason, unless
// DWUNW_REQUIRE_BPF=1 (CI).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import t from 'tap';
import { bpfUnavailable, cliEnv, run, skipOrFail, start, until } from './helpers.js';
import { deepRewrite, memleakBin, runDeepRewrite } from './deep-rewrite.js';
import { root } from './helpers.js';
import { join } from 'node:path';

const offcputimeBin = join(root, 'build', 'bpf', 'offcputime');
const profileBin = join(root, 'build', 'bpf', 'profile');

const BLOCKS = 100;
const FRAMES_MAX = 128; // frames per stack in profile and offcputime (bpf/runtime/frames.h)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Threads of pid in state T or t (stopped, or stopped under a tracer). */
function stoppedThreads(pid: number): string[] {
  const out: string[] = [];
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const state = st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3);
      if (state === 'T' || state === 't') out.push(`${tid}:${state}`);
    } catch {
      // the thread exited
    }
  }
  return out;
}

const why = bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE',
  [[memleakBin, 'make bpf'], [deepRewrite, 'make fixtures']]);
if (why) {
  skipOrFail(t, why, 'freeze tests skipped');
} else {
  t.test('16 KiB window, deep stacks rewritten after each allocation: right or flagged, never wrong', { timeout: 120_000 }, async (t) => {
    const c = await runDeepRewrite(16384, [], BLOCKS, ['--unwind=freeze']);
    if (typeof c === 'string') {
      t.fail(c);
      return;
    }
    const fz = c.frozen ?? {};
    t.comment(`freeze, 16 KiB: ${c.right} right, ${c.flagged} flagged ${JSON.stringify(c.reasons)}, ${c.wrong} wrong; ` +
      `${c.frozenFrames} frozen frames in right stacks; ${c.liveRight} right stacks with live frames; counters ${JSON.stringify(fz)}`);
    t.equal(c.lost, 0, 'no record lost');
    t.equal(c.blocks, BLOCKS, `every block found under a stack (${c.blocks} of ${BLOCKS})`);
    t.equal(c.wrong, 0, `no wrong stack shown unflagged${c.firstWrong ? `: ${c.firstWrong}` : ''}`);
    t.equal(c.right + c.flagged, BLOCKS, 'every stack right or flagged');
    // every freeze that was sent is accounted for: held, or one of the named failures
    const settled = (fz.held ?? 0) + (fz.slot_gone ?? 0) + (fz.exited ?? 0) + (fz.traced ?? 0) + (fz.race ?? 0) + (fz.timeout ?? 0);
    // freezes are armed once the command has exec'd (before, the frozen child would never exec):
    // the program's first allocations may come before
    t.ok(fz.sent !== undefined && fz.sent >= BLOCKS * 0.9, `a freeze sent for (nearly) every block (${fz.sent})`);
    t.equal(settled, fz.sent, 'every freeze sent is held or counted under its failure');
    // a held thread yields the truth: the right stacks are the held ones (a failure falls back to
    // the copy, which flags these stacks); 16 KiB holds none of them whole
    t.ok(c.right >= (fz.held ?? 0) - 10 && c.right >= BLOCKS / 2,
      `${c.right} of ${BLOCKS} right (${fz.held} freezes held)`);
    t.ok(c.frozenFrames > 0 && c.liveRight === 0, 'frames past the window come from the frozen thread, none marked live');
  });

  /**
   * TOOL --unwind=freeze --json ARGS -- deep_rewrite WORK: its user stacks through rec_x. A stack
   * through leak_here is one of the allocating recursions, whose chains the program writes
   * (--truth): it must be one of them (or, cut, the start of one).
   */
  async function deepStacks(bin: string, args: string[], work: string[]): Promise<{ deep: number; complete: number; frozen: number; frozenShort: number; cut: number; wrong: string[]; wrongLive: string[]; checked: number; live: number; err: string }> {
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-freeze-'));
    const truthFile = join(dir, 'truth');
    let out: string, err: string;
    const truth = new Set<string>();
    try {
      ({ stdout: out, stderr: err } = await run(bin, ['--unwind=freeze', '--json', ...args, '--', deepRewrite, ...work, '--truth', truthFile, '--wait', '0'], { timeoutMs: 60_000 }));
      for (const l of readFileSync(truthFile, 'utf8').trim().split('\n')) truth.add(l.slice(l.indexOf('\t') + 1));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const r = { deep: 0, complete: 0, frozen: 0, frozenShort: 0, cut: 0, wrong: [] as string[], wrongLive: [] as string[], checked: 0, live: 0, err };
    for (const l of out.split('\n')) {
      if (!l.startsWith('{')) continue;
      const d = JSON.parse(l) as { user?: { frames: { symbol: string | null; origin?: string }[]; complete?: boolean; reason?: string } };
      const u = d.user;
      if (!u || !u.frames.some((f) => (f.symbol ?? '').startsWith('rec_'))) continue;
      r.deep++;
      if (u.complete === true) r.complete++;
      // the deepest chains (120 rec_x frames, malloc's own 5 below leak_here when it maps memory)
      // are deeper than the tools' 128 frames: cut there, marked with that reason
      const cut = u.complete !== true && (u.reason ?? '').includes('frame limit reached') && u.frames.length >= FRAMES_MAX;
      if (u.frames.some((f) => f.origin === 'frozen')) {
        r.frozen++;
        if (cut) r.cut++;
        else if (u.complete !== true) r.frozenShort++;
      }
      if (u.frames.some((f) => f.origin === 'live')) r.live++;
      const names = u.frames.map((f) => f.symbol ?? '?');
      const leak = names.indexOf('leak_here');
      if (leak < 0) continue;
      r.checked++;
      const main = names.indexOf('main');
      const chain = names.slice(leak, main < 0 ? undefined : main + 1).join(',');
      const right = main >= 0 ? truth.has(chain) : [...truth].some((c) => c.startsWith(`${chain},`));
      if (!right && (u.complete === true || cut)) {
        // where it leaves the program's chains, and whether it rests on memory read after the event
        const near = [...truth].reduce((a, c) => { let i = 0; while (i < c.length && c[i] === chain[i]) i++; return Math.max(a, i); }, 0);
        const said = `${u.frames.some((f) => f.origin === 'live') ? '[live] ' : ''}${u.frames.length} frames, leaves the program's chains at ...${chain.slice(Math.max(0, near - 24), near + 60)}`;
        (u.frames.some((f) => f.origin === 'live') ? r.wrongLive : r.wrong).push(said);
      }
    }
    return r;
  }

  // offcputime: 40 waits of 20 ms at the bottom of the recursion; profile: CPU time in recursions
  // rewritten at once (a 1 KiB window: the rest read from the stopped thread)
  for (const [name, bin, args, work] of [
    ['offcputime', offcputimeBin, ['-U'], ['--count', '40', '--keep', '--hold-us', '20000']],
    ['profile', profileBin, ['-U', '-F', '199', '--stack-size', '1024'], ['--count', '20000']],
  ] as [string, string, string[], string[]][])
  t.test(`${name} --unwind=freeze: deep stacks complete, read from the frozen thread`, { timeout: 90_000 }, async (t) => {
    const r = await deepStacks(bin, args, work);
    const line = r.err.split('\n').find((l) => l.includes('frozen:')) ?? r.err.trim().split('\n').pop();
    t.comment(`${name}: ${r.deep} deep stacks, ${r.complete} complete, ${r.frozen} with frozen frames (${r.cut} cut at the frame limit), ${r.live} with live frames; ${line}`);
    t.ok(r.deep > 0, `stacks through the deep recursion (${r.deep})`);
    // each stack is one distinct chain: complete from the frozen thread, or read in copy mode
    // (live, counted in the summary: a stop already in progress, a slot busy) when a freeze
    // could not be had; how many could depends on the machine's load, so only some must be
    t.ok(r.frozen > 0, `some read from the frozen thread (${r.frozen} of ${r.deep})`);
    t.equal(r.frozenShort, 0, `every stack read from a frozen thread complete, or cut at ${FRAMES_MAX} frames (${r.complete} complete, ${r.frozen} frozen, ${r.cut} cut)`);
    t.same(r.wrong, [], `every allocating chain shown complete or cut from the event's copy or the frozen thread is the program's own (${r.checked} checked)`);
    // A chain with frames read live (copy mode: a freeze that could not be had) is flagged: each
    // such frame is marked [live], "may have changed since the event", as memleak-live counts
    // them ("right or flagged"). Under load, about 1 run in 3 of offcputime shows one that left
    // the program's chain (the stack samples taken at the event did not catch the change):
    // counted here, for the note; the samples' coverage is the open question.
    t.comment(`flagged [live] and not the program's chain: ${r.wrongLive.length}${r.wrongLive.length ? `: ${r.wrongLive.join(' | ')}` : ''}`);
    t.match(line ?? '', /frozen: \d+ sent, \d+ held/, 'the freeze counters printed');
  });

  // the two moments a freeze can be caught at: the thread seized and held by memleak (its test hook
  // holds each freeze 60 s), or stopped by the SIGSTOP and not seized yet (the lag hook delays the
  // records 60 s)
  for (const [what, hook] of [['held under ptrace', 'DWUNW_TEST_FREEZE_HOLD_MS'], ['stopped, not seized yet', 'DWUNW_TEST_LAG_MS']])
  t.test(`memleak killed mid-freeze (${what}): no thread of the target left stopped`, { timeout: 90_000 }, async (t) => {
    let targetErr = '';
    const tg = start(deepRewrite, ['--count', '100000', '--pace-us', '2000', '--wait', '0'], { timeoutMs: 90_000, onOutput: (_o, e) => (targetErr = e) });
    const target = tg.child;
    const exited = tg.done.then((r) => (r.signal ? -1 : r.status));
    // memleak -p needs the target's libc mapped: wait for the loader to have run
    for (let i = 0; i < 500; i++) {
      try {
        if (readFileSync(`/proc/${target.pid}/maps`, 'utf8').includes('libc.so')) break;
      } catch {
        // not there yet
      }
      await sleep(10);
    }
    let mlErr = '';
    const mlRun = start(memleakBin, ['--unwind=freeze', '-p', String(target.pid), '--json', '5'], { timeoutMs: 90_000, env: cliEnv({ [hook]: '60000' }), onOutput: (_o, e) => (mlErr = e) });
    const ml = mlRun.child;
    const mlGone = mlRun.done;
    try {
      // wait for a thread stopped by a freeze
      let held: string[] = [];
      for (let i = 0; i < 1500 && held.length === 0 && ml.exitCode === null; i++) {
        await sleep(20);
        held = stoppedThreads(target.pid!);
      }
      t.ok(held.length > 0, `the target stopped by a freeze (${held.join(' ')})${held.length ? '' : `: ${mlErr.trim()}`}`);
      ml.kill('SIGKILL');
      await mlGone;
      // the watchdog's SIGCONT: within 5 s no thread stopped, and it stays so
      let left = stoppedThreads(target.pid!);
      for (let i = 0; i < 250 && left.length; i++) {
        await sleep(20);
        left = stoppedThreads(target.pid!);
      }
      t.same(left, [], 'no thread of the target in state T or t after memleak died');
      let later: string[] = [];
      for (let i = 0; i < 10; i++) {
        await sleep(100);
        later = later.concat(stoppedThreads(target.pid!));
      }
      t.same(later, [], 'and none stopped again over the next second');
      // it runs on: SIGTERM is handled by the program (a stopped one would not exit: it stays in
      // T), so wait for its exit or a stopped thread, whichever comes first
      target.kill('SIGTERM');
      let code: number | null | 'timeout' = 'timeout';
      void exited.then((c) => (code = c));
      await until(() => code !== 'timeout' || stoppedThreads(target.pid!).length > 0, 60_000);
      t.not(code, 'timeout', `the target ran on and exited on SIGTERM (${targetErr.trim().split('\n').pop() ?? ''})`);
    } finally {
      if (ml.exitCode === null && ml.signalCode === null) ml.kill('SIGKILL');
      if (target.exitCode === null && target.signalCode === null) {
        process.kill(target.pid!, 'SIGCONT');
        target.kill('SIGKILL');
      }
    }
  });
}
