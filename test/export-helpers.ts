// What the export tests (test/export*.test.ts) share: the OpenTelemetry Collector, built by `make engines`
// from its Go modules (test/engines/otelcol, a pinned release), started on loopback with the
// profiles feature gate, one pipeline per receiver protocol into a file exporter; what it wrote
// decoded from pdata's OTLP JSON; profile's output read back.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { jsonLines, root, type Run, start, type Started, until } from './helpers.js';
import type { PrEntry, PrFolded, PrSummary } from '../lib/profile.js';

export const otelcol = join(root, 'build', 'engines', 'otelcol');
/** Pyroscope's push API receiver (test/engines/pyroscope) */
export const pyroscopePush = join(root, 'build', 'engines', 'pyroscope-push');

/** Builds the engines when one is missing (make engines, under a lock: tests run in parallel). */
export function ensureEngines(): string | null {
  if (!existsSync(otelcol) || !existsSync(pyroscopePush)) {
    try {
      execFileSync('flock', [join(tmpdir(), 'dwunw-engines.lock'), 'make', '-s', 'engines'], { cwd: root, stdio: 'inherit', timeout: 1_500_000 });
    } catch (e) {
      return `make engines failed: ${(e as Error).message.split('\n')[0]}`;
    }
  }
  for (const e of [otelcol, pyroscopePush]) if (!existsSync(e)) return `${e} not built (make engines)`;
  return null;
}

/** A free loopback port (listen on 0, close). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface Collector {
  run: Started;
  grpc: number;
  http: number;
  files: { grpc: string; http: string };
}

export async function startCollector(dir: string, tag: string, ports?: { grpc: number; http: number }): Promise<Collector> {
  const grpc = ports?.grpc ?? (await freePort());
  const http = ports?.http ?? (await freePort());
  const files = { grpc: join(dir, `grpc-${tag}.json`), http: join(dir, `http-${tag}.json`) };
  const cfg = join(dir, `otelcol-${tag}.yaml`);
  writeFileSync(
    cfg,
    `receivers:
  otlp/grpc:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${grpc}
  otlp/http:
    protocols:
      http:
        endpoint: 127.0.0.1:${http}
exporters:
  file/grpc:
    path: ${files.grpc}
  file/http:
    path: ${files.http}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles/grpc:
      receivers: [otlp/grpc]
      exporters: [file/grpc]
    profiles/http:
      receivers: [otlp/http]
      exporters: [file/http]
`,
  );
  let log = '';
  const run = start(otelcol, ['--config', cfg, '--feature-gates=+service.profilesSupport'], {
    timeoutMs: 600_000,
    onOutput: (o, e) => (log = o + e),
  });
  if (!(await until(() => /Everything is ready/.test(log) || run.child.exitCode !== null, 120_000)) || run.child.exitCode !== null)
    throw new Error(`the Collector did not start: ${log.slice(-2000)}`);
  return { run, grpc, http, files };
}

export async function stopCollector(c: Collector): Promise<Run> {
  c.run.child.kill('SIGTERM');
  return c.run.done;
}

/**
 * Pyroscope's push API on a free loopback port (build/engines/pyroscope-push), writing what it
 * receives to `out`; checked listening on tt, stopped at tt's teardown. Its port.
 */
export async function startPushReceiver(tt: Test, out: string): Promise<string> {
  let log = '';
  const recv = start(pyroscopePush, ['-addr', '127.0.0.1:0', '-out', out], { timeoutMs: 300_000, onOutput: (o, e) => (log = o + e) });
  tt.teardown(() => {
    recv.child.kill('SIGTERM');
  });
  tt.ok(await until(() => /listening on 127\.0\.0\.1:\d+/.test(log) || recv.child.exitCode !== null, 60_000), `the receiver listens (${log.slice(-300)})`);
  return /listening on 127\.0\.0\.1:(\d+)/.exec(log)![1]!;
}

// ---- What the Collector wrote: its file exporter's JSON (pdata's OTLP JSON) ------------------------

export interface KV {
  key: string;
  value: { stringValue?: string; stringValueStrindex?: number; intValue?: string | number };
}
export interface OtlpFile {
  resourceProfiles?: {
    resource?: { attributes?: KV[] };
    scopeProfiles?: { profiles?: { profileId?: string; sampleType?: { typeStrindex?: number }; samples?: { stackIndex?: number; attributeIndices?: number[]; values?: (string | number)[] }[] }[] }[];
  }[];
  dictionary?: {
    mappingTable?: { filenameStrindex?: number; attributeIndices?: number[] }[];
    locationTable?: { mappingIndex?: number; address?: string; lines?: { functionIndex?: number }[]; attributeIndices?: number[] }[];
    functionTable?: { nameStrindex?: number }[];
    stringTable?: string[];
    attributeTable?: { keyStrindex?: number; value?: KV['value'] }[];
    stackTable?: { locationIndices?: number[] }[];
  };
}

export interface Received {
  /** stack (names root first, comm first, '-' removed) -> samples */
  stacks: Map<string, number>;
  samples: number;
  profiles: Set<string>;
  resources: Record<string, string>[];
  /** every sample had thread.id and thread.name */
  threadAttrs: boolean;
  /** every location had profile.frame.type and dwunw.frame.origin */
  locationAttrs: boolean;
  frameTypes: Set<string>;
  /** mapping file -> its build id attribute */
  buildIds: Map<string, string>;
  /** mapping file -> how many requests had a mapping of it without a build id attribute */
  noBuildId: Map<string, number>;
  requests: number;
}

