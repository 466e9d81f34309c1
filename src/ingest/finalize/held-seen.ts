import type pg from 'pg';
import { type LoadTarget, loadIdOf } from '../../common/load-target.ts';
import { recountHeld, requireForce } from '../../warehouse/ledger.ts';
import { anyHeld, heldDaysOf, heldDaysRead, releaseSeenHeld } from '../../warehouse/load/held.ts';
import { beginLoad, commitLoad, rollbackLoad } from '../../warehouse/load/transaction.ts';
import type { RejectsSeen } from '../merge/rejects-seen.ts';

/**
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

export interface SeenLoad {
  target: LoadTarget;
  /** Whether `load_seen` holds every id the load saw under its load id (its quarantined lines' too). */
  seen: boolean;
  /** The load's quarantined lines whose id or day cannot be read (rejects-seen.ts); none when absent. */
  rejects?: Pick<RejectsSeen, 'unreadableDays' | 'unreadableAnyDay' | 'dayless'> | undefined;
}

/**
 * After the load's delete step, in one transaction: the held ids it saw (as records or quarantined
 * lines, `load_seen`) leave the hold; held days it may have read unnoted ids of need --force; the
 * ledger's held figures of those days follow. Idempotent (a retried finalize changes nothing more).
 * A load that did not note its ids releases none: it started with nothing held, and the held
 * days it read rows of need --force instead (`blockUnnoted`).
 */
export async function settleHeld(pool: pg.Pool, l: SeenLoad): Promise<void> {
  const c = await pool.connect();
  let broken: Error | undefined;
  try {
    await beginLoad(c);
    const released = await releaseSeenHeld(c, loadIdOf(l.target), l.seen);
    const blocked = await blockUnreadable(c, l);
    const unnoted = l.seen ? [] : await blockUnnoted(c, l);
    await recountHeld(c, [...new Set([...released, ...blocked, ...unnoted])]);
    await commitLoad(c);
  } catch (err) {
    await rollbackLoad(c);
    broken = err as Error;
    throw err;
  } finally {
    c.release(broken);
  }
}

/**
 * Held days (other than the ones this load's delete step just decided) of which the load
 * quarantined a line whose id cannot be read: any held id of such a day may be that line's. A line
 * with no readable day may be of any held day.
 */
async function blockUnreadable(c: pg.PoolClient, l: SeenLoad): Promise<string[]> {
  const days = await heldDaysOf(c, l.target.runId, l.rejects?.unreadableAnyDay ?? false, [
    ...(l.rejects?.unreadableDays ?? []),
  ]);
  await requireForce(
    c,
    days,
    `load ${l.target.runId} quarantined a line whose message id cannot be read: it may be one of these rows (see crs-sync rejects list)`,
  );
  return days;
}

/**
 * Held days the load read rows of without noting their ids (it overlapped the load that held
 * them): the days of its records and of its quarantined lines (`load_day_counts`), every held day
 * when one of those lines has no readable day.
 */
async function blockUnnoted(c: pg.PoolClient, l: SeenLoad): Promise<string[]> {
  const days = await heldDaysRead(c, loadIdOf(l.target), l.target.runId, l.rejects?.dayless ?? false);
  await requireForce(
    c,
    days,
    `load ${l.target.runId} read rows of this day while its deletes were being held, without noting which: load the day again to settle them`,
  );
  return days;
}
