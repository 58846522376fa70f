// The library's warnings on stderr, with the missing-module ones gathered: a sysroot that lacks
// every file would otherwise print one line per module and thread. Each missing module is named
// once, in the library's own words (proc.c writes the line from dwunw.h's DWUNW_WARN_NO_MODULE_*
// parts; it is only recognised here); past a few, one summary line names the count and the first ones.
import { DWUNW_WARN_NO_MODULE_MID as MID, DWUNW_WARN_NO_MODULE_POST as POST, DWUNW_WARN_NO_MODULE_PRE as PRE } from './native-consts.js';

const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const MISSING = new RegExp(`^${esc(PRE)}(.*)${esc(MID)}.*${esc(POST)}$`);
const SHOWN = 4;

export class Warnings {
  /** path -> the library's line about it */
  private readonly missing = new Map<string, string>();

  constructor(private readonly out: NodeJS.WritableStream = process.stderr) {}

  /** The library's warn callback. */
  readonly warn = (line: string): void => {
    const m = MISSING.exec(line);
    if (m) {
      if (!this.missing.has(m[1])) this.missing.set(m[1], line);
      return;
    }
    this.out.write(`${line}\n`);
  };

  /** Module files that could not be loaded, in the order first met. */
  missingModules(): string[] {
    return [...this.missing.keys()];
  }

  /** Print what was gathered (once, at the end). `where` names the sysroot when there is one. */
  flush(where?: string): void {
    const paths = this.missingModules();
    const under = where ? ` under ${where}` : '';
    if (paths.length > SHOWN) {
      const first = paths.slice(0, SHOWN).join(', ');
      this.out.write(
        `dwunw: ${paths.length} module files could not be loaded${under} (${first}, ...): frames in them cannot be unwound\n`,
      );
    } else {
      for (const line of this.missing.values()) this.out.write(`${line}\n`);
    }
    this.missing.clear();
  }
}
