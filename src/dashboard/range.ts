/**
 * The date range of a dashboard page: `?from=YYYY-MM-DD&to=YYYY-MM-DD` (UTC days, both
 * included), so a page with its filter is a link. Without them, the last 30 days that end on the
 * warehouse's latest export day (or yesterday, UTC, when it has none).
 */
import type { DataExtent, DayRange } from './queries.ts';

export type { DayRange } from './queries.ts';

export const DEFAULT_SPAN_DAYS = 30;

const DAY = /^\d{4}-\d{2}-\d{2}$/;

export function shiftDay(day: string, n: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);
}

/** A real calendar day in the form YYYY-MM-DD (2026-02-30 is not one). */
export function isDay(s: string): boolean {
  return DAY.test(s) && !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) && shiftDay(s, 0) === s;
}

export type RangeResult = { ok: true; range: DayRange; explicit: boolean } | { ok: false; error: string };

/**
 * The range a request asks for. One bound alone is completed with the default span; a bad value
 * is an error that says which and why (the page shows it), never silently replaced.
 */
export function resolveRange(
  params: URLSearchParams,
  extent: DataExtent | null,
  now = new Date(),
): RangeResult {
  const from = params.get('from')?.trim() || undefined;
  const to = params.get('to')?.trim() || undefined;
  for (const [name, v] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (v !== undefined && !isDay(v)) {
      return { ok: false, error: `${name}=${JSON.stringify(v)} is not a day in the form YYYY-MM-DD` };
    }
  }
  const yesterday = shiftDay(now.toISOString().slice(0, 10), -1);
  const end = to ?? (from ? shiftDay(from, DEFAULT_SPAN_DAYS - 1) : (extent?.lastDay ?? yesterday));
  const start = from ?? shiftDay(end, -(DEFAULT_SPAN_DAYS - 1));
  if (start > end) return { ok: false, error: `from (${start}) is after to (${end})` };
  return { ok: true, range: { from: start, to: end }, explicit: from !== undefined || to !== undefined };
}

/** Presets shown beside the form: the last N days up to the latest export day, and all of it. */
export function presets(extent: DataExtent | null, now = new Date()): { label: string; range: DayRange }[] {
  const end = extent?.lastDay ?? shiftDay(now.toISOString().slice(0, 10), -1);
  const out = [7, 30, 90].map((n) => ({
    label: `last ${n} days`,
    range: { from: shiftDay(end, -(n - 1)), to: end },
  }));
  if (extent?.firstDay && extent.lastDay)
    out.push({ label: 'all', range: { from: extent.firstDay, to: extent.lastDay } });
  return out;
}
