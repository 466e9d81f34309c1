import type pg from 'pg';
import { rebuildDays, refreshThreadDays, refreshUserDays } from './rollup-days.ts';

/**
 * Upkeep of the rollup tables (migrations/2026-11-24T03-00-00_rollups.ts; docs/data-dictionary.md,
 * "Rollups").
 *
 * Writers never call in here to say what they touched: triggers note every day and thread a write
 * touches (`rollup_dirty_days`, `rollup_dirty_threads`) in the writer's transaction. `refreshRollups`
 * takes those marks and recomputes exactly those keys from the raw tables, in one transaction
 * under a transaction-level advisory lock (refreshes of concurrent loads run one after the other):
 * a refresh that dies leaves the marks for the next one, and a refresh with no marks costs two
 * empty deletes.
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

export interface RollupRefresh {
  /** A full rebuild ran (the warehouse was flagged, or one was asked for). */
  rebuilt: boolean;
  days: number;
  threads: number;
  users: number;
}

type Client = pg.PoolClient;
type Progress = (step: string) => void;

const LOCK_SQL = `select pg_advisory_xact_lock(hashtext('crs-sync:rollups:' || current_schema()))`;

/** Every table the rollups hold, in the order a rebuild fills them. */
export const ROLLUP_TABLES = [
  'rollup_daily',
  'rollup_thread_daily',
  'rollup_user_daily',
  'rollup_user_threads',
  'rollup_users',
  'rollup_threads',
  'rollup_citation_threads',
  'rollup_citation_sources',
  'rollup_citation_thread_days',
  'rollup_citation_daily',
  'rollup_citation_type_daily',
  'rollup_thread_firsts',
] as const;

/**
 * Recomputes the days and threads writes have marked since the last refresh. On a warehouse
 * flagged for a rebuild (upgraded with data already in it) it does nothing unless `rebuild` is
 * set: the rebuild reads every raw row (about 10 minutes at 10M rows), which must not happen
 * inside a load's finalize or an enrichment batch; the views read the raw tables meanwhile, and
 * `crs-sync rollups rebuild` (or `refresh`) does it.
 */
export async function refreshRollups(
  pool: pg.Pool,
  onStep?: Progress,
  opts: { rebuild?: boolean } = {},
): Promise<RollupRefresh> {
  // One read when nothing is marked (an unchanged re-load): no transaction, lock or temporary
  // table. A mark committed after this read belongs to a write whose own refresh follows it.
  if (await rollupsCurrent(pool)) return { rebuilt: false, days: 0, threads: 0, users: 0 };
  const out = await inTransaction(pool, async (c) => {
    const state = await c.query<{ rebuild_needed: boolean }>('select rebuild_needed from rollup_state');
    if (state.rows[0]?.rebuild_needed !== false) {
      return opts.rebuild ? rebuildAll(c, onStep) : { rebuilt: false, days: 0, threads: 0, users: 0 };
    }
    return refreshMarked(c, onStep);
  });
  if (out.rebuilt) await vacuumRollups(pool, onStep);
  return out;
}

/**
 * Recomputes every rollup from the raw tables (`from`/`to`: only the days in that range and the
 * threads with export rows on them), in one transaction. Without a range the tables are emptied
 * and filled again; readers go on reading the old rows meanwhile (rebuildAll).
 */
export async function rebuildRollups(
  pool: pg.Pool,
  range: { from: string; to: string } | null,
  onStep?: Progress,
): Promise<RollupRefresh> {
  const out = await inTransaction(pool, async (c) => {
    if (range === null) return rebuildAll(c, onStep);
    onStep?.('marking the days and their threads');
    await c.query(
      `insert into rollup_dirty_days
       select d::date from generate_series($1::date, $2::date, interval '1 day') d`,
      [range.from, range.to],
    );
    await c.query(
      `insert into rollup_dirty_threads
       select distinct thread_id from analytics_messages where message_date between $1 and $2
       union select thread_id from rollup_thread_daily where message_date between $1 and $2
       union select thread_id from rollup_citation_thread_days where day between $1 and $2`,
      [range.from, range.to],
    );
    return refreshMarked(c, onStep);
  });
  if (out.rebuilt) await vacuumRollups(pool, onStep);
  return out;
}

