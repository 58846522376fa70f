// DWUNW_REGS_NOWAIT under ThreadSanitizer: `make tsan` (fuzz/tsan.mk) builds libdwunw (yielding
// at its race points) and test/unit/test_nowait.c with clang -fsanitize=thread into build/tsan/;
// the test runs 4 threads capturing with NOWAIT while loader threads call dwunw_load_for and
// forget maps, with fewer cache slots than modules and a byte bound under what they hold (evictions
// under the captures); a second run
// raises the pressure. Any data race report fails, and so does any failed assertion of the test
// itself (every NOWAIT result the oracle's stack or a WOULDBLOCK prefix of it; no
// open/read/pread/stat/mutex lock/sleep inside a NOWAIT capture).
// Needs root (the test ptraces its children once, to take their snapshots).
import { spawnSync } from 'node:child_process';
import { resolve, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('..', import.meta.url));
const build = resolve(root, process.env.DWUNW_BUILD ?? 'build');
const bin = join(build, 'tsan', 'test', 'test_nowait');
const requireAll = process.env.DWUNW_REQUIRE_BPF === '1';

const t0 = Date.now();
const made = spawnSync('make', ['-s', '-j2', 'tsan', `BUILD=${build}`], { cwd: root, encoding: 'utf8', timeout: 15 * 60_000 });
t.equal(made.status, 0, `make tsan (${((Date.now() - t0) / 1000).toFixed(1)} s)`, { stderr: made.stderr?.slice(-4000) });

const root_ = process.getuid?.() === 0;
const skip = made.status !== 0 ? 'build failed' : !root_ && !requireAll ? 'needs root' : false;

// One run of test_nowait with `env` (its pressure knobs) beside the defaults.
const nowaitRun = (name: string, env: Record<string, string>) =>
  t.test(name, { skip }, async (t) => {
    const r = spawnSync(bin, [], {
      cwd: root,
      encoding: 'utf8',
      timeout: 10 * 60_000,
      env: { ...process.env, TSAN_OPTIONS: 'halt_on_error=1:exitcode=66', DWUNW_NOWAIT_ITERS: '2000', ...env },
    });
    const out = `${r.stdout}${r.stderr}`;
    const report = /WARNING: ThreadSanitizer[\s\S]{0,4000}/.exec(out);
    t.notOk(report, 'no ThreadSanitizer report', { report: report?.[0] });
    t.equal(r.status, 0, `exit status 0 (${r.signal ?? ''})`);
    const failed = out.split('\n').filter((l) => l.startsWith('not ok'));
    t.same(failed, [], 'every assertion of test_nowait holds under TSan');
    t.match(out, /^1\.\.\d+$/m, 'the test ran to its end');
    const summary = /^# \d+ NOWAIT captures: .*$/m.exec(out);
    t.ok(summary, summary?.[0] ?? 'no summary line');
  });

// The default run with the cache's byte bound under what the targets' modules hold (~0.3 of
// ~0.9 MB): warm modules are freed by bytes as well as for slots (module_bound.c), 172 of 223
// evictions measured natively, while the captures take them without a lock.
nowaitRun('test_nowait under ThreadSanitizer', { DWUNW_NOWAIT_BYTES: '300000' });
// More loaders and capturers than cores, a forget every 5 rounds and a module of another file
// opened after each load (evictions): mappings are resolved again while captures read them. With
// the library's race points (fuzz/tsan.mk), before a mapping's (slot, generation) was one word
// (proc.h: mod_load), this run took another file's module for a mapping in 8 of 10 runs, the
// default one in 6 of 10.
nowaitRun('test_nowait under ThreadSanitizer, eviction stress', {
  DWUNW_NOWAIT_SLOTS: '4',
  DWUNW_NOWAIT_LOADERS: '3',
  DWUNW_NOWAIT_CAPTURERS: '8',
  DWUNW_NOWAIT_ROUNDS: '100',
  DWUNW_NOWAIT_FORGET_EVERY: '5',
  DWUNW_NOWAIT_CHURN: '1',
});
