// The CLI's start: the subcommands are registered by name and only the one being run is loaded
// (the table in lib/cli.ts must say what each command module says of itself); the top level
// (--help, no command, an unknown command or option) is answered without yargs, koffi or any
// command; usage errors are one line pointing to --help, exit status 2.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { commandTable } from '../lib/cli.js';
import { classify, suggest, wrap } from '../lib/cli-top.js';
import { dwunwBin as bin, root, runSync } from './helpers.js';

const work = mkdtempSync(join(tmpdir(), 'dwunw-cli-start-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

// A module hook that records every module node resolves (ESM imports, the bundle's chunks, koffi).
const hook = join(work, 'hook.mjs');
const resolved = join(work, 'resolved.txt');
writeFileSync(join(work, 'hooks.mjs'), `import { appendFileSync } from 'node:fs';
export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  appendFileSync(${JSON.stringify(resolved)}, r.url + '\\n');
  return r;
}
`);
writeFileSync(hook, `import { register } from 'node:module';
register(${JSON.stringify(`file://${join(work, 'hooks.mjs')}`)});
`);

function dwunw(args: string[], traced = false) {
  rmSync(resolved, { force: true });
  const r = runSync(process.execPath, [...(traced ? ['--import', hook] : []), bin, ...args], { timeoutMs: 60_000 });
  let urls: string[] = [];
  try {
    urls = readFileSync(resolved, 'utf8').split('\n').filter(Boolean);
  } catch {
    // nothing resolved
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, urls };
}

t.test('command table matches the command modules', async (t) => {
  for (const c of commandTable) {
    const m = (await import(`../commands/${c.file}.js`)) as { command: string; describe: string };
    t.equal(c.command, m.command, `${c.file}: command`);
    t.equal(c.describe, m.describe, `${c.file}: describe`);
    t.equal(await c.load(), m, `${c.file}: load() imports the module`);
  }
});

t.test('top level: what the arguments ask for', async (t) => {
  const k = (argv: string[]) => classify(argv, commandTable);
  t.same(k(['--help']), { kind: 'help' });
  t.same(k(['help']), { kind: 'help' });
  t.same(k(['-V']), { kind: 'version' });
  t.same(k(['dump-table', 'x', '--version']), { kind: 'version' }, '--version anywhere before --');
  t.equal(k(['memleak', '--', 'prog', '--version']).kind, 'command', '--version after -- is the program\'s');
  t.equal(k(['dump-table', '--help']).kind, 'command', 'a command\'s --help is the command\'s');
  t.same(k([]), { kind: 'usage', message: 'no command given' });
  t.same(k(['--frob']), { kind: 'usage', message: 'unknown option --frob' });
  t.same(k(['--frob=1', 'x']), { kind: 'usage', message: 'unknown option --frob' });
  t.same(k(['frob']), { kind: 'usage', message: 'unknown command frob' });
  t.same(k(['dump-tabel', 'x']), { kind: 'usage', message: 'unknown command dump-tabel; did you mean dump-table?' });
  t.equal(suggest('unwindpid', ['unwind-pid', 'unwind-core']), 'unwind-pid');
  t.equal(suggest('zzz', ['bench', 'verify']), undefined, 'nothing close: no guess');
  t.same(wrap('a bb ccc dddd', 6), ['a bb', 'ccc', 'dddd']);
});

t.test('bin/dwunw --help loads neither yargs, koffi nor a command', async (t) => {
  const r = dwunw(['--help'], true);
  t.equal(r.status, 0);
  for (const c of commandTable) t.ok(r.stdout.includes(`dwunw ${c.command}`), `lists ${c.command}`);
  t.match(r.stdout, /-V, --version/);
  t.ok(r.urls.some((u) => u.endsWith('/dist/cli/cli.js')), 'the hook saw the bundle', { urls: r.urls });
  t.same(r.urls.filter((u) => /yargs|koffi|chalk|cli-table3|\/commands\/|dump-table|unwind-/.test(u)), [], 'nothing else loaded');
});

t.test('a command\'s --help and usage errors: yargs and that command, not koffi', async (t) => {
  for (const cmd of ['dump-table', 'unwind-pid', 'unwind-snapshot', 'unwind-core']) {
    const r = dwunw([cmd, '--help'], true);
    t.equal(r.status, 0, `${cmd} --help: exit 0`);
    t.match(r.stdout, new RegExp(`^dwunw ${cmd} <`), `${cmd} --help: its usage`);
    t.ok(r.urls.some((u) => new RegExp(`/dist/cli/${cmd}-[^/]+\\.js$`).test(u)), `${cmd}: its chunk`);
    t.same(r.urls.filter((u) => /\/dist\/cli\/(bench|verify|memleak|profile|unwind-|dump-table)/.test(u) && !u.includes(`/${cmd}-`)), [], `${cmd}: no other command`);
    t.same(r.urls.filter((u) => /koffi/.test(u)), [], `${cmd} --help: koffi not loaded`);
    const u = dwunw([cmd, '--frob'], true);
    t.equal(u.status, 2, `${cmd} --frob: exit 2`);
    t.same(u.urls.filter((x) => /koffi/.test(x)), [], `${cmd} --frob: koffi not loaded`);
  }
  const run = dwunw(['dump-table', '/bin/true', '--pc', '0'], true);
  t.ok(run.urls.some((x) => /koffi/.test(x)), 'dump-table FILE: koffi loaded (the library is called)');
});

t.test('usage errors: one line, a pointer to --help, exit status 2', async (t) => {
  const cases: [string[], RegExp][] = [
    [[], /^dwunw: usage: no command given \(see dwunw --help\)\n$/],
    [['frob'], /^dwunw: usage: unknown command frob \(see dwunw --help\)\n$/],
    [['--frob'], /^dwunw: usage: unknown option --frob \(see dwunw --help\)\n$/],
    [['dump-tabel', 'x'], /^dwunw: usage: unknown command dump-tabel; did you mean dump-table\? \(see dwunw --help\)\n$/],
    [['dump-table'], /^dwunw: usage: .+ \(see dwunw dump-table --help\)\n$/],
    [['dump-table', '/bin/true', '--frob'], /^dwunw: usage: Unknown argument: frob \(see dwunw dump-table --help\)\n$/],
    [['unwind-pid'], /^dwunw: usage: .+ \(see dwunw unwind-pid --help\)\n$/],
  ];
  for (const [args, re] of cases) {
    const r = dwunw(args);
    t.equal(r.status, 2, `${args.join(' ') || '(none)'}: exit 2`);
    t.match(r.stderr, re, `${args.join(' ') || '(none)'}: ${r.stderr.trim()}`);
    t.equal(r.stdout, '', 'nothing on stdout');
  }
});

t.test('the bundle missing: one line naming what to run', async (t) => {
  const copy = join(work, 'bin');
  writeFileSync(join(work, 'package.json'), '{"name":"dwunw-copy"}');
  const { mkdirSync, copyFileSync } = await import('node:fs');
  mkdirSync(copy, { recursive: true });
  copyFileSync(bin, join(copy, 'dwunw'));
  const r = spawnSync(process.execPath, [join(copy, 'dwunw'), '--help'], { encoding: 'utf8' });
  t.equal(r.status, 1);
  t.match(r.stderr, /^dwunw: dist\/cli\/cli\.js: cannot load the compiled CLI \(run make ts\): .+\n$/);
});

// The bundle's stand-in for string-width (lib/text-width.cjs) against the packages it replaces:
// the copy yargs uses (for its help layout) and the one cli-table3 uses (bench's table).
t.test('lib/text-width.cjs measures as string-width does', async (t) => {
  const { createRequire } = await import('node:module');
  const req = createRequire(import.meta.url);
  const mine = req('../lib/text-width.cjs') as (s: string) => number;
  const yargsWidth = (await import(join(root, 'node_modules/yargs/node_modules/string-width/index.js'))).default as (s: string) => number;
  const tableWidth = req('string-width') as (s: string) => number;
  const samples = [
    '', 'dwunw dump-table <file>', '  -V, --version  Show the CLI and library versions',
    '\x1b[32mlibdwunw\x1b[39m', '\x1b[1m\x1b[31mbold red\x1b[39m\x1b[22m', 'µs 24.8×', '比较 unwinder',
    'e\u0301', 'tab\there', '[boolean] [default: false]',
  ];
  for (const s of samples) {
    t.equal(mine(s), yargsWidth(s), `${JSON.stringify(s)}: as yargs' string-width`);
    t.equal(mine(s), tableWidth(s), `${JSON.stringify(s)}: as cli-table3's string-width`);
  }
});
