// The --export options of `dwunw profile` and `dwunw memleak` (lib/export.ts does the work):
// taken out of the tool's own arguments before `--`, checked, with one-line usage errors.
import { CliError, ExitCode } from '../lib/errors.js';
import { EXPORT_DEFAULTS, type ExportOptions, parseBytes } from '../lib/export.js';

export interface ExportArgs {
  export: string[];
  interval?: string;
  service?: string;
  headers: string[];
  queue?: string;
  timeout?: string;
}

export const newExportArgs = (): ExportArgs => ({ export: [], headers: [] });

const VALUED = /^--(export|interval|service|export-header|export-queue|export-timeout)(?:=(.*))?$/;

/** args[i] when it is one of ours: its value stored in out, the index of the last argument used; else -1. */
export function takeExportArg(args: string[], i: number, out: ExportArgs, tool: string): number {
  const m = VALUED.exec(args[i]!);
  if (!m) return -1;
  const v = m[2] ?? args[++i];
  if (!v || v === '--') throw new CliError(tool, `--${m[1]}: a value is expected (see dwunw ${tool} --help)`, ExitCode.USAGE);
  switch (m[1]) {
    case 'export': out.export.push(v); break;
    case 'export-header': out.headers.push(v); break;
    case 'export-queue': out.queue = v; break;
    case 'export-timeout': out.timeout = v; break;
    default: out[m[1] as 'interval' | 'service'] = v;
  }
  return i;
}

export function exportOptions(sp: ExportArgs, tool: string): ExportOptions | null {
  if (!sp.export.length) {
    for (const [k, v] of [['interval', sp.interval], ['service', sp.service], ['export-queue', sp.queue], ['export-timeout', sp.timeout]] as const)
      if (v !== undefined) throw new CliError(tool, `--${k} is for --export`, ExitCode.USAGE);
    if (sp.headers.length) throw new CliError(tool, '--export-header is for --export', ExitCode.USAGE);
    return null;
  }
  const num = (v: string | undefined, what: string, def: number, max: number): number => {
    if (v === undefined) return def;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) throw new CliError(tool, `--${what} ${v}: expected 1 .. ${max} seconds`, ExitCode.USAGE);
    return Number(v);
  };
  return {
    tool,
    urls: sp.export,
    intervalS: num(sp.interval, 'interval', EXPORT_DEFAULTS.intervalS, 86400),
    service: sp.service,
    headers: sp.headers,
    queueBytes: sp.queue === undefined ? EXPORT_DEFAULTS.queueBytes : parseBytes(sp.queue, '--export-queue', tool),
    timeoutMs: num(sp.timeout, 'export-timeout', EXPORT_DEFAULTS.timeoutMs / 1000, 3600) * 1000,
  };
}
