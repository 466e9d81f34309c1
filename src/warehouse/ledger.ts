import { sql } from 'kysely';
import type pg from 'pg';
import type { LoadCounts } from '../common/counts.ts';
import type { DayStatus, Executor, RunKind, RunStatus, SyncDay } from './types.ts';

/**
 * The ledger: the only writer of `sync_days` and `sync_runs` (test/architecture/ledger-owner.test.ts
 * holds every other file of the source to reading them; the migrations aside).
 *
 * `sync_days`, one row per UTC day of the export, and every transition of it: running (a load
 * starts or takes the day over), complete, pending or partial (the loader's finalize), released
 * (a load that ended without finishing), its held deletes, and the watermark read from them.
 *
 * `sync_runs`, one row per run (a sync, a backfill, an intraday pull, an import, a replay): begun,
 * alive, ended. Every kind of run goes through the same functions: a workflow's by its
 * `beginRun`/`endRun` activities, an import's and a replay's directly (import-file.ts, replay.ts).
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
 * Marks a day as loading under a run id; counts one more attempt in `attempts` (every attempt
 * of every load) and records which attempt of its load this is in `attempt`. A retry of the same
 * load keeps the error its last attempt left (the day reads "retrying" until it loads); a new
 * load starts clean. A day still `running` under another run id is taken over: only one load of
 * a day runs at a time (its workflow id), so that load died without closing the day (terminated,
 * its worker gone). Its id is kept in `taken_over_from` and returned.
 */
export async function markDayRunning(
  db: Executor,
  day: string,
  runId: string,
  attempt: LoadAttempt = FIRST_ATTEMPT,
): Promise<{ takenOverFrom: string | null }> {
  const retry = sql<boolean>`(${attempt.number}::int > 1 and sync_days._load_id = ${runId}::text)`;
  const r = await db
    .insertInto('sync_days')
    .values({
      day,
      status: 'running',
      _load_id: runId,
      started_at: new Date(),
      attempts: 1,
      attempt: attempt.number,
      max_attempts: attempt.maxAttempts,
      progress_at: sql`now()`,
    })
    .onConflict((oc) =>
      oc.column('day').doUpdateSet((eb) => ({
        status: 'running',
        _load_id: runId,
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
        taken_over_from: sql`case when sync_days.status = 'running' and sync_days._load_id is distinct from ${runId}::text
          then sync_days._load_id end`,
      })),
    )
    .returning('taken_over_from')
    .executeTakeFirstOrThrow();
  return { takenOverFrom: r.taken_over_from };
}

/** A sign of life of a load of a day, while the day is still running under it. */
export async function touchDay(db: Executor, day: string, runId: string): Promise<void> {
  await db
    .updateTable('sync_days')
    .set({ progress_at: sql`now()` })
    .where('day', '=', day)
    .where('_load_id', '=', runId)
    .where('status', '=', 'running')
    .execute();
}

/** An attempt of a day's load that failed: what failed, and which attempt it was. */
export interface FailedAttempt {
  runId: string;
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
    .where('_load_id', '=', a.runId)
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
   * Only while the day is still running under this run id (a later load may have taken it over
   * meanwhile), or is an open day waiting for this load's next attempt; without it the day is
   * released whatever its state.
   */
  runId?: string;
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
  if (end.runId !== undefined) {
    q = q
      .where('_load_id', '=', end.runId)
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
    suppressed: d.rows_suppressed,
    deleted: d.rows_deleted,
    threadsQueued: 0,
  };
}

/**
 * The day's last load when it completed at or after `since` (another run loaded it meanwhile):
 * its run id and figures; null when it did not.
 */
