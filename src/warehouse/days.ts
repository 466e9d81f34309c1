import { sql } from 'kysely';
import type pg from 'pg';
import type { LoadCounts } from '../common/counts.ts';
import type { DayStatus, Executor, SyncDay } from './types.ts';

/**
 * The days of the ledger (`sync_days`): one row per UTC day of the export, and every transition
 * of it: running (a load starts or takes the day over), complete or pending (the loader's
 * finalize), released (a load that ended without finishing), and the watermark read from them.
 */

/**
 * A raw pg client inside a transaction of the loader's own (its finalize works on a pool client,
 * not through kysely): the writes it makes to the ledger in that transaction take one of these.
 */
export type LoaderClient = Pick<pg.ClientBase, 'query'>;

/**
 * Which attempt of its load a day load is: Temporal's activity attempt number and the retry
 * policy's limit. A load outside Temporal (an import, a direct call) is attempt 1 of 1.
 */
export interface LoadAttempt {
  number: number;
  /** The most attempts the load gets; null: no limit known. */
  maxAttempts: number | null;
}

const FIRST_ATTEMPT: LoadAttempt = { number: 1, maxAttempts: null };

/**
 * Marks a day as loading under a load id; counts one more attempt in `attempts` (every attempt
 * of every load) and records which attempt of its load this is in `attempt`. A retry of the same
 * load keeps the error its last attempt left (the day reads "retrying" until it loads); a new
 * load starts clean. A day still `running` under another load id is taken over: only one load of
 * a day runs at a time (its workflow id), so that load died without closing the day (terminated,
 * its worker gone). Its id is kept in `taken_over_from` and returned.
 */
export async function markDayRunning(
  db: Executor,
  day: string,
  loadId: string,
  attempt: LoadAttempt = FIRST_ATTEMPT,
): Promise<{ takenOverFrom: string | null }> {
  const retry = sql<boolean>`(${attempt.number}::int > 1 and sync_days._load_id = ${loadId}::text)`;
  const r = await db
    .insertInto('sync_days')
    .values({
      day,
      status: 'running',
      _load_id: loadId,
      started_at: new Date(),
      attempts: 1,
      attempt: attempt.number,
      max_attempts: attempt.maxAttempts,
      progress_at: sql`now()`,
    })
    .onConflict((oc) =>
      oc.column('day').doUpdateSet((eb) => ({
        status: 'running',
        _load_id: loadId,
        started_at: new Date(),
        finished_at: null,
        last_error: sql`case when ${retry} then sync_days.last_error end`,
        last_error_code: sql`case when ${retry} then sync_days.last_error_code end`,
        last_error_at: sql`case when ${retry} then sync_days.last_error_at end`,
        next_attempt_at: null,
        attempts: eb('sync_days.attempts', '+', 1),
        attempt: attempt.number,
        max_attempts: attempt.maxAttempts,
        progress_at: sql`now()`,
        taken_over_from: sql`case when sync_days.status = 'running' and sync_days._load_id is distinct from ${loadId}::text
          then sync_days._load_id end`,
      })),
    )
    .returning('taken_over_from')
    .executeTakeFirstOrThrow();
  return { takenOverFrom: r.taken_over_from };
}

/** A sign of life of a load of a day, while the day is still running under it. */
export async function touchDay(db: Executor, day: string, loadId: string): Promise<void> {
  await db
    .updateTable('sync_days')
    .set({ progress_at: sql`now()` })
    .where('day', '=', day)
    .where('_load_id', '=', loadId)
    .where('status', '=', 'running')
    .execute();
}

/** An attempt of a day's load that failed: what failed, and which attempt it was. */
export interface FailedAttempt {
  loadId: string;
  /** Kept as the day's `last_error` (its first 2000 characters). */
  error: string;
  /** The error's code (a CrsError code, the failure's type); null when it has none. */
  code: string | null;
  attempt: LoadAttempt;
  /** An intraday pull of the open day: the day stays `partial` (its rows so far) whatever failed. */
  partial?: boolean;
}

/**
 * A failed attempt that Temporal retries in `retryInMs`: the day stays `running` (an intraday
 * pull's open day goes back to `partial`, its rows those of its last pull) with the error, the
 * attempt and when the next one runs. Only while the day is still running under that load.
 * Returns whether the day's row changed.
 */
export async function recordDayRetry(
  db: Executor,
  day: string,
  a: FailedAttempt & { retryInMs: number },
): Promise<boolean> {
  const r = await db
    .updateTable('sync_days')
    .set({
      status: a.partial ? 'partial' : 'running',
      ...(a.partial ? { finished_at: sql`now()` } : {}),
      last_error: a.error.slice(0, 2000),
      last_error_code: a.code,
      last_error_at: sql`now()`,
      attempt: a.attempt.number,
      max_attempts: a.attempt.maxAttempts,
      next_attempt_at: sql`now() + ${Math.max(0, Math.round(a.retryInMs))} * interval '1 millisecond'`,
      progress_at: sql`now()`,
    })
    .where('day', '=', day)
    .where('_load_id', '=', a.loadId)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}

