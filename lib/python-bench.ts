// The cost of reading Python frames for `dwunw bench` (issue 24): fixtures/python/chains.py under
// Debian's python3.11 parks its threads; each thread's chain is read again and again from user
// space (dwunw_py_stack: process_vm_readv, as unwind-pid reads it while a thread is stopped). The
// deep thread (recursion, 31 frames) and the shallow one (main, 3 frames) give the cost per frame
// (the slope) and per stack. The BPF reader (runtime/python.bpf.h, at the event) is timed in the BPF
// program itself (bpf_ktime_get_ns around each chain's read and send, summed in its py_cost map) while
// profile samples fixtures/python/cpu_chains.py, in both unwind modes: `bpf`.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './root.js';
import { runCommand } from './run-command.js';

export interface PythonBench {
  unavailable?: string;
  interpreter?: string;
  /** how the frames were read */
  mode?: string;
  reads?: number;
  /** the deep stack: frames and CPU ns (user + system) per read of the whole chain */
  frames_per_stack?: number;
  ns_per_stack?: number;
  /** (deep - shallow) / (frame difference) */
  ns_per_frame?: number;
  /** the fixed cost: thread-state look-up and the shallow chain */
  ns_shallow_stack?: number;
  /** the OTel eBPF profiler's published cost per sample, for comparison */
  otel_ns_per_sample: number;
  /** the BPF reader at the event, per unwind mode of profile; a string: why not measured */
  bpf: Record<string, BpfPythonCost> | string;
}

export interface BpfPythonCost {
  samples: number;
  frames_per_sample: number;
  /** read and sent in the BPF program: thread-state look-up, the frames, the record */
  ns_per_sample: number;
  /** ns_per_sample / frames_per_sample (the fixed cost included) */
  ns_per_frame: number;
  /** user space: naming the chain's code objects and merging it (py_merge.c) */
  user_ns_per_sample: number;
}

/** profile -v's Python lines for `mode` on cpu_chains.py, or why not. */
async function bpfCost(mode: string, seconds: number): Promise<BpfPythonCost | string> {
  const bin = join(packageRoot(), 'build', 'bpf', 'profile');
  const fixture = join(packageRoot(), 'fixtures', 'python', 'cpu_chains.py');
  if (!existsSync(bin)) return `${bin} is not built`;
  if (process.getuid?.() !== 0) return 'not root';
  const err = (await runCommand(bin, ['-U', '-F', '499', '-f', `--unwind=${mode}`, '-v', '--', PY, fixture, String(seconds)])).stderr;
  const b = /python: BPF read (\d+) chains of (\d+) frames in (\d+) ns/.exec(err);
  const u = /python: \d+ processes, (\d+) chains: .* naming (\d+) ns per chain/.exec(err);
  if (!b || !u) return `profile --unwind=${mode} gave no Python figures: ${err.trim().split('\n').pop() ?? ''}`;
  const [chains, frames, ns] = [Number(b[1]), Number(b[2]), Number(b[3])];
  return {
    samples: chains,
    frames_per_sample: Math.round((10 * frames) / chains) / 10,
    ns_per_sample: Math.round(ns / chains),
    ns_per_frame: Math.round(ns / Math.max(1, frames)),
    user_ns_per_sample: Number(u[2]),
  };
}

const PY = '/usr/bin/python3.11';

export async function pythonBench(quick: boolean): Promise<PythonBench> {
  const bpf: Record<string, BpfPythonCost> = {};
  let bpfWhy: string | null = null;
  for (const mode of ['dwarf', 'kernel']) {
    const r = await bpfCost(mode, quick ? 1 : 3);
    if (typeof r === 'string') bpfWhy = r;
    else bpf[mode] = r;
  }
  const base: PythonBench = { otel_ns_per_sample: 3000, bpf: bpfWhy ?? bpf };
  const fixture = join(packageRoot(), 'fixtures', 'python', 'chains.py');
  if (!existsSync(PY)) return { ...base, unavailable: `no ${PY}` };
  const child = spawn(PY, [fixture], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const view = await new Promise<{ threads: { tag: string; native_id: number }[] }>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error('the fixture did not park its threads within 60 s')), 60_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) {
          clearTimeout(timer);
          resolve(JSON.parse(out.split('\n')[0]!));
        }
      });
      child.on('exit', () => reject(new Error('the fixture exited')));
    });
    const { Dwunw } = await import('./dwunw.js');
    const d = new Dwunw();
    try {
      const { rt, why } = d.findPython(child.pid!);
      if (!rt) return { ...base, unavailable: why ?? 'no CPython found' };
      const tid = (tag: string): number => view.threads.find((t) => t.tag === tag)!.native_id;
      const reads = quick ? 200 : 2000;
      const time = (t: number): { ns: number; frames: number } => {
        let frames = 0;
        for (let i = 0; i < 20; i++) frames = d.pythonStack(rt, t).frames.length; // warm
        // CPU time (user + system) of this process: on a loaded machine wall time counts the waits
        const c0 = process.cpuUsage();
        for (let i = 0; i < reads; i++) d.pythonStack(rt, t);
        const c = process.cpuUsage(c0);
        return { ns: ((c.user + c.system) * 1000) / reads, frames };
      };
      const deep = time(tid('recursion'));
      const shallow = time(tid('main'));
      return {
        ...base,
        interpreter: `${rt.path} ${rt.version}`,
        mode: 'user space, process_vm_readv (as unwind-pid and unwind-core read them)',
        reads,
        frames_per_stack: deep.frames,
        ns_per_stack: Math.round(deep.ns),
        ns_shallow_stack: Math.round(shallow.ns),
        ns_per_frame: Math.round((deep.ns - shallow.ns) / Math.max(1, deep.frames - shallow.frames)),
      };
    } finally {
      d.close();
    }
  } catch (e) {
    return { ...base, unavailable: (e as Error).message };
  } finally {
    child.kill('SIGKILL');
  }
}
