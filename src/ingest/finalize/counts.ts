import type pg from 'pg';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf } from '../../common/load-target.ts';
import { committedDays, committedTotals, type Sums } from '../../warehouse/load/checkpoints.ts';

/**
 * A load's counts as its finalize reports them: sums over its committed checkpoints (never an
 * in-memory tally carried across attempts), in all and per UTC day, each day's summary then
 * filled in by the delete step (its deletes, the deletes held, why its export was not whole).
 */

/** The counts of one UTC day of a load (the day ledger's row). */
export interface DaySummary extends Omit<LoadCounts, 'linesRead' | 'bytesRead' | 'threadsQueued'> {
  day: string;
  /** Deletes the guard held for review instead of applying them. */
  deletesHeld: number;
  /** Why the day's export was not known complete (then nothing of it was deleted); null if it was. */
  incompleteReason: string | null;
}

/**
 * The load's counts summed over its committed checkpoints, and per UTC day (rejects counted on
 * their day where they have one); `exportDay`, the summary in `days` of the day a day's load
 * pulled (null for a file).
 */
export async function committedCounts(
  pool: pg.Pool,
  target: LoadTarget,
): Promise<{ t: Sums; days: Map<string, DaySummary>; exportDay: DaySummary | null }> {
  // An aggregate without group by: always one row.
  const t = (await committedTotals(pool, loadIdOf(target))) ?? { r: 0, i: 0, u: 0, n: 0, j: 0, s: 0 };
  // A line a load quarantines is counted on its day with the checkpoint (merge/merge.ts): the
  // quarantine holds one row per line, whichever loads read it.
  const perDay = await committedDays(pool, loadIdOf(target));
  const days = new Map<string, DaySummary>();
  for (const r of perDay) days.set(r.day, daySummary(r.day, { ...r, r: r.r + r.j }));
  // Every line of a day's export belongs to that day, rejected ones included.
  const day = exportDayOf(target);
  const exportDay = day ? daySummary(day, t) : null;
  if (exportDay) days.set(exportDay.day, exportDay);
  return { t, days, exportDay };
}

/** The day's summary in `days`, a zero one put there if the load counted nothing of it. */
export function summaryOf(days: Map<string, DaySummary>, day: string): DaySummary {
  const summary = days.get(day) ?? daySummary(day, { r: 0, i: 0, u: 0, n: 0, j: 0, s: 0 });
  days.set(day, summary);
  return summary;
}

function daySummary(day: string, c: Sums): DaySummary {
  return {
    day,
    rowsRead: c.r,
    inserted: c.i,
    updated: c.u,
    unchanged: c.n,
    rejected: c.j,
    suppressed: c.s,
    deleted: 0,
    deletesHeld: 0,
    incompleteReason: null,
  };
}
