/**
 * Small HTML helpers of the dashboard's server-rendered pages: escaping, number and time forms,
 * tables, figures and panels. Every value reaches the page through `esc`, so text from the
 * warehouse (quarantined lines, error messages, thread names) is shown, never interpreted.
 */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** A count as people read it: 1,234,567 (tests strip the commas to compare with SQL). */
export function int(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : Math.round(n).toLocaleString('en-US');
}

/** A mean or a median: one decimal, as the `daily_usage` view rounds its mean. */
export function dec(n: number | null | undefined): string {
  return n === null || n === undefined
    ? '–'
    : n.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
}

/** An instant (ISO text) as 'YYYY-MM-DD HH:MM' UTC. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  return Number.isNaN(t) ? esc(iso) : new Date(t).toISOString().slice(0, 16).replace('T', ' ');
}

export interface Column<T> {
  /** Header text. */
  title: string;
  /** data-col of the cells: what tests look for. */
  key: string;
  /** The cell's HTML (already escaped). */
  cell(row: T): string;
  numeric?: boolean;
}

/** A table with a `data-table` name; `empty` is shown instead when there is no row. */
export function table<T>(name: string, columns: Column<T>[], rows: T[], empty: string): string {
  if (rows.length === 0) return `<p class="empty" data-empty="${esc(name)}">${esc(empty)}</p>`;
  const head = columns.map((c) => `<th${c.numeric ? ' class="num"' : ''}>${esc(c.title)}</th>`).join('');
  const body = rows
    .map(
      (r) =>
        `<tr>${columns
          .map((c) => `<td data-col="${esc(c.key)}"${c.numeric ? ' class="num"' : ''}>${c.cell(r)}</td>`)
          .join('')}</tr>`,
    )
    .join('\n');
  return `<div class="table-wrap"><table data-table="${esc(name)}"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table></div>`;
}

/** One headline number (`data-figure` names it for tests). */
export function figure(name: string, label: string, value: string, note = ''): string {
  return `<div class="figure" data-figure="${esc(name)}"><span class="label">${esc(label)}</span><span class="value">${value}</span>${
    note ? `<span class="note">${esc(note)}</span>` : ''
  }</div>`;
}

/** What went wrong, where the section would have been. */
export function errorPanel(section: string, message: string): string {
  return `<div class="panel error-panel" role="alert" data-error="${esc(section)}"><strong>Could not show this part.</strong> ${esc(message)}</div>`;
}

export function notice(kind: 'empty' | 'info', name: string, html: string): string {
  return `<div class="panel ${kind}-panel" data-notice="${esc(name)}">${html}</div>`;
}

export function section(title: string, body: string, help = ''): string {
  return `<section><h2>${esc(title)}</h2>${help ? `<p class="help">${esc(help)}</p>` : ''}${body}</section>`;
}

/** A chart's place; the client script draws it from the page's chart data (see static/dashboard.js). */
export function chartBox(name: string, title: string): string {
  return `<figure class="chart-box"><figcaption>${esc(title)}</figcaption><div class="chart" data-chart="${esc(name)}"></div></figure>`;
}
