// The cost of memleak to the traced program: CPU time of fixtures/x86_64/leaky per malloc at a
// fixed rate (`leaky --rate N`), untraced, under memleak --unwind=fp, dwarf, kernel or auto, in
// one run, with memleak's lost-record counter. Run by scripts/memleak-cost; `dwunw bench
// --memleak` can call runMemleakCost() and costText()/costJson() the same way.
//
// The target's CPU time (user + system: uprobe traps and BPF programs run in its context) comes
// from wait4() on it, in a small python3 parent: the parent forks, the child stops itself
// (SIGSTOP) and, once continued, execs leaky; memleak attaches to the stopped child with -p
// first, so every malloc of the measured run is traced. With two or more CPUs the target runs on
// CPU 0 and memleak on CPU 1 (--no-pin: anywhere).
import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import type { ChalkInstance } from 'chalk';
import { CliError } from './errors.js';
import { type MlReport, bpfUnavailable, killChild, leakyPath, parseReports, procState, startMemleak, within } from './memleak.js';
import { setTimeout as sleep } from 'node:timers/promises';

export type CostMode = 'none' | 'fp' | 'dwarf' | 'kernel' | 'auto' | 'freeze';
export type CostVariant = 'leak' | 'free';

export interface CostOptions {
  /** malloc calls per second asked of leaky (--rate). */
  rate: number;
  /** Seconds per measurement. */
  seconds: number;
  /** Measurements per (variant, mode); the median one (CPU time per call) is reported. */
  repeat: number;
  variants: CostVariant[];
  modes: CostMode[];
  pin: boolean;
  /** Extra memleak arguments (e.g. --perf-buffer). */
  memleakArgs: string[];
  /** --unwind=dwarf once per window (--stack-size); empty: memleak's default only. */
  windows: number[];
  /** leaky --deep BYTES: each malloc this far down the stack (0: a shallow stack). */
  deep: number;
  progress?: (line: string) => void;
}

export const DEFAULT_COST: CostOptions = {
  rate: 100_000,
  seconds: 3,
  repeat: 1,
  variants: ['leak', 'free'],
  modes: ['none', 'fp', 'dwarf'],
  pin: true,
  memleakArgs: [],
  windows: [],
  deep: 0,
};

export interface CostSample {
  allocations: number;
  seconds: number;
  /** Achieved malloc calls per second. */
  rate: number;
  userUs: number;
  sysUs: number;
  /** CPU time of the target per malloc (leak) or per malloc+free (free), µs. */
  cpuUs: number;
  /** memleak's counters (null: untraced). */
  lost: number | null;
  untracked: number | null;
  records: number | null;
  unwindUs: number | null;
}

export interface CostRow extends CostSample {
  variant: CostVariant;
  mode: CostMode;
  /** --stack-size of the dwarf rows measured per window; null: memleak's default. */
  window: number | null;
  samples: CostSample[];
  /** cpuUs - cpuUs untraced (null when the untraced run was not made). */
  overheadUs: number | null;
}

export interface CostResult {
  rate: number;
  seconds: number;
  repeat: number;
  deep: number;
  pinned: boolean;
  cpus: number;
  rows: CostRow[];
  /** Per variant: dwarf / fp, of the target's CPU time per call and of the overhead over untraced. */
  ratios: { variant: CostVariant; cpu: number | null; overhead: number | null }[];
  /** Per traced mode: CPU time of a malloc+free pair / of a malloc alone (target <= 2). */
  pairRatios: { mode: CostMode; ratio: number }[];
}

// The parent: forks; the child stops itself, then execs the program; prints the child's pid, then
// its rusage as JSON when it ends.
const WRAPPER = `
import json, os, signal, sys
cpu = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    os.kill(os.getpid(), signal.SIGSTOP)
    os.execv(sys.argv[2], sys.argv[2:])
print(pid, flush=True)
_, status, ru = os.wait4(pid, 0)
print(json.dumps({"status": status, "utime": ru.ru_utime, "stime": ru.ru_stime}), flush=True)
`;

interface Target {
  pid: number;
  child: ChildProcess;
  done: Promise<{ utime: number; stime: number; status: number; stderr: string }>;
}

