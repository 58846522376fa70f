// The CLI as people use it (issue 18): one tap test per row of the issue's table and per cause
// of the exit-status table in README.md, on a program no other test uses (fixtures/x86_64/cli_tree:
// 30 leak sites, a deep recursion, fork, exec, a constructor that leaks before main).
//   memleak: a command that cannot run (127/126), usage errors (2), the process tree of -c and
//   `-- PROG` (a shell, python3, fork, exec, first instruction), folded output with every stack
//   (identical lines merged), --max-frames, `| head -1`, SIGTERM, kill -9 of `dwunw memleak`
//   (tracer, target and probes gone: the link ids of its fds leave `bpftool link`), a parent that
//   died before PR_SET_PDEATHSIG, missing CAP_BPF / CAP_PERFMON (7).
//   unwind-pid: kernel thread (4), zombie (3), traced by another process (5), Yama (6).
//   unwind-core: a truncated core (the stacks, then 8).
// Real BPF (root, kernel BTF; skipped without, a failure with DWUNW_REQUIRE_BPF=1), real ptrace.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bpfUnavailable, cliEnv, commOf, dwunwBin, inSleep, onPath, requireOrSkip, root, start as startProcess, type Started, track, until, waitFor } from './helpers.js';

const memleakBin = join(root, 'build', 'bpf', 'memleak');
const prog = join(root, 'fixtures', 'x86_64', 'build', 'cli_tree');
const work = mkdtempSync(join(tmpdir(), 'dwunw-cli-unix-'));
chmodSync(work, 0o755); // the runs as nobody read files here

t.teardown(() => rmSync(work, { recursive: true, force: true }));

/** A command in the background (FORCE_COLOR, NODE_OPTIONS dropped; `env` added). */
const start = (cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 90_000): Started =>
  startProcess(cmd, args, { env: cliEnv(env), timeoutMs });

const dwunw = (args: string[], env: Record<string, string> = {}, timeoutMs?: number) => start(process.execPath, [dwunwBin, ...args], env, timeoutMs);
const lines = (s: string): string[] => s.split('\n').filter((l) => l.length > 0);

const alive = (pid: number): boolean => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
};

/** Children of a process (every thread's children file). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      out.push(...readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number));
    }
  } catch {
    // gone
  }
  return out;
}

/** BPF link ids and perf_event fds a process holds (its /proc fds). */
function bpfHolds(pid: number): { links: number[]; perfEvents: number } {
  const links: number[] = [];
  let perfEvents = 0;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === 'anon_inode:[perf_event]') perfEvents++;
        const m = /^link_id:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'));
        if (m) links.push(Number(m[1]));
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // gone
  }
  return { links, perfEvents };
}

/** The link ids bpftool lists now. */
function bpftoolLinks(): Set<number> | null {
  const r = spawnSync('bpftool', ['link', 'show', '-j'], { encoding: 'utf8' });
  if (r.status !== 0) return null;
  try {
    return new Set((JSON.parse(r.stdout) as { id: number }[]).map((l) => l.id));
  } catch {
    return null;
  }
}

interface JStack {
  bytes: number;
  allocations: number;
  pid?: number;
  comm?: string;
  frames: { symbol: string | null; module: string | null }[];
  complete: boolean | null;
  stop: string;
}
const reports = (out: string): { stacks: JStack[] }[] =>
  lines(out)
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { stacks: JStack[] });
const names = (s: JStack): string[] => s.frames.map((f) => f.symbol ?? '?');

// ---- Without BPF: the program cannot run, usage errors, unwind-pid and unwind-core ----------------

const why = bpfUnavailable('memleak needs CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE', [[memleakBin, 'make bpf'], [prog, 'make fixtures']]);
const bpfTest = (name: string, fn: (tt: Test) => Promise<void>): void => {
  if (why) return requireOrSkip(t, name, why);
  t.test(name, { timeout: 120_000 }, fn);
};

