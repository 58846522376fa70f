// The docs describe the code as it is: every project file a doc names (in `code` spans: paths and
// file names ending .c .h .ts .md .py .mk .cjs) exists in the tree, so a file moved or removed
// cannot stay documented. Names of other projects' files (the kernel's, bcc's tools/), the spec in
// the project's shared seeds/, placeholders and build
// outputs are not files of ours and are listed below; system headers are found in /usr/include.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import t from 'tap';
import { root } from './helpers.js';

const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
const byBase = new Map<string, string[]>();
for (const f of tracked) {
  const b = basename(f);
  byBase.set(b, [...(byBase.get(b) ?? []), f]);
}

const EXTS = ['.c', '.h', '.ts', '.md', '.py', '.mk', '.cjs'];
/** Not files of this tree: the kernel's sources, generic names, placeholders, build outputs. */
const NOT_OURS = [
  /^arch\/[a-z0-9]+\/kernel\//, /^linux\//, /^tools\/[a-z]+\.py$/, /^seeds\//, /^bpf\.h$/, /^simulate-insn\.c$/, /^\.[a-z]+$/,
  /[A-Z]{3,}/, /^(prog|mytool)\.c$/, /\.skel\.h$/, /^vmlinux(_host)?\.h$/, /^build\//, /[*<>]/,
];

/** The names one `code` span stands for: `a.[ch]` and `a.{h,c}` are two. */
function names(span: string): string[] {
  const out: string[] = [];
  for (let part of span.split(/[,\s]+/)) {
    part = part.replace(/^[(]+|[)]+$/g, '').replace(/^(\.\.?\/)+/, '');
    const brace = /^(.+)\.\{([a-z,]+)\}$/.exec(part);
    const bracket = /^(.+)\.\[([a-z]+)\]$/.exec(part);
    if (brace) out.push(...brace[2].split(',').map((e) => `${brace[1]}.${e}`));
    else if (bracket) out.push(...[...bracket[2]].map((e) => `${bracket[1]}.${e}`));
    else out.push(part);
  }
  return out.filter((n) => EXTS.some((e) => n.endsWith(e)) && !n.startsWith('/') && !n.includes('://'));
}

const docs = [
  'README.md', join('bpf', 'README.md'),
  ...readdirSync(join(root, 'doc')).filter((f) => f.endsWith('.md')).map((f) => join('doc', f)),
];

for (const doc of docs) {
  t.test(doc, async (t) => {
    const text = readFileSync(join(root, doc), 'utf8');
    const missing = new Set<string>();
    let named = 0;
    for (const m of text.matchAll(/`([^`\n]+)`/g)) {
      for (const n of names(m[1])) {
        if (NOT_OURS.some((re) => re.test(n))) continue;
        named++;
        const hits = (byBase.get(basename(n)) ?? []).filter((f) => f === n || f.endsWith(`/${n}`));
        // a system header (libelf.h, zstd.h) is the system's, not ours
        if (hits.length === 0 && !(n.endsWith('.h') && existsSync(join('/usr/include', n)))) missing.add(n);
      }
    }
    t.same([...missing].sort(), [], `every file ${doc} names exists (${named} names)`);
  });
}

t.test('the check finds a file that is not there', async (t) => {
  t.same(names('`bpf/runtime/frames.[ch]`'.slice(1, -1)), ['bpf/runtime/frames.c', 'bpf/runtime/frames.h']);
  t.equal((byBase.get('no_such_file.c') ?? []).length, 0);
  t.ok(byBase.get('frames.c')?.some((f) => f.endsWith('runtime/frames.c')), 'a real file is found');
});
