// dwunw profile [ARGS...] [-- COMMAND ARGS...]: runs build/bpf/profile (bpf/profile/profile.c) with the same
// arguments (its flags: -p, -L, -U, -K, -F, -c, -C, -I, -f, -d, --unwind, --json, ...; `dwunw
// profile --help` shows them) and exits with its status. Views made here from its --json output:
// --pprof FILE (gzip'd profile.proto, lib/profile-pprof.ts), --html FILE (a self-contained flame
// graph, lib/profile-html.ts), and --export URL (continuous export, lib/export.ts: profile then
// runs with --interval and each interval is sent while sampling goes on); with them, stdout
// carries the folded lines with -f, the NDJSON with --json, else nothing (summaries on stderr).
// --wall (a wall-clock profile: on-CPU samples and off-CPU time of the same threads in one unit,
// microseconds) runs build/bpf/offcputime --wall, the off-CPU tracer with a cpu-clock sampler
// beside it: its options are offcputime's plus -F (-L is taken as its -t).
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { CliError, ExitCode } from '../lib/errors.js';
import { parseProfileJson, profilePath } from '../lib/profile.js';
import { flameHtml } from '../lib/profile-html.js';
import { encodePprof } from '../lib/profile-pprof.js';
import { runStackTool, VIEWS_HELP } from '../lib/stack-tool.js';
import { EXPORT_DEFAULTS, ExportRun, type ExportOptions, exportHelp, exportSummary, parseBytes } from '../lib/export.js';

type Args = PassthroughArgs;

export const command = 'profile [args..]';
export const describe = 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph, continuous export)';

export function builder(y: Argv): Argv<Args> {
  // Everything goes to profile as given (--help included), except ours (splitArgs).
  return passthroughBuilder(y, 'profile');
}

const WALL_HELP = `
      --wall                 wall-clock profile: on-CPU samples and off-CPU time of the same
                             threads in microseconds (runs offcputime --wall; its options
                             and -F; dwunw offcputime --help); off-CPU stacks end in [off-CPU]
`;
const EXTRA_HELP = `${VIEWS_HELP('profile')}${WALL_HELP}${exportHelp}`;

interface Split {
  pprof?: string;
  html?: string;
  folded: boolean;
  json: boolean;
  rest: string[];
  export: string[];
  interval?: string;
  service?: string;
  headers: string[];
  queue?: string;
  timeout?: string;
}

const VALUED = /^--(pprof|html|export|interval|service|export-header|export-queue|export-timeout)(?:=(.*))?$/;

/** Our options taken out of profile's. */
export function splitArgs(args: string[]): Split {
  const out: Split = { folded: false, json: false, rest: [], export: [], headers: [] };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') break;
    const m = VALUED.exec(a);
    if (m) {
      const v = m[2] ?? args[++i];
      if (!v || v === '--') throw new CliError('profile', `--${m[1]}: a value is expected`, ExitCode.USAGE);
      switch (m[1]) {
        case 'export': out.export.push(v); break;
        case 'export-header': out.headers.push(v); break;
        case 'export-queue': out.queue = v; break;
        case 'export-timeout': out.timeout = v; break;
        default: out[m[1] as 'pprof' | 'html' | 'interval' | 'service'] = v;
      }
      continue;
    }
    if (a === '--folded' || /^-[UKIdav]*f[UKIdav]*$/.test(a)) out.folded = true;
    if (a === '--json') out.json = true;
    out.rest.push(a);
  }
  out.rest.push(...args.slice(i));
  return out;
}

export function exportOptions(sp: Split): ExportOptions | null {
  if (!sp.export.length) {
    for (const [k, v] of [['interval', sp.interval], ['service', sp.service], ['export-queue', sp.queue], ['export-timeout', sp.timeout]] as const)
      if (v !== undefined) throw new CliError('profile', `--${k} is for --export`, ExitCode.USAGE);
    if (sp.headers.length) throw new CliError('profile', '--export-header is for --export', ExitCode.USAGE);
    return null;
  }
  const num = (v: string | undefined, what: string, def: number, max: number): number => {
    if (v === undefined) return def;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) throw new CliError('profile', `--${what} ${v}: expected 1 .. ${max} seconds`, ExitCode.USAGE);
    return Number(v);
  };
  return {
    urls: sp.export,
    intervalS: num(sp.interval, 'interval', EXPORT_DEFAULTS.intervalS, 86400),
    service: sp.service,
    headers: sp.headers,
    queueBytes: sp.queue === undefined ? EXPORT_DEFAULTS.queueBytes : parseBytes(sp.queue, '--export-queue'),
    timeoutMs: num(sp.timeout, 'export-timeout', EXPORT_DEFAULTS.timeoutMs / 1000, 3600) * 1000,
  };
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  await profile([...before, ...(after.length ? ['--', ...after] : [])]);
}

