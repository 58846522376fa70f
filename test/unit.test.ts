// Runs every C unit test binary of build/test/ (built by `make unit` from test/unit/*.c); each one
// prints TAP (test/unit/tap.h), which becomes a subtest here. $DWUNW_BUILD overrides build/.
import { existsSync, readdirSync, statSync, accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { buildDir as build, root } from './helpers.js';

const dir = join(build, 'test');

const isExecutableFile = (p: string): boolean => {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

const sources = existsSync(join(root, 'test', 'unit'))
  ? readdirSync(join(root, 'test', 'unit'))
      .filter((f) => f.endsWith('.c'))
      .map((f) => f.slice(0, -2))
  : [];
const bins = existsSync(dir)
  ? readdirSync(dir)
      .filter((f) => isExecutableFile(join(dir, f)))
      .sort()
  : [];

t.test('every unit test source has a binary', async (t) => {
  for (const s of sources) t.ok(bins.includes(s), `build/test/${s} (from test/unit/${s}.c)`);
});

if (bins.length === 0) t.comment(`no unit test binaries in ${dir}`);
for (const b of bins) t.spawn(join(dir, b), [], { cwd: root }, `unit: ${b}`);
