import type pg from 'pg';

/**
 * Upkeep of the range rollups (migrations/2026-11-24T05-00-00_rollup_ranges.ts): for each day a
 * user or a thread was active, the previous day it was active, so that the distinct users or
 * threads of any range are one count (the entity counts on its first day in the range, the only
 * one whose previous active day is before the range), and `rollup_thread_firsts`: threads counted
 * on their first day, by status and depth, for ranges that start with the data.
 *
 * Runs inside the refresh of src/warehouse/rollups.ts, after the per-day rollups it reads from
 * (`rollup_user_daily`, `rollup_thread_daily`, `rollup_threads`) are current, with the refresh's
 * key sets: `rd_days` (the marked days), `rd_threads` (marked threads and every thread whose
 * per-day rows changed), in the same transaction.
 */

type Client = Pick<pg.PoolClient, 'query'>;

/** The depth bucket of a number of stored history entries: 0, 1-2, 3-5, 6-10, 11-20, 21+ → 0..5. */
const DEPTH = (
  n: string,
) => `case when coalesce(${n}, 0) = 0 then 0 when ${n} <= 2 then 1 when ${n} <= 5 then 2
  when ${n} <= 10 then 3 when ${n} <= 20 then 4 else 5 end`;

/** A thread's days with its previous day, messages, status and depth; `where` picks the threads. */
const threadDaysSql = (where: string) => `
  (thread_id, message_date, prev_date, messages, status, depth)
  select d.thread_id, d.message_date,
         lag(d.message_date) over (partition by d.thread_id order by d.message_date),
         d.messages, t.enrich_status, ${DEPTH('s.history_entries')}
  from (select thread_id, message_date, sum(messages) as messages from rollup_thread_daily ${where}
        group by thread_id, message_date) d
  left join threads t on t.thread_id = d.thread_id
  left join rollup_threads s on s.thread_id = d.thread_id`;

/** Threads by the day they first had live rows, their status and depth (`and …`: which threads). */
const FIRSTS_SQL = (and: string) => `
  select message_date, coalesce(status, '(not queued)') as status, depth, count(*) as threads
  from rollup_thread_days where prev_date is null ${and} group by 1, 2, 3`;

/** Fills the tables from the per-day rollups (a full rebuild, after they are filled). */
export async function rebuildRanges(c: Client): Promise<void> {
  await c.query('truncate rollup_user_days, rollup_thread_days, rollup_thread_firsts');
  await c.query(
    `insert into rollup_user_days (user_id, message_date, prev_date)
     select user_id, message_date, lag(message_date) over (partition by user_id order by message_date)
     from rollup_user_daily`,
  );
  await c.query(`insert into rollup_thread_days ${threadDaysSql('')}`);
  await c.query(`insert into rollup_thread_firsts ${FIRSTS_SQL('')}`);
}

/**
 * The marked days' and threads' rows again. Threads are short-lived (a few days each), so a
 * touched thread's rows are recomputed whole. A user is active on hundreds of days, so only
 * what a marked day can change is: the user's row on that day, and, where the user's presence
 * on a marked day changed, the user's next active day after it (its previous day moved).
 */
export async function refreshRanges(c: Client, o: { days: boolean; threads: boolean }): Promise<void> {
  if (o.days) {
    const days = 'select day from rd_days';
    await c.query(
      `create temp table rr_old on commit drop as
       select user_id, message_date from rollup_user_days where message_date in (${days})`,
    );
    await c.query(`delete from rollup_user_days where message_date in (${days})`);
    // One backward probe of rollup_user_daily's (user_id, message_date) index per row.
    await c.query(
      `insert into rollup_user_days (user_id, message_date, prev_date)
       select r.user_id, r.message_date,
              (select max(x.message_date) from rollup_user_daily x
                where x.user_id = r.user_id and x.message_date < r.message_date)
       from rollup_user_daily r where r.message_date in (${days})`,
    );
    await c.query(
      `update rollup_user_days u set prev_date = (
         select max(x.message_date) from rollup_user_daily x
          where x.user_id = u.user_id and x.message_date < u.message_date)
       from (
         select distinct n.user_id, n.next_date
         from ((select user_id, message_date from rr_old
                except select user_id, message_date from rollup_user_days where message_date in (${days}))
               union
               (select user_id, message_date from rollup_user_days where message_date in (${days})
                except select user_id, message_date from rr_old)) p
         cross join lateral (
           select p.user_id, min(x.message_date) as next_date from rollup_user_daily x
            where x.user_id = p.user_id and x.message_date > p.message_date) n
         where n.next_date is not null and n.next_date not in (${days})) k
       where u.user_id = k.user_id and u.message_date = k.next_date`,
    );
    await c.query('drop table rr_old');
  }
  if (o.threads) {
    const threads = 'select thread_id from rd_threads';
    const where = `and thread_id in (${threads})`;
    // rollup_thread_firsts by difference: the touched threads' first days out, then in again.
    await c.query(
      `create temp table rr_firsts on commit drop as
       select message_date, status, depth, -threads as threads from (${FIRSTS_SQL(where)}) x`,
    );
    await c.query(`delete from rollup_thread_days where thread_id in (${threads})`);
    await c.query(`insert into rollup_thread_days ${threadDaysSql(`where thread_id in (${threads})`)}`);
    await c.query(`insert into rr_firsts ${FIRSTS_SQL(where)}`);
    await c.query(
      `insert into rollup_thread_firsts as f (message_date, status, depth, threads)
       select message_date, status, depth, sum(threads) from rr_firsts group by 1, 2, 3 having sum(threads) <> 0
       on conflict (message_date, status, depth) do update set threads = f.threads + excluded.threads`,
    );
    await c.query('delete from rollup_thread_firsts where threads = 0');
    await c.query('drop table rr_firsts');
  }
}
