import { type Kysely, sql } from 'kysely';

/**
 * A day's retries in the ledger: a load attempt that fails while Temporal still retries it leaves
 * the day `running` (an intraday pull of the open day: `partial`) with what failed, instead of
 * `failed`; the day becomes `failed` only when its load stops retrying (attempts exhausted, or an
 * error no retry can fix).
 *
 * - `sync_days.attempt`: the attempt number of the day's current (or last) load, Temporal's
 *   activity attempt number (1 for a load outside Temporal); `attempts` still counts every load
 *   attempt the day ever started. Rows before this migration: a failed day's `attempts`, else 1
 *   once loaded.
 * - `max_attempts`: the load's retry policy's limit (null: none known).
 * - `last_error_code`, `last_error_at`: the code of `last_error` (a CrsError code or the failure
 *   type) and when it happened. `last_error` is kept while the same load retries.
 * - `next_attempt_at`: when Temporal runs the next attempt, from the retry policy; null unless the
 *   load waits for one.
 * - `sync_health` as 2026-11-27T15-00-00 left it, column for column, plus: `retrying_days` (days
 *   `running` whose load has a failed attempt: retrying), the earliest of them with its attempt,
 *   limit, error, code, time of the error and next attempt (`retrying_*`), and the open day's
 *   error, its code and its next attempt (`open_day_last_error`, `open_day_error_code`,
 *   `open_day_next_attempt_at`). The open day is now also a `partial` day no pull of which has
 *   finished yet (its first pulls failed): its `open_day_pulled_at` is null, and its age runs from
 *   the start of the day.
 *
 * Frozen in time: never import application code here.
 */

// 2026-11-27T15-00-00's, for down.
const OPEN_DAY_PULLED = `    open_day as (
      select day, pulled_at from sync_days
      where pulled_at is not null and status <> 'complete'
      order by day desc limit 1
    ),`;
const AGE_SINCE_PULL = `           greatest(0, floor(extract(epoch from now() - open_day.pulled_at)))::bigint as open_day_age_seconds`;

const OPEN_DAY_PARTIAL = `    open_day as (
      select day, pulled_at, last_error, last_error_code, next_attempt_at,
             coalesce(pulled_at, day::timestamp at time zone 'UTC') as fresh_at
      from sync_days
      where (pulled_at is not null or status = 'partial') and status <> 'complete'
      order by day desc limit 1
    ),
    retrying as (
      select count(*) over () as n, day, attempt, max_attempts, last_error, last_error_code,
             last_error_at, next_attempt_at
      from sync_days
      where status = 'running' and last_error is not null
      order by day limit 1
    ),`;
const AGE_AND_RETRIES = `           greatest(0, floor(extract(epoch from now() - open_day.fresh_at)))::bigint as open_day_age_seconds,
           coalesce(retrying.n, 0)::bigint as retrying_days,
           retrying.day as retrying_day, retrying.attempt as retrying_attempt,
           retrying.max_attempts as retrying_max_attempts, retrying.last_error as retrying_last_error,
           retrying.last_error_code as retrying_error_code, retrying.last_error_at as retrying_last_error_at,
           retrying.next_attempt_at as retrying_next_attempt_at,
           open_day.last_error as open_day_last_error, open_day.last_error_code as open_day_error_code,
           open_day.next_attempt_at as open_day_next_attempt_at`;

