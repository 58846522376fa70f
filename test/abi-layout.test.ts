// The koffi declarations of lib/native.ts must match native/include/dwunw.h: every struct's size
// and alignment, every member's offset and size (from a C program compiled now with gcc and
// offsetof), and the member list itself (from the header's text). A header change that forgets
// the binding fails here. Also: every DWUNW_* constant the binding exports has the header's value,
// and the log sinks bound as callbacks (dwunw_config, dwunw_stack_reader: audit, warn) have the
// prototype the binding declares.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import koffi from 'koffi';
import t from 'tap';
import * as N from '../lib/native.js';
import { NESTED, STRUCTS } from '../lib/native.js';
import { root } from './helpers.js';

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

// ---- Constants and callback prototypes -------------------------------------------------------------

/** The binding's DWUNW_* numeric constants. */
const constants = (): [string, number][] =>
  Object.entries(N).filter((e): e is [string, number] => e[0].startsWith('DWUNW_') && typeof e[1] === 'number');

/** The binding's DWUNW_* string constants (the parts of the library's warn lines). */
const strings = (): [string, string][] =>
  Object.entries(N).filter((e): e is [string, string] => e[0].startsWith('DWUNW_') && typeof e[1] === 'string');

/** Members bound as `void (*)(void *arg, const char *line)` (LogFnP), as struct.member. */
const LOG_SINKS = ['dwunw_config.audit', 'dwunw_config.warn', 'dwunw_stack_reader.audit', 'dwunw_stack_reader.warn'];

function constantsProgram(): string {
  const lines = ['#include <stdio.h>', '#include "dwunw.h"', 'typedef void (*log_fn)(void *, const char *);'];
  // A member whose type differs from the prototype fails to compile.
  for (const sink of LOG_SINKS) {
    const [s, m] = sink.split('.');
    lines.push(
      `_Static_assert(__builtin_types_compatible_p(__typeof__(((struct ${s} *)0)->${m}), log_fn), "${sink} is not void (*)(void *, const char *)");`,
    );
  }
  lines.push('int main(void) {');
  for (const [name] of constants()) lines.push(`  printf("C ${name} %lld\\n", (long long)(${name}));`);
  for (const [name] of strings()) lines.push(`  printf("S ${name} [%s]\\n", ${name});`);
  lines.push('  return 0;', '}');
  return lines.join('\n') + '\n';
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

t.test('constants and callback prototypes match the header', async (t) => {
  const dir = t.testdir({});
  const src = join(dir, 'constants.c');
  const exe = join(dir, 'constants');
  writeFileSync(src, constantsProgram());
  try {
    execFileSync('gcc', ['-std=gnu11', '-Wall', '-Werror', '-I', join(root, 'native', 'include'), '-o', exe, src], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    t.fail(`the constants program does not build: a constant is missing from dwunw.h, or a log sink changed type\n${err.stderr?.toString() ?? err.message}`);
    return;
  }
  const values = new Map<string, number>();
  const texts = new Map<string, string>();
  for (const line of execFileSync(exe, { encoding: 'utf8' }).trim().split('\n')) {
    const [kind, name, v] = line.split(' ');
    if (kind === 'S') texts.set(name!, line.slice(line.indexOf('[') + 1, -1));
    else values.set(name!, Number(v));
  }
  const list = constants();
  t.ok(list.length > 40, `the binding exports DWUNW_* constants (${list.length})`);
  for (const [name, v] of list) t.equal(v, values.get(name), `${name}`);
  for (const [name, v] of strings()) t.equal(v, texts.get(name), `${name}`);

  // The JS side of the log sinks: a pointer to the one prototype, (void *, const char *) -> void.
  const proto = koffi.introspect(N.LogFnT);
  t.equal(proto.primitive, 'Prototype', 'LogFnT is a function prototype');
  for (const sink of LOG_SINKS) {
    const [s, m] = sink.split('.') as [keyof typeof STRUCTS, string];
    const type = members(STRUCTS[s])[m]?.type;
    t.ok(type, `${sink} is bound`);
    if (!type) continue;
    const info = koffi.introspect(type);
    t.equal(info.primitive, 'Callback', `${sink}: a function pointer`);
    t.equal(info.name, `${proto.name} *`, `${sink}: a pointer to ${proto.name}`);
  }
});
