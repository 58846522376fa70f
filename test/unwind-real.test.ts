// The unwinder against gdb on programs from Debian that nobody here wrote (built by Debian, with
// their own CFI): each one is started, left to block in its system call, unwound with
// `dwunw unwind-pid PID --json`, then attached with gdb -p (test/oracle/gdb_frames.py); every
// thread's stack must equal gdb's pc for pc, with the how of each frame and stop OK. The programs
// are killed afterwards (and in the teardown). gdb, python3, perl and sqlite3 are installed by
// scripts/ensure-deps; a missing one fails the test.
import { existsSync } from 'node:fs';
import t from 'tap';
import { pool } from './helpers.js';
import { type DwProcess, type GdbFrames, type Mismatch, compareProcess, dwunwJson, gdbFrames, killAll, mismatchSummary, startTarget, waitBlocked } from './oracle/harness.js';

// x86_64 system call numbers the programs block in
const SYS_read = 0;
const SYS_nanosleep = 35;
const SYS_clock_nanosleep = 230;
const SYS_select = 23;
const SYS_pselect6 = 270;
const sleeps = [SYS_nanosleep, SYS_clock_nanosleep, SYS_select, SYS_pselect6];

interface Program {
  name: string;
  cmd: string;
  args: string[];
  stdinPipe?: boolean;
  mainSyscalls: number[];
  threads?: number;
}

const programs: Program[] = [
  { name: 'sleep', cmd: '/usr/bin/sleep', args: ['3600'], mainSyscalls: sleeps },
  { name: 'python3', cmd: '/usr/bin/python3', args: ['-c', 'import time; time.sleep(3600)'], mainSyscalls: sleeps },
  {
    name: 'python3 threads',
    cmd: '/usr/bin/python3',
    args: ['-c', 'import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\ntime.sleep(3600)'],
    mainSyscalls: sleeps,
    threads: 4,
  },
  { name: 'sqlite3', cmd: '/usr/bin/sqlite3', args: [':memory:'], stdinPipe: true, mainSyscalls: [SYS_read] },
  { name: 'perl', cmd: '/usr/bin/perl', args: ['-e', 'sleep 3600'], mainSyscalls: sleeps },
];

const mismatches: Mismatch[] = [];
t.teardown(killAll);

const absent = ['/usr/bin/gdb', ...programs.map((p) => p.cmd)].filter((p) => !existsSync(p));
if (absent.length) {
  t.fail(`missing: ${[...new Set(absent)].join(', ')} (scripts/ensure-deps installs them)`);
} else {
  const t0 = Date.now();
  const results = pool(
    programs.map((p) => async (): Promise<{ dw: DwProcess; gdb: GdbFrames; ms: string }> => {
      const t1 = Date.now();
      const target = await startTarget(p.cmd, p.args, { stdinPipe: p.stdinPipe });
      try {
        await waitBlocked(target.pid, { mainSyscalls: p.mainSyscalls, threads: p.threads });
        const t2 = Date.now();
        // native frames against gdb's: the Python frames merged in are python.test.ts's (py-bt, py-spy)
        const d = await dwunwJson(['unwind-pid', '--no-python', String(target.pid)]);
        const g = await gdbFrames(target.pid);
        return { dw: d.result, gdb: g.result, ms: `start ${t2 - t1} ms, dwunw ${d.run.ms} ms, gdb ${g.run.ms} ms` };
      } finally {
        await target.kill();
      }
    }),
    2,
  );
  for (const [i, p] of programs.entries()) {
    t.test(p.name, async (t) => {
      const r = await results[i]!;
      mismatches.push(...compareProcess(t, `real ${p.name}`, r.dw, r.gdb));
      t.ok(Object.keys(r.gdb.threads).length >= (p.threads ?? 1), `${p.name}: ${p.threads ?? 1} thread(s) or more`);
      t.comment(r.ms);
    });
  }
  t.test('summary', async (t) => {
    if (mismatches.length) t.comment(`mismatches (${mismatches.length} stacks):\n${mismatchSummary(mismatches)}`);
    // the file's verdict in one line: the stacks that differ from gdb's, by label (each also failed where compared)
    t.same(mismatches.map((m) => `${m.label} #${m.index}`), [], 'no stack of this file differs from gdb\'s');
    t.comment(`time: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
}
