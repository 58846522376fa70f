// `dwunw memleak --export`: each report of memleak (the outstanding allocations by stack, one
// per --interval, and the last one at exit) is sent as OTLP profiles inuse_space (bytes) and
// inuse_objects (allocations) to a real OpenTelemetry Collector (test/collector.ts); what the
// Collector wrote is decoded and checked against the same run's --json reports: the same stacks
// with the same bytes and allocations, summed over the reports, every report received once.
// With -a, alloc_space and alloc_objects too (memleak --allocated: every allocation made in the
// interval, freed or not), to the Collector and to Pyroscope's push receiver (pprof, all four
// sample types in one profile): leaky --rate makes a known number of malloc(64) on one stack and
// frees all but 1 in 100; what the receivers got is checked against leaky's own count.
//
// Needs root and BPF (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1) and the
// Collector (built when missing).
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { bpfUnavailable, cliEnv, dwunwBin, fixturesX64, jsonLines, root, skipOrFail, start } from './helpers.js';
import { decode, ensureEngines, startCollector, startPushReceiver, stopCollector } from './export-helpers.js';
import type { MlReport } from '../lib/memleak.js';
import { frameName } from '../lib/profile.js';
import { splitArgs } from '../commands/memleak.js';

const leaky = join(fixturesX64, 'leaky');
const memleakBin = join(root, 'build', 'bpf', 'memleak');

t.test('memleak\'s own arguments are told from --export\'s', async (tt) => {
  const sp = splitArgs(['-p', '5', '--export', 'otlp+grpc://h:1', '-aT', '3', '--older=100', '2', '--interval=4', '--json', '-o', '7', '9']);
  tt.same(sp.rest, ['-p', '5', '-aT', '3', '--older=100', '2', '--json', '-o', '7', '9']);
  tt.same(sp.positionals, ['2', '9'], 'INTERVAL and COUNT, not option values');
  tt.same(sp.exp.export, ['otlp+grpc://h:1']);
  tt.equal(sp.exp.interval, '4');
  tt.ok(sp.json && sp.top);
  const r = await start(process.execPath, [dwunwBin, 'memleak', '--export', 'otlp+grpc://127.0.0.1:1', '--interval', '2', '5', '-p', '1'], { env: cliEnv() }).done;
  tt.equal(r.status, 2, 'INTERVAL and --interval both: usage error');
  tt.match(r.stderr, /--interval and INTERVAL 5 both given/);
  // -a asks for alloc_*: memleak's listing of each allocation only when the reports are printed
  const a = splitArgs(['-aT', '3', '--export', 'x', '-a', '-p', '5', '--show-allocs', '-Cap', '7']);
  tt.ok(a.allocated, '-a asks for alloc_space and alloc_objects');
  tt.same(a.restNoList, ['-T', '3', '-p', '5', '-Cp', '7']);
  tt.same(splitArgs(['--allocated', '-T', '4']).restNoList, ['--allocated', '-T', '4']);
  tt.notOk(splitArgs(['-Ta']).allocated, '-Ta: a is -T\'s value');
});

/** Stack key (comm, then frames root first, the pseudo-frame last) -> [bytes, allocations], over all reports. */
function expected(reports: MlReport[]): { bytes: Map<string, number>; allocs: Map<string, number> } {
  const bytes = new Map<string, number>();
  const allocs = new Map<string, number>();
  for (const r of reports)
    for (const s of r.stacks) {
      const names = [s.comm ?? '?', ...[...s.frames].reverse().map(frameName)];
      if (s.reason) names.splice(1, 0, s.reason);
      const k = names.join(';');
      bytes.set(k, (bytes.get(k) ?? 0) + s.bytes);
      allocs.set(k, (allocs.get(k) ?? 0) + s.allocations);
    }
  return { bytes, allocs };
}