/** An attribute's value (the Collector moves strings into the dictionary: stringValueStrindex). */
export const val = (v: KV['value'] | undefined, str: string[]): string =>
  String(v?.stringValue ?? (v?.stringValueStrindex !== undefined ? str[v.stringValueStrindex] : undefined) ?? v?.intValue ?? '');

/** What the files hold: the samples of profiles of sampleType, by stack (thread name first, root first). */
export function decode(files: string[], sampleType = 'samples'): Received {
  const r: Received = { stacks: new Map(), samples: 0, profiles: new Set(), resources: [], threadAttrs: true, locationAttrs: true, frameTypes: new Set(), buildIds: new Map(), noBuildId: new Map(), requests: 0 };
  for (const f of files) {
    if (!existsSync(f)) continue;
    // whole lines only: the Collector may be writing the last one
    const text = readFileSync(f, 'utf8');
    for (const req of jsonLines<OtlpFile>(text.slice(0, text.lastIndexOf('\n') + 1))) {
      r.requests++;
      const d = req.dictionary!;
      const str = d.stringTable ?? [];
      const attr = (i: number) => d.attributeTable![i]!;
      const attrs = (ix: number[] | undefined) => new Map((ix ?? []).map((i) => [str[attr(i).keyStrindex ?? 0]!, val(attr(i).value, str)]));
      for (const [i, m] of (d.mappingTable ?? []).entries()) {
        const b = attrs(m.attributeIndices).get('process.executable.build_id.gnu');
        const file = str[m.filenameStrindex ?? 0]!;
        if (i && b) r.buildIds.set(file, b);
        else if (i) r.noBuildId.set(file, (r.noBuildId.get(file) ?? 0) + 1);
      }
      const frame = (li: number): string => {
        const l = d.locationTable![li]!;
        const a = attrs(l.attributeIndices);
        if (!a.has('profile.frame.type') || !a.has('dwunw.frame.origin')) r.locationAttrs = false;
        r.frameTypes.add(a.get('profile.frame.type') ?? '');
        if (l.lines?.length) return str[d.functionTable![l.lines[0]!.functionIndex ?? 0]!.nameStrindex ?? 0]!;
        if (!l.mappingIndex) return '[unknown]';
        const file = str[d.mappingTable![l.mappingIndex]!.filenameStrindex ?? 0]!;
        return `[unknown] (${file.slice(file.lastIndexOf('/') + 1)})`;
      };
      for (const rp of req.resourceProfiles ?? []) {
        r.resources.push(Object.fromEntries((rp.resource?.attributes ?? []).map((a) => [a.key ?? str[(a as { keyStrindex?: number }).keyStrindex ?? 0], val(a.value, str)])));
        for (const sp of rp.scopeProfiles ?? [])
          for (const p of sp.profiles ?? []) {
            if (str[p.sampleType?.typeStrindex ?? 0] !== sampleType) continue; // memleak: one profile per sample type
            if (p.profileId && r.profiles.has(p.profileId)) continue; // a retried request delivered twice
            if (p.profileId) r.profiles.add(p.profileId);
            for (const s of p.samples ?? []) {
              const a = attrs(s.attributeIndices);
              if (!a.has('thread.id') || !a.has('thread.name')) r.threadAttrs = false;
              const locs = d.stackTable![s.stackIndex ?? 0]!.locationIndices ?? [];
              const names = [a.get('thread.name') ?? '?', ...[...locs].reverse().map(frame)];
              const n = (s.values ?? []).reduce<number>((x, v) => x + Number(v), 0);
              const k = names.join(';');
              r.stacks.set(k, (r.stacks.get(k) ?? 0) + n);
              r.samples += n;
            }
          }
      }
    }
  }
  return r;
}


// ---- profile's output ---------------------------------------------------------------------------

/** The run's folded lines (profile's -f --json) without the '-' between user and kernel frames. */
export function foldedMap(folded: PrFolded[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const l of folded) {
    const k = l.folded
      .split(';')
      .filter((x) => x !== '-')
      .join(';');
    m.set(k, (m.get(k) ?? 0) + l.count);
  }
  return m;
}

export interface ExportLine {
  intervals: number;
  destinations: { url: string; sent: number; dropped: number; dropped_samples: number; failures: number; retries: number }[];
}

export function parseRun(r: Run): { entries: PrEntry[]; folded: PrFolded[]; summary: PrSummary | null; exp: ExportLine | null } {
  const out = { entries: [] as PrEntry[], folded: [] as PrFolded[], summary: null as PrSummary | null, exp: null as ExportLine | null };
  for (const o of jsonLines<{ summary?: PrSummary; export?: ExportLine; count?: number; folded?: string }>(r.stdout)) {
    if (o.summary) out.summary = o.summary;
    else if (o.export) out.exp = o.export;
    else if (typeof o.folded === 'string') out.folded.push(o as unknown as PrFolded);
    else if (typeof o.count === 'number') out.entries.push(o as unknown as PrEntry);
  }
  return out;
}

