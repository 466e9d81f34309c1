import {
  CancellationScope,
  isCancellation,
  rootCause,
  setCurrentDetails,
  setHandler,
} from '@temporalio/workflow';
import type { DayProgress, DayResult, SyncDayInput } from '../contract/workflows.ts';
import { ledger, loadProxy } from './policies.ts';
import { dayProgressQuery } from './queries.ts';

/**
 * Loads one UTC day of the export. Runs under the workflow id `crs-sync-day-YYYY-MM-DD`, so two
 * runs can never load the same day at once. Whatever way the load ends short of success, the
 * day is released in the ledger (a day left `running` would be a lie); between the load's
 * attempts it stays `running`, retrying (the activity records each failed attempt). With
 * `partial` it is an intraday pull of the open day: nothing deleted, the ledger says `partial`,
 * whether the pull succeeds or not.
 */
export async function syncDay(input: SyncDayInput): Promise<DayResult> {
  const progress: DayProgress = { day: input.day, loadId: input.loadId, phase: 'loading', linesCommitted: 0 };
  setHandler(dayProgressQuery, () => progress);
  setCurrentDetails(`loading ${input.day} (load ${input.loadId})`);
  const { loadExportDay } = loadProxy(input.heartbeatTimeout);
  try {
    const counts = await loadExportDay({
      day: input.day,
      loadId: input.loadId,
      ...(input.partial ? { partial: true } : {}),
    });
    progress.phase = 'done';
    progress.linesCommitted = counts.linesRead;
    setCurrentDetails(
      `loaded ${input.day}: ${counts.rowsRead} rows (${counts.inserted} new, ${counts.updated} updated, ${counts.rejected} rejected)`,
    );
    return {
      day: input.day,
      loadId: input.loadId,
      outcome: 'loaded',
      ...counts,
      ...(input.partial ? { partial: true } : {}),
    };
  } catch (err) {
    const cancelled = isCancellation(err);
    progress.phase = cancelled ? 'cancelled' : 'failed';
    setCurrentDetails(`${progress.phase}: ${input.day}`);
    // Usually the load's last attempt has released the day already (with its error and attempt
    // number); this covers one that could not (its worker lost, its heartbeat timed out).
    await CancellationScope.nonCancellable(() =>
      ledger.releaseDay({
        day: input.day,
        loadId: input.loadId,
        reason: cancelled ? 'cancelled' : `load failed after retries: ${rootCause(err) ?? String(err)}`,
        ...(input.partial ? { partial: true } : {}),
      }),
    );
    throw err;
  }
}
