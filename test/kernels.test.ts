// memleak inside the kernels users run: Debian 12's arm64, x86_64 and mipsel kernels (6.1) booted
// under qemu-system (TCG) by scripts/qemu-kernel, with an initramfs holding busybox, memleak, the
// leaky workload and its C library. In each guest:
//   - `memleak --json -a -c "leaky 2"`: every site of `leaky --manifest` with a complete DWARF
//     stack (down to main, or to the thread's start), exact sizes and counts, nothing else
//     outstanding, nothing lost;
//   - (arm64, x86_64) a statically linked leaky (it never maps the libc.so.6 memleak probes): one
//     line naming the cause and exit status 1, not an empty report. Not in the mipsel guest, where
//     each memleak start costs ~50 s (the programs' verification under TCG): the same user-space
//     check as on the other two.
// The mipsel kernel (4kc-malta) has no BTF: the mips32 build's programs need none (bpf/Makefile),
// and its libc's functions without CFI are walked by their code (libdwunw's prologue analysis).
// In the x86_64 guest also profile: `profile -- hot 2` (hot's chains complete, every sample
// accounted for) and a short-lived `hot 0.05` whose samples are unwound after it is gone.
// The guests have no debug file for glibc (and Debian has none for the arm64 cross glibc): the
// workload's own frames are checked by name, glibc's and ld.so's by module.
//
// Needs qemu-system-aarch64 and qemu-system-x86_64, the kernels and busybox-static packages
// (downloaded once into build/qemu by apt-get download, never installed), the cross compiler.
// Without them the test is skipped with the reason, unless DWUNW_REQUIRE_BPF=1 (CI).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import t, { type Test } from 'tap';
import { frameName, parseProfileJson } from '../lib/profile.js';
import { REQUIRE_BPF as REQUIRE, root, type Run as ProcessRun, run as runProcess } from './helpers.js';

const Q = join(root, 'build', 'qemu');
const leakySrc = join(root, 'fixtures', 'x86_64', 'leaky.c');
const hostLeaky = join(root, 'fixtures', 'x86_64', 'build', 'leaky');
const ROUNDS = 2;

/** helpers.ts's Run, its exit status also as `code`. */
type Run = ProcessRun & { code: number | null };
const run = async (cmd: string, args: string[], timeoutMs: number): Promise<Run> => {
  const r = await runProcess(cmd, args, { env: process.env, timeoutMs });
  return { ...r, code: r.status };
};

// ---- The manifest and the stacks (as test/memleak.test.ts) ----------------------------------------

interface JFrame {
  pc: string;
  symbol: string | null;
  module: string | null;
}
interface JStack {
  bytes: number;
  allocations: number;
  frames: JFrame[];
  kind: string;
  complete: boolean | null;
  stop: string;
  reason?: string;
  allocs?: { addr: string; size: number }[];
}
interface JReport {
  pid: number;
  stacks: JStack[];
  lost: number;
  untracked: Record<string, number>;
  unwind: Record<string, unknown>;
}
interface Site {
  name: string;
  size: number;
  count: number;
  chain: string[][];
  incidental: boolean;
}

function loadManifest(): Site[] {
  const r = spawnSync(hostLeaky, ['--manifest'], { encoding: 'utf8' });
  return (r.stdout ?? '')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [name, , size, count, chain] = l.split('\t') as [string, string, string, string, string];
      return { name, size: Number(size), count: Number(count), chain: chain.split(',').map((c) => c.split('|')), incidental: name.startsWith('incidental') };
    });
}

/** leaky's own functions (its symbol table): checked by name; other chain entries by module. */
function ownFunctions(): Set<string> {
  const r = spawnSync('nm', ['--defined-only', hostLeaky], { encoding: 'utf8' });
  return new Set((r.stdout ?? '').split('\n').map((l) => l.split(' ')[2] ?? '').filter(Boolean));
}

