// bpf/runtime/rec_queue.c, the lock-free queue between memleak's drain thread and the thread that
// unwinds: a producer thread and a consumer thread move records of varied sizes (up to a third
// of the queue) through small queues, so wrap-around and a full queue happen constantly; every
// record must arrive once, in order, byte for byte (test/queue/rec_queue_stress.c). Built once
// plain and once with ThreadSanitizer (gcc -fsanitize=thread), which reports any data race
// between the two threads. No BPF needed.
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { requireOrSkip, root } from './helpers.js';

const out = join(root, 'build', 'test', 'tools');
const src = [join(root, 'test', 'queue', 'rec_queue_stress.c'), join(root, 'bpf', 'runtime', 'rec_queue.c')];

mkdirSync(out, { recursive: true });
const builds: { name: string; flags: string[]; runs: [string, string][] }[] = [
  { name: 'rec_queue_stress', flags: ['-O2'], runs: [['4096', '20000'], ['65536', '50000'], ['1048576', '50000']] },
  { name: 'rec_queue_stress_tsan', flags: ['-O1', '-g', '-fsanitize=thread'], runs: [['65536', '10000']] },
];
for (const b of builds) {
  t.test(b.name, async (t) => {
    const bin = join(out, b.name);
    const cc = spawnSync('gcc', [...b.flags, '-Wall', '-Wextra', '-Werror', '-I', join(root, 'bpf', 'runtime'), '-o', bin, ...src, '-lpthread'], { encoding: 'utf8' });
    if (cc.status !== 0 && b.flags.includes('-fsanitize=thread') && /tsan|sanitize/i.test(cc.stderr)) {
      return requireOrSkip(t, `${b.name} (ThreadSanitizer)`, `gcc cannot build with -fsanitize=thread here: ${cc.stderr.trim().split('\n')[0]}`);
    }
    t.equal(cc.status, 0, `builds${cc.stderr ? `: ${cc.stderr}` : ''}`);
    for (const [bytes, n] of b.runs) {
      const r = spawnSync(bin, [bytes, n], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, TSAN_OPTIONS: 'halt_on_error=1' } });
      t.equal(r.status, 0, `${n} records through a ${bytes}-byte queue: ${(r.stdout + r.stderr).trim().split('\n').slice(0, 3).join(' / ')}`);
      t.match(r.stdout, new RegExp(`^records ${n} ok`, 'm'), 'every record once, in order, intact');
    }
  });
}
