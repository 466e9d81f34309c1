/**
 * Usage over time: messages, active users and threads, cancelled tasks and response lengths per
 * UTC day of live export rows (`_deleted_at is null`), and their totals over a range.
 */
import { STALE_DAYS_SQL } from '../rollups/status.ts';
import { startsWithData } from './extent.ts';
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
// is the "User cancelled" one; lengths are over the others), for the days `where` keeps.
const rawDaily = (where: string) => `select a.message_date::text as day, count(*) as messages,
         count(distinct a.user_id) as "activeUsers", count(distinct a.thread_id) as "activeThreads",
         (count(*) - count(x.answered)) as cancelled,
         round(avg(x.answered), 1)::double precision as "avgResponseChars",
         (percentile_cont(0.5) within group (order by x.answered))::double precision as "medianResponseChars"
    from analytics_messages a
    left join thread_messages h on h.message_id = a.message_id
    cross join lateral (select case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
                                    else a.response_chars end as answered) x
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
             ${rawDaily(`and a.message_date = any(array(${STALE_DAYS_SQL}))`)}) d
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

export async function usageTotals(q: Queryable, r: DayRange, source: Source): Promise<UsageTotals> {
  // Distinct users and threads from the range rollups: each counts on its first active day in
  // the range, the one whose previous active day is before it (src/warehouse/rollups/days.ts);
  // a range that starts with the data counts first days ever.
  const first = source === 'rollup' && (await startsWithData(q, r));
  if (source === 'mixed') return usageTotalsMixed(q, r);
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
  const [t] = await rowsOf<UsageTotals>(q, text, [r.from, r.to]);
  return t ?? { messages: 0, users: 0, threads: 0, days: 0 };
}

/**
 * The totals with some days marked: the rollups' per-day rows of the current days and the raw rows
 * of the marked days in the range. A user (thread) counts once: on the current days, on its first
 * current day in the range (its previous active day before the range, or a marked day with no
 * current day of the range between: the rollups' previous days are those of the last refresh, a
 * marked day's own row included); on the marked days, only when it has no current day in the range.
 */
async function usageTotalsMixed(q: Queryable, r: DayRange): Promise<UsageTotals> {
  const distinct = (table: string, key: string) => `
    (select count(*) from ${table} d
      where d.message_date between $1::date and $2::date and d.message_date not in (select day from stale)
        and (d.prev_date is null or d.prev_date < $1::date
             or (d.prev_date in (select day from stale)
                 and not exists (select 1 from ${table} x
                                  where x.${key} = d.${key} and x.message_date >= $1::date
                                    and x.message_date < d.message_date
                                    and x.message_date not in (select day from stale)))))
    + (select count(distinct m.${key}) from m
        where not exists (select 1 from ${table} x
                           where x.${key} = m.${key} and x.message_date between $1::date and $2::date
                             and x.message_date not in (select day from stale)))`;
  const [t] = await rowsOf<UsageTotals>(
    q,
    `with stale as (select distinct day from (${STALE_DAYS_SQL}) s where day between $1::date and $2::date),
     m as materialized (select user_id, thread_id, message_date from analytics_messages
                         where _deleted_at is null and message_date = any(array(select day from stale))),
     cur as (select messages from rollup_daily
              where message_date between $1::date and $2::date and messages > 0
                and message_date not in (select day from stale))
     select ((select coalesce(sum(messages), 0) from cur) + (select count(*) from m))::bigint as messages,
            ${distinct('rollup_user_daily', 'user_id')} as users,
            ${distinct('rollup_thread_daily', 'thread_id')} as threads,
            (select count(*) from cur) + (select count(distinct message_date) from m) as days`,
    [r.from, r.to],
  );
  return t ?? { messages: 0, users: 0, threads: 0, days: 0 };
}
