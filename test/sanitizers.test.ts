// The C unit tests, the test tools and the CLI's library under AddressSanitizer + UndefinedBehavior-
// Sanitizer: `make asan` (fuzz/asan.mk) builds them into build/asan/ with gcc -fsanitize=address,
// undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined, then
//  - every unit test binary runs with ASAN_OPTIONS=detect_leaks=1 (leaks fail too) and
//    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 (fuzz/ubsan.supp lists the known, reported
//    reports that are suppressed until fixed). A sanitizer report fails the test with its first
//    lines, and so does a failing assertion of the unit tests: they hold under instrumentation too
//    (the tests allow for what ASan changes: libasan.so is one more module in the qsort chains,
//    backtrace() is intercepted; libdwunw follows no frame pointer it cannot check against maps,
//    so the frame pointers ASan keeps change nothing);
//  - the tools: corpus_check on the corrupt-input corpus (the same answers as expected.txt), and
//    cfi_vs_readelf on libc, ld.so and the fixtures (the tables equal readelf's);
//  - the CLI loading the ASan libdwunw.so through koffi (LD_PRELOAD of gcc's libasan.so, leaks
//    off: node's own allocations would be reported): dump-table on libc and unwind-pid on a
//    sleeping process give the same output as with the normal library.
// $DWUNW_BUILD overrides build/.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { buildDir as build, cliEnv, dwunwSync, root, type Run, run as runProcess, skipUnless } from './helpers.js';

const asan = join(build, 'asan');
const supp = join(root, 'fuzz', 'ubsan.supp');
const libc = '/lib/x86_64-linux-gnu/libc.so.6';
const PARALLEL = 2;

const SAN_ENV: NodeJS.ProcessEnv = {
  ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0:detect_odr_violation=0',
  UBSAN_OPTIONS: `print_stacktrace=1:halt_on_error=1:suppressions=${supp}`,
  LSAN_OPTIONS: 'report_objects=0',
};

/** The first sanitizer report in some output (with a few lines of context), or null. */
function sanitizerReport(out: string): string | null {
  const lines = out.split('\n');
  const i = lines.findIndex((l) =>
    /ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|: runtime error: |^SUMMARY: \w+Sanitizer/.test(l),
  );
  return i < 0 ? null : lines.slice(Math.max(0, i - 2), i + 40).join('\n');
}

/** cmd's stdout and stderr in one stream, as they interleave (`out`). */
async function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run & { out: string }> {
  const r = await runProcess('sh', ['-c', 'exec "$0" "$@" 2>&1', cmd, ...args], { env: { ...process.env, ...env }, timeoutMs });
  return { ...r, out: r.stdout };
}

