// dwunw unwind-pid PID [--tid TID] [--json] [--lines] [--max-frames N] [--stack-size BYTES] [--audit]
// [--attach-timeout MS] [--save FILE]: unwind the live threads of a process, one at a time: freeze
// the thread, copy its registers and a window of its stack, resume it, then unwind the copy
// (lib/dwunw.ts captureThread). A thread is held only while it is read, and never left stopped:
// SIGINT, SIGTERM and SIGHUP resume a held thread before dwunw exits; if dwunw is killed (SIGKILL),
// the kernel resumes it (a PTRACE_SEIZE tracee is detached when its tracer dies, with no SIGSTOP
// left behind). A thread that does not stop within --attach-timeout ms (a vfork parent,
// uninterruptible I/O: state D) is not unwound: the library warns "dwunw: pid P tid T did not stop
// within N ms (state D): not unwound", the exit status is 1, and the other threads are unwound.
// --save also copies the [vdso] mapping, so that frames in it unwind offline. Frames in no module
// (JIT code) are named from the process's /tmp/perf-PID.map when it has one (lib/perf-map.ts) and
// marked [jit]; a frame with no name prints as the tools print it: [unknown] (module or [anon]).
//
// Test hook: DWUNW_TEST_HOLD_MS=N makes dwunw stay attached N ms per thread after the reads (the
// wait is asynchronous, so the signal handlers run meanwhile). test/cli-unwind-pid.test.ts uses it
// to signal or kill dwunw, or the target, while a thread is held.
import { statSync, writeFileSync } from 'node:fs';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { DEFAULT_ATTACH_TIMEOUT_MS, DEFAULT_MAX_FRAMES, DEFAULT_STACK_SIZE } from '../lib/defaults.js';
import { HOST_ARCH, attachFailure, attachTimedOut, guardHeldThreads, letSignalsIn, readComm, tgidOf, threadsOf } from '../lib/pid-threads.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor, reportError } from '../lib/output.js';
import { type Snapshot, type SnapshotThread, snapshotToJson } from '../lib/snapshot.js';
import type { Mark } from '../lib/marks.js';
import type { PerfMap } from '../lib/perf-map.js';
import { debuginfodWanted, nameAfterFetch } from '../lib/debuginfod.js';
import { type ProcessReport, type ThreadReport, processHeader, processJson, threadText } from '../lib/stacks.js';
import { checkTraceable } from '../lib/traceable.js';

// Option names as given (yargs also provides them camelCased to the handler).
interface Args {
  pid: string;
  tid?: number;
  json: boolean;
  lines: boolean;
  'max-frames': number;
  'stack-size': number;
  audit: boolean;
  'attach-timeout': number;
  save?: string;
  debuginfod?: boolean;
  'debug-dir'?: string;
  python: boolean;
}

export const command = 'unwind-pid <pid>';
export const describe = 'Unwind the stacks of a live process\'s threads (gdb/eu-stack-like)';

export const MAX_STACK_SIZE = 64 << 20;
export const MAX_ATTACH_TIMEOUT_MS = 3_600_000;

export function builder(y: Argv): Argv<Args> {
  return y
    .positional('pid', { type: 'string', demandOption: true, describe: 'Process id' })
    .option('tid', { type: 'number', requiresArg: true, describe: 'Only this thread of the process' })
    .option('json', {
      type: 'boolean',
      default: false,
      describe: 'Print JSON: {pid, threads: [{tid, frames: [{pc, sp, module, symbol, how, flags, ...}], stop}]}',
    })
    .option('lines', { type: 'boolean', default: false, describe: 'Show the source file:line of each frame when known' })
    .option('max-frames', { type: 'number', default: DEFAULT_MAX_FRAMES, requiresArg: true, describe: 'Stop after this many frames' })
    .option('stack-size', {
      type: 'number',
      default: DEFAULT_STACK_SIZE,
      requiresArg: true,
      describe: 'Bytes of stack copied while the thread is frozen; memory beyond is read live (frames marked [live])',
    })
    .option('audit', { type: 'boolean', default: false, describe: 'Log every attach, detach and read fallback on stderr' })
    .option('attach-timeout', {
      type: 'number',
      default: DEFAULT_ATTACH_TIMEOUT_MS,
      requiresArg: true,
      describe: 'Milliseconds to wait for a thread to stop; one that does not (state D: vfork, uninterruptible I/O) is not unwound',
    })
    .option('python', {
      type: 'boolean',
      default: true,
      describe: 'In a CPython process, read each thread\'s Python frames while it is stopped and show them before the interpreter call that ran them ([py]); --no-python: native frames only',
    })
    .option('save', {
      type: 'string',
      requiresArg: true,
      describe: 'Also write the threads\' registers, stack windows, maps and vDSO to FILE, for dwunw unwind-snapshot',
    })
    .option('debuginfod', {
      type: 'boolean',
      describe: 'Fetch the debug files of stripped modules from DEBUGINFOD_URLS (default: on when it is set); --no-debuginfod: never',
    })
    .option('debug-dir', {
      type: 'string',
      requiresArg: true,
      describe: "':'-separated directories of separate debug files (default /usr/lib/debug)",
    })
    .example('$0 unwind-pid 1234', 'every thread of process 1234')
    .example('$0 unwind-pid 1234 --tid 1240 --json', 'one thread, as JSON')
    .example('$0 unwind-pid 1234 --save snap.json', 'also keep a snapshot to unwind offline');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await unwindPid({
    pid: argv.pid,
    tid: argv.tid,
    json: argv.json,
    lines: argv.lines,
    maxFrames: argv.maxFrames,
    stackSize: argv.stackSize,
    audit: argv.audit,
    attachTimeout: argv.attachTimeout,
    save: argv.save,
    debuginfod: argv.debuginfod,
    debugDir: argv.debugDir,
    python: argv.python,
  });
}

