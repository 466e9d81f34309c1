import type pg from 'pg';
import { dayRange } from '../../common/civil-date.ts';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf, wholeDaysOf } from '../../common/load-target.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import {
  recordDayExport,
  recordDayLoaded,
  recountDayDeletes,
  recountHeld,
  requireForce,
} from '../../warehouse/ledger.ts';
import { anyHeld, clearSeen, settleHeldSeen } from '../../warehouse/load/delete-guard.ts';
import { beginLoad, commitLoad, rollbackLoad } from '../../warehouse/load/transaction.ts';
import { refreshRollups } from '../../warehouse/rollups/refresh.ts';
import { threadTotalsFromRollups } from '../../warehouse/rollups/status.ts';
import { drainThreadQueue, refreshQueuedThreads } from '../../warehouse/threads.ts';
import { committedCounts, type DaySummary } from './counts.ts';
import { type DeleteStepInput, deleteCompleteDays } from './delete-step.ts';

/**
 * What a load does once every line is merged: soft-deletes rows of complete days that the
 * source no longer holds (delete-step.ts), settles the held deletes it saw (`settleHeld`),
 * refreshes the rollups and the queued threads' aggregates and writes the day ledger, from the
 * counts its checkpoints committed (counts.ts). Every step is idempotent, so a load that stopped
 * in here finishes the same when run again.
 */

export interface FinalizeInput extends DeleteStepInput {
  /** Told how long each step took (ms), for the debug log: where a load's end goes. */
  onPhases?: ((ms: { deletes: number; threads: number; rollups: number }) => void) | undefined;
}

/** A load's counts from its committed checkpoints and its finalize (lines and bytes are the reader's). */
export interface FinalizeResult extends Omit<LoadCounts, 'linesRead' | 'bytesRead'> {
  days: DaySummary[];
}

export async function finalizeLoad(w: Warehouse, f: FinalizeInput): Promise<FinalizeResult> {
  const pool = w.pool;
  const t0 = performance.now();
  const { t, days, exportDay } = await committedCounts(pool, f.target);
  const whole = wholeDaysOf(f.target);
  const complete = whole ? dayRange(whole.from, whole.to) : [];
  const deleted = await deleteCompleteDays(pool, f, complete, days);
  await settleLoad(pool, f, complete, { days, exportDay });

  const t1 = performance.now();
  await refreshLoadRollups(pool, f.target, complete);
  const t2 = performance.now();
  // The queued threads' aggregates: from the rollups just refreshed when they are current (one
  // row per thread), else from the raw rows (a warehouse waiting for its rollup rebuild, or a
  // concurrent write marked since our refresh).
  const { runId } = f.target;
  const threadsQueued =
    (await threadTotalsFromRollups(pool, runId)) ?? (await refreshQueuedThreads(pool, runId));
  f.onPhases?.({
    deletes: Math.round(t1 - t0),
    threads: Math.round(performance.now() - t2),
    rollups: Math.round(t2 - t1),
  });

  return {
    rowsRead: t.r,
    inserted: t.i,
    updated: t.u,
    unchanged: t.n,
    rejected: t.j,
    suppressed: t.s,
    deleted,
    threadsQueued,
    days: [...days.values()].sort((a, b) => a.day.localeCompare(b.day)),
  };
}

/**
 * After the delete step: an open day's ledger row, the held deletes the load saw, its seen ids
 * gone, and the deletes recounted of the days it wrote without completing them.
 */
async function settleLoad(
  pool: pg.Pool,
  f: FinalizeInput,
  complete: string[],
  { days, exportDay }: { days: Map<string, DaySummary>; exportDay: DaySummary | null },
): Promise<void> {
  if (f.target.kind === 'open-day' && exportDay) await recordOpenDay(pool, exportDay, f);
  // Held ids of any day this load saw leave the hold, before its seen ids go.
  await settleHeld(pool, f);
  if (f.seen) await clearSeen(pool, loadIdOf(f.target));
  // Days the load wrote without completing them: a row it sent again may have been deleted.
  const touched = [...days.values()]
    .filter((d) => d.updated > 0 && !complete.includes(d.day))
    .map((d) => d.day);
  await recountDayDeletes(pool, touched);
}

/**
 * The rollups of what this load (or one that died before here) changed: triggers marked it with
 * the data, so a retried finalize finds it still marked; a day pull's writes of its own day
 * waited instead (merge/merge.ts, delete-step.ts `finalizeDay`) and are released in the refresh's
 * transaction. First in it, the queued threads (the whole queue: a dead load's too) become
 * pending, so the thread marks that makes are refreshed before any reader sees them; the
 * aggregates of the threads this load queued follow the refresh, which they are read from.
 */