const isExecutableFile = (p: string): boolean => {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

// ---- Build --------------------------------------------------------------------------------------

const t0 = Date.now();
const made = spawnSync('make', ['-s', '-j2', 'asan', `BUILD=${build}`], { cwd: root, encoding: 'utf8', timeout: 15 * 60_000 });
const built = made.status === 0;
t.ok(built, `make asan (${((Date.now() - t0) / 1000).toFixed(1)} s)`, { stderr: made.stderr?.slice(-4000) });

// ---- Unit tests ---------------------------------------------------------------------------------

const sources = readdirSync(join(root, 'test', 'unit'))
  .filter((f) => f.endsWith('.c'))
  .map((f) => f.slice(0, -2))
  .sort();

t.test('unit tests under ASan + UBSan', skipUnless(t, 'the ASan checks', !built && 'make asan failed'), async (t) => {
  const queue = sources.filter((s) => {
    const ok = isExecutableFile(join(asan, 'test', s));
    t.ok(ok, `build/asan/test/${s} built`);
    return ok;
  });
  const results = new Map<string, Run & { out: string }>();
  const worker = async (): Promise<void> => {
    for (let s = queue.shift(); s !== undefined; s = queue.shift())
      results.set(s, await run(join(asan, 'test', s), [], SAN_ENV, 10 * 60_000));
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  for (const [s, r] of [...results].sort()) {
    const report = sanitizerReport(r.out);
    t.notOk(report, `${s}: no sanitizer report (${(r.ms / 1000).toFixed(1)} s)`, { report: report ?? undefined });
    const failed = r.out.split('\n').filter((l) => /^not ok /.test(l));
    if (!report) {
      t.ok(r.signal === null && (r.status === 0 || failed.length > 0), `${s}: ran to the end (status ${r.status}${r.signal ? `, ${r.signal}` : ''})`, {
        tail: r.status === 0 ? undefined : r.out.slice(-3000),
      });
    }
    for (const f of failed) t.fail(`${s} under ASan + UBSan: ${f}`, { tail: r.out.slice(r.out.indexOf(f), r.out.indexOf(f) + 3000) });
  }
});

// ---- Tools ----------------------------------------------------------------------------------------

function manifest(): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of readFileSync(join(root, 'test', 'corpus', 'expected.txt'), 'utf8').split('\n')) {
    if (line.startsWith('#')) continue;
    const f = line.replace(/#.*/, '').trim().split(/\s+/);
    if (f.length >= 4) m.set(f[0]!, f.slice(1, 4));
  }
  return m;
}

t.test('corpus_check under ASan: the corrupt-input corpus', skipUnless(t, 'the ASan checks', !built && 'make asan failed'), async (t) => {
  const r = await run(join(asan, 'test', 'tools', 'corpus_check'), ['test/corpus/expected.txt', 'test/corpus/corrupt'], SAN_ENV, 5 * 60_000);
  const report = sanitizerReport(r.out);
  t.notOk(report, `no sanitizer report (${(r.ms / 1000).toFixed(1)} s)`, { report: report ?? undefined });
  t.equal(r.status, 0, 'exit status 0');
  const want = manifest();
  const got = new Map(r.out.split('\n').filter((l) => /^\S+ \S+ \S+ \S+ \d+$/.test(l)).map((l) => [l.split(' ')[0]!, l.split(' ').slice(1, 4)]));
  const wrong = [...want].filter(([f, w]) => JSON.stringify(got.get(f)) !== JSON.stringify(w)).map(([f, w]) => `${f}: got ${got.get(f)?.join(' ')}, want ${w.join(' ')}`);
  t.same(wrong, [], `every file answers as expected.txt says (${got.size} of ${want.size} files)`);
});

t.test('cfi_vs_readelf under ASan: tables equal readelf\'s', skipUnless(t, 'the ASan checks', !built && 'make asan failed'), async (t) => {
  const files = [libc, '/lib64/ld-linux-x86-64.so.2'].filter(existsSync);
  const fixdir = join(root, 'fixtures', 'x86_64', 'build');
  if (existsSync(fixdir))
    files.push(...readdirSync(fixdir).filter((f) => /-(pie|static)(-g|-dfo)?$/.test(f)).map((f) => join(fixdir, f)));
  const r = await run(join(asan, 'test', 'tools', 'cfi_vs_readelf'), files, SAN_ENV, 10 * 60_000);
  const report = sanitizerReport(r.out);
  t.notOk(report, `no sanitizer report (${files.length} files, ${(r.ms / 1000).toFixed(1)} s)`, { report: report ?? undefined });
  const bad = r.out.split('\n').filter((l) => /^(FAIL|ERROR) /.test(l));
  t.same(bad, [], 'every file OK or SKIP');
  t.equal(r.status, 0, 'exit status 0');
});

// ---- The CLI with the ASan library ------------------------------------------------------------------

const libasan = (() => {
  try {
    return execFileSync('gcc', ['-print-file-name=libasan.so'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
})();

function cli(args: string[], withAsan: boolean): Run {
  const asanEnv = { ...SAN_ENV, LD_PRELOAD: libasan, ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=0', DWUNW_LIB: join(asan, 'libdwunw.so') };
  return dwunwSync(args, { env: cliEnv(withAsan ? (asanEnv as Record<string, string>) : {}), timeoutMs: 120_000 });
}

t.test('the CLI with the ASan libdwunw.so (koffi, LD_PRELOAD=libasan.so)', skipUnless(t, 'the CLI under ASan', (!built && 'make asan failed') || (!existsSync(libasan) && `no ${libasan} (scripts/ensure-deps installs libclang-rt-14-dev)`)), async (t) => {
  // dump-table on libc, JSON: the same rows as with the normal library (the build time differs).
  const a = cli(['dump-table', libc, '--json'], true);
  t.notOk(sanitizerReport(a.stderr), 'dump-table: no sanitizer report', { report: sanitizerReport(a.stderr) ?? undefined });
  t.equal(a.status, 0, `dump-table: exit status 0 (${(a.ms / 1000).toFixed(1)} s)`, { stderr: a.stderr.slice(0, 2000) });
  const n = cli(['dump-table', libc, '--json'], false);
  const strip = (s: string): string => s.replace(/"build_ms":[0-9.]+/, '"build_ms":0');
  t.ok(a.stdout.length > 100000 && strip(a.stdout) === strip(n.stdout), 'dump-table --json: the same output as the normal library');

  // unwind-pid on a sleeping process: the same frames.
  const target = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.teardown(() => {
    target.kill('SIGKILL');
  });
  const pid = target.pid!;
  for (let i = 0; i < 200 && !/ \(sleep\) S /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await sleep(20);
  await sleep(100);
  const u = cli(['unwind-pid', String(pid), '--json'], true);
  t.notOk(sanitizerReport(u.stderr), 'unwind-pid: no sanitizer report', { report: sanitizerReport(u.stderr) ?? undefined });
  t.equal(u.status, 0, `unwind-pid: exit status 0 (${(u.ms / 1000).toFixed(1)} s)`, { stderr: u.stderr.slice(0, 2000) });
  const v = cli(['unwind-pid', String(pid), '--json'], false);
  const pcs = (s: string): string[] => {
    try {
      return (JSON.parse(s) as { threads: { frames: { pc: string }[]; stop: string }[] }).threads.flatMap((x) => [...x.frames.map((f) => f.pc), x.stop]);
    } catch {
      return [];
    }
  };
  t.ok(pcs(u.stdout).length > 3, `unwind-pid: frames (${pcs(u.stdout).length - 1})`);
  t.same(pcs(u.stdout), pcs(v.stdout), 'unwind-pid: the same frames and stop as the normal library');
});
