// dwunw memleak [ARGS...]: runs build/bpf/memleak (bpf/memleak/memleak.c) with the same arguments, untouched
// (its own flags: -p, -c, -a, -o, -T, --unwind, --json, ...; `dwunw memleak --help` shows them),
// and exits with its status. On a terminal its text report is colored line by line (stack
// headers, symbol names, stop reasons); piped, or with --json/--folded, the output is memleak's
// own, byte for byte.
//
// dwunw memleak --demo [--rounds N] [--json]: builds what is missing, runs the workload
// fixtures/x86_64/leaky (-O2 -fomit-frame-pointer) under two memleaks at once (--unwind=dwarf and
// --unwind=fp), and prints each leak site's two stacks side by side, checked against the chains of
// `leaky --manifest`, then a completeness summary (lib/memleak-demo.ts). `npm start` runs it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { ChalkInstance } from 'chalk';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { type PassthroughArgs, passthroughBuilder } from '../lib/passthrough.js';
import { memleakPath } from '../lib/memleak.js';
import { demoJson, demoText, runDemo } from '../lib/memleak-demo.js';
import { CliError, ExitCode, colorsFor } from '../lib/output.js';

type Args = PassthroughArgs;

export const command = 'memleak [args..]';
export const describe = 'Outstanding allocations of a process by stack, with DWARF stacks (memleak; --demo: a side-by-side demo)';

export function builder(y: Argv): Argv<Args> {
  // Everything goes to memleak as given: no option of ours is parsed here, --help included.
  return passthroughBuilder(y, 'memleak');
}

export async function handler(argv: ArgumentsCamelCase<Args>): Promise<void> {
  // before `--`: in args; after it: in _ (after the command's name)
  const before = (argv.args ?? []).map(String);
  const after = argv._.slice(1).map(String);
  if (before.includes('--demo')) await demo(before, after);
  // `-- PROG ARGS`: the program memleak runs and follows (yargs took the `--` away)
  else await memleak(after.length ? [...before, '--', ...after] : before);
}

const DEMO_HELP = `
dwunw memleak runs build/bpf/memleak with these arguments (colored on a terminal).
  dwunw memleak --demo [--rounds N] [--json]
                            trace fixtures/x86_64/leaky (-O2 -fomit-frame-pointer) with DWARF and
                            frame-pointer unwinding at once; print both stacks of each leak site
                            side by side and a completeness summary (N rounds of leaks, 3)
`;

// ---- memleak, passed through -------------------------------------------------------------------

export async function memleak(args: string[]): Promise<void> {
  const bin = memleakPath();
  if (!existsSync(bin)) throw new CliError('memleak', `${bin} is not built (run make bpf)`);
  const c = colorsFor(process.stdout);
  const colored = c.level > 0;
  // DWUNW_PARENT_PID: memleak dies with this process (PR_SET_PDEATHSIG), even of SIGKILL
  const child = spawn(bin, args, {
    stdio: ['inherit', colored ? 'pipe' : 'inherit', 'inherit'],
    env: { ...process.env, DWUNW_PARENT_PID: String(process.pid) },
  });
  const forward = (sig: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  // dwunw ending first (its stdout closed) must not leave memleak running
  const onExit = () => forward('SIGTERM')();
  process.on('exit', onExit);
  if (colored) {
    let rest = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      const lines = (rest + d).split('\n');
      rest = lines.pop()!;
      if (lines.length) process.stdout.write(`${lines.map((l) => colorLine(c, l)).join('\n')}\n`);
    });
    child.stdout!.on('end', () => {
      if (rest) process.stdout.write(colorLine(c, rest));
    });
  }
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', (e) => reject(new CliError('memleak', `${bin}: ${e.message}`)));
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  for (const [s, h] of handlers) process.removeListener(s, h);
  process.removeListener('exit', onExit);
  if (status === 0 && args.some((a) => a === '--help' || a === '-h')) process.stdout.write(DEMO_HELP);
  process.exitCode = status ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
}

