import { isCancellation, rootCause, setCurrentDetails } from '@temporalio/workflow';
import { addDay } from '../contract/counts.ts';
import type { DayLoad } from '../contract/load-target.ts';
import type { LoadTimings, SyncProgress } from '../contract/workflows.ts';
import { runDay } from './run-day.ts';

/** Shows a run's progress in the Temporal UI ("current details") from its query state. */
export function publish(p: SyncProgress): void {
  const t = p.totals;
  const lines = [
    `**${p.kind}** ${p.from ?? '?'} → ${p.to ?? '?'} — ${p.phase}`,
    `days ${p.daysDone}/${p.daysTotal} (${p.daysFailed} failed)` +
      (p.daysRunning.length ? `, loading ${p.daysRunning.join(', ')}` : ''),
    `rows ${t.rowsRead} read, ${t.inserted} inserted, ${t.updated} updated, ${t.rejected} rejected, ${t.deleted} deleted`,
  ];
  if (p.enrich)
    lines.push(`threads enriched ${p.enrich.done}/${p.enrich.threads} (${p.enrich.failed} failed)`);
  if (p.failedDays.length) lines.push(`failed days: ${p.failedDays.slice(0, 20).join(', ')}`);
  if (p.runs > 1) lines.push(`workflow run ${p.runs} (continued as new)`);
  setCurrentDetails(lines.join('\n\n'));
}

/**
 * Runs one day load of a run (a closed day, or the open day of an intraday pull) and folds the
 * outcome into its progress. A failed day is recorded and the run goes on with the others;
 * cancellation propagates.
 */
export async function loadDayInto(
  p: SyncProgress,
  target: DayLoad,
  since: string,
  timings: LoadTimings,
): Promise<void> {
  const { day } = target;
  p.daysRunning.push(day);
  publish(p);
  try {
    const r = await runDay(target, since, timings);
    p.totals = addDay(p.totals, r);
  } catch (err) {
    if (isCancellation(err)) throw err;
    p.daysFailed += 1;
    p.totals.daysFailed += 1;
    p.failedDays.push(day);
    p.firstError ??= `${day}: ${rootCause(err) ?? String(err)}`;
  } finally {
    p.daysRunning = p.daysRunning.filter((d) => d !== day);
    p.daysDone += 1;
    publish(p);
  }
}
