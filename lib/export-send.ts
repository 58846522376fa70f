// Where intervals go: `--export URL` (otlp+grpc://, otlp+http://, pyroscope://), each destination
// with its own bounded queue (bytes), one request in flight, retries with backoff, and counts of
// what was sent and what was dropped (queue full, or given up at exit). Nothing here blocks
// profile: it writes its intervals to a pipe that is read whatever the receivers do.
import http from 'node:http';
import http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { CliError, ExitCode } from './errors.js';
import { OTLP_GRPC_PATH, OTLP_HTTP_PATH } from './otlp-schema.js';
import { PYROSCOPE_PUSH_PATH } from './export-pyroscope.js';

export type Scheme = 'otlp+grpc' | 'otlp+http' | 'pyroscope';

export interface Destination {
  url: string;
  scheme: Scheme;
  host: string;
  port: number;
}

export function parseDestination(url: string, tool = 'profile'): Destination {
  const m = /^(otlp\+grpc|otlp\+http|pyroscope):\/\/(\[[0-9a-fA-F:.]+\]|[^/:]+):(\d+)\/?$/.exec(url);
  if (!m) throw new CliError(tool, `--export ${url}: expected otlp+grpc://HOST:PORT, otlp+http://HOST:PORT or pyroscope://HOST:PORT`, ExitCode.USAGE);
  const port = Number(m[3]);
  if (port < 1 || port > 65535) throw new CliError(tool, `--export ${url}: port out of range`, ExitCode.USAGE);
  return { url, scheme: m[1] as Scheme, host: m[2]!, port };
}

/** --export-header 'K: V' | @FILE (one 'K: V' per line) | env:VAR (its value is 'K: V'). Values never printed. */
export function parseHeaders(specs: string[], tool = 'profile'): Record<string, string> {
  const out: Record<string, string> = {};
  const add = (line: string, from: string) => {
    const i = line.indexOf(':');
    const k = line.slice(0, i).trim().toLowerCase();
    if (i <= 0 || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(k)) throw new CliError(tool, `--export-header ${from}: expected 'NAME: VALUE'`, ExitCode.USAGE);
    out[k] = line.slice(i + 1).trim();
  };
  for (const [n, spec] of specs.entries()) {
    if (spec.startsWith('@')) {
      let text: string;
      try {
        text = readFileSync(spec.slice(1), 'utf8');
      } catch (e) {
        throw new CliError(tool, `--export-header ${spec}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`, ExitCode.USAGE);
      }
      for (const l of text.split('\n')) if (l.trim() && !l.trim().startsWith('#')) add(l, spec);
    } else if (spec.startsWith('env:')) {
      const v = process.env[spec.slice(4)];
      if (v === undefined) throw new CliError(tool, `--export-header ${spec}: not set`, ExitCode.USAGE);
      add(v, spec);
    } else {
      add(spec, `#${n + 1}`); // a value given inline is named by its place only
    }
  }
  return out;
}

export interface Payload {
  body: Buffer;
  seq: number;
  /** samples in it: dropped ones are counted */
  samples: number;
}

export interface DestStats {
  url: string;
  sent: number;
  bytes_sent: number;
  /** intervals dropped: queue full (oldest first), or still queued when the exit deadline came */
  dropped: number;
  dropped_bytes: number;
  dropped_samples: number;
  failures: number;
  retries: number;
  queued_max_bytes: number;
  last_error: string | null;
}

/** One request: resolves on success, rejects with a one-line cause. */
type Sender = (p: Payload, timeoutMs: number) => Promise<void>;

function grpcSender(d: Destination, headers: Record<string, string>): { send: Sender; close(): void } {
  let session: http2.ClientHttp2Session | null = null;
  const connect = (): http2.ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const s = http2.connect(`http://${d.host}:${d.port}`);
    s.on('error', () => {
      // reported by the request that sees it
    });
    s.on('close', () => {
      if (session === s) session = null;
    });
    s.unref();
    session = s;
    return s;
  };
  const send: Sender = (p, timeoutMs) =>
    new Promise((resolve, reject) => {
      const s = connect();
      const frame = Buffer.alloc(5);
      frame[0] = 1; // compressed (grpc-encoding)
      frame.writeUInt32BE(p.body.length, 1);
      let status: string | undefined;
      let message = '';
      let done = false;
      const finish = (err?: string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) {
          // a connection that stalls or failed is not reused
          s.destroy();
          reject(new Error(err));
        } else resolve();
      };
      const timer = setTimeout(() => finish(`no answer in ${timeoutMs} ms`), timeoutMs);
      let req: http2.ClientHttp2Stream;
      try {
        req = s.request({
          ...headers,
          ':method': 'POST',
          ':path': OTLP_GRPC_PATH,
          'content-type': 'application/grpc+proto',
          te: 'trailers',
          'grpc-encoding': 'gzip',
          'grpc-accept-encoding': 'gzip,identity',
        });
      } catch (e) {
        finish((e as Error).message);
        return;
      }
      req.on('response', (h) => {
        if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
        if (h[':status'] !== 200) finish(`HTTP status ${h[':status']}`);
      });
      req.on('trailers', (t) => {
        status = String(t['grpc-status'] ?? status);
        message = decodeURIComponent(String(t['grpc-message'] ?? ''));
      });
      req.on('data', () => {});
      req.on('error', (e) => finish(e.message));
      req.on('close', () => {
        if (status === '0') finish();
        else finish(status === undefined ? `stream closed (${req.rstCode ? `rst ${req.rstCode}` : 'no status'})` : `grpc-status ${status}${message ? `: ${message}` : ''}`);
      });
      req.end(Buffer.concat([frame, p.body]));
    });
  return { send, close: () => session?.close() };
}

