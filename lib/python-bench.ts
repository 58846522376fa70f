// The cost of reading Python frames for `dwunw bench` (issue 24): fixtures/python/chains.py under
// Debian's python3.11 parks its threads; each thread's chain is read again and again from user
// space (dwunw_py_stack: process_vm_readv, as unwind-pid reads it while a thread is stopped). The
// deep thread (recursion, 31 frames) and the shallow one (main, 3 frames) give the cost per frame
// (the slope) and per stack. The BPF reader (at the event) is not built yet: `bpf` says so.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './root.js';

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
  bpf: string;
}

const PY = '/usr/bin/python3.11';

export async function pythonBench(quick: boolean): Promise<PythonBench> {
  const base: PythonBench = { otel_ns_per_sample: 3000, bpf: 'not measured: the BPF reader of Python frames is not built yet' };
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
