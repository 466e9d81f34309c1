import {
  CancellationScope,
  isCancellation,
  rootCause,
  setCurrentDetails,
  setHandler,
} from '@temporalio/workflow';
import { dayLoadOf } from '../contract/load-target.ts';
import { type DayProgress, type DayResult, loadTimingsOf, type SyncDayInput } from '../contract/workflows.ts';
import { ledger, loadProxy } from './policies.ts';
import { dayProgressQuery } from './queries.ts';

/**
 * Loads one UTC day of the export. Runs under the workflow id `crs-sync-day-YYYY-MM-DD`, so two
 * runs can never load the same day at once. Whatever way the load ends short of success, the
 * day is released in the ledger (a day left `running` would be a lie); between the load's
 * attempts it stays `running`, retrying (the activity records each failed attempt). An open
 * day's load is an intraday pull: nothing deleted, the ledger says `partial`, whether the pull
 * succeeds or not. The input of a history recorded before load targets is read as one.
 */
export async function syncDay(input: SyncDayInput): Promise<DayResult> {
  const target = dayLoadOf(input);
  const { day, runId } = target;
  const open = target.kind === 'open-day';
  const progress: DayProgress = { day, runId, phase: 'loading', linesCommitted: 0 };
  setHandler(dayProgressQuery, () => progress);
  setCurrentDetails(`loading ${day} (run ${runId})`);
  const { loadExportDay } = loadProxy(loadTimingsOf(input));
  try {
    const counts = await loadExportDay({ target });
    progress.phase = 'done';
    progress.linesCommitted = counts.linesRead;
    setCurrentDetails(
      `loaded ${day}: ${counts.rowsRead} rows (${counts.inserted} new, ${counts.updated} updated, ${counts.rejected} rejected)`,
    );
    return { day, runId, outcome: 'loaded', ...counts, ...(open ? { partial: true } : {}) };
  } catch (err) {
    const cancelled = isCancellation(err);
    progress.phase = cancelled ? 'cancelled' : 'failed';
    setCurrentDetails(`${progress.phase}: ${day}`);
    // Usually the load's last attempt has released the day already (with its error and attempt
    // number); this covers one that could not (its worker lost, its heartbeat timed out).
    await CancellationScope.nonCancellable(() =>
      ledger.releaseDay({
        target,
        reason: cancelled ? 'cancelled' : `load failed after retries: ${rootCause(err) ?? String(err)}`,
      }),
    );
    throw err;
  }
}
