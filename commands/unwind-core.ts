// dwunw unwind-core CORE [--exe PATH] [--sysroot DIR] [--maps FILE] [--json] [--lines] [--max-frames N]:
// unwind every thread of a core file, offline. The library (dwunw_core_load) registers the
// core's process under its pid: the maps from the core's NT_FILE note (or --maps), the memory
// from its PT_LOAD segments, then module files for what the core does not hold (code is usually
// not dumped), opened under --sysroot. Each thread's registers come from its NT_PRSTATUS note.
// Output as for unwind-pid: `PID N (comm)` from the core, the threads in the core's order (the
// thread that took the fatal signal first, its signal shown: `Thread T (comm) [SIGSEGV]:`); --json
// as unwind-pid's plus "signal" (the process's, and each thread's: the first thread's only).
//
// Cores without NT_FILE (qemu-user's guest cores) need --maps: the process's /proc/PID/maps,
// saved by the program (or a wrapper) before it died. --exe: the main executable's file, when the
// path the core names is not this machine's (a core from elsewhere, a rebuilt binary).
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { DEFAULT_MAX_FRAMES } from '../lib/defaults.js';
import type { CoreLoad, Dwunw, DwunwError } from '../lib/dwunw.js';
import {
  DWUNW_ARCH_MIPS32,
  DWUNW_CFG_NO_REMOTE_READS,
  DWUNW_CORE_NT_FILE,
  DWUNW_ERR_CORRUPT,
  DWUNW_ERR_INVALID_ARG,
  DWUNW_ERR_NOT_ELF,
  DWUNW_ERR_UNSUPPORTED_ARCH,
} from '../lib/native-consts.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor } from '../lib/output.js';
import { Warnings } from '../lib/warnings.js';
import { placePython } from '../lib/python.js';
import { type Mark, legendLine } from '../lib/marks.js';
import { type ProcessReport, type ThreadReport, processHeader, processJson, threadJson, threadText } from '../lib/stacks.js';

// Option names as given (yargs also provides them camelCased to the handler).
interface Args {
  core: string;
  exe?: string;
  sysroot?: string;
  maps?: string;
  json: boolean;
  lines: boolean;
  'max-frames': number;
}

export const command = 'unwind-core <core>';
export const describe = 'Unwind every thread of a core file (kernel core, gcore, qemu guest core), offline';

export function builder(y: Argv): Argv<Args> {
  return y
    .positional('core', { type: 'string', demandOption: true, describe: 'Core file (ELF ET_CORE)' })
    .option('exe', {
      type: 'string',
      requiresArg: true,
      describe: 'The main executable, when the path the core names is not the right file here',
    })
    .option('sysroot', { type: 'string', requiresArg: true, describe: 'Read module files under this directory' })
    .option('maps', {
      type: 'string',
      requiresArg: true,
      describe: 'The process\'s maps (/proc/PID/maps text) for a core without NT_FILE (qemu guest cores)',
    })
    .option('json', { type: 'boolean', default: false, describe: 'Print JSON, as unwind-pid --json plus "signal"' })
    .option('lines', { type: 'boolean', default: false, describe: 'Show the source file:line of each frame when known' })
    .option('max-frames', { type: 'number', default: DEFAULT_MAX_FRAMES, requiresArg: true, describe: 'Stop after this many frames' })
    .example('$0 unwind-core core.1234', 'a kernel core or gcore (modules from NT_FILE)')
    .example('$0 unwind-core qemu_prog_*.core --maps prog.maps', 'a qemu-user guest core and the maps the guest saved')
    .example('$0 unwind-core core --exe ./build/prog --sysroot /srv/rootfs', 'a core from another machine');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await unwindCore(argv.core, {
    exe: argv.exe,
    sysroot: argv.sysroot,
    maps: argv.maps,
    json: argv.json,
    lines: argv.lines,
    maxFrames: argv.maxFrames,
  });
}

export interface UnwindCoreOptions {
  exe?: string;
  sysroot?: string;
  maps?: string;
  json: boolean;
  lines: boolean;
  maxFrames: number;
}

// ---- Signals -------------------------------------------------------------------------------------

