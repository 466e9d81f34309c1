import { type Kysely, sql } from 'kysely';

/**
 * `daily_usage` reads the rollups for the days that are current and the raw rows only for the
 * marked days, so that a load (which marks its own days) no longer sends the view to the whole raw
 * table. A day's figures depend on that day's export rows and on the "User cancelled" history
 * entries of those rows, and the triggers mark the day for both (migration 2026-11-24T03-00-00):
 * every day not in `rollup_dirty_days` has an exact `rollup_daily` row in any snapshot. A pending
 * rebuild still reads every day raw.
 *
 * The other three views are per user, thread or source over every day: they keep the rule of
 * the rollups migration (the rollups while nothing is marked).
 *
 * The same rule as the read model's `usageDaily` (src/warehouse/read/usage.ts); a migration never
 * imports application code, so test/warehouse/read-source.test.ts holds the two together.
 * Frozen in time: never import application code here.
 */
const REBUILD = `coalesce((select rebuild_needed from rollup_state), true)`;

const COLUMNS = `message_date date, messages bigint, active_users bigint, active_threads bigint, cancelled bigint,
  avg_response_chars double precision, median_response_chars double precision`;

// The raw query of the view (migration 2026-11-22T01-00-00), for the given days only. A function,
// as rollup_raw_daily_usage(): inline, its estimated cost made PostgreSQL JIT-compile every read.
// PL/pgSQL, whose statements are planned with the days' values (a SQL function's generic plan
// scanned the whole table: 5.4 s at 10M rows for one marked day).
const RAW_ON_DAYS = `
  with m as (
    select a.message_date, a.user_id, a.thread_id,
           case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
                else a.response_chars end as answered_chars
    from analytics_messages a
    left join thread_messages h on h.message_id = a.message_id
    where a._deleted_at is null and a.message_date = any(days)
  )
  select message_date,
         count(*)::bigint as messages,
         count(distinct user_id)::bigint as active_users,
         count(distinct thread_id)::bigint as active_threads,
         (count(*) - count(answered_chars))::bigint as cancelled,
         round(avg(answered_chars), 1)::double precision as avg_response_chars,
         (percentile_cont(0.5) within group (order by answered_chars))::double precision
           as median_response_chars
  from m
  group by message_date`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function rollup_raw_daily_usage_on(days date[]) returns table (${sql.raw(COLUMNS)})
    language plpgsql stable set search_path from current
    as ${sql.lit(`#variable_conflict use_column
    begin return query ${RAW_ON_DAYS}; end`)}`.execute(db);
  await sql`
    create or replace view daily_usage as
    select message_date, messages, active_users, active_threads, cancelled, avg_response_chars,
           median_response_chars
      from rollup_daily
     where not ${sql.raw(REBUILD)} and message_date not in (select day from rollup_dirty_days)
    union all
    select * from rollup_raw_daily_usage_on(array(select distinct day from rollup_dirty_days))
     where not ${sql.raw(REBUILD)}
    union all
    select * from rollup_raw_daily_usage() where ${sql.raw(REBUILD)}`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace view daily_usage as
    select * from (
      select message_date, messages, active_users, active_threads, cancelled, avg_response_chars,
             median_response_chars
      from rollup_daily) r
     where not exists (select 1 from rollup_dirty_days) and not exists (select 1 from rollup_dirty_threads)
       and not ${sql.raw(REBUILD)}
    union all
    select * from rollup_raw_daily_usage()
     where not (not exists (select 1 from rollup_dirty_days) and not exists (select 1 from rollup_dirty_threads)
       and not ${sql.raw(REBUILD)})`.execute(db);
  await sql`drop function rollup_raw_daily_usage_on(date[])`.execute(db);
}
