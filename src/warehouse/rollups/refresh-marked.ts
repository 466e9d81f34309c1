import { refreshThreadDays, refreshUserDays } from './days.ts';
import { RELEASE_WAITING_SQL } from './mark.ts';
import { replaceByDelta, replaceRows } from './replace.ts';
import {
  citationThreadDaysSql,
  citationThreadsSql,
  citationTypeDailySql,
  citedSql,
  dailyFiguresSql,
  rawRowsSql,
  threadsSql,
  usersSql,
  userThreadsSql,
} from './sql.ts';
import type { Client, Progress, RollupRefresh } from './transaction.ts';

/**
 * The refresh of the marked keys, inside the transaction of refresh.ts or rebuild.ts (a range).
 *
 * Order of the work, each step handing the keys it changed to the next:
 *   days    → rollup_thread_daily (changed threads), rollup_user_daily (changed users), rollup_daily
 *             (its distinct counts from those two)
 *   threads → rollup_user_threads (changed users), rollup_threads, citation rollups (by delta)
 *   users   → rollup_users
 * Citation totals per source and per source and day are kept by difference (old rows of the
 * touched threads out, new rows in), since recomputing a popular source would read all of its
 * citations; what a difference cannot keep (a latest `last_updated_at` that went away) is read
 * again from the per-thread rows.
 */

/**
 * Each marked day's distinct users and threads, for rollup_daily. Whole: its user rows, and its
 * thread rows that are not a second user's row of the day (`prev` on those is the same day), as
 * the refresh wrote them all; no distinct count. Narrowed: the day's counts as its last refresh
 * left them (`rd_was`), moved by the rows this one replaced (days.ts `rd_tcount`, `rd_ucount`); counting
 * the day's rows again in the tables took ~100 ms a pull at ~37k thread rows.
 */
const WHOLE_COUNTS = `
  select u.message_date, u.n as users, t.n as threads
  from (select message_date, count(*)::bigint as n from rd_ud group by message_date) u
  join (select message_date, count(*) filter (where prev is distinct from message_date)::bigint as n
        from rd_td group by message_date) t on t.message_date = u.message_date`;
const NARROWED_COUNTS = `
  select d.day as message_date,
         coalesce(r.active_users, 0) + coalesce((select sum(n) from rd_ucount x where x.message_date = d.day), 0)
           as users,
         coalesce(r.active_threads, 0) + coalesce((select sum(n) from rd_tcount x where x.message_date = d.day), 0)
           as threads
  from rd_days d left join rd_was r on r.message_date = d.day`;

/**
 * How the touched threads reach the statements over the large tables (`threadKeys`): chosen by
 * their number (`auto`), or one form forced, for a test that holds the two to the same rows.
 */
export type ThreadKeys = 'auto' | 'probe' | 'table';

/**
 * The refresh of the marked keys (see the top of the file for the order). `release`: the days whose
 * waiting marks are taken in first (mark.ts RELEASE_WAITING_SQL; null: every day; none: a range's
 * refresh, or one of the marks alone).
 */
