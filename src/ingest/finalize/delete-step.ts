import type pg from 'pg';
import { itemAt } from '../../common/checked.ts';
import type { LoadTarget } from '../../common/load-target.ts';
import { exportDayOf, loadIdOf } from '../../common/load-target.ts';
import { CrsError } from '../../errors.ts';
import { addDayDeletes, recordDayExport, recordDayLoaded } from '../../warehouse/ledger.ts';
import {
  analyzeSeen,
  clearHeldDay,
  closeGoneRejects,
  collectGone,
  countSeen,
  deleteGone,
  dropGone,
  goneOfDay,
  goneOfRange,
  holdGone,
} from '../../warehouse/load/delete-guard.ts';
import { beginLoad, commitLoad, rollbackLoad } from '../../warehouse/load/transaction.ts';
import type { RejectsSeen } from '../merge/rejects-seen.ts';
import { type DaySummary, summaryOf } from './counts.ts';

/**
 * The delete step of a load's complete days and its guard (docs/decisions/0008-delete-guard.md):
 * the live rows of those days that the load did not see are soft-deleted only when the source is
 * known whole, every line of the day was read (or at least its id), and they are within
 * CRS_DELETE_GUARD of the day's live rows and CRS_DELETE_GUARD_LOAD of the load's; otherwise they
 * are held for `crs-sync deletes apply`. Each day in one transaction with its ledger row.
 */

/** What the delete step is told of the load (the finalize's input, less its hooks). */
export interface DeleteStepInput {
  /**
   * The load (load-target.ts). A closed day's, or a file's whole days, are complete: rows of them
   * the source lacks are deleted. An open day's (an intraday pull) rows so far are loaded, none is
   * deleted (a row missing from a day still filling is not known gone), and the ledger marks it
   * `partial`, never complete; its held deletes are left alone.
   */
  target: LoadTarget;
  /**
   * Whether `load_seen` holds the ids the source held under the load id: always when the load has
   * whole days, and when held deletes existed at the load's start (finalize.ts `watchesHeld`).
   */
  seen: boolean;
  /** How many ids the load spilled there (duplicates included), to prove none was lost. */
  seenCount?: number;
  /**
   * What the load's quarantined lines tell the delete step (their readable ids are in
   * `load_seen` with the records'); none when absent.
   */
  rejects?: Pick<RejectsSeen, 'unreadableDays' | 'unreadableAnyDay' | 'dayless'>;
  /** Why the source is not known whole: then nothing is deleted. */
  incompleteReason?: string | null;
  /** Percent of a day's live rows above which its deletes are held (default DEFAULT_DELETE_GUARD_PCT). */
  deleteGuardPct?: number | undefined;
  /** Percent of the live rows of a load's complete days (more than one) above which all its deletes are held. */
  deleteGuardLoadPct?: number | undefined;
  /** The source's bytes read, for the day ledger of a day's export. */
  bytes: number;
}

export const DEFAULT_DELETE_GUARD_PCT = 10;
export const DEFAULT_DELETE_GUARD_LOAD_PCT = 2;

/**
 * The delete step of every complete day of the load (in `days`, each day's summary filled in),
 * on one connection: the candidates of the whole window are found at once, in a temporary table
 * of its session (per day, each day would scan every seen id again). Returns the rows deleted.
 */
export async function deleteCompleteDays(
  pool: pg.Pool,
  f: DeleteStepInput,
  complete: string[],
  days: Map<string, DaySummary>,
): Promise<number> {
  let deleted = 0;
  const guardPct = f.deleteGuardPct ?? DEFAULT_DELETE_GUARD_PCT;
  const client = complete.length > 0 ? await pool.connect() : null;
  try {
    if (client) {
      const known = (f.incompleteReason ?? null) === null;
      const loadPct = f.deleteGuardLoadPct ?? DEFAULT_DELETE_GUARD_LOAD_PCT;
      const load = known ? await findGone(client, f, complete, loadPct) : NO_LOAD_HOLD;
      for (const day of complete)
        deleted += await finalizeDay(client, summaryOf(days, day), f, { guardPct, load });
    }
  } finally {
    if (client) {
      await dropGone(client).then(
        () => client.release(),
        (err: Error) => client.release(err),
      );
    }
  }
  return deleted;
}

/**
 * What the delete step knows of the whole load, found once: whether its deletes over all its
 * complete days pass CRS_DELETE_GUARD_LOAD (then every day with deletes is held), and the days of which it
 * quarantined a line whose id cannot be read (a line with no readable day: every complete day).
 */
interface LoadHold {
  /** Why the whole load's deletes are held, or null. */
  overGuard: string | null;
  unreadableDays: Set<string>;
  unreadableAnyDay: boolean;
}

const NO_LOAD_HOLD: LoadHold = { overGuard: null, unreadableDays: new Set(), unreadableAnyDay: false };

/**
 * One complete day in one transaction: its delete step, its deletes added to what the load
 * recorded before, its ledger row. Returns the day's deletes.
 */
