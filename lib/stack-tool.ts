// The stack tools whose output is counted stacks (profile, offcputime: bpf/<tool>/, built into
// build/bpf/<tool>) run from the CLI: their arguments pass through as given, except --pprof FILE
// and --html FILE, the views made here from the tool's --json output (lib/profile-pprof.ts,
// lib/profile-html.ts), and, for a tool whose command takes them (profile), --export URL and its
// options: the tool then runs with --interval and each interval is sent while it goes on
// (lib/export.ts). With views, stdout carries the tool's folded lines with -f (made by the tool,
// -f --json), the NDJSON with --json, else nothing (the summary stays on stderr). The tool's exit
// status is ours.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runTool } from './passthrough.js';
import { CliError, ExitCode } from './errors.js';
import { type ExportOptions, type ExportRun, exportSummary } from './export.js';
import { parseProfileJson } from './profile.js';
import { flameHtml } from './profile-html.js';
import { encodePprof } from './profile-pprof.js';
import { packageRoot } from './root.js';

export interface StackTool {
  /** the tool's name: build/bpf/NAME, messages */
  name: string;
  /** its short options without a value, besides -f (combined with -f in one argument, e.g. -Uf) */
  flags: string;
  /** what --help adds after the tool's own; VIEWS_HELP when not given */
  help?: string;
  /** the usage error of --pprof or --html without a file; 'a file name is expected' when not given */
  noValue?: string;
  /** what the line of a written pprof counts: the summary's samples, or the stacks in it */
  pprofCounts: 'samples' | 'stacks';
}

export const toolPath = (name: string): string => join(packageRoot(), 'build', 'bpf', name);

export const VIEWS_HELP = (name: string): string => `
dwunw ${name} adds:
      --pprof=FILE           write a gzip'd pprof profile (go tool pprof, Parca, Pyroscope)
      --html=FILE            write a self-contained flame graph (d3-flame-graph)
`;

export interface SplitArgs {
  pprof?: string;
  html?: string;
  folded: boolean;
  json: boolean;
  rest: string[];
}

/** Our options taken out of the tool's; `take` claims a command's own others (args[i] one of
 * them: the index of the last argument it used, else -1). */
export function splitToolArgs(tool: StackTool, args: string[], take?: (args: string[], i: number) => number): SplitArgs {
  const out: SplitArgs = { folded: false, json: false, rest: [] };
  const foldedGroup = new RegExp(`^-[${tool.flags}]*f[${tool.flags}]*$`);
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') break;
    const j = take ? take(args, i) : -1;
    if (j >= 0) {
      i = j;
      continue;
    }
    const m = /^--(pprof|html)(?:=(.*))?$/.exec(a);
    if (m) {
      const v = m[2] ?? args[++i];
      if (!v || v === '--') throw new CliError(tool.name, `--${m[1]}: ${tool.noValue ?? 'a file name is expected'}`, ExitCode.USAGE);
      out[m[1] as 'pprof' | 'html'] = v;
      continue;
    }
    if (a === '--folded' || foldedGroup.test(a)) out.folded = true;
    if (a === '--json') out.json = true;
    out.rest.push(a);
  }
  out.rest.push(...args.slice(i));
  return out;
}

/** A run's arguments: the tool's and our views (split), and the export when asked for. */
export interface ToolRun {
  sp: SplitArgs;
  exp?: { run: ExportRun; opts: ExportOptions };
}

/** Run the tool with args (parse: how the command takes its options out of them; the views'
 * only, when not given). */
export async function runStackTool(tool: StackTool, args: string[], parse?: (args: string[]) => ToolRun): Promise<void> {
  const bin = toolPath(tool.name);
  if (!existsSync(bin)) throw new CliError(tool.name, `${bin} is not built (run make bpf)`);
  const { sp, exp } = parse ? parse(args) : { sp: splitToolArgs(tool, args), exp: undefined };
  const views = sp.pprof !== undefined || sp.html !== undefined || exp !== undefined;
  let run = sp.rest;
  if (views) {
    // the tool writes NDJSON for the views (with -f, its folded lines in it); with --export, one
    // block per interval, then the totals
    const dd = run.indexOf('--');
    const head = (dd < 0 ? run : run.slice(0, dd)).filter((a) => a !== '--json');
    run = [...head, '--json', ...(exp ? [`--interval=${exp.opts.intervalS}`] : []), ...(dd < 0 ? [] : run.slice(dd))];
  }
  // the output, line by line: with --export every interval is handed over as it ends; what
  // follows the last interval line is the run's report (folded lines, summary: the tool drops an
  // interval's keys once it is printed). --pprof/--html want the whole run: the intervals' entries
  // are kept for them (only then: memory that grows with the run's stacks)
  let lines: string[] = [];
  const keepEntries = sp.pprof !== undefined || sp.html !== undefined;
  const onLine = (l: string) => {
    if (exp && l.startsWith('{"interval":')) lines = keepEntries ? lines.filter((x) => x.startsWith('{"pid":')) : [];
    else lines.push(l);
    if (!exp || !l.startsWith('{')) return; // the profiled command's own output on the same stdout
    try {
      exp.run.line(JSON.parse(l));
    } catch {
      // a line cut short
    }
  };
  const status = await runTool(tool.name, bin, run, views ? { onLine } : {});
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(tool.help ?? VIEWS_HELP(tool.name));
  process.exitCode = status;
  let exportStats = null;
  if (exp) {
    exportStats = await exp.run.finish(exp.opts.timeoutMs);
    process.stderr.write(exportSummary(exportStats, exp.run.intervals, tool.name));
  }
  if (!views || status !== 0) return;
  const out = parseProfileJson(lines.join('\n'));
  if (!out.summary) throw new CliError(tool.name, `no summary in the output (${tool.name} stopped early?)`);
  if (sp.pprof !== undefined) {
    writeFileSync(sp.pprof, encodePprof(out.entries, out.summary));
    const n = tool.pprofCounts === 'samples' ? out.summary.samples : out.entries.length;
    process.stderr.write(`${tool.name}: wrote ${sp.pprof} (pprof, ${n} ${tool.pprofCounts})\n`);
  }
  if (sp.html !== undefined) {
    writeFileSync(sp.html, flameHtml(out.entries, out.summary, `dwunw ${tool.name}`));
    process.stderr.write(`${tool.name}: wrote ${sp.html} (flame graph)\n`);
  }
  if (exportStats) lines.push(JSON.stringify({ export: { intervals: exp!.run.intervals, destinations: exportStats } }));
  if (sp.json) process.stdout.write(lines.filter((l) => !exp || !keepEntries || !l.startsWith('{"pid":')).map((l) => `${l}\n`).join(''));
  else if (sp.folded) process.stdout.write(out.folded.map((l) => `${l.folded} ${l.count}\n`).join(''));
}
