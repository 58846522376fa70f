// Printing unwound stacks, shared by unwind-pid and unwind-snapshot: the gdb/eu-stack-like text
// and the JSON form. Nothing here unwinds; it formats what lib/dwunw.ts returns.
import type { ChalkInstance } from 'chalk';
import { type Frame, frameFlagNames, howName } from './dwunw.js';
import { DWUNW_FRAME_BEYOND_SNAPSHOT, DWUNW_FRAME_JIT, DWUNW_FRAME_UPROBE_TRAMP, DWUNW_FRAME_VDSO, DWUNW_OK } from './native.js';
import { frameOrigins, type Origin } from './origin.js';
import { hex } from './output.js';

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
}

export interface ProcessReport {
  pid: number;
  comm: string | null;
  threads: ThreadReport[];
}

export interface PrintOptions {
  /** Append `at file:line` when known. */
  lines: boolean;
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
    file: f.symbol?.file ?? null,
    line: f.symbol?.line ?? null,
    how: howName(f.how),
    flags: frameFlagNames(f.flags),
    origin,
  };
}

export function threadJson(t: ThreadReport) {
  return {
    tid: t.tid,
    comm: t.comm,
    frames: ((o) => t.frames.map((f, i) => frameJson(f, o[i]!)))(frameOrigins(t.frames)),
    stop: t.stopName,
    stop_text: stopLine(t),
    ...(t.error !== undefined ? { error: t.error } : {}),
  };
}

export function processJson(p: ProcessReport) {
  return { pid: p.pid, comm: p.comm, threads: p.threads.map(threadJson) };
}

// ---- Text ------------------------------------------------------------------------------------------

/** Markers after the how: `+mem` for memory read beyond the snapshot, jit, vdso, uprobe. */
function markers(flags: number): string[] {
  const m: string[] = [];
  if (flags & DWUNW_FRAME_BEYOND_SNAPSHOT) m.push('+mem');
  if (flags & DWUNW_FRAME_JIT) m.push('jit');
  if (flags & DWUNW_FRAME_VDSO) m.push('vdso');
  if (flags & DWUNW_FRAME_UPROBE_TRAMP) m.push('uprobe');
  return m;
}

/** `name+0xoff` (`name` at offset 0), or `??`. */
export function symbolText(f: Frame): string {
  if (!f.symbol) return '??';
  return f.symbol.offset === 0n ? f.symbol.name : `${f.symbol.name}+${hex(f.symbol.offset)}`;
}

/**
 * `#1  0x00007f6955108bd3 __nanosleep+0x13 (/usr/lib/x86_64-linux-gnu/libc.so.6) [cfi] at file:line`:
 * the index padded to the widest one, the pc at the address width.
 */
export function frameLine(f: Frame, index: number, indexWidth: number, addrSize: number, c: ChalkInstance, opts: PrintOptions): string {
  const idx = `#${index}`.padEnd(indexWidth);
  const pc = `0x${f.pc.toString(16).padStart(addrSize * 2, '0')}`;
  const sym = symbolText(f);
  let line = `${idx} ${c.blue(pc)} ${f.symbol ? c.yellow(sym) : c.dim(sym)}`;
  if (f.module !== null) line += ` (${c.green(f.module)})`;
  const how = [howName(f.how), ...markers(f.flags)].join(' ');
  line += ` ${f.how <= 1 && markers(f.flags).length === 0 ? c.dim(`[${how}]`) : c.magenta(`[${how}]`)}`;
  if (opts.lines && f.symbol?.file) line += ` at ${c.green(f.symbol.file)}${f.symbol.line !== null ? `:${f.symbol.line}` : ''}`;
  return line;
}

export const processHeader = (p: Pick<ProcessReport, 'pid' | 'comm'>, c: ChalkInstance): string =>
  c.bold(`PID ${p.pid}${p.comm !== null ? ` (${p.comm})` : ''}`);

/** One thread's block: header, frames, stop line (each ending with a newline). */
export function threadText(t: ThreadReport, c: ChalkInstance, opts: PrintOptions): string {
  const out: string[] = [c.bold(`Thread ${t.tid}${t.comm !== null ? ` (${t.comm})` : ''}:`)];
  const width = Math.max(3, `#${Math.max(0, t.frames.length - 1)}`.length);
  t.frames.forEach((f, i) => out.push(frameLine(f, i, width, t.addrSize, c, opts)));
  const stop = t.stop === DWUNW_OK ? stopLine(t) : `${t.stopText} (${t.stopName})`;
  out.push(`stop: ${t.stop === DWUNW_OK ? stop : c.red(stop)}`);
  return out.join('\n') + '\n';
}
