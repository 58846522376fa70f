// Output helpers shared by the subcommands: colors, one-line errors, streamed writes.
import { once } from 'node:events';
import chalk, { Chalk, type ChalkInstance } from 'chalk';

export { CliError, ExitCode } from './errors.js';

/** Write `dwunw: <what>: <cause>` to stderr and make the process exit with `status` (1). */
export function reportError(what: string, reason?: string, status = 1): void {
  const line = reason === undefined || reason === '' ? what : `${what}: ${reason}`;
  process.stderr.write(`dwunw: ${line.replace(/\s*\n\s*/g, ' ').trim()}\n`);
  process.exitCode = status;
}

/**
 * Colors for a stream: none when it is not a terminal or NO_COLOR is set (non-empty);
 * FORCE_COLOR (other than "0") turns them on anyway.
 */
export function colorsFor(stream: NodeJS.WriteStream): ChalkInstance {
  const env = process.env;
  let level: 0 | 1 | 2 | 3 = 0;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false') {
    level = chalk.level > 0 ? chalk.level : 1;
  } else if (stream.isTTY && !env.NO_COLOR) {
    level = chalk.level > 0 ? chalk.level : 1;
  }
  return new Chalk({ level });
}

/**
 * Collects small strings and writes them in chunks of about `chunkSize` characters, waiting for
 * 'drain' when the stream's buffer is full: large outputs are never held as one string.
 */
export class ChunkedWriter {
  private parts: string[] = [];
  private size = 0;

  constructor(
    private readonly stream: NodeJS.WritableStream = process.stdout,
    private readonly chunkSize = 64 * 1024,
  ) {}

  async write(s: string): Promise<void> {
    this.parts.push(s);
    this.size += s.length;
    if (this.size >= this.chunkSize) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.size === 0) return;
    const chunk = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (!this.stream.write(chunk)) await once(this.stream, 'drain');
  }
}

/** Parse an address: hex with 0x, hex with a-f digits or a leading 0, otherwise decimal. */
export function parseAddress(text: string): bigint | null {
  const s = text.trim().toLowerCase();
  let v: bigint;
  if (/^0x[0-9a-f]+$/.test(s)) v = BigInt(s);
  else if (/^[0-9a-f]*[a-f][0-9a-f]*$/.test(s) || /^0[0-9]+$/.test(s)) v = BigInt(`0x${s}`);
  else if (/^[0-9]+$/.test(s)) v = BigInt(s);
  else return null;
  return v < 1n << 64n ? v : null;
}

export const hex = (v: bigint, digits = 0): string => `0x${v.toString(16).padStart(digits, '0')}`;
