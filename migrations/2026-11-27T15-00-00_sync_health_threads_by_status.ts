import { type Kysely, sql } from 'kysely';

/**
 * `sync_health` counts the pending and the failed threads by their status index instead of in one
 * pass over every thread, and finds the oldest pending request by that index instead of reading
 * every pending thread: the two read all of `threads` and every pending thread's page (1.25M and
 * 12,500 at bench:bi's 10M messages; ~280 and ~150 ms of the view's ~440 ms; the `/health` page,
 * `crs-sync status`, the metrics and the alerts all read the view). The same values; the view is
 * 2026-11-25T11-00-00's otherwise, column for column.
 *
 * Frozen in time: never import application code here.
 */
const ENR_BY_STATUS = `    enr as (
      select (select count(*) from threads where enrich_status = 'pending') as threads_pending,
             (select count(*) from threads where enrich_status = 'failed') as threads_failed
    ),`;

/**
 * The oldest pending thread's wait: the first entry of the status index, and the load time of any
 * pending thread never requested (its requested time is null) by the same index. The same value
 * as `min(coalesce(enrich_requested_at, _loaded_at))` over the pending threads, without reading
 * each of them (12,500 scattered heap pages, ~150-250 ms, at bench:bi's size).
 */
const AGE_BY_INDEX = `             coalesce(extract(epoch from now() - least(
                 (select min(t.enrich_requested_at) from threads t where t.enrich_status = 'pending'),
                 (select min(t._loaded_at) from threads t
                   where t.enrich_status = 'pending' and t.enrich_requested_at is null)))::bigint, 0) as enrich_age,`;

// 2026-11-25T11-00-00's, for down.
const AGE_EACH_ROW = `             coalesce((select extract(epoch from now() - min(coalesce(t.enrich_requested_at, t._loaded_at)))::bigint
                       from threads t where t.enrich_status = 'pending'), 0) as enrich_age,`;
const ENR_ONE_PASS = `    enr as (
      select count(*) filter (where enrich_status = 'pending') as threads_pending,
             count(*) filter (where enrich_status = 'failed') as threads_failed
      from threads
    ),`;

const view = (enr: string, age: string) => sql`
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
${sql.raw(enr)}
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
    open_day as (
      select day, pulled_at from sync_days
      where pulled_at is not null and status <> 'complete'
      order by day desc limit 1
    ),
    fresh as (
      select extract(epoch from now() - ((wm.watermark + 1)::timestamp at time zone 'UTC'))::bigint as export_age,
             exists (select 1 from sync_days f
                     where f.status = 'failed' and (wm.watermark is null or f.day > wm.watermark)) as export_failing,
${sql.raw(age)}
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
           greatest(0, floor(extract(epoch from now() - open_day.pulled_at)))::bigint as open_day_age_seconds
    from wm cross join days cross join last_ok cross join rej cross join enr cross join held cross join gone
         cross join sla cross join fresh
    left join last_run on true
    left join open_day on true`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`drop view if exists sync_health`.execute(db);
  await view(ENR_BY_STATUS, AGE_BY_INDEX).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop view if exists sync_health`.execute(db);
  await view(ENR_ONE_PASS, AGE_EACH_ROW).execute(db);
}
