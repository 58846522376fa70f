// `dwunw dump-table` as a user runs it (node bin/dwunw): JSON and text output on the system libc,
// --pc, and every error path (one line on stderr, exit status 1, no stack trace). Comparing the
// rows with readelf is the oracle test's job; this one checks the CLI's behaviour.
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { cliEnv, dwunwBin as bin, dwunwSync, type Run } from './helpers.js';

const libc = '/lib/x86_64-linux-gnu/libc.so.6';

const dwunw = (args: string[], env: Record<string, string> = {}): Run => dwunwSync(args, { env: cliEnv(env) });

interface JsonRow {
  pc: string;
  cfa: string;
  regs: Record<string, string>;
}
interface JsonOut {
  file: string;
  arch: string;
  rows: JsonRow[];
  stats?: Record<string, number>;
}

/** Address of a dynamic symbol of libc (module address), from readelf. */
function symbolAddress(file: string, name: string): bigint {
  const out = execFileSync('readelf', ['-W', '--dyn-syms', file], { encoding: 'utf8' });
  for (const line of out.split('\n')) {
    const f = line.trim().split(/\s+/);
    // Num: Value Size Type Bind Vis Ndx Name
    if (f.length >= 8 && f[3] === 'FUNC' && f[7]!.replace(/@.*/, '') === name) return BigInt(`0x${f[1]}`);
  }
  throw new Error(`${name} not found in ${file}`);
}

/** [file offset, size] of a section, from readelf -SW. */
function sectionOffset(file: string, name: string): [number, number] {
  const out = execFileSync('readelf', ['-SW', file], { encoding: 'utf8' });
  for (const line of out.split('\n')) {
    const m = /\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(line);
    if (m && m[1] === name) return [parseInt(m[2]!, 16), parseInt(m[3]!, 16)];
  }
  throw new Error(`no ${name} in ${file}`);
}

/** One line on stderr, `dwunw: <file>: <cause>`, and no stack trace. */
function oneLineError(t: Test, r: Run, file: string, cause: RegExp, what = 'error'): void {
  t.equal(r.status, 1, `${what}: exit status 1`);
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  t.equal(lines.length, 1, `${what}: one line on stderr`, { stderr: r.stderr });
  t.ok(lines[0]?.startsWith(`dwunw: ${file}: `), `${what}: the line names the file`, { line: lines[0] });
  t.match(lines[0] ?? '', cause, `${what}: the cause`);
  t.notMatch(r.stderr, /^\s+at /m, `${what}: no stack trace`);
}

