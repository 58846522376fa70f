// The snapshot file ("dwunw-snapshot-1"): registers and stack windows of a process's threads plus
// its maps (and optionally its vDSO's bytes), written by `dwunw unwind-pid --save` (or by any tool, e.g. a gdb script) and unwound
// offline by `dwunw unwind-snapshot`. The format is documented in commands/unwind-snapshot.ts and
// README.md. This module only converts between the file and lib/dwunw.ts's types.
import type { MemWindow, Registers } from './dwunw.js';
import { DWUNW_MAX_REGS } from './native-consts.js';
import { hex } from './output.js';

export const SNAPSHOT_FORMAT = 'dwunw-snapshot-1';

export interface SnapshotThread {
  tid: number;
  comm: string | null;
  regs: Registers;
  stack: MemWindow | null;
}

export interface Snapshot {
  arch: string;
  pid: number;
  comm: string | null;
  threads: SnapshotThread[];
  maps: string;
  sysroot: string | null;
  /** A copy of the [vdso] mapping (an ELF image), so that frames in it unwind offline; null: none. */
  vdso: Buffer | null;
  /** Other memory of the process (e.g. qemu's signal trampoline page), read after the stacks. */
  memory: MemWindow[];
}

/** The file's JSON text. */
export function snapshotToJson(s: Snapshot): string {
  const doc = {
    format: SNAPSHOT_FORMAT,
    arch: s.arch,
    pid: s.pid,
    ...(s.comm !== null ? { comm: s.comm } : {}),
    threads: s.threads.map((t) => {
      const regs: Record<string, string> = {};
      for (const [n, v] of [...t.regs.regs].sort((a, b) => a[0] - b[0])) regs[String(n)] = hex(v);
      return {
        tid: t.tid,
        ...(t.comm !== null ? { comm: t.comm } : {}),
        pc: hex(t.regs.pc),
        regs,
        stack_start: hex(t.stack?.start ?? 0n),
        stack: t.stack ? t.stack.bytes.toString('base64') : '',
      };
    }),
    maps: s.maps,
    sysroot: s.sysroot,
    ...(s.vdso !== null && s.vdso.length > 0 ? { vdso: s.vdso.toString('base64') } : {}),
    ...(s.memory.length > 0 ? { memory: s.memory.map((m) => ({ start: `0x${m.start.toString(16)}`, bytes: m.bytes.toString('base64') })) } : {}),
  };
  return JSON.stringify(doc, null, 1) + '\n';
}

/** A malformed snapshot: `where` names the offending field. */
export class SnapshotError extends Error {
  constructor(
    readonly where: string,
    reason: string,
  ) {
    super(where ? `${where}: ${reason}` : reason);
    this.name = 'SnapshotError';
  }
}

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

function hexField(v: Json, where: string): bigint {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,16}$/.test(v)) throw new SnapshotError(where, 'not a hex string ("0x…", at most 64 bits)');
  return BigInt(v);
}

function intField(v: Json, where: string, min: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > 0x7fffffff)
    throw new SnapshotError(where, `not an integer >= ${min}`);
  return v;
}

const isBase64 = (v: string): boolean => /^[A-Za-z0-9+/]*={0,2}$/.test(v) && v.length % 4 === 0;

function optString(v: Json, where: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw new SnapshotError(where, 'not a string');
  return v;
}

/**
 * Parse and check a snapshot file's text. `archOf` maps the arch name to the library's
 * enum dwunw_arch (null: no backend), so that the registers carry it.
 */
export function parseSnapshot(text: string, archOf: (name: string) => number | null): Snapshot {
  let doc: Json;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new SnapshotError('', `not JSON: ${(e as Error).message}`);
  }
  if (!isObject(doc)) throw new SnapshotError('', 'not a JSON object');
  if (doc.format !== SNAPSHOT_FORMAT)
    throw new SnapshotError('format', `expected "${SNAPSHOT_FORMAT}", found ${JSON.stringify(doc.format ?? null)}`);
  if (typeof doc.arch !== 'string') throw new SnapshotError('arch', 'not a string');
  const arch = archOf(doc.arch);
  if (arch === null) throw new SnapshotError('arch', `unsupported architecture: ${doc.arch}`);
  const pid = intField(doc.pid, 'pid', 1);
  if (typeof doc.maps !== 'string') throw new SnapshotError('maps', 'not a string (the text of /proc/PID/maps)');
  const sysroot = optString(doc.sysroot, 'sysroot');
  if (!Array.isArray(doc.threads)) throw new SnapshotError('threads', 'not an array');

  const threads = doc.threads.map((t: Json, i: number): SnapshotThread => {
    const at = `threads[${i}]`;
    if (!isObject(t)) throw new SnapshotError(at, 'not an object');
    const tid = intField(t.tid, `${at}.tid`, 1);
    const pc = hexField(t.pc, `${at}.pc`);
    if (!isObject(t.regs)) throw new SnapshotError(`${at}.regs`, 'not an object ({"DWARF number": "0x…"})');
    const regs = new Map<number, bigint>();
    for (const [k, v] of Object.entries(t.regs)) {
      const n = Number(k);
      if (!/^\d+$/.test(k) || n >= DWUNW_MAX_REGS)
        throw new SnapshotError(`${at}.regs`, `"${k}" is not a DWARF register number below ${DWUNW_MAX_REGS}`);
      regs.set(n, hexField(v, `${at}.regs["${k}"]`));
    }
    let stack: MemWindow | null = null;
    if (t.stack !== undefined && t.stack !== null && t.stack !== '') {
      if (typeof t.stack !== 'string' || !isBase64(t.stack))
        throw new SnapshotError(`${at}.stack`, 'not base64');
      stack = { start: hexField(t.stack_start, `${at}.stack_start`), bytes: Buffer.from(t.stack, 'base64') };
    }
    return { tid, comm: optString(t.comm, `${at}.comm`), regs: { arch, flags: 0, pc, regs }, stack };
  });
  if (threads.length > 0 && doc.maps.trim() === '') throw new SnapshotError('maps', 'empty');
  let vdso: Buffer | null = null;
  if (doc.vdso !== undefined && doc.vdso !== null && doc.vdso !== '') {
    if (typeof doc.vdso !== 'string' || !isBase64(doc.vdso)) throw new SnapshotError('vdso', 'not base64 (the bytes of the [vdso] mapping)');
    vdso = Buffer.from(doc.vdso, 'base64');
  }
  const memory: MemWindow[] = [];
  if (doc.memory !== undefined && doc.memory !== null) {
    if (!Array.isArray(doc.memory)) throw new SnapshotError('memory', 'not an array of {start, bytes}');
    doc.memory.forEach((m: unknown, i: number) => {
      const r = m as { start?: unknown; bytes?: unknown };
      if (typeof r !== 'object' || r === null || typeof r.bytes !== 'string' || !isBase64(r.bytes))
        throw new SnapshotError(`memory[${i}]`, 'not {"start": "0x…", "bytes": "<base64>"}');
      memory.push({ start: hexField(r.start, `memory[${i}].start`), bytes: Buffer.from(r.bytes, 'base64') });
    });
  }
  return { arch: doc.arch, pid, comm: optString(doc.comm, 'comm'), threads, maps: doc.maps, sysroot, vdso, memory };
}
