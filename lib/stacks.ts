// Printing unwound stacks, shared by unwind-pid and unwind-snapshot: the gdb/eu-stack-like text
// and the JSON form. Nothing here unwinds; it formats what lib/dwunw.ts returns.
import type { ChalkInstance } from 'chalk';
import type { Frame } from './dwunw.js';
import { frameFlagNames, howName } from './frame-names.js';
import { type Mark, originMark } from './marks.js';
import { DWUNW_FRAME_JIT, DWUNW_FRAME_UPROBE_TRAMP, DWUNW_OK } from './native-consts.js';
import { frameOrigins, type Origin } from './origin.js';
import { hex } from './output.js';
import type { PyFrame, PyPlacement, PyStack } from './python.js';
import { DWUNW_PY_ENTRY, DWUNW_PY_GENERATOR, DWUNW_PY_TRUNCATED } from './native-consts.js';

/** A stack as printed, innermost first: native frames, and Python frames where they were placed. */
type Entry = { native: Frame; origin: Origin } | { py: PyFrame };

function entries(t: ThreadReport): Entry[] {
  const origins = frameOrigins(t.frames);
  const before = t.python?.placement.before;
  const out: Entry[] = [];
  t.frames.forEach((f, i) => {
    for (const py of before?.get(i) ?? []) out.push({ py });
    out.push({ native: f, origin: origins[i]! });
  });
  return out;
}

const pyFlagNames = (flags: number): string[] =>
  [
    flags & DWUNW_PY_ENTRY ? 'entry' : null,
    flags & DWUNW_PY_GENERATOR ? 'generator' : null,
    flags & DWUNW_PY_TRUNCATED ? 'truncated' : null,
  ].filter((x): x is string => x !== null);

/** A Python frame in the JSON frame shape: origin python, no pc, the code object's names. */
export function pyFrameJson(f: PyFrame) {
  return {
    pc: null,
    sp: null,
    module: null,
    module_offset: null,
    symbol: f.name,
    offset: null,
    symbol_source: 'python',
    file: f.file,
    line: f.line,
    how: 'python',
    flags: pyFlagNames(f.flags),
    origin: 'python' as const,
  };
}

/** `park (/srv/app.py:21)`: the convention of the folded and text forms. */
export const pyFrameName = (f: PyFrame): string => `${f.name} (${f.file}:${f.line ?? '?'})`;

/** The Python frames that could not be placed, and why; null when all were (or there are none). */
function pythonNote(t: ThreadReport): { why: string; frames: PyFrame[] } | null {
  const p = t.python;
  if (!p || p.placement.unplaced === null || p.stack.frames.length === 0) return null;
  return { why: p.placement.unplaced, frames: p.stack.frames };
}

export interface ThreadReport {
  tid: number;
  comm: string | null;
  frames: Frame[];
  /** DWUNW_OK or DWUNW_ERR_* */
  stop: number;
  /** "OK", "NO_DWARF", ... */
  stopName: string;
  /** dwunw_strerror(stop) */
  stopText: string;
  /** Bytes in an address of the thread's architecture (8 when unknown). */
  addrSize: number;
  /** Why the thread could not be unwound at all (attach refused), for JSON. */
  error?: string;
  /** The thread's Python frames and where they go among the native ones (a CPython process). */
  python?: { stack: PyStack; placement: PyPlacement };
}

export interface ProcessReport {
  pid: number;
  comm: string | null;
  threads: ThreadReport[];
}

export interface PrintOptions {
  /** Append `at file:line` when known. */
  lines: boolean;
  /** Collects the markers shown, for the legend (lib/marks.ts legendLine) after the stacks. */
  seen?: Set<Mark>;
}

/** The stop reason as printed: "end of stack" for a walk that reached the outermost frame. */
export const stopLine = (t: Pick<ThreadReport, 'stop' | 'stopText'>): string =>
  t.stop === DWUNW_OK ? 'end of stack' : t.stopText;

// ---- JSON ------------------------------------------------------------------------------------------

export function frameJson(f: Frame, origin: Origin) {
  return {
    pc: hex(f.pc),
    sp: hex(f.sp),
    module: f.module,
    module_offset: f.moduleAddr === null ? null : hex(f.moduleAddr),
    symbol: f.symbol ? f.symbol.name : null,
    offset: f.symbol ? hex(f.symbol.offset) : null,
    // 'elf' (the module's symbols), 'perf-map' (the JIT's /tmp/perf-PID.map), null: no name
    symbol_source: f.symbol ? f.symbol.source : null,
    file: f.symbol?.file ?? null,
    line: f.symbol?.line ?? null,
    how: howName(f.how),
    flags: frameFlagNames(f.flags),
    origin,
    // in anonymous executable memory (JIT code): module is null; as the tools' JSON says it
    ...(f.module === null && f.flags & DWUNW_FRAME_JIT ? { anon: true } : {}),
  };
}