/** HTTP/1.1 POSTs of the body to path (OTLP/HTTP: protobuf, gzip; Pyroscope's push: Connect JSON). */
function httpSender(d: Destination, headers: Record<string, string>, path: string, type: Record<string, string>): { send: Sender; close(): void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const send: Sender = (p, timeoutMs) =>
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: d.host.replace(/^\[|\]$/g, ''),
          port: d.port,
          method: 'POST',
          path,
          agent,
          headers: { ...headers, ...type },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => {
            if (chunks.length < 8) chunks.push(c);
          });
          res.on('end', () => {
            clearTimeout(timer);
            if (res.statusCode && res.statusCode >= 200 && res.statusCode < 300) resolve();
            else reject(new Error(`HTTP status ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 200).replace(/\s+/g, ' ')}`));
          });
        },
      );
      const timer = setTimeout(() => {
        req.destroy(new Error(`no answer in ${timeoutMs} ms`));
      }, timeoutMs);
      req.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      req.end(p.body);
    });
  return { send, close: () => agent.destroy() };
}

export interface QueueOptions {
  maxBytes: number;
  timeoutMs: number;
  /** first retry delay; doubles up to maxBackoffMs */
  backoffMs: number;
  maxBackoffMs: number;
}

/** A destination's queue: bounded in bytes; the oldest waiting intervals make room for new ones. */
export class Exporter {
  readonly stats: DestStats;
  private q: Payload[] = [];
  private bytes = 0;
  private busy = false;
  private backoff = 0;
  private timer: NodeJS.Timeout | null = null;
  private sender: { send: Sender; close(): void };
  private idle: (() => void)[] = [];

  constructor(
    readonly dest: Destination,
    headers: Record<string, string>,
    private o: QueueOptions,
  ) {
    this.stats = { url: dest.url, sent: 0, bytes_sent: 0, dropped: 0, dropped_bytes: 0, dropped_samples: 0, failures: 0, retries: 0, queued_max_bytes: 0, last_error: null };
    this.sender =
      dest.scheme === 'otlp+grpc'
        ? grpcSender(dest, headers)
        : dest.scheme === 'otlp+http'
          ? httpSender(dest, headers, OTLP_HTTP_PATH, { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' })
          : httpSender(dest, headers, PYROSCOPE_PUSH_PATH, { 'content-type': 'application/json' });
  }

  push(p: Payload): void {
    // the head may be in flight: it stays; older waiting ones go first
    const first = this.busy ? 1 : 0;
    while (this.bytes + p.body.length > this.o.maxBytes && this.q.length > first) {
      const old = this.q.splice(first, 1)[0]!;
      this.bytes -= old.body.length;
      this.drop(old);
    }
    if (this.bytes + p.body.length > this.o.maxBytes) {
      this.drop(p);
      return;
    }
    this.q.push(p);
    this.bytes += p.body.length;
    if (this.bytes > this.stats.queued_max_bytes) this.stats.queued_max_bytes = this.bytes;
    this.pump();
  }

  private drop(p: Payload): void {
    this.stats.dropped++;
    this.stats.dropped_bytes += p.body.length;
    this.stats.dropped_samples += p.samples;
  }

  private pump(): void {
    if (this.busy || this.timer || !this.q.length) {
      if (!this.busy && !this.timer && !this.q.length) for (const f of this.idle.splice(0)) f();
      return;
    }
    const p = this.q[0]!;
    this.busy = true;
    this.sender.send(p, this.o.timeoutMs).then(
      () => {
        this.busy = false;
        this.q.shift();
        this.bytes -= p.body.length;
        this.stats.sent++;
        this.stats.bytes_sent += p.body.length;
        this.backoff = 0;
        this.pump();
      },
      (e: Error) => {
        this.busy = false;
        this.stats.failures++;
        this.stats.last_error = e.message;
        this.backoff = this.backoff ? Math.min(this.backoff * 2, this.o.maxBackoffMs) : this.o.backoffMs;
        this.timer = setTimeout(() => {
          this.timer = null;
          this.stats.retries++;
          this.pump();
        }, this.backoff);
        this.timer.unref();
      },
    );
  }

  /** Waits until the queue is empty or the deadline; what is left then is dropped. */
  async drain(deadline: number): Promise<void> {
    if (this.q.length) {
      if (this.timer) {
        // retry now: the exit is no time to wait out a backoff
        clearTimeout(this.timer);
        this.timer = null;
        this.pump();
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        this.idle.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    if (this.timer) clearTimeout(this.timer);
    for (const p of this.q.splice(0)) this.drop(p);
    this.bytes = 0;
    this.sender.close();
  }
}
