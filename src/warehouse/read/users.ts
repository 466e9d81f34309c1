/** Users: the most active of a range, and the new ones (first live message ever) per day. */
import { coversAll } from './extent.ts';
import { markedRows, notIn, STALE_CTE, STALE_DAYS } from './marked.ts';
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
  if (source === 'mixed') return topUsersMixed(q, r, limit);
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

/**
 * The top users with some days marked (marked.ts). Over a range that holds every current day with
 * data, the untouched users' all-time rows (`rollup_users`) are their figures in the range, and a
 * touched user's messages are its all-time ones with its rows of the marked days as the rollups
 * hold them taken out and the raw ones of the range put in; over a shorter range, the range's
 * current user-days and the marked days' raw rows are summed per user (what the rollup form sums,
 * plus the marked days). Then the 25's days, times and threads from both.
 */
async function topUsersMixed(q: Queryable, r: DayRange, limit: number): Promise<TopUser[]> {
  const [c] = await rowsOf<{ all: boolean }>(
    q,
    `with ${STALE_CTE}
     select coalesce($1::date <= min(message_date) and $2::date >= max(message_date), false) as all
       from rollup_daily where messages > 0 and message_date <> all(${STALE_DAYS})`,
    [r.from, r.to],
  );
  const current = `d.message_date between $1::date and $2::date and d.message_date <> all(${STALE_DAYS})`;
  const ranked =
    c?.all === true
      ? `mu as (select user_id, count(*) as n from m group by user_id),
         ou as (select user_id, sum(messages) as n from rollup_user_daily
                 where message_date = any(${STALE_DAYS}) group by user_id),
         a as materialized (select user_id from ou union select user_id from mu),
         ranked as (
           (select user_id, messages from rollup_users
             where messages > 0 and ${notIn('user_id', 'user_id', 'a')}
             order by messages desc, user_id limit $3)
           union all
           select a.user_id, (coalesce(u.messages, 0) - coalesce(ou.n, 0) + coalesce(mu.n, 0))::bigint
             from a left join rollup_users u on u.user_id = a.user_id
             left join ou on ou.user_id = a.user_id left join mu on mu.user_id = a.user_id)`
      : `ranked as (
           select d.user_id, sum(d.messages::int)::bigint as messages from rollup_user_daily d
            where ${current} group by d.user_id
           union all
           select user_id, count(*) from m group by user_id)`;
  return rowsOf<TopUser>(
    q,
    `with ${STALE_CTE},
     m as materialized (${markedRows('user_id, thread_id, message_date, message_time', true)}),
     ${ranked},
     top as (select user_id, sum(messages)::bigint as messages from ranked group by user_id
              having sum(messages) > 0 order by 2 desc, user_id limit $3),
     ud as (select d.user_id, d.first_at, d.last_at from rollup_user_daily d
             where d.user_id in (select user_id from top) and ${current}
            union all
            select user_id, min(message_time), max(message_time) from m
             where user_id in (select user_id from top) group by user_id, message_date),
     u as (select user_id, count(*) as days, min(first_at) as first_at, max(last_at) as last_at
             from ud group by user_id),
     t as (select user_id, count(distinct thread_id) as threads from (
             select ut.user_id, ut.thread_id from rollup_user_threads ut
              where ut.user_id in (select user_id from top)
                and exists (select 1 from rollup_thread_daily d
                             where d.thread_id = ut.thread_id and d.user_id = ut.user_id and ${current})
             union all
             select user_id, thread_id from m where user_id in (select user_id from top)) x
            group by user_id)
     select top.user_id::text as "userId", top.messages, coalesce(t.threads, 0) as threads, u.days as "daysActive",
            to_json(u.first_at)#>>'{}' as "firstSeenAt", to_json(u.last_at)#>>'{}' as "lastSeenAt"
       from top join u on u.user_id = top.user_id left join t on t.user_id = top.user_id
      order by top.messages desc, top.user_id`,
    [r.from, r.to, limit],
  );
}

export interface NewUsersDay {
  day: string;
  newUsers: number;
}

const ROLLUP_NEW_USERS = `select (first_seen_at at time zone 'UTC')::date::text as day, count(*) as "newUsers"
    from rollup_users
   where first_seen_at >= ($1::date)::timestamp at time zone 'UTC'
     and first_seen_at < ($2::date + 1)::timestamp at time zone 'UTC'
   group by 1`;

/** Users whose first live message (ever) falls on each day of the range. */
export async function newUsersDaily(q: Queryable, r: DayRange, source: Source): Promise<NewUsersDay[]> {
  const text =
    source === 'rollup'
      ? `${ROLLUP_NEW_USERS} order by 1`
      : source === 'mixed'
        ? // The rollups' first days, with the touched users' (marked.ts) first days as the rollups
          // hold them taken out and their first days now put in: the first of their current days
          // (an index probe: days in order) and of the marked days' raw rows.
          `with ${STALE_CTE},
           m as materialized (${markedRows('user_id, min(message_date) as first_day', false)} group by user_id),
           a as materialized (select user_id from rollup_user_daily where message_date = any(${STALE_DAYS})
                              union select user_id from m),
           firsts as (
             select ((u.first_seen_at at time zone 'UTC')::date) as day, -1 as n
               from a join rollup_users u on u.user_id = a.user_id
             union all
             select least(m.first_day, (select min(d.message_date) from rollup_user_daily d
                                          where d.user_id = a.user_id and d.message_date <> all(${STALE_DAYS}))), 1
               from a left join m on m.user_id = a.user_id)
           select day, sum(n)::bigint as "newUsers" from (
             ${ROLLUP_NEW_USERS}
             union all
             select day::text, n from firsts where day between $1::date and $2::date) c (day, n)
            group by day having sum(n) <> 0 order by day`
        : `select first_day::text as day, count(*) as "newUsers"
           from (select user_id, min(message_date) as first_day
                   from analytics_messages where _deleted_at is null group by user_id) u
          where first_day between $1::date and $2::date
          group by first_day
          order by first_day`;
  return rowsOf<NewUsersDay>(q, text, [r.from, r.to]);
}