bpfTest('memleak -c ./no-such-program: one line naming it, exit 127 (126: not executable)', async (tt) => {
  const r = await dwunw(['memleak', '-c', './no-such-program', '1', '1']).done;
  tt.equal(r.status, 127, 'exit 127, as a shell');
  tt.same(lines(r.stderr), ['memleak: ./no-such-program: no such file'], 'one line naming it');
  const byName = await dwunw(['memleak', '-c', 'no-such-program-dwunw 3', '1', '1']).done;
  tt.equal(byName.status, 127);
  tt.same(lines(byName.stderr), ['memleak: no-such-program-dwunw: command not found'], 'not in PATH: one line');
  const direct = await dwunw(['memleak', '--', join(work, 'nothing-here'), 'x']).done;
  tt.equal(direct.status, 127, '-- PROG: exit 127');
  tt.equal(lines(direct.stderr).length, 1, '-- PROG: one line');
  const plain = join(work, 'not-executable');
  writeFileSync(plain, '#!/bin/sh\nexit 0\n');
  chmodSync(plain, 0o644);
  const nx = await dwunw(['memleak', '-c', plain, '1', '1']).done;
  tt.equal(nx.status, 126, 'not executable: exit 126');
  tt.same(lines(nx.stderr), [`memleak: ${plain}: permission denied (not executable)`], 'one line naming it');
  tt.equal(nx.stdout, '', 'nothing on stdout');
});

t.test('memleak --frobnicate: one line ending (see dwunw memleak --help), exit 2', async (tt) => {
  if (!existsSync(memleakBin)) return void tt.fail(`${memleakBin} is not built`);
  for (const args of [['--frobnicate'], ['-p'], ['--max-frames', '0', '-p', '1'], ['--top', 'many', '-p', '1'], ['-c', 'true', '--', 'x'], ['3', '4', '5']]) {
    const r = await dwunw(['memleak', ...args]).done;
    tt.equal(r.status, 2, `${args.join(' ')}: exit 2`);
    tt.equal(lines(r.stderr).length, 1, `${args.join(' ')}: one line`, { stderr: r.stderr });
    tt.match(r.stderr, /^memleak: .+ \(see dwunw memleak --help\)\n$/, `${args.join(' ')}: ${lines(r.stderr)[0]}`);
    tt.equal(r.stdout, '', `${args.join(' ')}: nothing on stdout`);
  }
  const bare = await dwunw(['memleak']).done;
  tt.equal(bare.status, 2, 'no target: a usage error too');
});

t.test('dwunw unwind-pid of a kernel thread: "pid N is a kernel thread: no user stack", exit 4', async (tt) => {
  // kthreadd is pid 2 in the initial pid namespace; else find one
  let k = 0;
  for (const d of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[6]) & 0x00200000) {
        k = Number(d);
        break;
      }
    } catch {
      // gone
    }
  }
  if (!k) return requireOrSkip(tt, 'unwind-pid of a kernel thread', 'no kernel thread visible in this pid namespace');
  const r = await dwunw(['unwind-pid', String(k)]).done;
  tt.equal(r.status, 4, 'exit 4');
  tt.equal(r.stderr, `dwunw: pid ${k} is a kernel thread: no user stack\n`, 'one line naming the cause');
  tt.equal(r.stdout, '', 'nothing on stdout');
});

t.test('dwunw unwind-pid of a zombie: one line, exit 3; reaped: no such process', async (tt) => {
  // A parent that leaves its child a zombie until SIGUSR1, then reaps it and says so (init, here
  // a container's process_api, may never reap orphans: the parent must).
  let out = '';
  const parent = startProcess('perl', ['-e', '$| = 1; my $p; $SIG{USR1} = sub { waitpid($p, 0); print "reaped\\n" }; $p = fork; exit 0 unless $p; print "$p\\n"; sleep 1 while 1'], {
    onOutput: (o) => (out = o),
  });
  await waitFor(() => /^\d+\n/.test(out), 60_000, 'the zombie\'s pid');
  const zombie = Number(out.split('\n')[0]);
  tt.ok(await until(() => !alive(zombie) && existsSync(`/proc/${zombie}`), 60_000), 'the child is a zombie');
  const r = await dwunw(['unwind-pid', String(zombie)]).done;
  tt.equal(r.status, 3, 'exit 3');
  tt.equal(r.stderr, `dwunw: pid ${zombie} is a zombie: it has exited, no stack is left\n`);
  parent.child.kill('SIGUSR1');
  await waitFor(() => out.includes('reaped\n'), 60_000, 'the parent to reap the zombie');
  parent.child.kill('SIGKILL');
  await parent.done;
  const gone = await dwunw(['unwind-pid', String(zombie)]).done;
  tt.equal(gone.status, 3, 'reaped: exit 3 too');
  tt.equal(gone.stderr, `dwunw: pid ${zombie}: no such process\n`);
});

