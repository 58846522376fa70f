// Where each unwound frame came from, named as the tools' JSON names it (bpf/runtime/report_fmt.c,
// README "Frame origins"): what its registers rest on, so a reader knows which frames to trust.
import { DWUNW_FRAME_BEYOND_SNAPSHOT } from './native-consts.js';

/**
 * window: the registers and stack captured at the event (a core file's memory for unwind-core),
 * stepped by CFI; live: memory read from the process after the capture (this frame or one below
 * it needed it); fp, prologue, lr: no CFI at the callee, found by frame pointers, by decoding the
 * prologue, or where the call leaves the return address; signal: a signal frame's saved context.
 */
export type Origin = 'window' | 'live' | 'fp' | 'prologue' | 'lr' | 'signal';

/** enum dwunw_how -> origin (DWUNW_HOW_INITIAL and _CFI are the window). */
const BY_HOW: readonly Origin[] = ['window', 'window', 'signal', 'fp', 'lr', 'prologue'];

/** The origins of a walk's frames, innermost first: from the first frame read live on, all live. */
export function frameOrigins(frames: readonly { how: number; flags: number }[]): Origin[] {
  let live = false;
  return frames.map((f) => {
    if (f.flags & DWUNW_FRAME_BEYOND_SNAPSHOT) live = true;
    return live ? 'live' : (BY_HOW[f.how] ?? 'window');
  });
}
