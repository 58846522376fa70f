// profile's samples (or offcputime's time off CPU: sample types switches/count and
// off-cpu/nanoseconds) as a pprof profile (profile.proto, gzip'd), written with the npm package
// pprof-format. CPU convention: sample types samples/count and cpu/nanoseconds, period_type
// cpu/nanoseconds, period 1e9/Hz. Locations leaf first; ids dense 1..N (Parca rejects others);
// mappings carry the module's path and build id; user frames are placed at their module address
// (pc - load bias, the same in every process mapping the file), kernel frames at their pc.
// --wall (entries with a state): the time is on-CPU samples' and off-CPU spans' in one unit;
// values samples-or-switches/count and wall/nanoseconds, a label state=on-cpu|off-cpu, and the
// off-CPU stacks' leaf an [off-CPU] location. --waker: labels waker_comm and waker_pid (the
// waker's stacks are in the NDJSON and the flame graph, not in a pprof stack).
import { gzipSync } from 'node:zlib';
import { Function as PFunction, Label, Line, Location, Mapping, Profile, Sample, StringTable, ValueType } from 'pprof-format';
import type { PrEntry, PrFrame, PrSummary } from './profile.js';
import { frameName, leafFirst } from './profile.js';

const KERNEL = '[kernel.kallsyms]';

export function buildPprof(entries: PrEntry[], summary: PrSummary): Profile {
  const strings = new StringTable();
  const s = (v: string): number => strings.dedup(v);
  const buildIds = new Map(summary.modules.map((m) => [m.path, m.build_id]));
  const mappings = new Map<string, Mapping & { lo: bigint; hi: bigint }>();
  const functions = new Map<string, PFunction>();
  const locations = new Map<string, Location>();
  const period = summary.period || (summary.frequency ? Math.round(1e9 / summary.frequency) : 0);
  // offcputime: count is microseconds off CPU; the values are switch-outs and nanoseconds
  const offCpu = summary.unit === 'microseconds';

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
  const kState = s('state');
  const kWaker = s('waker_comm');
  const kWakerPid = s('waker_pid');
  const wall = entries.some((e) => e.state !== undefined);
  for (const e of entries) {
    const ids = leafFirst(e, locationFor);
    samples.push(
      new Sample({
        locationId: ids,
        value: offCpu ? [e.switches ?? e.samples ?? 0, e.count * 1000] : [e.count, e.count * period],
        label: [
          new Label({ key: kComm, str: s(e.comm) }),
          new Label({ key: kPid, num: e.pid }),
          ...(e.state ? [new Label({ key: kState, str: s(e.state === 'on' ? 'on-cpu' : 'off-cpu') })] : []),
          ...(e.waker ? [new Label({ key: kWaker, str: s(e.waker.comm) }), new Label({ key: kWakerPid, num: e.waker.pid })] : []),
        ],
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
    sampleType: wall
      ? [new ValueType({ type: s('events'), unit: s('count') }), new ValueType({ type: s('wall'), unit: s('nanoseconds') })]
      : offCpu
      ? [new ValueType({ type: s('switches'), unit: s('count') }), new ValueType({ type: s('off-cpu'), unit: s('nanoseconds') })]
      : [new ValueType({ type: s('samples'), unit: s('count') }), new ValueType({ type: s('cpu'), unit: s('nanoseconds') })],
    periodType: new ValueType({ type: s(wall ? 'wall' : offCpu ? 'off-cpu' : 'cpu'), unit: s('nanoseconds') }),
    period: offCpu ? 1000 : period,
    timeNanos: BigInt(summary.start_unix_ns),
    durationNanos: summary.duration_ns,
    sample: samples,
    mapping,
    location: [...locations.values()],
    function: [...functions.values()],
    comment: [s(`dwunw ${wall ? 'profile --wall' : offCpu ? 'offcputime' : 'profile'}: ${summary.event}, ${summary.unwind} unwinding`)],
    stringTable: strings,
  });
}

/** The gzip'd profile.proto bytes. */
export function encodePprof(entries: PrEntry[], summary: PrSummary): Buffer {
  return gzipSync(buildPprof(entries, summary).encode());
}
