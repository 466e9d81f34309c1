import { uuid4 } from '@temporalio/workflow';
import { closedDayLoad, openDayLoad } from '../contract/load-target.ts';
import type { SyncIntradayInput, SyncResult } from '../contract/workflows.ts';
import { shiftDay, utcDay } from '../src/common/civil-date.ts';
import { ledger } from './policies.ts';
import { openProgress, runSkeleton } from './run-skeleton.ts';
import { loadDayInto } from './run-state.ts';

/**
 * How long after midnight UTC the day that just closed is pulled as a complete day: the daily
 * schedule's default time (00:30), when the service's export of the day is taken as whole.
 */
export const CLOSED_DAY_AFTER_MS = 30 * 60_000;

/**
 * One run of the intraday schedule, as of its start (for a schedule, the scheduled time):
 *
 * 1. from 00:30 UTC on, the day that just closed, as a normal complete day (the only pull of it
 *    that may delete), unless a complete load of it finished since 00:30: the daily schedule's,
 *    or this schedule's earlier run. Whichever run gets there first loads it; a run that finds it
 *    loading waits for it (the day's workflow id), so it is never loaded twice at once;
 * 2. the open UTC day, as a partial day: its rows so far, nothing deleted, `partial` in the ledger;
 * 3. the queued threads' enrichment.
 */
export async function syncIntraday(input: SyncIntradayInput = {}): Promise<SyncResult> {
  const at = input.now ? new Date(input.now) : new Date();
  const today = utcDay(at);
  const closed = shiftDay(today, -1);
  const closedAt = new Date(Date.parse(`${today}T00:00:00Z`) + CLOSED_DAY_AFTER_MS);
  const pullClosed = at.getTime() >= closedAt.getTime();
  const p = openProgress({
    kind: 'intraday',
    runId: uuid4(),
    from: pullClosed ? closed : today,
    to: today,
    daysTotal: pullClosed ? 2 : 1,
  });
  return runSkeleton(p, {
    load: async () => {
      if (pullClosed) await loadDayInto(p, closedDayLoad(p.runId, closed), closedAt.toISOString(), input);
      // No earlier load of the open day stands for this one: `since` is now.
      await loadDayInto(p, openDayLoad(p.runId, today), at.toISOString(), input);
      return true;
    },
    enrichConcurrency:
      input.enrich !== false ? async () => (await ledger.workerSettings()).enrichConcurrency : null,
  });
}
