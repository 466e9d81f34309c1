import { dayRange, shiftDay, utcDay } from '../common/civil-date.ts';
import { earliestIncompleteDay, getWatermark } from './ledger.ts';
import type { Executor } from './types.ts';

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
