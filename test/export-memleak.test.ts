// `dwunw memleak --export`: each report of memleak (the outstanding allocations by stack, one
// per --interval, and the last one at exit) is sent as OTLP profiles inuse_space (bytes) and
// inuse_objects (allocations) to a real OpenTelemetry Collector (test/collector.ts); what the
// Collector wrote is decoded and checked against the same run's --json reports: the same stacks
// with the same bytes and allocations, summed over the reports, every report received once.
//
// Needs root and BPF (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1) and the
// Collector (built when missing).
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, fixturesX64, jsonLines, root, skipOrFail, start } from './helpers.js';
import { decode, ensureEngines, startCollector, stopCollector } from './export-helpers.js';
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
