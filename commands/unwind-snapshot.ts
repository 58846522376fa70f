// dwunw unwind-snapshot FILE [--json] [--lines] [--max-frames N] [--sysroot DIR]: unwind a
// snapshot offline (no process is read): dwunw_maps_set(pid, maps), the vDSO image (if any) with
// dwunw_module_open_image(ctx, "[vdso]", bytes), then dwunw_capture of each thread's registers and
// stack bytes. Output as for unwind-pid.
//
// The snapshot file, "dwunw-snapshot-1" (written by `dwunw unwind-pid --save FILE`; any tool, e.g.
// a gdb script, may write it too). One JSON object:
//
//   {
//     "format": "dwunw-snapshot-1",
//     "arch": "x86_64",                 // the library's name: "x86_64", "arm64" or "mips32"
//     "pid": 1234,                      // > 0; only names the maps (nothing is read from it)
//     "comm": "sleep",                  // optional
//     "threads": [
//       {
//         "tid": 1234,
//         "comm": "sleep",              // optional
//         "pc": "0x7f6955108bd3",       // exact pc of frame 0
//         "regs": {"6": "0x…", "7": "0x7ffd5b1c9a38", …},
//                                       // DWARF register number -> value, hex strings ("0x…");
//                                       // only registers that hold a value (x86_64: 0-16,
//                                       // 7 = rsp, 6 = rbp, 16 = rip)
//         "stack_start": "0x7ffd5b1c9a38", // address of the first stack byte (normally the sp)
//         "stack": "<base64>"           // a copy of memory from stack_start up; "" for none
//       }
//     ],
//     "maps": "<text of /proc/PID/maps>", // read at the time of the snapshot
//     "sysroot": null,                  // or a directory prefixed to the maps' file paths
//     "vdso": "<base64>"                // optional: the bytes of the maps' [vdso] mapping (an ELF
//                                       // image, its whole start-end range), read at the time
//   }
//
// The module files named by the maps are read from this machine (under sysroot, or --sysroot),
// so they must be the files the process had mapped. The vDSO is not a file: without "vdso", a
// frame in it has no module and the walk stops there (NO_MODULE). Memory outside the stack copy
// and the "memory" regions is not available offline: a walk that needs it stops there (dwunw
// unwind-pid would have read it live and marked the frame +mem).
import { readFileSync, statSync } from 'node:fs';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { DEFAULT_MAX_FRAMES, VDSO_NAME } from '../lib/defaults.js';
import type { Module } from '../lib/dwunw.js';
import { DWUNW_CFG_NO_REMOTE_READS } from '../lib/native-consts.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor } from '../lib/output.js';
import { type Snapshot, SnapshotError, parseSnapshot } from '../lib/snapshot.js';
import type { Mark } from '../lib/marks.js';
import { type ProcessReport, processHeader, processJson, threadText } from '../lib/stacks.js';

// Option names as given (yargs also provides them camelCased to the handler).
interface Args {
  file: string;
  json: boolean;
  lines: boolean;
  'max-frames': number;
  sysroot?: string;
}

export const command = 'unwind-snapshot <file>';
export const describe = 'Unwind a snapshot saved by unwind-pid --save, offline';

export function builder(y: Argv): Argv<Args> {
  return y
    .positional('file', { type: 'string', demandOption: true, describe: 'Snapshot file (format dwunw-snapshot-1)' })
    .option('json', { type: 'boolean', default: false, describe: 'Print JSON, as unwind-pid --json' })
    .option('lines', { type: 'boolean', default: false, describe: 'Show the source file:line of each frame when known' })
    .option('max-frames', { type: 'number', default: DEFAULT_MAX_FRAMES, requiresArg: true, describe: 'Stop after this many frames' })
    .option('sysroot', { type: 'string', requiresArg: true, describe: 'Read module files under this directory (overrides the file\'s sysroot)' })
    .example('$0 unwind-pid 1234 --save snap.json && $0 unwind-snapshot snap.json', 'save, then unwind offline');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await unwindSnapshot(argv.file, { json: argv.json, lines: argv.lines, maxFrames: argv.maxFrames, sysroot: argv.sysroot });
}

