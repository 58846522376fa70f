// Running the fixtures of `dwunw verify` under a debugger: one "session" is one run of a fixture
// program with gdb driving test/oracle/gdb_snapshot.py, which stops at the session's breakpoints
// and writes, per stop, a dwunw-snapshot-1 file (registers, stack, maps) and gdb's frames of the
// same stop (the oracle). x86_64 runs natively under gdb; arm64 and mips32 run under qemu-user
// with its gdbstub (qemu-ARCH -g PORT), driven by gdb-multiarch.
//
// Rules of the gdbstub: it accepts exactly one connection (nothing may probe the port before gdb
// connects: the guest would then run to its end), gdb retries its connection until qemu listens,
// and every process started here is killed when the session ends.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseMaps } from './dwunw.js';
import { type Exit, runCommand, startCommand } from './run-command.js';

export interface Breakpoint {
  name: string;
  spec?: string;
  module_addr?: string;
  at_expr?: string;
  signal?: string;
  hit?: number;
  after?: string;
  steps?: { enter?: number; max?: number };
  /** verify only (the gdb script ignores it): take gdb's frames after frame 0 from this stop. */
  oracle_from?: string;
}

export interface SessionSpec {
  /** Program to run (the fixture). */
  program: string;
  /** Its arguments; the literal "{maps}" is replaced by the session's maps file. */
  args: string[];
  breakpoints: Breakpoint[];
  /** qemu-user binary (qemu-aarch64, ...) or null: run natively under gdb. */
  qemu: string | null;
  /** qemu -cpu (null: qemu's default). */
  cpu: string | null;
  /** The guest's root (/usr/aarch64-linux-gnu) for qemu -L and gdb's sysroot. */
  sysroot: string | null;
  /** At most this many gdb frames per stop (a run whose gdb frames are not the oracle: gdb may
   * loop on code without CFI), or undefined: the script's own limit. */
  maxFrames?: number;
  /** gdb binary: gdb natively, gdb-multiarch for qemu guests. */
  gdb: string;
  /** test/oracle/gdb_snapshot.py */
  script: string;
  /** Directory for this run's files (created). */
  out: string;
  timeoutSec: number;
}

export interface SnapshotIndex {
  snapshots: Array<{ name: string; tid: number; pc: string; steps: number; snapshot: string; frames: string }>;
  missing: string[];
  errors: string[];
}

export interface SessionRun {
  index: SnapshotIndex | null;
  /** Why the run produced no index (gdb's exit and the tail of its output). */
  failure: string | null;
  ms: number;
}

/** A TCP port nothing listens on now (the kernel's choice for port 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** The environment for gdb: no debuginfod, no inherited Python path surprises. */
function gdbEnv(config: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DWUNW_SNAPSHOT_CONFIG: config };
  delete env.DEBUGINFOD_URLS;
  return env;
}

/** One run of a program under gdb (and qemu): the snapshots of its breakpoints. */
export async function runSession(s: SessionSpec): Promise<SessionRun> {
  const t0 = Date.now();
  mkdirSync(s.out, { recursive: true });
  const maps = join(s.out, 'maps.txt');
  const args = s.args.map((a) => (a === '{maps}' ? maps : a));
  const config = join(s.out, 'config.json');
  const cfg: Record<string, unknown> = { program: s.program, args, out: s.out, breakpoints: s.breakpoints };
  if (s.maxFrames) cfg.max_frames = s.maxFrames;
  let qemu: ReturnType<typeof startCommand> | null = null;
  if (s.qemu) {
    const port = await freePort();
    Object.assign(cfg, { remote: `127.0.0.1:${port}`, sysroot: s.sysroot, maps_file: maps });
    const qargs = [...(s.cpu ? ['-cpu', s.cpu] : []), ...(s.sysroot ? ['-L', s.sysroot] : []), '-g', String(port), s.program, ...args];
    qemu = startCommand(s.qemu, qargs);
  }
  writeFileSync(config, JSON.stringify(cfg));
  const gdbArgs = [
    '-k', '5', String(s.timeoutSec), s.gdb, '-q', '-nx', '-batch',
    '-iex', 'set auto-load python-scripts off',
    '-iex', 'set debuginfod enabled off',
    '-iex', 'set tcp connect-timeout 30',
    '-x', s.script,
  ];
  let g: Exit;
  try {
    g = await runCommand('timeout', gdbArgs, (s.timeoutSec + 10) * 1000, gdbEnv(config));
  } finally {
    if (qemu) {
      if (qemu.child.exitCode === null && qemu.child.signalCode === null) qemu.child.kill('SIGKILL');
      await qemu.done;
    }
  }
  const indexFile = join(s.out, 'index.json');
  if (!existsSync(indexFile)) {
    const tail = `${g.stderr.slice(-1500)}${g.stdout.slice(-1500)}`.trim();
    return { index: null, failure: `gdb exit ${g.code ?? g.signal}, no index.json: ${tail}`, ms: Date.now() - t0 };
  }
  const foreign = s.qemu && s.sysroot && existsSync(maps) ? libsOutside(readFileSync(maps, 'utf8'), s.sysroot) : [];
  if (foreign.length > 0)
    return {
      index: null,
      failure: `the guest loaded ${foreign[0]}, outside gdb's sysroot ${s.sysroot}: gdb would read another file's CFI ` +
        '(a C library of the guest architecture installed on the host, e.g. libc6:arm64, enters ld.so.cache; doc/debugging.md §5)',
      ms: Date.now() - t0,
    };
  return { index: JSON.parse(readFileSync(indexFile, 'utf8')) as SnapshotIndex, failure: null, ms: Date.now() - t0 };
}

/** Shared libraries of a qemu guest's maps (host paths) that do not lie under the sysroot. */
export function libsOutside(mapsText: string, sysroot: string): string[] {
  const root = `${sysroot.replace(/\/+$/, '')}/`;
  const out = new Set<string>();
  for (const { path } of parseMaps(mapsText))
    if (/\.so(\.[\d.]+)?$/.test(path) && !path.startsWith(root)) out.add(path);
  return [...out];
}

/** Run jobs with at most `limit` at a time; results in order. */
export function pool<T>(jobs: Array<() => Promise<T>>, limit: number): Array<Promise<T>> {
  const results: Array<Promise<T>> = [];
  let running = 0;
  const queue: Array<() => void> = [];
  const next = (): void => {
    running--;
    queue.shift()?.();
  };
  for (const job of jobs) {
    results.push(
      new Promise<T>((resolve, reject) => {
        const go = (): void => {
          running++;
          job().then(
            (v) => {
              next();
              resolve(v);
            },
            (e: unknown) => {
              next();
              reject(e);
            },
          );
        };
        if (running < limit) go();
        else queue.push(go);
      }),
    );
  }
  return results;
}
