// The loaded libdwunw binding for modules that commands import before the library is needed
// (lib/marks.ts, lib/origin.ts: a command's --help must not load koffi). lib/native.ts registers
// the binding when it loads the library; these modules run only after frames were unwound, so
// it is there by then.
import type { Lib } from './native.js';

let current: Lib | undefined;

export function setLoadedLib(l: Lib): void {
  current = l;
}

/** The binding lib/native.ts loaded; an error when nothing has loaded it yet (a bug). */
export function loadedLib(): Lib {
  if (!current) throw new Error('libdwunw is not loaded yet: call lib() from lib/native.ts first');
  return current;
}
