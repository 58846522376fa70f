// The koffi declarations of lib/native.ts must match native/include/dwunw.h: every struct's size
// and alignment, every member's offset and size (from a C program compiled now with gcc and
// offsetof), and the member list itself (from the header's text). A header change that forgets
// the binding fails here.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import t from 'tap';
import { NESTED, STRUCTS } from '../lib/native.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const header = join(root, 'native', 'include', 'dwunw.h');

type Members = Record<string, { name: string; type: koffi.IKoffiCType; offset: number }>;
const members = (type: koffi.IKoffiCType): Members => koffi.introspect(type).members ?? {};

// ---- The C side -----------------------------------------------------------------------------

function cProgram(): string {
  const lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "dwunw.h"', 'int main(void) {'];
  for (const [name, type] of Object.entries(STRUCTS)) {
    lines.push(`  printf("S ${name} %zu %zu\\n", sizeof(struct ${name}), _Alignof(struct ${name}));`);
    for (const m of Object.keys(members(type)))
      lines.push(
        `  printf("M ${name} ${m} %zu %zu\\n", offsetof(struct ${name}, ${m}), sizeof(((struct ${name} *)0)->${m}));`,
      );
  }
  for (const [path, type] of Object.entries(NESTED)) {
    const [outer, ...rest] = path.split('.');
    const member = rest.join('.');
    const elem = `((struct ${outer} *)0)->${member}`;
    lines.push(`  printf("S ${path} %zu %zu\\n", sizeof(${elem}), _Alignof(__typeof__(${elem})));`);
    for (const m of Object.keys(members(type)))
      lines.push(
        `  printf("M ${path} ${m} %zu %zu\\n", offsetof(struct ${outer}, ${member}.${m}) - offsetof(struct ${outer}, ${member}), sizeof(${elem}.${m}));`,
      );
  }
  lines.push('  return 0;', '}');
  return lines.join('\n') + '\n';
}

interface CLayout {
  size: Map<string, [number, number]>;
  member: Map<string, [number, number]>;
}

function cLayout(dir: string): CLayout {
  const src = join(dir, 'layout.c');
  const exe = join(dir, 'layout');
  writeFileSync(src, cProgram());
  execFileSync('gcc', ['-std=gnu11', '-Wall', '-Werror', '-I', join(root, 'native', 'include'), '-o', exe, src], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: CLayout = { size: new Map(), member: new Map() };
  for (const line of execFileSync(exe, { encoding: 'utf8' }).trim().split('\n')) {
    const f = line.split(' ');
    if (f[0] === 'S') out.size.set(f[1]!, [Number(f[2]), Number(f[3])]);
    else out.member.set(`${f[1]}.${f[2]}`, [Number(f[3]), Number(f[4])]);
  }
  return out;
}

// ---- The header's member lists ----------------------------------------------------------------

/** Member names of `struct name { ... };` in the header, in order (nested structs as one member). */
function headerMembers(text: string, name: string): string[] | null {
  const src = text.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
  const m = new RegExp(`struct\\s+${name}\\s*\\{`).exec(src);
  if (!m) return null;
  let depth = 1;
  let i = m.index + m[0].length;
  const start = i;
  for (; i < src.length && depth > 0; i++) {
    if (src[i] === '{') depth++;
    else if (src[i] === '}') depth--;
  }
  const body = src.slice(start, i - 1);
  const decls: string[] = [];
  let cur = '';
  let braces = 0;
  let parens = 0;
  for (const ch of body) {
    if (ch === '{') braces++;
    else if (ch === '}') braces--;
    else if (ch === '(') parens++;
    else if (ch === ')') parens--;
    if (ch === ';' && braces === 0 && parens === 0) {
      decls.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  return decls
    .filter((d) => d.length > 0)
    .map((d) => {
      const fp = /\(\s*\*\s*(\w+)\s*\)/.exec(d);
      if (fp) return fp[1]!;
      const plain = /(\w+)\s*(\[[^\]]*\]\s*)*$/.exec(d);
      return plain ? plain[1]! : d;
    });
}

// ---- Tests --------------------------------------------------------------------------------------

t.test('koffi layouts match the C header', async (t) => {
  const dir = t.testdir({});
  let c: CLayout;
  try {
    c = cLayout(dir);
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    t.fail(`the layout program does not build: a member of the binding is missing from dwunw.h\n${err.stderr?.toString() ?? err.message}`);
    return;
  }
  const all: [string, koffi.IKoffiCType][] = [...Object.entries(STRUCTS), ...Object.entries(NESTED)];
  for (const [name, type] of all) {
    const want = c.size.get(name);
    t.ok(want, `${name}: measured by the C program`);
    if (!want) continue;
    t.equal(koffi.sizeof(type), want[0], `sizeof(${name})`);
    t.equal(koffi.alignof(type), want[1], `alignof(${name})`);
    for (const [m, info] of Object.entries(members(type))) {
      const cm = c.member.get(`${name}.${m}`);
      t.same([info.offset, koffi.sizeof(info.type)], cm, `${name}.${m}: offset and size`);
    }
  }
});

t.test('koffi member lists match the header text', async (t) => {
  const text = readFileSync(header, 'utf8');
  for (const [name, type] of Object.entries(STRUCTS)) {
    const want = headerMembers(text, name);
    t.ok(want, `struct ${name} is in dwunw.h`);
    if (want) t.same(Object.keys(members(type)), want, `struct ${name}: the same members in the same order`);
  }
});