export function threadJson(t: ThreadReport) {
  return {
    tid: t.tid,
    comm: t.comm,
    frames: entries(t).map((e) => ('py' in e ? pyFrameJson(e.py) : frameJson(e.native, e.origin))),
    stop: t.stopName,
    stop_text: stopLine(t),
    ...(t.python
      ? {
          python: {
            stop: t.python.stack.stopName,
            frames: t.python.stack.frames.length,
            merged: t.python.placement.unplaced === null,
            ...(pythonNote(t) ? { unplaced: pythonNote(t)!.why, unplaced_frames: pythonNote(t)!.frames.map(pyFrameJson) } : {}),
          },
        }
      : {}),
    ...(t.error !== undefined ? { error: t.error } : {}),
  };
}

export function processJson(p: ProcessReport) {
  return { pid: p.pid, comm: p.comm, threads: p.threads.map(threadJson) };
}

// ---- Text ------------------------------------------------------------------------------------------

/** `name+0xoff` (`name` at offset 0), or `[unknown]` as the tools print a frame with no name. */
export function symbolText(f: Frame): string {
  if (!f.symbol) return '[unknown]';
  return f.symbol.offset === 0n ? f.symbol.name : `${f.symbol.name}+${hex(f.symbol.offset)}`;
}

/**
 * `#1  0x00007f6955108bd3 __nanosleep+0x13 (/usr/lib/x86_64-linux-gnu/libc.so.6) [live] at file:line`:
 * the index padded to the widest one, the pc at the address width, then the frame's marker as the
 * tools print it ([live], [fp], [prologue], [lr]; none for frames from the window, a signal frame),
 * [jit] on a name from the JIT's perf map, and [uprobe] on the kernel's uretprobe trampoline. A
 * frame with no name is `[unknown] (module)`, `[unknown] ([anon])` in anonymous executable memory,
 * `[unknown]` alone in no mapping (bpf/runtime/report_fmt.c fprint_unknown). Markers shown are added to
 * opts.seen.
 */
export function frameLine(f: Frame, origin: Origin, index: number, indexWidth: number, addrSize: number, c: ChalkInstance, opts: PrintOptions): string {
  const idx = `#${index}`.padEnd(indexWidth);
  const pc = `0x${f.pc.toString(16).padStart(addrSize * 2, '0')}`;
  const sym = symbolText(f);
  let line = `${idx} ${c.blue(pc)} ${f.symbol ? c.yellow(sym) : c.dim(sym)}`;
  // anonymous executable memory (JIT code) has no file: named as the tools name it
  const module = f.module ?? (f.flags & DWUNW_FRAME_JIT ? '[anon]' : null);
  if (module !== null) line += ` (${c.green(module)})`;
  const marks: Mark[] = [];
  const m = originMark(origin);
  if (m) marks.push(m);
  if (f.symbol?.source === 'perf-map') marks.push('jit');
  if (f.flags & DWUNW_FRAME_UPROBE_TRAMP) marks.push('uprobe');
  for (const k of marks) {
    line += ` ${c.magenta(`[${k}]`)}`;
    opts.seen?.add(k);
  }
  if (opts.lines && f.symbol?.file) line += ` at ${c.green(f.symbol.file)}${f.symbol.line !== null ? `:${f.symbol.line}` : ''}`;
  return line;
}

/** `#5  python             park (/srv/app.py:21) [py]` */
function pyFrameLine(f: PyFrame, index: number, indexWidth: number, addrSize: number, c: ChalkInstance, opts: PrintOptions): string {
  opts.seen?.add('py');
  return `${`#${index}`.padEnd(indexWidth)} ${c.blue('python'.padEnd(2 + addrSize * 2))} ${c.yellow(f.name)} (${c.green(f.file)}:${f.line ?? '?'}) ${c.magenta('[py]')}`;
}

export const processHeader = (p: Pick<ProcessReport, 'pid' | 'comm'>, c: ChalkInstance): string =>
  c.bold(`PID ${p.pid}${p.comm !== null ? ` (${p.comm})` : ''}`);

/** One thread's block: header, frames, stop line (each ending with a newline). */
export function threadText(t: ThreadReport, c: ChalkInstance, opts: PrintOptions): string {
  const out: string[] = [c.bold(`Thread ${t.tid}${t.comm !== null ? ` (${t.comm})` : ''}:`)];
  const all = entries(t);
  const width = Math.max(3, `#${Math.max(0, all.length - 1)}`.length);
  all.forEach((e, i) =>
    out.push('py' in e ? pyFrameLine(e.py, i, width, t.addrSize, c, opts) : frameLine(e.native, e.origin, i, width, t.addrSize, c, opts)),
  );
  const stop = t.stop === DWUNW_OK ? stopLine(t) : `${t.stopText} (${t.stopName})`;
  out.push(`stop: ${t.stop === DWUNW_OK ? stop : c.red(stop)}`);
  const py = t.python;
  if (py && py.stack.stop !== DWUNW_OK && py.stack.stopName !== 'NOT_FOUND')
    out.push(c.red(`python: the chain is cut after ${py.stack.frames.length} frames (${py.stack.stopName})`));
  const note = pythonNote(t);
  if (note) {
    out.push(c.red(`python: not merged: ${note.why}; its frames, innermost first:`));
    note.frames.forEach((f, i) => out.push(pyFrameLine(f, i, width, t.addrSize, c, opts)));
  }
  return out.join('\n') + '\n';
}
