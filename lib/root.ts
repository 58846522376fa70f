// The package root, found without loading anything heavy: the CLI's start (--help, --version)
// and commands that never call the library need it too.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest directory above this file whose package.json names "dwunw" (from dist/ or a bundle too). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'dwunw') return dir;
      } catch {
        // not ours: keep looking
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the dwunw package root');
    dir = up;
  }
}

/** package.json's version, or "unknown". */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
