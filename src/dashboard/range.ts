/**
 * The date range of a dashboard page: `?from=YYYY-MM-DD&to=YYYY-MM-DD` (UTC days, both
 * included), so a page with its filter is a link. Without them, the last 30 days that end on the
 * warehouse's latest export day (or yesterday, UTC, when it has none).
 *
 * A range may be as wide as the calendar the warehouse stores (0001-01-01 … 9999-12-31): what a
 * page costs follows the days that hold data, not the range (`clampToData`), so a wide range is
 * no reason to refuse. What is not a range is refused with a message that says why.
 */
import { checkDay, FIRST_DAY, LAST_DAY, shiftDay, utcDay } from '../common/civil-date.ts';
import type { DataExtent, DayRange } from '../warehouse/read/index.ts';

export { FIRST_DAY, isDay, LAST_DAY, shiftDay } from '../common/civil-date.ts';
export type { DayRange } from '../warehouse/read/index.ts';

export const DEFAULT_SPAN_DAYS = 30;

/** The parameters a page takes; any other is refused, so a typo never passes for a filter. */
export const RANGE_PARAMS = ['from', 'to'] as const;

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
  for (const key of new Set(params.keys())) {
    if (!(RANGE_PARAMS as readonly string[]).includes(key)) {
      return {
        ok: false,
        error: `unknown parameter ${JSON.stringify(key)}: a page takes from and to (YYYY-MM-DD)`,
      };
    }
    if (params.getAll(key).length > 1) return { ok: false, error: `${key} is given more than once` };
  }
  const from = params.get('from')?.trim() || undefined;
  const to = params.get('to')?.trim() || undefined;
  for (const [name, v] of [
    ['from', from],
    ['to', to],
  ] as const) {
    const c = v === undefined ? undefined : checkDay(v);
    if (c !== undefined && !c.ok) {
      const why =
        c.problem === 'year'
          ? `is before ${FIRST_DAY}, the first day there is`
          : 'is not a day in the form YYYY-MM-DD';
      return { ok: false, error: `${name}=${JSON.stringify(v)} ${why}` };
    }
  }
  const span = DEFAULT_SPAN_DAYS - 1;
  if (from && !to && from > shiftDay(LAST_DAY, -span)) {
    return {
      ok: false,
      error: `from=${from} alone means the ${DEFAULT_SPAN_DAYS} days from it, which go past ${LAST_DAY}: give to as well`,
    };
  }
  if (to && !from && to < shiftDay(FIRST_DAY, span)) {
    return {
      ok: false,
      error: `to=${to} alone means the ${DEFAULT_SPAN_DAYS} days up to it, which start before ${FIRST_DAY}: give from as well`,
    };
  }
  const yesterday = shiftDay(utcDay(now), -1);
  const end = to ?? (from ? shiftDay(from, span) : (extent?.lastDay ?? yesterday));
  const start = from ?? shiftDay(end, -span);
  if (start > end) return { ok: false, error: `from (${start}) is after to (${end})` };
  return { ok: true, range: { from: start, to: end }, explicit: from !== undefined || to !== undefined };
}

/**
 * The part of `range` that can hold data: cut to `extent` (the first and last day that has any
 * row a page counts). The per-day queries run over this, so a page over 0001-01-01 … 9999-12-31
 * costs what the data's own days cost. A range without data (or a warehouse without any) becomes
 * its first day alone: no row is on it, and every query answers empty at once.
 */
export function clampToData(range: DayRange, extent: DataExtent | null): DayRange {
  const first = extent?.firstDay;
  const last = extent?.lastDay;
  if (!first || !last || range.to < first || range.from > last) return { from: range.from, to: range.from };
  return { from: laterDay(range.from, first), to: earlierDay(range.to, last) };
}

/** Of two 'YYYY-MM-DD' days (text: Math.min would make numbers of them), the earlier and the later. */
export const earlierDay = (a: string, b: string): string => [a, b].sort()[0] as string;
export const laterDay = (a: string, b: string): string => [a, b].sort()[1] as string;

/** Presets shown beside the form: the last N days up to the latest export day, and all of it. */
export function presets(extent: DataExtent | null, now = new Date()): { label: string; range: DayRange }[] {
  const end = extent?.lastDay ?? shiftDay(utcDay(now), -1);
  const out = [7, 30, 90].map((n) => ({
    label: `last ${n} days`,
    range: { from: shiftDay(end, -(n - 1)), to: end },
  }));
  if (extent?.firstDay && extent.lastDay)
    out.push({ label: 'all', range: { from: extent.firstDay, to: extent.lastDay } });
  return out;
}