export interface UnfinishedLoad {
  /** Cancelled: nothing is wrong with the day. Otherwise the load failed. */
  cancelled: boolean;
  /** Kept as the day's `last_error` (its first 2000 characters). */
  reason: string;
  /** The error's code; without one, `CANCELLED` for a cancelled load, else the day's is cleared. */
  code?: string | null;
  /** The attempt that ended the load; without it the one `markDayRunning` recorded stands. */
  attempt?: LoadAttempt;
  /** An intraday pull of the open day: the day stays `partial` (its rows so far, nothing deleted). */
  partial?: boolean;
  /**
   * Only while the day is still running under this load id (a later load may have taken it over
   * meanwhile), or is an open day waiting for this load's next attempt; without it the day is
   * released whatever its state.
   */
  loadId?: string;
}

/**
 * Closes a day whose load ended without finishing: a cancelled one goes back to pending, a failed
 * one becomes failed, so that the watermark stops at it and the next scheduled sync retries it.
 * An intraday pull of the open day leaves it `partial` either way: its rows are those of its last
 * pull, and a failed pull is not a failed day (a cancelled one keeps the error its attempts left).
 * Returns the status the day now has, or null when its row did not change.
 */
export async function releaseUnfinishedDay(
  db: Executor,
  day: string,
  end: UnfinishedLoad,
): Promise<DayStatus | null> {
  const status: DayStatus = end.partial ? 'partial' : end.cancelled ? 'pending' : 'failed';
  const keepError = end.partial === true && end.cancelled;
  const error = end.reason.slice(0, 2000);
  const code = end.code ?? (end.cancelled ? 'CANCELLED' : null);
  let q = db
    .updateTable('sync_days')
    .set({
      status,
      last_error: keepError ? sql`coalesce(last_error, ${error})` : error,
      last_error_code: keepError ? sql`coalesce(last_error_code, ${code})` : code,
      last_error_at: keepError ? sql`coalesce(last_error_at, now())` : sql`now()`,
      finished_at: new Date(),
      next_attempt_at: null,
      ...(end.attempt ? { attempt: end.attempt.number, max_attempts: end.attempt.maxAttempts } : {}),
    })
    .where('day', '=', day);
  if (end.loadId !== undefined) {
    q = q
      .where('_load_id', '=', end.loadId)
      .where((eb) =>
        eb.or([
          eb('status', '=', 'running'),
          eb.and([eb('status', '=', 'partial'), eb('next_attempt_at', 'is not', null)]),
        ]),
      );
  }
  const r = await q.executeTakeFirst();
  return Number(r.numUpdatedRows) > 0 ? status : null;
}

/** What a complete download of a day's export was: its digest and its size. */
export async function recordDayDownload(
  db: Executor,
  day: string,
  download: { checksum: string | null; bytes: number },
): Promise<void> {
  await db
    .updateTable('sync_days')
    .set({ export_checksum: download.checksum, bytes: download.bytes })
    .where('day', '=', day)
    .execute();
}

/** A day's ledger figures as the project's counts (the ledger keeps no count of queued threads). */
export function dayCounts(d: SyncDay): LoadCounts {
  return {
    linesRead: d.lines_committed,
    bytesRead: d.bytes,
    rowsRead: d.rows_read,
    inserted: d.rows_inserted,
    updated: d.rows_updated,
    unchanged: d.rows_unchanged,
    rejected: d.rows_rejected,
    deleted: d.rows_deleted,
    threadsQueued: 0,
  };
}

/**
 * The day's last load when it completed at or after `since` (another run loaded it meanwhile):
 * its load id and figures; null when it did not.
 */
export async function findDayCompletedSince(
  db: Executor,
  day: string,
  since: Date,
): Promise<{ loadId: string | null; counts: LoadCounts } | null> {
  const r = await db
    .selectFrom('sync_days')
    .selectAll()
    .where('day', '=', day)
    .where('status', '=', 'complete')
    .where('finished_at', '>=', since)
    .executeTakeFirst();
  return r ? { loadId: r._load_id, counts: dayCounts(r) } : null;
}

/**
 * The watermark: the last day of the unbroken run of complete days that starts at the earliest
 * day in the ledger. A failed or missing day stops it, so a scheduled sync goes back to it.
 */
export async function getWatermark(db: Executor): Promise<string | null> {
  const r = await sql<{ watermark: string | null }>`
    with d as (
      select day, status, row_number() over (order by day) as n,
             (day - (select min(day) from sync_days))::int + 1 as span
      from sync_days
    )
    select max(day)::text as watermark from d
    where n = span and status = 'complete'
      and not exists (select 1 from d d2 where d2.day <= d.day and d2.status <> 'complete')`.execute(db);
  return r.rows[0]?.watermark ?? null;
}

/** The earliest day from `from` to `to` whose last export was not known complete, or null. */
export async function earliestIncompleteDay(db: Executor, from: string, to: string): Promise<string | null> {
  const r = await db
    .selectFrom('sync_days')
    .select((eb) => eb.fn.min('day').as('day'))
    .where('export_complete', '=', false)
    .where('day', '>=', from)
    .where('day', '<=', to)
    .executeTakeFirst();
  return r?.day ?? null;
}