/** One line of memleak's text report, colored; other lines (JSON, folded) unchanged. */
export function colorLine(c: ChalkInstance, line: string): string {
  let m: RegExpExecArray | null;
  if ((m = /^\t(\d+) \[<([0-9a-f]{16})>\] (.*)$/.exec(line))) {
    const [, idx, pc, all] = m as unknown as [string, string, string, string];
    const head = `\t${idx} ${c.dim(`[<${pc}>]`)} `;
    // where the frame came from, when it rests on more than the captured stack and CFI
    const mk = /((?: \[(?:live|fp|prologue|lr|jit)\])*)$/.exec(all)!;
    const rest = all.slice(0, all.length - mk[1]!.length);
    const marks = mk[1] ? (mk[1].includes('[live]') ? c.red(mk[1]) : c.magenta(mk[1])) : '';
    let s: RegExpExecArray | null;
    if ((s = /^(.+)\+0x([0-9a-f]+) \[(.*)\]$/.exec(rest))) return `${head}${c.cyan.bold(s[1]!)}${c.dim(`+0x${s[2]}`)} ${c.dim(`[${s[3]}]`)}${marks}`;
    if ((s = /^(.+)\+0x([0-9a-f]+)$/.exec(rest)) && !rest.startsWith('[')) return `${head}${c.cyan.bold(s[1]!)}${c.dim(`+0x${s[2]}`)}${marks}`;
    if (/^\[(unwind stopped|unwind failed|stack lost|stack unknown|stack table full)/.test(rest) || rest === '[unknown]') return head + c.red(rest) + marks;
    return head + c.yellow(rest) + marks;
  }
  if (/^frames marked \[/.test(line)) return c.dim(line);
  if ((m = /^(\d+) bytes in (\d+) allocations from stack$/.exec(line))) {
    return `${c.yellow.bold(m[1]!)} bytes in ${c.yellow.bold(m[2]!)} allocations from stack`;
  }
  if (/^\[\d+:\d+:\d+\] Top \d+ stacks with outstanding allocations:$/.test(line)) return c.bold.underline(line);
  if (/^Attaching to pid \d+, Ctrl\+C to quit\.$/.test(line)) return c.dim(line);
  if (/^\taddr = 0x[0-9a-f]+ size = \d+$/.test(line)) return c.dim(line);
  if ((m = /^(dwarf|kernel): (\d+) stacks, (\d+) complete, (\d+) stopped early(.*)$/.exec(line))) {
    const ok = m[2] === m[3];
    return c.dim(`${m[1]}: `) + (ok ? c.green : c.red)(line.slice(m[1]!.length + 2));
  }
  if (/^kernel walker: \d+ events, /.test(line)) return c.dim(line);
  if (/^lost \d+ records|^\d+ (allocations|stacks) not (tracked|stored|aggregated)/.test(line)) return c.red(line);
  if (/^\[\d+\] \w+: (alloc exited|free entered)/.test(line)) return c.dim(line);
  return line;
}

// ---- --demo ------------------------------------------------------------------------------------------

async function demo(before: string[], after: string[]): Promise<void> {
  let rounds = 3;
  let json = false;
  const rest = [...before.filter((a) => a !== '--demo'), ...after];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    let v: string | undefined;
    if (a === '--json') json = true;
    else if (a === '--rounds' || a.startsWith('--rounds=')) {
      v = a === '--rounds' ? rest[++i] : a.slice('--rounds='.length);
      if (v === undefined || !/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 60)
        throw new CliError('usage', `--rounds: expected 1 to 60, got ${v ?? 'nothing'} (see dwunw memleak --help)`, ExitCode.USAGE);
      rounds = Number(v);
    } else throw new CliError('usage', `memleak --demo takes --rounds N and --json only, not ${a} (see dwunw memleak --help)`, ExitCode.USAGE);
  }
  const err = colorsFor(process.stderr);
  const r = await runDemo({ rounds, progress: (l) => process.stderr.write(err.dim(`dwunw: ${l}\n`)) });
  if (json) {
    process.stdout.write(`${JSON.stringify(demoJson(r))}\n`);
    return;
  }
  const c = colorsFor(process.stdout);
  process.stdout.write(demoText(c, r, process.stdout.isTTY ? process.stdout.columns || 80 : 0));
}
