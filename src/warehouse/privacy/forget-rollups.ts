import { replaceRows } from '../rollups/replace.ts';
import { usersSql } from '../rollups/sql.ts';
import type { Client } from '../rollups/transaction.ts';

/**
 * The rollups of an erasure, corrected in its transaction without recomputing the days whole.
 *
 * An erasure removes whole threads (`fg_threads`: every raw row of them goes), so their rows in
 * the thread-keyed rollups simply go away, and what they added to the day-, user- and
 * source-keyed rollups is taken out of them: counts and sums by difference, distinct counts by the
 * keys that disappear (a user's day when its last thread row of that day goes, a source's day
 * when its last thread does). What cannot be moved is recomputed: a day's median response length
 * from the day's rows that remain, a user's row from the user's rows that remain, a source's
 * latest date from its threads that remain. Recomputing every day an erased user was active
 * whole (before: all 365 days of a heavy user, ~20 statements each reading every row of the
 * year) cost 126 s at 10M rows; this reads the erased rows, and the day's rows once for the median.
 *
 * Why it is exact: every rollup row equals the raw rows at its last refresh unless a mark says
 * otherwise, and the figures taken out are those the rollups hold for the erased threads (their
 * stored per-thread rows) or the raw rows of them (unchanged since, unless marked). Days that are
 * not clean that way are left marked, and the refresh that follows in the same transaction
 * recomputes them whole from the raw rows, as before: a day marked or waiting before the erasure
 * (a pull's unreleased writes), and a day whose remaining row lost its "User cancelled" history
 * entry with an erased thread.
 *
 * In the erasure's transaction: `eraseRollupsBefore` reads what the raw rows give before they are
 * deleted, the deletes keep what KEPT_ERASED says, `eraseRollupsAfter` corrects the rollups after
 * and removes the marks the deletes left on what it corrected. Its temporary tables are `fe_*`.
 */

/**
 * What the correction keeps of a table's erased rows, as the erasure deletes them: the "User
 * cancelled" history entries (by message id), whose remaining export row, if one is left in
 * another thread, becomes answered (its day is then left to the refresh). `returning` for the
 * delete's RETURNING, `insert` a statement over its rows `d`.
 */
export const KEPT_ERASED: Readonly<Record<string, { returning: string; insert: string }>> = {
  thread_messages: {
    returning: 'message_id, is_cancelled',
    insert: 'insert into fe_cancelled select message_id from d where is_cancelled',
  },
};

/**
 * Before the deletes: the erased rows' figures per day (from `fg_messages`, which collect fills
 * with what this takes), and the days to leave to the refresh.
 */
export async function eraseRollupsBefore(c: Client): Promise<void> {
  // The "User cancelled" entries, read once (a scan of the history; a probe per erased row took
  // 10 s for 500k rows at 10M): the erased rows' figures and the days' medians take them.
  await c.query(
    `create temp table fe_cancel on commit drop as
     select message_id from thread_messages where is_cancelled`,
  );
  await c.query('alter table fe_cancel add primary key (message_id)');
  await c.query('analyze fe_cancel');
  // As rawRowsSql and dailyFiguresSql give them: a row is answered unless its response is blank
  // or its history entry (by message id) says "User cancelled".
  await c.query(
    `create temp table fe_figures on commit drop as
     select message_date, count(*)::bigint as messages, count(answered)::bigint as answered,
            coalesce(sum(answered), 0)::bigint as chars
     from (select m.message_date,
                  case when m.response_chars = 0 or k.message_id is not null then null
                       else m.response_chars end as answered
           from fg_messages m left join fe_cancel k on k.message_id = m.message_id
           where m.live) x
     group by message_date`,
  );
  // Every day a delete marks: of live or soft-deleted rows.
  await c.query(
    'create temp table fe_days on commit drop as select distinct message_date as day from fg_messages',
  );
  // Days the arithmetic cannot vouch for: marked before, or waiting for their pull's release (their
  // rollup rows are not their raw rows). eraseRollupsAfter adds the days of remaining rows that
  // lose their cancelling entry.
  await c.query(
    `create temp table fe_whole on commit drop as
     select day from rollup_dirty_days where day in (select day from fe_days)
     union select day from rollup_waiting_days where day in (select day from fe_days)`,
  );
  await c.query('create temp table fe_cancelled (message_id uuid) on commit drop');
}

/**
 * After the raw rows are deleted: every rollup corrected for the erased threads, and the marks
 * the deletes left on the days and threads corrected taken back. Returns the days corrected (not
 * those left to the refresh) and the threads removed.
 * Long: one statement a rollup, in the order each hands its keys to the next (the thread rows
 * to the user rows and the days' counts, the per-thread citations to their totals); splitting it
 * would pass the same temporary tables around.
 */