/** --wall before any `--`: the arguments for offcputime --wall (profile's -L is its -t) */
export function wallArgs(args: string[]): string[] | null {
  const dd = args.indexOf('--');
  const head = dd < 0 ? args : args.slice(0, dd);
  if (!head.includes('--wall')) return null;
  return [...head.map((a) => (a === '-L' ? '-t' : a)), ...(dd < 0 ? [] : args.slice(dd))];
}

export async function profile(args: string[]): Promise<void> {
  const wall = wallArgs(args);
  if (wall) return runStackTool({ name: 'offcputime', flags: 'ukUKdv' }, wall);
  const bin = profilePath();
  if (!existsSync(bin)) throw new CliError('profile', `${bin} is not built (run make bpf)`);
  const sp = splitArgs(args);
  const eo = exportOptions(sp);
  const exp = eo ? new ExportRun(eo) : null;
  const views = sp.pprof !== undefined || sp.html !== undefined || exp !== null;
  let run = sp.rest;
  if (views) {
    // profile writes NDJSON for the views (with -f, its folded lines in it); with --export, one
    // block per interval, then the totals
    const dd = run.indexOf('--');
    const head = (dd < 0 ? run : run.slice(0, dd)).filter((a) => a !== '--json');
    run = [...head, '--json', ...(eo ? [`--interval=${eo.intervalS}`] : []), ...(dd < 0 ? [] : run.slice(dd))];
  }
  const child = spawn(bin, run, { stdio: ['inherit', views ? 'pipe' : 'inherit', 'inherit'] });
  const forward = (sig: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  const onExit = () => forward('SIGTERM')();
  process.on('exit', onExit);
  // the output, line by line: with --export every interval is handed over as it ends; what
  // follows the last interval line is the run's report (totals, folded lines, summary)
  let lines: string[] = [];
  let partial = '';
  const onLine = (l: string) => {
    if (exp && l.startsWith('{"interval":')) lines = [];
    else lines.push(l);
    if (!exp || !l.startsWith('{')) return; // the profiled command's own output on the same stdout
    try {
      exp.line(JSON.parse(l));
    } catch {
      // a line cut short
    }
  };
  if (views)
    child.stdout!.on('data', (d: Buffer) => {
      const ls = (partial + d.toString('utf8')).split('\n');
      partial = ls.pop()!;
      for (const l of ls) onLine(l);
    });
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', (e) => reject(new CliError('profile', `${bin}: ${e.message}`)));
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  if (partial) onLine(partial);
  for (const [s, h] of handlers) process.removeListener(s, h);
  process.removeListener('exit', onExit);
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(EXTRA_HELP);
  process.exitCode = status ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
  let exportStats = null;
  if (exp) {
    exportStats = await exp.finish(eo!.timeoutMs);
    process.stderr.write(exportSummary(exportStats, exp.intervals));
  }
  if (!views || status !== 0) return;
  const out = parseProfileJson(lines.join('\n'));
  if (!out.summary) throw new CliError('profile', 'no summary in the output (profile stopped early?)');
  if (sp.pprof !== undefined) {
    writeFileSync(sp.pprof, encodePprof(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.pprof} (pprof, ${out.summary.samples} samples)\n`);
  }
  if (sp.html !== undefined) {
    writeFileSync(sp.html, flameHtml(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.html} (flame graph)\n`);
  }
  if (exportStats) lines.push(JSON.stringify({ export: { intervals: exp!.intervals, destinations: exportStats } }));
  if (sp.json) process.stdout.write(lines.map((l) => `${l}\n`).join(''));
  else if (sp.folded) process.stdout.write(out.folded.map((l) => `${l.folded} ${l.count}\n`).join(''));
}
