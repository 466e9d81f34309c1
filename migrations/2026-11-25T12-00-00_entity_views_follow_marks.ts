import { type Kysely, sql } from 'kysely';

/**
 * `user_activity`, `thread_summary` and `citation_sources` read the rollups for the users, threads
 * and sources no marked day or thread touches, and only the touched ones otherwise: so a load
 * (which marks its days and threads) or an enrichment batch (its threads) no longer sends them to
 * the whole raw tables, as `daily_usage` since migration 2026-11-25T08-00-00. The same columns,
 * column for column (docs/data-dictionary.md). A pending rebuild still reads everything raw.
 *
 * The rollups are exact for the raw rows of the last refresh, and every write since marked what
 * it changed (migration 2026-11-24T03-00-00), so:
 * - a user's figures depend on its export rows: touched when it has rows on a marked day, in the
 *   rollups or in the raw table. Its figures are its `rollup_users` row with its rows of the marked
 *   days as the rollups hold them taken out and the raw ones put in (a user is active on hundreds
 *   of days: its rows are never all read again); its threads likewise, per (user, thread) from
 *   `rollup_user_threads`; its first and last times from its first and last current day's row.
 * - a thread's figures are small: a touched thread (marked, or with rows on a marked day, then or
 *   now) is read raw, by key.
 * - a source's figures are sums over its threads' rows (`rollup_citation_threads`, which depend on
 *   the citations alone: a change marks the thread), so the marked threads' rows are taken out and
 *   put in; a latest `last_updated_at` that went with them is read again from the other threads.
 *
 * The read model holds the same rules (src/warehouse/read/users.ts, threads.ts, citations.ts;
 * marked.ts); a migration never imports application code, so test/warehouse/read-marked-fuzz.test.ts
 * holds the two together against the raw functions (`rollup_raw_<view>()`, kept).
 * The touched keys' rows come from PL/pgSQL functions, planned with the marked days' values (a SQL
 * function's generic plan scans the whole table: migration 2026-11-25T08-00-00).
 * Frozen in time: never import application code here.
 */
const REBUILD = `coalesce((select rebuild_needed from rollup_state), true)`;

const USERS_ON = `
  with m as (select a.user_id, a.thread_id, a.message_date, a.message_time from analytics_messages a
              where a._deleted_at is null and a.message_date = any(days)),
  ou as (select d.user_id, count(*) as n_days, sum(d.messages) as n from rollup_user_daily d
          where d.message_date = any(days) group by d.user_id),
  mu as (select m.user_id, count(distinct m.message_date) as n_days, count(*) as n,
                min(m.message_time) as first_at, max(m.message_time) as last_at
           from m group by m.user_id),
  k as (select ou.user_id from ou union select mu.user_id from mu),
  -- Each touched (user, thread): its messages of the marked days in the rollups, and whether it
  -- has rows there now. It still counts when it has messages on the other days or rows now.
  o as (select d.user_id, d.thread_id, sum(d.messages) as old from rollup_thread_daily d
         where d.message_date = any(days) group by 1, 2),
  p as (select coalesce(o.user_id, n.user_id) as user_id, coalesce(o.thread_id, n.thread_id) as thread_id,
               o.old, n.user_id is not null as now
          from o full join (select distinct m.user_id, m.thread_id from m) n
            on n.user_id = o.user_id and n.thread_id = o.thread_id),
  pt as (select p.user_id, count(ut.user_id) as had,
                count(*) filter (where p.now or coalesce(ut.messages, 0) - coalesce(p.old, 0) > 0) as has
           from p left join rollup_user_threads ut on ut.user_id = p.user_id and ut.thread_id = p.thread_id
          group by p.user_id)
  select k.user_id,
         least((select d.first_at from rollup_user_daily d
                 where d.user_id = k.user_id and d.message_date <> all(days) order by d.message_date limit 1),
               mu.first_at),
         greatest((select d.last_at from rollup_user_daily d
                    where d.user_id = k.user_id and d.message_date <> all(days) order by d.message_date desc limit 1),
                  mu.last_at),
         (coalesce(u.days_active, 0) - coalesce(ou.n_days, 0) + coalesce(mu.n_days, 0))::bigint,
         (coalesce(u.messages, 0) - coalesce(ou.n, 0) + coalesce(mu.n, 0))::bigint,
         (coalesce(u.threads, 0) - coalesce(pt.had, 0) + coalesce(pt.has, 0))::bigint
  from k
  left join rollup_users u on u.user_id = k.user_id
  left join ou on ou.user_id = k.user_id
  left join mu on mu.user_id = k.user_id
  left join pt on pt.user_id = k.user_id`;

