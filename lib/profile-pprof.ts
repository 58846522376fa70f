// profile's samples (or offcputime's time off CPU: sample types switches/count and
// off-cpu/nanoseconds) as a pprof profile (profile.proto, gzip'd), written with the npm package
// pprof-format. CPU convention: sample types samples/count and cpu/nanoseconds, period_type
// cpu/nanoseconds, period 1e9/Hz. Locations leaf first; ids dense 1..N (Parca rejects others);
// mappings carry the module's path and build id; user frames are placed at their module address
// (pc - load bias, the same in every process mapping the file), kernel frames at their pc.
import { gzipSync } from 'node:zlib';
import { Function as PFunction, Label, Line, Location, Mapping, Profile, Sample, StringTable, ValueType } from 'pprof-format';
import type { PrEntry, PrFrame, PrSummary } from './profile.js';
import { frameName, leafFirst } from './profile.js';

const KERNEL = '[kernel.kallsyms]';

/** What a profile's samples are: their types, each entry's values, the period, and when. */
export interface PprofShape {
  sampleTypes: [string, string][];
  values(e: PrEntry): number[];
  periodType: [string, string];
  period: number;
  startNs: number;
  durationNs: number;
  /** module path -> build id */
  buildIds: Map<string, string | null>;
  comment: string;
}

/** profile's (samples, cpu nanoseconds) or offcputime's (switches, off-cpu nanoseconds) shape. */
function summaryShape(summary: PrSummary): PprofShape {
  const period = summary.period || (summary.frequency ? Math.round(1e9 / summary.frequency) : 0);
  // offcputime: count is microseconds off CPU; the values are switch-outs and nanoseconds
  const offCpu = summary.unit === 'microseconds';
  return {
    sampleTypes: offCpu ? [['switches', 'count'], ['off-cpu', 'nanoseconds']] : [['samples', 'count'], ['cpu', 'nanoseconds']],
    values: offCpu ? (e) => [e.switches ?? 0, e.count * 1000] : (e) => [e.count, e.count * period],
    periodType: [offCpu ? 'off-cpu' : 'cpu', 'nanoseconds'],
    period: offCpu ? 1000 : period,
    startNs: summary.start_unix_ns,
    durationNs: summary.duration_ns,
    buildIds: new Map(summary.modules.map((m) => [m.path, m.build_id])),
    comment: `dwunw ${offCpu ? 'offcputime' : 'profile'}: ${summary.event}, ${summary.unwind} unwinding`,
  };
}

export function buildPprof(entries: PrEntry[], summary: PrSummary): Profile {
  return pprofOf(entries, summaryShape(summary));
}

export function pprofOf(entries: PrEntry[], shape: PprofShape): Profile {
  const strings = new StringTable();
  const s = (v: string): number => strings.dedup(v);
  const buildIds = shape.buildIds;
  const mappings = new Map<string, Mapping & { lo: bigint; hi: bigint }>();
  const functions = new Map<string, PFunction>();
  const locations = new Map<string, Location>();

  const mappingFor = (path: string, addr: bigint): bigint => {
    let m = mappings.get(path);
    if (!m) {
      m = Object.assign(
        new Mapping({
          id: mappings.size + 1,
          filename: s(path),
          buildId: s(buildIds.get(path) ?? ''),
          hasFunctions: true,
        }),
        { lo: addr, hi: addr + 1n },
      );
      mappings.set(path, m);
    }
    if (addr < m.lo) m.lo = addr;
    if (addr + 1n > m.hi) m.hi = addr + 1n;
    return BigInt(m.id);
  };
  const functionFor = (name: string, file: string): number => {
    const key = `${name}\0${file}`;
    let f = functions.get(key);
    if (!f) {
      f = new PFunction({ id: functions.size + 1, name: s(name), systemName: s(name), filename: s(file) });
      functions.set(key, f);
    }
    return Number(f.id);
  };
  const locationFor = (f: PrFrame | null, label: string | null, maddr: number, kernel: boolean): number => {
    const name = f ? frameName(f) : label!;
    const module = f ? (kernel ? KERNEL : f.module) : null;
    const addr = f ? (kernel || !maddr ? BigInt(f.pc) : BigInt(maddr)) : 0n;
    const key = `${module ?? ''}\0${addr}\0${name}`;
    let l = locations.get(key);
    if (!l) {
      l = new Location({
        id: locations.size + 1,
        mappingId: module ? mappingFor(module, addr) : 0,
        address: addr,
        line: [new Line({ functionId: functionFor(name, module ?? '') })],
      });
      locations.set(key, l);
    }
    return Number(l.id);
  };

  const samples: Sample[] = [];
  const kComm = s('comm');
  const kPid = s('pid');
  for (const e of entries) {
    const ids = leafFirst(e, locationFor);
    samples.push(
      new Sample({
        locationId: ids,
        value: shape.values(e),
        label: [new Label({ key: kComm, str: s(e.comm) }), new Label({ key: kPid, num: e.pid })],
      }),
    );
  }
  const mapping = [...mappings.values()].map(
    (m) =>
      new Mapping({
        id: m.id,
        memoryStart: m.lo,
        memoryLimit: m.hi,
        fileOffset: 0,
        filename: m.filename,
        buildId: m.buildId,
        hasFunctions: true,
      }),
  );
  return new Profile({
    sampleType: shape.sampleTypes.map(([type, unit]) => new ValueType({ type: s(type), unit: s(unit) })),
    periodType: new ValueType({ type: s(shape.periodType[0]), unit: s(shape.periodType[1]) }),
    period: shape.period,
    timeNanos: BigInt(shape.startNs),
    durationNanos: shape.durationNs,
    sample: samples,
    mapping,
    location: [...locations.values()],
    function: [...functions.values()],
    comment: [s(shape.comment)],
    stringTable: strings,
  });
}

/** The gzip'd profile.proto bytes. */
export function encodePprof(entries: PrEntry[], summary: PrSummary): Buffer {
  return gzipSync(buildPprof(entries, summary).encode());
}
