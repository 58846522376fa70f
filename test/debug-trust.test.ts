// Debug files only from where only root writes: a stripped program whose separate debug file
// (objcopy --only-keep-debug, found by build id under --debug-dir) names its static function.
// The same file under a directory owned by another user, or group/world-writable without the
// sticky bit, is refused: the frame keeps [unknown] and one line names the file and why, once
// (unwind-pid and the profile tool). Under root's own directories, and a sticky world-writable one
// (/tmp's rule), it is used. nm on the debug file is the oracle for the name.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseProfileJson } from '../lib/profile.js';
import { bpfUnavailable, cliEnv, dwunwBin, root, skipOrFail, start, waitFor } from './helpers.js';

const work = mkdtempSync(join(tmpdir(), 'dwunw-debug-trust-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const NOBODY = 65534;

const SRC = `#include <stdio.h>
#include <unistd.h>
#include <time.h>
__attribute__((noinline)) static void wait_in_static(int spin)
{
	puts("ready");
	fflush(stdout);
	if (spin) {
		time_t end = time(NULL) + spin;
		while (time(NULL) < end)
			;
		return;
	}
	for (;;)
		pause();
}
int main(int argc, char **argv)
{
	wait_in_static(argc > 1 ? atoi(argv[1]) : 0);
	return 0;
}
`;
const src = join(work, 'prog.c');
writeFileSync(src, SRC.replace('#include <time.h>', '#include <time.h>\n#include <stdlib.h>'));
const prog = join(work, 'prog');
execFileSync('gcc', ['-O1', '-g', '-Wl,--build-id', '-o', prog, src]);
const debug = join(work, 'prog.debug');
execFileSync('objcopy', ['--only-keep-debug', prog, debug]);
execFileSync('strip', ['--strip-all', prog]);
const buildId = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', prog], { encoding: 'utf8' }))![1]!;
const nmName = execFileSync('nm', [debug], { encoding: 'utf8' })
  .split('\n')
  .map((l) => l.split(' ')[2] ?? '')
  .find((n) => n.startsWith('wait_in_static'))!;

/** A debug directory holding prog.debug by build id; `own` sets its owner and mode. */
function debugDir(name: string, uid: number, mode: number): string {
  const d = join(work, name);
  const sub = join(d, '.build-id', buildId.slice(0, 2));
  mkdirSync(sub, { recursive: true });
  cpSync(debug, join(sub, `${buildId.slice(2)}.debug`));
  chownSync(d, uid, uid);
  chmodSync(d, mode);
  return d;
}
const trusted = debugDir('root-owned', 0, 0o755);
const sticky = debugDir('sticky', 0, 0o1777);
const foreign = debugDir('nobody-owned', NOBODY, 0o755);
const writable = debugDir('world-writable', 0, 0o777);

interface Frame {
  symbol: string | null;
  module: string | null;
}
function unwind(pid: number, dir: string): { names: (string | null)[]; all: string[]; stderr: string; status: number | null } {
  const e = cliEnv();
  delete e.DEBUGINFOD_URLS;
  const r = spawnSync(dwunwBin, ['unwind-pid', String(pid), '--json', '--no-debuginfod', '--debug-dir', dir], { cwd: root, env: e, encoding: 'utf8', timeout: 180_000 });
  const j = JSON.parse(r.stdout || '{"threads":[]}') as { threads: { frames: Frame[]; stop?: string }[] };
  const frames = j.threads[0]?.frames ?? [];
  // every frame and the stop reason: the diagnostics when a name is missing
  const all = [...frames.map((f) => `${f.symbol ?? '?'} (${f.module ?? '?'})`), `stop ${j.threads[0]?.stop ?? '?'}`];
  return { names: frames.filter((f) => f.module === prog).map((f) => f.symbol), all, stderr: r.stderr, status: r.status };
}

t.test('unwind-pid: the debug file is used from root\'s directories only', async (t) => {
  t.match(nmName, /^wait_in_static/, `nm: the debug file has ${nmName}`);
  let ready = false;
  const c = start(prog, [], { onOutput: (o) => (ready ||= o.includes('ready')) });
  t.teardown(() => c.child.kill('SIGKILL'));
  await waitFor(() => ready, 120_000, 'the fixture');
  const pid = c.child.pid!;
  // "ready" is printed before pause(): on a loaded machine the target may still be in fflush or
  // the PLT's first resolution of pause. Unwind only once it sleeps in pause (x86_64 syscall 34),
  // so every run sees the same stack. The limit is a hang guard.
  const inPause = (): boolean => {
    try {
      return readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ')[0] === '34';
    } catch {
      return false;
    }
  };
  await waitFor(inPause, 120_000, 'the fixture to sleep in pause');
  for (const [dir, what] of [
    [trusted, 'root-owned 0755'],
    [sticky, 'root-owned 1777 (sticky)'],
  ] as const) {
    const r = unwind(pid, dir);
    t.equal(r.status, 0, `${what}: exit 0`);
    t.ok(r.names.includes(nmName), `${what}: ${nmName} named (${r.names.join(', ')})`, { frames: r.all });
    t.equal(r.stderr, '', `${what}: nothing on stderr`);
  }
  for (const [dir, why] of [
    [foreign, `in ${foreign}, owned by uid ${NOBODY}`],
    [writable, `in ${writable}, writable by group or others`],
  ] as const) {
    const r = unwind(pid, dir);
    t.equal(r.status, 0, `${dir}: exit 0`);
    t.notOk(r.names.includes(nmName), `${dir}: not named (${r.names.join(', ')})`);
    t.ok(r.names.includes(null), `${dir}: the frame keeps [unknown]`);
    const lines = r.stderr.split('\n').filter(Boolean);
    t.same(lines, [`dwunw: debug file refused: ${join(dir, '.build-id', buildId.slice(0, 2), `${buildId.slice(2)}.debug`)} (${why})`], `${dir}: one line names the file and why`);
  }
});

t.test('profile: a refused debug file named once in the summary, every sample accounted for', async (t) => {
  const profileBin = join(root, 'build', 'bpf', 'profile');
  const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON', [[profileBin, 'make bpf']]);
  if (why) return skipOrFail(t, why, 'profile skipped');
  const e = cliEnv();
  delete e.DEBUGINFOD_URLS;
  const r = spawnSync(profileBin, ['-U', '--json', '-F', '99', '--no-debuginfod', '--debug-dir', foreign, '--', prog, '2'], { env: e, encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `exit 0 ${r.stderr.slice(-300)}`);
  const refused = r.stderr.split('\n').filter((l) => l.includes('debug file refused'));
  t.equal(refused.length, 1, `one line: ${refused[0]}`);
  t.match(refused[0] ?? '', `${foreign}/.build-id/`, 'it names the file');
  t.match(refused[0] ?? '', `owned by uid ${NOBODY}`, 'and why');
  const out = parseProfileJson(r.stdout);
  t.ok(out.summary && out.summary.samples > 0, `samples taken (${out.summary?.samples})`);
  t.equal(out.entries.reduce((a, s) => a + s.count, 0), out.summary?.samples, 'every sample in a stack');
  const names = new Set(out.entries.flatMap((s) => (s.user?.frames ?? []).filter((f) => f.module === prog).map((f) => f.symbol)));
  t.notOk(names.has(nmName), `${nmName} not named from the refused file`);
});
