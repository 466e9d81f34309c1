/**
 * The rows of each rollup for a set of keys, as SQL: the rebuild (every key) and the refresh of
 * the marked keys (refresh-marked.ts) insert what these select. A key set is a subquery; an
 * empty one means every key.
 */
/**
 * The raw rows a per-day rollup reads, narrowed to what they take: day, thread, user, time, and
 * the response length when the message was answered (null when cancelled: a blank response, or
 * the "User cancelled" history entry). `days`: an array literal of the days, or none (every row).
 * For some days each row's history entry is probed by key; for every row the history is joined.
 */
export const rawRowsSql = (days: string | null) => `
  select a.message_date, a.thread_id, a.user_id, a.message_time,
         case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
              else a.response_chars end as answered
  from analytics_messages a
  ${
    days
      ? 'left join lateral (select x.is_cancelled from thread_messages x where x.message_id = a.message_id) h on true'
      : 'left join thread_messages h on h.message_id = a.message_id'
  }
  where a._deleted_at is null ${days ? `and a.message_date = any(${days}::date[])` : ''}`;

/** daily_usage's figures of each day that are sums over its rows; `rows`: rawRowsSql's relation. */
export const dailyFiguresSql = (rows: string) => `
  select message_date,
         count(*)::bigint as messages,
         (count(*) - count(answered))::bigint as cancelled,
         count(answered)::bigint as answered,
         coalesce(sum(answered), 0)::bigint as chars,
         round(avg(answered), 1)::double precision as avg,
         (percentile_cont(0.5) within group (order by answered))::double precision as median
  from ${rows} x group by message_date`;

/**
 * A day's row of rollup_daily in a rebuild: its figures (`figures`: dailyFiguresSql's relation)
 * with its distinct users and threads, counted from its thread rows (`threadRows`: one per thread,
 * day and user), not from the raw rows: those are 0.55 per raw row in bench:ingest's file. (A
 * refresh counts them from its key sets: refreshMarked.)
 */
export const dailySql = (figures: string, threadRows: string) => `
  select a.message_date, a.messages, t.users, t.threads, a.cancelled, a.answered, a.chars, a.avg, a.median
  from ${figures} a
  join (select message_date, count(distinct user_id)::bigint as users, count(distinct thread_id)::bigint as threads
        from ${threadRows} x group by message_date) t on t.message_date = a.message_date`;

export const userThreadsSql = (threads: string) => `
  select user_id, thread_id, sum(messages)::bigint from rollup_thread_daily
  ${threads ? `where thread_id in (${threads})` : ''}
  group by user_id, thread_id`;

export const usersSql = (users: string) => `
  select d.user_id, min(d.first_at), max(d.last_at), count(*)::bigint, sum(d.messages)::bigint,
         coalesce(t.n, 0)::bigint
  from rollup_user_daily d
  left join (select user_id, count(*) as n from rollup_user_threads
             ${users ? `where user_id in (${users})` : ''} group by user_id) t on t.user_id = d.user_id
  ${users ? `where d.user_id in (${users})` : ''}
  group by d.user_id, t.n`;

// One row per thread that has anything: live export rows, history entries, citations, artifacts.
export const threadsSql = (threads: string) => {
  const w = threads ? `where thread_id in (${threads})` : '';
  return `
  select coalesce(m.thread_id, h.thread_id, c.thread_id, r.thread_id),
         m.user_id, m.first_at, m.last_at, coalesce(m.messages, 0)::bigint,
         coalesce(h.n, 0)::bigint, coalesce(h.cancelled, 0)::bigint, coalesce(c.n, 0)::bigint,
         coalesce(r.n, 0)::bigint
  from (select thread_id, min(user_id::text)::uuid as user_id, min(first_at) as first_at,
               max(last_at) as last_at, sum(messages) as messages
        from rollup_thread_daily ${w} group by thread_id) m
  full join (select thread_id, count(*) as n, count(*) filter (where is_cancelled) as cancelled
             from thread_messages ${w} group by thread_id) h on h.thread_id = m.thread_id
  full join (select thread_id, count(*) as n from citations ${w} group by thread_id) c
    on c.thread_id = coalesce(m.thread_id, h.thread_id)
  full join (select thread_id, count(*) as n from artifacts ${w} group by thread_id) r
    on r.thread_id = coalesce(m.thread_id, h.thread_id, c.thread_id)`;
};

/**
 * The citations of a set of threads with the day each belongs to: the UTC day of the citing
 * history entry (an artifact's citation: the entry that named the artifact), else the day of
 * the thread's first live export row; null when neither is known (then it is in no daily row).
 * For a set of threads, every lookup is a probe by key (lateral): a plain join lets the planner
 * merge-join the whole history table in key order for a few thousand entries.
 */
export const citedSql = (threads: string) =>
  threads
    ? `
  select c.thread_id, coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
         c.message_id, c.artifact_id, c.last_updated_at, coalesce(h.day, f.first_day) as day
  from (${threads}) k
  join citations c on c.thread_id = k.thread_id
  cross join lateral (select min(r.message_date) as first_day from rollup_thread_daily r
                      where r.thread_id = k.thread_id) f
  left join lateral (
    select (x.created_at at time zone 'UTC')::date as day from thread_messages x
    where x.message_id = coalesce(c.message_id,
      (select a.message_id from artifacts a where a.artifact_id = c.artifact_id))) h on true`
    : `
  select c.thread_id, coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
         c.message_id, c.artifact_id, c.last_updated_at,
         coalesce((h.created_at at time zone 'UTC')::date, f.first_day) as day
  from citations c
  left join artifacts a on c.message_id is null and a.artifact_id = c.artifact_id
  left join thread_messages h on h.message_id = coalesce(c.message_id, a.message_id)
  left join (select thread_id, min(message_date) as first_day from rollup_thread_daily group by thread_id) f
    on f.thread_id = c.thread_id`;

/** `cited`: a relation of citedSql's rows. */
export const citationThreadsSql = (cited: string) => `
  select citation_type, name, thread_id, count(*)::bigint, count(distinct message_id)::bigint,
         count(distinct artifact_id)::bigint, max(last_updated_at)
  from ${cited} x group by citation_type, name, thread_id`;

export const citationThreadDaysSql = (cited: string) => `
  select thread_id, day, citation_type, name, count(*)::bigint, count(distinct message_id)::bigint,
         count(distinct artifact_id)::bigint
  from ${cited} x where day is not null group by thread_id, day, citation_type, name`;

// Per day and type, from the per-thread rows: distinct threads and sources of the day.
export const citationTypeDailySql = (keys: string) => `
  select day, citation_type, sum(citations)::bigint, count(distinct name)::bigint, count(distinct thread_id)::bigint
  from rollup_citation_thread_days
  ${keys ? `where (day, citation_type) in (${keys})` : ''}
  group by day, citation_type`;
