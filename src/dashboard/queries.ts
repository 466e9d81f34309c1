/**
 * Every SQL query of the dashboard, one exported function each, so that the pages, the JSON
 * endpoints, the browser tests and the BI bench (`DASHBOARD_QUERIES`) run the very same text.
 *
 * A query takes anything with pg's `query(text, values)` (a pool, a pooled client inside the
 * server's read-only transaction, a bare client) whose search_path is the warehouse schema, as
 * `Warehouse.pool` sets it, and a range of UTC days, both ends included. Figures are numbers
 * (bigint comes back as a number: src/warehouse/db.ts), days are 'YYYY-MM-DD' text, times ISO
 * text, so a page can show them as they are and a test can compare them with its own SQL.
 *
 * What "in the range" means, page by page:
 * - usage, users, threads: live export rows (`_deleted_at is null`) whose `message_date` is in it;
 *   a thread or a user is in the range when it has such a row;
 * - citations: a citation's day is the UTC day of the history entry that cites it (artifact
 *   citations: of the entry that named the artifact), else its thread's first live message day;
 * - sync health: the state now; only the ledger's list of days is cut to the range.
 */

/** What the queries run on: pg.Pool, pg.PoolClient and pg.Client all fit. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** UTC calendar days, both included, as 'YYYY-MM-DD'. */
export interface DayRange {
  from: string;
  to: string;
}

async function rows<T>(q: Queryable, text: string, values: unknown[] = []): Promise<T[]> {
  return (await q.query(text, values)).rows as T[];
}

/** How many rows a "top N" table shows. */
export const TOP_N = 25;

// ---------------------------------------------------------------- extent

export interface DataExtent {
  firstDay: string | null;
  lastDay: string | null;
}

/** The first and last export day with live rows: the default range ends at the last. */
export async function dataExtent(q: Queryable, source: Source = 'rollup'): Promise<DataExtent> {
  // min()/max() rather than order by … limit 1: PostgreSQL answers each from the date index.
  const [r] = await rows<DataExtent>(
    q,
    source === 'rollup'
      ? `select min(message_date)::text as "firstDay", max(message_date)::text as "lastDay"
           from rollup_daily where messages > 0`
      : `select min(message_date)::text as "firstDay", max(message_date)::text as "lastDay"
           from analytics_messages where _deleted_at is null`,
  );
  return r ?? { firstDay: null, lastDay: null };
}

/**
 * The first and last day any ranged figure can fall on: the export days of `extent` and the days
 * of citations, which count on their history entry's day (that may lie outside the export days).
 * From the rollups, the citation days' own ends (two index reads); from the raw tables, the ends
 * of the history entries' days, a superset of the citation days. What the server cuts a range to
 * before any per-day query (range.ts `clampToData`).
 */
export async function dataSpan(
  q: Queryable,
  extent: DataExtent,
  source: Source = 'rollup',
): Promise<DataExtent> {
  const [c] = await rows<DataExtent>(
    q,
    source === 'rollup'
      ? `select min(day)::text as "firstDay", max(day)::text as "lastDay" from rollup_citation_type_daily`
      : `select (min(created_at) at time zone 'UTC')::date::text as "firstDay",
                (max(created_at) at time zone 'UTC')::date::text as "lastDay"
           from thread_messages`,
  );
  const ends = (a: string | null, b: string | null | undefined, pick: (x: string, y: string) => string) =>
    a && b ? pick(a, b) : (a ?? b ?? null);
  return {
    firstDay: ends(extent.firstDay, c?.firstDay, (x, y) => [x, y].sort()[0] as string),
    lastDay: ends(extent.lastDay, c?.lastDay, (x, y) => [x, y].sort()[1] as string),
  };
}

// ---------------------------------------------------------------- usage

/**
 * Where the ranged queries read: `rollup` the per-day aggregate tables (rollup_*, kept exact by
 * src/warehouse/rollups.ts), `raw` the loaded tables themselves. Both give the same rows; the
 * rollups are current unless a load's refresh is still due (`rollupsCurrent`), and the server
 * picks `raw` for that request then. The BI bench times both side by side.
 */
export type Source = 'rollup' | 'raw';

