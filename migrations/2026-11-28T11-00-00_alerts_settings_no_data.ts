import { type Kysely, sql } from 'kysely';

/**
 * Alerts decided by the deployment's settings, and no page before the first complete day.
 *
 * - `alert_settings` (one row): the alert settings every worker judges by, stored by the first
 *   check (a worker's start, or `crs-sync alerts check`) and changed only by
 *   `crs-sync alerts settings --store`: CRS_ALERT_QUARANTINE_SHARE, CRS_ALERT_BUDGET_WAIT, and
 *   `started_at`, the first check's time. CRS_FRESHNESS_SLA stays in `freshness_sla`, which
 *   `sync_health` reads, now written the same way (first check, or --store) instead of by the
 *   last check. A deployment that checked before has its `started_at` from its first trace (the
 *   SLA's row, a run, an incident).
 * - `sync_health.export_freshness` is `no_data` while no day is complete and the first check is
 *   less than the SLA ago (or none ran): a new deployment is given one SLA for its first day,
 *   and `freshness_late` does not page before. `export_no_data_until` says until when.
 * - `schema_drift` incidents become one per source: the open per-field incidents of a source
 *   become one (the oldest, re-keyed `schema_drift:<source>`); the others are closed quietly
 *   (their undelivered messages dropped: they were never announced, or the kept one was), so the
 *   upgrade sends no resolved message for each of them.
 *
 * The view is 2026-11-28T10-00-00's otherwise, column for column. Frozen in time: never import
 * application code here.
 */
const STARTED = `    started as (
      select (select started_at from alert_settings) as started_at
    ),`;

// 2026-11-27T15-00-00's.
const EXPORT_STATE = `           case when fresh.export_failing then 'failing'
                when fresh.export_age is null or fresh.export_age > sla.s then 'late'
                else 'on_time' end as export_freshness,`;

// No complete day: no_data until one SLA after the first check (no check yet: no_data).
const EXPORT_STATE_NO_DATA = `           case when fresh.export_failing then 'failing'
                when fresh.export_age is null
                     and (started.started_at is null or now() < started.started_at + sla.s * interval '1 second')
                  then 'no_data'
                when fresh.export_age is null or fresh.export_age > sla.s then 'late'
                else 'on_time' end as export_freshness,`;

// When no_data turns late (null unless no_data; null too before the first check).
const NO_DATA_UNTIL = `,
           case when fresh.export_age is null and not fresh.export_failing
                     and now() < started.started_at + sla.s * interval '1 second'
                then started.started_at + sla.s * interval '1 second' end as export_no_data_until`;

// 2026-11-28T10-00-00's view (the days' retries), with the state no_data when `noData`.
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

const view = (noData: boolean) => sql`
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
${sql.raw(noData ? STARTED : '')}
${sql.raw(OPEN_DAY_PARTIAL)}
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
${sql.raw(noData ? EXPORT_STATE_NO_DATA : EXPORT_STATE)}
           fresh.enrich_age as enrichment_age_seconds,
           case when fresh.enrich_failing then 'failing'
                when fresh.enrich_age > sla.s then 'late'
                else 'on_time' end as enrichment_freshness,
           open_day.day as open_day, open_day.pulled_at as open_day_pulled_at,
${sql.raw(AGE_AND_RETRIES)}${sql.raw(noData ? NO_DATA_UNTIL : '')}
    from wm cross join days cross join last_ok cross join rej cross join enr cross join held cross join gone
         cross join sla cross join fresh${sql.raw(noData ? ' cross join started' : '')}
    left join last_run on true
    left join open_day on true
    left join retrying on true`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table alert_settings (
      one boolean primary key default true check (one),
      quarantine_share float8 check (quarantine_share > 0 and quarantine_share <= 1),
      budget_wait_ms integer check (budget_wait_ms > 0),
      started_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  // A deployment that ran checks before: its start is its first trace, not this migration.
  await sql`
    insert into alert_settings (started_at)
    select t from (select least((select updated_at from freshness_sla),
                                (select min(started_at) from sync_runs),
                                (select min(opened_at) from alert_incidents)) as t) s
    where t is not null`.execute(db);

  // One open schema_drift incident per source: the oldest of each, re-keyed; the rest closed.
  await sql`
    with ranked as (
      select incident, split_part(key, ':', 2) as source,
             row_number() over (partition by split_part(key, ':', 2) order by opened_at, incident) as n
      from alert_incidents
      where kind = 'schema_drift' and resolved_at is null
    ), closed as (
      update alert_incidents i set resolved_at = now()
      from ranked r where r.incident = i.incident and r.n > 1
      returning i.incident
    )
    delete from alert_deliveries d using closed c where d.incident = c.incident and d.sent_at is null`.execute(
    db,
  );
  await sql`
    update alert_incidents set key = 'schema_drift:' || split_part(key, ':', 2)
    where kind = 'schema_drift' and resolved_at is null`.execute(db);

  await sql`drop view if exists sync_health`.execute(db);
  await view(true).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop view if exists sync_health`.execute(db);
  await view(false).execute(db);
  await sql`drop table if exists alert_settings`.execute(db);
}
