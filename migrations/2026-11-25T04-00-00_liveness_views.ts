import { type Kysely, sql } from 'kysely';

/**
 * The "abandoned" rule in one place. A run or a day's load that reads `running` is abandoned
 * when its last sign of life is older than `abandoned_after()`; the last sign of life is its
 * `progress_at` (its start, its activities' heartbeats) or its load's last batch commit (a
 * checkpoint row's `updated_at`; an import's load key is its load id, an export day's the load id
 * and the day). Until now `sync_health` and the application each wrote that SQL and the 14
 * minutes; here the views `run_liveness` and `day_liveness` say it once, `sync_health` counts
 * from them, and the application reads them (`crs-sync status`, a new run marking the abandoned
 * ones).
 *
 * The 14 minutes are the staleness threshold of this version: twice the longest silence of a
 * live run under the activity timeouts (the application checks that the two agree). A change of
 * those timeouts that moves it is a new migration that replaces `abandoned_after()`.
 *
 * One difference from the old `sync_health`: a running day with no sign of life at all (no
 * `progress_at`, no checkpoint) counts as abandoned, as `crs-sync status` always showed it.
 * `sync_health` is otherwise the run liveness migration's, verbatim.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function abandoned_after() returns interval
    language sql immutable as $$ select interval '14 minutes' $$`.execute(db);
  await sql`
    create view run_liveness as
    select r.load_id, a.alive_at,
           r.status = 'abandoned'
             or (r.status = 'running' and (a.alive_at is null or a.alive_at < now() - abandoned_after())) as abandoned
    from sync_runs r
    cross join lateral (
      select greatest(r.progress_at,
        (select max(c.updated_at) from load_checkpoints c where c.load_key = r.load_id)) as alive_at
    ) a`.execute(db);
  await sql`
    create view day_liveness as
    select d.day, d._load_id as load_id, a.alive_at,
           d.status = 'running' and (a.alive_at is null or a.alive_at < now() - abandoned_after()) as abandoned
    from sync_days d
    cross join lateral (
      select greatest(d.progress_at,
        (select max(c.updated_at) from load_checkpoints c
         where c.load_key = d._load_id || ':' || to_char(d.day, 'YYYY-MM-DD'))) as alive_at
    ) a`.execute(db);
  await sql`drop view if exists sync_health`.execute(db);
  await sql`create view sync_health as ${sql.raw(syncHealth(GONE_FROM_VIEWS))}`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop view if exists sync_health`.execute(db);
  await sql`create view sync_health as ${sql.raw(syncHealth(GONE_INLINE))}`.execute(db);
  await sql`drop view if exists day_liveness`.execute(db);
  await sql`drop view if exists run_liveness`.execute(db);
  await sql`drop function if exists abandoned_after()`.execute(db);
}

const GONE_FROM_VIEWS = `
    gone as (
      select (select count(*) from day_liveness where abandoned) as abandoned_days,
             (select count(*) from run_liveness where abandoned) as abandoned_runs
`;

/** The run liveness migration's own counts, for down(). */
const GONE_INLINE = `
    gone as (
      select
        (select count(*) from sync_days d where d.status = 'running' and greatest(d.progress_at,
           (select max(c.updated_at) from load_checkpoints c
            where c.load_key = d._load_id || ':' || to_char(d.day, 'YYYY-MM-DD'))) < now() - interval '14 minutes'
        ) as abandoned_days,
        (select count(*) from sync_runs r where r.status = 'abandoned' or (r.status = 'running' and greatest(r.progress_at,
           (select max(c.updated_at) from load_checkpoints c where c.load_key = r.load_id)) < now() - interval '14 minutes')
        ) as abandoned_runs
`;

/** sync_health as the run liveness migration made it, with its `gone` counts given. */
function syncHealth(gone: string): string {
  return `
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
${gone.trim()}
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
    left join last_run on true`;
}
