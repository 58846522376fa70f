// The loaded libdwunw binding for modules that commands import before the library is needed
// (lib/marks.ts, lib/origin.ts: a command's --help must not load koffi). lib/native.ts registers
// its loader when it is evaluated; the first use here calls it (it returns the library already
// loaded, or loads it). Only the calls they make are named here (native.ts's Lib has them).
export interface TableLib {
  dwunw_origin_name(origin: number): string | null;
  dwunw_how_origin(how: number): number;
  dwunw_origin_mark(origin: number): number;
  dwunw_mark_name(mark: number): string | null;
  dwunw_mark_legend(mark: number): string | null;
}

let current: TableLib | undefined;
let loader: (() => TableLib) | undefined;

/** lib/native.ts's loader, registered when that module is evaluated (the library loads on use). */
export function setLibLoader(f: () => TableLib): void {
  loader = f;
}

/** The binding lib/native.ts loaded (or loads now); an error when lib/native.ts is not in this process (a bug). */
export function loadedLib(): TableLib {
  current ??= loader?.();
  if (!current) throw new Error('libdwunw is not loaded: lib/native.ts was never imported');
  return current;
}