t.test('every report reaches the Collector as inuse_space and inuse_objects, over gRPC and HTTP', async (tt) => {
  const why = bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [leaky, 'make fixtures']]) ?? ensureEngines();
  if (why) return skipOrFail(tt, why, 'memleak export to the Collector');
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-export-ml-'));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const c = await startCollector(dir, 'ml');
  const r = await start(
    process.execPath,
    [dwunwBin, 'memleak', '--json', '--interval', '1', '--service', 'leaky-test', '--export', `otlp+grpc://127.0.0.1:${c.grpc}`, '--export', `otlp+http://127.0.0.1:${c.http}`, '--', leaky, '--delay', '0.7', '5'],
    { timeoutMs: 180_000, env: cliEnv() },
  ).done;
  await stopCollector(c);
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const docs = jsonLines<MlReport & { export?: { intervals: number; destinations: { url: string; sent: number; dropped: number }[] } }>(r.stdout);
  const reports = docs.filter((d) => Array.isArray(d.stacks));
  const exp = docs.find((d) => d.export)?.export;
  const sentReports = reports.filter((x) => x.stacks.length);
  tt.ok(sentReports.length >= 2, `reports with outstanding allocations: ${sentReports.length} of ${reports.length}`);
  tt.equal(exp?.intervals, reports.length, 'every report is an interval');
  const want = expected(reports);
  tt.ok([...want.bytes.keys()].some((k) => k.includes('big_1;big_2')), 'leaky\'s large_malloc site is in the reports');
  for (const [proto, file] of [['grpc', c.files.grpc], ['http', c.files.http]] as const) {
    const d = exp!.destinations.find((x) => x.url.startsWith(`otlp+${proto}`))!;
    tt.equal(d.dropped, 0, `${proto}: nothing dropped`);
    tt.equal(d.sent, sentReports.length, `${proto}: one request per report with stacks`);
    const space = decode([file], 'inuse_space');
    const objects = decode([file], 'inuse_objects');
    tt.equal(space.requests, d.sent, `${proto}: every request sent was received`);
    tt.same([...space.stacks].sort(), [...want.bytes].sort(), `${proto}: inuse_space: the reports' stacks with their bytes`);
    tt.same([...objects.stacks].sort(), [...want.allocs].sort(), `${proto}: inuse_objects: the reports' stacks with their allocations`);
    tt.ok(space.threadAttrs && space.locationAttrs, `${proto}: samples have thread.id and thread.name, locations profile.frame.type and dwunw.frame.origin`);
    const res = space.resources.filter((x) => x['process.executable.path'] === leaky);
    tt.ok(res.length >= sentReports.length, `${proto}: leaky's resource in every request`);
    for (const x of res) {
      tt.equal(x['service.name'], 'leaky-test');
      tt.equal(x['host.name'], hostname());
      tt.match(x['process.pid'], /^\d+$/);
    }
  }
});

/** protojson of Pyroscope's google.v1.Profile (int64 as strings) */
interface PProfile {
  sampleType?: { type?: string; unit?: string }[];
  sample?: { locationId?: string[]; value?: string[] }[];
  location?: { id?: string; line?: { functionId?: string }[] }[];
  function?: { id?: string; name?: string }[];
  stringTable?: string[];
}