const label = (f: JFrame): string => f.symbol ?? `[${basename(f.module ?? '?')}]`;

/**
 * The manifest (written for 64-bit glibc) as mips32's glibc 2.36 runs leaky: its qsort calls
 * qsort_r from a frame of its own (bal, 40-byte frame: objdump of libc.so.6; the 64-bit ones
 * tail-call), and fopen's FILE block is 312 bytes (472 on 64-bit: glibc's own request, seen by a
 * malloc interposed in a program run under qemu-mipsel / qemu-aarch64 / natively).
 */
function mips32Sites(sites: Site[]): Site[] {
  return sites.map((x) => {
    if (x.name === 'qsort_cmp') {
      const k = x.chain.findIndex((alts) => alts.includes('qsort_r'));
      return { ...x, chain: [...x.chain.slice(0, k + 1), ['qsort'], ...x.chain.slice(k + 1)] };
    }
    return x.name === 'fopen' ? { ...x, size: 312 } : x;
  });
}

async function main(t: Test): Promise<void> {
  const sites = loadManifest();
  const own = ownFunctions();
  if (sites.length < 15 || !own.has('main')) return void t.fail(`${hostLeaky}: no manifest (make fixtures)`);

  /** A frame matches a chain entry: the workload's functions by name, glibc's and ld.so's by module. */
  const entryOk = (alts: string[], f: JFrame, prog: string): boolean =>
    alts.some((a) => own.has(a)) ? alts.includes(f.symbol ?? '') && f.module === prog : f.module !== null && f.module !== prog && /\/(libc\.so\.6|ld-linux[^/]*\.so\.\d|ld\.so\.1)$/.test(f.module);
  const completeFor = (site: Site, s: JStack, prog: string): boolean =>
    s.frames.length >= site.chain.length && site.chain.every((alts, i) => entryOk(alts, s.frames[i]!, prog));

  function checkReport(tt: Test, rep: JReport, prog: string, sites: Site[]): void {
    const used = new Set<JStack>();
    for (const site of sites) {
      const st = rep.stacks.filter((s) => completeFor(site, s, prog));
      if (st.length !== 1) {
        tt.fail(`${site.name}: ${st.length} stacks with its chain (want 1)`, {
          chain: site.chain.map((c) => c.join('|')).join(','),
          stacks: rep.stacks.map((s) => `${s.bytes}/${s.allocations}: ${s.frames.slice(0, 14).map(label).join(',')}`),
        });
        continue;
      }
      const s = st[0]!;
      used.add(s);
      tt.ok(s.kind === 'dwarf' && s.complete === true && s.stop === 'OK', `${site.name}: complete DWARF stack, ${s.frames.map(label).join(' < ')}`, { stop: s.stop });
      const n = site.incidental ? site.count : site.count * ROUNDS;
      if (site.incidental) {
        // glibc's thread stack and TLS vector: their sizes depend on the architecture (page size)
        tt.equal(s.allocations, n, `${site.name}: ${n} allocation (${s.bytes} bytes)`);
      } else {
        tt.same([s.allocations, s.bytes], [n, n * site.size], `${site.name}: ${n} x ${site.size} bytes`);
        tt.ok((s.allocs ?? []).length === n && s.allocs!.every((a) => a.size === site.size), `${site.name}: -a lists ${n} blocks of ${site.size} bytes`);
      }
    }
    // --nested: glibc's mmap inside each large malloc, recorded through malloc's pending
    // uretprobe (its return address is the trampoline's until the patch puts the real one back)
    const big = sites.find((x) => x.name === 'large_malloc')!;
    const inner = rep.stacks.filter((s) => {
      const k = s.frames.findIndex((f) => f.module === prog);
      return !used.has(s) && k > 0 && s.frames.slice(0, k).every((f) => f.module?.endsWith('/libc.so.6')) &&
        completeFor(big, { ...s, frames: s.frames.slice(k) }, prog);
    });
    tt.ok(inner.length >= 1, `--nested: the mmap inside the large malloc: ${inner.length} stack(s)`);
    for (const ins of inner) {
      used.add(ins);
      tt.ok(ins.complete === true && ins.stop === 'OK' && ins.bytes > ins.allocations * big.size,
        `--nested: ${ins.allocations} mmap(s) of ${ins.bytes / ins.allocations} bytes, complete through malloc's pending uretprobe: ${ins.frames.map(label).join(' < ')}`);
    }
    tt.equal(inner.reduce((n, x) => n + x.allocations, 0), ROUNDS, `--nested: ${ROUNDS} mmaps, one per large malloc`);
    tt.ok(Number(rep.unwind.patched) >= ROUNDS, `records whose return address was patched back: ${rep.unwind.patched}`);
    const extra = rep.stacks.filter((s) => !used.has(s));
    tt.same(extra.map((s) => `${s.bytes} bytes in ${s.allocations}: ${s.frames.slice(0, 8).map(label).join(',')} ${s.reason ?? ''}`), [], 'no other stack outstanding');
    tt.equal(rep.lost, 0, 'no lost records');
    tt.same(rep.untracked, { allocs_full: 0, no_pending: 0, combined_full: 0, stack_table_full: 0 }, 'nothing untracked');
  }

  // ---- Per kernel: build the guest's programs, boot, check ----------------------------------------

  interface Kernel {
    arch: 'x86_64' | 'arm64' | 'mipsel';
    cc: string;
    memleak: () => Promise<string>; // builds it when needed; the path
    extra?: () => { files: string[]; script: string }; // more programs and guest commands
    noStatic?: boolean; // no static leaky run (mipsel: a memleak start costs ~50 s under TCG)
  }
  /**
   * profile (native build only) on fixtures/x86_64/hot, with glibc's debug file at its build-id
   * path (thread start and glibc's static functions by name, as on the host).
   */
  const profileExtra = (): { files: string[]; script: string } => {
    const libc = '/lib/x86_64-linux-gnu/libc.so.6';
    const id = /Build ID: ([0-9a-f]+)/.exec(spawnSync('readelf', ['-n', libc], { encoding: 'utf8' }).stdout ?? '')?.[1] ?? '';
    const dbg = `/usr/lib/debug/.build-id/${id.slice(0, 2)}/${id.slice(2)}.debug`;
    const files = [join(root, 'build', 'bpf', 'profile'), join(root, 'fixtures', 'x86_64', 'build', 'hot')];
    if (id && existsSync(dbg)) files.push(`${dbg}:${dbg}`);
    // then a short-lived hot: its samples are unwound after it is gone (TCG unwinds at ms per sample)
    return { files, script: ['profile -U --unwind=dwarf -F 999 --json -- /bin/hot 2 > profile.json 2> profile.err; echo $? > profile.rc',
      'profile -U --unwind=dwarf -F 999 --json -- /bin/hot 0.05 > short.json 2> short.err; echo $? > short.rc'].join('\n') };
  };
  /** A cross memleak (as verify-cross.test.ts builds it, which may run at the same time: one make at a time). */
  const crossMemleak = async (x: string): Promise<string> => {
    const triplet = x.slice(0, -1);
    const lock = join(root, 'build', '.cross.lock');
    const lib = await run('flock', [lock, 'make', '-s', '-j2', '-C', 'native', `CROSS=${x}`, 'lib'], 600_000);
    if (lib.code !== 0) throw new Error(`make -C native CROSS=${x}: ${lib.stderr.slice(-1500)}`);
    const b = await run('flock', [lock, 'make', '-s', '-C', 'bpf', `CROSS=${x}`], 600_000);
    if (b.code !== 0) throw new Error(`make -C bpf CROSS=${x}: ${b.stderr.slice(-1500)}`);
    return join(root, 'build', triplet, 'bpf', 'memleak');
  };
  const kernels: Kernel[] = [
    { arch: 'x86_64', cc: 'gcc', memleak: async () => join(root, 'build', 'bpf', 'memleak'), extra: profileExtra },
    { arch: 'arm64', cc: 'aarch64-linux-gnu-gcc', memleak: () => crossMemleak('aarch64-linux-gnu-') },
    // Debian's mipsel kernel (4kc-malta) is built without BTF: the mips32 build needs none
    { arch: 'mipsel', cc: 'mipsel-linux-gnu-gcc', memleak: () => crossMemleak('mipsel-linux-gnu-'), noStatic: true },
  ];

  const guestScript = (k: Kernel): string => [
    // the mipsel kernel's BPF JIT is off by default (the others have it on for good)
    'echo 1 > /proc/sys/net/core/bpf_jit_enable 2>/dev/null',
    `memleak --unwind=dwarf --json -a --nested -o 0 -T 100000 -c '/bin/leaky ${ROUNDS}' 600 > dwarf.json 2> dwarf.err; echo $? > dwarf.rc`,
    k.noStatic ? '' : `memleak --unwind=dwarf --json -o 0 -T 100000 -c '/bin/leaky-static 1' 600 > static.json 2> static.err; echo $? > static.rc`,
    '',
  ].join('\n');

  /** Build the guest's programs and boot: both kernels at once (each guest is mostly one busy vCPU). */
  async function boot(k: Kernel): Promise<{ error?: string; boot?: Run; out: string; summary: string }> {
    const dir = join(Q, 'test', k.arch);
    const out = join(dir, 'out');
    mkdirSync(dir, { recursive: true });
    let memleak: string;
    try {
      memleak = await k.memleak();
    } catch (e) {
      return { error: String(e), out, summary: '' };
    }
    if (!existsSync(memleak)) return { error: `no ${memleak} (make bpf)`, out, summary: '' };
    const leaky = join(dir, 'leaky');
    const leakyStatic = join(dir, 'leaky-static');
    const opt = ['-O2', '-fomit-frame-pointer', '-Wall', '-Wextra', '-Werror', '-g', '-pthread'];
    for (const [o, link] of [[leaky, ['-fPIE', '-pie']], [leakyStatic, ['-static']]] as const) {
      const c = await run(k.cc, [...opt, ...link, '-o', o, leakySrc], 120_000);
      if (c.code !== 0) return { error: `${k.cc} ${basename(o)}: ${c.stderr.slice(-1500)}`, out, summary: '' };
    }
    const script = join(dir, 'run.sh');
    const extra = k.extra?.() ?? { files: [], script: '' };
    writeFileSync(script, guestScript(k) + extra.script + '\n');
    const b = await run(
      join(root, 'scripts', 'qemu-kernel'),
      ['-a', k.arch, '-q', '-t', '720', '-o', out, '-f', memleak, '-f', leaky, '-f', leakyStatic, ...extra.files.flatMap((f) => ['-f', f]), script],
      900_000, // hang guard: a KVM try (60 s of silence at most), the initramfs and -t 720
    );
    const summary = b.stderr.split('\n').find((l) => /^qemu-kernel: \S+ vmlinu/.test(l)) ?? '';
    return { boot: b, out, summary };
  }

  const t0 = Date.now();
  const boots = await Promise.all(kernels.map(boot));
  t.comment(`builds and boots: ${Math.round((Date.now() - t0) / 1000)} s`);

  kernels.forEach((k, i) => {
    const { error, boot: b, out, summary } = boots[i]!;
    t.test(`memleak in Debian 12's ${k.arch} kernel (qemu-system, TCG)`, async (tt) => {
      if (error || !b) return void tt.fail(error ?? 'no boot');
      tt.comment(`${summary.replace(/^qemu-kernel: /, '')} (${Math.round(b.ms / 1000)} s with the download and the initramfs)`);
      if (b.code === 2 && /cannot download/.test(b.stderr) && !REQUIRE) {
        tt.pass(`skipped: ${b.stderr.trim()}`, { skip: true });
        return;
      }
      tt.equal(b.code, 0, 'the guest booted and ran the script', { stderr: b.stderr.slice(-3000) });
      if (b.code !== 0) return;
      const file = (n: string): string => (existsSync(join(out, n)) ? readFileSync(join(out, n), 'utf8') : '');
      tt.match(summary, /6\.1\.\d+-\d+-(cloud-(arm64|amd64)|4kc-malta)/, 'a Debian 12 kernel (6.1)');

      // dwarf mode, complete stacks
      tt.equal(file('dwarf.rc').trim(), '0', 'memleak -c leaky: exit status 0', { stderr: file('dwarf.err') });
      const rep = file('dwarf.json')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as JReport)
        .at(-1);
      if (!rep) return void tt.fail('no JSON report', { stderr: file('dwarf.err'), console: file('console.log').slice(-3000) });
      tt.match(file('dwarf.err'), new RegExp(`^memleak: target pid ${rep.pid} exited$`, 'm'), 'memleak saw the target exit');
      checkReport(tt, rep, '/bin/leaky', k.arch === 'mipsel' ? mips32Sites(sites) : sites);
      tt.comment(`unwind: ${JSON.stringify(rep.unwind)}`);

      // a static target: one line, exit 1
      if (k.noStatic) return;
      const st = file('static.err').split('\n').filter((l) => l && !/^Attaching to pid/.test(l));
      tt.equal(file('static.rc').trim(), '1', 'static leaky: exit status 1');
      tt.equal(file('static.json'), '', 'static leaky: no (empty) report');
      tt.same(st.length, 1, 'static leaky: one line on stderr', { stderr: file('static.err') });
      tt.match(st[0] ?? '', /^memleak: pid \d+ \(\/bin\/leaky-static\) is statically linked: it does not use \S+libc\.so\.6/, `static leaky: ${st[0]}`);

      // profile on hot: the samples taken once hot runs its chains (its own frames from main or
      // thread_main down) complete; the dynamic loader's start-up (long under TCG) is not counted
      if (!k.extra) return;
      tt.equal(file('profile.rc').trim(), '0', 'profile -- hot: exit status 0', { stderr: file('profile.err') });
      const pr = parseProfileJson(file('profile.json'));
      const sum = pr.summary;
      if (!sum) return void tt.fail('profile: no JSON summary', { stderr: file('profile.err') });
      // hot's own report, {"pid":N,"rounds":N,...,"cpu_ns":{...}}, names its pid (as profile.test.ts reads it)
      const hotLine = file('profile.json').split('\n').find((l) => l.startsWith('{"pid":') && l.includes('"cpu_ns"'));
      const hot = hotLine ? (JSON.parse(hotLine) as { pid: number; rounds: number; cpu_ns: Record<string, number> }) : null;
      if (!hot) return void tt.fail("profile: hot's report is missing from its stdout", { stderr: file('profile.err') });
      // Every sample accounted for: in one entry each; a user stack complete, stopped with its
      // reason or counted lost; the rest have no user context (samples - user_samples).
      const count = (es: typeof pr.entries): number => es.reduce((a, e) => a + e.count, 0);
      const values = (o: Record<string, number> | undefined): number => Object.values(o ?? {}).reduce((a, n) => a + n, 0);
      tt.equal(count(pr.entries), sum.samples, `profile: the ${sum.samples} samples are all in the entries`);
      tt.equal(sum.user_complete + values(sum.stopped) + values(sum.lost), sum.user_samples,
        `profile: user stacks ${sum.user_samples} = ${sum.user_complete} complete + stopped ${JSON.stringify(sum.stopped)} + lost ${JSON.stringify(sum.lost)}`);
      tt.equal(count(pr.entries.filter((e) => e.user)), sum.user_samples, 'profile: entries with a user stack = user_samples');
      const unmarked = pr.entries.filter((e) => e.user && !e.user.complete && !e.user.reason);
      tt.same(unmarked.map((e) => `${e.count} ${e.user!.stop}`), [], 'profile: every incomplete user stack says why');
      const mine = pr.entries.filter((e) => e.pid === hot.pid && e.user);
      const running = mine.filter((e) => e.user!.frames.some((f) => f.symbol === 'main' || f.symbol === 'thread_main'));
      const total = count(running);
      const complete = count(running.filter((e) => e.user!.complete));
      // Not in the chains: ld.so's start-up (its _start has no CFI: NO_DWARF), exit, and the
      // samples at the exec boundary (the old image's registers with the new image's maps:
      // NO_MODULE, one frame), all marked.
      const others = mine.filter((e) => !running.includes(e));
      const outside: Record<string, number> = {};
      for (const e of others) outside[e.user!.stop] = (outside[e.user!.stop] ?? 0) + e.count;
      tt.comment(`profile: ${sum.samples} samples, hot (pid ${hot.pid}, ${hot.rounds} rounds): ${total} in its chains, ${complete} complete; outside them: ${JSON.stringify(outside)}`);
      // 200 samples: enough that each chain (>= 7 % of hot's CPU) is sampled; seen 693-2337 under TCG
      tt.ok(total >= 200, `profile: ${total} samples of hot in its chains`);
      tt.ok(complete >= 0.99 * total, `profile: ${complete}/${total} complete to _start / thread start`, {
        incomplete: running.filter((e) => !e.user!.complete).map((e) => `${e.count} ${e.user!.stop}: ${e.user!.frames.map(frameName).join(',')}`),
      });
      // ... and over every sample of hot with a user stack: a stack that stops before main is
      // not in the chains above, so it must not leave the count. hot and libhot.so have CFI down
      // to _start and the thread start: an incomplete stack with a frame in them is a short walk,
      // save the exec boundary's one NO_MODULE frame (the old image's registers).
      // crt's functions in hot have no CFI (readelf -wF: no FDE covers _init, _fini, frame_dummy,
      // register_tm_clones, deregister_tm_clones, __do_global_dtors_aux): NO_DWARF there is the end
      // of what can be known. Measured in the guest: 0 of 1648; the short run 2 of 227, both NO_DWARF
      // in _init; one clean-clone run 1 in frame_dummy.
      const stoppedShort = (e: (typeof mine)[number]): boolean => !e.user!.complete &&
        e.user!.frames.some((f) => /\/(hot|libhot\.so)$/.test(f.module ?? '')) &&
        !(e.user!.frames.length === 1 && e.user!.stop === 'NO_MODULE') &&
        !(e.user!.stop === 'NO_DWARF' &&
          /^(_init|_fini|frame_dummy|register_tm_clones|deregister_tm_clones|__do_global_dtors_aux)$/.test(e.user!.frames.at(-1)?.symbol ?? ''));
      const short = mine.filter(stoppedShort);
      tt.ok(count(short) <= 0.01 * count(mine), `profile: ${count(short)} of all hot's ${count(mine)} samples stopped short in its own code (<= 1 %)`, {
        short: short.slice(0, 10).map((e) => `${e.count} ${e.user!.stop}: ${e.user!.frames.map(frameName).join(',')}`),
      });
      const top = (leaf: string): string[] =>
        running.filter((e) => e.user!.frames.some((f) => f.symbol === leaf)).map((e) => e.user!.frames.map(frameName).join(';'));
      tt.ok(top('chain_plain').some((x) => x.startsWith('spin;plain_leaf;plain_b;plain_a;chain_plain;main;')), 'profile: plain chain');
      tt.ok(top('chain_lib').some((x) => x.startsWith('hotlib_leaf;hotlib_work;chain_lib;main;')), 'profile: shared library chain');
      tt.ok(top('thread_main').some((x) => /^spin;thread_work;thread_main;start_thread;(__)?clone3$/.test(x)), 'profile: second thread, to its start');
      tt.ok(top('chain_recurse').some((x) => x.split(';').filter((n) => n === 'recurse').length === 26), 'profile: recursion 26 frames deep');
      tt.ok(top('chain_signal').some((x) => /^spin;signal_work;on_signal;__restore_rt;.*chain_signal;main;/.test(x)), 'profile: through the signal frame');

      // A process that is gone before its samples are unwound (the program and ld.so are mapped by
      // the kernel at exec: their mappings come with the exec record, not from /proc later)
      tt.equal(file('short.rc').trim(), '0', 'profile -- hot 0.05: exit status 0', { stderr: file('short.err') });
      const sh = parseProfileJson(file('short.json'));
      const shLine = file('short.json').split('\n').find((l) => l.startsWith('{"pid":') && l.includes('"cpu_ns"'));
      const shPid = shLine ? (JSON.parse(shLine) as { pid: number }).pid : -1;
      const shRun = sh.entries.filter((e) => e.pid === shPid && e.user?.frames.some((f) => f.symbol === 'main' || f.symbol === 'thread_main'));
      const shInc = shRun.filter((e) => !e.user!.complete);
      // 0.05 s of hot's CPU at 999 Hz: ~50 chain samples (85 measured in the guest); none is a failure
      const shMine = sh.entries.filter((e) => e.pid === shPid && e.user);
      tt.ok(shPid > 0 && count(shRun) >= 10, `short-lived hot: ${count(shRun)} samples in its chains (>= 10), of ${count(shMine)} with a user stack`);
      const shShort = shMine.filter(stoppedShort);
      tt.same(shShort.map((e) => `${e.count} ${e.user!.stop}: ${e.user!.frames.map(frameName).join(',')}`), [], 'short-lived hot: no sample stopped short in its own code');
      tt.same(shInc.map((e) => `${e.count} ${e.user!.stop}: ${e.user!.frames.map(frameName).join(',')}`), [],
        `short-lived hot: its ${count(shRun)} chain samples complete (${JSON.stringify(sh.summary?.stopped ?? {})} stopped, ${JSON.stringify(sh.summary?.lost ?? {})} lost in all)`);
      // x86_64 loads PIE programs at 0x55.../0x56... (the vDSO, at 0x7ff..., comes from /proc only)
      const noModule = sh.entries.filter((e) => e.pid === shPid && e.user && /^(NO_MODULE|NO_PROCESS)$/.test(e.user.stop) &&
        e.user.frames.some((f) => f.module === null && /^0x5/.test(f.pc)));
      tt.same(noModule.map((e) => `${e.count} ${e.user!.stop} ${e.user!.frames[0]?.pc}`), [], 'short-lived hot: no frame in its program without a module');
    });
  });
}

// ---- Gate -----------------------------------------------------------------------------------------

function unavailable(): string | null {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'needs Linux on x86_64';
  for (const b of ['qemu-system-x86_64', 'qemu-system-aarch64', 'qemu-system-mipsel', 'cpio', 'aarch64-linux-gnu-gcc', 'mipsel-linux-gnu-gcc'])
    if (spawnSync('sh', ['-c', `command -v ${b}`]).status !== 0) return `no ${b} (scripts/ensure-deps installs it)`;
  if (!existsSync(hostLeaky)) return `${hostLeaky} is not built (make fixtures)`;
  return null;
}

const why = unavailable();
if (why) {
  if (REQUIRE) t.fail(`DWUNW_REQUIRE_BPF=1 but ${why}`);
  else t.pass(`kernel tests skipped: ${why}`, { skip: why });
} else {
  // Hang guards, not budgets: quietly this takes ~4 min; a loaded 2-core host runs TCG 5-10x slower.
  t.setTimeout(1_560_000);
  t.test("Debian 12's kernels under qemu-system", { timeout: 1_500_000 }, (tt) => main(tt));
}