/**
 * Adds a load's soft-deletes of a day to what it recorded before and returns the sum, in the
 * transaction of the deletes: a finalize retried after they committed finds nothing left to
 * delete, and the day still reports what the load deleted.
 */
export async function addDayDeletes(
  client: LoaderClient,
  loadKey: string,
  day: string,
  deleted: number,
): Promise<number> {
  const r = await client.query<{ n: number | string }>(
    `insert into load_day_deletes (load_key, day, rows_deleted) values ($1, $2, $3)
     on conflict (load_key, day) do update set rows_deleted = load_day_deletes.rows_deleted + excluded.rows_deleted
     returning rows_deleted as n`,
    [loadKey, day, deleted],
  );
  return Number(r.rows[0]?.n ?? deleted);
}

/**
 * The ledger's `rows_deleted` of a day: its rows marked deleted now, whoever marked them (a load's
 * delete step, `deletes apply`). Counted, never carried: a re-load that deletes nothing more keeps
 * the count, and a row the source sent again (live again) leaves it. `day` is an SQL date expression.
 */
export function deletedRowsOf(day: string): string {
  return `(select count(*) from analytics_messages a where a.message_date = ${day} and a._deleted_at is not null)`;
}

/** Counts `rows_deleted` again for these days of the ledger (a load re-delivered deleted rows of them). */
export async function recountDayDeletes(client: LoaderClient, days: string[]): Promise<void> {
  if (days.length === 0) return;
  await client.query(
    `update sync_days set rows_deleted = ${deletedRowsOf('sync_days.day')} where day = any($1::date[])`,
    [days],
  );
}

/** A day's figures as a load's finalize writes them to the ledger. */
export type DayLoaded = { day: string } & Pick<
  LoadCounts,
  'rowsRead' | 'inserted' | 'updated' | 'unchanged' | 'rejected'
>;

/**
 * Writes a load's figures of a day (complete, or pending when the load did not cover the whole
 * day, or partial when it was an intraday pull of the open day, which also sets `pulled_at`: the
 * open day's freshness), in the finalize's transaction. `bytes` and `linesCommitted` are the day's own export's
 * (0 for a day a many-day import touched); lines_committed never goes back. `rows_deleted` is the
 * day's (deletedRowsOf), not the load's: the load's own deletes are in its summary and its run.
 */
export async function recordDayLoaded(
  client: LoaderClient,
  d: DayLoaded,
  load: { loadId: string; complete: boolean; bytes: number; linesCommitted: number; open?: boolean },
): Promise<void> {
  await client.query(
    `insert into sync_days (day, status, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected,
       rows_deleted, bytes, lines_committed, started_at, finished_at, _load_id, attempts, attempt, pulled_at)
     values ($1, $2, $3, $4, $5, $6, $7, ${deletedRowsOf('$1::date')}, $8, $9, now(), now(), $10, 1, 1,
       case when $2 = 'partial' then now() end)
     on conflict (day) do update set status = excluded.status, rows_read = excluded.rows_read,
       rows_inserted = excluded.rows_inserted, rows_updated = excluded.rows_updated,
       rows_unchanged = excluded.rows_unchanged, rows_rejected = excluded.rows_rejected,
       rows_deleted = excluded.rows_deleted, bytes = excluded.bytes,
       lines_committed = greatest(sync_days.lines_committed, excluded.lines_committed),
       finished_at = now(), last_error = null, last_error_code = null, last_error_at = null,
       next_attempt_at = null,
       attempt = case when sync_days._load_id is distinct from excluded._load_id then 1 else sync_days.attempt end,
       _load_id = excluded._load_id, _loaded_at = now(),
       pulled_at = coalesce(excluded.pulled_at, sync_days.pulled_at)`,
    [
      d.day,
      load.open ? 'partial' : load.complete ? 'complete' : 'pending',
      d.rowsRead,
      d.inserted,
      d.updated,
      d.unchanged,
      d.rejected,
      load.bytes,
      load.linesCommitted,
      load.loadId,
    ],
  );
}

/**
 * Whether a day's export was known complete and why not, and the deletes the guard held (written
 * only for a complete export: an incomplete one deleted nothing, so there was nothing to hold), and
 * why applying them needs `deletes apply --force` (null: it does not).
 */
export async function recordDayExport(
  client: LoaderClient,
  day: string,
  e: {
    incompleteReason: string | null;
    deletesHeld: number;
    heldReason: string | null;
    forceReason: string | null;
  },
): Promise<void> {
  await client.query(
    `update sync_days set export_complete = $2, export_incomplete_reason = $3,
       deletes_held = case when $2 then $4 else deletes_held end,
       deletes_held_reason = case when $2 then $5 else deletes_held_reason end,
       deletes_force_reason = case when $2 then $6 else deletes_force_reason end
     where day = $1`,
    [day, e.incompleteReason === null, e.incompleteReason, e.deletesHeld, e.heldReason, e.forceReason],
  );
}
