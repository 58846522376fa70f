// dwunw verify's text report marks dwunw's frames as unwind-pid and the tools do ([fp],
// [prologue], [lr]; nothing for frames by CFI or a signal frame) and explains the markers shown
// in one legend line before the total. The report is built here from a stack the way verify
// builds it; verify.test.ts runs the real thing (gdb, qemu) and reads its JSON.
import t from 'tap';
import type { ActualFrame, StackResult, VerifyReport } from '../lib/verify.js';
import { reportText, sideBySide } from '../lib/verify.js';

const frame = (pc: string, symbol: string, how: string, origin: ActualFrame['origin']): ActualFrame => ({
  pc, symbol, offset: '0x4', module: '/x/verify_zoo', how, origin,
});

const stack: StackResult = {
  step: null,
  status: 'match',
  expected: [
    { pc: '0x1000', type: 'normal', name: 'leaf' },
    { pc: '0x2000', type: 'normal', name: 'mid' },
    { pc: '0x3000', type: 'normal', name: 'main' },
  ],
  actual: [frame('0x1000', 'leaf', 'initial', 'window'), frame('0x2000', 'mid', 'prologue', 'prologue'), frame('0x3000', 'main', 'cfi', 'window')],
  firstDiff: null,
  howDiff: false,
  gap: null,
  dwStop: 'OK',
  gdbError: null,
};

t.test('side by side: the tools\' markers on dwunw\'s frames', async (t) => {
  const seen = new Set<'live' | 'fp' | 'prologue' | 'lr' | 'uprobe'>();
  const rows = sideBySide(stack, seen).split('\n');
  t.match(rows[1], /\| 0x1000 leaf\+0x4 \(verify_zoo\)$/, 'a frame by CFI from the window: no marker');
  t.match(rows[2], /\| 0x2000 mid\+0x4 \(verify_zoo\) \[prologue\]$/, 'by the prologue: [prologue]');
  t.notMatch(rows.join('\n'), /\[(initial|cfi)\]/, 'no how in brackets any more');
  t.same([...seen], ['prologue'], 'the markers shown are collected');
});

t.test('the report: one legend line before the total, only when a marker was shown', async (t) => {
  const counts = { match: 1, 'cfi-absent': 0, 'gdb-short': 0, mismatch: 0 };
  const report = (s: StackResult): VerifyReport => ({
    ok: true,
    arches: ['arm64'],
    fixtures: [{
      arch: 'arm64', variant: 'pie', file: '/x/verify_zoo', cpu: null, oracleCpu: null, oracleFile: null,
      stops: [{ session: 's', name: 'leaf', kind: 'stop', counts, stacks: [s], steps: 1, prologueFrames: 1 }],
      errors: [], notes: [], counts, ms: 1000,
    }],
    errors: [],
    totals: { ...counts, stops: 1, fixtures: 1, errors: 0, prologueFrames: 1 },
    ms: 1000,
  });
  const lines = reportText(report(stack)).trimEnd().split('\n');
  t.same(lines.filter((l) => l.startsWith('frames marked ')), ['frames marked [prologue] found by decoding the function\'s prologue (no CFI there)'], 'one legend line, the tools\' words');
  t.match(lines.at(-2), /^frames marked /, 'just before the total');
  t.match(lines.at(-1), /^total: /);
  const plain = { ...stack, actual: stack.actual.map((f) => ({ ...f, how: 'cfi', origin: 'window' as const })) };
  t.notMatch(reportText(report(plain)), /frames marked/, 'no marker shown: no legend');
});
