// profile's samples as one self-contained interactive flame graph (zoom on click, search,
// tooltips), built on d3-flame-graph and d3 from npm, both inlined so the file opens offline
// from file://. Frames from the kernel are drawn in orange, pseudo-frames ([stack lost: ...],
// [unwind stopped: ...]) in grey, user frames in the library's default palette.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './root.js';
import type { PrEntry, PrSummary } from './profile.js';
import { rootFirst } from './profile.js';

interface Node {
  name: string;
  value: number;
  children: Node[];
  /** k: kernel frame, p: pseudo-frame */
  t?: 'k' | 'p';
}

/** The tree d3-flame-graph draws: all -> comm -> user root..leaf -> kernel root..leaf. */
export function flameTree(entries: PrEntry[]): Node {
  const root: Node = { name: 'all', value: 0, children: [] };
  for (const e of entries) {
    const { names, kernelFrom } = rootFirst(e);
    let n = root;
    n.value += e.count;
    names.forEach((name, i) => {
      let c = n.children.find((x) => x.name === name);
      if (!c) {
        c = { name, value: 0, children: [] };
        if (/^\[(stack lost|unwind stopped|unwind failed|stack table full|aggregation table full)/.test(name)) c.t = 'p';
        else if (i >= kernelFrom) c.t = 'k';
        n.children.push(c);
      }
      c.value += e.count;
      n = c;
    });
  }
  return root;
}

function asset(pkg: string, file: string): string {
  const dir = join(packageRoot(), 'node_modules', pkg);
  // inside <script>, a closing tag in the library text would end the element
  return readFileSync(join(dir, file), 'utf8').replace(/<\/(script)/gi, '<\\/$1');
}

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function flameHtml(entries: PrEntry[], summary: PrSummary | null, title = 'dwunw profile'): string {
  const tree = JSON.stringify(flameTree(entries)).replace(/</g, '\\u003c');
  const pct = summary && summary.user_samples ? ((100 * summary.user_complete) / summary.user_samples).toFixed(1) : null;
  const w = summary?.wall;
  const what = w
    ? `${((w.on_cpu_us + w.off_cpu_us) / 1000).toFixed(1)} ms wall: ${((100 * w.on_cpu_us) / Math.max(1, w.on_cpu_us + w.off_cpu_us)).toFixed(1)}% on CPU, off CPU under [off-CPU]`
    : summary?.unit === 'microseconds' ? `${(summary.samples / 1000).toFixed(1)} ms off CPU` : `${summary?.samples} samples`;
  const info = summary
    ? `${what}, ${summary.event}, ${summary.unwind} unwinding` + (pct !== null ? `, ${pct}% of user stacks complete` : '')
    : '';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: Verdana, sans-serif; margin: 12px; }
header { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; }
#details { min-height: 1.4em; font-size: 12px; color: #444; margin: 6px 0; }
.d3-flame-graph-tip { background: #fffbe6; border: 1px solid #aaa; padding: 4px 6px; font-size: 12px; }
</style>
<script>${asset('d3', 'dist/d3.min.js')}</script>
<script>${asset('d3-flame-graph', 'dist/d3-flamegraph.umd.min.js')}</script>
</head>
<body>
<header>
<strong>${escapeHtml(title)}</strong><span>${escapeHtml(info)}</span>
<form id="search"><input id="term" type="search" placeholder="search"> <button type="submit">Search</button>
<button type="button" id="reset">Reset zoom</button></form>
</header>
<div id="chart"></div>
<div id="details"></div>
<script>
const data = ${tree};
const fg = flamegraph.default;
const width = Math.max(600, document.documentElement.clientWidth - 40);
const chart = fg().width(width).cellHeight(18).minFrameSize(1).transitionDuration(300)
  .setDetailsElement(document.getElementById('details'))
  .tooltip(flamegraph.tooltip.defaultFlamegraphTooltip().text((d) =>
    d.data.name + ': ' + d.value + ' samples (' + (100 * d.value / data.value).toFixed(2) + '%)'))
  .setColorMapper((d, original) => d.data.t === 'k' ? '#f0a040' : d.data.t === 'p' ? '#b0b0b0' : original);
d3.select('#chart').datum(data).call(chart);
document.getElementById('search').addEventListener('submit', (ev) => {
  ev.preventDefault();
  chart.search(document.getElementById('term').value);
});
document.getElementById('reset').addEventListener('click', () => chart.resetZoom());
</script>
</body>
</html>
`;
}
