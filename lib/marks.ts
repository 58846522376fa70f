// The text marker of a frame and the legend that explains the markers shown, as the tools print
// them (bpf/runtime/report_fmt.c: fprint_frame_marks, fprint_marks_legend): a frame that rests on more than
// the registers, the stack captured at the event and the CFI carries one marker; the legend line
// `frames marked ...` names only the markers that were shown.
import type { Origin } from './origin.js';

export type Mark = 'live' | 'fp' | 'prologue' | 'lr' | 'jit' | 'uprobe' | 'py';

/** The legend's text per marker, in the tools' order and words (uprobe: the CLI's own). */
const LEGEND: readonly [Mark, string][] = [
  ['live', 'rests on stack memory read from the process after the event (it may have changed since)'],
  ['fp', 'found by frame pointers (no CFI there)'],
  ['prologue', 'found by decoding the function\'s prologue (no CFI there)'],
  ['lr', 'return address taken where the call left it (no CFI there)'],
  ['jit', 'named from the JIT\'s /tmp/perf-PID.map'],
  ['uprobe', 'pc is the kernel\'s uretprobe trampoline (the walk ends there: the return address it stands for is kept by the kernel)'],
  ['py', 'a Python function (CPython\'s frame: qualified name, file:line), read while the thread was stopped, placed before the interpreter call that ran it'],
];

/** The origin's marker: none for window, signal, kernel and kernel-walk (event-time state by CFI or the ABI). */
export function originMark(origin: Origin): Mark | null {
  return origin === 'live' || origin === 'fp' || origin === 'prologue' || origin === 'lr' ? origin : null;
}

/** `frames marked [live] ...; [fp] ...` for the markers seen, or null when none was shown. */
export function legendLine(seen: ReadonlySet<Mark>): string | null {
  const parts = LEGEND.filter(([m]) => seen.has(m)).map(([m, text]) => `[${m}] ${text}`);
  return parts.length ? `frames marked ${parts.join('; ')}` : null;
}
