// DWUNW_REGS_NOWAIT under ThreadSanitizer: `make tsan` (fuzz/tsan.mk) builds libdwunw and
// test/unit/test_nowait.c with clang -fsanitize=thread into build/tsan/; the test runs 4 threads
// capturing with NOWAIT while a loader thread calls dwunw_load_for and forgets maps, with fewer
// cache slots than modules (evictions under the captures). Any data race report fails, and so
// does any failed assertion of the test itself (every NOWAIT result the oracle's stack or a
// WOULDBLOCK prefix of it; no open/read/pread/stat/mutex lock/sleep inside a NOWAIT capture).
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
t.test('test_nowait under ThreadSanitizer', { skip: made.status !== 0 ? 'build failed' : !root_ && !requireAll ? 'needs root' : false }, async (t) => {
  const r = spawnSync(bin, [], {
    cwd: root,
    encoding: 'utf8',
    timeout: 10 * 60_000,
    env: { ...process.env, TSAN_OPTIONS: 'halt_on_error=1:exitcode=66', DWUNW_NOWAIT_ITERS: '2000' },
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