function readSnapshot(file: string, archOf: (name: string) => number | null): Snapshot {
  let text: string;
  try {
    if (statSync(file).isDirectory()) throw new CliError(file, 'is a directory');
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if (e instanceof CliError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CliError(file, 'no such file or directory');
    if (code === 'EACCES') throw new CliError(file, 'permission denied');
    throw new CliError(file, (e as Error).message);
  }
  try {
    return parseSnapshot(text, archOf);
  } catch (e) {
    if (e instanceof SnapshotError) throw new CliError(file, `not a dwunw snapshot: ${e.message}`);
    throw e;
  }
}

export async function unwindSnapshot(
  file: string,
  o: { json: boolean; lines: boolean; maxFrames: number; sysroot?: string },
): Promise<void> {
  if (!Number.isInteger(o.maxFrames) || o.maxFrames < 1 || o.maxFrames > 65536)
    throw new CliError('--max-frames', `not a number of frames (1-65536): ${o.maxFrames}`, ExitCode.USAGE);
  // the library (koffi) only now: --help and usage errors do without it
  const { Dwunw, DwunwError } = await import('../lib/dwunw.js');
  const { legendLine } = await import('../lib/marks.js');
  const snap = readSnapshot(file, (name) => Dwunw.archByName(name)?.arch ?? null);
  const addrSize = Dwunw.archByName(snap.arch)?.addr_size ?? 8;

  // Offline: the pid's maps come from the file and nothing is read from a process.
  const d = new Dwunw({
    flags: DWUNW_CFG_NO_REMOTE_READS,
    sysroot: o.sysroot ?? snap.sysroot,
    warn: (line) => process.stderr.write(`${line}\n`),
  });
  const c = colorsFor(process.stdout);
  const out = new ChunkedWriter();
  const report: ProcessReport = { pid: snap.pid, comm: snap.comm, threads: [] };
  // Held open until the end: an open module is never evicted from the cache.
  let vdso: Module | null = null;
  try {
    if (snap.threads.length > 0) {
      try {
        d.setMaps(snap.pid, snap.maps);
      } catch (e) {
        if (e instanceof DwunwError) throw new CliError(file, `maps: ${e.message}`);
        throw e;
      }
    }
    for (const [i, m] of snap.memory.entries()) {
      try {
        d.addMemory(snap.pid, m.start, m.bytes);
      } catch (e) {
        if (e instanceof DwunwError) throw new CliError(file, `memory[${i}]: ${e.message}`);
        throw e;
      }
    }
    if (snap.vdso !== null && snap.threads.length > 0) {
      try {
        vdso = d.openImage(VDSO_NAME, snap.vdso);
      } catch (e) {
        if (e instanceof DwunwError) throw new CliError(file, `vdso: ${e.message}`);
        throw e;
      }
    }
    if (!o.json) await out.write(`${processHeader(report, c)}\n`);
    let first = true;
    const seen = new Set<Mark>();
    for (const t of snap.threads) {
      const u = d.unwind({ pid: snap.pid, tid: t.tid, regs: t.regs, stack: t.stack }, o.maxFrames);
      const tr = { tid: t.tid, comm: t.comm, ...u, addrSize };
      report.threads.push(tr);
      if (!o.json) await out.write(`${first ? '' : '\n'}${threadText(tr, c, { lines: o.lines, seen })}`);
      first = false;
    }
    const legend = legendLine(seen);
    if (!o.json && legend) await out.write(`\n${legend}\n`);
    if (o.json) await out.write(`${JSON.stringify(processJson(report), null, 1)}\n`);
    await out.flush();
  } finally {
    vdso?.close();
    d.close();
  }
}
