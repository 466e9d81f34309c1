import type pg from 'pg';
import { rebuildDays } from './days.ts';
import { markRange } from './mark.ts';
import { refreshMarked } from './refresh-marked.ts';
import {
  citationThreadDaysSql,
  citationThreadsSql,
  citationTypeDailySql,
  citedSql,
  dailyFiguresSql,
  dailySql,
  rawRowsSql,
  threadsSql,
  usersSql,
  userThreadsSql,
} from './sql.ts';
import { type Client, inTransaction, type Progress, type RollupRefresh } from './transaction.ts';

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
    await markRange(c, range);
    return refreshMarked(c, onStep);
  });
  if (out.rebuilt) await vacuumRollups(pool, onStep);
  return out;
}

/** Empties every rollup and fills it from the raw tables; clears the marks and the flag. */
export async function rebuildAll(c: Client, onStep?: Progress): Promise<RollupRefresh> {
  await c.query('delete from rollup_dirty_days');
  await c.query('delete from rollup_dirty_threads');
  // Every key is recomputed from the raw rows as they are: nothing waits any more.
  await c.query('delete from rollup_waiting_days');
  await c.query('delete from rollup_waiting_threads');
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
 * After a full rebuild: the deleted rows' space made reusable and the statistics taken again.
 * Outside the rebuild's transaction (VACUUM cannot run in one); it blocks neither readers nor
 * writers.
 */
export async function vacuumRollups(pool: pg.Pool, onStep?: Progress): Promise<void> {
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
