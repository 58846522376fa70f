// The stack tools whose output is counted stacks (profile, offcputime: bpf/<tool>/, built into
// build/bpf/<tool>) run from the CLI: their arguments pass through as given, except --pprof FILE
// and --html FILE, the views made here from the tool's --json output (lib/profile-pprof.ts,
// lib/profile-html.ts); with them, stdout carries the tool's folded lines with -f (made by the
// tool, -f --json), the NDJSON with --json, else nothing (the summary stays on stderr). The
// tool's exit status is ours. (profile has its own runner, commands/profile.ts, for --export.)
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runTool } from './passthrough.js';
import { CliError, ExitCode } from './errors.js';
import { parseProfileJson } from './profile.js';
import { flameHtml } from './profile-html.js';
import { encodePprof } from './profile-pprof.js';
import { packageRoot } from './root.js';

export interface StackTool {
  /** the tool's name: build/bpf/NAME, messages */
  name: string;
  /** its short options without a value, besides -f (combined with -f in one argument, e.g. -Uf) */
  flags: string;
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

/** Our options taken out of the tool's. */
export function splitToolArgs(tool: StackTool, args: string[]): SplitArgs {
  const out: SplitArgs = { folded: false, json: false, rest: [] };
  const foldedGroup = new RegExp(`^-[${tool.flags}]*f[${tool.flags}]*$`);
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') break;
    const m = /^--(pprof|html)(?:=(.*))?$/.exec(a);
    if (m) {
      const v = m[2] ?? args[++i];
      if (!v || v === '--') throw new CliError(tool.name, `--${m[1]}: a file name is expected`, ExitCode.USAGE);
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

export async function runStackTool(tool: StackTool, args: string[]): Promise<void> {
  const bin = toolPath(tool.name);
  if (!existsSync(bin)) throw new CliError(tool.name, `${bin} is not built (run make bpf)`);
  const sp = splitToolArgs(tool, args);
  const views = sp.pprof !== undefined || sp.html !== undefined;
  let run = sp.rest;
  if (views) {
    // the tool writes NDJSON for the views (with -f, its folded lines in it)
    const dd = run.indexOf('--');
    const head = (dd < 0 ? run : run.slice(0, dd)).filter((a) => a !== '--json');
    run = [...head, '--json', ...(dd < 0 ? [] : run.slice(dd))];
  }
  const lines: string[] = [];
  const status = await runTool(tool.name, bin, run, views ? { onLine: (l, complete) => lines.push(complete ? `${l}\n` : l) } : {});
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(VIEWS_HELP(tool.name));
  process.exitCode = status;
  if (!views || status !== 0) return;
  const text = lines.join('');
  const out = parseProfileJson(text);
  if (!out.summary) throw new CliError(tool.name, `no summary in the output (${tool.name} stopped early?)`);
  if (sp.pprof !== undefined) {
    writeFileSync(sp.pprof, encodePprof(out.entries, out.summary));
    process.stderr.write(`${tool.name}: wrote ${sp.pprof} (pprof, ${out.entries.length} stacks)\n`);
  }
  if (sp.html !== undefined) {
    writeFileSync(sp.html, flameHtml(out.entries, out.summary, `dwunw ${tool.name}`));
    process.stderr.write(`${tool.name}: wrote ${sp.html} (flame graph)\n`);
  }
  if (sp.json) process.stdout.write(text);
  else if (sp.folded) process.stdout.write(out.folded.map((l) => `${l.folded} ${l.count}\n`).join(''));
}
