// `dwunw profile --export URL ...`: profile runs with --json --interval SEC; each interval read from
// its stdout becomes one request per destination (lib/export-otlp.ts, or pprof for Pyroscope),
// queued in that destination's bounded queue (lib/export-send.ts). At the end the last, partial
// interval is sent too, the queues get a deadline to drain, and the counts are reported.
import { Exporter, type DestStats, type Payload, parseDestination, parseHeaders } from './export-send.js';
import { IntervalReader, type Interval, serviceName } from './export-interval.js';
import { encodeOtlp } from './export-otlp.js';
import { encodePprof } from './profile-pprof.js';
import type { PrEntry, PrSummary } from './profile.js';
import { CliError, ExitCode } from './errors.js';

export interface ExportOptions {
  urls: string[];
  intervalS: number;
  service?: string;
  headers: string[];
  queueBytes: number;
  timeoutMs: number;
}

export const EXPORT_DEFAULTS = { intervalS: 60, queueBytes: 16 << 20, timeoutMs: 10000 };

/** A size: N, Nk, Nm (KiB, MiB). */
export function parseBytes(v: string, what: string): number {
  const m = /^(\d+)([kKmM]?)$/.exec(v);
  if (!m) throw new CliError('profile', `${what} ${v}: expected BYTES, or N with k or m`, ExitCode.USAGE);
  const n = Number(m[1]) * (m[2] ? (m[2].toLowerCase() === 'k' ? 1024 : 1 << 20) : 1);
  if (n < 1024) throw new CliError('profile', `${what} ${v}: at least 1024 bytes`, ExitCode.USAGE);
  return n;
}

/** Pyroscope /ingest: one pprof per service (its application name) in the interval. */
function pyroscopePayloads(iv: Interval, service?: string): Payload[] {
  const groups = new Map<string, PrEntry[]>();
  for (const e of iv.entries) {
    const p = iv.procs.get(e.pid) ?? { pid: e.pid, exe: null, container: null };
    const name = serviceName(p, e.comm, service);
    let g = groups.get(name);
    if (!g) groups.set(name, (g = []));
    g.push(e);
  }
  const from = Math.floor(iv.line.start_unix_ns / 1e9);
  const until = Math.max(from + 1, Math.ceil((iv.line.start_unix_ns + iv.line.duration_ns) / 1e9));
  return [...groups].map(([name, entries]) => {
    const summary = {
      modules: [...iv.buildIds].map(([path, build_id]) => ({ path, build_id })),
      period: iv.periodNs,
      frequency: iv.line.frequency,
      start_unix_ns: iv.line.start_unix_ns,
      duration_ns: iv.line.duration_ns,
      event: 'cpu-clock',
      unwind: 'dwarf',
    } as unknown as PrSummary;
    // the application name: printable, no braces (they open the labels)
    const app = `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.cpu{host_name=${iv.host.replace(/[^A-Za-z0-9_.-]/g, '_')}}`;
    const query = new URLSearchParams({ name: app, from: String(from), until: String(until), format: 'pprof', spyName: 'dwunw', sampleRate: String(iv.line.frequency || 100) });
    return { body: encodePprof(entries, summary), query: query.toString(), seq: iv.line.seq, samples: entries.reduce((n, e) => n + e.count, 0) };
  });
}

export class ExportRun {
  readonly exporters: Exporter[];
  private reader = new IntervalReader();
  intervals = 0;
  samples = 0;
  lastInterval: Interval | null = null;

  constructor(private o: ExportOptions) {
    const headers = parseHeaders(o.headers);
    this.exporters = o.urls.map(
      (u) => new Exporter(parseDestination(u), headers, { maxBytes: o.queueBytes, timeoutMs: o.timeoutMs, backoffMs: 500, maxBackoffMs: 30000 }),
    );
  }

  /** A parsed line of profile's stdout. */
  line(v: unknown): void {
    const iv = this.reader.line(v);
    if (!iv) return;
    this.intervals++;
    this.samples += iv.line.samples;
    if (!iv.entries.length) return; // nothing sampled: nothing to send
    let otlp: Buffer | undefined;
    let pyro: Payload[] | undefined;
    for (const x of this.exporters) {
      if (x.dest.scheme === 'pyroscope') {
        pyro ??= pyroscopePayloads(iv, this.o.service);
        for (const p of pyro) x.push(p);
      } else {
        otlp ??= encodeOtlp(iv, this.o.service);
        x.push({ body: otlp, seq: iv.line.seq, samples: iv.line.samples });
      }
    }
  }

  /** The entries after the last interval line: the run's totals. */
  totals(): PrEntry[] {
    return this.reader.takeRest();
  }

  async finish(deadlineMs: number): Promise<DestStats[]> {
    const deadline = Date.now() + deadlineMs;
    await Promise.all(this.exporters.map((x) => x.drain(deadline)));
    return this.exporters.map((x) => x.stats);
  }
}

/** The summary line of the export on stderr (header values never appear). */
export function exportSummary(stats: DestStats[], intervals: number): string {
  return stats
    .map(
      (s) =>
        `profile: export ${s.url}: ${intervals} intervals, ${s.sent} requests sent (${(s.bytes_sent / 1024).toFixed(1)} KiB), ${s.dropped} dropped` +
        (s.failures ? `, ${s.failures} failed attempts (last: ${s.last_error})` : '') +
        `; queue peak ${(s.queued_max_bytes / 1024).toFixed(1)} KiB\n`,
    )
    .join('');
}

export const exportHelp = `
dwunw profile exports continuously with:
      --export=URL           send one profile per interval while sampling goes on (repeatable):
                             otlp+grpc://HOST:PORT, otlp+http://HOST:PORT (OTLP profiles,
                             v1development, gzip), pyroscope://HOST:PORT (pprof, /ingest)
      --interval=SEC         seconds per interval (${EXPORT_DEFAULTS.intervalS}); the last, partial one is sent at exit
      --service=NAME         service.name (default: each process's executable name)
      --export-header=H      'NAME: VALUE', @FILE (one per line) or env:VAR; never printed
      --export-queue=BYTES   queue per destination (${EXPORT_DEFAULTS.queueBytes >> 20}m); beyond it the oldest
                             intervals are dropped and counted
      --export-timeout=SEC   per request, and for the queues to drain at exit (${EXPORT_DEFAULTS.timeoutMs / 1000})
`;
