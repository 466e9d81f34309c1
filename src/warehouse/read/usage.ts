/**
 * Usage over time: messages, active users and threads, cancelled tasks and response lengths per
 * UTC day of live export rows (`_deleted_at is null`), and their totals over a range.
 */
import { STALE_DAYS_SQL } from '../rollups/status.ts';
import { startsWithData } from './extent.ts';
import { markedRows, STALE_DAYS, STALE_IN_RANGE_CTE } from './marked.ts';
import { type DayRange, type Queryable, rowsOf } from './queryable.ts';
import type { Source } from './source.ts';

export interface UsageDay {
  day: string;
  messages: number;
  activeUsers: number;
  activeThreads: number;
  cancelled: number;
  avgResponseChars: number | null;
  medianResponseChars: number | null;
}

const ROLLUP_DAILY = `select message_date::text as day, messages, active_users as "activeUsers",
         active_threads as "activeThreads", cancelled,
         avg_response_chars as "avgResponseChars", median_response_chars as "medianResponseChars"
    from rollup_daily
   where message_date between $1::date and $2::date and messages > 0`;

// The view's own query (a message is cancelled when its response is blank or its history entry
// is the "User cancelled" one; lengths are over the others), for the days `where` keeps. For some
// days (`probe`) each row's history entry is read by key: joined, PostgreSQL hashed the whole
// history for one marked day once the range spanned the table (8 s at 10M rows over a year).
// `offset 0` keeps the lateral a subquery of its own, so the probe runs once per row: flattened,
// its expression went into each aggregate that reads `answered`, three probes per row.
const rawDaily = (where: string, probe = false) => `select a.message_date::text as day, count(*) as messages,
         count(distinct a.user_id) as "activeUsers", count(distinct a.thread_id) as "activeThreads",
         (count(*) - count(x.answered)) as cancelled,
         round(avg(x.answered), 1)::double precision as "avgResponseChars",
         (percentile_cont(0.5) within group (order by x.answered))::double precision as "medianResponseChars"
    from analytics_messages a
    ${probe ? '' : 'left join thread_messages h on h.message_id = a.message_id'}
    cross join lateral (select case when a.response_chars = 0 or ${
      probe
        ? 'coalesce((select h.is_cancelled from thread_messages h where h.message_id = a.message_id), false)'
        : 'coalesce(h.is_cancelled, false)'
    } then null else a.response_chars end as answered${probe ? ' offset 0' : ''}) x
   where a._deleted_at is null and a.message_date between $1::date and $2::date ${where}
   group by a.message_date`;

/** One row per day of the range that has live export rows (as the `daily_usage` view). */
export async function usageDaily(q: Queryable, r: DayRange, source: Source): Promise<UsageDay[]> {
  const text =
    source === 'rollup'
      ? `${ROLLUP_DAILY} order by message_date`
      : source === 'mixed'
        ? `select * from (${ROLLUP_DAILY} and message_date not in (${STALE_DAYS_SQL})
             union all
             ${rawDaily(`and a.message_date = any(array(${STALE_DAYS_SQL}))`, true)}) d
           order by day`
        : `${rawDaily('')} order by a.message_date`;
  return rowsOf<UsageDay>(q, text, [r.from, r.to]);
}

export interface UsageTotals {
  messages: number;
  /** Distinct over the whole range (not a sum of the days' active users). */
  users: number;
  threads: number;
  days: number;
}

/** The totals from the rollups alone; `first`: the range starts with the data (extent.ts `startsWithData`). */
const rollupTotals = (first: boolean) => `select (select coalesce(sum(messages), 0)::bigint from rollup_daily
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
          where message_date between $1::date and $2::date and messages > 0) as days`;

export async function usageTotals(q: Queryable, r: DayRange, source: Source): Promise<UsageTotals> {
  // Distinct users and threads from the range rollups: each counts on its first active day in
  // the range, the one whose previous active day is before it (src/warehouse/rollups/days.ts);
  // a range that starts with the data counts first days ever.
  const first = source !== 'raw' && (await startsWithData(q, r));
  const text =
    source === 'rollup'
      ? rollupTotals(first)
      : source === 'mixed'
        ? mixedTotals(first)
        : `select count(*) as messages, count(distinct user_id) as users, count(distinct thread_id) as threads,
                count(distinct message_date) as days
           from analytics_messages
          where _deleted_at is null and message_date between $1::date and $2::date`;
  const [t] = await rowsOf<UsageTotals>(q, text, [r.from, r.to]);
  return t ?? { messages: 0, users: 0, threads: 0, days: 0 };
}

/**
 * The totals with some days marked: the rollups' totals (`base`, as the rollup form reads them),
 * with the marked days of the range as the rollups hold them taken out and their raw rows put in.
 * A distinct user (thread) is taken out when the rollups have it in the range and put in when it
 * is there now (a current day's row, or a raw row of a marked day), for the users (threads) with
 * rows on a marked day of the range only (marked.ts): two probes by key each, whatever the range
 * (counting them by their previous days read every row of the range: 4 s at 10M rows over a year).
 * A key there now is in without its probe (the `or` is evaluated in order); the marked rows'
 * keys are made distinct before the union, which otherwise sorted every raw row's key (the
 * estimates put them over work_mem: a sort on disk).
 */
const mixedTotals = (first: boolean) => {
  const moved = (table: string, key: string) => `(
    select coalesce(sum((n.${key} is not null
                         or exists (select 1 from ${table} x where x.${key} = k.${key}
                                     and x.message_date between $1::date and $2::date
                                     and x.message_date <> all(${STALE_DAYS})))::int
                        - (exists (select 1 from ${table} x where x.${key} = k.${key}
                                    and x.message_date between $1::date and $2::date))::int), 0)
      from (select ${key} from ${table} where message_date = any(${STALE_DAYS})
            union select distinct ${key} from m) k
      left join (select distinct ${key} from m) n on n.${key} = k.${key})`;
  return `with ${STALE_IN_RANGE_CTE},
     m as materialized (${markedRows('user_id, thread_id, message_date', false)}),
     base as (${rollupTotals(first)}),
     was as (select coalesce(sum(messages), 0) as messages, count(*) filter (where messages > 0) as days
               from rollup_daily where message_date = any(${STALE_DAYS}))
     select (base.messages - was.messages + (select count(*) from m))::bigint as messages,
            (base.users + ${moved('rollup_user_daily', 'user_id')})::bigint as users,
            (base.threads + ${moved('rollup_thread_daily', 'thread_id')})::bigint as threads,
            (base.days - was.days + (select count(distinct message_date) from m))::bigint as days
       from base, was`;
};