async function refreshLoadRollups(pool: pg.Pool, target: LoadTarget, complete: string[]): Promise<void> {
  const exportDay = exportDayOf(target);
  const release = new Set(exportDay ? [...complete, exportDay] : complete);
  const { runId } = target;
  await refreshRollups(pool, undefined, {
    release: [...release],
    first: (c) => drainThreadQueue(c, runId),
  });
}

/** The ledger's reason why an intraday pull's export is not whole (and nothing of it deleted). */
export const OPEN_DAY_REASON =
  'the day is still open (intraday pull): nothing deleted until the closed-day pull';

/**
 * The ledger row of an intraday pull of the open day: partial, its export not known whole. Why the
 * export itself was not whole (cut at a line boundary, an empty body) stays beside the reason:
 * nothing of a partial day is deleted either way, but whoever reads the ledger should see that
 * this pull read less than the service had.
 */
async function recordOpenDay(pool: pg.Pool, summary: DaySummary, f: FinalizeInput): Promise<void> {
  const exportReason = f.incompleteReason ?? null;
  summary.incompleteReason = exportReason
    ? `${OPEN_DAY_REASON}; the export was not whole: ${exportReason}`
    : OPEN_DAY_REASON;
  const c = await pool.connect();
  try {
    await beginLoad(c);
    await recordDayLoaded(c, summary, {
      runId: f.target.runId,
      complete: false,
      open: true,
      bytes: f.bytes,
      linesCommitted: summary.rowsRead,
    });
    await recordDayExport(c, summary.day, {
      incompleteReason: summary.incompleteReason ?? OPEN_DAY_REASON,
      deletesHeld: 0,
      heldReason: null,
      forceReason: null,
    });
    await commitLoad(c);
    c.release();
  } catch (err) {
    await rollbackLoad(c);
    c.release(err as Error);
    throw err;
  }
}

/*
 * Held deletes against what later loads see. A held id is a row one export lacked; any later load
 * that reads it again (changed or not, complete or not, an import, a sync, a replay; as a record
 * or as a quarantined line with a readable id) shows the source still holds it, so the load's
 * finalize takes it out of the held set: `deletes apply` can then never delete it. What a load
 * cannot prove it did not see (a quarantined line without a readable id) makes the held days it
 * may belong to need `deletes apply --force`.
 *
 * A load notes the ids it sees (`load_seen`) when it has complete days or when `held_deletes` has
 * rows at its start (`watchesHeld`): a first load of an empty warehouse pays nothing. A load that
 * did not note them (nothing was held at its start) and finds held rows at its end overlapped the
 * load that held them: the held days it read rows of need --force.
 */

/** Whether a load starting now must note the ids it sees (`load_seen`) for the held deletes. */
export async function watchesHeld(pool: pg.Pool, hasWholeDays: boolean): Promise<boolean> {
  if (hasWholeDays) return true;
  return await anyHeld(pool);
}

/**
 * After the load's delete step, in one transaction: the held ids it saw (as records or quarantined
 * lines, `load_seen`) leave the hold; held days it may have read unnoted ids of need --force (of
 * which it quarantined a line whose id cannot be read; of which, not noting its ids, it read
 * rows); the ledger's held figures of those days follow. Idempotent (a retried finalize changes
 * nothing more). A load that did not note its ids releases none: it started with nothing held,
 * and the held days it read rows of need --force instead.
 */
async function settleHeld(pool: pg.Pool, f: FinalizeInput): Promise<void> {
  const { runId } = f.target;
  const c = await pool.connect();
  let broken: Error | undefined;
  try {
    await beginLoad(c);
    const held = await settleHeldSeen(c, {
      loadKey: loadIdOf(f.target),
      runId,
      seen: f.seen,
      unreadableDays: [...(f.rejects?.unreadableDays ?? [])],
      unreadableAnyDay: f.rejects?.unreadableAnyDay ?? false,
      dayless: f.rejects?.dayless ?? false,
    });
    await requireForce(
      c,
      held.unreadable,
      `load ${runId} quarantined a line whose message id cannot be read: it may be one of these rows (see crs-sync rejects list)`,
    );
    await requireForce(
      c,
      held.unnoted,
      `load ${runId} read rows of this day while its deletes were being held, without noting which: load the day again to settle them`,
    );
    await recountHeld(c, [...new Set([...held.released, ...held.unreadable, ...held.unnoted])]);
    await commitLoad(c);
  } catch (err) {
    await rollbackLoad(c);
    broken = err as Error;
    throw err;
  } finally {
    c.release(broken);
  }
}