async function finalizeDay(
  c: pg.PoolClient,
  summary: DaySummary,
  f: DeleteStepInput,
  g: { guardPct: number; load: LoadHold },
): Promise<number> {
  const own = exportDayOf(f.target) === summary.day;
  try {
    // The pull's own day: its deletes wait for the refresh with its batches' writes (merge/merge.ts).
    await beginLoad(c, own ? summary.day : null);
    const held = await deleteStep(c, summary, f, g);
    // The same judgement as the deletes: an export trusted to delete what it lacks also closes
    // the rejects of lines it no longer has (one whose deletes were held is not trusted).
    if (summary.incompleteReason === null && held === null)
      await closeGoneRejects(c, summary.day, f.target.runId);
    summary.deleted = await addDayDeletes(c, loadIdOf(f.target), summary.day, summary.deleted);
    await recordDayLoaded(c, summary, {
      runId: f.target.runId,
      complete: true,
      bytes: own ? f.bytes : 0,
      linesCommitted: own ? summary.rowsRead : 0,
    });
    await recordDayExport(c, summary.day, {
      incompleteReason: summary.incompleteReason,
      deletesHeld: summary.deletesHeld,
      heldReason: held?.reason ?? null,
      forceReason: held?.forceReason ?? null,
    });
    await commitLoad(c);
    return summary.deleted;
  } catch (err) {
    await rollbackLoad(c);
    throw err;
  }
}

/**
 * The live rows of the complete days that the load did not see (`load_seen`, which holds the ids
 * of the lines it quarantined too): the candidates for deletion, into the session's `crs_gone`.
 * Returns what the delete step must know of the whole load.
 */
async function findGone(
  client: pg.PoolClient,
  f: DeleteStepInput,
  complete: string[],
  loadPct: number,
): Promise<LoadHold> {
  if (f.seen && f.seenCount !== undefined) {
    // load_seen is unlogged: a warehouse that crashed and recovered since the ids were spilled
    // has emptied it, and an anti-join against too few ids would take present rows for deleted.
    const n = await countSeen(client, loadIdOf(f.target));
    if (n !== f.seenCount) {
      throw new CrsError(
        'DB_UNAVAILABLE',
        `the ids this load saw were lost from load_seen (${n} of ${f.seenCount}; the warehouse restarted?): nothing was deleted, and the load runs again`,
        { retryable: true },
      );
    }
  }
  // Fresh statistics, so the anti-join is planned as the hash join it should be.
  if (f.seen) await analyzeSeen(client);
  const from = itemAt(complete, 0);
  const to = itemAt(complete, complete.length - 1);
  await dropGone(client);
  await collectGone(client, from, to, f.seen ? loadIdOf(f.target) : '');
  const { gone, live } = await goneOfRange(client, from, to);
  return {
    overGuard:
      complete.length > 1 && overGuard(gone, live, loadPct)
        ? `this load's deletes over its ${complete.length} complete days, ${gone} of ${live} live rows (${pctOf(gone, live)}%), are more than CRS_DELETE_GUARD_LOAD=${loadPct}%`
        : null,
    unreadableDays: new Set(f.rejects?.unreadableDays ?? []),
    unreadableAnyDay: f.rejects?.unreadableAnyDay ?? false,
  };
}

function overGuard(gone: number, live: number, guardPct: number): boolean {
  return gone > 0 && guardPct < 100 && gone * 100 > guardPct * live;
}

function pctOf(gone: number, live: number): number {
  return live === 0 ? 100 : Math.round((gone * 1000) / live) / 10;
}

/** Why a day's deletes were held, and why applying them needs --force (null: it does not). */
interface Held {
  reason: string;
  forceReason: string | null;
}

/**
 * Soft-deletes the live rows of a complete day that the load did not see, in the caller's
 * transaction: only when the source is known whole, only when every line of the day was read (or
 * at least its id), and only up to the guard, per day and over the load; otherwise the ids are
 * held in `held_deletes` for `crs-sync deletes apply`. A known complete load replaces the day's
 * held set (the newer export is the better judge); an incomplete one leaves it alone. Returns why
 * deletes were held, or null.
 */
async function deleteStep(
  client: pg.PoolClient,
  summary: DaySummary,
  f: DeleteStepInput,
  g: { guardPct: number; load: LoadHold },
): Promise<Held | null> {
  const reason = f.incompleteReason ?? null;
  if (reason !== null) {
    summary.incompleteReason = reason;
    return null;
  }
  const { gone, live } = await goneOfDay(client, summary.day);
  await clearHeldDay(client, summary.day);
  const held = gone > 0 ? holdReason(summary.day, gone, live, g) : null;
  if (held) {
    await holdGone(client, summary.day, f.target.runId);
    summary.deletesHeld = gone;
    return held;
  }
  summary.deleted = await deleteGone(client, summary.day);
  return null;
}

/** Why `gone` deletes of a day with `live` live rows are held, or null when they may be applied. */
function holdReason(
  day: string,
  gone: number,
  live: number,
  g: { guardPct: number; load: LoadHold },
): Held | null {
  if (g.load.unreadableAnyDay || g.load.unreadableDays.has(day)) {
    const why = `a line of this load${g.load.unreadableDays.has(day) ? ' of this day' : ' with no readable day'} was quarantined and its message id cannot be read: it may be one of these rows`;
    return { reason: `${gone} deletes held: ${why}`, forceReason: why };
  }
  if (overGuard(gone, live, g.guardPct)) {
    return {
      reason: `${gone} of ${live} live rows (${pctOf(gone, live)}%) would be deleted, more than CRS_DELETE_GUARD=${g.guardPct}%`,
      forceReason: null,
    };
  }
  if (g.load.overGuard !== null) return { reason: g.load.overGuard, forceReason: null };
  return null;
}
