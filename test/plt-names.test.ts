// PLT stubs named `name@plt`, as objdump labels them (and perf and gdb show them): every stub of
// .plt, .plt.sec and .plt.got of Debian's stripped python3.11, libc.so.6 and xz, and of the
// fixture hot, looked up through libdwunw (dwunw_symbolize) at its first byte and inside it, with
// no debug file. objdump -d is the oracle; PLT0 (objdump's `first@plt-0x10`) has no name of its own.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { Dwunw } from '../lib/dwunw.js';
import { DWUNW_SYM_PLT } from '../lib/native-consts.js';
import { fixturesX64 } from './helpers.js';

const files = ['/usr/bin/python3.11', '/usr/lib/x86_64-linux-gnu/libc.so.6', '/usr/bin/xz', join(fixturesX64, 'hot')];

for (const file of files) {
  t.test(file, async (t) => {
    if (!existsSync(file)) return t.fail(`${file} is not installed`);
    const dis = execFileSync('objdump', ['-d', '-j', '.plt', '-j', '.plt.sec', '-j', '.plt.got', file], { encoding: 'utf8', maxBuffer: 1 << 28 });
    const labels = [...dis.matchAll(/^([0-9a-f]+) <(.+)>:$/gm)].map((m) => [BigInt(`0x${m[1]}`), m[2]!] as const);
    const stubs = labels.filter(([, n]) => !/[+-]0x[0-9a-f]+$/.test(n));
    t.ok(stubs.length > 0, `objdump: ${stubs.length} stubs`);
    const d = new Dwunw({ debugDirs: '/nonexistent' });
    const m = d.open(file);
    try {
      const wrong: string[] = [];
      for (const [addr, name] of stubs) {
        for (const at of [addr, addr + 6n]) {
          const s = m.symbolize(at);
          if (s?.name !== name || !(s.flags & DWUNW_SYM_PLT)) wrong.push(`0x${at.toString(16)}: ${s?.name ?? null} (objdump: ${name})`);
        }
      }
      t.same(wrong.slice(0, 10), [], `every stub named as objdump names it (${stubs.length * 2} look-ups)`);
      const plt0 = labels.find(([, n]) => /-0x[0-9a-f]+$/.test(n));
      if (plt0) t.equal(m.symbolize(plt0[0])?.name ?? null, null, 'PLT0: no name');
    } finally {
      m.close();
      d.close();
    }
  });
}
