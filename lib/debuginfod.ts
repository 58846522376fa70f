// Debug files from debuginfod for the CLI: whether to ask (--debuginfod / --no-debuginfod,
// DEBUGINFOD_URLS), and the one summary line for modules whose file did not come. The fetching
// itself is libdwunw's (native/src/debuginfod.c: a worker thread, libdebuginfod by dlopen).
import { basename } from 'node:path';
import type { DebuginfodResult, Dwunw, Frame } from './dwunw.js';
import { CliError, ExitCode } from './output.js';

/** How long a report waits for fetches still running (libdebuginfod has its own timeouts too). */
export const DEBUGINFOD_WAIT_MS = 60_000;

/** On when asked, or when DEBUGINFOD_URLS names a server and --no-debuginfod was not given. */
export function debuginfodWanted(flag: boolean | undefined): boolean {
  const urls = (process.env.DEBUGINFOD_URLS ?? '').trim();
  if (flag === true && urls === '') throw new CliError('--debuginfod', 'DEBUGINFOD_URLS is not set: no server to ask', ExitCode.USAGE);
  return flag ?? urls !== '';
}

/**
 * Wait for the fetches, name the frames again with what came, and return the summary lines: one
 * for the modules whose debug file did not come (which, and why), none when all came.
 */
export function nameAfterFetch(d: Dwunw, stacks: Frame[][], waitMs = DEBUGINFOD_WAIT_MS): string[] {
  const pending = d.debuginfodWait(waitMs);
  for (const frames of stacks) d.renameFrames(frames);
  return debuginfodSummary(d.debuginfodResults(), pending, waitMs);
}

export function debuginfodSummary(results: DebuginfodResult[], pending: number, waitMs: number): string[] {
  const missing = results.filter((r) => r.state === 'failed' || r.state === 'pending');
  if (missing.length === 0) return [];
  const why = (r: DebuginfodResult): string => (r.state === 'pending' ? `no answer within ${waitMs / 1000} s` : r.why);
  const shown = missing.slice(0, 4).map((r) => `${basename(r.module)} (${why(r)})`);
  const more = missing.length > shown.length ? `, and ${missing.length - shown.length} more` : '';
  const lead = pending ? `${missing.length} modules (${pending} still fetching)` : `${missing.length} module${missing.length > 1 ? 's' : ''}`;
  return [`dwunw: debuginfod: no debug file for ${lead}: ${shown.join(', ')}${more}; their frames keep [unknown]`];
}
