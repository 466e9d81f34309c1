import { type Kysely, sql } from 'kysely';

/**
 * A day pull's marks wait for its finalize (docs/decisions/0015-intraday-marks-wait.md).
 *
 * A pull of one export day (intraday, daily, backfill) writes its rows in many committed batches
 * over seconds to minutes; each write's trigger marked the day, and while a day is marked every
 * reader reads that day's raw rows (a 100k-row day: 1-2 s a dashboard page over a 10M-row
 * warehouse). Now each batch of such a pull, and its delete step, names its day in the
 * transaction setting `crs_sync.marks_wait_day`, and the export-row trigger notes a write of that
 * day in `rollup_waiting_days` instead of `rollup_dirty_days`. Readers do not look there: they
 * read the day from its rollups, as the last refresh of it left them (the last finished pull).
 * The pull's finalize turns its day's waiting marks into marks and refreshes them in one
 * transaction, so readers go from the last pull's figures to the new ones at once and never read
 * the day raw because a pull is running.
 *
 * - Rows of any other day a waiting write touches (a record whose date moved) are marked as before.
 * - Writes without the setting (a file import, enrichment, `deletes apply`) mark as before: a
 *   history entry that cancels one of the day's messages marks the day, which readers then read
 *   raw until that refresh.
 * - No key, as the other marks: two partitions of one pull must not wait for each other's commit.
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table rollup_waiting_days (day date not null)`.execute(db);
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
        -- A delete is never an intraday pull's (a partial day deletes nothing): always marked.
        insert into rollup_dirty_days select distinct message_date from old_rows;
      end if;
      return null;
    end $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // What waits becomes a mark, so the next refresh recomputes it.
  await sql`insert into rollup_dirty_days select distinct day from rollup_waiting_days`.execute(db);
  await sql`drop table rollup_waiting_days`.execute(db);
  await sql`
    create or replace function rollup_mark_messages() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        insert into rollup_dirty_days select distinct message_date from new_rows;
      elsif tg_op = 'UPDATE' then
        insert into rollup_dirty_days
          select message_date from new_rows union select message_date from old_rows;
      else
        insert into rollup_dirty_days select distinct message_date from old_rows;
      end if;
      return null;
    end $$`.execute(db);
}
