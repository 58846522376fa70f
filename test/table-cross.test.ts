// The table oracle for arm64 and mips32 (as test/table-fixtures.test.ts is for x86_64): dwunw's
// compiled tables of the cross C library (libc, ld.so, libgcc_s, libstdc++ where installed, from
// libc6-dev-arm64-cross / libc6-dev-mipsel-cross) and of the verify fixtures (fixtures/arm64/ and
// fixtures/mips32/build/, from `make -C fixtures verify-arm64 verify-mips32`) against
// `readelf --debug-dump=frames-interp`, row by row, through build/test/tools/cfi_vs_readelf
// (readelf reads all three architectures; 32-bit files have 8-digit LOCs). Then what each variant
// was built to contain:
//   - arm64 *-pac (-mbranch-protection=standard): the fixture's functions have rows whose return
//     address is signed (DW_CFA_AARCH64_negate_ra_state; flag A), the other variants none;
//   - mips32: plain builds have CFI only for the fixture's two assembly functions (mipsel GCC does
//     not emit unwind tables by default), -g puts the C code's CFI in .debug_frame only,
//     -fasynchronous-unwind-tables in .eh_frame; every function's first row is the CIE's r29+0;
//   - readelf's register names: x19-x29 (arm64) and rN (mips) appear in the compared rows.
// $DWUNW_BUILD overrides build/.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ElfFile } from '../lib/verify-elf.js';
import { buildDir as build, root, type Run, run as runToEnd } from './helpers.js';

const tool = join(build, 'test', 'tools', 'cfi_vs_readelf');

const sysroots = { arm64: '/usr/aarch64-linux-gnu/lib', mips32: '/usr/mipsel-linux-gnu/lib' } as const;
const libs = {
  arm64: ['libc.so.6', 'ld-linux-aarch64.so.1', 'libgcc_s.so.1', 'libstdc++.so.6', 'libm.so.6'],
  mips32: ['libc.so.6', 'ld.so.1', 'libgcc_s.so.1', 'libstdc++.so.6'],
};
const variants = {
  arm64: ['pie', 'pie-g', 'pie-pac', 'static', 'static-g', 'static-pac'],
  mips32: ['pie', 'pie-g', 'pie-async', 'static', 'static-g', 'static-async'],
};
const fixture = (arch: 'arm64' | 'mips32', v: string): string => join(root, 'fixtures', arch, 'build', `verify_zoo-${v}`);

/** A program to its end (make, the table tools, qemu): as long as the test file may take. */
const run = (cmd: string, args: string[]): Promise<Run> => runToEnd(cmd, args, { timeoutMs: 900_000 });

interface Result {
  status: string;
  line: string;
  detail: string[];
  fields: Record<string, string>;
}

function parse(out: string): Map<string, Result> {
  const m = new Map<string, Result>();
  let last: Result | undefined;
  for (const line of out.split('\n')) {
    const r = /^OK (\S+) (rows=.*)$/.exec(line) ?? /^(?:SKIP|FAIL|ERROR) (\S+?): (.*)$/.exec(line);
    if (r) {
      const fields: Record<string, string> = {};
      for (const kv of r[2]!.split(' ')) {
        const i = kv.indexOf('=');
        if (i > 0) fields[kv.slice(0, i)] = kv.slice(i + 1);
      }
      last = { status: line.slice(0, line.indexOf(' ')), line: r[2]!, detail: [], fields };
      m.set(r[1]!, last);
    } else if (line.startsWith('  ') && last) {
      last.detail.push(line.trim());
    }
  }
  return m;
}

interface Row {
  pc: bigint;
  end: bigint;
  flags: string;
  text: string;
}

async function rows(file: string): Promise<Row[]> {
  const r = await run(tool, ['-d', file]);
  const out: Row[] = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^ROW ([0-9a-f]+) ([0-9a-f]+) (\S+) (.*)$/.exec(line);
    if (m) out.push({ pc: BigInt(`0x${m[1]}`), end: BigInt(`0x${m[2]}`), flags: m[3]!, text: m[4]! });
  }
  return out;
}

/** Rows overlapping the fixture's own zoo_* functions. */
function ownRows(file: string, all: Row[]): Map<string, Row[]> {
  const out = new Map<string, Row[]>();
  for (const [name, s] of new ElfFile(file).functions()) {
    if (!name.startsWith('zoo_') || s.size === 0n) continue;
    const lo = s.value;
    const hi = s.value + s.size;
    out.set(
      name,
      all.filter((r) => r.text !== 'end' && r.pc < hi && r.end > lo),
    );
  }
  return out;
}

