// The text marker of a frame and the legend that explains the markers shown. The names and the
// legend's words are libdwunw's (dwunw_mark_name, dwunw_mark_legend: native/src/marks.c), the
// table the tools print from too: a frame that rests on more than the registers, the stack
// captured at the event and the CFI carries one marker; the legend line `frames marked ...`
// names only the markers that were shown, in the table's order.
import { loadedLib as lib } from './native-handle.js';
import type { Origin } from './origin.js';
import { originCode } from './origin.js';

export type Mark = 'live' | 'fp' | 'prologue' | 'lr' | 'jit' | 'uprobe' | 'py';

interface Table {
  /** [mark, legend text] in libdwunw's order. */
  legend: [Mark, string][];
}

let table: Table | undefined;

/** Read libdwunw's table once (the library loads on first use, not when this module loads). */
function marks(): Table {
  if (table) return table;
  const l = lib();
  const legend: [Mark, string][] = [];
  for (let i = 0; ; i++) {
    const name = l.dwunw_mark_name(i);
    if (name === null) break;
    legend.push([name as Mark, l.dwunw_mark_legend(i) ?? '']);
  }
  return (table = { legend });
}

/** The origin's marker, or null (window, signal, kernel and kernel-walk: event-time state by CFI or the ABI). */
export function originMark(origin: Origin): Mark | null {
  const m = lib().dwunw_origin_mark(originCode(origin));
  return m < 0 ? null : (marks().legend[m]?.[0] ?? null);
}

/** `frames marked [live] ...; [fp] ...` for the markers seen, or null when none was shown. */
export function legendLine(seen: ReadonlySet<Mark>): string | null {
  const parts = marks()
    .legend.filter(([m]) => seen.has(m))
    .map(([m, text]) => `[${m}] ${text}`);
  return parts.length ? `frames marked ${parts.join('; ')}` : null;
}
