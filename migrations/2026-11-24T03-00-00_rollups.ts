import { type Kysely, sql } from 'kysely';

/**
 * Rollups: per-day aggregate tables that keep BI queries off the raw tables (docs/data-dictionary.md,
 * "Rollups"; docs/decisions/0010-rollups-and-partitioning.md).
 *
 * How they stay exact:
 * - Statement-level triggers (with transition tables, so one insert per statement, never one per
 *   row) note in `rollup_dirty_days` / `rollup_dirty_threads` every day and thread a write touched,
 *   in the writer's own transaction: whoever writes (loader, finalize, enrichment, `deletes apply`,
 *   a hand-written statement) leaves a mark that commits or rolls back with the data.
 * - The refresh (src/warehouse/rollups.ts) takes the marks and recomputes exactly those keys from
 *   the raw tables, in one transaction: a refresh that dies leaves the marks for the next one, and
 *   running it twice changes nothing.
 * - The marks have no key: two loader partitions marking the same day at once would otherwise wait
 *   for each other's commit (an insert on conflict waits for the other's uncommitted row).
 *
 * The five BI views keep their names and columns. Each reads the rollups while nothing is marked
 * and the old raw-table query otherwise (a one-time filter: only one branch runs), so a view is
 * never stale, even between a load's commit and its refresh.
 *
 * An existing warehouse is flagged `rebuild_needed`: `crs-sync rollups rebuild` fills the rollups
 * from the raw tables (loads do not: at 10M rows it takes minutes); until then the views read the
 * raw tables.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table rollup_dirty_days (day date not null)`.execute(db);
  await sql`create table rollup_dirty_threads (thread_id uuid not null)`.execute(db);
  await sql`
    create table rollup_state (
      id integer primary key default 1 check (id = 1),
      rebuild_needed boolean not null,
      rebuilt_at timestamptz,
      refreshed_at timestamptz
    )`.execute(db);
  await sql`
    insert into rollup_state (rebuild_needed)
    select exists (select 1 from analytics_messages) or exists (select 1 from thread_messages)
        or exists (select 1 from citations) or exists (select 1 from artifacts)`.execute(db);

  // daily_usage's row of a day, as the view computes it, with what a range total needs.
  await sql`
    create table rollup_daily (
      message_date date primary key,
      messages bigint not null,
      active_users bigint not null,
      active_threads bigint not null,
      cancelled bigint not null,
      answered bigint not null,
      response_chars_sum bigint not null,
      avg_response_chars double precision,
      median_response_chars double precision
    )`.execute(db);
  // Distinct counts cannot be summed over days: these keep the keys to count from.
  await sql`
    create table rollup_user_daily (
      message_date date not null,
      user_id uuid not null,
      messages bigint not null,
      threads bigint not null,
      first_at timestamptz not null,
      last_at timestamptz not null,
      primary key (message_date, user_id)
    )`.execute(db);
  await sql`create index rollup_user_daily_user_idx on rollup_user_daily (user_id, message_date)`.execute(db);
  await sql`
    create table rollup_thread_daily (
      message_date date not null,
      thread_id uuid not null,
      user_id uuid not null,
      messages bigint not null,
      first_at timestamptz not null,
      last_at timestamptz not null,
      primary key (message_date, thread_id, user_id)
    )`.execute(db);
  await sql`create index rollup_thread_daily_thread_idx on rollup_thread_daily (thread_id)`.execute(db);
  await sql`
    create table rollup_user_threads (
      user_id uuid not null,
      thread_id uuid not null,
      messages bigint not null,
      primary key (user_id, thread_id)
    )`.execute(db);
  await sql`create index rollup_user_threads_thread_idx on rollup_user_threads (thread_id)`.execute(db);
  await sql`
    create table rollup_users (
      user_id uuid primary key,
      first_seen_at timestamptz not null,
      last_seen_at timestamptz not null,
      days_active bigint not null,
      messages bigint not null,
      threads bigint not null
    )`.execute(db);
  await sql`
    create table rollup_threads (
      thread_id uuid primary key,
      user_id uuid,
      first_message_at timestamptz,
      last_message_at timestamptz,
      messages bigint not null,
      history_entries bigint not null,
      cancelled_entries bigint not null,
      citations bigint not null,
      artifacts bigint not null
    )`.execute(db);
  await sql`create index rollup_threads_last_idx on rollup_threads (last_message_at)`.execute(db);
  await sql`create index rollup_threads_messages_idx on rollup_threads (messages desc)`.execute(db);
  // Citations per thread and source: the distinct threads, messages and artifacts of a source
  // are sums over these rows (an entry or an artifact belongs to one thread).
  await sql`
    create table rollup_citation_threads (
      citation_type text not null,
      name text not null,
      thread_id uuid not null,
      citations bigint not null,
      messages bigint not null,
      artifacts bigint not null,
      last_updated_at timestamptz,
      primary key (citation_type, name, thread_id)
    )`.execute(db);
  await sql`create index rollup_citation_threads_thread_idx on rollup_citation_threads (thread_id)`.execute(
    db,
  );
  await sql`
    create table rollup_citation_sources (
      citation_type text not null,
      name text not null,
      citations bigint not null,
      threads bigint not null,
      messages bigint not null,
      artifacts bigint not null,
      last_updated_at timestamptz,
      primary key (citation_type, name)
    )`.execute(db);
  await sql`
    create table rollup_citation_thread_days (
      thread_id uuid not null,
      day date not null,
      citation_type text not null,
      name text not null,
      citations bigint not null,
      messages bigint not null,
      artifacts bigint not null,
      primary key (thread_id, day, citation_type, name)
    )`.execute(db);
  await sql`create index rollup_citation_thread_days_day_idx on rollup_citation_thread_days (day)`.execute(
    db,
  );
  await sql`
    create table rollup_citation_daily (
      day date not null,
      citation_type text not null,
      name text not null,
      citations bigint not null,
      threads bigint not null,
      messages bigint not null,
      artifacts bigint not null,
      primary key (day, citation_type, name)
    )`.execute(db);

  // Per day and type: the citations chart. threads and sources are distinct within the day.
  await sql`
    create table rollup_citation_type_daily (
      day date not null,
      citation_type text not null,
      citations bigint not null,
      sources bigint not null,
      threads bigint not null,
      primary key (day, citation_type)
    )`.execute(db);

  // The marks. Every trigger is per statement: its cost is one insert of the statement's distinct
  // keys, and nothing when the statement wrote nothing (an unchanged re-load).
  await sql`
    create function rollup_mark_messages() returns trigger language plpgsql as $$
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
  // History entries: their threads, and the day of a "User cancelled" entry's export row (it
  // makes that message count as cancelled in daily_usage).
  await sql`
    create function rollup_mark_history() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        insert into rollup_dirty_threads select distinct thread_id from new_rows;
        insert into rollup_dirty_days
          select distinct a.message_date from new_rows n join analytics_messages a on a.message_id = n.message_id
          where n.is_cancelled;
      elsif tg_op = 'UPDATE' then
        insert into rollup_dirty_threads select thread_id from new_rows union select thread_id from old_rows;
        insert into rollup_dirty_days
          select a.message_date from new_rows n join analytics_messages a on a.message_id = n.message_id
          where n.is_cancelled
          union
          select a.message_date from old_rows o join analytics_messages a on a.message_id = o.message_id
          where o.is_cancelled;
      else
        insert into rollup_dirty_threads select distinct thread_id from old_rows;
        insert into rollup_dirty_days
          select distinct a.message_date from old_rows o join analytics_messages a on a.message_id = o.message_id
          where o.is_cancelled;
      end if;
      return null;
    end $$`.execute(db);
  await sql`
    create function rollup_mark_threads() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        insert into rollup_dirty_threads select distinct thread_id from new_rows;
      elsif tg_op = 'UPDATE' then
        insert into rollup_dirty_threads select thread_id from new_rows union select thread_id from old_rows;
      else
        insert into rollup_dirty_threads select distinct thread_id from old_rows;
      end if;
      return null;
    end $$`.execute(db);
  const tables: Array<[string, string]> = [
    ['analytics_messages', 'rollup_mark_messages'],
    ['thread_messages', 'rollup_mark_history'],
    ['citations', 'rollup_mark_threads'],
    ['artifacts', 'rollup_mark_threads'],
  ];
  for (const [table, fn] of tables) {
    // A trigger with transition tables takes one event: three triggers per table.
    await sql`
      create trigger ${sql.id(`${table}_rollup_ins`)} after insert on ${sql.id(table)}
      referencing new table as new_rows for each statement execute function ${sql.id(fn)}()`.execute(db);
    await sql`
      create trigger ${sql.id(`${table}_rollup_upd`)} after update on ${sql.id(table)}
      referencing old table as old_rows new table as new_rows for each statement execute function ${sql.id(fn)}()`.execute(
      db,
    );
    await sql`
      create trigger ${sql.id(`${table}_rollup_del`)} after delete on ${sql.id(table)}
      referencing old table as old_rows for each statement execute function ${sql.id(fn)}()`.execute(db);
  }

  await createViews(db);
}

// Uncorrelated: PostgreSQL evaluates it once per query and runs only the branch it selects.
const CURRENT = `not exists (select 1 from rollup_dirty_days) and not exists (select 1 from rollup_dirty_threads)
  and not coalesce((select rebuild_needed from rollup_state), true)`;

/** Each view's original raw-table query (migration T01), its columns and their types. */
const RAW: Record<string, { columns: string; query: string }> = {
  daily_usage: {
    columns: `message_date date, messages bigint, active_users bigint, active_threads bigint, cancelled bigint,
      avg_response_chars double precision, median_response_chars double precision`,
    query: `
      with m as (
        select a.message_date, a.user_id, a.thread_id,
               case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
                    else a.response_chars end as answered_chars
        from analytics_messages a
        left join thread_messages h on h.message_id = a.message_id
        where a._deleted_at is null
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
      group by message_date`,
  },
  user_activity: {
    columns: `user_id uuid, first_seen_at timestamptz, last_seen_at timestamptz, days_active bigint, messages bigint,
      threads bigint`,
    query: `
      select user_id,
             min(message_time) as first_seen_at,
             max(message_time) as last_seen_at,
             count(distinct message_date)::bigint as days_active,
             count(*)::bigint as messages,
             count(distinct thread_id)::bigint as threads
      from analytics_messages
      where _deleted_at is null
      group by user_id`,
  },
  thread_summary: {
    columns: `thread_id uuid, thread_name text, user_id uuid, first_message_at timestamptz, last_message_at timestamptz,
      messages bigint, history_count integer, history_entries bigint, cancelled_entries bigint, citations bigint,
      artifacts bigint, enrich_status text, enriched_at timestamptz, last_error text`,
    query: `
      select t.thread_id,
             t.thread_name,
             coalesce(m.user_id, t.user_id) as user_id,
             m.first_message_at,
             m.last_message_at,
             coalesce(m.messages, 0)::bigint as messages,
             t.history_count,
             coalesce(h.history_entries, 0)::bigint as history_entries,
             coalesce(h.cancelled_entries, 0)::bigint as cancelled_entries,
             coalesce(c.citations, 0)::bigint as citations,
             coalesce(r.artifacts, 0)::bigint as artifacts,
             t.enrich_status,
             t.enriched_at,
             t.last_error
      from threads t
      left join (
        select thread_id, min(user_id::text)::uuid as user_id, min(message_time) as first_message_at,
               max(message_time) as last_message_at, count(*) as messages
        from analytics_messages where _deleted_at is null group by thread_id
      ) m on m.thread_id = t.thread_id
      left join (
        select thread_id, count(*) as history_entries, count(*) filter (where is_cancelled) as cancelled_entries
        from thread_messages group by thread_id
      ) h on h.thread_id = t.thread_id
      left join (select thread_id, count(*) as citations from citations group by thread_id) c
        on c.thread_id = t.thread_id
      left join (select thread_id, count(*) as artifacts from artifacts group by thread_id) r
        on r.thread_id = t.thread_id`,
  },
  citation_sources: {
    columns: `citation_type text, name text, citations bigint, threads bigint, messages bigint, artifacts bigint,
      last_updated_at timestamptz`,
    query: `
      select coalesce(citation_type, '(none)') as citation_type,
             coalesce(name, '(unnamed)') as name,
             count(*)::bigint as citations,
             count(distinct thread_id)::bigint as threads,
             count(distinct message_id)::bigint as messages,
             count(distinct artifact_id)::bigint as artifacts,
             max(last_updated_at) as last_updated_at
      from citations
      group by 1, 2`,
  },
};

