// `dwunw profile --export pyroscope://HOST:PORT` with auth headers: a run's intervals are pushed
// to a receiver made of Pyroscope's own push API types (test/engines/pyroscope: its Connect
// handler and pprof Profile message, from its api module; the server itself does not build from
// its module, test/engines/README.md), which decodes each pprof. Checked against the same run's
// folded output: every sample received, the same stacks, the labels; the headers given by file
// and by environment variable arrive, and their values appear nowhere in dwunw's output.
//
// Needs root and BPF (skipped with the reason, or failed under DWUNW_REQUIRE_BPF=1) and the
// receiver (built by make engines when missing).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, cliEnv, dwunwBin, fixturesX64, jsonLines, root, skipOrFail, start } from './helpers.js';
import { ensureEngines, foldedMap, parseRun, startPushReceiver } from './export-helpers.js';

const hot = join(fixturesX64, 'hot');
const profileBin = join(root, 'build', 'bpf', 'profile');

/** protojson of Pyroscope's google.v1.Profile (int64 as strings) */
interface PProfile {
  sampleType?: { type?: string; unit?: string }[];
  sample?: { locationId?: string[]; value?: string[]; label?: { key?: string; str?: string; num?: string }[] }[];
  location?: { id?: string; line?: { functionId?: string }[] }[];
  function?: { id?: string; name?: string }[];
  stringTable?: string[];
  period?: string;
}
interface PushRecord {
  headers: Record<string, string[]>;
  series: { labels: Record<string, string>; ids: string[]; profiles: PProfile[] }[];
}

t.test('profile --export pyroscope://: every sample pushed, with its labels; auth headers arrive and are never printed', async (tt) => {
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[profileBin, 'make bpf'], [hot, 'make fixtures']]) ?? ensureEngines();
  if (why) return skipOrFail(tt, why, 'export to Pyroscope\'s push API');
  const dir = mkdtempSync(join(tmpdir(), 'dwunw-export-pyro-'));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'pushed.json');
  const port = await startPushReceiver(tt, out);

  // secrets by file and by environment variable; a dead second destination makes failures (and their messages)
  const fileSecret = `s3cret-${randomBytes(8).toString('hex')}`;
  const envSecret = `tenant-${randomBytes(8).toString('hex')}`;
  const hdrFile = join(dir, 'headers');
  writeFileSync(hdrFile, `# the tenant's token\nAuthorization: Bearer ${fileSecret}\n`, { mode: 0o600 });
  const r = await start(
    process.execPath,
    [dwunwBin, 'profile', '-F', '199', '-f', '--json', '--interval', '1', '--export-timeout', '3', '--export', `pyroscope://127.0.0.1:${port}`, '--export', 'otlp+http://127.0.0.1:1', '--export-header', `@${hdrFile}`, '--export-header', 'env:DWUNW_TEST_TENANT', '--', hot, '3'],
    { timeoutMs: 180_000, env: { ...cliEnv(), DWUNW_TEST_TENANT: `X-Scope-OrgID: ${envSecret}` } },
  ).done;
  tt.equal(r.status, 0, `exit status 0 (${r.stderr.slice(-400)})`);
  const { summary, folded: foldedOut, exp } = parseRun(r);
  tt.ok(summary && summary.samples > 0, `sampled (${summary?.samples})`);
  const d = exp!.destinations.find((x) => x.url.startsWith('pyroscope'))!;
  tt.equal(d.dropped, 0, 'nothing dropped');
  const dead = exp!.destinations.find((x) => x.url.startsWith('otlp+http'))!;
  tt.ok(dead.failures >= 1 && dead.sent === 0, `the dead destination failed (${dead.failures} attempts)`);

  // a request that timed out on a loaded machine may have arrived all the same and been retried:
  // a retry carries the same sample IDs
  const seen = new Set<string>();
  const got = (existsSync(out) ? jsonLines<PushRecord>(readFileSync(out, 'utf8')) : []).filter((x) => {
    const id = x.series.flatMap((s) => s.ids).join(',');
    return !seen.has(id) && seen.add(id);
  });
  tt.equal(got.length, d.sent, `every request sent was received (${d.sent})`);
  const stacks = new Map<string, number>();
  let samples = 0;
  let cpuOk = true;
  for (const rec of got) {
    tt.same(rec.headers.Authorization, [`Bearer ${fileSecret}`], 'the header from the file arrived');
    tt.same(rec.headers['X-Scope-Orgid'], [envSecret], 'the header from the environment arrived');
    for (const s of rec.series) {
      tt.equal(s.labels.__name__, 'process_cpu');
      tt.ok(s.labels.service_name && s.labels.host_name, `series labels ${JSON.stringify(s.labels)}`);
      for (const p of s.profiles) {
        const str = p.stringTable ?? [];
        const types = (p.sampleType ?? []).map((x) => `${str[Number(x.type ?? 0)]}/${str[Number(x.unit ?? 0)]}`);
        tt.same(types, ['samples/count', 'cpu/nanoseconds']);
        const fn = new Map((p.function ?? []).map((f) => [f.id, str[Number(f.name ?? 0)]!]));
        const loc = new Map((p.location ?? []).map((l) => [l.id, fn.get(l.line?.[0]?.functionId)!]));
        for (const smp of p.sample ?? []) {
          const comm = str[Number(smp.label?.find((l) => str[Number(l.key ?? 0)] === 'comm')?.str ?? 0)]!;
          const k = [comm, ...[...(smp.locationId ?? [])].reverse().map((id) => loc.get(id))].join(';');
          const n = Number(smp.value?.[0] ?? 0);
          if (Number(smp.value?.[1] ?? 0) !== n * Number(p.period)) cpuOk = false;
          stacks.set(k, (stacks.get(k) ?? 0) + n);
          samples += n;
        }
      }
    }
  }
  if (got.some((x) => x.series.some((s) => s.labels.service_name === 'hot'))) tt.pass('hot\'s series (service_name: its executable\'s name)');
  else tt.fail('hot\'s series (service_name: its executable\'s name)');
  tt.ok(cpuOk, 'cpu nanoseconds = samples x period');
  const folded = foldedMap(foldedOut);
  tt.equal(samples, summary!.samples, `every sample received (${samples})`);
  tt.same([...stacks].sort(), [...folded].sort(), 'the same stacks with the same counts');
  const printed = r.stdout + r.stderr;
  tt.notOk(printed.includes(fileSecret) || printed.includes(envSecret), 'no header value in dwunw\'s output (summary, failures, --json)');
  tt.match(r.stderr, /profile: export otlp\+http:\/\/127\.0\.0\.1:1: .*failed attempts \(last: /, 'the failure is named');
  // a bad header line names its source, not its value
  const bad = await start(process.execPath, [dwunwBin, 'profile', '--export', `pyroscope://127.0.0.1:${port}`, '--export-header', `Bearer ${fileSecret}`, '1'], { env: cliEnv() }).done;
  tt.equal(bad.status, 2);
  tt.notOk((bad.stdout + bad.stderr).includes(fileSecret), `a refused header is not printed (${bad.stderr.trim()})`);
});
