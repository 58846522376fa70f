// dwunw profile [ARGS...] [-- COMMAND ARGS...]: runs build/bpf/profile (bpf/profile/profile.c) with the same
// arguments (its flags: -p, -L, -U, -K, -F, -c, -C, -I, -f, -d, --unwind, --json, ...; `dwunw
// profile --help` shows them) and exits with its status. Two views are made here from its --json
// output: --pprof FILE (gzip'd profile.proto, lib/profile-pprof.ts) and --html FILE (a
// self-contained flame graph, lib/profile-html.ts); with them, stdout carries the folded lines
// with -f, the NDJSON with --json, else nothing (the summary stays on stderr).
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { CliError, ExitCode } from '../lib/errors.js';
import { parseProfileJson, profilePath } from '../lib/profile.js';
import { flameHtml } from '../lib/profile-html.js';
import { encodePprof } from '../lib/profile-pprof.js';

type Args = PassthroughArgs;

export const command = 'profile [args..]';
export const describe = 'CPU profile by stack, system-wide or of processes, with DWARF user stacks (folded, pprof, HTML flame graph)';

export function builder(y: Argv): Argv<Args> {
  // Everything goes to profile as given (--help included), except --pprof and --html.
  return passthroughBuilder(y, 'profile');
}

const EXTRA_HELP = `
dwunw profile adds:
      --pprof=FILE           write a gzip'd pprof profile (go tool pprof, Parca, Pyroscope)
      --html=FILE            write a self-contained flame graph (d3-flame-graph)
`;

/** Our options taken out of profile's: { pprof, html, folded, json, rest }. */
export function splitArgs(args: string[]): { pprof?: string; html?: string; folded: boolean; json: boolean; rest: string[] } {
  const out: { pprof?: string; html?: string; folded: boolean; json: boolean; rest: string[] } = { folded: false, json: false, rest: [] };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') break;
    const m = /^--(pprof|html)(?:=(.*))?$/.exec(a);
    if (m) {
      const v = m[2] ?? args[++i];
      if (!v || v === '--') throw new CliError('profile', `--${m[1]}: a file name is expected`, ExitCode.USAGE);
      out[m[1] as 'pprof' | 'html'] = v;
      continue;
    }
    if (a === '--folded' || /^-[UKIdav]*f[UKIdav]*$/.test(a)) out.folded = true;
    if (a === '--json') out.json = true;
    out.rest.push(a);
  }
  out.rest.push(...args.slice(i));
  return out;
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  await profile([...before, ...(after.length ? ['--', ...after] : [])]);
}

export async function profile(args: string[]): Promise<void> {
  const bin = profilePath();
  if (!existsSync(bin)) throw new CliError('profile', `${bin} is not built (run make bpf)`);
  const sp = splitArgs(args);
  const views = sp.pprof !== undefined || sp.html !== undefined;
  let run = sp.rest;
  if (views) {
    // profile writes NDJSON for the views (with -f, its folded lines in it: printed as they come)
    const dd = run.indexOf('--');
    const head = (dd < 0 ? run : run.slice(0, dd)).filter((a) => a !== '--json');
    run = [...head, '--json', ...(dd < 0 ? [] : run.slice(dd))];
  }
  const child = spawn(bin, run, { stdio: ['inherit', views ? 'pipe' : 'inherit', 'inherit'] });
  const forward = (sig: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  const onExit = () => forward('SIGTERM')();
  process.on('exit', onExit);
  const chunks: Buffer[] = [];
  if (views) child.stdout!.on('data', (d: Buffer) => chunks.push(d));
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', (e) => reject(new CliError('profile', `${bin}: ${e.message}`)));
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  for (const [s, h] of handlers) process.removeListener(s, h);
  process.removeListener('exit', onExit);
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(EXTRA_HELP);
  process.exitCode = status ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
  if (!views || status !== 0) return;
  const text = Buffer.concat(chunks).toString('utf8');
  const out = parseProfileJson(text);
  if (!out.summary) throw new CliError('profile', 'no summary in the output (profile stopped early?)');
  if (sp.pprof !== undefined) {
    writeFileSync(sp.pprof, encodePprof(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.pprof} (pprof, ${out.summary.samples} samples)\n`);
  }
  if (sp.html !== undefined) {
    writeFileSync(sp.html, flameHtml(out.entries, out.summary));
    process.stderr.write(`profile: wrote ${sp.html} (flame graph)\n`);
  }
  if (sp.json) process.stdout.write(text);
  else if (sp.folded) process.stdout.write(out.folded.map((l) => `${l.folded} ${l.count}\n`).join(''));
}