const ansi = /\x1b\[/;

t.test('--version names the CLI and the library', async (t) => {
  const r = dwunw(['--version']);
  t.equal(r.status, 0);
  t.match(r.stdout, /^dwunw \d+\.\d+\.\d+\nlibdwunw \d+\.\d+\.\d+\n$/);
});

t.test('usage errors are one line', async (t) => {
  for (const args of [[], ['dump-table'], ['no-such-command'], ['dump-table', libc, '--no-such-option']]) {
    const r = dwunw(args);
    t.equal(r.status, 2, `${args.join(' ')}: exit status 2 (usage)`);
    t.match(r.stderr, /^dwunw: usage: [^\n]+\n$/, `${args.join(' ')}: one line`);
  }
  const r = dwunw(['dump-table', libc, '--pc', 'not-an-address']);
  t.equal(r.status, 2, 'a bad option value is a usage error');
  t.equal(r.stderr, 'dwunw: --pc: not an address: not-an-address (see dwunw dump-table --help)\n');
});

// `dwunw dump-table FILE | head -1`: the reader goes away after the first bytes; dwunw stops at
// once, exit status 0, nothing on stderr (no EPIPE message), text and JSON alike.
t.test('output cut short by the reader (| head -1)', async (t) => {
  for (const args of [['dump-table', libc], ['dump-table', libc, '--json'], ['dump-table', '/usr/bin/node'], ['--help'], ['dump-table', '--help']]) {
    const env = cliEnv();
    // the shell's head: dwunw's stdout is a pipe whose reader exits after one line
    const b = spawnSync('bash', ['-c', `"$0" "$@" | head -1 >/dev/null; exit \${PIPESTATUS[0]}`, process.execPath, bin, ...args], { encoding: 'utf8', env });
    t.equal(b.status, 0, `${args.join(' ')}: dwunw's own exit status 0`);
    t.equal(b.stderr, '', `${args.join(' ')}: no EPIPE message`);
  }
});

t.test('--json on libc', async (t) => {
  const r = dwunw(['dump-table', libc, '--json']);
  t.equal(r.status, 0, 'exit status 0');
  t.equal(r.stderr, '', 'nothing on stderr');
  let j: JsonOut;
  try {
    j = JSON.parse(r.stdout) as JsonOut;
  } catch (e) {
    t.fail(`not valid JSON: ${(e as Error).message}`);
    return;
  }
  t.equal(j.file, libc, 'file');
  t.equal(j.arch, 'x86_64', 'arch');
  t.ok(Array.isArray(j.rows) && j.rows.length > 1000, `many rows (${j.rows?.length})`);
  if (j.stats) t.equal(j.stats.rows, j.rows.length, 'stats.rows is the number of rows');

  let sorted = true;
  let shapes = true;
  let ends = 0;
  let prev = -1n;
  for (const row of j.rows) {
    const pc = BigInt(row.pc);
    if (pc <= prev) sorted = false;
    prev = pc;
    if (!/^0x[0-9a-f]+$/.test(row.pc) || typeof row.cfa !== 'string' || typeof row.regs !== 'object') shapes = false;
    if (row.cfa === 'end') {
      ends++;
      if (Object.keys(row.regs).length !== 0) shapes = false;
    }
    for (const v of Object.values(row.regs)) if (typeof v !== 'string' || v === '') shapes = false;
  }
  t.ok(sorted, 'rows are sorted by pc, strictly');
  t.ok(shapes, 'every row is {pc: "0x…", cfa, regs: {name: rule}}; END rows have no regs');
  t.ok(ends > 0, 'END rows mark the gaps after FDEs');

  // At a function's first instruction the CFA is rsp+8 and the return address is at CFA-8.
  const start = symbolAddress(libc, '__libc_start_main');
  const first = j.rows.find((row) => BigInt(row.pc) === start);
  t.ok(first, `a row starts at __libc_start_main (0x${start.toString(16)})`);
  if (first) t.same(first, { pc: `0x${start.toString(16)}`, cfa: 'rsp+8', regs: { ra: 'c-8' } }, 'its entry row');
});

t.test('--pc on libc', async (t) => {
  const start = symbolAddress(libc, '__libc_start_main');
  const inside = start + 0x20n;
  const r = dwunw(['dump-table', libc, '--json', '--pc', `0x${inside.toString(16)}`]);
  t.equal(r.status, 0, 'exit status 0');
  t.equal(r.stderr, '');
  const j = JSON.parse(r.stdout) as JsonOut;
  t.equal(j.file, libc);
  t.equal(j.rows.length, 1, 'one row');
  const pc = BigInt(j.rows[0]!.pc);
  t.ok(pc >= start && pc <= inside, 'the row covering the address');
  t.not(j.rows[0]!.cfa, 'end');

  // The same address as nm prints it (hex, zero-padded, no 0x), and in decimal.
  for (const form of [inside.toString(16).padStart(16, '0'), inside.toString(10)]) {
    const r2 = dwunw(['dump-table', libc, '--json', '--pc', form]);
    t.same(JSON.parse(r2.stdout).rows, j.rows, `--pc ${form}`);
  }

  const text = dwunw(['dump-table', libc, '--pc', `0x${inside.toString(16)}`]);
  t.equal(text.status, 0);
  const lines = text.stdout.trimEnd().split('\n');
  t.equal(lines.length, 3, 'text: summary, column header, one row');
  t.match(lines[1], /^LOC\s+CFA\b/);
  t.match(lines[2], new RegExp(`^${pc.toString(16).padStart(16, '0')} `));

  const none = dwunw(['dump-table', libc, '--pc', '0x0']);
  t.equal(none.stdout, '');
  oneLineError(t, none, libc, /^dwunw: \S+: no CFI covers 0x0$/, 'address without CFI');
});

t.test('text output on libc', async (t) => {
  const r = dwunw(['dump-table', libc]);
  t.equal(r.status, 0, 'exit status 0');
  t.equal(r.stderr, '');
  t.notMatch(r.stdout, ansi, 'no colors when piped');
  const lines = r.stdout.split('\n');
  const esc = libc.replace(/[.]/g, '\\.');
  t.match(
    lines[0],
    new RegExp(`^${esc} \\(x86_64\\): \\d+ rows, \\d+ rules, \\d+\\.\\d bytes/row, built in \\d+\\.\\d\\d ms$`),
    'summary line',
  );
  const header = lines[1]!.split(/\s+/);
  t.same(header.slice(0, 2), ['LOC', 'CFA'], 'column header');
  t.ok(header.includes('ra'), 'the header has the ra column');
  const n = Number(/: (\d+) rows/.exec(lines[0]!)?.[1]);
  const rows = lines.slice(2).filter((l) => l !== '');
  t.equal(rows.length, n, 'one line per row');
  t.ok(
    rows.every((l) => /^[0-9a-f]{16} \S/.test(l)),
    'each row starts with a 16-digit pc',
  );
  t.ok(rows.some((l) => / end$/.test(l)), 'END rows');

  const colored = dwunw(['dump-table', libc, '--pc', '0x' + symbolAddress(libc, '__libc_start_main').toString(16)], {
    FORCE_COLOR: '1',
  });
  t.match(colored.stdout, ansi, 'FORCE_COLOR colors the output');
});

t.test('errors: one line, exit status 1', async (t) => {
  const dir = t.testdir({ 'notes.txt': 'just some text\n', 'prog.c': 'int main(void) { return 0; }\n' });
  mkdirSync(join(dir, 'adir'));
  execFileSync('gcc', ['-O2', '-o', join(dir, 'prog'), join(dir, 'prog.c')]);

  const missing = join(dir, 'no-such-file');
  oneLineError(t, dwunw(['dump-table', missing]), missing, /no such file/, 'missing file');
  oneLineError(t, dwunw(['dump-table', join(dir, 'adir')]), join(dir, 'adir'), /directory/, 'directory');
  oneLineError(t, dwunw(['dump-table', join(dir, 'notes.txt')]), join(dir, 'notes.txt'), /not an ELF file/, 'text file');
  oneLineError(
    t,
    dwunw(['dump-table', join(dir, 'notes.txt'), '--json']),
    join(dir, 'notes.txt'),
    /not an ELF file/,
    'text file, --json',
  );

  // An ELF without CFI.
  const nocfi = join(dir, 'prog-nocfi');
  execFileSync('objcopy', ['--remove-section=.eh_frame', '--remove-section=.eh_frame_hdr', join(dir, 'prog'), nocfi]);
  oneLineError(t, dwunw(['dump-table', nocfi]), nocfi, /no call-frame information/, 'ELF without CFI');

  // An ELF for a machine no backend handles (e_machine = EM_SPARC).
  const sparc = join(dir, 'prog-sparc');
  copyFileSync(join(dir, 'prog'), sparc);
  const fd = openSync(sparc, 'r+');
  writeSync(fd, Buffer.from([2, 0]), 0, 2, 18);
  closeSync(fd);
  oneLineError(t, dwunw(['dump-table', sparc]), sparc, /unsupported architecture/, 'unsupported architecture');

  // Corrupt CFI: the first CIE's version and augmentation bytes overwritten.
  const bad = join(dir, 'prog-badcfi');
  copyFileSync(join(dir, 'prog'), bad);
  const [off] = sectionOffset(bad, '.eh_frame');
  const fd2 = openSync(bad, 'r+');
  writeSync(fd2, Buffer.from([0x7f, 0xee, 0xee, 0xee]), 0, 4, off + 8);
  closeSync(fd2);
  const r = dwunw(['dump-table', bad]);
  oneLineError(t, r, bad, /corrupt|\.eh_frame/, 'corrupt .eh_frame');
  const rj = dwunw(['dump-table', bad, '--json']);
  t.equal(rj.status, 1, 'corrupt .eh_frame, --json: exit status 1');
  if (rj.stdout !== '') t.doesNotThrow(() => JSON.parse(rj.stdout), 'corrupt .eh_frame, --json: rows printed are valid JSON');
});
