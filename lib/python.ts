// CPython frames beside the native ones: the interpreter found in a process (dwunw_py_find), a
// thread's Python frames (dwunw_py_stack), and their place in the native stack: each native
// _PyEval_EvalFrameDefault frame is preceded (innermost first) by exactly the Python frames it ran,
// from the first one after the previous eval call's entry frame to its own entry frame.
import * as N from './native.js';

export interface PyRuntime {
  /** "3.11.2" (from Py_Version); null when not read. */
  version: string | null;
  /** The file holding the interpreter. */
  path: string;
  evalLo: bigint;
  evalHi: bigint;
  /** The struct, for dwunw_py_stack. */
  mem: N.CMem;
}

export interface PyFrame {
  /** co_qualname */
  name: string;
  file: string;
  /** null when it could not be read */
  line: number | null;
  /** DWUNW_PY_* */
  flags: number;
}

export interface PyStack {
  frames: PyFrame[];
  /** DWUNW_OK: the thread's whole chain; else where it was cut (NOT_FOUND: not a Python thread). */
  stop: number;
  stopName: string;
}

/** Where the Python frames go: before[i] = the Python frames printed just before native frame i. */
export interface PyPlacement {
  before: Map<number, PyFrame[]>;
  /** Why the frames could not be placed (then `before` is empty), null when they were. */
  unplaced: string | null;
}

const versionText = (v: number): string | null => (v ? `${v >>> 24}.${(v >> 16) & 0xff}.${(v >> 8) & 0xff}` : null);

/** CPython in pid: the runtime, or why not (null when the process has no CPython at all). */
export function findPython(ctx: N.Pointer, pid: number): { rt: PyRuntime | null; why: string | null } {
  const lib = N.lib();
  const mem = new N.CMem(N.sizeOf(N.PyRuntimeT));
  mem.buf.writeUInt32LE(N.sizeOf(N.PyRuntimeT), 0);
  const rc = lib.dwunw_py_find(ctx, pid, mem.buf);
  const r = N.decodeAt(mem.buf, 0, N.PyRuntimeT) as Record<string, unknown>;
  if (rc !== N.DWUNW_OK) {
    mem.free();
    // no CPython, or the process could not be read at all (gone, no permission): nothing to say
    // here, the native unwind names that cause itself
    if (rc === N.DWUNW_ERR_NOT_FOUND || !r.path) return { rt: null, why: null };
    const v = versionText(r.version as number);
    return { rt: null, why: `${r.path || 'CPython'}${v ? ` (${v})` : ''}: ${r.why || lib.dwunw_strerror(rc)}: native frames only` };
  }
  return {
    rt: {
      version: versionText(r.version as number),
      path: r.path as string,
      evalLo: BigInt(r.eval_lo as number | bigint),
      evalHi: BigInt(r.eval_hi as number | bigint),
      mem,
    },
    why: null,
  };
}

/** The frame buffer, kept between calls (its memory never moves: CMem). */
let frameBuf: { mem: N.CMem; max: number } | null = null;

/** The Python frames of tid (innermost first), at most max. */
export function pythonStack(ctx: N.Pointer, rt: PyRuntime, tid: number, max = 512): PyStack {
  const lib = N.lib();
  const size = N.sizeOf(N.PyFrameT);
  if (!frameBuf || frameBuf.max < max) {
    frameBuf?.mem.free();
    frameBuf = { mem: new N.CMem(size * max), max };
  }
  const buf = frameBuf.mem.buf;
  const n: [number | bigint] = [max];
  const stop = lib.dwunw_py_stack(ctx, rt.mem.buf, tid, buf, n);
  const frames: PyFrame[] = [];
  for (let i = 0; i < Number(n[0]); i++) {
    const f = N.decodeAt(buf, i * size, N.PyFrameT) as Record<string, unknown>;
    frames.push({
      name: f.name as string,
      file: f.file as string,
      line: (f.flags as number) & N.DWUNW_PY_NO_LINE ? null : (f.line as number),
      flags: f.flags as number,
    });
  }
  return { frames, stop, stopName: lib.dwunw_errname(stop) };
}

/** The native frames that are calls of the interpreter's eval loop (innermost first). */
/** What placing Python frames needs of a native frame (lib/dwunw.ts's Frame has it). */
export interface NativePc {
  pc: bigint;
  flags: number;
}

export function evalFrames(frames: readonly NativePc[], rt: Pick<PyRuntime, 'evalLo' | 'evalHi'>): number[] {
  const out: number[] = [];
  frames.forEach((f, i) => {
    // a return address points after the call: look up the call itself
    const pc = i === 0 || f.flags & N.DWUNW_FRAME_EXACT_PC ? f.pc : f.pc - 1n;
    if (pc >= rt.evalLo && pc < rt.evalHi) out.push(i);
  });
  return out;
}

/**
 * Put each eval call's Python frames before its native frame. The k-th group of Python frames (up
 * to and including the k-th entry frame) belongs to the k-th eval frame; when the counts differ
 * (a native walk cut short, a thread caught entering or leaving the eval loop), nothing is placed:
 * a wrong merge that looks right is worse than none.
 */
export function placePython(frames: readonly NativePc[], py: PyStack, rt: Pick<PyRuntime, 'evalLo' | 'evalHi'>): PyPlacement {
  const before = new Map<number, PyFrame[]>();
  const groups: PyFrame[][] = [];
  let cur: PyFrame[] = [];
  for (const f of py.frames) {
    cur.push(f);
    if (f.flags & N.DWUNW_PY_ENTRY) {
      groups.push(cur);
      cur = [];
    }
  }
  const evals = evalFrames(frames, rt);
  if (cur.length && py.stop === N.DWUNW_OK)
    return { before, unplaced: `the outermost Python frame is no entry frame of the interpreter` };
  if (py.stop !== N.DWUNW_OK && cur.length) groups.push(cur);
  if (groups.length !== evals.length)
    return {
      before,
      unplaced: `${groups.length} call${groups.length === 1 ? '' : 's'} of the interpreter in the Python frames, ${evals.length} _PyEval_EvalFrameDefault frame${evals.length === 1 ? '' : 's'} in the native stack`,
    };
  groups.forEach((g, k) => before.set(evals[k]!, g));
  return { before, unplaced: null };
}
