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
}

export async function down(db: Kysely<any>): Promise<void> {
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