export async function findDayCompletedSince(
  db: Executor,
  day: string,
  since: Date,
): Promise<{ runId: string | null; counts: LoadCounts } | null> {
  const r = await db
    .selectFrom('sync_days')
    .selectAll()
    .where('day', '=', day)
    .where('status', '=', 'complete')
    .where('finished_at', '>=', since)
    .executeTakeFirst();
  return r ? { runId: r._load_id, counts: dayCounts(r) } : null;
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
  'rowsRead' | 'inserted' | 'updated' | 'unchanged' | 'rejected' | 'suppressed'
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
  load: { runId: string; complete: boolean; bytes: number; linesCommitted: number; open?: boolean },
): Promise<void> {
  await client.query(
    `insert into sync_days (day, status, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected,
       rows_suppressed, rows_deleted, bytes, lines_committed, started_at, finished_at, _load_id, attempts, attempt,
       pulled_at)
     values ($1, $2, $3, $4, $5, $6, $7, $11, ${deletedRowsOf('$1::date')}, $8, $9, now(), now(), $10, 1, 1,
       case when $2 = 'partial' then now() end)
     on conflict (day) do update set status = excluded.status, rows_read = excluded.rows_read,
       rows_inserted = excluded.rows_inserted, rows_updated = excluded.rows_updated,
       rows_unchanged = excluded.rows_unchanged, rows_rejected = excluded.rows_rejected,
       rows_suppressed = excluded.rows_suppressed, rows_deleted = excluded.rows_deleted, bytes = excluded.bytes,
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
      load.runId,
      d.suppressed,
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

// ---- sync_runs ------------------------------------------------------------------------------

/** A run as it begins; its row is keyed by its run id (`load_id`). */
export interface StartRunInput {
  runId: string;
  kind: RunKind;
  windowStart?: string | null;
  windowEnd?: string | null;
  source?: string | null;
  workflowId?: string | null;
}

/**
 * Records a run; starting the same run id again (a resumed import, a retried activity) keeps its
 * row. Other runs still marked running that `run_liveness` finds abandoned (no sign of life for
 * `abandoned_after()`) are marked so (a terminated workflow, a killed import: nothing else would ever close them);
 * their ids are returned.
 */
export async function startRun(db: Executor, r: StartRunInput): Promise<{ abandoned: string[] }> {
  await db
    .insertInto('sync_runs')
    .values({
      load_id: r.runId,
      kind: r.kind,
      window_start: r.windowStart ?? null,
      window_end: r.windowEnd ?? null,
      source: r.source ?? null,
      workflow_id: r.workflowId ?? null,
      status: 'running',
    })
    .onConflict((oc) =>
      oc
        .column('load_id')
        .doUpdateSet({ status: 'running', finished_at: null, error: null, progress_at: sql`now()` }),
    )
    .execute();
  return { abandoned: await abandonStaleRuns(db, r.runId) };
}

/** Marks runs abandoned that read `running` yet `run_liveness` finds abandoned. */
export async function abandonStaleRuns(db: Executor, byRunId: string): Promise<string[]> {
  const res = await sql<{ load_id: string }>`
    update sync_runs r
    set status = 'abandoned', finished_at = now(),
        error = 'no sign of life since ' || to_char(l.alive_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS')
          || ' UTC (terminated, or its worker is gone); marked abandoned by run ' || ${byRunId}::text
    from run_liveness l
    where l.load_id = r.load_id and l.abandoned and r.status = 'running' and r.load_id <> ${byRunId}
    returning r.load_id`.execute(db);
  return res.rows.map((x) => x.load_id);
}

/**
 * A sign of life of a run, and of its load of `day`: what its activities call as they heartbeat.
 * A run marked abandoned that shows one is running after all (its workers were only away).
 */
export async function touchRun(db: Executor, runId: string, day?: string): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set((eb) => ({
      progress_at: sql`now()`,
      status: eb
        .case()
        .when('status', '=', 'abandoned')
        .then(eb.val<RunStatus>('running'))
        .else(eb.ref('status'))
        .end(),
      finished_at: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('finished_at')).end(),
      error: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('error')).end(),
    }))
    .where('load_id', '=', runId)
    .execute();
  if (day !== undefined) await touchDay(db, day, runId);
}

/** A run's status, or undefined when no run has that run id. */
export async function runStatus(db: Executor, runId: string): Promise<RunStatus | undefined> {
  const r = await db.selectFrom('sync_runs').select('status').where('load_id', '=', runId).executeTakeFirst();
  return r?.status;
}

/**
 * Writes how a run ended in its ledger row: status, error and, when given, its totals (a field
 * missing from `totals` is written 0; without `totals` the row's counts stay as they are).
 */
export async function closeRun(
  db: Executor,
  runId: string,
  status: Exclude<RunStatus, 'running'>,
  totals?: Partial<Readonly<LoadCounts>>,
  error?: string,
): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set({
      status,
      finished_at: new Date(),
      error: error ?? null,
      ...(totals
        ? {
            rows_read: totals.rowsRead ?? 0,
            rows_inserted: totals.inserted ?? 0,
            rows_updated: totals.updated ?? 0,
            rows_unchanged: totals.unchanged ?? 0,
            rows_rejected: totals.rejected ?? 0,
            rows_suppressed: totals.suppressed ?? 0,
            rows_deleted: totals.deleted ?? 0,
            bytes_read: totals.bytesRead ?? 0,
          }
        : {}),
    })
    .where('load_id', '=', runId)
    .execute();
}

// ---- the held deletes of sync_days -----------------------------------------------------------

/**
 * A day whose held deletes were applied (`deletes apply`), in the caller's transaction after the
 * rows were marked deleted: nothing held, no reason, `rows_deleted` counted again (a statement
 * sees the rows its transaction's earlier ones wrote).
 */
export async function clearDayHold(tx: Executor, day: string): Promise<void> {
  await sql`
    update sync_days set deletes_held = 0, deletes_held_reason = null, deletes_force_reason = null,
      rows_deleted = ${sql.raw(deletedRowsOf('sync_days.day'))}
    where day = ${day}::date`.execute(tx);
}

/**
 * The ledger's held figures of these days set again from `held_deletes` (after a load took ids out
 * of their held sets): the count, and no reason left for a day with nothing held.
 */
export async function recountHeld(client: LoaderClient, days: string[]): Promise<void> {
  if (days.length === 0) return;
  await client.query(
    `update sync_days d set deletes_held = c.n,
       deletes_held_reason = case when c.n = 0 then null else d.deletes_held_reason end,
       deletes_force_reason = case when c.n = 0 then null else d.deletes_force_reason end
     from (select x.day, (select count(*) from held_deletes h where h.day = x.day)::bigint as n
           from unnest($1::date[]) as x(day)) c
     where d.day = c.day`,
    [days],
  );
}

/** Marks these days' held deletes as applicable only with --force, for `reason`. */
export async function requireForce(client: LoaderClient, days: string[], reason: string): Promise<void> {
  if (days.length === 0) return;
  await client.query(
    `update sync_days set deletes_force_reason = $2
     where day = any($1::date[]) and exists (select 1 from held_deletes h where h.day = sync_days.day)`,
    [days, reason],
  );
}

// ---- the loader's batches ------------------------------------------------------------------

const LEDGER_DAY_SQL = `
  update sync_days set lines_committed = (select min(lines_committed) from load_checkpoints where load_key = $1)
  where day = $2`;

/**
 * The day's `lines_committed` mirrors its load's checkpoint (the slowest partition's), in the
 * transaction of each batch of a day load (merge.ts): the figure status and the dashboard show
 * while the day loads. `loadId` is the load's id (its checkpoint's `load_key`).
 */
export async function mirrorDayCheckpoint(client: LoaderClient, loadId: string, day: string): Promise<void> {
  await client.query({ name: 'crs_ledger_day', text: LEDGER_DAY_SQL, values: [loadId, day] });
}
