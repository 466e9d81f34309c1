import { addCounts, emptyCounts, type LoadCounts } from '../src/common/counts.ts';

/**
 * The counts that travel through Temporal's history. A day's figures are the project's one
 * counts type, `LoadCounts` (src/common/counts.ts), and an enrichment's are the enrichment
 * domain's own `EnrichCounts` (src/enrich/counts.ts): both are re-exported here under their own
 * names, so that workflows and activities speak one module. Their field names are recorded in
 * histories already written: rename nothing. Pure: workflow code imports this module.
 */
export { type LoadCounts, pickCounts } from '../src/common/counts.ts';
export { addEnrich, type EnrichCounts, emptyEnrichCounts } from '../src/enrich/counts.ts';

/**
 * How a run came by a day's figures. `attached`: another run was loading the day (this run
 * waited for it), or loaded it after this run started; this run took its result instead of
 * loading the day again.
 */
export type DayOutcome = 'loaded' | 'attached';

/**
 * A run's figures: the counts of the days it loaded, summed, and how each of its days ended. A
 * day it took from another run (`attached`) adds to `daysAttached` only: its rows were counted by
 * the run that loaded it, so the sum of every run's `inserted` is the rows inserted.
 */
export interface RunTotals extends LoadCounts {
  daysLoaded: number;
  daysAttached: number;
  daysFailed: number;
}

export function emptyTotals(): RunTotals {
  return { ...emptyCounts(), daysLoaded: 0, daysAttached: 0, daysFailed: 0 };
}

/**
 * A run's totals with one more day's result folded in (a new object: the old one may be
 * published). An attached day's counts are another run's: only the day is counted.
 */
export function addDay(t: RunTotals, d: Partial<Readonly<LoadCounts>> & { outcome: DayOutcome }): RunTotals {
  // Over zeros first: totals carried over from a history recorded before a count existed lack it.
  const out = { ...emptyTotals(), ...t };
  if (d.outcome === 'loaded') {
    addCounts(out, d);
    out.daysLoaded += 1;
  } else out.daysAttached += 1;
  return out;
}