export async function refreshMarked(
  c: Client,
  onStep?: Progress,
  keys: ThreadKeys = 'auto',
  release: string[] | null = [],
): Promise<RollupRefresh> {
  await c.query('create temp table rd_days (day date primary key) on commit drop');
  await c.query('create temp table rd_threads (thread_id uuid primary key) on commit drop');
  await c.query('create temp table rd_users (user_id uuid primary key) on commit drop');
  await c.query('create temp table rd_day_types (day date, citation_type text) on commit drop');
  await c.query('create temp table rd_waited (day date, thread_id uuid) on commit drop');
  if (release === null || release.length > 0) await c.query(RELEASE_WAITING_SQL, [release]);
  // Taken first, so that a write committing after this statement leaves its mark for the next
  // refresh; whatever committed before it is seen by the reads below.
  await c.query(
    `with d as (delete from rollup_dirty_days returning day)
     insert into rd_days select distinct day from d`,
  );
  await c.query(
    `with d as (delete from rollup_dirty_threads returning thread_id)
     insert into rd_threads select distinct thread_id from d`,
  );
  const narrow = await narrowedDays(c);
  // Temporary tables have no statistics until analyzed: without them the planner guesses their
  // size and may scan a whole rollup or raw table instead of probing its index per key.
  await c.query('analyze rd_days');
  const marked = await c.query<{ days: number; threads: number }>(
    'select (select count(*) from rd_days)::int as days, (select count(*) from rd_threads)::int as threads',
  );
  const m = marked.rows[0] ?? { days: 0, threads: 0 };
  if (m.days === 0 && m.threads === 0) return { rebuilt: false, days: 0, threads: 0, users: 0 };

  if (m.days > 0) {
    onStep?.(narrow ? `${m.days} day(s), their written threads` : `${m.days} day(s)`);
    await readMarkedDays(c, narrow);
  }
  // Whether a day that is not marked has rows (rollup_daily has a row per day with rows, and this
  // refresh changes only the marked days'). Not on a first load: then no thread or user has rows
  // on another day to find.
  const other = await c.query<{ any: boolean }>(
    'select exists (select 1 from rollup_daily where message_date not in (select day from rd_days)) as any',
  );
  const otherDays = other.rows[0]?.any === true;
  onStep?.('thread and user days');
  await refreshThreadDays(c, { days: m.days > 0, otherDays, narrow });
  if (m.days > 0) {
    await refreshUserDays(c, { otherDays, narrow });
    if (narrow) {
      // Taken before replaceRows deletes the days' rows.
      await c.query(
        `create temp table rd_was on commit drop as
         select message_date, active_users, active_threads from rollup_daily where message_date in (select day from rd_days)`,
      );
    }
    await replaceRows(c, {
      table: 'rollup_daily',
      where: 'message_date in (select day from rd_days)',
      select: `
        select a.message_date, a.messages, n.users, n.threads, a.cancelled, a.answered, a.chars, a.avg, a.median
        from rd_daily a join (${narrow ? NARROWED_COUNTS : WHOLE_COUNTS}) n on n.message_date = a.message_date`,
    });
    const temps = ['rd_daily', 'rd_td', 'rd_ud', ...(narrow ? ['rd_tcount', 'rd_ucount', 'rd_was'] : [])];
    for (const t of temps) await c.query(`drop table ${t}`);
  }

  const threadCount = await refreshThreads(c, onStep, keys);

  await c.query('analyze rd_users');
  const u = await c.query<{ n: number }>('select count(*)::int as n from rd_users');
  const userCount = u.rows[0]?.n ?? 0;
  if (userCount > 0) {
    onStep?.(`${userCount} user(s)`);
    const users = 'select user_id from rd_users';
    await replaceRows(c, { table: 'rollup_users', where: `user_id in (${users})`, select: usersSql(users) });
  }
  await c.query('update rollup_state set refreshed_at = now()');
  return { rebuilt: false, days: m.days, threads: threadCount, users: userCount };
}

/**
 * How the touched threads are given to the statements that read their rows from the large
 * tables (history, citations, artifacts and the per-thread rollups), `thread_id in (…)`: as the
 * temporary table, or, while they are few against the warehouse's threads, as an array whose
 * `unnest` PostgreSQL estimates at ten rows, so it probes each table's thread index per key.
 * With the table, it estimated ~50 citations a key and hashed the keys against a scan of every
 * row: 36,719 threads of a 96k-row day (an intraday pull's first), none of them with citations,
 * took 3.3 s for the citations and ~3 s for each per-thread citation rollup over bench:bi's 10M
 * rows; probed, 75 and 200 ms. Past a twentieth of the threads a scan is the cheaper plan, and the
 * planner is left to find it.
 */
async function threadKeys(c: Client, threadCount: number, keys: ThreadKeys): Promise<string> {
  const r = await c.query<{ n: number }>(
    `select coalesce((select reltuples from pg_class where oid = 'rollup_threads'::regclass), 0)::float8 as n`,
  );
  const few = keys === 'auto' ? threadCount * 20 <= (r.rows[0]?.n ?? 0) : keys === 'probe';
  return few
    ? 'select unnest(array(select thread_id from rd_threads)) as thread_id'
    : 'select thread_id from rd_threads';
}

/** The threads marked, or changed by the day step: their rollups and their citations'. */
async function refreshThreads(c: Client, onStep: Progress | undefined, keys: ThreadKeys): Promise<number> {
  await c.query('analyze rd_threads');
  const t = await c.query<{ n: number }>('select count(*)::int as n from rd_threads');
  const threadCount = t.rows[0]?.n ?? 0;
  const threads = await threadKeys(c, threadCount, keys);
  if (threadCount > 0) {
    onStep?.(`${threadCount} thread(s)`);
    await replaceRows(c, {
      table: 'rollup_user_threads',
      where: `thread_id in (${threads})`,
      select: userThreadsSql(threads),
      key: 'user_id',
      into: 'rd_users',
    });
    await replaceRows(c, {
      table: 'rollup_threads',
      where: `thread_id in (${threads})`,
      select: threadsSql(threads),
    });
    // The touched threads' citations with their days, read once for both per-thread rollups.
    await c.query(`create temp table rd_cited on commit drop as ${citedSql(threads)}`);
    await replaceByDelta(c, {
      threads,
      perThread: 'rollup_citation_threads',
      select: citationThreadsSql('rd_cited'),
      totals: 'rollup_citation_sources',
      group: ['citation_type', 'name'],
      latest: true,
    });
    await replaceByDelta(c, {
      threads,
      perThread: 'rollup_citation_thread_days',
      select: citationThreadDaysSql('rd_cited'),
      totals: 'rollup_citation_daily',
      group: ['day', 'citation_type', 'name'],
      latest: false,
      touched: 'rd_day_types',
    });
    await c.query('analyze rd_day_types');
    const keys = 'select day, citation_type from rd_day_types';
    await replaceRows(c, {
      table: 'rollup_citation_type_daily',
      where: `(day, citation_type) in (${keys})`,
      select: citationTypeDailySql(keys),
    });
  }
  return threadCount;
}

