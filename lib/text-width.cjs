// The columns a string takes in a terminal, for yargs' help layout (cliui, wrap-ansi) and bench's
// table (cli-table3): the bundle (make ts) uses this file in place of the string-width package,
// whose start (two Intl.Segmenter instances and Unicode-set regexps built at import) cost more
// than the rest of `dwunw --help`. Enough for the CLI's text: ANSI escapes take no column,
// controls and combining marks none, East Asian wide characters and emoji two.
// CommonJS, so that both `import stringWidth from 'string-width'` and require() get the function.
'use strict';

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;

const WIDE = [
  [0x1100, 0x115f], [0x2e80, 0x303e], [0x3041, 0x33ff], [0x3400, 0x4dbf], [0x4e00, 0x9fff],
  [0xa000, 0xa4cf], [0xac00, 0xd7a3], [0xf900, 0xfaff], [0xfe30, 0xfe4f], [0xff00, 0xff60],
  [0xffe0, 0xffe6], [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0x20000, 0x3fffd],
];

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function columns(cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0;
  if ((cp >= 0x300 && cp <= 0x36f) || cp === 0x200b || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0;
  for (let i = 0; i < WIDE.length; i++) if (cp >= WIDE[i][0] && cp <= WIDE[i][1]) return 2;
  return 1;
}

function stringWidth(s) {
  if (typeof s !== 'string' || s.length === 0) return 0;
  if (s.includes('\x1b')) s = s.replace(ANSI, '');
  // nearly all of the CLI's text: one column a character
  if (PRINTABLE_ASCII.test(s)) return s.length;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const cp = s.codePointAt(i);
    if (cp > 0xffff) i++;
    n += columns(cp);
  }
  return n;
}

module.exports = stringWidth;
module.exports.default = stringWidth;
