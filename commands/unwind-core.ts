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
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { DEFAULT_MAX_FRAMES } from '../lib/defaults.js';
import { checkPath, coreTruncation, loadCore, readMaps, signalName } from '../lib/core-file.js';
import { DWUNW_CFG_NO_REMOTE_READS, DWUNW_CORE_NT_FILE, DWUNW_ERR_CORRUPT } from '../lib/native-consts.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor } from '../lib/output.js';
import { Warnings } from '../lib/warnings.js';
import type { Mark } from '../lib/marks.js';
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
  const { placePython } = await import('../lib/python.js');
  const { legendLine } = await import('../lib/marks.js');
  const d = new Dwunw({ flags: DWUNW_CFG_NO_REMOTE_READS, sysroot, warn });
  try {
    const c = loadCore(d, DwunwError, core, { maps, exe: o.exe });
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
