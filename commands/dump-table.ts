// dwunw dump-table FILE [--json] [--pc ADDR]: print the unwind table libdwunw compiled from a
// module's CFI, in readelf --debug-dump=frames-interp's notation.
import { statSync } from 'node:fs';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import type { ChalkInstance } from 'chalk';
import type { Module, Row, TableInfo } from '../lib/dwunw.js';
import * as N from '../lib/native-consts.js';
import { ChunkedWriter, CliError, ExitCode, colorsFor, hex, parseAddress, reportError } from '../lib/output.js';

interface Args {
  file: string;
  json: boolean;
  pc?: string;
}

export const command = 'dump-table <file>';
export const describe = 'Print the unwind table compiled from an ELF file\'s CFI (readelf-like)';

export function builder(y: Argv): Argv<Args> {
  return y
    .positional('file', { type: 'string', demandOption: true, describe: 'ELF file (executable, shared library, debug file)' })
    .option('json', { type: 'boolean', default: false, describe: 'Print JSON: {file, arch, stats, rows: [{pc, cfa, regs}]}' })
    .option('pc', {
      type: 'string',
      requiresArg: true,
      describe:
        'Print only the row covering this module address: hex (0x1139, 1139a, or with a leading 0: 01139) or decimal (4409)',
    })
    .example('$0 dump-table /bin/true', 'the whole table')
    .example('$0 dump-table /bin/true --pc 0x2a40 --json', 'the row covering 0x2a40, as JSON');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  await dumpTable(argv.file, { json: argv.json, pc: argv.pc });
}

/** Stats of the table, as printed in JSON. */
function statsOf(info: TableInfo, mod: Module) {
  const m = mod.memory();
  return {
    rows: info.rows,
    rules: info.rules,
    bytes: info.bytes,
    bytes_per_row: info.rows ? Math.round((info.bytes / info.rows) * 100) / 100 : 0,
    build_ms: Math.round(info.buildNs / 1e4) / 100,
    fdes: info.fdes,
    fdes_dropped: info.fdesDropped,
    // What the module holds: the table, symbols (when built), and the file bytes read (never the whole file).
    memory: { table: m.table, symbols: m.symbols, other: m.elf, file_size: m.fileSize },
  };
}

function checkFile(file: string): void {
  let st;
  try {
    st = statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CliError(file, 'no such file or directory');
    if (code === 'EACCES') throw new CliError(file, 'permission denied');
    throw new CliError(file, (e as Error).message);
  }
  if (st.isDirectory()) throw new CliError(file, 'is a directory');
}

export async function dumpTable(file: string, opts: { json: boolean; pc?: string }): Promise<void> {
  let pc: bigint | undefined;
  if (opts.pc !== undefined) {
    const v = parseAddress(opts.pc);
    if (v === null) throw new CliError('--pc', `not an address: ${opts.pc}`, ExitCode.USAGE);
    pc = v;
  }
  checkFile(file);

  // the library (koffi) only now: --help and usage errors do without it
  const { Dwunw, DwunwError, sourceName } = await import('../lib/dwunw.js');
  const d = new Dwunw();
  let mod: Module | undefined;
  try {
    mod = d.open(file);
    const info = mod.tableInfo();

    let only: Row | undefined;
    if (pc !== undefined) {
      const idx = mod.lookup(pc);
      const row = idx === null ? undefined : mod.row(idx);
      if (!row || row.cfa === 'end' || pc >= row.end)
        throw new CliError(file, `no CFI covers ${hex(pc)}`);
      only = row;
    }

    if (only) {
      const rows = (): Iterable<Row> => [only];
      if (opts.json) await printJson(file, mod, info, rows);
      else await printText(file, mod, info, rows);
    } else {
      await printAll(file, mod, info, opts.json);
    }

    // A table built with entries skipped must not look clean: say where, and fail.
    if (info.firstError !== 0) {
      const err = new DwunwError(info.firstError);
      reportError(
        file,
        `${sourceName(info.firstErrorSource)} entry at offset ${hex(info.firstErrorOffset)} skipped: ${err.message}` +
          ` (${info.fdesDropped} of ${info.fdes} FDEs dropped)`,
      );
    }
  } catch (e) {
    // Library errors name the file: `dwunw: FILE: not an ELF file`.
    if (e instanceof DwunwError) throw new CliError(file, e.message);
    throw e;
  } finally {
    mod?.close();
    d.close();
  }
}

