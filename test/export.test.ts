// `dwunw profile --export`: continuous export against a real OpenTelemetry Collector, built by
// `make engines` from its Go modules (test/engines/otelcol, a pinned release) and started here on
// loopback (test/export-helpers.ts) with the profiles feature gate, one pipeline per receiver protocol into a file
// exporter. What the Collector wrote is decoded and checked against the same run's output: every
// sample accounted for (received + counted as dropped = sampled), the same stacks, the resource,
// sample and location attributes present. Faults: the Collector stopped and restarted mid-run
// (no crash, drops counted, export resumes) and a receiver that accepts and never answers
// (sampling goes on, drops counted, the tool exits).
//
// Needs root and BPF (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1) and the
// Collector (built here under a lock when missing: minutes with a cold Go module cache).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, root, skipOrFail, start, type Started, until } from './helpers.js';
import { decode, ensureEngines, foldedMap, parseRun, startCollector, stopCollector } from './export-helpers.js';
import { containerId, ProcCache } from '../lib/export-interval.js';
import { parseHeaders, parseDestination } from '../lib/export-send.js';
import { splitArgs } from '../commands/profile.js';

const hot = join(root, 'fixtures', 'x86_64', 'build', 'hot');
const profileBin = join(root, 'build', 'bpf', 'profile');

// ---- Without BPF ----------------------------------------------------------------------------------

t.test('options and their errors', async (tt) => {
  const sp = splitArgs(['-F', '99', '--export', 'otlp+grpc://127.0.0.1:4317', '--export=otlp+http://[::1]:4318', '--interval=5', '--service', 's', '--export-header', 'env:X', '--', 'cmd', '--export', 'y']);
  tt.same(sp.export, ['otlp+grpc://127.0.0.1:4317', 'otlp+http://[::1]:4318']);
  tt.equal(parseDestination('pyroscope://127.0.0.1:4040').scheme, 'pyroscope');
  tt.same(sp.rest, ['-F', '99', '--', 'cmd', '--export', 'y'], 'profile\'s own, and the command\'s, untouched');
  tt.equal(sp.interval, '5');
  tt.throws(() => parseDestination('http://x:1'), /--export http:\/\/x:1: expected otlp\+grpc/);
  tt.throws(() => parseDestination('otlp+grpc://x:99999'), /port out of range/);
  process.env.DWUNW_TEST_HDR = 'Authorization: Bearer s3cret';
  tt.same(parseHeaders(['env:DWUNW_TEST_HDR', 'X-Scope-OrgID: t1']), { authorization: 'Bearer s3cret', 'x-scope-orgid': 't1' });
  try {
    parseHeaders(['Bearer s3cret']);
    tt.fail('a header without a name is refused');
  } catch (e) {
    tt.notMatch(String(e), /s3cret/, 'the refused header\'s value is not printed');
  }
  tt.equal(containerId('0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n'), '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef');
  tt.equal(containerId('0::/user.slice/user-0.slice/session-1.scope\n'), null);
  // the process cache forgets processes gone for two intervals
  const c = new ProcCache();
  c.get(process.pid);
  c.endInterval();
  c.endInterval();
  c.endInterval();
  tt.equal(c.size, 0, 'process cache bounded by the last intervals');
  const r = await start(process.execPath, [dwunwBin, 'profile', '--interval', '5', '1'], { env: cliEnv() }).done;
  tt.equal(r.status, 2, '--interval without --export: usage error');
  tt.match(r.stderr, /--interval is for --export/);
});

const dwunw = (args: string[], timeoutMs = 180_000): Started => start(process.execPath, [dwunwBin, 'profile', ...args], { timeoutMs, env: cliEnv() });

function gate(tt: Test): boolean {
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[profileBin, 'make bpf'], [hot, 'make fixtures']]) ?? ensureEngines();
  if (why) {
    skipOrFail(tt, why, 'export to the Collector');
    return false;
  }
  return true;
}

