// An interval for Pyroscope's push API (push.v1.PusherService/Push, Connect over HTTP/1.1 with
// the JSON codec: no field number written here): one series per service, labelled __name__
// (process_cpu for profile, memory for memleak), service_name and host_name, its sample the
// service's entries as a gzip'd pprof (lib/profile-pprof.ts) with pid and comm as sample labels.
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { Interval } from './export-interval.js';
import { serviceName } from './export-interval.js';
import type { PrEntry } from './profile.js';
import { pprofOf } from './profile-pprof.js';

export const PYROSCOPE_PUSH_PATH = '/push.v1.PusherService/Push';

export function pyroscopeRequest(iv: Interval, service?: string): Record<string, unknown> {
  const cpu = iv.period.type === 'cpu';
  const bySvc = new Map<string, PrEntry[]>();
  for (const e of iv.entries) {
    const p = iv.procs.get(e.pid) ?? { pid: e.pid, exe: null, container: null };
    const svc = serviceName(p, e.comm, service);
    let v = bySvc.get(svc);
    if (!v) bySvc.set(svc, (v = []));
    v.push(e);
  }
  const series = [...bySvc].map(([svc, entries]) => {
    const prof = pprofOf(entries, {
      // profile: the samples and the CPU time they stand for, as Pyroscope's process_cpu wants
      sampleTypes: [...iv.measures.map((m) => [m.type, m.unit] as [string, string]), ...(cpu ? [['cpu', 'nanoseconds'] as [string, string]] : [])],
      values: (e) => [...iv.measures.map((m) => m.value(e)), ...(cpu ? [e.count * iv.period.value] : [])],
      periodType: [iv.period.type, iv.period.unit],
      period: iv.period.value,
      startNs: iv.line.start_unix_ns,
      durationNs: iv.line.duration_ns,
      buildIds: iv.buildIds,
      comment: `dwunw ${cpu ? 'profile' : 'memleak'}`,
    });
    return {
      labels: [
        { name: '__name__', value: cpu ? 'process_cpu' : 'memory' },
        { name: 'service_name', value: svc },
        { name: 'host_name', value: iv.host },
      ],
      samples: [{ raw_profile: gzipSync(prof.encode()).toString('base64'), ID: randomUUID() }],
    };
  });
  return { series };
}

/** The request body (JSON). */
export const encodePyroscope = (iv: Interval, service?: string): Buffer => Buffer.from(JSON.stringify(pyroscopeRequest(iv, service)));
