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
import { bpfUnavailable, root, run as runProcess, skipOrFail } from './helpers.js';
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
  samples: number;
  recordsLost: number;
  bufferBytes: number;
  agg?: Agg;
}

async function profile(extra: string[]): Promise<Res | string> {
  const r = await runProcess(profileBin, ['-U', '-F', '999', '-f', '--json', ...extra, '--', hot, '3'], { timeoutMs: 120_000, env: process.env });
  if (r.status !== 0) return `profile ${extra.join(' ')} exited ${r.status}: ${r.stderr.trim().split('\n').pop()}`;
  const hotLine = r.stdout.split('\n').find((l) => l.startsWith('{"pid":') && l.includes('"cpu_ns"'));
  const out = parseProfileJson(r.stdout);
  if (!hotLine || !out.summary) return 'no report';
  const cpuNs = (JSON.parse(hotLine) as { cpu_ns: Record<string, number> }).cpu_ns;
  const cpuTotal = Object.keys(CHAINS).reduce((a, c) => a + (cpuNs[c] ?? 0), 0);
  const res: Res = { total: 0, unnamed: 0, chains: {}, top: {}, cpu: {}, samples: out.summary.samples, recordsLost: (out.summary as unknown as { records_lost: number }).records_lost,
    bufferBytes: (out.summary as unknown as { buffer_bytes: number }).buffer_bytes, agg: (out.summary as unknown as { aggregated?: Agg }).aggregated };
  for (const c of Object.keys(CHAINS)) res.cpu[c] = (cpuNs[c] ?? 0) / cpuTotal;
  const paths: Record<string, Map<string, number>> = {};
  for (const f of out.folded) {
    res.total += f.count;
    const leafFirst = f.folded.split(';').slice(1).reverse();
    const c = Object.keys(CHAINS).find((k) => leafFirst.includes(CHAINS[k]!));
    if (leafFirst.every((n) => n === '[unknown]')) res.unnamed += f.count;
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
}