async function startTarget(args: string[], cpu: number): Promise<Target> {
  const child = spawn('python3', ['-c', WRAPPER, String(cpu), leakyPath(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  let gotPid: (pid: number) => void = () => {};
  const pidP = new Promise<number>((resolve) => (gotPid = resolve));
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    const m = /^(\d+)\n/.exec(out);
    if (m) gotPid(Number(m[1]));
  });
  const done = new Promise<{ utime: number; stime: number; status: number; stderr: string }>((resolve, reject) => {
    child.on('error', (e) => reject(new CliError('python3', e.message)));
    child.on('close', () => {
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (!line) return reject(new CliError('leaky', `no resource usage (${err.trim() || 'python3 failed'})`));
      resolve({ ...(JSON.parse(line) as { utime: number; stime: number; status: number }), stderr: err });
    });
  });
  done.catch(() => {});
  const pid = await within(pidP, 10_000, 'the target to start');
  const end = Date.now() + 10_000;
  while (procState(pid) !== 'T') {
    if (Date.now() > end) throw new CliError('leaky', 'did not stop before exec');
    await sleep(5);
  }
  return { pid, child, done };
}

async function measure(variant: CostVariant, mode: CostMode, window: number | null, o: CostOptions, pin: boolean): Promise<CostSample> {
  const args = ['--rate', String(o.rate), '--seconds', String(o.seconds), ...(variant === 'leak' ? ['--leak'] : []),
    ...(o.deep ? ['--deep', String(o.deep)] : [])];
  const target = await startTarget(args, pin ? 0 : -1);
  let ml: ReturnType<typeof startMemleak> | undefined;
  try {
    if (mode !== 'none') {
      ml = startMemleak([`--unwind=${mode}`, '--json', '-o', '0', '-T', '5', ...(window ? ['--stack-size', String(window)] : []),
        ...o.memleakArgs, '-p', String(target.pid), '3600'], {
        wrap: pin ? ['taskset', '-c', '1'] : [],
      });
      try {
        await within(ml.attached, 60_000, 'memleak to attach');
      } catch (e) {
        throw new CliError(`memleak --unwind=${mode}`, (e as Error).message.replace(/^memleak:\s*/, ''));
      }
    }
    process.kill(target.pid, 'SIGCONT');
    const t = await within(target.done, (o.seconds + 60) * 1000, 'leaky to finish');
    const m = /^leaky: (\d+) allocations in ([\d.]+) s/m.exec(t.stderr);
    if (!m) throw new CliError('leaky', `no summary line (${t.stderr.trim()})`);
    const n = Number(m[1]);
    let rep: MlReport | undefined;
    if (ml) {
      const r = await within(ml.done, 60_000, 'memleak to exit');
      rep = parseReports(r.stdout).at(-1);
      if (!rep) throw new CliError(`memleak --unwind=${mode}`, `no report: ${r.stderr.trim().split('\n').at(-1) ?? ''}`);
    }
    const u = rep?.untracked;
    return {
      allocations: n,
      seconds: Number(m[2]),
      rate: Math.round(n / Number(m[2])),
      userUs: (t.utime * 1e6) / n,
      sysUs: (t.stime * 1e6) / n,
      cpuUs: ((t.utime + t.stime) * 1e6) / n,
      lost: rep ? rep.lost : null,
      untracked: u ? u.allocs_full + u.no_pending + u.combined_full + u.stack_table_full : null,
      records: rep ? rep.unwind.records : null,
      unwindUs: rep && rep.unwind.unwind_ns_avg ? rep.unwind.unwind_ns_avg / 1000 : null,
    };
  } finally {
    killChild(target.child);
    killChild(ml?.child);
  }
}

export async function runMemleakCost(opts: Partial<CostOptions> = {}): Promise<CostResult> {
  const o: CostOptions = { ...DEFAULT_COST, ...opts };
  const why = bpfUnavailable();
  if (why && o.modes.some((m) => m !== 'none')) throw new CliError('memleak cost', why);
  const ncpu = cpus().length;
  const pin = o.pin && ncpu >= 2;
  const samples = new Map<string, CostSample[]>();
  // (mode, window) pairs: dwarf once per window when windows are given
  const configs = o.modes.flatMap((m) => (m === 'dwarf' && o.windows.length ? o.windows.map((w) => ({ m, w })) : [{ m, w: null as number | null }]));
  // interleaved (none, fp, dwarf, none, ...): a slow phase of the machine hits every mode
  for (let k = 0; k < o.repeat; k++)
    for (const v of o.variants)
      for (const { m, w } of configs) {
        o.progress?.(`${v}, ${m === 'none' ? 'untraced' : `memleak --unwind=${m}${w ? ` --stack-size ${w}` : ''}`}${o.repeat > 1 ? ` (${k + 1}/${o.repeat})` : ''}: leaky --rate ${o.rate}${o.deep ? ` --deep ${o.deep}` : ''} for ${o.seconds} s`);
        const s = await measure(v, m, w, o, pin);
        samples.set(`${v}/${m}/${w}`, [...(samples.get(`${v}/${m}/${w}`) ?? []), s]);
      }
  const rows: CostRow[] = [];
  for (const v of o.variants)
    for (const { m, w } of configs) {
      const ss = samples.get(`${v}/${m}/${w}`)!;
      // the median measurement (by CPU time per call), whole: its figures add up
      const mid = [...ss].sort((a, b) => a.cpuUs - b.cpuUs)[(ss.length - 1) >> 1]!;
      rows.push({
        ...mid,
        variant: v,
        mode: m,
        window: w,
        samples: ss,
        // lost records: the worst of the measurements
        lost: m === 'none' ? null : Math.max(...ss.map((s) => s.lost ?? 0)),
        untracked: m === 'none' ? null : Math.max(...ss.map((s) => s.untracked ?? 0)),
        overheadUs: null,
      });
    }
  for (const r of rows) {
    const base = rows.find((x) => x.variant === r.variant && x.mode === 'none');
    r.overheadUs = base && r.mode !== 'none' ? r.cpuUs - base.cpuUs : null;
  }
  const ratios = o.variants.map((v) => {
    const fp = rows.find((r) => r.variant === v && r.mode === 'fp');
    const dw = rows.find((r) => r.variant === v && r.mode === 'dwarf');
    return {
      variant: v,
      cpu: fp && dw ? dw.cpuUs / fp.cpuUs : null,
      overhead: fp?.overheadUs && dw?.overheadUs !== null && dw?.overheadUs !== undefined ? dw.overheadUs / fp.overheadUs : null,
    };
  });
  const pairRatios = o.modes.filter((m) => m !== 'none').flatMap((m) => {
    const leak = rows.find((r) => r.variant === 'leak' && r.mode === m);
    const free = rows.find((r) => r.variant === 'free' && r.mode === m);
    return leak && free ? [{ mode: m, ratio: free.cpuUs / leak.cpuUs }] : [];
  });
  return { rate: o.rate, seconds: o.seconds, repeat: o.repeat, deep: o.deep, pinned: pin, cpus: ncpu, rows, ratios, pairRatios };
}

// ---- Output --------------------------------------------------------------------------------------

const f2 = (v: number | null): string => (v === null ? '-' : v.toFixed(2));

export function costText(c: ChalkInstance, r: CostResult): string {
  const head = ['variant', 'memleak', 'calls', 'calls/s', 'cpu µs/call', 'user', 'sys', 'overhead µs', 'lost', 'untracked', 'unwind µs'];
  const rows = r.rows.map((x) => [
    x.variant === 'leak' ? 'malloc' : 'malloc+free',
    x.mode === 'none' ? 'untraced' : `--unwind=${x.mode}${x.window ? ` --stack-size=${x.window / 1024}K` : ''}`,
    String(x.allocations),
    String(x.rate),
    f2(x.cpuUs),
    f2(x.userUs),
    f2(x.sysUs),
    f2(x.overheadUs),
    x.lost === null ? '-' : String(x.lost),
    x.untracked === null ? '-' : String(x.untracked),
    f2(x.unwindUs),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[], style = (s: string) => s) => cells.map((s, i) => style(i < 2 ? s.padEnd(w[i]!) : s.padStart(w[i]!))).join('  ');
  const out = [
    c.bold(`memleak cost: leaky --rate ${r.rate}${r.deep ? ` --deep ${r.deep}` : ''} for ${r.seconds} s${r.repeat > 1 ? `, median of ${r.repeat}` : ''}; ` +
      `target CPU time per call (user + system)${r.pinned ? '; target on CPU 0, memleak on CPU 1' : ''}`),
    line(head, c.bold),
    ...rows.map((row, i) => {
      const lost = r.rows[i]!.lost;
      return line(row, lost ? c.red : (s) => s);
    }),
  ];
  for (const q of r.ratios) {
    if (q.cpu === null) continue;
    const ok = q.cpu <= 1.5;
    out.push(
      `${q.variant === 'leak' ? 'malloc' : 'malloc+free'}: dwarf / fp = ${(ok ? c.green : c.red)(q.cpu.toFixed(2))} per call` +
        (q.overhead !== null ? `, ${q.overhead.toFixed(2)} of the overhead over untraced` : '') +
        ` (target <= 1.5)`,
    );
  }
  for (const q of r.pairRatios) {
    const ok = q.ratio <= 2;
    out.push(`--unwind=${q.mode}: malloc+free / malloc = ${(ok ? c.green : c.red)(q.ratio.toFixed(2))} per call (target <= 2)`);
  }
  const lost = r.rows.filter((x) => x.mode !== 'none' && x.variant === 'leak' && x.rate >= 0.9 * r.rate).map((x) => `${x.mode} ${x.lost}`);
  if (lost.length) out.push(`lost records at ${r.rate} malloc/s: ${lost.join(', ')}`);
  return `${out.join('\n')}\n`;
}

export const costJson = (r: CostResult): object => r;
