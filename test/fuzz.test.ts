// The libFuzzer targets (fuzz/fuzz_*.c, built by `make fuzz` with clang -fsanitize=fuzzer,address,
// undefined): first every committed regression input is replayed (test/corpus/<target>/: the
// crashes found so far and hand-made cases; test/corpus/corrupt/ through fuzz_elf_table), then
// each target fuzzes for DWUNW_FUZZ_SECONDS (default 60, as the hardening issue asks) from its working corpus
// build/fuzz/corpus/<target>/ (kept between runs), the seeds build/fuzz/seeds/<target>/ and the
// regression inputs, one process at a time. A crash, leak, timeout (10 s per input) or
// out-of-memory fails the test; its input is kept in test/corpus/<target>/ (named in the failure)
// so that it is replayed from then on. `npm run fuzz -- --seconds N` runs the same for longer.
// A bug that is reported but not fixed yet is listed in test/corpus/known-bugs.txt, its
// reproducer named known-*: a TODO instead of a failure (see below); UBSan reports of such bugs
// that do not crash are suppressed in fuzz/ubsan.supp.
//
// Time: the build takes about a minute the first time (nothing afterwards); the replay seconds;
// the fuzzing 5 targets x DWUNW_FUZZ_SECONDS.
// $DWUNW_BUILD overrides build/.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { buildDir as build, root, skipUnless } from './helpers.js';

const out = join(build, 'fuzz');
const corpus = join(root, 'test', 'corpus');
const SECONDS = Number(process.env.DWUNW_FUZZ_SECONDS ?? 60);

const ENV: NodeJS.ProcessEnv = {
  ...process.env,
  UBSAN_OPTIONS: `halt_on_error=1:print_stacktrace=1:suppressions=${join(root, 'fuzz', 'ubsan.supp')}`,
  ASAN_OPTIONS: 'detect_leaks=1:allocator_may_return_null=1',
};

const MAX_LEN: Record<string, number> = {
  fuzz_elf_table: 4 << 20,
  fuzz_core: 4 << 20,
  fuzz_cfi: 1 << 20,
  fuzz_unwind: 65536,
};

// The working corpora grow with every run; the ELF and core ones by megabytes. Past this size a
// working corpus starts over from the seeds (npm run fuzz merges it down instead).
const MAX_WORK_BYTES = 256 << 20;
const dirBytes = (d: string): number =>
  existsSync(d) ? readdirSync(d).reduce((n, f) => n + (statSync(join(d, f)).isFile() ? statSync(join(d, f)).size : 0), 0) : 0;

// Reported bugs not fixed yet (test/corpus/known-bugs.txt): target -> functions.
const knownBugs = new Map<string, Set<string>>();
for (const line of readFileSync(join(corpus, 'known-bugs.txt'), 'utf8').split('\n')) {
  const f = line.replace(/#.*/, '').trim().split(/\s+/);
  if (f.length >= 2 && f[0]) knownBugs.set(f[0], (knownBugs.get(f[0]) ?? new Set()).add(f[1]!));
}

/** The first library function (native/src) of a sanitizer or libFuzzer report. */
function firstLibraryFrame(log: string): string | null {
  const m = /^\s*#\d+ 0x[0-9a-f]+ in (\S+) \S*native\/src\//m.exec(log) ?? /^\S*native\/src\/\S+: runtime error/m.exec(log);
  return m?.[1] ?? null;
}

const artifacts = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).filter((f) => /^(crash|leak|timeout|oom|slow-unit)-/.test(f)) : [];

/** The report of a libFuzzer run: from the sanitizer's or libFuzzer's first error line. */
function report(log: string): string {
  const lines = log.split('\n');
  const i = lines.findIndex((l) => /ERROR: |runtime error|==\d+== ERROR|deadly signal|Test unit written/.test(l));
  return lines.slice(Math.max(0, i), i + 50).join('\n');
}