async function printJson(file: string, mod: Module, info: TableInfo, rows: () => Iterable<Row>): Promise<void> {
  const out = new ChunkedWriter();
  await out.write(
    `{"file":${JSON.stringify(file)},"arch":${JSON.stringify(mod.arch.name)},` +
      `"stats":${JSON.stringify(statsOf(info, mod))},"rows":[`,
  );
  let first = true;
  for (const row of rows()) {
    const regs: Record<string, string> = {};
    if (row.cfa !== 'end') for (const r of [...row.regs].sort((a, b) => a.reg - b.reg)) regs[r.label] = r.rule;
    await out.write(
      `${first ? '\n' : ',\n'}{"pc":"${hex(row.pc)}","cfa":${JSON.stringify(row.cfa)},"regs":${JSON.stringify(regs)}}`,
    );
    first = false;
  }
  await out.write('\n]}\n');
  await out.flush();
}

/** Every row, rendered by the library in bulk (same text as printJson/printText). */
async function printAll(file: string, mod: Module, info: TableInfo, json: boolean): Promise<void> {
  const out = process.stdout;
  // Resolves when the bytes are handed to the OS: the library's buffer is then free to refill.
  const put = (b: Buffer | string): Promise<void> =>
    new Promise((done, fail) => out.write(b, (e) => (e ? fail(e) : done())));
  if (json) {
    await put(
      `{"file":${JSON.stringify(file)},"arch":${JSON.stringify(mod.arch.name)},` +
        `"stats":${JSON.stringify(statsOf(info, mod))},"rows":[`,
    );
    for (const b of mod.dump(N.DWUNW_DUMP_JSON)) await put(b);
    await put('\n]}\n');
    return;
  }
  const c: ChalkInstance = colorsFor(process.stdout);
  const bpr = info.rows ? info.bytes / info.rows : 0;
  await put(
    `${c.bold(file)} (${mod.arch.name}): ${info.rows} rows, ${info.rules} rules, ` +
      `${bpr.toFixed(1)} bytes/row, built in ${(info.buildNs / 1e6).toFixed(2)} ms\n`,
  );
  const format = N.DWUNW_DUMP_TEXT | (c.level > 0 ? N.DWUNW_DUMP_COLOR : 0);
  for (const b of mod.dump(format)) await put(b);
}

const pad = (s: string, width: number): string => ' '.repeat(Math.max(0, width - s.length));

interface Column {
  reg: number;
  label: string;
  width: number;
}

async function printText(file: string, mod: Module, info: TableInfo, rows: () => Iterable<Row>): Promise<void> {
  const c: ChalkInstance = colorsFor(process.stdout);
  const out = new ChunkedWriter();
  const bpr = info.rows ? info.bytes / info.rows : 0;
  await out.write(
    `${c.bold(file)} (${mod.arch.name}): ${info.rows} rows, ${info.rules} rules, ` +
      `${bpr.toFixed(1)} bytes/row, built in ${(info.buildNs / 1e6).toFixed(2)} ms\n`,
  );

  // First pass: the register columns (union over the rows, by DWARF number) and their widths.
  const cols = new Map<number, Column>();
  let cfaWidth = 3;
  for (const row of rows()) {
    cfaWidth = Math.max(cfaWidth, row.cfa.length);
    if (row.cfa === 'end') continue;
    for (const r of row.regs) {
      let col = cols.get(r.reg);
      if (!col) cols.set(r.reg, (col = { reg: r.reg, label: r.label, width: r.label.length }));
      if (r.isRa) col.label = 'ra';
      col.width = Math.max(col.width, col.label.length, r.rule.length);
    }
  }
  const columns = [...cols.values()].sort((a, b) => a.reg - b.reg);
  const pcWidth = mod.addrSize * 2;

  const header = ['LOC'.padEnd(pcWidth), 'CFA'.padEnd(cfaWidth), ...columns.map((k) => k.label.padEnd(k.width))];
  await out.write(`${c.bold(header.join(' ').trimEnd())}\n`);

  // Second pass: the rows.
  for (const row of rows()) {
    const loc = row.pc.toString(16).padStart(pcWidth, '0');
    if (row.cfa === 'end') {
      await out.write(`${c.dim(`${loc} end`)}\n`);
      continue;
    }
    const rules = new Map(row.regs.map((r) => [r.reg, r.rule]));
    // Color the text only, not its padding, so trailing blanks can be trimmed.
    let line = `${loc} ${c.cyan(row.cfa)}${pad(row.cfa, cfaWidth)}`;
    for (const k of columns) {
      const rule = rules.get(k.reg) ?? 'u';
      line += ` ${rule === 'u' ? rule : c.green(rule)}${pad(rule, k.width)}`;
    }
    await out.write(`${line.trimEnd()}\n`);
  }
  await out.flush();
}
