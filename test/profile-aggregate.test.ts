// profile --aggregate (issue 28 item 2): the in-kernel walks counted in BPF maps and drained,
// against the same profiler sending one record per sample (--unwind=kernel), on
// fixtures/x86_64/hot (six known chains; its own per-chain CPU time printed at exit). Folded
// output (-f): each chain's most frequent path from leaf to the chain's function the same in
// both modes, each chain's share of the samples within 5 points of hot's own CPU split in each
// run, and every sample accounted for: the counts drained equal the counts the BPF side made,
// and the samples the program selected = the folded counts + the records lost.
//
// Needs root, the kernel's BTF and BPF: skipped with the reason, unless DWUNW_REQUIRE_BPF=1.
import { join } from 'node:path';
import t from 'tap';
import { readFileSync } from 'node:fs';
import { bpfUnavailable, commOf, hotReport, root, run as runProcess, type Run, skipOrFail, start, stopper, waitFor } from './helpers.js';
import { parseProfileJson } from '../lib/profile.js';

const profileBin = join(root, 'build', 'bpf', 'profile');
const hot = join(root, 'fixtures', 'x86_64', 'build', 'hot');
/** hot's chains: the function in every stack of the chain (hot's report names the chain). */
const CHAINS: Record<string, string> = {
  plain: 'chain_plain', qsort: 'chain_qsort', recurse: 'chain_recurse', lib: 'chain_lib', signal: 'chain_signal', thread: 'thread_main',
};

interface Agg { samples: number; counted_in_bpf: number; map_full: number; keys: number; drains: number; no_stack: number; drain_bytes: number; selected_samples: number }
interface Res {
  total: number;
  chains: Record<string, number>;
  top: Record<string, string>;
  cpu: Record<string, number>;
  /** samples in stacks with no frame named: a drained count named before its process's records were applied */
  unnamed: number;
  /** the first such stacks (folded, count), to say which in a failure */
  unnamedStacks: string[];
  samples: number;
  recordsLost: number;
  bufferBytes: number;
  agg?: Agg;
}

async function profile(extra: string[]): Promise<Res | string> {
  return parse(await runProcess(profileBin, ['-U', '-F', '999', '-f', '--json', ...extra, '--', hot, '6', '--cpu'], { timeoutMs: 180_000, env: process.env }), extra);
}

function parse(r: Run, extra: string[]): Res | string {
  if (r.status !== 0) return `profile ${extra.join(' ')} exited ${r.status}: ${r.stderr.trim().split('\n').pop()}`;
  const rep = hotReport(r.stdout);
  const out = parseProfileJson(r.stdout);
  if (!rep || !out.summary) return 'no report';
  const cpuNs = rep.cpu_ns;
  const cpuTotal = Object.keys(CHAINS).reduce((a, c) => a + (cpuNs[c] ?? 0), 0);
  const res: Res = { total: 0, unnamed: 0, unnamedStacks: [], chains: {}, top: {}, cpu: {}, samples: out.summary.samples, recordsLost: (out.summary as unknown as { records_lost: number }).records_lost,
    bufferBytes: (out.summary as unknown as { buffer_bytes: number }).buffer_bytes, agg: (out.summary as unknown as { aggregated?: Agg }).aggregated };
  for (const c of Object.keys(CHAINS)) res.cpu[c] = (cpuNs[c] ?? 0) / cpuTotal;
  const paths: Record<string, Map<string, number>> = {};
  for (const f of out.folded) {
    res.total += f.count;
    const leafFirst = f.folded.split(';').slice(1).reverse();
    const c = Object.keys(CHAINS).find((k) => leafFirst.includes(CHAINS[k]!));
    if (leafFirst.every((n) => n === '[unknown]')) {
      res.unnamed += f.count;
      if (res.unnamedStacks.length < 3) res.unnamedStacks.push(`${f.folded} ${f.count}`);
    }
    if (!c) continue;
    res.chains[c] = (res.chains[c] ?? 0) + f.count;
    // glibc's merge sort recurses to a data-dependent depth: a run of msort_with_tmp counts once
    const p = leafFirst.slice(0, leafFirst.indexOf(CHAINS[c]!) + 1).filter((n, i, v) => !(n.startsWith('msort_with_tmp') && v[i - 1]?.startsWith('msort_with_tmp'))).join(';');
    (paths[c] ??= new Map()).set(p, (paths[c]!.get(p) ?? 0) + f.count);
  }
  for (const [c, m] of Object.entries(paths)) res.top[c] = [...m].sort((a, b) => b[1] - a[1])[0]![0];
  return res;
}

