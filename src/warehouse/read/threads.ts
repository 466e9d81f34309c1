/** Threads with a live message in a range: by enrichment status and depth, and the busiest ones. */
import { coversAll, startsWithData } from './extent.ts';
import { DEPTH, markedRows, notIn, STALE_CTE, STALE_DAYS, TOUCHED_THREADS_CTE } from './marked.ts';
import { type DayRange, type Queryable, rowsOf, TOP_N } from './queryable.ts';
import type { Source } from './source.ts';

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
export async function threadBreakdown(q: Queryable, r: DayRange, source: Source): Promise<ThreadBreakdown> {
  const first = source !== 'raw' && (await startsWithData(q, r));
  const rollup = first
    ? `select status, depth as k, sum(threads)::bigint as threads from rollup_thread_firsts
            where message_date <= $2::date and $1::date <= $2::date
            group by 1, 2`
    : `select coalesce(status, '(not queued)') as status, depth as k, count(*) as threads
             from rollup_thread_daily
            where message_date between $1::date and $2::date and (prev_date is null or prev_date < $1::date)
            group by 1, 2`;
  const text =
    source === 'rollup'
      ? rollup
      : source === 'mixed'
        ? // The rollups' cells (the first form of the range's start, as the rollup form reads
          // them), with the touched threads (marked.ts) as the rollups count them taken out (their
          // row that counts in the range) and as they are now put in: in the range when they have
          // a current day or a marked day's raw row there, with the status and depth of now (probes
          // by key: joined, PostgreSQL hashed the whole threads table; `offset 0` keeps `t` whole,
          // else each of DEPTH's five mentions of `n` became a count of its own).
          `with ${STALE_CTE},
           m as materialized (${markedRows('distinct thread_id', true)}),
           ${TOUCHED_THREADS_CTE},
           was as (select coalesce(d.status, '(not queued)') as status, d.depth as k, -count(*) as threads
                     from rollup_thread_daily d
                    where d.thread_id = any(array(select thread_id from a))
                      and d.message_date between $1::date and $2::date
                      and (d.prev_date is null or d.prev_date < $1::date)
                    group by 1, 2),
           now as (select coalesce(t.status, '(not queued)') as status, ${DEPTH('t.n')} as k, count(*) as threads
                     from (select (select x.enrich_status from threads x where x.thread_id = a.thread_id) as status,
                                  (select count(*) from thread_messages x where x.thread_id = a.thread_id) as n
                             from a left join m on m.thread_id = a.thread_id
                            where m.thread_id is not null
                       or exists (select 1 from rollup_thread_daily d
                                   where d.thread_id = a.thread_id and d.message_date between $1::date and $2::date
                                     and d.message_date <> all(${STALE_DAYS}))
                           offset 0) t
                    group by 1, 2)
           select status, k, sum(threads)::bigint as threads
             from ((${rollup}) union all select * from was union all select * from now) c (status, k, threads)
            group by 1, 2 having sum(threads) <> 0`
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
  const cells = await rowsOf<{ status: string; k: number; threads: number }>(q, text, [r.from, r.to]);
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

/**
 * The range's busiest threads from the per-day rollups, as `top (thread_id, messages)` (CTEs), the
 * threads `keep` holds (a predicate on `d.thread_id`) only. A thread's messages in the range are
 * its one day's there, unless it has several days in the range (`multi`: found from the days
 * whose previous day is in the range too, few: threads live a few days). The others are ranked
 * day by day from an index in order of messages, ties by id, so the range's ~100k threads are
 * never summed or sorted.
 */
const rankedByDays = (keep: string) => `multi as (
     select d.thread_id, sum(d.messages) as messages from rollup_thread_daily d
      where d.thread_id in (select thread_id from rollup_thread_daily
                             where message_date between $1::date and $2::date and prev_date >= $1::date)
        and d.message_date between $1::date and $2::date and ${keep}
      group by d.thread_id),
   single as (
     select x.thread_id, x.messages
       from generate_series($1::date, $2::date, interval '1 day') g(day)
       cross join lateral (
         select d.thread_id, d.messages from rollup_thread_daily d
          where d.message_date = g.day::date and d.thread_id not in (select thread_id from multi) and ${keep}
          order by d.messages desc, d.thread_id limit $3) x),
   top as (
     select thread_id, messages from (select * from multi union all select * from single) u
      order by messages desc, thread_id limit $3)`;

/** The threads with the most live messages in the range. */
export async function topThreads(
  q: Queryable,
  r: DayRange,
  source: Source,
  limit = TOP_N,
): Promise<TopThread[]> {
  if (source === 'mixed') return topThreadsMixed(q, r, limit);
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
        ? `with ${rankedByDays('true')},
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
  return rowsOf<TopThread>(q, text, [r.from, r.to, limit]);
}

/**
 * The top threads with some days or threads marked: the untouched threads (marked.ts) ranked as
 * the rollup form ranks them (their rows are all on current days, so the rollups' all-time row
 * answers for a range that holds every day), merged with the touched ones summed from their
 * current days' rows and the marked days' raw rows; their history and citations counted now.
 */
async function topThreadsMixed(q: Queryable, r: DayRange, limit: number): Promise<TopThread[]> {
  const all = await coversAll(q, r);
  const current = `d.message_date between $1::date and $2::date and d.message_date <> all(${STALE_DAYS})`;
  return rowsOf<TopThread>(
    q,
    `with ${STALE_CTE},
     m as materialized (${markedRows('thread_id, message_time', true)}),
     ${TOUCHED_THREADS_CTE},
     ${
       all
         ? `top as (select thread_id, messages from rollup_threads
                     where messages > 0 and ${notIn('thread_id', 'thread_id', 'a')}
                     order by messages desc, thread_id limit $3)`
         : rankedByDays(notIn('d.thread_id', 'thread_id', 'a'))
     },
     now as (select thread_id, sum(n)::bigint as messages from (
               select d.thread_id, d.messages as n from rollup_thread_daily d
                where d.thread_id = any(array(select thread_id from a)) and ${current}
               union all
               select thread_id, count(*) from m group by thread_id) x
             group by thread_id),
     best as (select thread_id, messages from (select thread_id, messages::bigint from top union all select * from now) u
               order by messages desc, thread_id limit $3),
     r as (select best.thread_id, best.messages, min(x.first_at) as first_at, max(x.last_at) as last_at
             from best join (
               select d.thread_id, d.first_at, d.last_at from rollup_thread_daily d
                where d.thread_id in (select thread_id from best) and ${current}
               union all
               select thread_id, message_time, message_time from m where thread_id in (select thread_id from best)) x
               on x.thread_id = best.thread_id
            group by best.thread_id, best.messages)
     select r.thread_id::text as "threadId", t.thread_name as "threadName", t.enrich_status as status,
            r.messages, to_json(r.first_at)#>>'{}' as "firstMessageAt", to_json(r.last_at)#>>'{}' as "lastMessageAt",
            case when r.thread_id in (select thread_id from a)
                 then (select count(*) from thread_messages h where h.thread_id = r.thread_id)
                 else coalesce(s.history_entries, 0) end as "historyEntries",
            case when r.thread_id in (select thread_id from a)
                 then (select count(*) from citations c where c.thread_id = r.thread_id)
                 else coalesce(s.citations, 0) end as citations
       from r left join threads t on t.thread_id = r.thread_id
       left join rollup_threads s on s.thread_id = r.thread_id
      order by r.messages desc, r.thread_id`,
    [r.from, r.to, limit],
  );
}
