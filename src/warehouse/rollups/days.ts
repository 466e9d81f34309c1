import type pg from 'pg';

/**
 * The per-day rows of threads and users (`rollup_thread_daily`, `rollup_user_daily`), each with the
 * previous day its thread or user was active (`prev_date`), and for threads the thread's status and
 * depth bucket; and `rollup_thread_firsts`, threads counted on their first day.
 *
 * Why the previous day: the distinct users or threads of a range [a, b] are the rows of the range
 * whose previous day is before `a` (or none): each counts on its first day in the range, and that
 * is one index-only read, with no sort or hash of keys (src/warehouse/read/users.ts, read/threads.ts). A thread's rows
 * are per day and user (a second user of a thread is tolerated, not expected), ordered by day
 * then user: the second user's row of a day has that same day as its previous one, so it never
 * counts again.
 *
 * Runs inside the refresh of the marked keys (refresh-marked.ts), in its transaction, with its key sets:
 * `rd_days` (the marked days), `rd_threads` (marked threads), `rd_users` (users whose rows changed),
 * and `rd_td`: the marked days' thread rows as the raw rows give them now (a narrowed refresh: those
 * of the threads its day pulls wrote, `rd_wt`, alone; every other row of those days is as the last
 * refresh left it). Each row is written once per refresh, with every column in place: a first load
 * inserts and never updates.
 */

type Client = Pick<pg.PoolClient, 'query'>;

/** The depth bucket of a number of stored history entries: 0, 1-2, 3-5, 6-10, 11-20, 21+ → 0..5. */
const DEPTH = (
  n: string,
) => `case when coalesce(${n}, 0) = 0 then 0 when ${n} <= 2 then 1 when ${n} <= 5 then 2
  when ${n} <= 10 then 3 when ${n} <= 20 then 4 else 5 end`;

const STATUS = (s: string) => `coalesce(${s}, '(not queued)')`;

/** Threads by the day of their first row, status and depth; `rows`: a relation with those columns. */
const firstsSql = (rows: string, sign: string) => `
  select message_date, ${STATUS('status')} as status, depth, ${sign}count(*) as threads
  from ${rows} where prev_date is null group by 1, 2, 3`;

const THREAD_COLS = 'thread_id, message_date, user_id, messages, first_at, last_at';
const DAYS = 'select day from rd_days';

/** Every thread's rows from the raw rows, in one pass (a full rebuild: the tables are empty). */
export async function rebuildDays(c: Client): Promise<void> {
  await c.query(
    `insert into rollup_thread_daily (${THREAD_COLS}, prev_date, status, depth)
     select d.thread_id, d.message_date, d.user_id, d.messages, d.first_at, d.last_at,
            lag(d.message_date) over (partition by d.thread_id order by d.message_date, d.user_id),
            t.enrich_status, ${DEPTH('h.n')}
     from (select thread_id, message_date, user_id, count(*)::bigint as messages,
                  min(message_time) as first_at, max(message_time) as last_at
           from analytics_messages where _deleted_at is null group by 1, 2, 3) d
     left join threads t on t.thread_id = d.thread_id
     left join (select thread_id, count(*) as n from thread_messages group by thread_id) h on h.thread_id = d.thread_id`,
  );
  await c.query(
    `insert into rollup_user_daily (user_id, message_date, messages, threads, first_at, last_at, prev_date)
     select user_id, message_date, sum(messages)::bigint, count(*)::bigint, min(first_at), max(last_at),
            lag(message_date) over (partition by user_id order by message_date)
     from rollup_thread_daily group by user_id, message_date`,
  );
  await c.query(`insert into rollup_thread_firsts ${firstsSql('rollup_thread_daily', '')}`);
}

/**
 * The thread rows of the marked days and of the marked threads. Puts the threads whose rows on the
 * marked days changed into `rd_threads` (the later steps recompute them) and keeps
 * `rollup_thread_firsts` by difference.
 * Long: the statements of one step in the order they must run, sharing its temporary tables
 * (rd_changed, rd_tstate, rr_firsts, rd_kept: each made by one statement and read by the next
 * ones); each is a single query, and the two ways a changed thread's rows are written (a first
 * load, or rows on other days too) are the branches of one choice.
 */