// Linux signal numbers: the generic table (x86_64, arm64), and mips's own.
const GENERIC_SIGNALS = [
  '', 'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGILL', 'SIGTRAP', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGKILL', 'SIGUSR1', 'SIGSEGV',
  'SIGUSR2', 'SIGPIPE', 'SIGALRM', 'SIGTERM', 'SIGSTKFLT', 'SIGCHLD', 'SIGCONT', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU',
  'SIGURG', 'SIGXCPU', 'SIGXFSZ', 'SIGVTALRM', 'SIGPROF', 'SIGWINCH', 'SIGIO', 'SIGPWR', 'SIGSYS',
];
const MIPS_SIGNALS = [
  '', 'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGILL', 'SIGTRAP', 'SIGABRT', 'SIGEMT', 'SIGFPE', 'SIGKILL', 'SIGBUS', 'SIGSEGV',
  'SIGSYS', 'SIGPIPE', 'SIGALRM', 'SIGTERM', 'SIGUSR1', 'SIGUSR2', 'SIGCHLD', 'SIGPWR', 'SIGWINCH', 'SIGURG', 'SIGIO',
  'SIGSTOP', 'SIGTSTP', 'SIGCONT', 'SIGTTIN', 'SIGTTOU', 'SIGVTALRM', 'SIGPROF', 'SIGXCPU', 'SIGXFSZ',
];

/** The name of a signal number of the core's architecture ("SIGSEGV", "SIG34"), null for 0. */
export function signalName(arch: number, signo: number): string | null {
  if (signo <= 0) return null;
  const table = arch === DWUNW_ARCH_MIPS32 ? MIPS_SIGNALS : GENERIC_SIGNALS;
  return table[signo] || `SIG${signo}`;
}

// ---- Errors --------------------------------------------------------------------------------------

const MACHINES: Record<number, string> = {
  2: 'sparc', 3: 'i386', 8: 'mips', 20: 'powerpc', 21: 'powerpc64', 22: 's390', 40: 'arm', 43: 'sparcv9',
  62: 'x86_64', 183: 'aarch64', 243: 'riscv', 258: 'loongarch',
};

/** What the core's ELF header says, for an "unsupported" message: "arm, 32-bit, little-endian". */
function describeElf(file: string): string {
  try {
    const h = readFileSync(file).subarray(0, 20);
    if (h.length < 20) return 'a truncated header';
    const le = h[5] !== 2;
    const machine = le ? h.readUInt16LE(18) : h.readUInt16BE(18);
    const bits = h[4] === 2 ? '64-bit' : h[4] === 1 ? '32-bit' : `class ${h[4]}`;
    return `${MACHINES[machine] ?? `machine ${machine}`}, ${bits}, ${le ? 'little' : 'big'}-endian`;
  } catch {
    return 'unreadable';
  }
}

/**
 * A core cut short: the size the program headers promise (the end of the last segment or of the
 * headers) against the file's size; null when the file is whole or its headers cannot be read.
 */
export function coreTruncation(file: string): { size: number; expected: number } | null {
  let b: Buffer;
  try {
    b = readFileSync(file);
  } catch {
    return null;
  }
  if (b.length < 52 || b.readUInt32BE(0) !== 0x7f454c46) return null;
  const is64 = b[4] === 2;
  const le = b[5] !== 2;
  const u16 = (o: number): number => (le ? b.readUInt16LE(o) : b.readUInt16BE(o));
  const u32 = (o: number): number => (le ? b.readUInt32LE(o) : b.readUInt32BE(o));
  const u64 = (o: number): number => Number(le ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o));
  if (is64 && b.length < 64) return { size: b.length, expected: 64 };
  const phoff = is64 ? u64(32) : u32(28);
  const phentsize = u16(is64 ? 54 : 42);
  const phnum = u16(is64 ? 56 : 44);
  let expected = phoff + phentsize * phnum;
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    if (o + phentsize > b.length) break; // the headers themselves are cut: expected covers them
    const off = is64 ? u64(o + 8) : u32(o + 4);
    const filesz = is64 ? u64(o + 32) : u32(o + 16);
    expected = Math.max(expected, off + filesz);
  }
  return b.length < expected ? { size: b.length, expected } : null;
}

function checkPath(path: string, what: string, dir: boolean): void {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CliError(what, 'no such file or directory');
    if (code === 'EACCES') throw new CliError(what, 'permission denied');
    throw new CliError(what, (e as Error).message);
  }
  if (dir && !st.isDirectory()) throw new CliError(what, 'not a directory');
  if (!dir && st.isDirectory()) throw new CliError(what, 'is a directory');
}

function readMaps(file: string): string {
  checkPath(file, file, false);
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(file, (e as Error).message);
  }
}

function load(d: Dwunw, LibError: typeof DwunwError, core: string, o: UnwindCoreOptions, maps: string | undefined): CoreLoad {
  try {
    return d.loadCore(core, { maps, exe: o.exe });
  } catch (e) {
    if (!(e instanceof LibError)) throw e;
    if (e.code === DWUNW_ERR_NOT_ELF) throw new CliError(core, 'not an ELF file');
    if (e.code === DWUNW_ERR_INVALID_ARG) throw new CliError(core, 'not a core file (ELF type is not ET_CORE)');
    if (e.code === DWUNW_ERR_UNSUPPORTED_ARCH) throw new CliError(core, `unsupported architecture (${describeElf(core)})`);
    throw new CliError(core, e.message);
  }
}

