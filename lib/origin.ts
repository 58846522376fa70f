// Where each unwound frame came from, named as libdwunw names it for every output (dwunw_origin_name,
// native/src/marks.c; README "Frame origins"): what its registers rest on, so a reader knows which
// frames to trust.
import { loadedLib as lib } from './native-handle.js';
import { DWUNW_FRAME_BEYOND_SNAPSHOT } from './native-consts.js';

/**
 * window: the registers and stack captured at the event (a core file's memory for unwind-core),
 * stepped by CFI; live: memory read from the process after the capture (this frame or one below
 * it needed it); fp, prologue, lr: no CFI at the callee, found by frame pointers, by decoding the
 * prologue, or where the call leaves the return address; signal: a signal frame's saved context.
 */
export type Origin = 'window' | 'live' | 'fp' | 'prologue' | 'lr' | 'signal';

let names: string[] | undefined;

/** libdwunw's origin names, by enum dwunw_origin (read once). */
function originNames(): string[] {
  if (names) return names;
  const l = lib();
  const v: string[] = [];
  for (let i = 0; ; i++) {
    const n = l.dwunw_origin_name(i);
    if (n === null) break;
    v.push(n);
  }
  return (names = v);
}

/** The origin's enum dwunw_origin value. */
export function originCode(origin: Origin): number {
  return originNames().indexOf(origin);
}

/** The origins of a walk's frames, innermost first: from the first frame read live on, all live. */
export function frameOrigins(frames: readonly { how: number; flags: number }[]): Origin[] {
  let live = false;
  return frames.map((f) => {
    if (f.flags & DWUNW_FRAME_BEYOND_SNAPSHOT) live = true;
    return live ? 'live' : howOrigin(f.how);
  });
}

const byHow = new Map<number, Origin>();

/** enum dwunw_how -> origin, by libdwunw (asked once per value). */
function howOrigin(how: number): Origin {
  let o = byHow.get(how);
  if (o === undefined) byHow.set(how, (o = originNames()[lib().dwunw_how_origin(how)] as Origin));
  return o;
}
