// --lines in the tools (memleak, profile, offcputime): the source file:line of named frames, checked
// against binutils' addr2line and gdb's `info line` on the same module addresses. Fixtures built
// with -g (leaky, hot, waits) and glibc with libc6-dbg: every named frame has the line addr2line
// gives for its address (a return address: its call, address - 1), in glibc addr2line's or gdb's
// (checkLines says where they differ), and every named frame of the fixture's code has one (_start
// excepted: crt1's assembly has no line information). Text shows " at FILE:LINE", as unwind-pid
// --lines; the pprof from dwunw profile --lines --pprof carries the lines and the functions' file
// names; folded output alone is refused with --lines (names only); without --lines the JSON has
// no file field on native frames and no cost line is printed.
//
// Needs root and BPF: without them the tool checks are skipped with the reason, unless
// DWUNW_REQUIRE_BPF=1 (CI), which makes that a failure.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';
import t, { type Test } from 'tap';
import { bpfUnavailable, bpfDir, dwunw, fixturesX64, run, runSync, skipOrFail } from './helpers.js';
import { type PrEntry, type PrFrame, parseProfileJson } from '../lib/profile.js';
import type { MlReport } from '../lib/memleak.js';

const hot = join(fixturesX64, 'hot');
const leaky = join(fixturesX64, 'leaky');
const waits = join(fixturesX64, 'waits');
const tool = (name: string): string => join(bpfDir, name);

/** A named frame and where it is looked up: its module address, or (memleak) symbol+offset. */
interface At {
  f: PrFrame;
  /** addr2line's form: "0xADDR" or "SYMBOL+0xOFF" */
  q: string;
  /** gdb's: "*0xADDR" or "*'SYMBOL'+0xOFF" */
  g: string;
}

const atAddr = (f: PrFrame, a: number): At => ({ f, q: `0x${a.toString(16)}`, g: `*0x${a.toString(16)}` });

/** The named user frames of stacks (profile, offcputime: with module addresses; a return address
 * is looked up at its call, address - 1, an exact pc as it is). */
function named(stacks: { frames: PrFrame[]; maddr?: number[]; exact?: number[] }[]): At[] {
  const out: At[] = [];
  for (const s of stacks) {
    const exact = new Set(s.exact ?? [0]);
    s.frames.forEach((f, i) => {
      const m = s.maddr?.[i] ?? 0;
      if (f.symbol && f.module && m && f.origin !== 'python') out.push(atAddr(f, exact.has(i) ? m : m - 1));
    });
  }
  return out;
}

/** addr2line's FILE:LINE for each query of a module (one run per module). */
async function addr2line(module: string, qs: string[]): Promise<Map<string, string>> {
  const uniq = [...new Set(qs)];
  const r = await run('addr2line', ['-e', module, ...uniq], { timeoutMs: 120_000 });
  const lines = r.stdout.split('\n');
  const m = new Map<string, string>();
  // "FILE:LINE", "FILE:LINE (discriminator N)", "??:0" or "??:?" when unknown
  uniq.forEach((q, i) => m.set(q, (lines[i] ?? '').replace(/ \(discriminator \d+\)$/, '')));
  return m;
}

/** gdb's `info line` for each location of a module (one batch per module): file (as gdb names
 * it, relative to the compilation directory) and line, or null when it has none. */
async function gdbLines(module: string, gs: string[]): Promise<Map<string, { file: string; line: number } | null>> {
  const uniq = [...new Set(gs)];
  const args = ['-nx', '-batch', ...uniq.flatMap((g, i) => ['-ex', `echo @@${i}\\n`, '-ex', `info line ${g}`]), module];
  const r = await run('gdb', args, { timeoutMs: 300_000 });
  const m = new Map<string, { file: string; line: number } | null>();
  for (const part of r.stdout.split('@@').slice(1)) {
    const i = Number(/^\d+/.exec(part)?.[0]);
    const x = /Line (\d+) of "([^"]+)"/.exec(part);
    m.set(uniq[i]!, x ? { file: x[2]!, line: Number(x[1]) } : null);
  }
  return m;
}

/**
 * Every frame's file:line against two oracles for the same address: binutils' addr2line and gdb's
 * `info line` (the same line, and our path ends with gdb's, which is relative to the compilation
 * directory). In the fixture's own modules (`own`) addr2line's answer must be ours exactly; in
 * glibc one of the two must agree: on its DWARF 5 they differ from each other (addr2line 2.40
 * names the CU's file for rows of file 0, where gdb and elfutils name the header; where rows of
 * several lines share an address, gdb takes the first, addr2line and elfutils the last, as
 * libdwunw does). addr2line joins a relative directory twice ("./nptl/./nptl/x.c", as elfutils
 * does; gdb: "./nptl/x.c"): undone before comparing. Every named frame of `own`
 * must have a line, but _start (crt1's assembly has no line information) and PLT stubs
 * (name@plt, named from the relocations; addr2line has no line there either).
 */