t.test('every sample of the run reaches the Collector over gRPC and HTTP, with its attributes', async (tt) => {
  if (!gate(tt)) return;
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-export-'));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const c = await startCollector(dir, 'a');
  const r = await dwunw(['-F', '199', '-f', '--json', '--interval', '1', '--service', 'dwunw-test', '--export', `otlp+grpc://127.0.0.1:${c.grpc}`, '--export', `otlp+http://127.0.0.1:${c.http}`, '--', hot, '8', '--cpu']).done;
  await stopCollector(c);
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const { folded: foldedOut, summary, exp } = parseRun(r);
  tt.ok(summary && summary.samples > 50, `sampled (${summary?.samples})`);
  tt.ok(exp && exp.intervals >= 3, `intervals: ${exp?.intervals}`);
  const folded = foldedMap(foldedOut);
  const total = [...folded.values()].reduce((a, b) => a + b, 0);
  tt.equal(total, summary?.samples, 'the folded output holds every sample');
  for (const [proto, file] of [['grpc', c.files.grpc], ['http', c.files.http]] as const) {
    const d = exp!.destinations.find((x) => x.url.startsWith(`otlp+${proto}`))!;
    tt.equal(d.dropped, 0, `${proto}: nothing dropped`);
    const got = decode([file]);
    tt.equal(got.requests, d.sent, `${proto}: every request sent was received (${d.sent})`);
    tt.equal(got.samples, total, `${proto}: every sample received (${got.samples})`);
    tt.same([...got.stacks].sort(), [...folded].sort(), `${proto}: the same stacks with the same counts`);
    tt.ok(got.threadAttrs, `${proto}: every sample has thread.id and thread.name`);
    tt.ok(got.locationAttrs, `${proto}: every location has profile.frame.type and dwunw.frame.origin`);
    tt.ok(got.frameTypes.has('native'), `${proto}: native frames (${[...got.frameTypes]})`);
    // kernel frames follow the user ones after '-' (the entries themselves are the intervals')
    if (foldedOut.some((l) => l.folded.includes(';-;'))) tt.ok(got.frameTypes.has('kernel'), `${proto}: kernel frames`);
    const hotRes = got.resources.filter((x) => x['process.executable.name'] === 'hot');
    tt.ok(hotRes.length > 0, `${proto}: the command's resource`);
    for (const x of hotRes) {
      tt.equal(x['host.name'], hostname());
      tt.equal(x['service.name'], 'dwunw-test');
      tt.equal(x['process.executable.path'], hot);
      tt.match(x['process.pid'], /^\d+$/);
    }
    const bid = execFileSync('readelf', ['-n', hot], { encoding: 'utf8' }).match(/Build ID: ([0-9a-f]+)/)?.[1];
    tt.equal(got.buildIds.get(hot), bid, `${proto}: hot's mapping carries its build id (readelf: ${bid})`);
  }
});

t.test('the Collector stopped and restarted mid-run: no crash, drops counted, export resumes', async (tt) => {
  if (!gate(tt)) return;
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-export-'));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const c1 = await startCollector(dir, 'a');
  // a queue of ~one interval: the intervals of the downtime beyond it are dropped
  const run = dwunw(['-F', '99', '--json', '--interval', '1', '--export-timeout', '2', '--export-queue', '4k', '--export', `otlp+grpc://127.0.0.1:${c1.grpc}`, '--', hot, '14']);
  tt.ok(await until(() => existsSync(c1.files.grpc) && decode([c1.files.grpc]).requests >= 2, 120_000), 'the first intervals arrive');
  await stopCollector(c1);
  await new Promise((res) => setTimeout(res, 4000));
  const c2 = await startCollector(dir, 'b', { grpc: c1.grpc, http: c1.http });
  const r = await run.done;
  await stopCollector(c2);
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const { summary, exp } = parseRun(r);
  const d = exp!.destinations[0]!;
  const got = decode([c1.files.grpc, c2.files.grpc]);
  const after = decode([c2.files.grpc]);
  tt.ok(d.failures >= 1, `failed attempts counted (${d.failures})`);
  tt.ok(after.requests >= 1, `export resumed after the restart (${after.requests} requests)`);
  tt.equal(got.samples + d.dropped_samples, summary!.samples, `every sample received (${got.samples}) or counted as dropped (${d.dropped_samples} in ${d.dropped} intervals)`);
});

t.test('a receiver that never answers: sampling goes on, drops counted, the tool exits', async (tt) => {
  if (!gate(tt)) return;
  const sockets = new Set<Socket>();
  const mute: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((res) => mute.listen(0, '127.0.0.1', res));
  tt.teardown(() => {
    for (const s of sockets) s.destroy();
    mute.close();
  });
  const port = (mute.address() as { port: number }).port;
  // -f: the run's folded lines at the end (the entries are the intervals', sent, not printed again)
  const r = await dwunw(['-F', '99', '-f', '--json', '--interval', '1', '--export-timeout', '1', '--export', `otlp+grpc://127.0.0.1:${port}`, '--export', `otlp+http://127.0.0.1:${port}`, '--', hot, '5'], 120_000).done;
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const { summary, exp, folded } = parseRun(r);
  tt.ok(summary && summary.samples > 0 && folded.some((l) => l.folded.startsWith('hot;')), `sampling went on (${summary?.samples} samples)`);
  for (const d of exp!.destinations) {
    tt.equal(d.sent, 0, `${d.url}: nothing acknowledged`);
    tt.ok(d.dropped >= 1, `${d.url}: ${d.dropped} intervals dropped`);
    tt.equal(d.dropped_samples, summary!.samples, `${d.url}: every sample counted as dropped`);
    tt.ok(d.failures >= 1, `${d.url}: ${d.failures} attempts timed out`);
  }
  tt.match(r.stderr, /profile: export otlp\+grpc:\/\/127\.0\.0\.1:\d+: \d+ intervals, 0 requests sent .* dropped/, 'the summary line counts the drops');
  // bounded by the run (5 s), one request timeout per destination at a time and the drain deadline
  tt.ok(r.ms < 90_000, `exited (${(r.ms / 1000).toFixed(1)} s)`);
  tt.equal(basename(hot), 'hot');
});