/** What each view reads while the rollups are current. */
const FROM_ROLLUPS: Record<string, string> = {
  daily_usage: `
    select message_date, messages, active_users, active_threads, cancelled, avg_response_chars,
           median_response_chars
    from rollup_daily`,
  user_activity: `
    select user_id, first_seen_at, last_seen_at, days_active, messages, threads from rollup_users`,
  thread_summary: `
    select t.thread_id, t.thread_name, coalesce(r.user_id, t.user_id) as user_id, r.first_message_at,
           r.last_message_at, coalesce(r.messages, 0)::bigint as messages, t.history_count,
           coalesce(r.history_entries, 0)::bigint as history_entries,
           coalesce(r.cancelled_entries, 0)::bigint as cancelled_entries,
           coalesce(r.citations, 0)::bigint as citations, coalesce(r.artifacts, 0)::bigint as artifacts,
           t.enrich_status, t.enriched_at, t.last_error
    from threads t
    left join rollup_threads r on r.thread_id = t.thread_id`,
  citation_sources: `
    select citation_type, name, citations, threads, messages, artifacts, last_updated_at
    from rollup_citation_sources`,
};

/**
 * Each view: its rollup query while current, else its raw query, which lives in a function
 * (`rollup_raw_<view>`). Inline, the raw branch's estimated cost alone made PostgreSQL JIT-compile
 * the whole query (~0.4 s measured at 10M rows) even when the branch never runs; a function's
 * scan is costed small. The function keeps the schema it was created in (`set search_path from
 * current`), which also keeps it from being inlined.
 */