/**
 * After a full rebuild: the deleted rows' space made reusable and the statistics taken again.
 * Outside the rebuild's transaction (VACUUM cannot run in one); it blocks neither readers nor
 * writers.
 */
async function vacuumRollups(pool: pg.Pool, onStep?: Progress): Promise<void> {
  onStep?.('vacuum');
  const c = await pool.connect();
  try {
    await c.query('set statement_timeout = 0');
    await c.query(`vacuum (analyze) ${ROLLUP_TABLES.join(', ')}`);
    await c.query('reset statement_timeout');
    c.release();
  } catch (err) {
    c.release(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
}

// Nothing marked and no rebuild pending. Marks commit with the data they mark and a refresh
// takes them in the transaction that writes the rollups, so in any one snapshot where this holds
// the rollups are exact for that snapshot's raw rows. The rule of every reader (read/source.ts
// `readSource`); the BI views hold the same condition in their SQL (`CURRENT` of the rollups
// migration: a migration never imports application code).
export const ROLLUPS_CURRENT_SQL = `not exists (select 1 from rollup_dirty_days) and not exists (select 1 from rollup_dirty_threads)
  and not coalesce((select rebuild_needed from rollup_state), true)`;

/** Whether every rollup is current: nothing marked and no rebuild pending. */
export async function rollupsCurrent(pool: Pick<pg.Pool, 'query'>): Promise<boolean> {
  const r = await pool.query<{ current: boolean }>(`select ${ROLLUPS_CURRENT_SQL} as current`);
  return r.rows[0]?.current === true;
}

/**
 * The first and last message and the message count of the threads a load queued (`threads` rows
 * with its `_load_id`), copied from `rollup_threads`; returns how many of them are pending
 * enrichment, or null (and writes nothing) when the rollups are not current, for the caller to
 * compute them from the raw rows (src/warehouse/threads.ts `refreshQueuedThreads`, which this
 * equals: the same aggregates of live rows, and threads without live rows left alone).
 * After the load's own refresh this reads ~1 row per thread instead of every raw row of the
 * threads again (a full scan and sort at a first load: ~2 s at 1M rows). One statement, so the
 * check and the read see the same snapshot.
 */
export async function threadTotalsFromRollups(
  pool: Pick<pg.Pool, 'query'>,
  loadId: string,
): Promise<number | null> {
  const r = await pool.query<{ current: boolean; n: number }>(
    `with cur as (select ${ROLLUPS_CURRENT_SQL} as ok),
     u as (
       update threads t set first_message_at = r.first_message_at, last_message_at = r.last_message_at,
                            message_count = r.messages
       from rollup_threads r
       where (select ok from cur) and t._load_id = $1 and r.thread_id = t.thread_id and r.messages > 0
       returning (t.enrich_status = 'pending')::int as n)
     select (select ok from cur) as current, (select count(*) filter (where n = 1) from u)::int as n`,
    [loadId],
  );
  const row = r.rows[0];
  return row?.current === true ? row.n : null;
}

async function inTransaction<T>(pool: pg.Pool, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    // A rebuild of a large warehouse outlasts the pool's statement timeout, which guards the
    // loader's short statements; this transaction's work is bounded by the tables it reads.
    await c.query('set local statement_timeout = 0');
    // The refresh sorts and hashes a load's rows (a day's medians, its thread rows): with the
    // default 4 MB a 100k-line load's sorts went to disk. One transaction at a time (the lock).
    await c.query(`set local work_mem = '64MB'`);
    await c.query(LOCK_SQL);
    const out = await fn(c);
    await c.query('commit');
    c.release();
    return out;
  } catch (err) {
    await c.query('rollback').then(
      () => c.release(),
      () => c.release(err instanceof Error ? err : new Error(String(err))),
    );
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// The rows of each rollup for a set of keys, as SQL. `$keys` stands for the set: a subquery.

/**
 * The raw rows a per-day rollup reads, narrowed to what they take: day, thread, user, time, and
 * the response length when the message was answered (null when cancelled: a blank response, or
 * the "User cancelled" history entry). `days`: an array literal of the days, or none (every row).
 * For some days each row's history entry is probed by key; for every row the history is joined.
 */
const rawRowsSql = (days: string | null) => `
  select a.message_date, a.thread_id, a.user_id, a.message_time,
         case when a.response_chars = 0 or coalesce(h.is_cancelled, false) then null
              else a.response_chars end as answered
  from analytics_messages a
  ${
    days
      ? 'left join lateral (select x.is_cancelled from thread_messages x where x.message_id = a.message_id) h on true'
      : 'left join thread_messages h on h.message_id = a.message_id'
  }
  where a._deleted_at is null ${days ? `and a.message_date = any(${days}::date[])` : ''}`;

/** daily_usage's figures of each day that are sums over its rows; `rows`: rawRowsSql's relation. */
const dailyFiguresSql = (rows: string) => `
  select message_date,
         count(*)::bigint as messages,
         (count(*) - count(answered))::bigint as cancelled,
         count(answered)::bigint as answered,
         coalesce(sum(answered), 0)::bigint as chars,
         round(avg(answered), 1)::double precision as avg,
         (percentile_cont(0.5) within group (order by answered))::double precision as median
  from ${rows} x group by message_date`;

/**
 * A day's row of rollup_daily in a rebuild: its figures (`figures`: dailyFiguresSql's relation)
 * with its distinct users and threads, counted from its thread rows (`threadRows`: one per thread,
 * day and user), not from the raw rows: those are 0.55 per raw row in bench:ingest's file. (A
 * refresh counts them from its key sets: refreshMarked.)
 */
const dailySql = (figures: string, threadRows: string) => `
  select a.message_date, a.messages, t.users, t.threads, a.cancelled, a.answered, a.chars, a.avg, a.median
  from ${figures} a
  join (select message_date, count(distinct user_id)::bigint as users, count(distinct thread_id)::bigint as threads
        from ${threadRows} x group by message_date) t on t.message_date = a.message_date`;

const userThreadsSql = (threads: string) => `
  select user_id, thread_id, sum(messages)::bigint from rollup_thread_daily
  ${threads ? `where thread_id in (${threads})` : ''}
  group by user_id, thread_id`;

const usersSql = (users: string) => `
  select d.user_id, min(d.first_at), max(d.last_at), count(*)::bigint, sum(d.messages)::bigint,
         coalesce(t.n, 0)::bigint
  from rollup_user_daily d
  left join (select user_id, count(*) as n from rollup_user_threads
             ${users ? `where user_id in (${users})` : ''} group by user_id) t on t.user_id = d.user_id
  ${users ? `where d.user_id in (${users})` : ''}
  group by d.user_id, t.n`;

// One row per thread that has anything: live export rows, history entries, citations, artifacts.
const threadsSql = (threads: string) => {
  const w = threads ? `where thread_id in (${threads})` : '';
  return `
  select coalesce(m.thread_id, h.thread_id, c.thread_id, r.thread_id),
         m.user_id, m.first_at, m.last_at, coalesce(m.messages, 0)::bigint,
         coalesce(h.n, 0)::bigint, coalesce(h.cancelled, 0)::bigint, coalesce(c.n, 0)::bigint,
         coalesce(r.n, 0)::bigint
  from (select thread_id, min(user_id::text)::uuid as user_id, min(first_at) as first_at,
               max(last_at) as last_at, sum(messages) as messages
        from rollup_thread_daily ${w} group by thread_id) m
  full join (select thread_id, count(*) as n, count(*) filter (where is_cancelled) as cancelled
             from thread_messages ${w} group by thread_id) h on h.thread_id = m.thread_id
  full join (select thread_id, count(*) as n from citations ${w} group by thread_id) c
    on c.thread_id = coalesce(m.thread_id, h.thread_id)
  full join (select thread_id, count(*) as n from artifacts ${w} group by thread_id) r
    on r.thread_id = coalesce(m.thread_id, h.thread_id, c.thread_id)`;
};

/**
 * The citations of a set of threads with the day each belongs to: the UTC day of the citing
 * history entry (an artifact's citation: the entry that named the artifact), else the day of
 * the thread's first live export row; null when neither is known (then it is in no daily row).
 * For a set of threads, every lookup is a probe by key (lateral): a plain join lets the planner
 * merge-join the whole history table in key order for a few thousand entries.
 */
const citedSql = (threads: string) =>
  threads
    ? `
  select c.thread_id, coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
         c.message_id, c.artifact_id, c.last_updated_at, coalesce(h.day, f.first_day) as day
  from (${threads}) k
  join citations c on c.thread_id = k.thread_id
  cross join lateral (select min(r.message_date) as first_day from rollup_thread_daily r
                      where r.thread_id = k.thread_id) f
  left join lateral (
    select (x.created_at at time zone 'UTC')::date as day from thread_messages x
    where x.message_id = coalesce(c.message_id,
      (select a.message_id from artifacts a where a.artifact_id = c.artifact_id))) h on true`
    : `
  select c.thread_id, coalesce(c.citation_type, '(none)') as citation_type, coalesce(c.name, '(unnamed)') as name,
         c.message_id, c.artifact_id, c.last_updated_at,
         coalesce((h.created_at at time zone 'UTC')::date, f.first_day) as day
  from citations c
  left join artifacts a on c.message_id is null and a.artifact_id = c.artifact_id
  left join thread_messages h on h.message_id = coalesce(c.message_id, a.message_id)
  left join (select thread_id, min(message_date) as first_day from rollup_thread_daily group by thread_id) f
    on f.thread_id = c.thread_id`;

/** `cited`: a relation of citedSql's rows. */
const citationThreadsSql = (cited: string) => `
  select citation_type, name, thread_id, count(*)::bigint, count(distinct message_id)::bigint,
         count(distinct artifact_id)::bigint, max(last_updated_at)
  from ${cited} x group by citation_type, name, thread_id`;

const citationThreadDaysSql = (cited: string) => `
  select thread_id, day, citation_type, name, count(*)::bigint, count(distinct message_id)::bigint,
         count(distinct artifact_id)::bigint
  from ${cited} x where day is not null group by thread_id, day, citation_type, name`;

// Per day and type, from the per-thread rows: distinct threads and sources of the day.
const citationTypeDailySql = (keys: string) => `
  select day, citation_type, sum(citations)::bigint, count(distinct name)::bigint, count(distinct thread_id)::bigint
  from rollup_citation_thread_days
  ${keys ? `where (day, citation_type) in (${keys})` : ''}
  group by day, citation_type`;

// ---------------------------------------------------------------------------------------------

/** Empties every rollup and fills it from the raw tables; clears the marks and the flag. */
async function rebuildAll(c: Client, onStep?: Progress): Promise<RollupRefresh> {
  await c.query('delete from rollup_dirty_days');
  await c.query('delete from rollup_dirty_threads');
  // Deleted, not truncated: TRUNCATE's lock would stop every reader of the rollups (the dashboard,
  // the views) for the whole rebuild, minutes at 10M rows. A delete leaves them reading the old
  // rows of their snapshot until this transaction commits the new ones; the space the old rows
  // held is vacuumed after the commit (vacuumRollups).
  for (const t of ROLLUP_TABLES) await c.query(`delete from ${t}`);
  // The per-day rows of threads and users first: daily_usage's distinct counts read them (dailySql).
  onStep?.('rollup_thread_daily, rollup_user_daily, rollup_thread_firsts');
  await rebuildDays(c);
  const steps: Array<[string, string]> = [
    ['rollup_daily', dailySql(`(${dailyFiguresSql(`(${rawRowsSql(null)})`)})`, 'rollup_thread_daily')],
    ['rollup_user_threads', userThreadsSql('')],
    ['rollup_users', usersSql('')],
    ['rollup_threads', threadsSql('')],
    ['rollup_citation_threads', citationThreadsSql(`(${citedSql('')})`)],
    [
      'rollup_citation_sources',
      `select citation_type, name, sum(citations)::bigint, count(*)::bigint, sum(messages)::bigint,
              sum(artifacts)::bigint, max(last_updated_at)
       from rollup_citation_threads group by citation_type, name`,
    ],
    ['rollup_citation_thread_days', citationThreadDaysSql(`(${citedSql('')})`)],
    [
      'rollup_citation_daily',
      `select day, citation_type, name, sum(citations)::bigint, count(*)::bigint, sum(messages)::bigint,
              sum(artifacts)::bigint
       from rollup_citation_thread_days group by day, citation_type, name`,
    ],
    ['rollup_citation_type_daily', citationTypeDailySql('')],
  ];
  for (const [table, select] of steps) {
    onStep?.(table);
    await c.query(`insert into ${table} ${select}`);
  }
  await c.query('update rollup_state set rebuild_needed = false, rebuilt_at = now(), refreshed_at = now()');
  const n = await c.query<{ days: number; threads: number; users: number }>(
    `select (select count(*) from rollup_daily)::int as days, (select count(*) from rollup_threads)::int as threads,
            (select count(*) from rollup_users)::int as users`,
  );
  const r = n.rows[0] ?? { days: 0, threads: 0, users: 0 };
  return { rebuilt: true, ...r };
}

/**
 * Replaces a rollup's rows for a set of keys, and puts the keys (column `key`) of rows that
 * changed into the temporary set `into`.
 */
async function replaceRows(
  c: Client,
  o: { table: string; where: string; select: string; key?: string; into?: string },
): Promise<void> {
  if (o.key && o.into) {
    await c.query(`create temp table rd_old on commit drop as select * from ${o.table} where ${o.where}`);
  }
  await c.query(`delete from ${o.table} where ${o.where}`);
  await c.query(`insert into ${o.table} ${o.select}`);
  if (o.key && o.into) {
    const had = await c.query<{ any: boolean }>('select exists (select 1 from rd_old) as any');
    // Nothing there before (a first load of the keys): every new row is a change.
    // Distinct before the insert: a key has a row per day (a thread of a 1M-line first load about
    // 22), and each duplicate would be a probe of the key set's index to do nothing.
    const changed =
      had.rows[0]?.any === false
        ? `select distinct ${o.key} from ${o.table} where ${o.where}`
        : `select distinct ${o.key} from (
         (select * from rd_old except all select * from ${o.table} where ${o.where})
         union all
         (select * from ${o.table} where ${o.where} except all select * from rd_old)) x`;
    await c.query(`insert into ${o.into} ${changed} on conflict do nothing`);
    await c.query('drop table rd_old');
  }
}

/**
 * Keeps a total table (per source, or per source and day) by difference: the per-thread rows of
 * the touched threads are replaced, and what they added up to before is taken out of the totals
 * and what they add up to now put in. `group` names the total's key columns.
 */
async function replaceByDelta(
  c: Client,
  o: {
    perThread: string;
    select: string;
    totals: string;
    group: string[];
    latest: boolean;
    touched?: string;
  },
): Promise<void> {
  const where = 'thread_id in (select thread_id from rd_threads)';
  const g = o.group.join(', ');
  const sums = `sum(citations) as c, count(*) as t, sum(messages) as m, sum(artifacts) as a${
    o.latest ? ', max(last_updated_at) as lu' : ''
  }`;
  await c.query(
    `create temp table rd_old on commit drop as
     select ${g}, ${sums} from ${o.perThread} where ${where} group by ${g}`,
  );
  await c.query(`delete from ${o.perThread} where ${where}`);
  await c.query(`insert into ${o.perThread} ${o.select}`);
  await c.query(
    `create temp table rd_new on commit drop as
     select ${g}, ${sums} from ${o.perThread} where ${where} group by ${g}`,
  );
  const on = o.group.map((k) => `n.${k} = o.${k}`).join(' and ');
  const keys = o.group.map((k) => `coalesce(n.${k}, o.${k})`).join(', ');
  await c.query(
    `insert into ${o.totals} as s (${g}, citations, threads, messages, artifacts${o.latest ? ', last_updated_at' : ''})
     select ${keys}, coalesce(n.c, 0) - coalesce(o.c, 0), coalesce(n.t, 0) - coalesce(o.t, 0),
            coalesce(n.m, 0) - coalesce(o.m, 0), coalesce(n.a, 0) - coalesce(o.a, 0)${o.latest ? ', n.lu' : ''}
     from rd_new n full join rd_old o on ${on}
     on conflict (${g}) do update set citations = s.citations + excluded.citations,
       threads = s.threads + excluded.threads, messages = s.messages + excluded.messages,
       artifacts = s.artifacts + excluded.artifacts
       ${o.latest ? ', last_updated_at = greatest(s.last_updated_at, excluded.last_updated_at)' : ''}`,
  );
  if (o.latest) {
    // A latest date that left (its citation removed, or replaced by an older one) is read again
    // from the per-thread rows of that source: rare, and bounded by the source's threads.
    await c.query(
      `update ${o.totals} s set last_updated_at = (
         select max(x.last_updated_at) from ${o.perThread} x
         where x.citation_type = s.citation_type and x.name = s.name)
       from rd_old o left join rd_new n on n.citation_type = o.citation_type and n.name = o.name
       where s.citation_type = o.citation_type and s.name = o.name and o.lu is not null
         and o.lu >= s.last_updated_at and (n.lu is null or n.lu < o.lu)`,
    );
  }
  await c.query(
    `delete from ${o.totals} s using rd_old o
     where ${o.group.map((k) => `s.${k} = o.${k}`).join(' and ')} and s.citations = 0`,
  );
  if (o.touched) {
    await c.query(
      `insert into ${o.touched} select day, citation_type from rd_old union select day, citation_type from rd_new`,
    );
  }
  await c.query('drop table rd_old');
  await c.query('drop table rd_new');
}

/** The refresh of the marked keys (see the top of the file for the order). */
async function refreshMarked(c: Client, onStep?: Progress): Promise<RollupRefresh> {
  await c.query('create temp table rd_days (day date primary key) on commit drop');
  await c.query('create temp table rd_threads (thread_id uuid primary key) on commit drop');
  await c.query('create temp table rd_users (user_id uuid primary key) on commit drop');
  await c.query('create temp table rd_day_types (day date, citation_type text) on commit drop');
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
  // Temporary tables have no statistics until analyzed: without them the planner guesses their
  // size and may scan a whole rollup or raw table instead of probing its index per key.
  await c.query('analyze rd_days');
  const marked = await c.query<{ days: number; threads: number }>(
    'select (select count(*) from rd_days)::int as days, (select count(*) from rd_threads)::int as threads',
  );
  const m = marked.rows[0] ?? { days: 0, threads: 0 };
  if (m.days === 0 && m.threads === 0) return { rebuilt: false, days: 0, threads: 0, users: 0 };

  if (m.days > 0) {
    onStep?.(`${m.days} day(s)`);
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
    // The days' thread rows as the raw rows give them now (rollup-days.ts compares and writes),
    // with the previous row of the thread among them: sorted once for the grouping and the window.
    await c.query(
      `create temp table rd_td on commit drop as
       select thread_id, message_date, user_id, count(*)::bigint as messages, min(message_time) as first_at,
              max(message_time) as last_at,
              lag(message_date) over (partition by thread_id order by message_date, user_id) as prev
       from rd_rows group by thread_id, message_date, user_id`,
    );
    await c.query('drop table rd_rows');
  }
  // Whether a day that is not marked has rows (rollup_daily has a row per day with rows, and this
  // refresh changes only the marked days'). Not on a first load: then no thread or user has rows
  // on another day to find.
  const other = await c.query<{ any: boolean }>(
    'select exists (select 1 from rollup_daily where message_date not in (select day from rd_days)) as any',
  );
  const otherDays = other.rows[0]?.any === true;
  onStep?.('thread and user days');
  await refreshThreadDays(c, { days: m.days > 0, otherDays });
  if (m.days > 0) {
    await refreshUserDays(c, { otherDays });
    // The day's distinct users are its user rows; its distinct threads the thread rows that are
    // not a second user's row of the day (`prev` on those is the same day): no distinct count.
    await replaceRows(c, {
      table: 'rollup_daily',
      where: 'message_date in (select day from rd_days)',
      select: `
        select a.message_date, a.messages, u.n, t.n, a.cancelled, a.answered, a.chars, a.avg, a.median
        from rd_daily a
        join (select message_date, count(*)::bigint as n from rd_ud group by message_date) u
          on u.message_date = a.message_date
        join (select message_date, count(*) filter (where prev is distinct from message_date)::bigint as n
              from rd_td group by message_date) t on t.message_date = a.message_date`,
    });
    for (const t of ['rd_daily', 'rd_td', 'rd_ud']) await c.query(`drop table ${t}`);
  }

  const threadCount = await refreshThreads(c, onStep);

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

/** The threads marked, or changed by the day step: their rollups and their citations'. */
async function refreshThreads(c: Client, onStep?: Progress): Promise<number> {
  const threads = 'select thread_id from rd_threads';
  await c.query('analyze rd_threads');
  const t = await c.query<{ n: number }>('select count(*)::int as n from rd_threads');
  const threadCount = t.rows[0]?.n ?? 0;
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
      perThread: 'rollup_citation_threads',
      select: citationThreadsSql('rd_cited'),
      totals: 'rollup_citation_sources',
      group: ['citation_type', 'name'],
      latest: true,
    });
    await replaceByDelta(c, {
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