export interface UnwindPidOptions {
  pid: string;
  tid?: number;
  json: boolean;
  lines: boolean;
  maxFrames: number;
  stackSize: number;
  audit: boolean;
  /** ms; the library's default when absent. */
  attachTimeout?: number;
  save?: string;
  /** undefined: on when DEBUGINFOD_URLS is set. */
  debuginfod?: boolean;
  debugDir?: string;
  /** Read Python frames (default true). */
  python?: boolean;
}

// ---- The command ---------------------------------------------------------------------------------

function checkOptions(o: UnwindPidOptions): { pid: number; holdMs: number } {
  if (!/^[1-9]\d*$/.test(o.pid.trim()) || Number(o.pid) > 0x7fffffff) throw new CliError(`pid ${o.pid}`, 'not a process id', ExitCode.USAGE);
  const pid = Number(o.pid);
  if (o.tid !== undefined && (!Number.isInteger(o.tid) || o.tid <= 0 || o.tid > 0x7fffffff))
    throw new CliError('--tid', `not a thread id: ${o.tid}`, ExitCode.USAGE);
  if (!Number.isInteger(o.maxFrames) || o.maxFrames < 1 || o.maxFrames > 65536)
    throw new CliError('--max-frames', `not a number of frames (1-65536): ${o.maxFrames}`, ExitCode.USAGE);
  if (!Number.isInteger(o.stackSize) || o.stackSize < 0 || o.stackSize > MAX_STACK_SIZE)
    throw new CliError('--stack-size', `not a size in bytes (0-${MAX_STACK_SIZE}): ${o.stackSize}`, ExitCode.USAGE);
  if (o.attachTimeout !== undefined && (!Number.isInteger(o.attachTimeout) || o.attachTimeout < 1 || o.attachTimeout > MAX_ATTACH_TIMEOUT_MS))
    throw new CliError('--attach-timeout', `not a time in ms (1-${MAX_ATTACH_TIMEOUT_MS}): ${o.attachTimeout}`, ExitCode.USAGE);
  const hold = process.env.DWUNW_TEST_HOLD_MS;
  const holdMs = hold && /^\d+$/.test(hold) ? Number(hold) : 0;
  return { pid, holdMs };
}

