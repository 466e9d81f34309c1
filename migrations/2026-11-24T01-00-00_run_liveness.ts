import { type Kysely, sql } from 'kysely';

/**
 * Run states that stay true when a run cannot say how it ended.
 *
 * A terminated workflow (or one whose worker is gone for good) never runs its own clean-up, so
 * its `sync_runs` and `sync_days` rows would read `running` forever. `progress_at` is the last
 * sign of life of a run or a day load (its start, and the heartbeats of its activities; batch
 * commits are seen through `load_checkpoints.updated_at`): one silent for longer than the
 * staleness threshold is shown as abandoned, a new run marks such runs `abandoned`, and the next
 * load of such a day takes it over, noting whose it was in `taken_over_from`.
 *
 * `load_day_deletes` holds the soft-deletes of a load per day, written in the same transaction as
 * the deletes themselves: a finalize retried after that commit finds nothing left to delete, and
 * the day's `rows_deleted` is still what the load deleted (it read 0 before).
 *
 * `sync_health` is re-created from the delete guard's definition with `abandoned_days` and
 * `abandoned_runs` at the end.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table sync_runs add column progress_at timestamptz not null default now()`.execute(db);
  await sql`alter table sync_runs drop constraint if exists sync_runs_status_check`.execute(db);
  await sql`
    alter table sync_runs add constraint sync_runs_status_check
      check (status in ('running', 'succeeded', 'failed', 'cancelled', 'abandoned'))`.execute(db);
  await sql`
    alter table sync_days
      add column progress_at timestamptz,
      add column taken_over_from text`.execute(db);
  await sql`update sync_days set progress_at = coalesce(finished_at, started_at, _loaded_at)`.execute(db);
  await sql`
    create table load_day_deletes (
      load_key text not null,
      day date not null,
      rows_deleted bigint not null default 0,
      primary key (load_key, day)
    )`.execute(db);

  // sync_health as the delete guard's migration left it, plus the abandoned runs and days. The
  // 14 minutes are the staleness threshold of this version (workflows/liveness.ts, STALE_AFTER_MS).
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
    ),
    gone as (
      select
        (select count(*) from sync_days d where d.status = 'running' and greatest(d.progress_at,
           (select max(c.updated_at) from load_checkpoints c
            where c.load_key = d._load_id || ':' || to_char(d.day, 'YYYY-MM-DD'))) < now() - interval '14 minutes'
        ) as abandoned_days,
        (select count(*) from sync_runs r where r.status = 'abandoned' or (r.status = 'running' and greatest(r.progress_at,
           (select max(c.updated_at) from load_checkpoints c where c.load_key = r.load_id)) < now() - interval '14 minutes')
        ) as abandoned_runs
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
           days.incomplete_export_days::bigint,
           gone.abandoned_days::bigint, gone.abandoned_runs::bigint
    from wm cross join days cross join last_ok cross join rej cross join enr cross join held cross join gone
    left join last_run on true`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // Back to the view of the delete guard's migration, verbatim.
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
  await sql`drop table if exists load_day_deletes`.execute(db);
  await sql`alter table sync_days drop column if exists progress_at, drop column if exists taken_over_from`.execute(
    db,
  );
  await sql`update sync_runs set status = 'failed' where status = 'abandoned'`.execute(db);
  await sql`alter table sync_runs drop constraint if exists sync_runs_status_check`.execute(db);
  await sql`
    alter table sync_runs add constraint sync_runs_status_check
      check (status in ('running', 'succeeded', 'failed', 'cancelled'))`.execute(db);
  await sql`alter table sync_runs drop column if exists progress_at`.execute(db);
}