const view = (openDay: string, tailColumns: string, tailJoins: string) => sql`
    create view sync_health as
    with d as (
      select day, status, row_number() over (order by day) as n,
             (day - min(day) over ())::int + 1 as span
      from sync_days
    ),
    first_gap as (
      select min(day) as day from d where status <> 'complete' or n <> span
    ),
    wm as (
      select max(d.day) as watermark from d, first_gap g
      where d.status = 'complete' and (g.day is null or d.day < g.day)
    ),
    days as (
      select count(*) filter (where status = 'complete') as complete_days,
             count(*) filter (where status = 'failed') as failed_days,
             count(*) filter (where status = 'running') as running_days,
             count(*) filter (where status = 'pending') as pending_days,
             count(*) filter (where status = 'partial') as partial_days,
             max(finished_at) filter (where status = 'partial') as partial_pulled_at,
             min(day) as first_day, max(day) as last_day,
             count(*) filter (where export_complete = false) as incomplete_export_days
      from sync_days
    ),
    last_run as (
      select load_id, kind, status, started_at, finished_at, error
      from sync_runs order by started_at desc, load_id desc limit 1
    ),
    last_ok as (
      select max(finished_at) as at from sync_runs where status = 'succeeded'
    ),
    rej as (
      select count(*) filter (where replayed_at is null) as open_rejects,
             count(*) filter (where replayed_at is null and source = 'export') as open_rejects_export,
             count(*) filter (where replayed_at is null and source = 'history') as open_rejects_history,
             count(*) filter (where replayed_at is null and source = 'artifact') as open_rejects_artifact,
             count(*) filter (where replayed_at is null and source = 'file') as open_rejects_file
      from rejected_records
    ),
    enr as (
      select (select count(*) from threads where enrich_status = 'pending') as threads_pending,
             (select count(*) from threads where enrich_status = 'failed') as threads_failed
    ),
    held as (
      select count(*) as held_deletes, count(distinct day) as held_delete_days from held_deletes
    ),
    gone as (
      select (select count(*) from day_liveness where abandoned) as abandoned_days,
             (select count(*) from run_liveness where abandoned) as abandoned_runs
    ),
    sla as (
      select coalesce((select sla_seconds from freshness_sla), 93600)::bigint as s
    ),
${sql.raw(openDay)}
    fresh as (
      select extract(epoch from now() - ((wm.watermark + 1)::timestamp at time zone 'UTC'))::bigint as export_age,
             exists (select 1 from sync_days f
                     where f.status = 'failed' and (wm.watermark is null or f.day > wm.watermark)) as export_failing,
             coalesce(extract(epoch from now() - least(
                 (select min(t.enrich_requested_at) from threads t where t.enrich_status = 'pending'),
                 (select min(t._loaded_at) from threads t
                   where t.enrich_status = 'pending' and t.enrich_requested_at is null)))::bigint, 0) as enrich_age,
             exists (select 1 from threads t where t.enrich_status = 'failed') as enrich_failing
      from wm
    )
    select wm.watermark,
           case when wm.watermark is null then null
                else greatest(0, ((now() at time zone 'UTC')::date - 1) - wm.watermark) end as lag_days,
           days.first_day, days.last_day,
           days.complete_days::bigint, days.failed_days::bigint, days.running_days::bigint,
           days.pending_days::bigint,
           days.partial_days::bigint, days.partial_pulled_at,
           last_run.load_id as last_run_load_id, last_run.kind as last_run_kind,
           last_run.status as last_run_status, last_run.started_at as last_run_started_at,
           last_run.finished_at as last_run_finished_at, last_run.error as last_run_error,
           last_ok.at as last_success_at,
           rej.open_rejects::bigint, rej.open_rejects_export::bigint, rej.open_rejects_history::bigint,
           rej.open_rejects_artifact::bigint, rej.open_rejects_file::bigint,
           enr.threads_pending::bigint, enr.threads_failed::bigint,
           held.held_deletes::bigint, held.held_delete_days::bigint,
           days.incomplete_export_days::bigint,
           gone.abandoned_days::bigint, gone.abandoned_runs::bigint,
           sla.s as freshness_sla_seconds,
           fresh.export_age as export_age_seconds,
           case when fresh.export_failing then 'failing'
                when fresh.export_age is null or fresh.export_age > sla.s then 'late'
                else 'on_time' end as export_freshness,
           fresh.enrich_age as enrichment_age_seconds,
           case when fresh.enrich_failing then 'failing'
                when fresh.enrich_age > sla.s then 'late'
                else 'on_time' end as enrichment_freshness,
           open_day.day as open_day, open_day.pulled_at as open_day_pulled_at,
${sql.raw(tailColumns)}
    from wm cross join days cross join last_ok cross join rej cross join enr cross join held cross join gone
         cross join sla cross join fresh
    left join last_run on true
    left join open_day on true${sql.raw(tailJoins)}`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table sync_days
      add column if not exists attempt integer not null default 0,
      add column if not exists max_attempts integer,
      add column if not exists last_error_code text,
      add column if not exists last_error_at timestamptz,
      add column if not exists next_attempt_at timestamptz`.execute(db);
  await sql`
    update sync_days set attempt = case when status = 'failed' then attempts else 1 end
     where attempts > 0`.execute(db);
  await sql`drop view if exists sync_health`.execute(db);
  await view(
    OPEN_DAY_PARTIAL,
    AGE_AND_RETRIES,
    `
    left join retrying on true`,
  ).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop view if exists sync_health`.execute(db);
  await view(OPEN_DAY_PULLED, AGE_SINCE_PULL, '').execute(db);
  await sql`
    alter table sync_days
      drop column if exists attempt,
      drop column if exists max_attempts,
      drop column if exists last_error_code,
      drop column if exists last_error_at,
      drop column if exists next_attempt_at`.execute(db);
}