t.test('dwunw unwind-pid of a process traced by another: "pid N is traced by PID M (strace)", exit 5', async (tt) => {
  if (!onPath('strace')) return requireOrSkip(tt, 'a target traced by strace', 'strace is not installed (scripts/ensure-deps installs it)');
  const target = start(prog, ['sleep', '600000']);
  const pid = target.child.pid!;
  const tracer = start('strace', ['-p', String(pid), '-o', '/dev/null']);
  const traced = await until(() => /^TracerPid:\s*[1-9]/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')), 60_000);
  tt.ok(traced, 'strace holds it');
  const r = await dwunw(['unwind-pid', String(pid)]).done;
  tt.equal(r.status, 5, 'exit 5');
  tt.equal(r.stderr, `dwunw: pid ${pid} is traced by PID ${tracer.child.pid} (strace): a thread has one tracer at a time\n`);
  tracer.child.kill('SIGTERM');
  await tracer.done;
  target.child.kill('SIGKILL');
  await target.done;
});

t.test('dwunw unwind-pid under Yama ptrace_scope: one line naming the sysctl, exit 6', async (tt) => {
  // Yama's sysctl is global (changing it would change every other test on the machine): its
  // value comes from a stand-in file here (DWUNW_TEST_YAMA_FILE), the checks are the real ones.
  const target = start(prog, ['sleep', '600000']);
  const pid = target.child.pid!;
  const f = join(work, 'ptrace_scope');
  writeFileSync(f, '3\n');
  const r = await dwunw(['unwind-pid', String(pid)], { DWUNW_TEST_YAMA_FILE: f }).done;
  tt.equal(r.status, 6, 'scope 3: exit 6, even as root');
  tt.equal(r.stderr, `dwunw: pid ${pid}: ptrace is disabled by Yama (kernel.yama.ptrace_scope = 3)\n`);
  writeFileSync(f, '1\n');
  const ok = await dwunw(['unwind-pid', String(pid)], { DWUNW_TEST_YAMA_FILE: f }).done;
  tt.equal(ok.status, 0, 'scope 1 as root (CAP_SYS_PTRACE): unwound');
  const nobody = await start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all', 'env', '-u', 'NODE_OPTIONS', `DWUNW_TEST_YAMA_FILE=${f}`, process.execPath, dwunwBin, 'unwind-pid', String(pid)]).done;
  tt.equal(nobody.status, 6, 'scope 1 without CAP_SYS_PTRACE, not a descendant: exit 6');
  tt.match(nobody.stderr, /^dwunw: pid \d+: Yama \(kernel\.yama\.ptrace_scope = 1\) lets a process attach only to its descendants[^\n]*\n$/);
  target.child.kill('SIGKILL');
  await target.done;
});

bpfTest('missing CAP_BPF or CAP_PERFMON: one line naming it, exit 7', async (tt) => {
  for (const cap of ['bpf', 'perfmon']) {
    const r = await start('setpriv', [`--inh-caps=-${cap},-sys_admin`, `--bounding-set=-${cap},-sys_admin`, memleakBin, '--', prog, 'sleep', '100']).done;
    tt.equal(r.status, 7, `without CAP_${cap.toUpperCase()}: exit 7`);
    tt.match(r.stderr, new RegExp(`^memleak: missing CAP_${cap.toUpperCase()} [^\\n]*\\n$`), `one line naming CAP_${cap.toUpperCase()}`);
  }
});

// ---- unwind-core: a truncated core -----------------------------------------------------------------

t.test('dwunw unwind-core of a truncated core: the stacks, then exit 8 naming "truncated"', async (tt) => {
  // The kernel's own core (notes first, as the kernel writes it: a prefix of it keeps the notes),
  // in the program's directory: core_pattern must name a plain file. It is the machine's, never
  // written here (gdb's gcore writes its notes last: no stand-in for this check).
  const pattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim();
  if (pattern.startsWith('|') || pattern.includes('/')) return requireOrSkip(tt, 'a truncated kernel core', `core_pattern is "${pattern}": the kernel's cores go elsewhere`);
  const dir = join(work, 'cores');
  mkdirSync(dir);
  const sh = track(spawn('/bin/sh', ['-c', `ulimit -c unlimited && exec '${prog}' deep 40 60000`], { cwd: dir, stdio: 'ignore' }));
  const pid = sh.pid!;
  await waitFor(() => inSleep(pid, 'cli_tree'), 30_000, 'cli_tree deep to sleep at the bottom of its recursion');
  sh.kill('SIGSEGV');
  await new Promise((resolve) => sh.on('close', resolve));
  const core = readdirSync(dir).find((f) => f === 'core' || f.startsWith('core.'));
  if (!core) return void tt.fail('the kernel wrote no core');
  const whole = await dwunw(['unwind-core', join(dir, core)]).done;
  tt.equal(whole.status, 0, 'the whole core: exit 0');
  tt.match(whole.stdout, /hold\+/, 'the whole core: the program\'s frames');
  const cut = join(work, 'cut.core');
  const b = readFileSync(join(dir, core));
  writeFileSync(cut, b.subarray(0, Math.floor(b.length * 0.6)));
  const r = await dwunw(['unwind-core', cut]).done;
  tt.equal(r.status, 8, 'exit 8');
  tt.match(r.stdout, /^Thread \d+ \(cli_tree\)/m, 'the thread is listed');
  tt.match(r.stdout, /#0 /, 'with what could be unwound');
  const last = lines(r.stderr).at(-1) ?? '';
  tt.match(last, /^dwunw: \S+cut\.core: truncated core \(\d+ of \d+ bytes\): the stacks above are what could be unwound$/, `the last line names it: ${last}`);
});

// ---- memleak with BPF ------------------------------------------------------------------------------

bpfTest('memleak -c through a shell (cd / && prog; python3 -c): the program\'s allocations, by process', async (tt) => {
  const r = await dwunw(['memleak', '--json', '-c', `cd / && '${prog}' sites 3 1500`, '600']).done;
  tt.equal(r.status, 0, 'exit 0', { stderr: r.stderr });
  const rep = reports(r.stdout).at(-1);
  const stacks = rep?.stacks ?? [];
  for (let i = 0; i < 3; i++) {
    const site = `site_0${i}`;
    const st = stacks.find((s) => names(s).includes(site));
    tt.ok(st, `${site}: found (the program the shell forked)`);
    tt.equal(st?.bytes, 1000 + i, `${site}: ${1000 + i} bytes`);
    tt.equal(st?.comm, 'cli_tree', `${site}: comm cli_tree`);
    tt.ok(st?.complete && names(st).at(-1) === '_start', `${site}: complete down to _start`);
  }
  const early = stacks.find((s) => names(s).includes('early_site'));
  tt.equal(early?.bytes, 6000, 'early_site (a constructor, before main): from the first instruction');
  const shell = stacks.filter((s) => s.comm === 'sh');
  tt.ok(shell.length > 0, 'the shell\'s own allocations too, under sh');
  tt.not(shell[0]?.pid, stacks.find((s) => s.comm === 'cli_tree')?.pid, 'two processes, told apart by pid');

  if (spawnSync('/usr/bin/python3', ['-c', 'pass']).status !== 0) return requireOrSkip(tt, 'memleak -c python3', 'no /usr/bin/python3 (scripts/ensure-deps installs python3)');
  // python frees its objects when it ends: the reports while it sleeps show them
  const py = await dwunw(['memleak', '--json', '-c', `/usr/bin/python3 -c 'import time; keep = [bytearray(123456) for _ in range(7)]; time.sleep(6)'`, '1']).done;
  tt.equal(py.status, 0, 'python3: exit 0', { stderr: py.stderr });
  const all = reports(py.stdout);
  const pst = all.flatMap((x) => x.stacks);
  const big = pst.filter((s) => s.comm?.startsWith('python3') && s.bytes >= 7 * 123456 && s.allocations >= 7 && names(s).includes('PyByteArray_Resize'));
  tt.ok(big.length >= 1, `python3's seven bytearrays (PyByteArray_Resize): ${big.map((s) => `${s.bytes} bytes in ${s.allocations}`).join(', ') || 'not found'}`, {
    reports: all.length,
    stacks: pst.slice(0, 12).map((s) => `${s.comm} ${s.bytes}/${s.allocations} ${names(s).slice(0, 4).join(',')}`),
    stderr: py.stderr,
  });
});

bpfTest('memleak --folded: every stack (not the top 10), identical lines merged, weights summed', async (tt) => {
  // at once (each run waits for its program)
  const [r, top, twin, count, help] = await Promise.all([
    dwunw(['memleak', '--folded', '-c', `${prog} sites 30 1500`, '600']).done,
    start(memleakBin, ['--folded', '-T', '5', '-c', `${prog} sites 30 1500`, '600']).done,
    start(memleakBin, ['--folded', '--', prog, 'twin', '1500']).done,
    start(memleakBin, ['--folded', '--weight=allocations', '--', prog, 'twin', '1500']).done,
    dwunw(['memleak', '--help']).done,
  ]);
  tt.equal(r.status, 0, 'exit 0', { stderr: r.stderr });
  const folded = lines(r.stdout);
  for (let i = 0; i < 30; i++) {
    const site = `site_${String(i).padStart(2, '0')}`;
    const l = folded.filter((x) => x.includes(`;${site};leak `));
    tt.equal(l.length, 1, `${site}: one line`);
    tt.match(l[0] ?? '', new RegExp(`;main;${site};leak ${1000 + i}$`), `${site}: ${1000 + i} bytes`);
  }
  const keys = folded.map((l) => l.slice(0, l.lastIndexOf(' ')));
  tt.equal(new Set(keys).size, keys.length, 'no two lines with the same frames');
  tt.equal(lines(top.stdout).length, 5, '-T 5: five lines');

  tt.match(twin.stdout, /;main;twin_site;leak 1401$/m, 'two stacks of twin_site (two call sites): one line, 700 + 701 bytes');
  tt.match(count.stdout, /;main;twin_site;leak 2$/m, '--weight=allocations: 2');
  tt.match(help.stdout, /WEIGHT is outstanding bytes/, '--help says what the weight is');
});

bpfTest('memleak --max-frames 1024 --stack-size 65536: 301 frames of recursion, then main; a limit hit stays marked', async (tt) => {
  const [r, cut, text] = await Promise.all([
    dwunw(['memleak', '--json', '--max-frames', '1024', '--stack-size', '65536', '--', prog, 'deep', '301', '1500']).done,
    start(memleakBin, ['--json', '--max-frames', '50', '--', prog, 'deep', '301', '1500']).done,
    start(memleakBin, ['--max-frames', '50', '--', prog, 'deep', '301', '1500']).done,
  ]);
  tt.equal(r.status, 0, 'exit 0', { stderr: r.stderr });
  const st = reports(r.stdout).at(-1)?.stacks.find((s) => s.bytes === 4242);
  const n = st ? names(st) : [];
  tt.equal(n.filter((x) => x.startsWith('recurse')).length, 301, '301 recurse frames');
  tt.equal(n[n.indexOf('main') - 1]?.startsWith('recurse'), true, 'then main');
  tt.equal(st?.complete, true, 'complete');
  const cs = reports(cut.stdout).at(-1)?.stacks.find((s) => s.bytes === 4242);
  tt.equal(cs?.frames.length, 50, '--max-frames 50: 50 frames');
  tt.equal(cs?.complete, false, 'not complete');
  tt.equal(cs?.stop, 'DEPTH', 'stop: DEPTH');
  tt.match(text.stdout, /^\t50 \[<0{16}>\] \[unwind stopped: frame limit reached\]$/m, 'text: the stack ends with [unwind stopped: ...]');
});

bpfTest('memleak -- PROG with fork and exec: every process, grouped by process; an exec\'d image\'s allocations dropped', async (tt) => {
  const [r, j, e] = await Promise.all([
    dwunw(['memleak', '600', '--', prog, 'fork', '3', '1500']).done,
    start(memleakBin, ['--json', '--', prog, 'fork', '2', '1500']).done,
    start(memleakBin, ['--json', '--', prog, 'exec', '1500']).done,
  ]);
  tt.equal(r.status, 0, 'exit 0', { stderr: r.stderr });
  const heads = r.stdout.match(/^cli_tree \((\d+)\):$/gm) ?? [];
  tt.equal(new Set(heads).size, 4, `four processes, each under its "comm (pid):" line (${heads.length})`);
  for (const k of [0, 1, 2]) tt.match(r.stdout, new RegExp(`^${2000 + k} bytes in 1 allocations from stack$`, 'm'), `child ${k}: ${2000 + k} bytes`);
  tt.match(r.stdout, /^3000 bytes in 1 allocations from stack$/m, 'the parent\'s 3000 bytes');
  const st = reports(j.stdout).at(-1)?.stacks ?? [];
  const pids = new Set(st.filter((s) => s.bytes >= 2000 && s.bytes <= 2001).map((s) => s.pid));
  tt.equal(pids.size, 2, 'the two children: two pids');

  const es = reports(e.stdout).at(-1)?.stacks ?? [];
  tt.notOk(es.some((s) => s.bytes === 5000), 'before_exec\'s 5000 bytes: gone with the old image');
  tt.equal(es.filter((s) => s.bytes === 6000).length, 1, 'early_site: the new image\'s only');
  tt.ok(es.some((s) => s.bytes === 1000 && names(s).includes('site_00')), 'the new image\'s site_00');
});

bpfTest('dwunw memleak --json 1 | head -1: exits when head does, the command and probes gone', async (tt) => {
  const sh = start('/bin/sh', ['-c', `'${process.execPath}' '${dwunwBin}' memleak --json 1 -- '${prog}' sleep 60000 | head -1; echo done`]);
  const r = await sh.done; // the 60 s of the command are never waited for (the timeout kills at 90 s)
  tt.equal(r.signal, null, 'the pipeline ended by itself');
  tt.match(r.stdout, /^\{"time":.*\ndone\n$/, 'head printed one report');
  tt.ok(await until(() => !spawnSync('pgrep', ['-f', `${prog} sleep 60000`]).stdout.length, 60_000), 'the command is gone');
});

bpfTest('SIGTERM: a last report, then exit 0', async (tt) => {
  const m = dwunw(['memleak', '--json', '-o', '0', '600', '--', prog, 'sites', '2', '60000']);
  let out = '';
  m.child.stderr!.on('data', (d: Buffer) => (out += String(d)));
  tt.ok(await until(() => /Attaching to pid/.test(out), 60_000), 'attached');
  // the program leaked at its sites and sleeps: what the last report must show has happened (-o 0:
  // every outstanding block, however young, so the moment of the signal does not matter)
  const cmd = (): number => Number(spawnSync('pgrep', ['-n', '-f', `^${prog} sites 2 60000`], { encoding: 'utf8' }).stdout.trim() || 0);
  await waitFor(() => cmd() > 0 && inSleep(cmd(), 'cli_tree'), 60_000, 'cli_tree sites to sleep after its leaks');
  m.child.kill('SIGTERM');
  const r = await m.done;
  tt.equal(r.status, 0, 'exit 0');
  const st = reports(r.stdout).at(-1)?.stacks ?? [];
  tt.ok(st.some((s) => names(s).includes('site_01')), 'the last report has the program\'s stacks');
});

bpfTest('kill -9 of dwunw memleak: the tracer, the command and the probes gone', async (tt) => {
  const m = dwunw(['memleak', '600', '--', prog, 'sleep', '60000']);
  let out = '';
  m.child.stdout!.on('data', (d: Buffer) => (out += String(d)));
  tt.ok(await until(() => /Attaching to pid/.test(out), 60_000), 'attached');
  const node = m.child.pid!;
  const tracer = childrenOf(node).find((p) => commOf(p) === 'memleak');
  if (!tracer) return void tt.fail('no memleak under dwunw');
  // The command execs once the probes are attached: on a loaded machine that can come after
  // the "Attaching" line, so wait for its new name rather than look once.
  let target: number | undefined;
  await until(() => (target = childrenOf(tracer).find((p) => commOf(p) === 'cli_tree')) !== undefined, 60_000);
  const held = bpfHolds(tracer);
  // one link per probe (>= 20 links, a perf_event fd each) or two multi-uprobe links beside
  // the tracepoints' (kernels with uprobe_multi): either way, links to be gone after the kill
  tt.ok(held.links.length >= 20 || (held.links.length >= 4 && held.perfEvents === 0),
    `the tracer holds ${held.links.length} links, ${held.perfEvents} perf_event fds`);
  process.kill(node, 'SIGKILL');
  await m.done;
  tt.ok(await until(() => !alive(tracer), 60_000), 'the tracer died with dwunw (PR_SET_PDEATHSIG)');
  tt.ok(target !== undefined && (await until(() => !alive(target), 60_000)), 'the command too');
  const before = bpftoolLinks();
  if (!before) return requireOrSkip(tt, 'the links gone from bpftool link', 'bpftool link show failed (scripts/ensure-deps installs bpftool)');
  tt.ok(
    await until(() => {
      const now = bpftoolLinks();
      return now !== null && held.links.every((id) => !now.has(id));
    }, 30_000),
    'none of its links is left in bpftool link',
  );
});

bpfTest('a parent that died before PR_SET_PDEATHSIG was set: the tracer exits at once', async (tt) => {
  // DWUNW_PARENT_PID names the parent dwunw recorded; another one means that parent is gone
  const r = await start(memleakBin, ['--', prog, 'sleep', '100'], { DWUNW_PARENT_PID: '1' }).done;
  tt.equal(r.status, 1, 'exit 1');
  tt.same(lines(r.stderr), ['memleak: parent process 1 is gone'], 'one line');
});