function runFuzzer(bin: string, args: string[], timeoutMs: number): Promise<{ status: number | null; log: string; ms: number }> {
  return new Promise((done) => {
    const t0 = Date.now();
    const c = spawn(bin, args, { cwd: root, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    c.stdout.setEncoding('utf8').on('data', (d: string) => (log += d));
    c.stderr.setEncoding('utf8').on('data', (d: string) => {
      log += d;
      if (log.length > 4 << 20) log = log.slice(-(1 << 20)); // keep the end: the report
    });
    const timer = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.on('close', (status) => {
      clearTimeout(timer);
      done({ status, log, ms: Date.now() - t0 });
    });
  });
}

const t0 = Date.now();
const made = spawnSync('make', ['-s', '-j2', 'fuzz', `BUILD=${build}`], { cwd: root, encoding: 'utf8', timeout: 15 * 60_000 });
const built = made.status === 0;
t.ok(built, `make fuzz: the targets and their seeds (${((Date.now() - t0) / 1000).toFixed(1)} s)`, { stderr: made.stderr?.slice(-4000) });

const targets = readdirSync(join(root, 'fuzz'))
  .filter((f) => /^fuzz_\w+\.c$/.test(f))
  .map((f) => f.slice(0, -2))
  .filter((n) => n !== 'fuzz_core' || existsSync(join(root, 'native', 'src', 'core.c')))
  .sort();

// Inputs named known-* reproduce a reported library bug that is not fixed yet: each is replayed on
// its own and a finding is a TODO; once it passes, the bug is fixed: rename the file crash-*.
t.test('replay the regression corpus', skipUnless(t, 'the corpus replay', !built && 'make fuzz failed'), async (t) => {
  for (const name of targets) {
    const dirs = [join(corpus, name)];
    if (name === 'fuzz_elf_table') dirs.push(join(corpus, 'corrupt'));
    const all = dirs.flatMap((d) => (existsSync(d) ? readdirSync(d).map((f) => join(d, f)).filter((f) => statSync(f).isFile()) : []));
    const known = all.filter((f) => /\/known-[^/]+$/.test(f));
    const files = all.filter((f) => !known.includes(f));
    if (files.length === 0) t.pass(`${name}: no regression input yet`);
    else {
      const r = await runFuzzer(join(out, name), ['-timeout=10', '-rss_limit_mb=2048', ...files], 10 * 60_000);
      t.equal(r.status, 0, `${name}: ${files.length} inputs replayed without a finding (${(r.ms / 1000).toFixed(1)} s)`, {
        report: r.status === 0 ? undefined : report(r.log),
      });
    }
    for (const f of known) {
      const r = await runFuzzer(join(out, name), ['-timeout=10', '-rss_limit_mb=2048', f], 60_000);
      const rel = f.slice(root.length);
      if (r.status === 0) t.pass(`${name}: ${rel} no longer fails: the bug is fixed, rename the file crash-*`);
      else t.fail(`${name}: ${rel}`, { todo: 'a reported library bug, not fixed yet', report: report(r.log) });
    }
  }
});

t.test(`fuzz each target for ${SECONDS} s`, skipUnless(t, 'the fuzzing', !built && 'make fuzz failed'), async (t) => {
  for (const name of targets) {
    const work = join(out, 'corpus', name);
    const art = join(corpus, name);
    const seeds = join(out, 'seeds', name);
    if (dirBytes(work) > MAX_WORK_BYTES) {
      t.comment(`${name}: working corpus over ${MAX_WORK_BYTES >> 20} MiB: starting over from the seeds`);
      rmSync(work, { recursive: true, force: true });
    }
    for (const d of [work, art, seeds]) mkdirSync(d, { recursive: true });
    // The regression inputs without the known-* reproducers (they would stop the run at once).
    const regress = join(out, 'regress', name);
    rmSync(regress, { recursive: true, force: true });
    mkdirSync(regress, { recursive: true });
    for (const f of readdirSync(art)) if (!f.startsWith('known-') && statSync(join(art, f)).isFile()) copyFileSync(join(art, f), join(regress, f));
    const inputs = [work, seeds, regress];
    if (name === 'fuzz_elf_table') inputs.push(join(corpus, 'corrupt'));
    const before = new Set(artifacts(art));
    const r = await runFuzzer(
      join(out, name),
      [
        `-max_total_time=${SECONDS}`,
        '-timeout=10',
        '-rss_limit_mb=2048',
        `-max_len=${MAX_LEN[name] ?? 4096}`,
        '-print_final_stats=1',
        `-artifact_prefix=${art}/`,
        ...inputs,
      ],
      (SECONDS + 300) * 1000,
    );
    let found = artifacts(art).filter((f) => !before.has(f));
    const fn = found.length ? firstLibraryFrame(r.log) : null;
    if (found.length && fn && knownBugs.get(name)?.has(fn)) {
      // The known bug again: not kept (its reproducer is), reported as a TODO. An input of the
      // working corpus that hits it (same content hash as the artifact's name) goes too, or every
      // later run would stop on it at once.
      for (const f of found) {
        rmSync(join(art, f), { force: true });
        rmSync(join(work, f.replace(/^[a-z-]+-/, '')), { force: true });
      }
      t.fail(`${name}: found the known bug in ${fn} again`, { todo: 'a reported library bug, not fixed yet (test/corpus/known-bugs.txt)' });
      found = [];
    }
    const execs = /^stat::number_of_executed_units: *(\d+)/m.exec(r.log)?.[1] ?? '?';
    const rate = /^stat::average_exec_per_sec: *(\d+)/m.exec(r.log)?.[1] ?? '?';
    const cov = /#\d+\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/.exec(r.log);
    t.comment(`${name}: ${execs} executions (${rate}/s), cov ${cov?.[1] ?? '?'}, ft ${cov?.[2] ?? '?'}, corpus ${cov?.[3] ?? '?'}`);
    t.same(found, [], `${name}: nothing found in ${SECONDS} s (${execs} executions)`, {
      kept: found.map((f) => join('test', 'corpus', name, f)),
      reproduce: found.map((f) => `build/fuzz/${name} test/corpus/${name}/${f}`),
      report: found.length ? report(r.log) : undefined,
    });
    if (!(fn && knownBugs.get(name)?.has(fn)))
      t.equal(r.status, 0, `${name}: libFuzzer exit status 0`, { log: r.status === 0 ? undefined : report(r.log) || r.log.slice(-3000) });
    t.ok(Number(execs) > 0, `${name}: it really ran`);
  }
});

// Each UBSan suppression names a reported bug that is still open: a function of native/src listed
// in test/corpus/known-bugs.txt. A suppression left after its bug's line went (fixed) hides reports.
t.test('known-bug suppressions (fuzz/ubsan.supp): each one a listed, open bug', async (t) => {
  const supp = readFileSync(join(root, 'fuzz', 'ubsan.supp'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const listed = new Set([...knownBugs.values()].flatMap((s) => [...s]));
  t.comment(`suppressed until fixed: ${supp.join(', ') || 'none'}`);
  // a line is CHECK:FUNCTION (UBSan's format); its function must be a listed bug
  const unlisted = supp.filter((l) => !listed.has(/^[\w-]+:(\w+)$/.exec(l)?.[1] ?? ''));
  t.same(unlisted, [], 'every suppression names a function listed in test/corpus/known-bugs.txt');
});
