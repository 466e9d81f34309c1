import { itemAt } from './checked.ts';
import { escapeControls } from './terminal-text.ts';

/**
 * A plain text table for command summaries (no colours: the output is often piped to a file).
 * Cells often hold data (a field name, an error a server sent): control characters in them are
 * shown escaped (terminal-text.ts), never written raw.
 */
export function renderTable(headers: string[], rows: (string | number)[][]): string {
  const cells = [
    headers.map(escapeControls),
    ...rows.map((r) => r.map((c) => (typeof c === 'number' ? formatNumber(c) : escapeControls(c)))),
  ];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => displayWidth(r[i] ?? ''))));
  const numeric = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  const pad = (c: string, w: number) => ' '.repeat(Math.max(0, w - displayWidth(c)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (numeric[i] ? pad(c, itemAt(widths, i)) + c : c + pad(c, itemAt(widths, i))))
      .join('  ')
      .trimEnd();
  return [
    line(itemAt(cells, 0)),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...cells.slice(1).map(line),
  ].join('\n');
}

export function formatNumber(n: number): string {
  return Number.isInteger(n)
    ? n.toLocaleString('en-US')
    : n.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

export function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${v.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

// East Asian wide and fullwidth characters (and emoji) take two terminal columns; combining marks none.
const WIDE =
  /[\u1100-\u115F\u2E80-\u303E\u3041-\u33FF\u3400-\u4DBF\u4E00-\u9FFF\uA000-\uA4CF\uAC00-\uD7A3\uF900-\uFAFF\uFE30-\uFE4F\uFF00-\uFF60\uFFE0-\uFFE6\u{1F300}-\u{1F64F}\u{1F900}-\u{1F9FF}\u{20000}-\u{3FFFD}]/u;
const COMBINING = /\p{Mn}/u;

/** Columns a string takes in a terminal (monospace), for aligning tables. */
export function displayWidth(s: string): number {
  let w = 0;
  for (const ch of s) {
    if (COMBINING.test(ch)) continue;
    w += WIDE.test(ch) ? 2 : 1;
  }
  return w;
}