export async function unwindPid(o: UnwindPidOptions): Promise<void> {
  const { pid, holdMs } = checkOptions(o);
  try {
    statSync(`/proc/${pid}`);
  } catch {
    throw new CliError(`pid ${pid}`, 'no such process', ExitCode.NO_PROCESS);
  }
  const tgid = tgidOf(pid);
  if (tgid !== null && tgid !== pid) throw new CliError(`pid ${pid}`, `not a process but a thread of pid ${tgid} (use --tid)`, ExitCode.USAGE);
  // a kernel thread, a zombie, another tracer, Yama: named before attaching (ptrace says EPERM)
  checkTraceable(pid);
  let tids = threadsOf(pid);
  if (o.tid !== undefined) {
    if (!tids.includes(o.tid)) throw new CliError(`pid ${pid}`, `no thread ${o.tid}`, ExitCode.NO_PROCESS);
    tids = [o.tid];
  }

  const c = colorsFor(process.stdout);
  const out = new ChunkedWriter();
  const report: ProcessReport = { pid, comm: readComm(`/proc/${pid}/comm`), threads: [] };
  const saved: SnapshotThread[] = [];
  let maps: string | null = null;
  let vdso: Buffer | null = null;
  let arch: string | null = null;
  let perfMap: PerfMap | null = null;
  const attachTimeoutMs = o.attachTimeout ?? DEFAULT_ATTACH_TIMEOUT_MS;
  const fetch = debuginfodWanted(o.debuginfod);
  // with debuginfod, text waits for the fetches (names come after the captures, never during)
  const texts: ThreadReport[] = [];

  // the library (koffi) only now: --help and usage errors do without it
  const { Dwunw, detachAll } = await import('../lib/dwunw.js');
  const { PerfMap, nameJitFrames } = await import('../lib/perf-map.js');
  const { placePython } = await import('../lib/python.js');
  const { legendLine } = await import('../lib/marks.js');
  const d = new Dwunw({
    warn: (line) => process.stderr.write(`${line}\n`),
    audit: o.audit ? (line) => process.stderr.write(`${line}\n`) : undefined,
    attachTimeoutMs,
    debuginfod: fetch,
    debugDirs: o.debugDir ?? null,
  });
  const unguard = guardHeldThreads(detachAll);
  try {
    // CPython: found once, its frames read per thread while the thread is stopped
    const py = o.python === false ? { rt: null, why: null } : d.findPython(pid);
    if (py.why) process.stderr.write(`dwunw: pid ${pid}: ${py.why}\n`);
    if (!o.json) await out.write(`${processHeader(report, c)}\n`);
    let first = true;
    const seen = new Set<Mark>();
    for (const tid of tids) {
      const comm = readComm(`/proc/${pid}/task/${tid}/comm`);
      const cap = await d.captureThread(pid, tid, {
        stackSize: o.stackSize,
        maxFrames: o.maxFrames,
        // --save: the maps and the vDSO, once, from the first thread that could be frozen.
        readMaps: o.save !== undefined && maps === null,
        readVdso: o.save !== undefined && maps === null,
        holdMs,
        python: py.rt ?? undefined,
      });
      // frames in no module (JIT code): named from /tmp/perf-PID.map, read at the first such frame
      if (cap.frames.some((f) => f.module === null && f.symbol === null)) nameJitFrames(cap.frames, (perfMap ??= new PerfMap(pid)));
      const ops = cap.regs ? Dwunw.arch(cap.regs.arch) : null;
      const t: ThreadReport = {
        tid,
        comm,
        frames: cap.frames,
        stop: cap.stop,
        stopName: cap.stopName,
        stopText: cap.stopText,
        addrSize: ops?.addr_size ?? 8,
        ...(py.rt && cap.python ? { python: { stack: cap.python, placement: placePython(cap.frames, cap.python, py.rt) } } : {}),
      };
      // Not read at all (attach refused, registers unreadable) is an error; an exit is not.
      if (attachTimedOut(cap)) {
        // The library's warning has said so on stderr: one line is enough.
        t.stopText = `did not stop within ${attachTimeoutMs} ms`;
        t.error = `cannot attach: did not stop within ${attachTimeoutMs} ms (ETIMEDOUT)`;
        process.exitCode = 1;
      } else if (!cap.exited && cap.regs === null) {
        t.error = cap.attached ? `cannot read registers: ${cap.stopText}` : attachFailure(pid, cap);
        reportError(`pid ${pid} tid ${tid}`, t.error);
      }
      report.threads.push(t);
      if (cap.maps !== null) {
        maps = cap.maps;
        vdso = cap.vdso;
      }
      if (cap.regs) {
        arch ??= ops?.name ?? null;
        saved.push({ tid, comm, regs: cap.regs, stack: cap.stack });
      }
      if (!o.json && fetch) texts.push(t);
      else if (!o.json) {
        await out.write(`${first ? '' : '\n'}${threadText(t, c, { lines: o.lines, seen })}`);
        await out.flush();
      }
      first = false;
      await letSignalsIn();
    }
    if (fetch) {
      for (const line of nameAfterFetch(d, report.threads.map((t) => t.frames))) process.stderr.write(`${line}\n`);
      for (const [i, t] of texts.entries()) await out.write(`${i === 0 ? '' : '\n'}${threadText(t, c, { lines: o.lines, seen })}`);
    }
    // a planted map (another owner, a symlink) names nothing: said once
    if (perfMap?.rejected) process.stderr.write(`dwunw: ${perfMap.rejected}\n`);
    perfMap?.close();
    const legend = legendLine(seen);
    if (!o.json && legend) await out.write(`\n${legend}\n`);
    if (o.json) await out.write(`${JSON.stringify(processJson(report), null, 1)}\n`);
    await out.flush();

    if (o.save !== undefined) {
      const snap: Snapshot = {
        arch: arch ?? HOST_ARCH[process.arch] ?? process.arch,
        pid,
        comm: report.comm,
        threads: saved,
        maps: maps ?? '',
        sysroot: null,
        vdso,
        memory: [],
      };
      try {
        writeFileSync(o.save, snapshotToJson(snap));
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        throw new CliError(o.save, err.code === 'ENOENT' ? 'no such directory' : err.code === 'EACCES' ? 'permission denied' : err.message);
      }
    }
  } finally {
    unguard();
    d.close();
  }
}