/**
 * Whether the range holds every day that has live rows. Then the all-time rollups (rollup_users,
 * rollup_threads: one row per user or thread) give the same figures as the per-day ones without
 * counting distinct keys over every day: "all" on a year of data stays one small table's read.
 */
async function coversAll(q: Queryable, r: DayRange): Promise<boolean> {
  const [c] = await rows<{ covers: boolean | null }>(
    q,
    `select $1::date <= min(message_date) and $2::date >= max(message_date) as covers
       from rollup_daily where messages > 0`,
    [r.from, r.to],
  );
  return c?.covers === true;
}

/**
 * Whether the range starts on or before the first day with live rows. Then every entity counts on
 * its first day ever (no previous day), and the first days alone answer: `rollup_thread_firsts`,
 * the partial index of `rollup_user_daily` on first days.
 */
async function startsWithData(q: Queryable, r: DayRange): Promise<boolean> {
  const [c] = await rows<{ starts: boolean | null }>(
    q,
    `select $1::date <= min(message_date) as starts from rollup_daily where messages > 0`,
    [r.from],
  );
  return c?.starts === true;
}

export interface UsageDay {
  day: string;
  messages: number;
  activeUsers: number;
  activeThreads: number;
  cancelled: number;
  avgResponseChars: number | null;
  medianResponseChars: number | null;
}

/** One row per day of the range that has live export rows (as the `daily_usage` view). */
export async function usageDaily(q: Queryable, r: DayRange, source: Source = 'rollup'): Promise<UsageDay[]> {
  const text =
    source === 'rollup'
      ? `select message_date::text as day, messages, active_users as "activeUsers",
                active_threads as "activeThreads", cancelled,
                avg_response_chars as "avgResponseChars", median_response_chars as "medianResponseChars"
           from rollup_daily
          where message_date between $1::date and $2::date and messages > 0
          order by message_date`
      : // The view's own query (a message is cancelled when its response is blank or its history
        // entry is the "User cancelled" one; lengths are over the others).
        `select a.message_date::text as day, count(*) as messages, count(distinct a.user_id) as "activeUsers",
                count(distinct a.thread_id) as "activeThreads", (count(*) - count(x.answered)) as cancelled,
                round(avg(x.answered), 1)::double precision as "avgResponseChars",
                (percentile_cont(0.5) within group (order by x.answered))::double precision as "medianResponseChars"
           from analytics_messages a
           left join thread_messages h on h.message_id = a.message_id
           cross join lateral (select case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
                                           else a.response_chars end as answered) x
          where a._deleted_at is null and a.message_date between $1::date and $2::date
          group by a.message_date
          order by a.message_date`;
  return rows<UsageDay>(q, text, [r.from, r.to]);
}

export interface UsageTotals {
  messages: number;
  /** Distinct over the whole range (not a sum of the days' active users). */
  users: number;
  threads: number;
  days: number;
}

export async function usageTotals(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
): Promise<UsageTotals> {
  // Distinct users and threads from the range rollups: each counts on its first active day in
  // the range, the one whose previous active day is before it (src/warehouse/rollup-days.ts);
  // a range that starts with the data counts first days ever.
  const first = source === 'rollup' && (await startsWithData(q, r));
  const text =
    source === 'rollup'
      ? `select (select coalesce(sum(messages), 0)::bigint from rollup_daily
                  where message_date between $1::date and $2::date) as messages,
                ${
                  first
                    ? `(select count(*) from rollup_user_daily where prev_date is null and message_date <= $2::date) as users,
                       (select coalesce(sum(threads), 0)::bigint from rollup_thread_firsts
                         where message_date <= $2::date and $1::date <= $2::date) as threads,`
                    : `(select count(*) from rollup_user_daily where message_date between $1::date and $2::date
                          and (prev_date is null or prev_date < $1::date)) as users,
                       (select count(*) from rollup_thread_daily where message_date between $1::date and $2::date
                          and (prev_date is null or prev_date < $1::date)) as threads,`
                }
                (select count(*) from rollup_daily
                  where message_date between $1::date and $2::date and messages > 0) as days`
      : `select count(*) as messages, count(distinct user_id) as users, count(distinct thread_id) as threads,
                count(distinct message_date) as days
           from analytics_messages
          where _deleted_at is null and message_date between $1::date and $2::date`;
  const [t] = await rows<UsageTotals>(q, text, [r.from, r.to]);
  return t ?? { messages: 0, users: 0, threads: 0, days: 0 };
}