export async function refreshThreadDays(
  c: Client,
  o: { days: boolean; otherDays: boolean; narrow: boolean },
): Promise<void> {
  // The threads whose rows on the marked days are not what the raw rows give now; narrowed, among
  // the written threads (`rd_wt`): the others' rows are as the last refresh left them.
  await c.query('create temp table rd_changed (thread_id uuid primary key) on commit drop');
  if (o.days) {
    const old = `select ${THREAD_COLS} from rollup_thread_daily where message_date in (${DAYS})${
      o.narrow ? ' and thread_id in (select thread_id from rd_wt)' : ''
    }`;
    if (o.narrow) {
      // The users whose rows of the days the written threads' rows make, before and after:
      // refreshUserDays recomputes theirs alone.
      await c.query(
        `create temp table rd_uscope on commit drop as
         select user_id from rd_td union select user_id from (${old}) x`,
      );
    }
    const had = await c.query<{ any: boolean }>(`select exists (${old}) as any`);
    await c.query(
      `insert into rd_changed
       ${
         had.rows[0]?.any === true
           ? `select distinct thread_id from ((${old} except all select ${THREAD_COLS} from rd_td)
              union all (select ${THREAD_COLS} from rd_td except all ${old})) x`
           : // A first load of the days: every row is new.
             'select distinct thread_id from rd_td'
       }`,
    );
    await c.query('insert into rd_threads select thread_id from rd_changed on conflict do nothing');
  }
  await c.query('analyze rd_changed');
  await c.query('analyze rd_threads');
  // The touched threads' status and depth as they are now (the depth from their stored history
  // entries, one index probe each: rollup_threads is recomputed after this step).
  await c.query(
    `create temp table rd_tstate on commit drop as
     select k.thread_id, t.enrich_status as status, ${DEPTH('h.n')}::smallint as depth
     from rd_threads k
     left join threads t on t.thread_id = k.thread_id
     cross join lateral (select count(*) as n from thread_messages x where x.thread_id = k.thread_id) h`,
  );
  await c.query('alter table rd_tstate add primary key (thread_id)');
  // Their first rows before anything below changes them (taken out of the firsts, then put back).
  await c.query(
    `create temp table rr_firsts on commit drop as
     ${firstsSql('(select r.* from rd_threads k join rollup_thread_daily r on r.thread_id = k.thread_id) f', '-')}`,
  );

  // A thread row counts among its day's threads unless it is a second user's row of the day
  // (`prev_date` that same day). Narrowed, the days' counts move by the changed threads' rows
  // alone (`rd_tcount`: theirs out, then in): every other row of the days stays as it is.
  const counted = 'count(*) filter (where prev_date is distinct from message_date)';
  if (o.narrow) await c.query('create temp table rd_tcount (message_date date, n bigint) on commit drop');
  if (o.days) {
    const del = `delete from rollup_thread_daily
       where message_date in (${DAYS}) and thread_id in (select thread_id from rd_changed)`;
    await c.query(
      o.narrow
        ? `with d as (${del} returning message_date, prev_date)
           insert into rd_tcount select message_date, -${counted} from d group by message_date`
        : del,
    );
  }
  const changed = (rows: string) =>
    `(select ${rows} from rd_td td join rd_tstate st on st.thread_id = td.thread_id
      where td.thread_id in (select thread_id from rd_changed)) x`;
  if (o.days && !o.otherDays) {
    // No other day has rows (a first load): a changed thread's rows are all in rd_td, whose
    // `prev` is the previous row among them.
    await c.query(
      `insert into rollup_thread_daily (${THREAD_COLS}, prev_date, status, depth)
       select ${THREAD_COLS}, prev, status, depth
       from ${changed('td.*, st.status, st.depth')}`,
    );
    await c.query(
      `insert into rr_firsts ${firstsSql(changed('td.message_date, td.prev as prev_date, st.status, st.depth'), '')}`,
    );
  } else if (o.days) {
    // Each changed thread's rows in day order: the new rows of the marked days with its rows on
    // other days. The new rows are inserted with their previous day, status and depth, the others
    // updated where one of those moved. One statement, so that `seq` is computed once.
    await c.query(
      `with seq as (
         select u.*, lag(u.message_date) over (partition by u.thread_id order by u.message_date, u.user_id) as prev
         from (select ${THREAD_COLS}, true as new, null::date as old_prev, null::text as old_status,
                      null::smallint as old_depth
               from rd_td where thread_id in (select thread_id from rd_changed)
               union all
               select ${THREAD_COLS}, false, prev_date, status, depth
               from rollup_thread_daily
               where thread_id in (select thread_id from rd_changed) and message_date not in (${DAYS})) u),
       ins as (
         insert into rollup_thread_daily (${THREAD_COLS}, prev_date, status, depth)
         select s.thread_id, s.message_date, s.user_id, s.messages, s.first_at, s.last_at, s.prev, st.status, st.depth
         from seq s join rd_tstate st on st.thread_id = s.thread_id where s.new),
       upd as (
         update rollup_thread_daily r set prev_date = s.prev, status = st.status, depth = st.depth
         from seq s join rd_tstate st on st.thread_id = s.thread_id
         where not s.new and r.thread_id = s.thread_id and r.message_date = s.message_date and r.user_id = s.user_id
           and (s.old_prev is distinct from s.prev or s.old_status is distinct from st.status or s.old_depth <> st.depth))
       insert into rr_firsts
       ${firstsSql('(select s.message_date, s.prev as prev_date, st.status, st.depth from seq s join rd_tstate st on st.thread_id = s.thread_id) f', '')}`,
    );
  }
  if (o.narrow) {
    await c.query(
      `insert into rd_tcount select message_date, ${counted} from rollup_thread_daily
       where message_date in (${DAYS}) and thread_id in (select thread_id from rd_changed) group by message_date`,
    );
  }
  // Marked threads whose rows did not change: their status or depth may have. Their keys as a
  // table of their own, so that the planner probes the thread rows by key.
  await c.query(
    `create temp table rd_kept on commit drop as
     select thread_id from rd_threads except select thread_id from rd_changed`,
  );
  await c.query('analyze rd_kept');
  await c.query(
    `update rollup_thread_daily r set status = st.status, depth = st.depth
     from rd_kept k join rd_tstate st on st.thread_id = k.thread_id
     where r.thread_id = k.thread_id and (r.status is distinct from st.status or r.depth <> st.depth)`,
  );
  await c.query(
    `insert into rr_firsts
     ${firstsSql('(select r.* from rd_kept k join rollup_thread_daily r on r.thread_id = k.thread_id) f', '')}`,
  );
  await c.query(
    `insert into rollup_thread_firsts as f (message_date, status, depth, threads)
     select message_date, status, depth, sum(threads) from rr_firsts group by 1, 2, 3 having sum(threads) <> 0
     on conflict (message_date, status, depth) do update set threads = f.threads + excluded.threads`,
  );
  await c.query('delete from rollup_thread_firsts where threads = 0');
  await c.query('drop table rr_firsts');
  await c.query('drop table rd_kept');
  await c.query('drop table rd_tstate');
  await c.query('drop table rd_changed');
}