// The raw query of thread_summary (migration 2026-11-22T01-00-00) for the given threads, by key.
const THREADS_OF = `
  select t.thread_id, t.thread_name, coalesce(m.user_id, t.user_id), m.first_message_at, m.last_message_at,
         coalesce(m.messages, 0)::bigint, t.history_count, coalesce(h.history_entries, 0)::bigint,
         coalesce(h.cancelled_entries, 0)::bigint, coalesce(c.citations, 0)::bigint,
         coalesce(r.artifacts, 0)::bigint, t.enrich_status, t.enriched_at, t.last_error
  from threads t
  left join lateral (
    select min(a.user_id::text)::uuid as user_id, min(a.message_time) as first_message_at,
           max(a.message_time) as last_message_at, count(*) as messages
    from analytics_messages a where a.thread_id = t.thread_id and a._deleted_at is null
    having count(*) > 0) m on true
  left join lateral (
    select count(*) as history_entries, count(*) filter (where x.is_cancelled) as cancelled_entries
    from thread_messages x where x.thread_id = t.thread_id having count(*) > 0) h on true
  left join lateral (select count(*) as citations from citations x where x.thread_id = t.thread_id) c on true
  left join lateral (select count(*) as artifacts from artifacts x where x.thread_id = t.thread_id) r on true
  where t.thread_id = any(ids)`;

const SOURCES_ON = `
  with o as (select x.citation_type, x.name, x.thread_id, x.citations, x.messages, x.artifacts, x.last_updated_at
               from rollup_citation_threads x where x.thread_id = any(ids)),
  n as (select coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
               c.thread_id, count(*) as citations, count(distinct c.message_id) as messages,
               count(distinct c.artifact_id) as artifacts, max(c.last_updated_at) as last_updated_at
          from citations c where c.thread_id = any(ids) group by 1, 2, 3),
  ob as (select o.citation_type, o.name, count(*) as threads, sum(o.citations) as citations,
                sum(o.messages) as messages, sum(o.artifacts) as artifacts, max(o.last_updated_at) as latest
           from o group by 1, 2),
  nb as (select n.citation_type, n.name, count(*) as threads, sum(n.citations) as citations,
                sum(n.messages) as messages, sum(n.artifacts) as artifacts, max(n.last_updated_at) as latest
           from n group by 1, 2),
  k as (select ob.citation_type, ob.name from ob union select nb.citation_type, nb.name from nb)
  select k.citation_type, k.name,
         (coalesce(s.citations, 0) - coalesce(ob.citations, 0) + coalesce(nb.citations, 0))::bigint,
         (coalesce(s.threads, 0) - coalesce(ob.threads, 0) + coalesce(nb.threads, 0))::bigint,
         (coalesce(s.messages, 0) - coalesce(ob.messages, 0) + coalesce(nb.messages, 0))::bigint,
         (coalesce(s.artifacts, 0) - coalesce(ob.artifacts, 0) + coalesce(nb.artifacts, 0))::bigint,
         -- The latest stays unless it may have been a marked thread's and nothing later came in.
         case when s.last_updated_at = ob.latest and (nb.latest is null or nb.latest < s.last_updated_at)
              then greatest(nb.latest, (select max(x.last_updated_at) from rollup_citation_threads x
                                         where x.citation_type = k.citation_type and x.name = k.name
                                           and x.thread_id <> all(ids)))
              else greatest(s.last_updated_at, nb.latest) end
  from k
  left join rollup_citation_sources s on s.citation_type = k.citation_type and s.name = k.name
  left join ob on ob.citation_type = k.citation_type and ob.name = k.name
  left join nb on nb.citation_type = k.citation_type and nb.name = k.name`;

const COLUMNS = {
  user_activity: `user_id uuid, first_seen_at timestamptz, last_seen_at timestamptz, days_active bigint, messages bigint,
    threads bigint`,
  thread_summary: `thread_id uuid, thread_name text, user_id uuid, first_message_at timestamptz,
    last_message_at timestamptz, messages bigint, history_count integer, history_entries bigint,
    cancelled_entries bigint, citations bigint, artifacts bigint, enrich_status text, enriched_at timestamptz,
    last_error text`,
  citation_sources: `citation_type text, name text, citations bigint, threads bigint, messages bigint,
    artifacts bigint, last_updated_at timestamptz`,
};

const plpgsql = (body: string) => `#variable_conflict use_column
  begin return query ${body}; end`;

