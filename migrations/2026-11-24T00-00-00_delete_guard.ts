import { type Kysely, sql } from 'kysely';

/**
 * The deletion safeguard. A day's export that is not known complete (an HTML or JSON error page
 * with status 200, an empty body, a last line without its newline) deletes nothing, and a known
 * complete one that would soft-delete more than CRS_DELETE_GUARD percent of the day's live rows
 * holds those deletes in `held_deletes` until an operator applies them (`crs-sync deletes apply`).
 *
 * `load_seen` replaces the loader's in-memory set of the message ids a load saw: spilled in
 * chunks while the load runs, anti-joined by the delete step, emptied when the load is done.
 * UNLOGGED: it is scratch state of one attempt, rebuilt by every attempt from the source, so it
 * need not survive a crash (PostgreSQL empties it after one) and skips the WAL. No index: it is
 * only ever read whole for one load key, which a hash anti-join does best.
 *
 * `sync_health` is re-created with its columns unchanged and the new ones at the end.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    alter table sync_days
      add column export_complete boolean,
      add column export_incomplete_reason text,
      add column deletes_held bigint not null default 0,
      add column deletes_held_reason text`.execute(db);

  await sql`
    create table held_deletes (
      day date not null,
      message_id uuid not null,
      load_id text not null,
      held_at timestamptz not null default now(),
      primary key (day, message_id)
    )`.execute(db);

  await sql`create unlogged table load_seen (load_key text not null, message_id uuid not null)`.execute(db);

  await sql`drop view if exists sync_health`.execute(db);
  await sql`
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
      select count(*) filter (where enrich_status = 'pending') as threads_pending,
             count(*) filter (where enrich_status = 'failed') as threads_failed
      from threads
    ),
    held as (
      select count(*) as held_deletes, count(distinct day) as held_delete_days from held_deletes
    )
    select wm.watermark,
           case when wm.watermark is null then null
                else greatest(0, ((now() at time zone 'UTC')::date - 1) - wm.watermark) end as lag_days,
           days.first_day, days.last_day,
           days.complete_days::bigint, days.failed_days::bigint, days.running_days::bigint,
           days.pending_days::bigint,
           last_run.load_id as last_run_load_id, last_run.kind as last_run_kind,
           last_run.status as last_run_status, last_run.started_at as last_run_started_at,
           last_run.finished_at as last_run_finished_at, last_run.error as last_run_error,
           last_ok.at as last_success_at,
           rej.open_rejects::bigint, rej.open_rejects_export::bigint, rej.open_rejects_history::bigint,
           rej.open_rejects_artifact::bigint, rej.open_rejects_file::bigint,
           enr.threads_pending::bigint, enr.threads_failed::bigint,
           held.held_deletes::bigint, held.held_delete_days::bigint,
           days.incomplete_export_days::bigint
    from wm cross join days cross join last_ok cross join rej cross join enr cross join held
    left join last_run on true`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // Back to the view of the BI migration, verbatim.
  await sql`drop view if exists sync_health`.execute(db);
  await sql`
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
             min(day) as first_day, max(day) as last_day
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
      select count(*) filter (where enrich_status = 'pending') as threads_pending,
             count(*) filter (where enrich_status = 'failed') as threads_failed
      from threads
    )
    select wm.watermark,
           case when wm.watermark is null then null
                else greatest(0, ((now() at time zone 'UTC')::date - 1) - wm.watermark) end as lag_days,
           days.first_day, days.last_day,
           days.complete_days::bigint, days.failed_days::bigint, days.running_days::bigint,
           days.pending_days::bigint,
           last_run.load_id as last_run_load_id, last_run.kind as last_run_kind,
           last_run.status as last_run_status, last_run.started_at as last_run_started_at,
           last_run.finished_at as last_run_finished_at, last_run.error as last_run_error,
           last_ok.at as last_success_at,
           rej.open_rejects::bigint, rej.open_rejects_export::bigint, rej.open_rejects_history::bigint,
           rej.open_rejects_artifact::bigint, rej.open_rejects_file::bigint,
           enr.threads_pending::bigint, enr.threads_failed::bigint
    from wm cross join days cross join last_ok cross join rej cross join enr
    left join last_run on true`.execute(db);
  await sql`drop table if exists load_seen`.execute(db);
  await sql`drop table if exists held_deletes`.execute(db);
  await sql`
    alter table sync_days
      drop column if exists export_complete,
      drop column if exists export_incomplete_reason,
      drop column if exists deletes_held,
      drop column if exists deletes_held_reason`.execute(db);
}