export async function eraseRollupsAfter(c: Client): Promise<{ days: number; threads: number }> {
  await c.query(
    `insert into fe_whole select a.message_date from fe_cancelled k
     join analytics_messages a on a.message_id = k.message_id where a._deleted_at is null`,
  );
  await c.query('analyze fe_days, fe_whole, fe_figures');
  // Thread rows of the days: they go, and their firsts, day counts and user rows with them.
  await c.query(
    `create temp table fe_td on commit drop as
     with d as (delete from rollup_thread_daily where thread_id in (select thread_id from fg_threads) returning *)
     select * from d`,
  );
  await c.query(
    `insert into rollup_thread_firsts as f (message_date, status, depth, threads)
     select message_date, coalesce(status, '(not queued)'), depth, -count(*) from fe_td
     where prev_date is null group by 1, 2, 3
     on conflict (message_date, status, depth) do update set threads = f.threads + excluded.threads`,
  );
  await c.query('delete from rollup_thread_firsts where threads = 0');
  await c.query(
    `create temp table fe_users on commit drop as
     select distinct user_id from fe_td
     union select user_id from rollup_user_threads where thread_id in (select thread_id from fg_threads)`,
  );
  await c.query('delete from rollup_user_threads where thread_id in (select thread_id from fg_threads)');
  await c.query('delete from rollup_threads where thread_id in (select thread_id from fg_threads)');
  // A user's row of a day goes with its last thread row of that day; else it loses the erased ones'
  // messages and threads, and its times are read again from the threads left (few: a second user
  // of an erased thread, or the user of an erased thread).
  await c.query(
    `create temp table fe_ud on commit drop as
     select user_id, message_date, sum(messages)::bigint as messages, count(*)::bigint as threads
     from fe_td group by user_id, message_date`,
  );
  await c.query(
    `create temp table fe_gone on commit drop as
     with d as (delete from rollup_user_daily u using fe_ud e
                where u.user_id = e.user_id and u.message_date = e.message_date and u.threads = e.threads
                returning u.user_id, u.message_date)
     select * from d`,
  );
  await c.query(
    `update rollup_user_daily u set messages = u.messages - e.messages, threads = u.threads - e.threads,
            first_at = t.first_at, last_at = t.last_at
     from fe_ud e cross join lateral (
       select min(r.first_at) as first_at, max(r.last_at) as last_at
       from rollup_user_threads ut join rollup_thread_daily r
         on r.thread_id = ut.thread_id and r.message_date = e.message_date and r.user_id = ut.user_id
       where ut.user_id = e.user_id) t
     where u.user_id = e.user_id and u.message_date = e.message_date`,
  );
  // The previous day of a user's rows after a day that went, for the users with rows left.
  await c.query(
    `update rollup_user_daily u set prev_date = x.prev
     from (select user_id, message_date, lag(message_date) over (partition by user_id order by message_date) as prev
           from rollup_user_daily where user_id in (select distinct user_id from fe_gone)) x
     where u.user_id = x.user_id and u.message_date = x.message_date and u.prev_date is distinct from x.prev`,
  );
  await replaceRows(c, {
    table: 'rollup_users',
    where: 'user_id in (select user_id from fe_users)',
    select: usersSql('select user_id from fe_users'),
  });
  await correctDays(c);
  await correctCitations(c);
  // The marks the deletes left on what was corrected here (the rows this transaction wrote);
  // those of other writers, and of the days left whole, stay for the refresh.
  await c.query(
    `delete from rollup_dirty_days where xmin = pg_current_xact_id()::xid
       and day in (select day from fe_days) and day not in (select day from fe_whole)`,
  );
  await c.query(
    `delete from rollup_dirty_threads where xmin = pg_current_xact_id()::xid
       and thread_id in (select thread_id from fg_threads)`,
  );
  const n = await c.query<{ days: number; threads: number }>(
    `select (select count(*) from fe_days where day not in (select day from fe_whole))::int as days,
            (select count(*) from fg_threads)::int as threads`,
  );
  return n.rows[0] ?? { days: 0, threads: 0 };
}

/**
 * rollup_daily: the erased rows' figures taken out, the distinct counts moved by the thread and
 * user rows that went, the average from the sums, and the median of each day that lost an
 * answered row read again from the day's rows left.
 */
