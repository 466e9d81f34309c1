import type pg from 'pg';
import { itemAt } from '../../common/checked.ts';
import { dayRange } from '../../common/civil-date.ts';
import type { LoadCounts } from '../../common/counts.ts';
import { exportDayOf, type LoadTarget, loadIdOf, wholeDaysOf } from '../../common/load-target.ts';
import { CrsError } from '../../errors.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import {
  addDayDeletes,
  recordDayExport,
  recordDayLoaded,
  recountDayDeletes,
} from '../../warehouse/ledger.ts';
import { committedDays, committedTotals, type Sums } from '../../warehouse/load/checkpoints.ts';
import {
  clearHeldDay,
  collectGone,
  deleteGone,
  dropGone,
  goneOfDay,
  goneOfRange,
  holdGone,
} from '../../warehouse/load/deletes.ts';
import { analyzeSeen, clearSeen, countSeen } from '../../warehouse/load/seen.ts';
import { beginLoad, commitLoad, rollbackLoad } from '../../warehouse/load/transaction.ts';
import { closeGoneRejects } from '../../warehouse/quarantine.ts';
import { refreshRollups } from '../../warehouse/rollups/refresh.ts';
import { threadTotalsFromRollups } from '../../warehouse/rollups/status.ts';
import { drainThreadQueue, refreshQueuedThreads } from '../../warehouse/threads.ts';
import type { RejectsSeen } from '../merge/rejects-seen.ts';
import { settleHeld } from './held-seen.ts';

/**
 * What a load does once every line is merged: soft-deletes rows of complete days that the
 * source no longer holds, refreshes the queued threads' aggregates and writes the day ledger.
 * Every step is idempotent, so a load that stopped in here finishes the same when run again.
 */

/** The counts of one UTC day of a load (the day ledger's row). */
export interface DaySummary extends Omit<LoadCounts, 'linesRead' | 'bytesRead' | 'threadsQueued'> {
  day: string;
  /** Deletes the guard held for review instead of applying them. */
  deletesHeld: number;
  /** Why the day's export was not known complete (then nothing of it was deleted); null if it was. */
  incompleteReason: string | null;
}

/** A load's counts from its committed checkpoints and its finalize (lines and bytes are the reader's). */
export interface FinalizeResult extends Omit<LoadCounts, 'linesRead' | 'bytesRead'> {
  days: DaySummary[];
}

export interface FinalizeInput {
  /**
   * The load (load-target.ts). A closed day's, or a file's whole days, are complete: rows of them
   * the source lacks are deleted. An open day's (an intraday pull) rows so far are loaded, none is
   * deleted (a row missing from a day still filling is not known gone), and the ledger marks it
   * `partial`, never complete; its held deletes are left alone.
   */
  target: LoadTarget;
  /**
   * Whether `load_seen` holds the ids the source held under the load id: always when the load has
   * whole days, and when held deletes existed at the load's start (held-seen.ts).
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
  bytes: number;
  /** Told how long each step took (ms), for the debug log: where a load's end goes. */
  onPhases?: ((ms: { deletes: number; threads: number; rollups: number }) => void) | undefined;
}

export const DEFAULT_DELETE_GUARD_PCT = 10;
export const DEFAULT_DELETE_GUARD_LOAD_PCT = 2;

