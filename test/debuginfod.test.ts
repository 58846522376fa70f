// Names for stripped distribution code from a debuginfod server: Debian's own `debuginfod` on a
// loopback port serves the real Debian debug packages (libc6-dbg, python3.11-dbg at exactly the
// installed versions, downloaded once into build/debuginfod-debs). The local debug files
// (/usr/lib/debug) are hidden from dwunw (--debug-dir of an empty directory), so names can only
// come from the server; gdb, with the same files installed under /usr/lib/debug, is the oracle.
// Checked: frames of stripped glibc and python3.11 code that print [unknown] without the server
// carry gdb's names with it; a second run is served from the cache (the server's request count
// does not move); a stopped server gives one summary line and the same stacks, unnamed.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { parseProfileJson } from '../lib/profile.js';
import { bpfUnavailable, cliEnv, dwunwBin, root, skipOrFail, start, waitFor } from './helpers.js';

const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const PYTHON = '/usr/bin/python3.11';

interface JFrame {
  pc: string;
  module: string | null;
  symbol: string | null;
}
interface JProcess {
  threads: { tid: number; frames: JFrame[] }[];
}

const work = mkdtempSync(join(tmpdir(), 'dwunw-debuginfod-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const empty = join(work, 'no-debug-files');
mkdirSync(empty);

/** The installed version of a Debian package, or null. */
function installed(pkg: string): string | null {
  const r = spawnSync('dpkg-query', ['-W', '-f=${db:Status-Status} ${Version}', pkg], { encoding: 'utf8' });
  const m = /^installed (\S+)$/.exec(r.stdout.trim());
  return r.status === 0 && m ? m[1]! : null;
}

/** The .deb of pkg at version, downloaded once into build/debuginfod-debs (kept between runs). */
function deb(dir: string, pkg: string, version: string): string {
  const file = readdirSync(dir).find((f) => f.startsWith(`${pkg}_${version.replace(/^\d+:/, '').replace(/:/g, '%3a')}_`));
  if (file) return join(dir, file);
  execFileSync('apt-get', ['download', '-q', `${pkg}=${version}`], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const got = readdirSync(dir).find((f) => f.startsWith(`${pkg}_`) && f.endsWith('.deb'));
  if (!got) throw new Error(`apt-get download ${pkg}=${version} left no .deb in ${dir}`);
  return join(dir, got);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/** The server's Prometheus metrics, as name{labels} -> value. */
async function metrics(port: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const l of text.split('\n')) {
      const m = /^(.+) (\S+)$/.exec(l);
      if (m) out.set(m[1]!, Number(m[2]));
    }
  } catch {
    // not up yet
  }
  return out;
}
const requests = (m: Map<string, number>): number => m.get('http_requests_total{type="debuginfo"}') ?? 0;

/** A name as gdb shows the function: without GCC's clone suffixes (.part.0, .lto_priv.0, ...). */
const plain = (n: string): string => n.replace(/(\.(part|isra|constprop|cold|lto_priv)\.\d+)+$/, '');

/** gdb's backtrace of pid: for each pc gdb prints, the function that holds it (the last of its inline chain). */
function gdbNames(pid: number): Map<bigint, string> {
  const r = spawnSync('gdb', ['-batch', '-nx', '-p', String(pid), '-ex', 'set backtrace past-main on', '-ex', 'bt'], { encoding: 'utf8', timeout: 120_000 });
  const out = new Map<bigint, string>();
  let pc: bigint | null = null;
  for (const l of r.stdout.split('\n')) {
    const m = /^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+) \(/.exec(l);
    if (!m) continue;
    if (m[1]) pc = BigInt(`0x${m[1]}`);
    if (pc !== null) out.set(pc, m[2]!);
  }
  return out;
}

function unwind(pid: number, args: string[], env: Record<string, string>): { frames: JFrame[]; stderr: string; status: number | null } {
  const e = cliEnv(env);
  if (!('DEBUGINFOD_URLS' in env)) delete e.DEBUGINFOD_URLS;
  const r = spawnSync(dwunwBin, ['unwind-pid', String(pid), '--json', '--debug-dir', empty, ...args], {
    cwd: root,
    env: e,
    encoding: 'utf8',
    timeout: 180_000,
  });
  const j = JSON.parse(r.stdout || '{"threads":[]}') as JProcess;
  return { frames: j.threads[0]?.frames ?? [], stderr: r.stderr, status: r.status };
}

// ---- the server --------------------------------------------------------------------------------

const debs = join(root, 'build', 'debuginfod-debs');
mkdirSync(debs, { recursive: true });
const libcVersion = installed('libc6');
const pyVersion = installed('python3.11-minimal');
const served: string[] = [];
if (libcVersion) served.push(deb(debs, 'libc6-dbg', libcVersion));
if (pyVersion && existsSync(PYTHON)) served.push(deb(debs, 'python3.11-dbg', pyVersion));
const serveDir = join(work, 'debs');
mkdirSync(serveDir);
for (const f of served) execFileSync('ln', ['-s', f, join(serveDir, f.split('/').pop()!)]);

let port = 0;
let server: ReturnType<typeof start> | null = null;
t.before(async () => {
  port = await freePort();
  server = start('debuginfod', ['-p', String(port), '-L', '-U', serveDir, '-d', join(work, 'db.sqlite'), '-t', '0', '-g', '0'], {
    timeoutMs: 900_000,
  });
  // up, every .deb scanned, the scanner idle
  let m = new Map<string, number>();
  const end = Date.now() + 300_000;
  while (Date.now() < end && server.child.exitCode === null) {
    m = await metrics(port);
    if ((m.get('scanned_files_total{source=".deb archive"}') ?? 0) >= served.length && m.get('thread_busy{role="scan"}') === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  if ((m.get('scanned_files_total{source=".deb archive"}') ?? 0) < served.length) {
    server.child.kill('SIGTERM');
    throw new Error(`debuginfod did not scan ${served.length} .deb files: ${(await server.done).stderr.slice(-500)}`);
  }
});
t.teardown(() => {
  server?.child.kill('SIGTERM');
});

const urls = (): Record<string, string> => ({ DEBUGINFOD_URLS: `http://127.0.0.1:${port}`, DEBUGINFOD_CACHE_PATH: join(work, 'cache') });

/** Frames of `module` that had no name before and have one after, checked against gdb; returns [before, after] counts. */
function compare(tt: Test, module: string, before: JFrame[], after: JFrame[], gdb: Map<bigint, string>): void {
  tt.equal(after.length, before.length, `${module}: the same stack (${before.length} frames)`);
  let unknown = 0;
  let named = 0;
  for (const [i, b] of before.entries()) {
    if (b.module !== module || b.symbol !== null) continue;
    unknown++;
    const a = after[i]!;
    tt.equal(a.pc, b.pc, `#${i}: the same pc`);
    const want = gdb.get(BigInt(b.pc));
    tt.ok(a.symbol !== null, `#${i} ${b.pc}: named with the server (${a.symbol})`);
    if (a.symbol !== null) {
      named++;
      tt.equal(plain(a.symbol), want, `#${i} ${b.pc}: ${a.symbol} is gdb's ${want}`);
    }
  }
  tt.ok(unknown > 0, `${module}: frames without a name before (${unknown})`);
  tt.equal(named, unknown, `${module}: all of them named after (${named}/${unknown})`);
}

/** A program stopped inside glibc's qsort (msort_with_tmp, a static function) by its comparator; its pid. */
async function startQs(tt: Test): Promise<number> {
  const exe = join(work, 'qs');
  if (!existsSync(exe)) {
    const src = join(work, 'qs.c');
    writeFileSync(src, QS);
    execFileSync('gcc', ['-O1', '-g', '-o', exe, src]);
  }
  let ready = false;
  const c = start(exe, [], { onOutput: (o) => (ready ||= o.includes('ready')) });
  tt.teardown(() => c.child.kill('SIGKILL'));
  await waitFor(() => ready, 30_000, 'the qsort fixture');
  return c.child.pid!;
}

const QS = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static int cmp(const void *a, const void *b)
{
	static int once;
	if (!once++) { puts("ready"); fflush(stdout); for (;;) pause(); }
	return *(const int *)a - *(const int *)b;
}
int main(void)
{
	int v[64];
	for (int i = 0; i < 64; i++) v[i] = 64 - i;
	qsort(v, 64, sizeof(v[0]), cmp);
	return v[0];
}
`;

// ---- the tests -------------------------------------------------------------------------------------

t.test('stripped glibc code (qsort\'s msort_with_tmp): named from the server as gdb names it; then from the cache', async (t) => {
  if (!libcVersion) return t.fail('libc6 is not installed');
  const pid = await startQs(t);

  const before = unwind(pid, ['--no-debuginfod'], {});
  t.equal(before.status, 0);
  const n0 = requests(await metrics(port));
  const after = unwind(pid, [], urls());
  t.equal(after.status, 0, 'exit 0');
  t.equal(after.stderr, '', 'nothing on stderr: every file came');
  const n1 = requests(await metrics(port));
  t.equal(n1 - n0, 1, 'one request reached the server (libc.so.6\'s debug file)');
  compare(t, LIBC, before.frames, after.frames, gdbNames(pid));

  const again = unwind(pid, [], urls());
  t.same(
    again.frames.map((f) => f.symbol),
    after.frames.map((f) => f.symbol),
    'a second run: the same names',
  );
  t.equal(requests(await metrics(port)), n1, 'a second run: no request reaches the server (the cache serves)');
});

t.test('stripped python3.11 code: named from the server as gdb names it', async (t) => {
  if (!pyVersion || !existsSync(PYTHON)) return t.fail(`${PYTHON} is not installed`);
  const script = join(work, 'sleep_in_sort.py');
  writeFileSync(script, 'import time\ndef key(x):\n    print("ready", flush=True)\n    time.sleep(100000)\n    return x\nsorted([3, 1, 2], key=key)\n');
  let ready = false;
  const c = start(PYTHON, [script], { onOutput: (o) => (ready ||= o.includes('ready')) });
  t.teardown(() => c.child.kill('SIGKILL'));
  await waitFor(() => ready, 30_000, 'python3.11');
  const pid = c.child.pid!;
  const before = unwind(pid, ['--no-debuginfod'], {});
  const after = unwind(pid, [], urls());
  t.equal(after.status, 0, 'exit 0');
  t.equal(after.stderr, '', 'nothing on stderr: every file came');
  compare(t, PYTHON, before.frames, after.frames, gdbNames(pid));
});

t.test('profile (BPF) of python3.11: fetched while sampling, frames named before the report', async (t) => {
  const profileBin = join(root, 'build', 'bpf', 'profile');
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON', [[profileBin, 'make bpf']]);
  if (why) return skipOrFail(t, why, 'profile skipped');
  if (!pyVersion || !existsSync(PYTHON)) return t.fail(`${PYTHON} is not installed`);
  const py = 'import time\nt = time.time()\nwhile time.time() - t < 2: sorted(range(20000), key=lambda x: -x)\n';
  const prof = (args: string[], env: Record<string, string>) => {
    const e = cliEnv(env);
    if (!('DEBUGINFOD_URLS' in env)) delete e.DEBUGINFOD_URLS;
    return spawnSync(profileBin, ['-U', '--json', '-F', '199', '--debug-dir', empty, ...args, '--', PYTHON, '-c', py], {
      env: e,
      encoding: 'utf8',
      timeout: 180_000,
    });
  };
  /**
   * python3.11 is not PIE (its pcs are its file's addresses): its PLT stubs as objdump labels them
   * (`name@plt`; the first, PLT0, has no name of its own). A sample in a stub (time_time's call of
   * clock_gettime@plt) is named so, with or without a debug file: no symbol table has the stubs.
   */
  const stubs = [...execFileSync('objdump', ['-d', '-j', '.plt', '-j', '.plt.sec', '-j', '.plt.got', PYTHON], { encoding: 'utf8', maxBuffer: 1 << 26 }).matchAll(/^([0-9a-f]+) <(.+)>:$/gm)]
    .filter((m) => !/[+-]0x[0-9a-f]+$/.test(m[2]!))
    .map((m) => [BigInt(`0x${m[1]}`), m[2]!] as const);
  t.ok(stubs.length > 0, `objdump: ${PYTHON} has PLT stubs (${stubs.length})`);
  /** objdump's name for the stub holding pc, or null when pc is in none (16-byte stubs). */
  const stubOf = (pc: string): string | null => [...stubs].reverse().find(([a]) => BigInt(pc) >= a && BigInt(pc) < a + 16n)?.[1] ?? null;
  /** Frames of python3.11 and libc.so.6 left [unknown], weighted by samples; PLT stubs named otherwise than objdump; every frame name. */
  const unknown = (ndjson: string): { n: number; stubs: number; wrongStubs: string[]; names: Set<string> } => {
    let n = 0;
    let inStubs = 0;
    const wrongStubs: string[] = [];
    const names = new Set<string>();
    for (const l of ndjson.split('\n').filter((x) => x.startsWith('{"pid"'))) {
      const s = JSON.parse(l) as { count: number; user?: { frames: { pc: string; symbol: string | null; module: string | null }[] } };
      for (const f of s.user?.frames ?? []) {
        if (f.symbol) names.add(f.symbol);
        const stub = f.module === PYTHON ? stubOf(f.pc) : null;
        if (stub) {
          inStubs += s.count;
          if (f.symbol !== stub) wrongStubs.push(`${f.pc}: ${f.symbol} (objdump: ${stub})`);
        }
        if (!f.symbol && (f.module === PYTHON || f.module === LIBC)) n += s.count;
      }
    }
    return { n, stubs: inStubs, wrongStubs, names };
  };
  const before = prof(['--no-debuginfod'], {});
  t.equal(before.status, 0, `without the server: exit 0 ${before.stderr.slice(-300)}`);
  const b = unknown(before.stdout);
  t.ok(b.n > 0, `without the server: [unknown] frames in python3.11 and libc (${b.n})`);
  const after = prof([], { ...urls(), DEBUGINFOD_CACHE_PATH: join(work, 'cache-profile') });
  t.equal(after.status, 0, 'with the server: exit 0');
  t.notMatch(after.stderr, /debuginfod/, 'no summary line: every file came');
  const a = unknown(after.stdout);
  t.equal(a.n, 0, `with the server: no python3.11 or libc frame left [unknown] (${a.stubs} samples in python3.11's PLT stubs)`);
  t.same([...b.wrongStubs, ...a.wrongStubs], [], `PLT stubs named name@plt as objdump names them (${b.stubs} + ${a.stubs} samples)`);
  t.ok([...a.names].some((n) => plain(n) === 'list_sort_impl'), 'a static function of python3.11 named (list_sort_impl)');
});

/** `go tool pprof -raw`'s locations: mapping file and address -> the functions (inline chain) with their lines. */
function rawLocations(file: string): Map<string, string> {
  const r = spawnSync('go', ['tool', 'pprof', '-raw', file], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`go tool pprof -raw ${file}: ${r.stderr.slice(-300)}`);
  const text = r.stdout;
  const files = new Map<string, string>();
  for (const m of (text.split('\nMappings\n')[1] ?? '').matchAll(/^(\d+): \S+ (\S+)/gm)) files.set(m[1]!, m[2]!);
  const out = new Map<string, string>();
  let key: string | null = null;
  for (const l of (text.split('\nLocations\n')[1] ?? '').split('\nMappings\n')[0]!.split('\n')) {
    const m = /^\s+\d+: (0x[0-9a-f]+) M=(\d+) ?(.*?)(?: s=\d+)?$/.exec(l);
    if (m) {
      key = `${files.get(m[2]!) ?? '?'} ${m[1]}`;
      out.set(key, m[3]!.trim());
      continue;
    }
    const cont = /^\s{10,}(\S.*?)(?: s=\d+)?$/.exec(l);
    if (cont && key) out.set(key, `${out.get(key)} | ${cont[1]!.trim()}`);
  }
  return out;
}

t.test('dwunw symbolize: a pprof taken with --no-debuginfod, named later, equals the pprof taken with the server (go tool pprof -raw)', async (t) => {
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON', [[join(root, 'build', 'bpf', 'profile'), 'make bpf']]);
  if (why) return skipOrFail(t, why, 'profile skipped');
  if (!pyVersion || !existsSync(PYTHON)) return t.fail(`${PYTHON} is not installed`);
  const py = 'import time\nt = time.time()\nwhile time.time() - t < 2: sorted(range(20000), key=lambda x: -x)\n';
  const dwunw = (args: string[], env: Record<string, string>) => {
    const e = cliEnv(env);
    if (!('DEBUGINFOD_URLS' in env)) delete e.DEBUGINFOD_URLS;
    return spawnSync(dwunwBin, args, { cwd: root, env: e, encoding: 'utf8', timeout: 180_000 });
  };
  const a = join(work, 'no-debuginfod.pb.gz');
  const b = join(work, 'symbolized.pb.gz');
  const c = join(work, 'with-debuginfod.pb.gz');
  const profile = (out: string, args: string[], env: Record<string, string>) =>
    dwunw(['profile', '-F', '199', '--debug-dir', empty, ...args, '--pprof', out, '--', PYTHON, '-c', py], env);
  const ra = profile(a, ['--no-debuginfod'], {});
  t.equal(ra.status, 0, `profile --no-debuginfod: exit 0 ${ra.stderr.slice(-300)}`);
  const rc = profile(c, [], { ...urls(), DEBUGINFOD_CACHE_PATH: join(work, 'cache-pprof-live') });
  t.equal(rc.status, 0, `profile with the server: exit 0 ${rc.stderr.slice(-300)}`);
  const rb = dwunw(['symbolize', a, '-o', b, '--debug-dir', empty, '--json'], { ...urls(), DEBUGINFOD_CACHE_PATH: join(work, 'cache-pprof-later') });
  t.equal(rb.status, 0, `symbolize: exit 0 ${rb.stderr.slice(-300)}`);

  const before = rawLocations(a);
  const later = rawLocations(b);
  const live = rawLocations(c);
  const ours = (k: string) => k.startsWith(`${PYTHON} `) || k.startsWith(`${LIBC} `);
  const unnamedBefore = [...before].filter(([k, v]) => ours(k) && v === '').map(([k]) => k);
  t.ok(unnamedBefore.length > 0, `without the server: python3.11 and libc locations without a function (${unnamedBefore.length}), has_functions=false`);
  t.match(spawnSync('go', ['tool', 'pprof', '-raw', a], { encoding: 'utf8' }).stdout, new RegExp(`${PYTHON} [0-9a-f]{40} *\n`), 'python3.11\'s mapping: its build id, no [FN]');
  const left = unnamedBefore.filter((k) => later.get(k) === '');
  t.same(left, [], 'symbolize named every one of them');
  // the same location (file and address) in both profiles: the same functions and lines
  let shared = 0;
  const differ: string[] = [];
  for (const [k, v] of later) {
    const w = live.get(k);
    if (!ours(k) || w === undefined) continue;
    shared++;
    // the live profile has no lines (without --lines): compare the functions
    const fn = (x: string) => x.split(' | ').map((f) => f.split(' ')[0]).join(' | ');
    if (fn(v) !== fn(w)) differ.push(`${k}: ${v} vs ${w}`);
  }
  t.ok(shared >= 10, `locations in both profiles: ${shared}`);
  t.same(differ, [], 'named later = named live, location by location');
});

t.test('the server stopped: one summary line names the module and why; the stacks are the same, unnamed', async (t) => {
  const pid = await startQs(t);
  const before = unwind(pid, ['--no-debuginfod'], {});
  server!.child.kill('SIGTERM');
  await server!.done;
  // a fresh cache: nothing to find there
  const after = unwind(pid, [], { ...urls(), DEBUGINFOD_CACHE_PATH: join(work, 'cache-2') });
  t.equal(after.status, 0, 'exit 0: a missing name is no error');
  const lines = after.stderr.split('\n').filter(Boolean);
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0] ?? '', /^dwunw: debuginfod: no debug file for 1 module: libc\.so\.6 \(Connection refused\); their frames keep \[unknown\]$/);
  t.same(
    after.frames.map((f) => [f.pc, f.symbol]),
    before.frames.map((f) => [f.pc, f.symbol]),
    'the same frames and names as without debuginfod',
  );
});

t.test('a server that stops mid-run (mid-request): one summary line naming the module and why; sampling never waits, every sample accounted for', async (t) => {
  const profileBin = join(root, 'build', 'bpf', 'profile');
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON', [[profileBin, 'make bpf']]);
  if (why) return skipOrFail(t, why, 'profile skipped');
  if (!pyVersion || !existsSync(PYTHON)) return t.fail(`${PYTHON} is not installed`);
  // a server that takes each request, holds it while sampling goes on, then goes away
  let asked = 0;
  const sockets = new Set<import('node:net').Socket>();
  const dying = createServer((s) => {
    sockets.add(s);
    s.once('data', () => {
      asked++;
      setTimeout(() => {
        dying.close();
        for (const x of sockets) x.destroy();
      }, 1500);
    });
  });
  await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', resolve));
  const addr = dying.address();
  const dport = typeof addr === 'object' && addr ? addr.port : 0;
  t.teardown(() => {
    dying.close();
    for (const x of sockets) x.destroy();
  });
  const py = 'import time\nt = time.time()\nwhile time.time() - t < 3: sorted(range(20000), key=lambda x: -x)\n';
  const e = cliEnv({ DEBUGINFOD_URLS: `http://127.0.0.1:${dport}`, DEBUGINFOD_CACHE_PATH: join(work, 'cache-dying'), DEBUGINFOD_TIMEOUT: '30' });
  const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const c = start(profileBin, ['-U', '--json', '-F', '99', '--debug-dir', empty, '--', PYTHON, '-c', py], { env: e, timeoutMs: 180_000 });
    void c.done.then((x) => resolve({ status: x.status, stdout: x.stdout, stderr: x.stderr }));
  });
  t.equal(r.status, 0, `exit 0 ${r.stderr.slice(-300)}`);
  t.ok(asked > 0, `the server was asked (${asked} requests) before it stopped`);
  const lines = r.stderr.split('\n').filter((l) => l.includes('debuginfod'));
  t.equal(lines.length, 1, `one debuginfod line: ${lines[0]}`);
  t.match(lines[0] ?? '', /^profile: debuginfod: no debug file for \d+ modules?: .*\bpython3\.11 \([^)]+\)/, 'it names python3.11 and the cause');
  const out = parseProfileJson(r.stdout);
  t.ok(out.summary && out.summary.samples > 0, `samples taken while the request hung (${out.summary?.samples})`);
  t.equal(out.entries.reduce((a, s) => a + s.count, 0), out.summary?.samples, 'every sample in a stack');
});