// ---------------------------------------------------------------- users

export interface TopUser {
  userId: string;
  messages: number;
  threads: number;
  daysActive: number;
  firstSeenAt: string;
  lastSeenAt: string;
}

/** The users with the most messages in the range (ties by id, so the order is stable). */
export async function topUsers(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
  limit = TOP_N,
): Promise<TopUser[]> {
  if (source === 'rollup' && (await coversAll(q, r))) {
    return rows<TopUser>(
      q,
      `select user_id::text as "userId", messages, threads, days_active as "daysActive",
              to_json(first_seen_at)#>>'{}' as "firstSeenAt", to_json(last_seen_at)#>>'{}' as "lastSeenAt"
         from rollup_users where messages > 0
        order by messages desc, user_id limit $1`,
      [limit],
    );
  }
  const text =
    source === 'rollup'
      ? // Ranked on the messages alone, from a covering index (the range's ~100k user-days, summed
        // as int: a bigint sum adds numerics), then the 25's days and times by their own index.
        `with top as (
           select user_id, sum(messages::int) as messages
             from rollup_user_daily where message_date between $1::date and $2::date
            group by user_id order by 2 desc, user_id limit $3),
         u as (
           select d.user_id, top.messages, count(*) as days, min(d.first_at) as first_at, max(d.last_at) as last_at
             from top join rollup_user_daily d on d.user_id = top.user_id
            where d.message_date between $1::date and $2::date
            group by d.user_id, top.messages),
         -- The 25's threads (rollup_user_threads: every thread each ever wrote in), each kept when
         -- the user wrote in it in the range: a probe of the thread's few per-day rows. An index
         -- of rollup_thread_daily by user would be written for every thread-day a load refreshes.
         t as (
           select ut.user_id, count(*) as threads from rollup_user_threads ut
            where ut.user_id in (select user_id from u)
              and exists (select 1 from rollup_thread_daily d
                           where d.thread_id = ut.thread_id and d.user_id = ut.user_id
                             and d.message_date between $1::date and $2::date)
            group by ut.user_id)
         select u.user_id::text as "userId", u.messages, coalesce(t.threads, 0) as threads, u.days as "daysActive",
                to_json(u.first_at)#>>'{}' as "firstSeenAt", to_json(u.last_at)#>>'{}' as "lastSeenAt"
           from u left join t on t.user_id = u.user_id
          order by u.messages desc, u.user_id`
      : `select user_id::text as "userId", count(*) as messages, count(distinct thread_id) as threads,
                count(distinct message_date) as "daysActive",
                to_json(min(message_time))#>>'{}' as "firstSeenAt", to_json(max(message_time))#>>'{}' as "lastSeenAt"
           from analytics_messages
          where _deleted_at is null and message_date between $1::date and $2::date
          group by user_id
          order by count(*) desc, user_id
          limit $3`;
  return rows<TopUser>(q, text, [r.from, r.to, limit]);
}

export interface NewUsersDay {
  day: string;
  newUsers: number;
}

/** Users whose first live message (ever) falls on each day of the range. */
export async function newUsersDaily(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
): Promise<NewUsersDay[]> {
  const text =
    source === 'rollup'
      ? `select (first_seen_at at time zone 'UTC')::date::text as day, count(*) as "newUsers"
           from rollup_users
          where first_seen_at >= ($1::date)::timestamp at time zone 'UTC'
            and first_seen_at < ($2::date + 1)::timestamp at time zone 'UTC'
          group by 1 order by 1`
      : `select first_day::text as day, count(*) as "newUsers"
           from (select user_id, min(message_date) as first_day
                   from analytics_messages where _deleted_at is null group by user_id) u
          where first_day between $1::date and $2::date
          group by first_day
          order by first_day`;
  return rows<NewUsersDay>(q, text, [r.from, r.to]);
}

// ---------------------------------------------------------------- threads

/** The raw tables' threads with a live message in the range. */
const RAW_THREADS_IN_RANGE = `select distinct thread_id from analytics_messages
  where _deleted_at is null and message_date between $1::date and $2::date`;

export interface ThreadStatusCount {
  status: string;
  threads: number;
}

