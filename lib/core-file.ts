// Core files, read for dwunw unwind-core (commands/unwind-core.ts prints): the signal names of the
// core's architecture, what an ELF header says for an "unsupported" message, a core cut short,
// the paths given checked, and the core loaded into a context with the library's refusals named.
import { readFileSync, statSync } from 'node:fs';
import type { CoreLoad, Dwunw, DwunwError } from './dwunw.js';
import {
  DWUNW_ARCH_MIPS32,
  DWUNW_ERR_INVALID_ARG,
  DWUNW_ERR_NOT_ELF,
  DWUNW_ERR_UNSUPPORTED_ARCH,
} from './native-consts.js';
import { CliError } from './errors.js';

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
export function describeElf(file: string): string {
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

export function checkPath(path: string, what: string, dir: boolean): void {
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

export function readMaps(file: string): string {
  checkPath(file, file, false);
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(file, (e as Error).message);
  }
}

/** Load the core into the context; the library's refusals become one line naming the cause. */
export function loadCore(d: Dwunw, LibError: typeof DwunwError, core: string, o: { maps?: string; exe?: string }): CoreLoad {
  try {
    return d.loadCore(core, { maps: o.maps, exe: o.exe });
  } catch (e) {
    if (!(e instanceof LibError)) throw e;
    if (e.code === DWUNW_ERR_NOT_ELF) throw new CliError(core, 'not an ELF file');
    if (e.code === DWUNW_ERR_INVALID_ARG) throw new CliError(core, 'not a core file (ELF type is not ET_CORE)');
    if (e.code === DWUNW_ERR_UNSUPPORTED_ARCH) throw new CliError(core, `unsupported architecture (${describeElf(core)})`);
    throw new CliError(core, e.message);
  }
}
