/**
 * Usage over time: messages, active users and threads, cancelled tasks and response lengths per
 * UTC day of live export rows (`_deleted_at is null`), and their totals over a range.
 */
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

/** One row per day of the range that has live export rows (as the `daily_usage` view). */
export async function usageDaily(q: Queryable, r: DayRange, source: Source): Promise<UsageDay[]> {
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