export interface DepthBucket {
  /** '0', '1-2', '3-5', '6-10', '11-20', '21+' history entries. */
  bucket: string;
  threads: number;
}

export interface ThreadBreakdown {
  /** Threads with a live message in the range, by enrichment status (most first). */
  statuses: ThreadStatusCount[];
  /** The same threads by how many history entries enrichment stored (all six buckets). */
  depth: DepthBucket[];
}

const DEPTH_BUCKETS = ['0', '1-2', '3-5', '6-10', '11-20', '21+'];

/**
 * The range's threads by status and by depth. From the rollups it is one index-only read of the
 * range's thread-days (`rollup_thread_daily` carries each thread's status and depth bucket, and a
 * thread counts on its first day in the range); from the raw tables the range's threads are found
 * and joined to `threads` and to their history counts.
 */
export async function threadBreakdown(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
): Promise<ThreadBreakdown> {
  const first = source === 'rollup' && (await startsWithData(q, r));
  const text =
    source === 'rollup'
      ? first
        ? `select status, depth as k, sum(threads)::bigint as threads from rollup_thread_firsts
            where message_date <= $2::date and $1::date <= $2::date
            group by 1, 2`
        : `select coalesce(status, '(not queued)') as status, depth as k, count(*) as threads
             from rollup_thread_daily
            where message_date between $1::date and $2::date and (prev_date is null or prev_date < $1::date)
            group by 1, 2`
      : `with r as (${RAW_THREADS_IN_RANGE})
         select coalesce(t.enrich_status, '(not queued)') as status,
                case when coalesce(s.history_entries, 0) = 0 then 0 when s.history_entries <= 2 then 1
                     when s.history_entries <= 5 then 2 when s.history_entries <= 10 then 3
                     when s.history_entries <= 20 then 4 else 5 end as k,
                count(*) as threads
           from r left join threads t on t.thread_id = r.thread_id
           left join (select thread_id, count(*) as history_entries from thread_messages group by thread_id) s
             on s.thread_id = r.thread_id
          group by 1, 2`;
  const cells = await rows<{ status: string; k: number; threads: number }>(q, text, [r.from, r.to]);
  const byStatus = new Map<string, number>();
  const byDepth = DEPTH_BUCKETS.map(() => 0);
  for (const c of cells) {
    byStatus.set(c.status, (byStatus.get(c.status) ?? 0) + c.threads);
    byDepth[c.k] = (byDepth[c.k] ?? 0) + c.threads;
  }
  return {
    statuses: [...byStatus]
      .map(([status, threads]) => ({ status, threads }))
      .sort((x, y) => y.threads - x.threads || (x.status < y.status ? -1 : 1)),
    depth: cells.length === 0 ? [] : DEPTH_BUCKETS.map((bucket, i) => ({ bucket, threads: byDepth[i] ?? 0 })),
  };
}

export interface TopThread {
  threadId: string;
  threadName: string | null;
  status: string | null;
  messages: number;
  firstMessageAt: string;
  lastMessageAt: string;
  historyEntries: number;
  citations: number;
}