async function createViews(db: Kysely<any>): Promise<void> {
  for (const [view, raw] of Object.entries(RAW)) {
    const fn = `rollup_raw_${view}`;
    await sql`
      create function ${sql.id(fn)}() returns table (${sql.raw(raw.columns)})
      language sql stable set search_path from current
      as ${sql.lit(raw.query)}`.execute(db);
    await sql`
      create or replace view ${sql.id(view)} as
      select * from (${sql.raw(FROM_ROLLUPS[view] ?? '')}) r where ${sql.raw(CURRENT)}
      union all
      select * from ${sql.id(fn)}() where not (${sql.raw(CURRENT)})`.execute(db);
  }
}

/** For bench:bi, to put the views of this migration over a schema that had an earlier version of it. */
export async function recreateRollupViews(db: Kysely<any>): Promise<void> {
  for (const view of Object.keys(RAW)) {
    await sql`drop function if exists ${sql.id(`rollup_raw_${view}`)}() cascade`.execute(db);
  }
  for (const view of Object.keys(RAW)) await sql`drop view if exists ${sql.id(view)}`.execute(db);
  await createViews(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  // The views as migration T01 made them (their raw queries, column for column the same), then
  // the rollups.
  for (const [view, raw] of Object.entries(RAW)) {
    await sql`create or replace view ${sql.id(view)} as ${sql.raw(raw.query)}`.execute(db);
  }
  for (const table of ['analytics_messages', 'thread_messages', 'citations', 'artifacts']) {
    for (const ev of ['ins', 'upd', 'del']) {
      await sql`drop trigger if exists ${sql.id(`${table}_rollup_${ev}`)} on ${sql.id(table)}`.execute(db);
    }
  }
  for (const view of Object.keys(RAW)) {
    await sql`drop function if exists ${sql.id(`rollup_raw_${view}`)}()`.execute(db);
  }
  for (const fn of ['rollup_mark_messages', 'rollup_mark_history', 'rollup_mark_threads']) {
    await sql`drop function if exists ${sql.id(fn)}()`.execute(db);
  }
  for (const t of [
    'rollup_citation_type_daily',
    'rollup_citation_daily',
    'rollup_citation_thread_days',
    'rollup_citation_sources',
    'rollup_citation_threads',
    'rollup_threads',
    'rollup_users',
    'rollup_user_threads',
    'rollup_thread_daily',
    'rollup_user_daily',
    'rollup_daily',
    'rollup_state',
    'rollup_dirty_threads',
    'rollup_dirty_days',
  ]) {
    await sql`drop table if exists ${sql.id(t)}`.execute(db);
  }
}