const missing = [tool, ...Object.values(sysroots)].filter((p) => !existsSync(p));
if (missing.length) {
  t.fail(`missing: ${missing.join(', ')} (make; scripts/ensure-deps installs the cross C libraries)`);
} else {
  t.test('cross fixtures are built', async (t) => {
    const r = await run('make', ['-s', '-C', join(root, 'fixtures'), 'verify-arm64', 'verify-mips32']);
    t.equal(r.status, 0, `make -C fixtures verify-arm64 verify-mips32${r.status !== 0 ? `: ${r.stderr.trim().slice(-500)}` : ''}`);
  });

  for (const arch of ['arm64', 'mips32'] as const) {
    t.test(`${arch}: tables against readelf`, async (t) => {
      const sys = libs[arch].map((l) => join(sysroots[arch], l)).filter((p) => existsSync(p));
      const fx = variants[arch].map((v) => fixture(arch, v));
      t.ok(sys.some((p) => p.endsWith('/libc.so.6')), `${arch}: the cross libc is installed`);
      const r = await run(tool, ['-n', '8', ...sys, ...fx]);
      t.equal(r.stderr.trim(), '', 'cfi_vs_readelf prints nothing on stderr');
      const res = parse(r.stdout);
      for (const f of [...sys, ...fx]) {
        const x = res.get(f);
        t.ok(x?.status === 'OK', `${f}: ${x ? `${x.status} ${x.line}` : 'no result'}`, {
          mismatches: x?.detail.length ? x.detail : undefined,
        });
      }
      const libc = res.get(join(sysroots[arch], 'libc.so.6'));
      t.ok(Number(libc?.fields.rows ?? 0) > 1000 && Number(libc?.fields.readelf_rows ?? 0) > 1000,
        `${arch} libc: thousands of rows compared (${libc?.fields.rows} / readelf ${libc?.fields.readelf_rows})`);

      // What each variant was built to contain.
      for (const v of variants[arch]) {
        const file = fixture(arch, v);
        const fl = res.get(file)?.fields ?? {};
        const all = await rows(file);
        const own = ownRows(file, all);
        const withRows = [...own.values()].filter((rs) => rs.length > 0).length;
        if (arch === 'arm64') {
          t.equal(fl.sources, 'eh_frame', `${v}: CFI in .eh_frame`);
          t.equal(withRows, own.size, `${v}: every zoo_* function has rows (${withRows}/${own.size})`);
          const signed = [...own.values()].flat().filter((r) => r.flags.includes('A')).length;
          if (v.endsWith('-pac')) t.ok(signed > 0, `${v}: rows with a signed return address (${signed})`);
          else t.equal(signed, 0, `${v}: no signed return address in the fixture's code`);
          t.ok(all.some((r) => / x29=c-\d+/.test(r.text) && / ra=c-\d+/.test(r.text)), `${v}: readelf's names (x29, ra) in the rows`);
        } else {
          const want = v.endsWith('-g') ? (v.startsWith('static') ? 'eh_frame+debug_frame' : 'debug_frame') : 'eh_frame';
          t.equal(fl.sources, want, `${v}: sources ${want}`);
          if (v === 'pie' || v === 'static') {
            // only zoo_before_spin and zoo_spin_at_entry (hand-written CFI)
            const covered = [...own.entries()].filter(([, rs]) => rs.length > 0).map(([n]) => n).sort();
            t.same(covered, ['zoo_before_spin', 'zoo_spin_at_entry'], `${v}: only the assembly functions have CFI`);
          } else {
            t.equal(withRows, own.size, `${v}: every zoo_* function has rows (${withRows}/${own.size})`);
          }
          const firsts = [...own.entries()].filter(([, rs]) => rs.length > 0).map(([n, rs]) => [n, rs[0]!.text] as const);
          const bad = firsts.filter(([, text]) => !text.startsWith('r29+0'));
          t.same(bad, [], `${v}: every function starts with the CIE's rule r29+0`);
          if (v !== 'pie' && v !== 'static')
            t.ok(all.some((r) => / ra=c-\d+/.test(r.text) && / r16=c-\d+/.test(r.text)), `${v}: rN names and ra in the rows`);
        }
      }
    });
  }
}