/** The threads with the most live messages in the range. */
export async function topThreads(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
  limit = TOP_N,
): Promise<TopThread[]> {
  const all = source === 'rollup' && (await coversAll(q, r));
  const text =
    source === 'rollup' && all
      ? `select s.thread_id::text as "threadId", t.thread_name as "threadName", t.enrich_status as status,
                s.messages, to_json(s.first_message_at)#>>'{}' as "firstMessageAt",
                to_json(s.last_message_at)#>>'{}' as "lastMessageAt",
                s.history_entries as "historyEntries", s.citations
           from rollup_threads s left join threads t on t.thread_id = s.thread_id
          where s.messages > 0 and $1::date <= $2::date
          order by s.messages desc, s.thread_id limit $3`
      : source === 'rollup'
        ? // A thread's messages in the range are its one day's there, unless it has several days in
          // the range (`multi`: found from the days whose previous day is in the range too, few:
          // threads live a few days). The others are ranked day by day from an index in order of
          // messages, ties by id, so the range's ~100k threads are never summed or sorted.
          `with multi as (
             select thread_id, sum(messages) as messages from rollup_thread_daily
              where thread_id in (select thread_id from rollup_thread_daily
                                   where message_date between $1::date and $2::date and prev_date >= $1::date)
                and message_date between $1::date and $2::date
              group by thread_id),
           single as (
             select x.thread_id, x.messages
               from generate_series($1::date, $2::date, interval '1 day') g(day)
               cross join lateral (
                 select d.thread_id, d.messages from rollup_thread_daily d
                  where d.message_date = g.day::date and d.thread_id not in (select thread_id from multi)
                  order by d.messages desc, d.thread_id limit $3) x),
           top as (
             select thread_id, messages from (select * from multi union all select * from single) u
              order by messages desc, thread_id limit $3),
           r as (
             select d.thread_id, top.messages::bigint as messages, min(d.first_at) as first_at, max(d.last_at) as last_at
               from top join rollup_thread_daily d on d.thread_id = top.thread_id
              where d.message_date between $1::date and $2::date
              group by d.thread_id, top.messages)
         select r.thread_id::text as "threadId", t.thread_name as "threadName", t.enrich_status as status,
                r.messages, to_json(r.first_at)#>>'{}' as "firstMessageAt", to_json(r.last_at)#>>'{}' as "lastMessageAt",
                coalesce(s.history_entries, 0) as "historyEntries", coalesce(s.citations, 0) as citations
           from r left join threads t on t.thread_id = r.thread_id
           left join rollup_threads s on s.thread_id = r.thread_id
          order by r.messages desc, r.thread_id`
        : `with r as (select thread_id, count(*) as messages, min(message_time) as first_at, max(message_time) as last_at
                      from analytics_messages
                     where _deleted_at is null and message_date between $1::date and $2::date
                     group by thread_id
                     order by count(*) desc, thread_id
                     limit $3)
         select r.thread_id::text as "threadId", t.thread_name as "threadName", t.enrich_status as status,
                r.messages, to_json(r.first_at)#>>'{}' as "firstMessageAt", to_json(r.last_at)#>>'{}' as "lastMessageAt",
                (select count(*) from thread_messages h where h.thread_id = r.thread_id) as "historyEntries",
                (select count(*) from citations c where c.thread_id = r.thread_id) as citations
           from r left join threads t on t.thread_id = r.thread_id
          order by r.messages desc, r.thread_id`;
  return rows<TopThread>(q, text, [r.from, r.to, limit]);
}

// ---------------------------------------------------------------- citations

/**
 * The raw tables' citations of the range with their day: the UTC day of the history entry that
 * cites (for an artifact's citations, the entry that named the artifact), or, when that entry
 * has no time, the day of its thread's first live export row; a citation with neither has no day
 * and is in no range. The rollups (rollup_citation_daily, rollup_citation_thread_days) hold the
 * same days.
 */
const CITED_IN_RANGE = `
  cited as (
    select coalesce((h.created_at at time zone 'UTC')::date,
                    (select min(a.message_date) from analytics_messages a
                      where a.thread_id = c.thread_id and a._deleted_at is null)) as day,
           coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
           c.thread_id
      from citations c
      left join artifacts ar on c.owner_kind = 'artifact' and ar.artifact_id = c.artifact_id
      left join thread_messages h
        on h.message_id = case when c.owner_kind = 'message' then c.message_id else ar.message_id end
  ),
  in_range as (select * from cited where day between $1::date and $2::date)`;

export interface CitationTypeDay {
  day: string;
  citationType: string;
  citations: number;
}

export async function citationTypesDaily(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
): Promise<CitationTypeDay[]> {
  const text =
    source === 'rollup'
      ? `select day::text as day, citation_type as "citationType", citations
           from rollup_citation_type_daily where day between $1::date and $2::date
          order by 1, 2`
      : `with ${CITED_IN_RANGE}
         select day::text as day, citation_type as "citationType", count(*) as citations
           from in_range group by 1, 2 order by 1, 2`;
  return rows<CitationTypeDay>(q, text, [r.from, r.to]);
}

export interface CitationTypeTotal {
  citationType: string;
  citations: number;
  /** Distinct sources (names) of the type cited in the range. */
  sources: number;
}

/**
 * Whether a range holds every citation day, in a warehouse where every citation has a day (the
 * per-source and the per-day tables add up to the same citations). Then the all-time per-source
 * table (a few thousand rows) answers for the range, instead of every source's every day.
 */
