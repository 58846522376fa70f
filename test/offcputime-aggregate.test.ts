// offcputime --aggregate across an exec with user space behind on the ring. The walker walks a
// new image's switch-outs as soon as its exec (its tables are in the kernel); a span counted in
// the kernel then and drained at the exec's record, before that record is applied, would be named
// with the old image ("[unknown]"). So from the exec until its records are applied the process's
// walks go as records (bpf/kwalk/kwalk_hold.bpf.h). The command, `sh -c`, runs fixtures/x86_64/waits
// once (offcputime loads its tables), stops itself; once offcputime is idle it is stopped, the sh
// continued: it execs waits --mixed (main -> chain_mixed -> mixed_spin / mixed_sleep in turn,
// measuring its own wall and CPU time), which sleeps 40 times before offcputime reads anything.
// Checked: every span after the exec (comm waits) in a stack with a named frame and every named
// frame in waits' modules; chain_mixed's off-CPU time within 10 % of what waits measured (wall -
// CPU); every count made in the kernel drained; the hold map never full. No retry: nothing here
// races (the stops are observed, not timed). Measured: here most of the new image's first walks
// fall back (no-mapping) until offcputime reads on, so this run does not fail without the hold;
// offcputime's own child stopped before its exec into waits did (1-10 spans, 2-34 ms, all frames
// unnamed, 5 of 5 runs), but that child could not be caught before its go often enough to be a test.
//
// Needs root, the kernel's BTF and BPF: skipped with the reason, unless DWUNW_REQUIRE_BPF=1.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, commOf, root, skipOrFail, start, stopper, waitFor } from './helpers.js';
import { parseProfileJson } from '../lib/profile.js';

const bin = join(root, 'build', 'bpf', 'offcputime');
const waits = join(root, 'fixtures', 'x86_64', 'build', 'waits');

interface OcAgg { spans: number; counted_in_bpf: number; map_full: number; hold_full: number; spans_lost: number; keys: number; drains: number; no_stack: number }

const readProc = (f: string): string => {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
};
const status = (pid: number, field: string): string => new RegExp(`^${field}:\\s+(\\S+)`, 'm').exec(readProc(`/proc/${pid}/status`))?.[1] ?? '';
const unnamed = (s?: string): boolean => !s || s.startsWith('[unknown');

const why = bpfUnavailable('offcputime needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[bin, 'make bpf'], [waits, 'make fixtures']]);
if (why) {
  skipOrFail(t, why, 'offcputime --aggregate exec test skipped');
} else {
  t.test('--aggregate: the spans after an exec named with the new image, user space behind', { timeout: 300_000 }, async (t) => {
    let stderr = '';
    // sh runs waits once (offcputime loads its tables), stops itself, then execs waits
    const script = '"$0" --mixed --rounds 2 --ms 1 >/dev/null && kill -STOP $$ && exec "$0" --mixed --rounds 150 --ms 2';
    const s = start(bin, ['-U', '--unwind=kernel', '--aggregate', '--json', '--', 'sh', '-c', script, waits],
      { timeoutMs: 120_000, env: process.env, onOutput: (_o, e) => (stderr = e) });
    const tool = s.child.pid!;
    const { signal, resumeAll } = stopper();
    const kids = (pid: number): number[] => readProc(`/proc/${pid}/task/${pid}/children`).trim().split(' ').map(Number).filter((k) => k > 0);
    try {
      let cmd = 0;
      await waitFor(() => {
        cmd = kids(tool).find((k) => commOf(k) === 'sh' && status(k, 'State') === 'T') ?? 0;
        return cmd > 0 || s.child.exitCode !== null;
      }, 60_000, 'the command to stop itself');
      // offcputime idle: polling, its stderr quiet for 0.5 s (the first waits' records applied)
      let quiet = { len: -1, since: Date.now() };
      await waitFor(() => {
        if (stderr.length !== quiet.len) quiet = { len: stderr.length, since: Date.now() };
        return readProc(`/proc/${tool}/wchan`).includes('poll') && Date.now() - quiet.since > 500;
      }, 60_000, 'offcputime idle');
      await new Promise((r) => setTimeout(r, 1500)); // two drains and sweeps
      signal(tool, 'SIGSTOP');
      const base = Number(status(cmd, 'voluntary_ctxt_switches'));
      signal(cmd, 'SIGCONT'); // it execs waits
      await waitFor(() => status(cmd, 'State') === '' || (commOf(cmd) === 'waits' && Number(status(cmd, 'voluntary_ctxt_switches')) - base >= 40), 60_000, 'waits to sleep 40 times');
    } finally {
      resumeAll();
    }
    const run = await s.done;
    t.equal(run.status, 0, `exit status 0 ${run.stderr.slice(-400)}`);
    const own = /^mixed (\d+) (\d+) (\d+)$/m.exec(run.stdout);
    if (!own) return void t.fail(`no line of waits' own measure in ${run.stdout.slice(0, 400)}`);
    const ownOffUs = Number(own[1]) - Number(own[2]);
    const out = parseProfileJson(run.stdout);
    const a = (out.summary as unknown as { aggregated?: OcAgg } | undefined)?.aggregated;
    if (!a) return void t.fail('no "aggregated" object in the summary');
    // after the exec (comm waits): every frame named, in the new image's modules
    const newImage = /^(waits|libc\.so\.6|ld-linux-x86-64\.so\.2|\[vdso\])$/;
    let mixedUs = 0;
    let afterUs = 0;
    let wrongUs = 0;
    const wrong: string[] = [];
    for (const e of out.entries) {
      const frames = e.user?.frames ?? [];
      if (frames.some((f) => f.symbol === 'chain_mixed')) mixedUs += e.count;
      if (e.comm !== 'waits' || !frames.length) continue; // (no frames: a loss the entry names, e.g. inside execve)
      afterUs += e.count;
      // (a [vdso] frame may have no name: a stack is wrong when no frame is named, or one is named elsewhere)
      if (frames.some((f) => !unnamed(f.symbol)) && frames.every((f) => unnamed(f.symbol) || newImage.test(basename(f.module ?? '')))) continue;
      wrongUs += e.count;
      wrong.push(`${e.count} us: ${frames.map((f) => `${basename(f.module ?? '?')}:${f.symbol ?? '?'}`).join(';')} ${e.user?.reason ?? ''}`);
    }
    const kw = (out.summary as unknown as { kernel_walk?: { from_kernel: number } }).kernel_walk;
    t.comment(`${kw?.from_kernel} walks in the kernel, ${a.counted_in_bpf} of them counted: ${JSON.stringify(kw)}`);
    t.comment(`${a.spans} spans counted in the kernel, ${a.keys} keys in ${a.drains} drains; chain_mixed ${mixedUs} us off CPU, waits measured ${ownOffUs} us`);
    t.same(wrong.slice(0, 5), [], `after the exec every stack named in the new image (${wrongUs} of ${afterUs} us not)`);
    t.ok(Math.abs(mixedUs - ownOffUs) <= 0.1 * ownOffUs, `chain_mixed: ${mixedUs} us off CPU vs ${ownOffUs} us measured by waits (within 10 %)`);
    t.equal(a.spans, a.counted_in_bpf, `every span counted in the kernel drained (${a.spans})`);
    t.equal(a.no_stack, 0, 'every drained count found its stack');
    t.equal(a.hold_full, 0, 'the hold map never full');
  });
}
