// Names of how a frame was found (enum dwunw_how) and of its DWUNW_FRAME_* bits, as printed and in
// JSON; loadable without koffi.
import * as N from './native-consts.js';

/** How a frame's registers were recovered (enum dwunw_how), as printed. */
export const HOW_NAMES = ['initial', 'cfi', 'signal', 'fp', 'lr', 'prologue'] as const;
export const howName = (how: number): string => HOW_NAMES[how] ?? `how-${how}`;

/** DWUNW_FRAME_* bits worth showing, by name (HOLDS_REF is bookkeeping and not listed). */
export const FRAME_FLAGS: readonly (readonly [number, string])[] = [
  [N.DWUNW_FRAME_BEYOND_SNAPSHOT, 'beyond-snapshot'],
  [N.DWUNW_FRAME_EXACT_PC, 'exact-pc'],
  [N.DWUNW_FRAME_JIT, 'jit'],
  [N.DWUNW_FRAME_VDSO, 'vdso'],
  [N.DWUNW_FRAME_UPROBE_TRAMP, 'uprobe'],
  [N.DWUNW_FRAME_SIGTRAMP, 'sigtramp'],
];

export function frameFlagNames(flags: number): string[] {
  return FRAME_FLAGS.filter(([bit]) => (flags & bit) !== 0).map(([, name]) => name);
}

