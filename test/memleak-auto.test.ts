// memleak's default stack source (--unwind=auto, issue 28): no unwind flag, deep stacks rewritten
// right after each allocation (deep_rewrite, test/deep-rewrite.ts: 300 blocks, 40-120 frames of
// 1 KiB, far deeper than the 16 KiB window). In dwarf mode every one of these stacks is flagged
// (memleak-live.test.ts: 0 of 300 right); auto walks them in the kernel at the allocation, so
// they are right. The first events of the process, before its tables load, fall back to the
// snapshot: such a stack is marked by its frames' origin, counted in the summary, and right or
// flagged, never wrong. Every block is accounted for. Oracle: the fixture's own record of each
// block's call chain (written by the program as it recurses).
//
// Needs root, BTF and BPF: skipped with the reason, unless DWUNW_REQUIRE_BPF=1 (CI).
import t from 'tap';
import { BLOCKS, run, unavailable } from './deep-rewrite.js';
import { skipOrFail } from './helpers.js';

const why = unavailable();
if (why) {
  skipOrFail(t, why, 'memleak --unwind=auto tests skipped');
} else {
  // measured at load 14 on 2 cores: 289-299 of 300 right, the rest flagged (fallbacks before
  // the process's tables loaded); zeroed: 291-295
  for (const [what, variant] of [['old frames rewritten by other recursions', []], ['old frames zeroed', ['--zero']]] as [string, string[]][])
    t.test(`no unwind flag, ${what}`, { timeout: 180_000 }, async (t) => {
      const c = await run(16384, [], variant);
      if (typeof c === 'string') {
        t.fail(c);
        return;
      }
      t.comment(`${what}: ${c.right} right (${c.walkedRight} of ${c.walked} walked in the kernel), ${c.flagged} flagged ${JSON.stringify(c.reasons)}, ${c.wrong} wrong; walker fallbacks ${c.fallbacks} ${JSON.stringify(c.fallbackWhy)}`);
      t.equal(c.mode, 'kernel', 'auto chose the in-kernel walker on this kernel');
      t.notMatch(c.stderr, /--unwind=auto: unwinding in user space/, 'no line saying auto fell back to dwarf mode');
      t.equal(c.lost, 0, 'no record lost');
      t.equal(c.blocks, BLOCKS, `every block found under a stack (${c.blocks} of ${BLOCKS})`);
      t.equal(c.wrong, 0, `no wrong stack shown unflagged${c.firstWrong ? `: ${c.firstWrong}` : ''}`);
      t.equal(c.right + c.flagged, BLOCKS, 'every stack right or flagged');
      t.equal(c.walkedRight, c.walked, `every stack walked in the kernel is right (${c.walkedRight} of ${c.walked})`);
      // a block not walked fell back to the snapshot at its event: counted in the summary
      t.ok(BLOCKS - c.walked <= c.fallbacks, `blocks not walked (${BLOCKS - c.walked}) <= the summary's fallbacks (${c.fallbacks})`);
      t.ok(c.right >= BLOCKS / 2, `${c.right} of ${BLOCKS} right (>= 50 %; dwarf mode: 0)`);
    });
}