t.test('-a: alloc_space and alloc_objects to the Collector and to Pyroscope, equal to the program\'s own count', async (tt) => {
  const why = bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [leaky, 'make fixtures']]) ?? ensureEngines();
  if (why) return skipOrFail(tt, why, 'memleak -a export');
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-export-mla-'));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const c = await startCollector(dir, 'mla');
  const pushed = join(dir, 'pushed.json');
  const port = await startPushReceiver(tt, pushed);
  // 3,000 malloc(64) on rate_3 <- rate_2 <- rate_1, each freed but 1 in 100; -o 0: the last leaks count too
  const r = await start(
    process.execPath,
    [dwunwBin, 'memleak', '-a', '-o', '0', '--interval', '1', '--export', `otlp+grpc://127.0.0.1:${c.grpc}`, '--export', `pyroscope://127.0.0.1:${port}`, '--json', '--', leaky, '--delay', '0.5', '--rate', '1000', '--count', '3000', '--leak-every', '100'],
    { timeoutMs: 180_000, env: cliEnv() },
  ).done;
  await stopCollector(c);
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const own = /leaky: (\d+) allocations in .*, (\d+) leaked/.exec(r.stderr);
  tt.ok(own, `leaky's own count (${r.stderr.slice(-300)})`);
  const made = Number(own![1]);
  const leaked = Number(own![2]);
  tt.equal(made, 3000);
  const docs = jsonLines<MlReport & { export?: { intervals: number; destinations: { url: string; sent: number; dropped: number }[] } }>(r.stdout);
  const reports = docs.filter((d) => Array.isArray(d.stacks));
  tt.ok(reports.length >= 2, `${reports.length} reports`);
  tt.ok(reports.every((x) => x.allocated_lost === 0), 'no allocation record lost');
  const isRate = (s: MlReport['stacks'][number]) => frameName(s.frames[0]!) === 'rate_3';
  const sum = (f: (s: MlReport['stacks'][number]) => number, rs = reports) => rs.flatMap((x) => x.stacks.filter(isRate)).reduce((a, s) => a + f(s), 0);
  tt.equal(sum((s) => s.alloc_allocations ?? -1e9), made, 'memleak: the allocations made on rate_3, summed over the reports = leaky\'s count');
  tt.equal(sum((s) => s.alloc_bytes ?? -1e9), made * 64, 'memleak: their bytes');
  const last = reports.at(-1)!;
  tt.equal(sum((s) => s.allocations, [last]), leaked, 'memleak: outstanding at the end = leaked (the freed ones are not in use)');
  tt.equal(sum((s) => s.bytes, [last]), leaked * 64);
  tt.equal(last.stacks.filter(isRate).reduce((a, s) => a + (s.allocs?.length ?? 0), 0), leaked, '-a with --json: the outstanding allocations listed too, as memleak\'s -a does');

  // the Collector: one profile per sample type
  const exp = docs.find((d) => d.export)?.export;
  const grpc = exp!.destinations.find((x) => x.url.startsWith('otlp+grpc'))!;
  tt.equal(grpc.dropped, 0, 'otlp: nothing dropped');
  const want = expected(reports);
  const allocWant = new Map<string, [number, number]>();
  for (const x of reports)
    for (const s of x.stacks) {
      const names = [s.comm ?? '?', ...[...s.frames].reverse().map(frameName)];
      if (s.reason) names.splice(1, 0, s.reason);
      const k = names.join(';');
      const v = allocWant.get(k) ?? [0, 0];
      allocWant.set(k, [v[0] + (s.alloc_bytes ?? 0), v[1] + (s.alloc_allocations ?? 0)]);
    }
  const nonzero = (m: Map<string, number>) => [...m].filter(([, v]) => v).sort();
  const got = Object.fromEntries(['inuse_space', 'inuse_objects', 'alloc_space', 'alloc_objects'].map((ty) => [ty, decode([c.files.grpc], ty)]));
  tt.equal(got.alloc_objects!.requests, grpc.sent, 'otlp: every request sent was received');
  tt.same([...got.inuse_space!.stacks].sort(), nonzero(want.bytes), 'otlp inuse_space: the reports\' stacks with their outstanding bytes (none for stacks all freed)');
  tt.same([...got.inuse_objects!.stacks].sort(), nonzero(want.allocs), 'otlp inuse_objects');
  tt.same([...got.alloc_space!.stacks].sort(), nonzero(new Map([...allocWant].map(([k, v]) => [k, v[0]]))), 'otlp alloc_space: the reports\' stacks with the bytes allocated');
  tt.same([...got.alloc_objects!.stacks].sort(), nonzero(new Map([...allocWant].map(([k, v]) => [k, v[1]]))), 'otlp alloc_objects');
  const rateSum = (m: Map<string, number>) => [...m].filter(([k]) => k.endsWith(';rate_1;rate_2;rate_3')).reduce((a, [, v]) => a + v, 0);
  tt.equal(rateSum(got.alloc_objects!.stacks), made, 'otlp alloc_objects on rate_3 = leaky\'s count');
  tt.equal(rateSum(got.alloc_space!.stacks), made * 64, 'otlp alloc_space on rate_3 = 64 x that');

  // Pyroscope: one pprof per report with the four sample types
  const pyro = exp!.destinations.find((x) => x.url.startsWith('pyroscope'))!;
  tt.equal(pyro.dropped, 0, 'pyroscope: nothing dropped');
  const seen = new Set<string>();
  const recs = (existsSync(pushed) ? jsonLines<{ series: { labels: Record<string, string>; ids: string[]; profiles: PProfile[] }[] }>(readFileSync(pushed, 'utf8')) : []).filter((x) => {
    const id = x.series.flatMap((s) => s.ids).join(',');
    return !seen.has(id) && seen.add(id);
  });
  tt.equal(recs.length, pyro.sent, 'pyroscope: every request sent was received');
  const totals = new Map<string, number>();
  let lastRate: number[] = [];
  let typesOk = true;
  for (const rec of recs)
    for (const s of rec.series) {
      if (s.labels.__name__ !== 'memory') typesOk = false;
      for (const p of s.profiles) {
        const str = p.stringTable ?? [];
        const types = (p.sampleType ?? []).map((x) => `${str[Number(x.type ?? 0)]}/${str[Number(x.unit ?? 0)]}`);
        if (types.join() !== 'inuse_space/bytes,inuse_objects/count,alloc_space/bytes,alloc_objects/count') typesOk = false;
        const fn = new Map((p.function ?? []).map((f) => [f.id, str[Number(f.name ?? 0)]!]));
        const loc = new Map((p.location ?? []).map((l) => [l.id, fn.get(l.line?.[0]?.functionId)!]));
        const here = [0, 0, 0, 0];
        for (const smp of p.sample ?? []) {
          if (loc.get(smp.locationId?.[0]) !== 'rate_3') continue;
          (smp.value ?? []).forEach((v, i) => (here[i] = (here[i] ?? 0) + Number(v)));
        }
        types.forEach((ty, i) => totals.set(ty, (totals.get(ty) ?? 0) + here[i]!));
        lastRate = here;
      }
    }
  tt.ok(typesOk, 'pyroscope: series memory, sample types inuse_space, inuse_objects, alloc_space, alloc_objects');
  tt.equal(totals.get('alloc_objects/count'), made, 'pyroscope alloc_objects on rate_3, over the profiles = leaky\'s count');
  tt.equal(totals.get('alloc_space/bytes'), made * 64, 'pyroscope alloc_space on rate_3');
  tt.same(lastRate.slice(0, 2), [leaked * 64, leaked], 'pyroscope: the last profile\'s inuse on rate_3 = what leaky leaked');
});