/**
 * The user rows of the marked days, from their thread rows (`rd_td`). A user is active on hundreds
 * of days, so only what a marked day can change is written: the user's row of that day, with the
 * previous active day found by a backward probe, and, where the user's presence on a marked day
 * changed, the previous day of the user's next active day after it. Users whose rows changed go
 * into `rd_users`. Leaves `rd_ud`, the user rows it wrote (refreshMarked drops it).
 */
export async function refreshUserDays(c: Client, o: { otherDays: boolean; narrow: boolean }): Promise<void> {
  // Narrowed, the rows of the users of the written threads alone (`rd_uscope`), from the thread
  // rows as refreshThreadDays left them: a user's row of a day sums all of its threads that day.
  const scope = o.narrow ? ' and user_id in (select user_id from rd_uscope)' : '';
  await c.query(
    `create temp table rr_old on commit drop as
     with d as (delete from rollup_user_daily where message_date in (${DAYS})${scope}
                returning user_id, message_date, messages, threads, first_at, last_at)
     select * from d`,
  );
  // Each row's previous day on the days not marked, by a backward probe, taken before the insert
  // (a probe during it would step over the statement's own new rows, invisible to it, one by one).
  await c.query(
    `create temp table rd_ud on commit drop as
     select n.*, ${
       o.otherDays
         ? `(select max(x.message_date) from rollup_user_daily x
             where x.user_id = n.user_id and x.message_date < n.message_date)`
         : 'null::date'
     } as before
     from (select user_id, message_date, sum(messages)::bigint as messages, count(*)::bigint as threads,
                  min(first_at) as first_at, max(last_at) as last_at
           from ${o.narrow ? `rollup_thread_daily where message_date in (${DAYS})${scope}` : 'rd_td'}
           group by user_id, message_date) n`,
  );
  await c.query(
    `insert into rollup_user_daily (user_id, message_date, messages, threads, first_at, last_at, prev_date)
     select user_id, message_date, messages, threads, first_at, last_at,
            greatest(lag(message_date) over (partition by user_id order by message_date), before)
     from rd_ud`,
  );
  await c.query('alter table rd_ud drop column before');
  const had = await c.query<{ any: boolean }>('select exists (select 1 from rr_old) as any');
  await c.query(
    `insert into rd_users
     ${
       had.rows[0]?.any === true
         ? `select distinct user_id from ((select * from rr_old except all select * from rd_ud)
                                          union all (select * from rd_ud except all select * from rr_old)) x`
         : 'select distinct user_id from rd_ud'
     }
     on conflict do nothing`,
  );
  // The next active day after a day whose presence changed, when it is not a marked day (those
  // were written above): its previous day moved.
  if (o.otherDays) {
    await c.query(
      `update rollup_user_daily u set prev_date = (
       select max(x.message_date) from rollup_user_daily x
        where x.user_id = u.user_id and x.message_date < u.message_date)
     from (
       select distinct n.user_id, n.next_date
       from ((select user_id, message_date from rr_old except select user_id, message_date from rd_ud)
             union
             (select user_id, message_date from rd_ud except select user_id, message_date from rr_old)) p
       cross join lateral (
         select p.user_id, min(x.message_date) as next_date from rollup_user_daily x
          where x.user_id = p.user_id and x.message_date > p.message_date) n
       where n.next_date is not null and n.next_date not in (${DAYS})) k
     where u.user_id = k.user_id and u.message_date = k.next_date`,
    );
  }
  if (o.narrow) {
    // The days' user counts move by the scope's rows alone: theirs out, then in.
    await c.query(
      `create temp table rd_ucount on commit drop as
       select message_date, count(*) as n from rd_ud group by message_date
       union all select message_date, -count(*) from rr_old group by message_date`,
    );
    await c.query('drop table rd_uscope');
  }
  await c.query('drop table rr_old');
}
