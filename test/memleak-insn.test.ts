// bpf/runtime/insn_x86.c (the instruction decoder behind memleak's cheap uprobe places) against objdump:
// every instruction boundary objdump finds in the .text of libc, ld.so and a fixture is where
// our decoder's lengths lead. Then the place memleak picks for glibc's free (-v): after leading
// flag-only instructions, on the first one the kernel emulates, as objdump reads those bytes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { bpfUnavailable, requireOrSkip, root } from './helpers.js';

const out = join(root, 'build', 'test', 'tools');
const tool = join(out, 'insn_vs_objdump');
const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const files = [libc, '/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2', join(root, 'fixtures', 'x86_64', 'build', 'leaky')];

const why = process.arch !== 'x64' ? 'needs x86_64'
  : spawnSync('objdump', ['--version']).status !== 0 ? 'no objdump (binutils)'
  : !existsSync(libc) ? `no ${libc}` : null;

if (why) {
  requireOrSkip(t, 'the instruction decoder against objdump', why);
} else {
  mkdirSync(out, { recursive: true });
  const cc = spawnSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-I', join(root, 'bpf', 'runtime'), '-o', tool,
    join(root, 'test', 'insn', 'insn_vs_objdump.c'), join(root, 'bpf', 'runtime', 'insn_x86.c')], { encoding: 'utf8' });
  t.equal(cc.status, 0, `insn_vs_objdump builds${cc.stderr ? `: ${cc.stderr}` : ''}`);

  for (const f of files.filter((x) => existsSync(x))) {
    t.test(`lengths in ${f}`, async (t) => {
      // objdump prints virtual addresses; these files map .text at offset == address
      const od = spawnSync('objdump', ['-d', '--no-show-raw-insn', '-j', '.text', f], { encoding: 'utf8', maxBuffer: 1 << 30 });
      t.equal(od.status, 0, 'objdump -d');
      const hdr = spawnSync('readelf', ['-SW', f], { encoding: 'utf8' }).stdout;
      const m = /\]\s+\.text\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(hdr);
      t.ok(m && m[1] === m[2]?.padStart(m[1].length, '0').slice(-m[1].length), '.text at file offset == address');
      const starts = [...od.stdout.matchAll(/^\s+([0-9a-f]+):/gm)].map((x) => parseInt(x[1]!, 16)).sort((a, b) => a - b);
      const r = spawnSync(tool, [f], { input: starts.map((x) => x.toString(16)).join('\n'), encoding: 'utf8', maxBuffer: 1 << 26 });
      const sum = /checked (\d+) wrong (\d+) undecodable (\d+)/.exec(r.stdout);
      t.ok(sum && Number(sum[1]) > 1000, `${sum?.[1]} instructions checked`);
      // objdump itself misreads a few bytes of padding at the end of .text: allow 2
      t.ok(sum && Number(sum[2]) + Number(sum[3]) <= 2, `lengths equal objdump's: ${r.stdout.trim()}`);
    });
  }

  t.test("free's probe place", async (t) => {
    const bin = join(root, 'build', 'bpf', 'memleak');
    const cannot = bpfUnavailable('memleak probes free', [[bin, 'make bpf']]);
    if (cannot) return requireOrSkip(t, "free's probe place", cannot);
    const r = spawnSync(bin, ['-v', '-c', 'true', '1'], { encoding: 'utf8', timeout: 60_000 });
    const pm = /memleak: free probed at (?:\+(\d+)|entry)/.exec(r.stderr);
    t.ok(pm, `memleak -v says where free is probed: ${pm?.[0]}`);
    if (!pm?.[1]) return;
    const off = Number(pm[1]);
    const sym = spawnSync('sh', ['-c', `nm -D ${libc} | awk '$3=="free" || $3 ~ /^free@@/ {print $1; exit}'`], { encoding: 'utf8' }).stdout.trim();
    const start = parseInt(sym, 16);
    const od = spawnSync('objdump', ['-d', '--no-show-raw-insn', `--start-address=${start}`, `--stop-address=${start + off + 16}`, libc], { encoding: 'utf8' }).stdout;
    const insns = [...od.matchAll(/^\s+([0-9a-f]+):\s+(\S+)/gm)].map((x) => ({ at: parseInt(x[1]!, 16) - start, op: x[2]! }));
    const at = insns.find((i) => i.at === off);
    t.ok(at && /^(j\w+|push|call|nop\w*)$/.test(at.op), `+${off} is an instruction the kernel emulates (${at?.op})`);
    t.ok(insns.filter((i) => i.at < off).every((i) => /^(test|cmp\w*|endbr64)$/.test(i.op)), `the skipped ones only set flags (${insns.filter((i) => i.at < off).map((i) => i.op).join(', ')})`);
  });
}