async function correctDays(c: Client): Promise<void> {
  await c.query(
    `create temp table fe_counts on commit drop as
     select message_date, sum(t)::bigint as threads, sum(u)::bigint as users
     from (select message_date, count(*) filter (where prev_date is distinct from message_date) as t, 0 as u
           from fe_td group by message_date
           union all select message_date, 0, count(*) from fe_gone group by message_date) x
     group by message_date`,
  );
  // Each day's answered lengths and how many rows have each, then the median from them as
  // percentile_cont gives it (the two middle values of the sorted rows, halfway between them
  // when their number is even): grouped by hash, where percentile_cont sorts every row. The
  // cancelling entries as read before the deletes: a row that lost its own is on a day left to
  // the refresh (fe_whole).
  await c.query(
    `create temp table fe_lengths on commit drop as
     select a.message_date, a.response_chars as chars, count(*) as n
     from analytics_messages a
     where a.message_date in (select message_date from fe_figures where answered > 0)
       and a._deleted_at is null and a.response_chars > 0
       and not exists (select 1 from fe_cancel k where k.message_id = a.message_id)
     group by a.message_date, a.response_chars`,
  );
  await c.query(
    `create temp table fe_median on commit drop as
     select message_date, case when total % 2 = 0 then lo + 0.5 * (hi - lo) else lo end as median
     from (select message_date, total,
                  (min(chars) filter (where cum > (total - 1) / 2))::double precision as lo,
                  (min(chars) filter (where cum > total / 2))::double precision as hi
           from (select message_date, chars, sum(n) over (partition by message_date order by chars) as cum,
                        sum(n) over (partition by message_date) as total
                 from fe_lengths) x
           group by message_date, total) y`,
  );
  await c.query(
    `update rollup_daily d set
       messages = d.messages - coalesce(f.messages, 0),
       cancelled = d.cancelled - (coalesce(f.messages, 0) - coalesce(f.answered, 0)),
       answered = d.answered - coalesce(f.answered, 0),
       response_chars_sum = d.response_chars_sum - coalesce(f.chars, 0),
       avg_response_chars = case when d.answered - coalesce(f.answered, 0) > 0
         then round((d.response_chars_sum - coalesce(f.chars, 0))::numeric / (d.answered - coalesce(f.answered, 0)), 1)::double precision end,
       median_response_chars = case when coalesce(f.answered, 0) > 0
         then (select m.median from fe_median m where m.message_date = d.message_date)
         else d.median_response_chars end,
       active_threads = d.active_threads - coalesce(n.threads, 0),
       active_users = d.active_users - coalesce(n.users, 0)
     from fe_days k left join fe_figures f on f.message_date = k.day left join fe_counts n on n.message_date = k.day
     where d.message_date = k.day`,
  );
  await c.query('delete from rollup_daily where message_date in (select day from fe_days) and messages = 0');
}

/**
 * The erased threads' citation rows go, and the totals per source and per source and day lose
 * what they added; a source's day goes with its last thread, which takes one from its type's
 * sources that day. A source's latest date that went is read again from its threads left.
 */
async function correctCitations(c: Client): Promise<void> {
  await c.query(
    `create temp table fe_ct on commit drop as
     with d as (delete from rollup_citation_threads where thread_id in (select thread_id from fg_threads) returning *)
     select citation_type, name, sum(citations) as c, count(*) as t, sum(messages) as m, sum(artifacts) as a,
            max(last_updated_at) as lu
     from d group by citation_type, name`,
  );
  await c.query(
    `update rollup_citation_sources s set citations = s.citations - o.c, threads = s.threads - o.t,
            messages = s.messages - o.m, artifacts = s.artifacts - o.a
     from fe_ct o where s.citation_type = o.citation_type and s.name = o.name`,
  );
  await c.query(
    `delete from rollup_citation_sources s using fe_ct o
     where s.citation_type = o.citation_type and s.name = o.name and s.citations = 0`,
  );
  await c.query(
    `update rollup_citation_sources s set last_updated_at = (
       select max(x.last_updated_at) from rollup_citation_threads x
       where x.citation_type = s.citation_type and x.name = s.name)
     from fe_ct o
     where s.citation_type = o.citation_type and s.name = o.name and o.lu >= s.last_updated_at`,
  );
  await c.query(
    `create temp table fe_ctd on commit drop as
     with d as (delete from rollup_citation_thread_days where thread_id in (select thread_id from fg_threads) returning *)
     select * from d`,
  );
  await c.query(
    `create temp table fe_cd on commit drop as
     with u as (
       update rollup_citation_daily s set citations = s.citations - o.c, threads = s.threads - o.t,
              messages = s.messages - o.m, artifacts = s.artifacts - o.a
       from (select day, citation_type, name, sum(citations) as c, count(*) as t, sum(messages) as m,
                    sum(artifacts) as a
             from fe_ctd group by day, citation_type, name) o
       where s.day = o.day and s.citation_type = o.citation_type and s.name = o.name
       returning s.day, s.citation_type, s.citations = 0 as gone)
     select day, citation_type, count(*) filter (where gone) as gone from u group by day, citation_type`,
  );
  await c.query(
    `delete from rollup_citation_daily s using fe_cd o
     where s.day = o.day and s.citation_type = o.citation_type and s.citations = 0`,
  );
  await c.query(
    `update rollup_citation_type_daily s set citations = s.citations - o.c, threads = s.threads - o.t,
            sources = s.sources - g.gone
     from (select day, citation_type, sum(citations) as c, count(distinct thread_id) as t
           from fe_ctd group by day, citation_type) o
     join fe_cd g on g.day = o.day and g.citation_type = o.citation_type
     where s.day = o.day and s.citation_type = o.citation_type`,
  );
  await c.query(
    `delete from rollup_citation_type_daily s using fe_cd o
     where s.day = o.day and s.citation_type = o.citation_type and s.citations = 0`,
  );
}
