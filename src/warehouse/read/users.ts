/** Users: the most active of a range, and the new ones (first live message ever) per day. */
import { coversAll } from './extent.ts';
import { type DayRange, type Queryable, rowsOf, TOP_N } from './queryable.ts';
import type { Source } from './source.ts';

export interface TopUser {
  userId: string;
  messages: number;
  threads: number;
  daysActive: number;
  firstSeenAt: string;
  lastSeenAt: string;
}

/** The users with the most messages in the range (ties by id, so the order is stable). */
export async function topUsers(q: Queryable, r: DayRange, source: Source, limit = TOP_N): Promise<TopUser[]> {
  if (source === 'rollup' && (await coversAll(q, r))) {
    return rowsOf<TopUser>(
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
  return rowsOf<TopUser>(q, text, [r.from, r.to, limit]);
}

export interface NewUsersDay {
  day: string;
  newUsers: number;
}

/** Users whose first live message (ever) falls on each day of the range. */
export async function newUsersDaily(q: Queryable, r: DayRange, source: Source): Promise<NewUsersDay[]> {
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
  return rowsOf<NewUsersDay>(q, text, [r.from, r.to]);
}