const why = bpfUnavailable('profile needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[profileBin, 'make bpf'], [hot, 'make fixtures']]);
if (why) {
  skipOrFail(t, why, 'profile --aggregate tests skipped');
} else {
  t.test('--aggregate: the same folded chains as one record per sample, every sample accounted for', { timeout: 300_000 }, async (t) => {
    const rec = await profile(['--unwind=kernel']);
    const agg = await profile(['--unwind=kernel', '--aggregate']);
    if (typeof rec === 'string') return void t.fail(rec);
    if (typeof agg === 'string') return void t.fail(agg);
    const a = agg.agg;
    if (!a) return void t.fail('no "aggregated" object in the summary');
    t.comment(`records: ${rec.samples} samples, ${(rec.bufferBytes / rec.samples).toFixed(0)} B/sample crossed; aggregated: ${agg.samples} samples, ${a.samples} counted in the kernel (${a.keys} keys, ${a.drains} drains), ${((agg.bufferBytes + a.drain_bytes) / agg.samples).toFixed(0)} B/sample crossed`);
    for (const [name, r] of [['records', rec], ['aggregated', agg]] as const) {
      t.equal(r.total, r.samples, `${name}: the folded counts add up to the samples (${r.total})`);
      t.ok(r.samples >= 100, `${name}: ${r.samples} samples of hot`);
      for (const c of Object.keys(CHAINS)) {
        const share = (r.chains[c] ?? 0) / r.total;
        t.ok(Math.abs(share - r.cpu[c]!) <= 0.05, `${name} ${c}: ${(100 * share).toFixed(1)} % of samples vs ${(100 * r.cpu[c]!).toFixed(1)} % of hot's CPU (${r.unnamed} samples in stacks with no frame named)`);
      }
    }
    for (const c of Object.keys(CHAINS))
      t.equal(agg.top[c], rec.top[c], `${c}: the same most frequent path in both modes`);
    t.equal(a.samples, a.counted_in_bpf, `every count made in the kernel drained (${a.samples})`);
    t.equal(a.no_stack, 0, 'every drained count found its stack');
    t.ok(a.samples >= agg.samples * 0.5, `most samples counted in the kernel (${a.samples} of ${agg.samples})`);
    t.equal(a.selected_samples, agg.samples + agg.recordsLost, `samples selected (${a.selected_samples}) = counted + records + lost (${agg.samples} + ${agg.recordsLost})`);
  });

  // The walker counts a new image's samples as soon as the exec (its tables are in the kernel),
  // while user space may be behind on the exec's records: a drain at those records would name the
  // new image's counts with the old one ("[unknown]"). The command is stopped before its exec,
  // profile stopped once it polls (the command released), the command continued: it execs hot,
  // which runs 0.3 s of CPU before profile reads the exec's records. Those samples must be named.
  t.test('--aggregate: the samples after an exec named with the new image, user space behind', { timeout: 300_000 }, async (t) => {
    const read = (f: string): string => { try { return readFileSync(f, 'utf8'); } catch { return ''; } };
    const cpuTicks = (pid: number): number => {
      const f = read(`/proc/${pid}/stat`).split(') ')[1]?.split(' ');
      return f ? Number(f[11]) + Number(f[12]) : -1; // utime + stime
    };
    /** one run: its result, or null when the command ran its exec before it could be stopped */
    const attempt = async (): Promise<Res | string | null> => {
      let stderr = '';
      const s = start(profileBin, ['-U', '-F', '999', '-f', '--json', '--unwind=kernel', '--aggregate', '--', hot, '2'], { timeoutMs: 120_000, env: process.env, onOutput: (_o, e) => (stderr = e) });
      const ppid = s.child.pid!;
      const { signal, resumeAll } = stopper();
      let missed = false;
      try {
        // the command: profile's child waiting for its go on a pipe (profile runs others, e.g. sh,
        // in its set-up); missed when it is hot already (the go came before it read the pipe)
        const kids = (): number[] => read(`/proc/${ppid}/task/${ppid}/children`).trim().split(' ').map(Number).filter((k) => k > 0);
        let cmd = 0;
        await waitFor(() => {
          missed = kids().some((k) => commOf(k) === 'hot') || s.child.exitCode !== null;
          cmd = kids().find((k) => commOf(k) === 'profile' && read(`/proc/${k}/wchan`).includes('pipe_read')) ?? 0;
          return missed || cmd > 0;
        }, 60_000, 'the command forked', 1);
        if (!missed) {
          signal(cmd, 'SIGSTOP'); // before its exec
          await waitFor(() => stderr.includes('Sampling at') && read(`/proc/${ppid}/wchan`).includes('poll'), 60_000, 'profile polling');
          signal(ppid, 'SIGSTOP');
          signal(cmd, 'SIGCONT');
          // missed too when profile was stopped before its go (the command reads the pipe again)
          await waitFor(() => {
            missed = commOf(cmd) === 'profile' && read(`/proc/${cmd}/wchan`).includes('pipe_read');
            const c = cpuTicks(cmd);
            return missed || c < 0 || (commOf(cmd) === 'hot' && c >= 30);
          }, 60_000, 'hot to run 0.3 s of CPU', 1);
        }
      } finally {
        resumeAll();
      }
      const run = await s.done;
      return missed ? null : parse(run, ['--aggregate (stopped after the exec)']);
    };
    let r: Res | string | null = null;
    for (let i = 0; i < 3 && r === null; i++) r = await attempt();
    if (r === null) return void t.fail('the command ran its exec before it could be stopped, 3 times');
    if (typeof r === 'string') return void t.fail(r);
    t.comment(`${r.samples} samples, ${r.agg?.samples ?? 0} counted in the kernel, ${r.samples - (r.agg?.samples ?? 0)} as records`);
    t.equal(r.total, r.samples, `the folded counts add up to the samples (${r.total})`);
    t.equal(r.unnamed, 0, `no sample in a stack with no frame named (${r.unnamed}${r.unnamedStacks.length ? `: ${r.unnamedStacks.join(' | ')}` : ''})`);
    for (const c of Object.keys(CHAINS)) {
      const share = (r.chains[c] ?? 0) / r.total;
      t.ok(Math.abs(share - r.cpu[c]!) <= 0.05, `${c}: ${(100 * share).toFixed(1)} % of samples vs ${(100 * r.cpu[c]!).toFixed(1)} % of hot's CPU`);
    }
  });
}