async function coversEveryCitation(q: Queryable, r: DayRange): Promise<boolean> {
  const [every] = await rows<{ every: boolean | null }>(
    q,
    `select $1::date <= min(day) and $2::date >= max(day)
            and (select coalesce(sum(citations), 0) from rollup_citation_sources)
                = (select coalesce(sum(citations), 0) from rollup_citation_type_daily) as every
       from rollup_citation_type_daily`,
    [r.from, r.to],
  );
  return every?.every === true;
}

/**
 * Citations and sources per type in the range. Distinct threads per type over a range are left
 * out on purpose: only a scan of every thread-day row of the range can count them, which a
 * 10M-row warehouse cannot afford per page view.
 */
export async function citationTypeTotals(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
): Promise<CitationTypeTotal[]> {
  if (source === 'rollup') {
    return rows<CitationTypeTotal>(
      q,
      (await coversEveryCitation(q, r))
        ? `select citation_type as "citationType", sum(citations)::bigint as citations, count(*) as sources
             from rollup_citation_sources where $1::date <= $2::date
            group by 1 order by 2 desc, 1`
        : // Sources per type as a count of per-source groups: hashed, where count(distinct) sorts
          // (0.85 s to ~0.4 s over a year at 10M rows).
          `select citation_type as "citationType", sum(c)::bigint as citations, count(*) as sources
             from (select citation_type, name, sum(citations) as c from rollup_citation_daily
                    where day between $1::date and $2::date group by 1, 2) s
            group by 1 order by 2 desc, 1`,
      [r.from, r.to],
    );
  }
  return rows<CitationTypeTotal>(
    q,
    `with ${CITED_IN_RANGE}
     select citation_type as "citationType", count(*) as citations, count(distinct name) as sources
       from in_range group by 1 order by 2 desc, 1`,
    [r.from, r.to],
  );
}

export interface CitationSource {
  citationType: string;
  name: string;
  /** Citations of the source in the range. */
  citations: number;
  /** Distinct threads that ever cited it (all days: see citationTypeTotals for why). */
  threadsAllTime: number;
}

export async function topCitationSources(
  q: Queryable,
  r: DayRange,
  source: Source = 'rollup',
  limit = TOP_N,
): Promise<CitationSource[]> {
  const every = source === 'rollup' && (await coversEveryCitation(q, r));
  const text =
    source === 'rollup'
      ? `with s as (${
          every
            ? `select citation_type, name, citations from rollup_citation_sources where $1::date <= $2::date
                order by 3 desc, 1, 2 limit $3`
            : `select citation_type, name, sum(citations)::bigint as citations
                 from rollup_citation_daily where day between $1::date and $2::date
                group by 1, 2 order by 3 desc, 1, 2 limit $3`
        })
         select s.citation_type as "citationType", s.name, s.citations, coalesce(a.threads, 0) as "threadsAllTime"
           from s left join rollup_citation_sources a using (citation_type, name)
          order by 3 desc, 1, 2`
      : `with ${CITED_IN_RANGE},
         s as (select citation_type, name, count(*) as citations
                 from in_range group by 1, 2 order by 3 desc, 1, 2 limit $3),
         a as (select coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
                      count(distinct c.thread_id) as threads
                 from citations c
                where (coalesce(c.citation_type, '(none)'), coalesce(c.name, '(unnamed)'))
                      in (select citation_type, name from s)
                group by 1, 2)
         select s.citation_type as "citationType", s.name, s.citations, coalesce(a.threads, 0) as "threadsAllTime"
           from s left join a using (citation_type, name)
          order by 3 desc, 1, 2`;
  return rows<CitationSource>(q, text, [r.from, r.to, limit]);
}

// ---------------------------------------------------------------- sync health

export interface SyncHealth {
  watermark: string | null;
  lagDays: number | null;
  firstDay: string | null;
  lastDay: string | null;
  completeDays: number;
  failedDays: number;
  runningDays: number;
  pendingDays: number;
  lastRunLoadId: string | null;
  lastRunKind: string | null;
  lastRunStatus: string | null;
  lastRunStartedAt: string | null;
  lastRunFinishedAt: string | null;
  lastSuccessAt: string | null;
  openRejects: number;
  threadsPending: number;
  threadsFailed: number;
  heldDeletes: number;
  heldDeleteDays: number;
  incompleteExportDays: number;
}