async function checkLines(tt: Test, what: string, frames: At[], own: RegExp): Promise<void> {
  const byModule = new Map<string, At[]>();
  for (const a of frames) (byModule.get(a.f.module!) ?? byModule.set(a.f.module!, []).get(a.f.module!)!).push(a);
  let compared = 0;
  let ofOwn = 0;
  const wrong: string[] = [];
  const missing: string[] = [];
  for (const [module, v] of byModule) {
    const mine = own.test(module);
    const gdb = await gdbLines(module, v.map((a) => a.g));
    const a2l = await addr2line(module, v.map((a) => a.q));
    for (const a of v) {
      const got = a.f.file ? `${a.f.file}:${a.f.line ?? 0}` : null;
      const g = gdb.get(a.g) ?? null;
      // its doubled relative directory undone: "./libio/./libio/x.c" -> "./libio/x.c"
      const want = (a2l.get(a.q) ?? '').replace(/^(\.\/([^/]+)\/)\.\/\2\//, '$1');
      const a2lNone = /^\?\?:|:0$|:\?$/.test(want);
      const a2lSame = got !== null ? got === want : a2lNone;
      const gdbSame = got !== null ? g !== null && g.line === (a.f.line ?? 0) && a.f.file!.endsWith(g.file.replace(/^(\.\/)+/, '')) : g === null;
      if (got !== null) compared++;
      if (mine) ofOwn++;
      if (mine ? !a2lSame : !a2lSame && !gdbSame)
        wrong.push(`${a.f.symbol} ${module} ${a.q}: ${got ?? 'no line'}; addr2line ${want}; gdb ${g ? `${g.file}:${g.line}` : 'none'}`);
      // a PLT stub's name (name@plt) is made from the relocations: no source line to have
      if (mine && got === null && a.f.symbol !== '_start' && !a.f.symbol?.endsWith('@plt')) missing.push(`${a.f.symbol} ${a.q}`);
    }
  }
  tt.ok(compared > 0 && ofOwn > 0, `${what}: frames with a line (${compared}), of the fixture (${ofOwn})`);
  tt.same(wrong.slice(0, 10), [], `${what}: every line is addr2line's (in glibc: addr2line's or gdb's) for the same address (${compared} frames, ${byModule.size} modules)`);
  tt.same([...new Set(missing)].slice(0, 10), [], `${what}: every named frame of the fixture (-g) has a line`);
}

t.test('usage: --lines with folded output only is refused (one line, exit 2)', async (tt) => {
  for (const [name, args] of [['memleak', ['--folded', '--lines', '-p', '1']], ['profile', ['-f', '--lines']], ['offcputime', ['-f', '--lines']]] as const) {
    const r = await run(tool(name), [...args], { timeoutMs: 30_000 });
    tt.equal(r.status, 2, `${name}: exit status 2`);
    tt.match(r.stderr, new RegExp(`^${name}: --lines is for text and JSON (output|reports) \\(folded lines carry names only\\) \\(see dwunw ${name} --help\\)\\n$`), `${name}: ${r.stderr.trim()}`);
    const h = runSync(tool(name), ['--help']);
    tt.match(h.stdout, /^\s+--lines\s+the source file:line of each named/m, `${name} --help lists --lines`);
  }
});

const why = bpfUnavailable('the tools need CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [
  [tool('profile'), 'make bpf'],
  [hot, 'make fixtures'],
  [leaky, 'make fixtures'],
  [waits, 'make fixtures'],
]);
if (why) {
  skipOrFail(t, why, '--lines checks skipped');
} else {
  t.test('profile --lines --json: lines as addr2line gives them; the pprof carries them', async (tt) => {
    const r = await run(tool('profile'), ['-U', '-F', '499', '--unwind=dwarf', '--json', '--lines', '--', hot, '2'], { timeoutMs: 120_000 });
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const out = parseProfileJson(r.stdout);
    const frames = named(out.entries.map((e) => e.user).filter((u): u is NonNullable<PrEntry['user']> => u !== null));
    await checkLines(tt, 'profile', frames, /\/(hot|libhot\.so)$/);
    tt.match(r.stderr, /^profile: lines: \d+ addresses looked up \(\d+ with a line\) for \d+ frames: [\d.]+ ms of CPU$/m, 'the cost line');
    // the pprof through the CLI (profile --json under it), and text
    const dir = mkdtempSync(join(tmpdir(), 'dwunw-lines-'));
    try {
      const pb = join(dir, 'p.pb.gz');
      const p = await dwunw(['profile', '-U', '-F', '499', '--unwind=dwarf', '--lines', '--pprof', pb, '--', hot, '1'], { timeoutMs: 120_000 });
      tt.equal(p.status, 0, `dwunw profile --pprof: exit status 0 ${p.stderr.slice(-300)}`);
      const prof = Profile.decode(gunzipSync(readFileSync(pb)));
      const str = (i: number | bigint): string => prof.stringTable.strings[Number(i)] ?? '';
      const fn = new Map(prof.function.map((f) => [Number(f.id), f]));
      const chain = prof.location.flatMap((l) => l.line).filter((l) => str(fn.get(Number(l.functionId))?.name ?? 0) === 'chain_plain');
      tt.ok(chain.length > 0 && chain.every((l) => Number(l.line) > 0), `chain_plain's locations have lines (${chain.map((l) => l.line).join(',')})`);
      tt.ok(chain.every((l) => str(fn.get(Number(l.functionId))!.filename).endsWith('/fixtures/x86_64/hot.c')), 'and its function the file hot.c');
      const hotMap = prof.mapping.find((m) => str(m.filename) === hot);
      tt.ok(hotMap?.hasLineNumbers && hotMap.hasFilenames, 'hot\'s mapping says it has file names and lines');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const txt = await run(tool('profile'), ['-U', '-F', '499', '--unwind=dwarf', '--lines', '--', hot, '1'], { timeoutMs: 120_000 });
    tt.equal(txt.status, 0, 'text: exit status 0');
    tt.match(txt.stdout, /^ {4}chain_plain at \/\S+\/fixtures\/x86_64\/hot\.c:\d+$/m, 'text: "    chain_plain at .../hot.c:N"');
  });

  t.test('memleak --lines: lines as addr2line gives them; text " at FILE:LINE"', async (tt) => {
    const r = await run(tool('memleak'), ['--unwind=dwarf', '--json', '--lines', '--top=100', '-c', `${leaky} 2`, '600'], { timeoutMs: 180_000 });
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const reports = r.stdout.split('\n').filter((l) => l.startsWith('{"time":')).map((l) => JSON.parse(l) as MlReport);
    const last = reports[reports.length - 1];
    if (!last) return void tt.fail(`no report in ${r.stdout.slice(-300)}`);
    // memleak's JSON has no module addresses: addr2line is asked for symbol+offset (every frame
    // a return address: the allocator's own frame is not shown)
    const frames: At[] = last.stacks
      .filter((s) => s.kind === 'dwarf')
      .flatMap((s) => s.frames)
      .filter((f) => f.symbol && f.module && f.offset > 0)
      .map((f) => ({ f: f as PrFrame, q: `${f.symbol}+0x${(f.offset - 1).toString(16)}`, g: `*'${f.symbol}'+0x${(f.offset - 1).toString(16)}` }));
    await checkLines(tt, 'memleak', frames, /\/leaky$/);
    tt.match(r.stderr, /^memleak: lines: \d+ addresses looked up \(\d+ with a line\) for \d+ frames: [\d.]+ ms of CPU$/m, 'the cost line');
    const txt = await run(tool('memleak'), ['--unwind=dwarf', '--lines', '-c', `${leaky} 1`, '600'], { timeoutMs: 180_000 });
    tt.equal(txt.status, 0, 'text: exit status 0');
    tt.match(txt.stdout, /^\t\d+ \[<[0-9a-f]{16}>\] big_2\+0x[0-9a-f]+ \[\S+\/leaky\] at \/\S+\/fixtures\/x86_64\/leaky\.c:\d+$/m, 'text: big_2 with its file:line');
  });

  t.test('offcputime --lines --json: lines as addr2line gives them; none without --lines', async (tt) => {
    const args = ['--unwind=dwarf', '-U', '--json'];
    const prog = ['--', waits, '--mixed', '--rounds', '10', '--ms', '5'];
    const r = await run(tool('offcputime'), [...args, '--lines', ...prog], { timeoutMs: 120_000 });
    tt.equal(r.status, 0, `exit status 0 ${r.stderr.slice(-300)}`);
    const out = parseProfileJson(r.stdout);
    const frames = named(out.entries.map((e) => e.user).filter((u): u is NonNullable<PrEntry['user']> => u !== null));
    await checkLines(tt, 'offcputime', frames, /\/waits$/);
    tt.ok(frames.some((a) => a.f.symbol === 'chain_mixed' && a.f.file?.endsWith('/fixtures/x86_64/waits.c')), 'chain_mixed in waits.c');
    const plain = await run(tool('offcputime'), [...args, ...prog], { timeoutMs: 120_000 });
    tt.equal(plain.status, 0, 'without --lines: exit status 0');
    const p = parseProfileJson(plain.stdout);
    const nat = p.entries.flatMap((e) => e.user?.frames ?? []).filter((f) => f.origin !== 'python');
    tt.ok(nat.length > 0 && nat.every((f) => !('file' in f)), `without --lines: no file on native frames (${nat.length} frames)`);
    tt.notMatch(plain.stderr, /lines: \d+ addresses/, 'and no cost line');
  });
}