export async function finalizeLoad(w: Warehouse, f: FinalizeInput): Promise<FinalizeResult> {
  const pool = w.pool;
  const t0 = performance.now();
  const { t, days } = await committedCounts(pool, f);
  const whole = wholeDaysOf(f.target);
  const complete = whole ? dayRange(whole.from, whole.to) : [];
  let deleted = 0;
  const guardPct = f.deleteGuardPct ?? DEFAULT_DELETE_GUARD_PCT;
  // One connection for the days: the candidates of the whole window are found at once, in a
  // temporary table of its session (per day, each day would scan every seen id again).
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

  if (f.target.kind === 'open-day') await recordOpenDay(pool, summaryOf(days, f.target.day), f);
  // Held ids of any day this load saw leave the hold, before its seen ids go.
  await settleHeld(pool, f);
  if (f.seen) await clearSeen(pool, loadIdOf(f.target));
  // Days the load wrote without completing them: a row it sent again may have been deleted.
  const touched = [...days.values()]
    .filter((d) => d.updated > 0 && !complete.includes(d.day))
    .map((d) => d.day);
  await recountDayDeletes(pool, touched);

  // The rollups of what this load (or one that died before here) changed: triggers marked it with
  // the data, so a retried finalize finds it still marked; a day pull's writes of its own day
  // waited instead (merge.ts, finalizeDay) and are released in the refresh's transaction. First
  // in it, the queued threads (the whole queue: a dead load's too) become pending, so the thread
  // marks that makes are refreshed before any reader sees them; the aggregates of the threads this
  // load queued follow the refresh, which they are read from.
  const t1 = performance.now();
  const exportDay = exportDayOf(f.target);
  const release = new Set(exportDay ? [...complete, exportDay] : complete);
  const { runId } = f.target;
  await refreshRollups(pool, undefined, {
    release: [...release],
    first: (c) => drainThreadQueue(c, runId),
  });
  const t2 = performance.now();
  // The queued threads' aggregates: from the rollups just refreshed when they are current (one
  // row per thread), else from the raw rows (a warehouse waiting for its rollup rebuild, or a
  // concurrent write marked since our refresh).
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
    deleted,
    threadsQueued,
    days: [...days.values()].sort((a, b) => a.day.localeCompare(b.day)),
  };
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
      loadId: f.target.runId,
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

/**
 * The load's counts summed over its committed checkpoints, and per UTC day (rejects counted on
 * their day where they have one).
 */
async function committedCounts(
  pool: pg.Pool,
  f: FinalizeInput,
): Promise<{ t: Sums; days: Map<string, DaySummary> }> {
  // An aggregate without group by: always one row.
  const t = (await committedTotals(pool, loadIdOf(f.target))) ?? { r: 0, i: 0, u: 0, n: 0, j: 0 };
  // A line a load quarantines is counted on its day with the checkpoint (merge.ts): the
  // quarantine holds one row per line, whichever loads read it.
  const perDay = await committedDays(pool, loadIdOf(f.target));
  const days = new Map<string, DaySummary>();
  for (const r of perDay) days.set(r.day, daySummary(r.day, { ...r, r: r.r + r.j }));
  // Every line of a day's export belongs to that day, rejected ones included.
  const day = exportDayOf(f.target);
  if (day) days.set(day, daySummary(day, t));
  return { t, days };
}

/** The day's summary in `days`, a zero one put there if the load counted nothing of it. */
function summaryOf(days: Map<string, DaySummary>, day: string): DaySummary {
  const summary = days.get(day) ?? daySummary(day, { r: 0, i: 0, u: 0, n: 0, j: 0 });
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
    deleted: 0,
    deletesHeld: 0,
    incompleteReason: null,
  };
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
  f: FinalizeInput,
  g: { guardPct: number; load: LoadHold },
): Promise<number> {
  const own = exportDayOf(f.target) === summary.day;
  try {
    // The pull's own day: its deletes wait for the refresh with its batches' writes (merge.ts).
    await beginLoad(c, own ? summary.day : null);
    const held = await deleteStep(c, summary, f, g);
    // The same judgement as the deletes: an export trusted to delete what it lacks also closes
    // the rejects of lines it no longer has (one whose deletes were held is not trusted).
    if (summary.incompleteReason === null && held === null)
      await closeGoneRejects(c, summary.day, f.target.runId);
    summary.deleted = await addDayDeletes(c, loadIdOf(f.target), summary.day, summary.deleted);
    await recordDayLoaded(c, summary, {
      loadId: f.target.runId,
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
  f: FinalizeInput,
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
  f: FinalizeInput,
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