/** The one row of the `sync_health` view. */
export async function syncHealth(q: Queryable): Promise<SyncHealth> {
  const [h] = await rows<SyncHealth>(
    q,
    `select watermark::text as watermark, lag_days as "lagDays", first_day::text as "firstDay",
            last_day::text as "lastDay", complete_days as "completeDays", failed_days as "failedDays",
            running_days as "runningDays", pending_days as "pendingDays",
            last_run_load_id as "lastRunLoadId", last_run_kind as "lastRunKind", last_run_status as "lastRunStatus",
            to_json(last_run_started_at)#>>'{}' as "lastRunStartedAt",
            to_json(last_run_finished_at)#>>'{}' as "lastRunFinishedAt",
            to_json(last_success_at)#>>'{}' as "lastSuccessAt", open_rejects as "openRejects",
            threads_pending as "threadsPending", threads_failed as "threadsFailed",
            held_deletes as "heldDeletes", held_delete_days as "heldDeleteDays",
            incomplete_export_days as "incompleteExportDays"
       from sync_health`,
  );
  if (!h) throw new Error('the sync_health view returned no row');
  return h;
}

export interface LedgerDay {
  day: string;
  status: string;
  rowsRead: number;
  inserted: number;
  updated: number;
  rejected: number;
  deleted: number;
  attempts: number;
}

/** The ledger's days in the range, newest first. */
export async function ledgerDays(q: Queryable, r: DayRange): Promise<LedgerDay[]> {
  return rows<LedgerDay>(
    q,
    `select day::text as day, status, rows_read as "rowsRead", rows_inserted as inserted,
            rows_updated as updated, rows_rejected as rejected, rows_deleted as deleted, attempts
       from sync_days where day between $1::date and $2::date order by day desc`,
    [r.from, r.to],
  );
}

export interface FailedDay {
  day: string;
  attempts: number;
  lastError: string | null;
  finishedAt: string | null;
}

export async function failedDays(q: Queryable, limit = TOP_N): Promise<FailedDay[]> {
  return rows<FailedDay>(
    q,
    `select day::text as day, attempts, last_error as "lastError", to_json(finished_at)#>>'{}' as "finishedAt"
       from sync_days where status = 'failed' order by day desc limit $1`,
    [limit],
  );
}

export interface HeldDeleteDay {
  day: string;
  rows: number;
  heldAt: string;
  reason: string | null;
}

/** Days whose soft-deletes the delete guard holds for review (`crs-sync deletes`). */
export async function heldDeletes(q: Queryable): Promise<HeldDeleteDay[]> {
  return rows<HeldDeleteDay>(
    q,
    `select h.day::text as day, count(*) as rows, to_json(max(h.held_at))#>>'{}' as "heldAt",
            min(d.deletes_held_reason) as reason
       from held_deletes h left join sync_days d on d.day = h.day
      group by h.day order by h.day desc`,
  );
}

export interface QuarantineCode {
  source: string;
  errorCode: string;
  open: number;
  replayed: number;
  /** Up to three of the latest open records (all records once none is open). */
  examples: { id: number; day: string | null; lineNo: number | null; detail: string; raw: string }[];
}

/** The quarantine by source and error code, each with a few examples cut to 200 characters. */
export async function quarantine(q: Queryable): Promise<QuarantineCode[]> {
  return rows<QuarantineCode>(
    q,
    `with g as (
       select source, error_code, count(*) filter (where replayed_at is null) as open,
              count(*) filter (where replayed_at is not null) as replayed
         from rejected_records group by source, error_code)
     select g.source, g.error_code as "errorCode", g.open, g.replayed,
            coalesce((select json_agg(json_build_object('id', e.id, 'day', e.day::text, 'lineNo', e.line_no,
                                                        'detail', left(e.error_detail, 200), 'raw', left(e.raw, 200))
                                      order by e.id desc)
                        from (select * from rejected_records r
                               where r.source = g.source and r.error_code = g.error_code
                               order by (r.replayed_at is null) desc, r.id desc limit 3) e), '[]') as examples
       from g order by g.open desc, g.source, g.error_code`,
  );
}

