// A mapped library truncated and rewritten in place while it is being unwound through. libdwunw
// reads a module's file by range (pread) when it needs it, never through a mapping of it, so a
// file that shrinks or changes under it can only give an error code or a table read again from
// the new file; never SIGBUS in the tool. The target is `sleep` run on a private copy of libc
// (LD_LIBRARY_PATH), stopped (SIGSTOP) so that it does not run on pages its file no longer has;
// one context unwinds it again and again (a changed file is reloaded: the module cache's identity
// check), between the rewrites and while another process rewrites the file in a loop.
//
// Needs ptrace (root or CAP_SYS_PTRACE) and x86_64.
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, truncateSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { Dwunw, type ThreadCapture } from '../lib/dwunw.js';
import * as N from '../lib/native.js';
import { requireOrSkip } from './helpers.js';

const libc = '/lib/x86_64-linux-gnu/libc.so.6';
const dir = mkdtempSync(join(tmpdir(), 'dwunw-rewrite-'));
const copy = join(dir, 'libc.so.6');
const original = readFileSync(libc);
copyFileSync(libc, copy);

let target: ChildProcess | null = null;
let mutator: ChildProcess | null = null;
t.teardown(() => {
  mutator?.kill('SIGKILL');
  target?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Write the original bytes back in place (same inode: what `cp` over a file does). */
function restore(): void {
  const fd = openSync(copy, 'r+');
  try {
    writeSync(fd, original, 0, original.length, 0);
  } finally {
    closeSync(fd);
  }
  truncateSync(copy, original.length);
}

/** [offset, size] of a section, from the ELF's own section headers (64-bit little-endian). */
function section(buf: Buffer, name: string): [number, number] {
  const shoff = Number(buf.readBigUInt64LE(0x28));
  const shentsize = buf.readUInt16LE(0x3a);
  const shnum = buf.readUInt16LE(0x3c);
  const shstrndx = buf.readUInt16LE(0x3e);
  const strOff = Number(buf.readBigUInt64LE(shoff + shstrndx * shentsize + 0x18));
  for (let i = 0; i < shnum; i++) {
    const h = shoff + i * shentsize;
    const n = buf.readUInt32LE(h);
    const end = buf.indexOf(0, strOff + n);
    if (buf.toString('latin1', strOff + n, end) === name)
      return [Number(buf.readBigUInt64LE(h + 0x18)), Number(buf.readBigUInt64LE(h + 0x20))];
  }
  throw new Error(`no ${name}`);
}

/** Overwrite [off, off+len) of the copy in place with a byte pattern. */
function scribble(off: number, len: number, byte: number): void {
  const fd = openSync(copy, 'r+');
  try {
    writeSync(fd, Buffer.alloc(len, byte), 0, len, off);
  } finally {
    closeSync(fd);
  }
}

const pcs = (c: ThreadCapture): string => c.frames.map((f) => f.pc.toString(16)).join(' ');

/** A result the library may give for a file changed under it: an error code or a walk. */
function sane(t: Test, c: ThreadCapture, what: string): void {
  t.ok(c.attached && !c.exited, `${what}: the target was read`);
  t.ok(Number.isInteger(c.stop) && c.stop <= 0 && c.stop >= N.DWUNW_ERR_LIVE_END, `${what}: stop is DWUNW_OK or a DWUNW_ERR_* (${c.stopName})`);
  t.ok(c.frames.length >= 1, `${what}: at least the first frame (${c.frames.length})`);
}

t.test('unwinding through a library truncated and rewritten in place', async (t) => {
  if (process.arch !== 'x64') return requireOrSkip(t, 'a library rewritten in place', 'x86_64 only (the target runs on the host libc copy)');
  target = spawn('/usr/bin/sleep', ['600'], { env: { ...process.env, LD_LIBRARY_PATH: dir }, stdio: 'ignore' });
  const pid = target.pid!;
  // Wait until the copy is mapped and the process sleeps in it.
  for (let i = 0; i < 200; i++) {
    const maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (maps.includes(copy) && / S /.test(stat)) break;
    await sleep(50);
  }
  t.match(readFileSync(`/proc/${pid}/maps`, 'utf8'), copy, 'the target maps the copy');
  // Stopped, it never executes code whose file pages the rewrites take away.
  process.kill(pid, 'SIGSTOP');

  const d = new Dwunw({ cacheSlots: 8 });
  t.teardown(() => d.close());
  const base = await d.captureThread(pid, pid);
  t.equal(base.stopName, 'OK', 'before any rewrite: the walk reaches the outermost frame');
  t.ok(base.frames.some((f) => f.module === copy), 'frames in the copy');
  const main = base.frames.filter((f) => f.module === copy).map((f) => f.symbol?.name ?? '');
  t.ok(main.some((n) => /nanosleep/.test(n)), `symbols from the copy (${main.join(', ')})`);

  const [ehOff, ehSize] = section(original, '.eh_frame');
  const [symOff, symSize] = section(original, '.dynsym');
  const steps: [string, () => void][] = [
    ['truncated to 0 bytes', () => truncateSync(copy, 0)],
    ['rewritten whole', restore],
    ['truncated to half', () => truncateSync(copy, original.length >> 1)],
    ['rewritten whole again', restore],
    ['.eh_frame zeroed in place', () => scribble(ehOff, ehSize, 0)],
    ['.eh_frame filled with 0xff in place', () => scribble(ehOff, ehSize, 0xff)],
    ['.dynsym zeroed in place', () => scribble(symOff, symSize, 0)],
    ['ELF header scribbled in place', () => scribble(0, 64, 0x5a)],
    ['truncated to one page', () => truncateSync(copy, 4096)],
    ['rewritten whole at the end', restore],
  ];
  for (const [what, change] of steps) {
    change();
    const c = await d.captureThread(pid, pid);
    sane(t, c, what);
    if (what.startsWith('rewritten'))
      t.equal(pcs(c), pcs(base), `${what}: the same frames as before any rewrite`);
  }

  // While another process truncates and rewrites the file as fast as it can.
  mutator = spawn(
    process.execPath,
    [
      '-e',
      `const fs = require('fs'); const [src, dst] = process.argv.slice(1); const b = fs.readFileSync(src);
       for (;;) { fs.truncateSync(dst, 0); const fd = fs.openSync(dst, 'r+'); fs.writeSync(fd, b, 0, b.length >> 1, 0);
         fs.writeSync(fd, b, b.length >> 1, b.length - (b.length >> 1), b.length >> 1); fs.closeSync(fd); }`,
      libc,
      copy,
    ],
    { stdio: 'ignore', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  const stops = new Map<string, number>();
  for (let i = 0; i < 30; i++) {
    const c = await d.captureThread(pid, pid);
    sane(t, c, `concurrent rewrite ${i}`);
    stops.set(c.stopName, (stops.get(c.stopName) ?? 0) + 1);
  }
  mutator.kill('SIGKILL');
  await new Promise((r) => mutator!.once('close', r));
  t.comment(`stops while the file was rewritten: ${[...stops].map(([k, v]) => `${k} ${v}`).join(', ')}`);
  restore();
  const end = await d.captureThread(pid, pid);
  t.equal(pcs(end), pcs(base), 'after the last rewrite: the same frames as before any');
  t.equal(end.stopName, 'OK', 'and the walk reaches the outermost frame');
});

t.test('a module holds its table and the bytes it read, not its file', async (t) => {
  const d = new Dwunw();
  t.teardown(() => d.close());
  const m = d.open(libc);
  t.teardown(() => m.close());
  const before = m.memory();
  t.equal(before.table, 0, 'nothing built before the table is asked for');
  const info = m.tableInfo();
  const mem = m.memory();
  const [, ehSize] = section(original, '.eh_frame');
  t.equal(mem.table, info.bytes, 'table: the table info\'s bytes');
  t.equal(mem.fileSize, original.length, 'file_size: the file\'s');
  t.ok(mem.elf >= ehSize, `file bytes read include .eh_frame (${mem.elf} >= ${ehSize})`);
  t.ok(mem.elf < original.length / 4, `file bytes read: a fraction of the file (${mem.elf} of ${original.length})`);
});
