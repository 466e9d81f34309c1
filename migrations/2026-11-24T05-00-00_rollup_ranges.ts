import { type Kysely, sql } from 'kysely';

/**
 * Distinct counts over any range of days, from rollups (the upkeep then in rollup-ranges.ts; these
 * tables were folded into the per-day rollups by 2026-11-24T06-00-00_rollup_days_in_place.ts;
 * docs/decisions/0010-rollups-and-partitioning.md, "Distinct counts over a range").
 *
 * A user or thread active on several days of a range counts once, so per-day distinct counts do
 * not add up. These tables keep, for each day a user or a thread was active (live export rows),
 * the previous day it was active (`prev_date`). Within a range [a, b], an entity is counted on
 * the first of its days in the range, the only one whose previous active day is before `a` (or
 * none): `count(*) where message_date between a and b and (prev_date is null or prev_date < a)`
 * is the exact number of distinct entities, one index-only read of the range's rows, with no
 * sort or hash of keys.
 *
 * `rollup_thread_days` also carries what the dashboard breaks threads down by (the thread's
 * enrichment status and its depth bucket), so the breakdown is the same single read. The status
 * lives on `threads`, so a trigger marks a thread whose status changes (or which appears or goes
 * away) for the refresh, in the writer's transaction, like the other rollup marks.
 *
 * Existing rollups are current or marked; the new tables are filled here from them (the refresh
 * recomputes anything marked, and a rebuild recomputes all).
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table rollup_user_days (
      user_id uuid not null,
      message_date date not null,
      prev_date date,
      primary key (user_id, message_date)
    )`.execute(db);
  await sql`create index rollup_user_days_date_idx on rollup_user_days (message_date) include (prev_date)`.execute(
    db,
  );
  // depth: the thread's stored history entries, bucketed 0, 1-2, 3-5, 6-10, 11-20, 21+ (0 to 5).
  await sql`
    create table rollup_thread_days (
      thread_id uuid not null,
      message_date date not null,
      prev_date date,
      messages bigint not null,
      status text,
      depth smallint not null,
      primary key (thread_id, message_date)
    )`.execute(db);
  // One index for every read of a range (index-only): the counts and the breakdown read its
  // days; the top threads read each day's threads by messages, ties by id (src/dashboard/queries.ts).
  // One, not two: every refreshed thread-day is written to each index of the table.
  await sql`
    create index rollup_thread_days_date_idx on rollup_thread_days (message_date, messages desc, thread_id)
    include (prev_date, status, depth)`.execute(db);

  // Threads counted on their first day ever, by status and depth: a range that starts on or before
  // the data's first day (every day, the default "all") counts its threads from these few rows per
  // day instead of every first day of 1.25M threads (230-330 ms grouped, at 10M rows).
  await sql`
    create table rollup_thread_firsts (
      message_date date not null,
      status text not null,
      depth smallint not null,
      threads bigint not null,
      primary key (message_date, status, depth)
    )`.execute(db);
  // The same for users: their first days are few (one per user), so an index is enough.
  await sql`create index rollup_user_days_first_idx on rollup_user_days (message_date) where prev_date is null`.execute(
    db,
  );

  // Top users of a range: the range's per-user rows summed from the index alone (rows of a day
  // lie all over the heap: measured 12.8k heap blocks read for 30 days at 10M rows).
  await sql`
    create index rollup_user_daily_date_cover_idx on rollup_user_daily (message_date) include (user_id, messages)`.execute(
    db,
  );

  // Top threads of a range walk `rollup_threads` by all-time messages, ties by id: with the id in
  // the index the walk reads only what it takes (on (messages desc) alone PostgreSQL sorted all
  // 1.2M threads that tie at 8 messages for every page: 280 ms a page at 10M rows).
  await sql`drop index if exists rollup_threads_messages_idx`.execute(db);
  await sql`create index rollup_threads_messages_id_idx on rollup_threads (messages desc, thread_id)`.execute(
    db,
  );

  await sql`
    create function rollup_mark_thread_status() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        insert into rollup_dirty_threads select thread_id from new_rows;
      elsif tg_op = 'DELETE' then
        insert into rollup_dirty_threads select thread_id from old_rows;
      else
        insert into rollup_dirty_threads values (new.thread_id);
      end if;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger threads_rollup_ins after insert on threads
    referencing new table as new_rows for each statement execute function rollup_mark_thread_status()`.execute(
    db,
  );
  await sql`
    create trigger threads_rollup_del after delete on threads
    referencing old table as old_rows for each statement execute function rollup_mark_thread_status()`.execute(
    db,
  );
  // Per row, but only for a status that changed: the loader's and the enricher's updates of
  // counters and times leave no mark.
  await sql`
    create trigger threads_rollup_status after update of enrich_status on threads
    for each row when (old.enrich_status is distinct from new.enrich_status)
    execute function rollup_mark_thread_status()`.execute(db);

  await sql`
    insert into rollup_user_days (user_id, message_date, prev_date)
    select user_id, message_date, lag(message_date) over (partition by user_id order by message_date)
    from rollup_user_daily`.execute(db);
  await sql`
    insert into rollup_thread_days (thread_id, message_date, prev_date, messages, status, depth)
    select d.thread_id, d.message_date, lag(d.message_date) over (partition by d.thread_id order by d.message_date),
           d.messages, t.enrich_status,
           case when coalesce(s.history_entries, 0) = 0 then 0 when s.history_entries <= 2 then 1
                when s.history_entries <= 5 then 2 when s.history_entries <= 10 then 3
                when s.history_entries <= 20 then 4 else 5 end
    from (select thread_id, message_date, sum(messages) as messages from rollup_thread_daily group by 1, 2) d
    left join threads t on t.thread_id = d.thread_id
    left join rollup_threads s on s.thread_id = d.thread_id`.execute(db);
  await sql`
    insert into rollup_thread_firsts (message_date, status, depth, threads)
    select message_date, coalesce(status, '(not queued)'), depth, count(*) from rollup_thread_days
    where prev_date is null group by 1, 2, 3`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['threads_rollup_ins', 'threads_rollup_del', 'threads_rollup_status']) {
    await sql`drop trigger if exists ${sql.id(t)} on threads`.execute(db);
  }
  await sql`drop function if exists rollup_mark_thread_status()`.execute(db);
  await sql`drop index if exists rollup_user_daily_date_cover_idx`.execute(db);
  await sql`drop index if exists rollup_threads_messages_id_idx`.execute(db);
  await sql`create index if not exists rollup_threads_messages_idx on rollup_threads (messages desc)`.execute(
    db,
  );
  await sql`drop table if exists rollup_thread_firsts`.execute(db);
  await sql`drop table if exists rollup_thread_days`.execute(db);
  await sql`drop table if exists rollup_user_days`.execute(db);
}