export interface EnrichmentBacklog {
  byStatus: { status: string; threads: number }[];
  oldestPendingSince: string | null;
  failed: { threadId: string; attempts: number; lastError: string | null }[];
}

export async function enrichmentBacklog(q: Queryable, limit = TOP_N): Promise<EnrichmentBacklog> {
  // One pass over `threads` for the counts and the oldest pending request (a million threads
  // take ~0.1 s a scan); the failed threads' list costs a second one only when there are some.
  const byStatus = await rows<{ status: string; threads: number; oldest: string | null }>(
    q,
    `select enrich_status as status, count(*) as threads,
            to_json(min(enrich_requested_at) filter (where enrich_status = 'pending'))#>>'{}' as oldest
       from threads group by 1 order by 2 desc, 1`,
  );
  const failed = byStatus.some((x) => x.status === 'failed')
    ? await rows<{ threadId: string; attempts: number; lastError: string | null }>(
        q,
        `select thread_id::text as "threadId", enrich_attempts as attempts, last_error as "lastError"
           from threads where enrich_status = 'failed' order by enriched_at desc nulls last, thread_id limit $1`,
        [limit],
      )
    : [];
  return {
    byStatus: byStatus.map(({ status, threads }) => ({ status, threads })),
    oldestPendingSince: byStatus.find((x) => x.status === 'pending')?.oldest ?? null,
    failed,
  };
}

export interface RecentRun {
  loadId: string;
  kind: string;
  status: string;
  windowStart: string | null;
  windowEnd: string | null;
  rowsRead: number;
  inserted: number;
  updated: number;
  rejected: number;
  deleted: number;
  startedAt: string;
  finishedAt: string | null;
  error: string | null;
}

export async function recentRuns(q: Queryable, limit = 15): Promise<RecentRun[]> {
  return rows<RecentRun>(
    q,
    `select load_id as "loadId", kind, status, window_start::text as "windowStart", window_end::text as "windowEnd",
            rows_read as "rowsRead", rows_inserted as inserted, rows_updated as updated,
            rows_rejected as rejected, rows_deleted as deleted, to_json(started_at)#>>'{}' as "startedAt",
            to_json(finished_at)#>>'{}' as "finishedAt", error
       from sync_runs order by started_at desc, load_id desc limit $1`,
    [limit],
  );
}

type Query = (q: Queryable, r: DayRange) => Promise<unknown>;

/** The queries of the current state, the same whatever the source (the ledger's small tables). */
const STATE_QUERIES: Record<string, Query> = {
  syncHealth: (q) => syncHealth(q),
  ledgerDays,
  failedDays: (q) => failedDays(q),
  heldDeletes: (q) => heldDeletes(q),
  quarantine: (q) => quarantine(q),
  enrichmentBacklog: (q) => enrichmentBacklog(q),
  recentRuns: (q) => recentRuns(q),
};

function ranged(source: Source): Record<string, Query> {
  return {
    dataExtent: (q) => dataExtent(q, source),
    usageDaily: (q, r) => usageDaily(q, r, source),
    usageTotals: (q, r) => usageTotals(q, r, source),
    topUsers: (q, r) => topUsers(q, r, source),
    newUsersDaily: (q, r) => newUsersDaily(q, r, source),
    threadBreakdown: (q, r) => threadBreakdown(q, r, source),
    topThreads: (q, r) => topThreads(q, r, source),
    citationTypesDaily: (q, r) => citationTypesDaily(q, r, source),
    citationTypeTotals: (q, r) => citationTypeTotals(q, r, source),
    topCitationSources: (q, r) => topCitationSources(q, r, source),
  };
}

/**
 * Every query by name, as the pages run it for a range (those of the current state ignore it):
 * what the BI bench times one by one. `DASHBOARD_QUERIES` reads the rollups,
 * `RAW_DASHBOARD_QUERIES` the same names over the raw tables (same rows).
 */
export const DASHBOARD_QUERIES: Readonly<Record<string, Query>> = Object.freeze({
  ...ranged('rollup'),
  ...STATE_QUERIES,
});
export const RAW_DASHBOARD_QUERIES: Readonly<Record<string, Query>> = Object.freeze({
  ...ranged('raw'),
  ...STATE_QUERIES,
});
