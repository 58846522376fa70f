// `dwunw profile --export URL ...`: profile runs with --json --interval SEC; each interval read from
// its stdout (or each report of `dwunw memleak --export`) becomes one OTLP request (lib/export-otlp.ts), sent to each destination,
// queued in that destination's bounded queue (lib/export-send.ts). At the end the last, partial
// interval is sent too, the queues get a deadline to drain, and the counts are reported.
import { Exporter, type DestStats, parseDestination, parseHeaders } from './export-send.js';
import { type Interval, IntervalReader } from './export-interval.js';
import { encodeOtlp } from './export-otlp.js';
import { encodePyroscope } from './export-pyroscope.js';
import { CliError, ExitCode } from './errors.js';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface ExportOptions {
  /** profile or memleak: names the errors and summary lines */
  tool: string;
  urls: string[];
  intervalS: number;
  service?: string;
  headers: string[];
  queueBytes: number;
  timeoutMs: number;
}

export const EXPORT_DEFAULTS = { intervalS: 60, queueBytes: 16 << 20, timeoutMs: 10000 };

/** A size: N, Nk, Nm (KiB, MiB). */
export function parseBytes(v: string, what: string, tool: string): number {
  const m = /^(\d+)([kKmM]?)$/.exec(v);
  if (!m) throw new CliError(tool, `${what} ${v}: expected BYTES, or N with k or m`, ExitCode.USAGE);
  const n = Number(m[1]) * (m[2] ? (m[2].toLowerCase() === 'k' ? 1024 : 1 << 20) : 1);
  if (n < 1024) throw new CliError(tool, `${what} ${v}: at least 1024 bytes`, ExitCode.USAGE);
  return n;
}

let fullGc: (() => void) | null = null;
let gcPending = false;

/**
 * A full collection once an interval is handed to the queues: what V8 holds at interval ends is
 * then what is live (the queues, the process cache: ~8 MB of heap), not the interval's stacks
 * and request promoted into the old space and waiting for a collection. Measured with
 * scripts/export-soak (-a, 10 s intervals, ~900 stacks and 3.5 MB of profile's JSON each): the
 * heap used after a collection stayed at 8.0-8.4 MB over the run (nothing retained) while the
 * old space's pages went 11 -> 27 MB and back between collections, and V8's young generation
 * grew 1 -> 32 MB over the first minutes (bin/dwunw fixes it at 2 x 4 MiB). Its price, an
 * interval of 443 stacks encoded 30 times in a row: RSS 81-86 MB with it, 92-117 MB without;
 * CPU 21 ms in the collection, 141-185 ms per interval with it against 73-75 ms without (the
 * next encode runs on a swept old space instead of a young generation of garbage).
 */
function collectInterval(): void {
  if (gcPending) return;
  gcPending = true;
  // once the interval's objects are unreachable: after the call that handed it over returns
  setImmediate(() => {
    gcPending = false;
    if (!fullGc) {
      setFlagsFromString('--expose-gc');
      fullGc = runInNewContext('gc') as () => void;
    }
    fullGc();
  });
}

export class ExportRun {
  readonly exporters: Exporter[];
  private reader = new IntervalReader();
  intervals = 0;
  samples = 0;

  constructor(private o: ExportOptions) {
    const headers = parseHeaders(o.headers, o.tool);
    this.exporters = o.urls.map(
      (u) => new Exporter(parseDestination(u, o.tool), headers, { maxBytes: o.queueBytes, timeoutMs: o.timeoutMs, backoffMs: 500, maxBackoffMs: 30000 }),
    );
  }

  /** A parsed line of profile's stdout. */
  line(v: unknown): void {
    const iv = this.reader.line(v);
    if (iv) this.send(iv);
  }

  /** An interval (profile's, or a memleak report: lib/export-memleak.ts) to every destination. */
  send(iv: Interval): void {
    this.intervals++;
    this.samples += iv.line.samples;
    if (!iv.entries.length) return; // nothing sampled: nothing to send
    // each format encoded once, for the destinations that take it
    const bodies = new Map<string, Buffer>();
    for (const x of this.exporters) {
      const f = x.dest.scheme === 'pyroscope' ? 'pyroscope' : 'otlp';
      let body = bodies.get(f);
      if (!body) bodies.set(f, (body = f === 'otlp' ? encodeOtlp(iv, this.o.service) : encodePyroscope(iv, this.o.service)));
      x.push({ body, seq: iv.line.seq, samples: iv.line.samples });
    }
    collectInterval();
  }

  async finish(deadlineMs: number): Promise<DestStats[]> {
    const deadline = Date.now() + deadlineMs;
    await Promise.all(this.exporters.map((x) => x.drain(deadline)));
    return this.exporters.map((x) => x.stats);
  }
}

/** The summary line of the export on stderr (header values never appear). */
export function exportSummary(stats: DestStats[], intervals: number, tool: string): string {
  return stats
    .map(
      (s) =>
        `${tool}: export ${s.url}: ${intervals} intervals, ${s.sent} requests sent (${(s.bytes_sent / 1024).toFixed(1)} KiB), ${s.dropped} dropped` +
        (s.failures ? `, ${s.failures} failed attempts (last: ${s.last_error})` : '') +
        `; queue peak ${(s.queued_max_bytes / 1024).toFixed(1)} KiB\n`,
    )
    .join('');
}

export const exportHelp = (tool: string): string => `
dwunw ${tool} exports continuously with:
      --export=URL           send one profile per interval while ${tool === 'memleak' ? 'tracing' : 'sampling'} goes on (repeatable):
                             otlp+grpc://HOST:PORT, otlp+http://HOST:PORT (OTLP profiles,
                             v1development, gzip); pyroscope://HOST:PORT (pprof, its push API)
      --interval=SEC         seconds per interval (${EXPORT_DEFAULTS.intervalS}); the last${tool === 'memleak' ? ' report' : ', partial one'} is sent at exit${tool === 'memleak' ? `
                             (memleak: each report's outstanding allocations as inuse_space
                             and inuse_objects; with -a also what was allocated since the last
                             report, freed or not, as alloc_space and alloc_objects; the reports
                             on stdout with --json only)` : ''}
      --service=NAME         service.name (default: each process's executable name)
      --export-header=H      'NAME: VALUE', @FILE (one per line) or env:VAR; never printed
      --export-queue=BYTES   queue per destination (${EXPORT_DEFAULTS.queueBytes >> 20}m); beyond it the oldest
                             intervals are dropped and counted
      --export-timeout=SEC   per request, and for the queues to drain at exit (${EXPORT_DEFAULTS.timeoutMs / 1000})
`;
