import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../contract/activities.ts';
import type { LoadCounts } from '../../contract/counts.ts';
import { dayLoadOf } from '../../contract/load-target.ts';
import type { Warehouse } from '../../src/warehouse/db.ts';
import { markDayRunning } from '../../src/warehouse/ledger.ts';

const COUNTS: LoadCounts = {
  linesRead: 100,
  bytesRead: 10_000,
  rowsRead: 100,
  inserted: 100,
  updated: 0,
  unchanged: 0,
  rejected: 0,
  suppressed: 0,
  deleted: 0,
  threadsQueued: 0,
};

/**
 * A stand-in for the day load activity, for the tests of workflow structure only (attach,
 * continue-as-new, cancellation): the worker registers it as `loadExportDay` in place of the real
 * one. It keeps the ledger the way the loader does, takes `delayMs` per day heartbeating (so a
 * cancellation reaches it, and it stops), and counts how many loads of each day started. A day of
 * `failDays` fails as a bad token does: not retried.
 */
export function fakeDayLoads(w: Warehouse, opts: { delayMs?: number; failDays?: string[] } = {}) {
  const starts = new Map<string, number>();
  const activities: Partial<Activities> = {
    async loadExportDay(input) {
      const { day, runId } = dayLoadOf(input);
      const ctx = Context.current();
      starts.set(day, (starts.get(day) ?? 0) + 1);
      await markDayRunning(w.db, day, runId);
      const steps = Math.max(10, Math.ceil((opts.delayMs ?? 0) / 200));
      for (let i = 1; i <= steps; i++) {
        // Rejects when the activity is cancelled (through its heartbeat) or its worker shuts down.
        await ctx.sleep((opts.delayMs ?? 0) / steps);
        ctx.heartbeat({ linesCommitted: i });
      }
      if (opts.failDays?.includes(day))
        throw ApplicationFailure.nonRetryable('service refused the token', 'HTTP_UNAUTHORIZED');
      await w.db
        .updateTable('sync_days')
        .set({ status: 'complete', rows_read: 100, lines_committed: 100, finished_at: new Date() })
        .where('day', '=', day)
        .execute();
      return { ...COUNTS };
    },
  };
  return { activities, starts };
}