// ---- The command ---------------------------------------------------------------------------------

export async function unwindCore(core: string, o: UnwindCoreOptions): Promise<void> {
  if (!Number.isInteger(o.maxFrames) || o.maxFrames < 1 || o.maxFrames > 65536)
    throw new CliError('--max-frames', `not a number of frames (1-65536): ${o.maxFrames}`, ExitCode.USAGE);
  checkPath(core, core, false);
  const cut = coreTruncation(core);
  if (o.exe !== undefined) checkPath(o.exe, o.exe, false);
  if (o.sysroot !== undefined) checkPath(o.sysroot, o.sysroot, true);
  const maps = o.maps !== undefined ? readMaps(o.maps) : undefined;
  const warnings = new Warnings();
  const warn = warnings.warn;

  // Offline: nothing is read from a process of this machine, whatever the core's pid.
  // An absolute sysroot: module paths (sysroot + the maps' path) read the same from anywhere.
  const sysroot = o.sysroot !== undefined ? resolve(o.sysroot) : null;
  // the library (koffi) only now: --help and usage errors do without it
  const { Dwunw, DwunwError } = await import('../lib/dwunw.js');
  const d = new Dwunw({ flags: DWUNW_CFG_NO_REMOTE_READS, sysroot, warn });
  try {
    const c = load(d, DwunwError, core, o, maps);
    if (c.status === DWUNW_ERR_CORRUPT) warn(`dwunw: ${core}: malformed or truncated core: unwinding what could be read`);
    if (maps === undefined && !(c.flags & DWUNW_CORE_NT_FILE))
      warn(`dwunw: ${core}: no NT_FILE note (a qemu guest core?) and no --maps: modules are unknown`);
    if (c.exe !== null && o.exe === undefined) {
      const path = `${sysroot ?? ''}${c.exe.replace(/ \(deleted\)$/, '')}`;
      try {
        statSync(path);
      } catch {
        warn(`dwunw: ${core}: the executable ${path} is not here: give it with --exe`);
      }
    }

    const arch = Dwunw.arch(c.arch);
    const addrSize = arch?.addr_size ?? 8;
    const colors = colorsFor(process.stdout);
    const out = new ChunkedWriter();
    const report: ProcessReport = { pid: c.corePid, comm: c.comm, threads: [] };
    // The first thread took the fatal signal (a kernel core repeats it in every thread's note).
    const signals = c.threads.map((t, i) => (i === 0 ? signalName(c.arch, t.signo) : null));
    if (!o.json) await out.write(`${processHeader(report, colors)}\n`);
    const seen = new Set<Mark>();
    // CPython: its frames from the core's memory, merged as unwind-pid merges them
    const py = c.pid > 0 ? d.findPython(c.pid) : { rt: null, why: null };
    if (py.why) warn(`dwunw: ${core}: ${py.why}`);
    for (const [i, t] of c.threads.entries()) {
      const u = d.unwind({ pid: c.pid, tid: t.tid, regs: t.regs, stack: null }, o.maxFrames);
      const ps = py.rt ? d.pythonStack(py.rt, t.tid) : null;
      // Only the main thread's name is in the core (NT_PRPSINFO).
      const tr: ThreadReport = {
        tid: t.tid,
        comm: t.tid === c.corePid ? c.comm : null,
        ...u,
        addrSize,
        ...(py.rt && ps ? { python: { stack: ps, placement: placePython(u.frames, ps, py.rt) } } : {}),
      };
      report.threads.push(tr);
      if (!o.json) {
        const lines = threadText(tr, colors, { lines: o.lines, seen }).split('\n');
        const sig = signals[i];
        if (sig) lines[0] = colors.bold(`Thread ${tr.tid}${tr.comm !== null ? ` (${tr.comm})` : ''} [${sig}]:`);
        await out.write(`${i === 0 ? '' : '\n'}${lines.join('\n')}`);
      }
    }
    const legend = legendLine(seen);
    if (!o.json && legend) await out.write(`\n${legend}\n`);
    if (o.json) {
      const j = processJson(report);
      const json = {
        pid: j.pid,
        comm: j.comm,
        signal: signals[0] ?? null,
        threads: report.threads.map((t, i) => ({ ...threadJson(t), signal: signals[i] ?? null })),
      };
      await out.write(`${JSON.stringify(json, null, 1)}\n`);
    }
    await out.flush();
    // what could be unwound is above; the exit status says it is not the whole story
    if (cut) {
      throw new CliError(core, `truncated core (${cut.size} of ${cut.expected} bytes): the stacks above are what could be unwound`, ExitCode.TRUNCATED);
    }
  } finally {
    warnings.flush(sysroot ?? undefined);
    d.close();
  }
}
