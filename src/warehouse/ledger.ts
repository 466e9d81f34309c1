// Subpath imports: the package root loads all of date-fns (about a second of CLI start-up).
import { addDays } from 'date-fns/addDays';
import { formatISO } from 'date-fns/formatISO';
import { parseISO } from 'date-fns/parseISO';
import { earliestIncompleteDay, getWatermark } from './days.ts';
import type { Executor } from './types.ts';

/**
 * The ledger's calendar: UTC days, and the window of days a sync plans from the ledger. The
 * ledger's rows have their own repositories: runs.ts (`sync_runs`) and days.ts (`sync_days`).
 */

// Re-exported for the tests that knew the ledger as one module before it was split; new code
// imports them from runs.ts and days.ts.
export { markDayRunning } from './days.ts';
export { startRun, touchRun } from './runs.ts';

export function utcDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

export function dayRange(from: string, to: string): string[] {
  const out: string[] = [];
  for (let d = parseISO(from); formatISO(d, { representation: 'date' }) <= to; d = addDays(d, 1)) {
    out.push(formatISO(d, { representation: 'date' }));
  }
  return out;
}

export function shiftDay(day: string, n: number): string {
  return formatISO(addDays(parseISO(day), n), { representation: 'date' });
}

/** How far back a scheduled sync looks for days whose export was not known complete. */
export const INCOMPLETE_REPULL_DAYS = 31;

export interface WindowPlan {
  from: string;
  to: string;
  days: string[];
}

/**
 * The window of a scheduled sync: from the watermark minus the lookback (late data) to yesterday
 * (UTC). With no ledger yet it is just yesterday; a caller passes explicit dates for backfills.
 */
export async function planWindow(
  db: Executor,
  opts: { lookbackDays: number; now?: Date; from?: string; to?: string },
): Promise<WindowPlan> {
  const yesterday = shiftDay(utcDay(opts.now ?? new Date()), -1);
  const to = opts.to ?? yesterday;
  let from = opts.from;
  if (!from) {
    const wm = await getWatermark(db);
    from = wm ? shiftDay(wm, -opts.lookbackDays + 1) : to;
    if (wm && shiftDay(wm, 1) < from) from = shiftDay(wm, 1);
    // A day whose last export was not known complete (an error page with status 200, a body
    // without its final newline) loaded what arrived and deleted nothing; it is pulled again by
    // every scheduled sync until a complete export of it arrives, up to a month back. The
    // watermark itself does not stop there: a day that is really empty reads the same.
    const incomplete = await earliestIncompleteDay(db, shiftDay(to, -(INCOMPLETE_REPULL_DAYS - 1)), to);
    if (incomplete !== null && incomplete < from) from = incomplete;
  }
  if (from > to) return { from, to, days: [] };
  return { from, to, days: dayRange(from, to) };
}