// The marked threads, and the threads with rows on a marked day in the rollups or the raw table.
const TOUCHED_THREADS = `array(
  select thread_id from rollup_dirty_threads
  union select thread_id from rollup_thread_daily where message_date = any(array(select day from rollup_dirty_days))
  union select thread_id from analytics_messages
         where _deleted_at is null and message_date = any(array(select day from rollup_dirty_days)))`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function rollup_user_activity_on(days date[]) returns table (${sql.raw(COLUMNS.user_activity)})
    language plpgsql stable set search_path from current
    as ${sql.lit(plpgsql(USERS_ON))}`.execute(db);
  await sql`
    create function rollup_thread_summary_of(ids uuid[]) returns table (${sql.raw(COLUMNS.thread_summary)})
    language plpgsql stable set search_path from current
    as ${sql.lit(plpgsql(THREADS_OF))}`.execute(db);
  await sql`
    create function rollup_citation_sources_of(ids uuid[]) returns table (${sql.raw(COLUMNS.citation_sources)})
    language plpgsql stable set search_path from current
    as ${sql.lit(plpgsql(SOURCES_ON))}`.execute(db);

  await sql`
    create or replace view user_activity as
    with k as materialized (
      select * from rollup_user_activity_on(array(select distinct day from rollup_dirty_days))
       where not ${sql.raw(REBUILD)})
    select user_id, first_seen_at, last_seen_at, days_active, messages, threads
      from rollup_users r
     where not ${sql.raw(REBUILD)} and not exists (select 1 from k where k.user_id = r.user_id)
    union all
    select * from k where messages > 0
    union all
    select * from rollup_raw_user_activity() where ${sql.raw(REBUILD)}`.execute(db);
  await sql`
    create or replace view thread_summary as
    with k as materialized (
      select * from rollup_thread_summary_of(${sql.raw(TOUCHED_THREADS)}) where not ${sql.raw(REBUILD)})
    select t.thread_id, t.thread_name, coalesce(r.user_id, t.user_id) as user_id, r.first_message_at,
           r.last_message_at, coalesce(r.messages, 0)::bigint as messages, t.history_count,
           coalesce(r.history_entries, 0)::bigint as history_entries,
           coalesce(r.cancelled_entries, 0)::bigint as cancelled_entries,
           coalesce(r.citations, 0)::bigint as citations, coalesce(r.artifacts, 0)::bigint as artifacts,
           t.enrich_status, t.enriched_at, t.last_error
      from threads t
      left join rollup_threads r on r.thread_id = t.thread_id
     where not ${sql.raw(REBUILD)} and not exists (select 1 from k where k.thread_id = t.thread_id)
    union all
    select * from k
    union all
    select * from rollup_raw_thread_summary() where ${sql.raw(REBUILD)}`.execute(db);
  await sql`
    create or replace view citation_sources as
    with k as materialized (
      select * from rollup_citation_sources_of(array(select distinct thread_id from rollup_dirty_threads))
       where not ${sql.raw(REBUILD)})
    select citation_type, name, citations, threads, messages, artifacts, last_updated_at
      from rollup_citation_sources r
     where not ${sql.raw(REBUILD)}
       and not exists (select 1 from k where k.citation_type = r.citation_type and k.name = r.name)
    union all
    select * from k where citations > 0
    union all
    select * from rollup_raw_citation_sources() where ${sql.raw(REBUILD)}`.execute(db);
}

// The rollups migration's condition (2026-11-24T03-00-00): the rollups only while nothing is marked.
const CURRENT = `not exists (select 1 from rollup_dirty_days) and not exists (select 1 from rollup_dirty_threads)
  and not ${REBUILD}`;

export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace view user_activity as
    select * from (select user_id, first_seen_at, last_seen_at, days_active, messages, threads from rollup_users) r
     where ${sql.raw(CURRENT)}
    union all
    select * from rollup_raw_user_activity() where not (${sql.raw(CURRENT)})`.execute(db);
  await sql`
    create or replace view thread_summary as
    select * from (
      select t.thread_id, t.thread_name, coalesce(r.user_id, t.user_id) as user_id, r.first_message_at,
             r.last_message_at, coalesce(r.messages, 0)::bigint as messages, t.history_count,
             coalesce(r.history_entries, 0)::bigint as history_entries,
             coalesce(r.cancelled_entries, 0)::bigint as cancelled_entries,
             coalesce(r.citations, 0)::bigint as citations, coalesce(r.artifacts, 0)::bigint as artifacts,
             t.enrich_status, t.enriched_at, t.last_error
      from threads t
      left join rollup_threads r on r.thread_id = t.thread_id) r
     where ${sql.raw(CURRENT)}
    union all
    select * from rollup_raw_thread_summary() where not (${sql.raw(CURRENT)})`.execute(db);
  await sql`
    create or replace view citation_sources as
    select * from (
      select citation_type, name, citations, threads, messages, artifacts, last_updated_at
      from rollup_citation_sources) r
     where ${sql.raw(CURRENT)}
    union all
    select * from rollup_raw_citation_sources() where not (${sql.raw(CURRENT)})`.execute(db);
  await sql`drop function rollup_user_activity_on(date[])`.execute(db);
  await sql`drop function rollup_thread_summary_of(uuid[])`.execute(db);
  await sql`drop function rollup_citation_sources_of(uuid[])`.execute(db);
}