/**
 * Whether the marked days are refreshed for their written threads alone, and those threads
 * (`rd_wt`). Adds the released days to `rd_days`. Only when every marked day was marked by the
 * waiting marks of day pulls (whose thread marks name every thread they wrote of that day), none
 * by another write (a file import, enrichment's history, a range to rebuild: the day is then
 * refreshed whole), and when those threads are at most a quarter of the days' threads at their
 * last refresh: a day's first pull, which writes all of them, compares nothing and reads its
 * thread rows once from the raw rows it reads anyway.
 */
async function narrowedDays(c: Client): Promise<boolean> {
  const direct = await c.query<{ any: boolean }>('select exists (select 1 from rd_days) as any');
  const waited = await c.query(
    'insert into rd_days select distinct day from rd_waited on conflict do nothing',
  );
  // Nothing released (an enrichment batch's refresh, a range's): no thread set to build.
  if (direct.rows[0]?.any !== false || waited.rowCount === 0) return false;
  await c.query(
    `create temp table rd_wt on commit drop as
     select distinct thread_id from rd_waited where thread_id is not null`,
  );
  await c.query('alter table rd_wt add primary key (thread_id)');
  await c.query('analyze rd_wt');
  const n = await c.query<{ written: number; threads: number }>(
    `select (select count(*) from rd_wt)::int as written,
            coalesce((select sum(active_threads) from rollup_daily where message_date in (select day from rd_days)), 0)::float8
              as threads`,
  );
  const r = n.rows[0] ?? { written: 0, threads: 0 };
  return r.threads > 0 && r.written * 4 <= r.threads;
}

/**
 * The marked days as the raw rows give them now: `rd_daily` (each day's figures) and `rd_td`
 * (each day's thread rows, with the thread's previous row among them), read from the raw rows
 * once. `narrow`: the thread rows of the written threads (`rd_wt`) alone; the figures, a median
 * among them, still take every row of the day.
 */
async function readMarkedDays(c: Client, narrow: boolean): Promise<void> {
  // The marked days' raw rows are read once, narrowed to what the per-day rollups take, by a
  // CREATE TABLE AS: it may scan with parallel workers where an INSERT ... SELECT runs in one
  // process (the finalize leaves the loader's core idle). The days go in as a literal, since
  // workers cannot read rd_days. As the first read of a load's new rows, it also sets their
  // hint bits on both cores.
  const lit = await c.query<{ days: string }>(
    'select quote_literal(array_agg(day order by day)::text) as days from rd_days',
  );
  // A table never analyzed (a first load, before autovacuum's first pass) has no row estimate:
  // the planner guessed 400 rows for a load of 100k and read them by the day index and a probe
  // of the history per row (199 ms), where a parallel scan and hash join take 48 ms. A young
  // table is mostly the load's rows, so it is scanned.
  const fresh = await c.query<{ fresh: boolean }>(
    `select reltuples < 0 as fresh from pg_class where oid = 'analytics_messages'::regclass`,
  );
  const scan = fresh.rows[0]?.fresh === true;
  if (scan) await c.query('set local enable_bitmapscan = off; set local enable_indexscan = off');
  await c.query(`create temp table rd_rows on commit drop as ${rawRowsSql(lit.rows[0]?.days ?? "'{}'")}`);
  if (scan) await c.query('set local enable_bitmapscan = on; set local enable_indexscan = on');
  await c.query(`create temp table rd_daily on commit drop as ${dailyFiguresSql('rd_rows')}`);
  // The days' thread rows as the raw rows give them now (days.ts compares and writes),
  // with the previous row of the thread among them: sorted once for the grouping and the window.
  await c.query(
    `create temp table rd_td on commit drop as
     select thread_id, message_date, user_id, count(*)::bigint as messages, min(message_time) as first_at,
            max(message_time) as last_at,
            lag(message_date) over (partition by thread_id order by message_date, user_id) as prev
     from rd_rows ${narrow ? 'where thread_id in (select thread_id from rd_wt)' : ''}
     group by thread_id, message_date, user_id`,
  );
  await c.query('drop table rd_rows');
}
