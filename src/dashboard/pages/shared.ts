/**
 * What the dashboard's pages share: the shape of a page (its sections and how it renders them),
 * the data a page is rendered from (what the JSON endpoint returns as well), and the helpers the
 * pages' charts, error panels and empty-range notice are built with.
 */

import type * as Q from '../../warehouse/read/index.ts';
import { errorPanel, esc, notice } from '../html.ts';
import { type DayRange, shiftDay } from '../range.ts';

export type PageName = 'usage' | 'users' | 'threads' | 'citations' | 'health';

export type SectionResult = { ok: true; data: unknown } | { ok: false; error: string };

export interface PageData {
  page: PageName;
  range: DayRange;
  /**
   * The part of the range the ranged queries read: the range cut to the days that can hold data
   * (range.ts `clampToData`); the range itself on the health page.
   */
  dataRange: DayRange;
  /** Where the ranged figures were read: the rollups, or the raw tables while a refresh is due. */
  source: Q.Source;
  extent: Q.DataExtent | null;
  sections: Record<string, SectionResult>;
}

/** Drawn by static/dashboard.js with uPlot: one x value per day, one array per series. */
export interface ChartSpec {
  days: string[];
  series: { label: string; values: (number | null)[] }[];
  bars?: boolean;
  /** Days of the chart that are partial (the open day so far): drawn hatched and labelled. */
  partial?: string[];
}

export type SectionQuery = (q: Q.Queryable, r: DayRange, source: Q.Source) => Promise<unknown>;

export interface PageDef {
  name: PageName;
  title: string;
  /** One sentence under the title: what the page answers. */
  about: string;
  /** Whether the date range filters the page (sync health shows the state now). */
  ranged: boolean;
  sections: Record<string, SectionQuery>;
  render(d: PageData): { html: string; charts: Record<string, ChartSpec> };
}

/**
 * The x values of a chart over the whole range: every day of the data's part of it, so that a day
 * without rows shows as 0, not as a gap closed up; and the empty stretches outside it as their two
 * ends only (the range's end and the day next to the data), which draw the same flat line. So a
 * chart of 0001-01-01 … 9999-12-31 holds as many points as the data has days, plus four.
 */
export function daysOf(d: PageData): string[] {
  const { range, dataRange: inner } = d;
  const out: string[] = [];
  if (range.from < inner.from) {
    out.push(range.from);
    const before = shiftDay(inner.from, -1);
    if (before > range.from) out.push(before);
  }
  for (let day = inner.from; day <= inner.to; day = shiftDay(day, 1)) out.push(day);
  if (inner.to < range.to) {
    const after = shiftDay(inner.to, 1);
    if (after < range.to) out.push(after);
    out.push(range.to);
  }
  return out;
}

export function byDay<T extends { day: string }>(
  d: PageData,
  rows: T[],
  pick: (row: T) => number | null,
  gap: number | null,
) {
  const m = new Map(rows.map((x) => [x.day, pick(x)]));
  return daysOf(d).map((day) => (m.has(day) ? (m.get(day) ?? null) : gap));
}

/**
 * The range's partial days (the open UTC day, pulled intraday: its figures grow until it closes),
 * from the page's `partial` section: the charts hatch them and a note under them says so, so that
 * today's point is not read as a day that fell.
 */
export function partialDays(d: PageData): string[] {
  const s = d.sections.partial;
  return s?.ok ? (s.data as string[]) : [];
}

export function partialNote(days: string[]): string {
  if (days.length === 0) return '';
  return `<p class="help partial-note" data-partial-days="${esc(days.join(' '))}">${days.map(esc).join(', ')}: today so far (partial). The open UTC day is pulled during the day; its figures grow until it closes.</p>`;
}

/** The section's rows, or an error panel in the HTML (and undefined). */
export function get<T>(d: PageData, key: string, out: string[]): T | undefined {
  const s = d.sections[key];
  if (!s) return undefined;
  if (!s.ok) {
    out.push(errorPanel(key, s.error));
    return undefined;
  }
  return s.data as T;
}

export function emptyRange(d: PageData, totals: Q.UsageTotals | undefined): string {
  if (!totals || totals.messages > 0) return '';
  const e = d.extent;
  const span =
    e?.firstDay && e.lastDay
      ? ` Its live rows span ${esc(e.firstDay)} to ${esc(e.lastDay)}: <a href="?from=${esc(e.firstDay)}&amp;to=${esc(e.lastDay)}">show all of them</a>.`
      : ' It has no live export rows at all yet: run a sync (crs-sync sync, or crs-sync demo) first.';
  return notice(
    'empty',
    'no-rows',
    `The warehouse has no rows between ${esc(d.range.from)} and ${esc(d.range.to)}.${span}`,
  );
}
