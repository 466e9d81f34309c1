import { type Kysely, sql } from 'kysely';

/**
 * A day pull's waiting marks name the threads it wrote (docs/decisions/0016-waiting-threads.md).
 *
 * Since migration 2026-11-27T13-00-00 a pull of one export day notes its writes of that day in
 * `rollup_waiting_days`, and its finalize turns them into a mark of the whole day: the refresh then
 * recomputed and compared every thread row of the day at every pull (an hourly intraday pull of a
 * 100k-row day: ~37k thread rows a pull, to find the ~2k its new rows touched). Now the trigger
 * also notes, for such a write, the threads of its rows of that day (old and new rows) in
 * `rollup_waiting_threads`, in the same statement's transaction, so that a released day whose
 * only marks are these (nothing else marked it) is refreshed for those threads alone.
 *
 * - Written for the waiting day's rows only; rows of any other day, and writes without the
 *   setting, mark as before (and a day marked that way is refreshed whole).
 * - No key, as the other marks: two partitions of one pull must not wait for each other's commit.
 * - Days that wait now have no thread marks: they become marks of the whole day here, so that
 *   every waiting day has a thread mark for each of its writes.
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`insert into rollup_dirty_days select distinct day from rollup_waiting_days`.execute(db);
  await sql`delete from rollup_waiting_days`.execute(db);
  await sql`create table rollup_waiting_threads (day date not null, thread_id uuid not null)`.execute(db);
  await sql`
    create or replace function rollup_mark_messages() returns trigger language plpgsql as $$
    declare
      waits date := nullif(current_setting('crs_sync.marks_wait_day', true), '')::date;
    begin
      if tg_op = 'INSERT' then
        if waits is null then
          insert into rollup_dirty_days select distinct message_date from new_rows;
        else
          insert into rollup_dirty_days select distinct message_date from new_rows where message_date <> waits;
          insert into rollup_waiting_days select waits where exists (select 1 from new_rows where message_date = waits);
          insert into rollup_waiting_threads
            select distinct waits, thread_id from new_rows where message_date = waits;
        end if;
      elsif tg_op = 'UPDATE' then
        if waits is null then
          insert into rollup_dirty_days
            select message_date from new_rows union select message_date from old_rows;
        else
          insert into rollup_dirty_days
            select message_date from new_rows where message_date <> waits
            union select message_date from old_rows where message_date <> waits;
          insert into rollup_waiting_days select waits
            where exists (select 1 from new_rows where message_date = waits)
               or exists (select 1 from old_rows where message_date = waits);
          insert into rollup_waiting_threads
            select waits, thread_id from new_rows where message_date = waits
            union select waits, thread_id from old_rows where message_date = waits;
        end if;
      else
        -- A delete is never an intraday pull's (a partial day deletes nothing): always marked.
        insert into rollup_dirty_days select distinct message_date from old_rows;
      end if;
      return null;
    end $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table rollup_waiting_threads`.execute(db);
  await sql`
    create or replace function rollup_mark_messages() returns trigger language plpgsql as $$
    declare
      waits date := nullif(current_setting('crs_sync.marks_wait_day', true), '')::date;
    begin
      if tg_op = 'INSERT' then
        if waits is null then
          insert into rollup_dirty_days select distinct message_date from new_rows;
        else
          insert into rollup_dirty_days select distinct message_date from new_rows where message_date <> waits;
          insert into rollup_waiting_days select waits where exists (select 1 from new_rows where message_date = waits);
        end if;
      elsif tg_op = 'UPDATE' then
        if waits is null then
          insert into rollup_dirty_days
            select message_date from new_rows union select message_date from old_rows;
        else
          insert into rollup_dirty_days
            select message_date from new_rows where message_date <> waits
            union select message_date from old_rows where message_date <> waits;
          insert into rollup_waiting_days select waits
            where exists (select 1 from new_rows where message_date = waits)
               or exists (select 1 from old_rows where message_date = waits);
        end if;
      else
        insert into rollup_dirty_days select distinct message_date from old_rows;
      end if;
      return null;
    end $$`.execute(db);
}
