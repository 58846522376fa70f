// The table oracle on the fixture programs (fixtures/x86_64/build/, from `make -C fixtures`):
// every variant is compared with readelf by build/test/tools/cfi_vs_readelf, and the CFI each
// variant was built to contain is checked for:
//   - *-dfo* variants: the program's own CFI is in .debug_frame only, so dwunw's table uses it;
//   - *-g / *-g4 variants of cfi_zoo: cfi_ops.S's CFI is in both sections and .eh_frame wins;
//   - *-dfo-gc variants of cfi_zoo: a discarded function's .debug_frame FDE (tombstone address)
//     is dropped;
//   - cfi_raw: overlapping FDEs, an empty FDE and one outside the code, in both sections;
//   - cfi_zoo: the hand-written rules of cfi_ops.S (exp, vexp, rN (name), s, v+N, a CFA on rbx,
//     a CFA expression, wide offsets, a signal-frame CIE) appear in dwunw's rows of the function
//     that has them (cfi_vs_readelf -d prints the rows; nm gives the function ranges).
// $DWUNW_BUILD overrides build/.
import { execFile } from 'node:child_process';
import { closeSync, existsSync, lstatSync, openSync, readSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { buildDir as build, root, type Run, run as runToEnd } from './helpers.js';

const tool = join(build, 'test', 'tools', 'cfi_vs_readelf');
const fixdir = join(root, 'fixtures', 'x86_64', 'build');
const execFileP = promisify(execFile);

// What fixtures/Makefile builds.
const links = ['pie', 'static'];
const flavors = ['', '-g', '-g4', '-dfo', '-dfo4', '-dfo-cie4', '-dfo-gc'];
const expected = [
  ...['demo', 'cfi_zoo'].flatMap((p) => links.flatMap((l) => flavors.map((f) => `${p}-${l}${f}`))),
  ...links.map((l) => `cfi_raw-${l}`),
];

type Status = 'OK' | 'SKIP' | 'FAIL' | 'ERROR';
interface FileResult {
  status: Status;
  line: string;
  detail: string[];
  notes: string[];
  fields: Record<string, string>;
}

const isElf = (p: string): boolean => {
  let fd = -1;
  try {
    fd = openSync(p, 'r');
    const b = Buffer.alloc(4);
    return readSync(fd, b, 0, 4, 0) === 4 && b.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } catch {
    return false;
  } finally {
    if (fd >= 0) closeSync(fd);
  }
};

function fieldsOf(s: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const kv of s.split(' ')) {
    const i = kv.indexOf('=');
    if (i > 0) fields[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return fields;
}

// The tool's output: a status line per file (OK/SKIP/FAIL/ERROR), indented mismatch lines after
// FAIL, NOTE lines (printed before the file's status line).
function parseOutput(out: string): Map<string, FileResult> {
  const results = new Map<string, FileResult>();
  const notes = new Map<string, string[]>();
  let last: FileResult | undefined;
  for (const line of out.split('\n')) {
    let m: RegExpMatchArray | null;
    if ((m = line.match(/^OK (.*?) (rows=\d+.*)$/)) || (m = line.match(/^(?:SKIP|FAIL|ERROR) (.*?): (.*)$/))) {
      const status = line.slice(0, line.indexOf(' ')) as Status;
      last = { status, line: m[2], detail: [], notes: notes.get(m[1]) ?? [], fields: fieldsOf(m[2]) };
      results.set(m[1], last);
    } else if ((m = line.match(/^NOTE (\S+) (.*?): (.*)$/))) {
      notes.set(m[2], [...(notes.get(m[2]) ?? []), `${m[1]}: ${m[3]}`]);
    } else if (line.startsWith('  ') && last) {
      last.detail.push(line.trim());
    }
  }
  return results;
}

/** A program to its end (make, the table tools, qemu): as long as the test file may take. */
const run = (cmd: string, args: string[]): Promise<Run> => runToEnd(cmd, args, { timeoutMs: 900_000 });

interface Row {
  pc: bigint;
  end: bigint;
  flags: string;
  text: string; // "CFA name=rule ..."
}

// dwunw's rows (cfi_vs_readelf -d): "ROW PC END FLAGS CFA name=rule ...".
async function dumpRows(file: string): Promise<Row[]> {
  const r = await run(tool, ['-d', file]);
  const rows: Row[] = [];
  for (const line of r.stdout.split('\n')) {
    const m = line.match(/^ROW ([0-9a-f]+) ([0-9a-f]+) (\S+) (.*)$/);
    if (m) rows.push({ pc: BigInt('0x' + m[1]), end: BigInt('0x' + m[2]), flags: m[3], text: m[4] });
  }
  return rows;
}

// Function ranges from the symbol table.
async function functions(file: string): Promise<Map<string, [bigint, bigint]>> {
  const { stdout } = await execFileP('nm', ['-S', '--defined-only', file], { maxBuffer: 1 << 26 });
  const map = new Map<string, [bigint, bigint]>();
  for (const line of stdout.split('\n')) {
    const m = line.match(/^([0-9a-f]+) ([0-9a-f]+) [tT] (\S+)$/);
    if (m) {
      const a = BigInt('0x' + m[1]);
      map.set(m[3], [a, a + BigInt('0x' + m[2])]);
    }
  }
  return map;
}

// The rules cfi_ops.S writes, per function: each regexp must match some row inside it.
const opsRules: Record<string, RegExp[]> = {
  cfi_ops_expr: [/ rbx=exp\b/, / rsp=vexp\b/, /^exp /, / rsp=v\+0\b/, / rax=v\+16\b/],
  cfi_ops_register: [/ rbx=r4 \(rsi\)/, / ra=r11 \(r11\)/, /^rsp\+0 /],
  cfi_ops_undefined: [/ rbx=s\b/, / r12=s\b/],
  cfi_ops_cfa_rbx: [/^rbx\+16 /, / r13=c-4104\b/],
  cfi_ops_big_frame: [/^rsp\+200008 /],
  cfi_ops_remember: [/^rsp\+32 r12=c-24 ra=c-8 rbx=c-16$/],
  cfi_ops_nop_fde: [/^rsp\+8 ra=c-8$/],
};

t.test('fixtures against readelf', async (t) => {
  if (!existsSync(tool)) {
    t.fail(`${tool} is missing (make tools)`);
    return;
  }
  if (!existsSync(fixdir)) {
    t.fail(`${fixdir} is missing (make -C fixtures)`);
    return;
  }
  // Regular ELF files only: `demo` is a symlink to demo-pie, obj/ a directory.
  const names = readdirSync(fixdir)
    .filter((n) => lstatSync(join(fixdir, n)).isFile() && isElf(join(fixdir, n)))
    .sort();
  const missing = expected.filter((e) => !names.includes(e));
  t.same(missing, [], `every fixture variant is built (${expected.length})`);

  const r = await run(tool, ['-n', '8', ...names.map((n) => join(fixdir, n))]);
  const res = parseOutput(r.stdout);
  t.equal(r.stderr.trim(), '', 'cfi_vs_readelf prints nothing on stderr');

  await t.test('each variant matches readelf', async (t) => {
    for (const n of names) {
      const x = res.get(join(fixdir, n));
      // TAP messages are one line: the mismatches go to the diagnostics (YAML) of a failure.
      t.ok(x?.status === 'OK', `${n}: ${x ? `${x.status} ${x.line}` : 'no result'}`, {
        mismatches: x?.detail.length ? x.detail : undefined,
        notes: x?.notes.length ? x.notes : undefined,
      });
    }
  });

  await t.test('what each variant was built to contain', async (t) => {
    const f = (n: string) => res.get(join(fixdir, n))?.fields ?? {};
    for (const n of names) {
      const fl = f(n);
      if (/-dfo/.test(n)) {
        t.match(fl.sources ?? '', /debug_frame/, `${n}: dwunw's table uses .debug_frame (sources=${fl.sources})`);
      } else {
        t.equal(fl.sources, n.startsWith('cfi_raw') ? 'eh_frame+debug_frame' : 'eh_frame', `${n}: sources`);
      }
      if (/^cfi_zoo-.*-g4?$/.test(n))
        t.ok(Number(fl.shadowed) >= 9, `${n}: cfi_ops.S FDEs in .debug_frame shadowed by .eh_frame (shadowed=${fl.shadowed})`);
      if (/^cfi_zoo-.*-dfo-gc$/.test(n))
        t.ok(Number(fl.nonexec) >= 1, `${n}: a discarded function's FDE is outside the code (nonexec=${fl.nonexec})`);
      if (n.startsWith('cfi_raw')) {
        const x = res.get(join(fixdir, n));
        t.ok(Number(fl.overlaps) >= 2, `${n}: overlapping FDEs in both sections (overlaps=${fl.overlaps})`);
        t.ok(Number(fl.empty) >= 1, `${n}: an empty FDE (empty=${fl.empty})`);
        t.ok(Number(fl.nonexec) >= 2, `${n}: FDEs outside the code (nonexec=${fl.nonexec})`);
        t.ok(x?.notes.some((s) => s.startsWith('overlap')), `${n}: the tool notes the overlap`);
      }
    }
  });

  await t.test("cfi_ops.S's rules in dwunw's rows", async (t) => {
    for (const n of names.filter((x) => x.startsWith('cfi_zoo-'))) {
      const file = join(fixdir, n);
      const [rows, fns] = await Promise.all([dumpRows(file), functions(file)]);
      const inside = (fn: string): Row[] => {
        const range = fns.get(fn);
        return range ? rows.filter((r) => r.text !== 'end' && r.pc < range[1] && r.end > range[0]) : [];
      };
      const problems: string[] = [];
      for (const [fn, wants] of Object.entries(opsRules)) {
        const rs = inside(fn);
        if (!fns.has(fn)) problems.push(`${fn}: no symbol`);
        for (const w of wants) if (!rs.some((r) => w.test(r.text))) problems.push(`${fn}: no row matches ${w}`);
      }
      // remember/restore_state: the state after the pushes comes back twice after each exit
      const back = inside('cfi_ops_remember').filter((r) => r.text.startsWith('rsp+32 ')).length;
      if (back < 3) problems.push(`cfi_ops_remember: ${back} rsp+32 rows, want 3 (restore_state twice)`);
      const sig = inside('cfi_ops_signal');
      if (!sig.length || !sig.every((r) => r.flags.includes('S')))
        problems.push(`cfi_ops_signal: rows not all flagged S (signal frame): ${sig.map((r) => r.flags).join(',') || 'no rows'}`);
      if (inside('cfi_ops_register').some((r) => / ra=/.test(r.text) === false))
        problems.push('cfi_ops_register: a row without a return-address rule');
      // C functions with a typical shape
      if (!inside('zoo_vla').some((r) => r.text.startsWith('rbp+16 ')))
        problems.push('zoo_vla: no row with the CFA on rbp');
      if (!inside('zoo_deep').some((r) => ['rbx', 'rbp', 'r12', 'r13', 'r14', 'r15'].every((g) => new RegExp(` ${g}=c-`).test(r.text))))
        problems.push('zoo_deep: no row with all six callee-saved registers saved');
      t.same(problems, [], `${n}: ${rows.length} rows, the expected rules are there`);
    }
  });

  await t.test('the fixture programs run', async (t) => {
    for (const n of ['cfi_zoo-pie', 'cfi_zoo-static', 'cfi_raw-pie', 'demo-pie']) {
      const x = await run(join(fixdir, n), []);
      t.equal(x.status, 0, `${n} exits 0${x.status !== 0 ? ': ' + x.stdout.trim().split('\n').slice(-3).join(' | ') : ''}`);
    }
  });
});
