// profile's samples (or offcputime's time off CPU: sample types switches/count and
// off-cpu/nanoseconds) as a pprof profile (profile.proto, gzip'd), written with the npm package
// pprof-format. CPU convention: sample types samples/count and cpu/nanoseconds, period_type
// cpu/nanoseconds, period 1e9/Hz. Locations leaf first; ids dense 1..N (Parca rejects others).
// Made to be named later (`dwunw symbolize`, lib/symbolize.ts; pprof's own convention): a mapping
// carries the module's path and build id and is described by the file's executable segment
// (memory_start = its address, file_offset = its offset), so a location's address is the file's
// own address (pc - load bias, the same in every process mapping the file); a return address is
// placed at its call (pc - 1, inside the call instruction, as profile.proto allows), so that the
// address is what a symbolizer looks up. A frame without a name has no line, and its mapping says
// has_functions=false. Kernel frames are placed at their pc.
// --wall (entries with a state): the time is on-CPU samples' and off-CPU spans' in one unit;
// values events/count and wall/nanoseconds, a label state=on-cpu|off-cpu, and the off-CPU
// stacks' leaf an [off-CPU] location. --waker: labels waker_comm and waker_pid (the waker's
// stacks are in the NDJSON and the flame graph, not in a pprof stack).
import { gzipSync } from 'node:zlib';
import { Function as PFunction, Label, Line, Location, Mapping, Profile, Sample, StringTable, ValueType } from 'pprof-format';
import { execSegment } from './elf-load.js';
import type { PrEntry, PrFrame, PrSummary } from './profile.js';
import { frameName, leafFirst } from './profile.js';

const KERNEL = '[kernel.kallsyms]';

interface MappingAcc {
  id: number;
  path: string;
  lo: bigint;
  hi: bigint;
  /** every location of it has a function */
  named: boolean;
  lines: boolean;
}

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
function summaryShape(summary: PrSummary, entries: PrEntry[]): PprofShape {
  const period = summary.period || (summary.frequency ? Math.round(1e9 / summary.frequency) : 0);
  // offcputime: count is microseconds off CPU; the values are switch-outs and nanoseconds
  const offCpu = summary.unit === 'microseconds';
  // --wall: on-CPU samples and off-CPU spans, both in microseconds
  const wall = entries.some((e) => e.state !== undefined);
  return {
    sampleTypes: wall
      ? [['events', 'count'], ['wall', 'nanoseconds']]
      : offCpu
        ? [['switches', 'count'], ['off-cpu', 'nanoseconds']]
        : [['samples', 'count'], ['cpu', 'nanoseconds']],
    values: offCpu ? (e) => [e.switches ?? e.samples ?? 0, e.count * 1000] : (e) => [e.count, e.count * period],
    periodType: [wall ? 'wall' : offCpu ? 'off-cpu' : 'cpu', 'nanoseconds'],
    period: offCpu ? 1000 : period,
    startNs: summary.start_unix_ns,
    durationNs: summary.duration_ns,
    buildIds: new Map(summary.modules.map((m) => [m.path, m.build_id])),
    comment: `dwunw ${wall ? 'profile --wall' : offCpu ? 'offcputime' : 'profile'}: ${summary.event}, ${summary.unwind} unwinding`,
  };
}

export function buildPprof(entries: PrEntry[], summary: PrSummary): Profile {
  return pprofOf(entries, summaryShape(summary, entries));
}

export function pprofOf(entries: PrEntry[], shape: PprofShape): Profile {
  const strings = new StringTable();
  const s = (v: string): number => strings.dedup(v);
  const buildIds = shape.buildIds;
  const mappings = new Map<string, MappingAcc>();
  const functions = new Map<string, PFunction>();
  const locations = new Map<string, Location>();

  const mappingFor = (path: string, addr: bigint, named: boolean, line: boolean): number => {
    let m = mappings.get(path);
    if (!m) {
      m = { id: mappings.size + 1, path, lo: addr, hi: addr + 1n, named: true, lines: false };
      mappings.set(path, m);
    }
    if (addr < m.lo) m.lo = addr;
    if (addr + 1n > m.hi) m.hi = addr + 1n;
    m.named &&= named;
    m.lines ||= line;
    return m.id;
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
  const locationFor = (f: PrFrame | null, label: string | null, maddr: number, kernel: boolean, exact: boolean): number => {
    const module = f ? (kernel ? KERNEL : f.module) : null;
    const inFile = f !== null && !kernel && module !== null && maddr !== 0;
    // a frame of a file without a name: no line, for a symbolizer to fill in
    const unnamed = inFile && !f.symbol;
    const name = f ? frameName(f) : label!;
    const addr = f ? (inFile ? BigInt(maddr) - (exact ? 0n : 1n) : BigInt(f.pc)) : 0n;
    const line = f?.line ?? 0;
    const key = `${module ?? ''}\0${addr}\0${unnamed ? '' : name}\0${line}`;
    let l = locations.get(key);
    if (!l) {
      l = new Location({
        id: locations.size + 1,
        mappingId: module ? mappingFor(module, addr, !unnamed, line > 0) : 0,
        address: addr,
        line: unnamed ? [] : [new Line({ functionId: functionFor(name, f?.file ?? module ?? ''), line })],
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
  for (const e of entries) {
    const ids = leafFirst(e, locationFor);
    samples.push(
      new Sample({
        locationId: ids,
        value: shape.values(e),
        label: [
          new Label({ key: kComm, str: s(e.comm) }),
          new Label({ key: kPid, num: e.pid }),
          ...(e.state ? [new Label({ key: kState, str: s(e.state === 'on' ? 'on-cpu' : 'off-cpu') })] : []),
          ...(e.waker ? [new Label({ key: kWaker, str: s(e.waker.comm) }), new Label({ key: kWakerPid, num: e.waker.pid })] : []),
        ],
      }),
    );
  }
  const mapping = [...mappings.values()].map((m) => {
    // the file's executable segment when it covers every location (the file read now is the one profiled)
    const seg = m.path === KERNEL ? null : execSegment(m.path);
    const fits = seg !== null && m.lo >= seg.vaddr && m.hi <= seg.vaddr + seg.memsz;
    return new Mapping({
      id: m.id,
      memoryStart: fits ? seg.vaddr : m.lo,
      memoryLimit: fits ? seg.vaddr + seg.memsz : m.hi,
      fileOffset: fits ? seg.offset : 0,
      filename: s(m.path),
      buildId: s(buildIds.get(m.path) ?? ''),
      hasFunctions: m.named,
      hasFilenames: m.lines,
      hasLineNumbers: m.lines,
    });
  });
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
