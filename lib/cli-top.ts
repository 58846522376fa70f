// The top level of the command line without yargs: `dwunw --help`, no command, an unknown command
// or option. These are answered by node's start alone; yargs is loaded only with a command.
export interface CommandEntry {
  file: string;
  command: string;
  describe: string;
  /** The module, imported only when that command runs (a literal import, so bundlers split it). */
  load: () => Promise<unknown>;
}

export const USAGE = '$0 <command> [options]\n\nDWARF call-frame unwinding for eBPF tools (libdwunw).';

/** Words of `text` in lines of at most `width` characters (a longer word gets a line of its own). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const w of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + w.length > width) {
      lines.push(line);
      line = w;
    } else line = line ? `${line} ${w}` : w;
  }
  if (line) lines.push(line);
  return lines;
}

/** Two columns: names padded to the widest, descriptions wrapped beside them. */
function columns(rows: readonly [string, string][], width: number): string[] {
  const left = Math.max(...rows.map(([n]) => n.length)) + 4;
  const out: string[] = [];
  for (const [name, text] of rows) {
    const body = wrap(text, Math.max(20, width - left));
    out.push(`  ${name.padEnd(left - 2)}${body[0] ?? ''}`.trimEnd());
    for (const more of body.slice(1)) out.push(`${' '.repeat(left)}${more}`);
  }
  return out;
}

/** `dwunw --help`: the commands and the top-level options. */
export function topHelp(commands: readonly CommandEntry[], width: number): string {
  return [
    USAGE.replace('$0', 'dwunw'),
    '',
    'Commands:',
    ...columns(commands.map((c) => [`dwunw ${c.command}`, c.describe]), width),
    '',
    'Options:',
    ...columns([
      ['-V, --version', 'Show the CLI and library versions'],
      ['-h, --help', 'Show help'],
    ], width),
    '',
    'Each command\'s options: dwunw <command> --help',
    '',
  ].join('\n');
}

/** Levenshtein distance, for "did you mean". */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The closest command name, when it is close enough to be a typo. */
export function suggest(word: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const n of names) {
    const d = distance(word, n);
    if (d < bestD) [best, bestD] = [n, d];
  }
  return bestD <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

export type Top =
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'usage'; message: string }
  | { kind: 'command'; entry: CommandEntry };

/** What the arguments ask for, as far as the top level can tell without the command's options. */
export function classify(argv: readonly string[], commands: readonly CommandEntry[]): Top {
  const dd = argv.indexOf('--');
  const before = dd < 0 ? argv : argv.slice(0, dd);
  // --version anywhere before `--` (yargs' own would not know the library's)
  if (before.some((a) => a === '--version' || a === '-V')) return { kind: 'version' };
  const names = commands.map((c) => c.command.split(' ')[0]!);
  const word = before.find((a) => !a.startsWith('-'));
  const entry = word === undefined ? undefined : commands[names.indexOf(word)];
  if (entry) return { kind: 'command', entry };
  if (word === 'help' || before.some((a) => a === '--help' || a === '-h')) return { kind: 'help' };
  const opt = before.find((a) => a.startsWith('-') && a !== '-');
  if (opt !== undefined && (word === undefined || before.indexOf(opt) < before.indexOf(word)))
    return { kind: 'usage', message: `unknown option ${opt.replace(/=.*/, '')}` };
  if (word === undefined) return { kind: 'usage', message: 'no command given' };
  const near = suggest(word, names);
  return { kind: 'usage', message: `unknown command ${word}${near ? `; did you mean ${near}?` : ''}` };
}
