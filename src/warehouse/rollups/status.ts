import type pg from 'pg';
import { lockLoadThreadsSql } from '../threads.ts';

// Nothing marked and no rebuild pending. Marks commit with the data they mark and a refresh
// takes them in the transaction that writes the rollups, so in any one snapshot where this holds
// the rollups are exact for that snapshot's raw rows. The rule of every reader (read/source.ts
// `readSource`); the BI views hold the same condition in their SQL (`CURRENT` of the rollups
// migration: a migration never imports application code).
export const ROLLUPS_CURRENT_SQL = `not exists (select 1 from rollup_marked_days) and not exists (select 1 from rollup_marked_threads)
  and not coalesce((select rebuild_needed from rollup_upkeep), true)`;

// A rebuild is pending: no rollup row can be trusted, every reader reads the raw tables.
export const ROLLUP_REBUILD_PENDING_SQL = 'coalesce((select rebuild_needed from rollup_upkeep), true)';

// The days whose per-day rollup rows may differ from the raw rows in this snapshot: the marked
// days. A day's figures (rollup_daily, the per-day rows of users and threads) depend on that
// day's export rows and the "User cancelled" history entries of those rows, and the triggers
// mark the day for both; a marked thread alone changes thread-level figures only. The
// `daily_usage` view holds the same rule (migration 2026-11-25T08-00-00).
export const STALE_DAYS_SQL = 'select day from rollup_marked_days';

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
     lk as (${lockLoadThreadsSql('(select ok from cur)')}),
     u as (
       update threads t set first_message_at = r.first_message_at, last_message_at = r.last_message_at,
                            message_count = r.messages
       from rollup_threads r, lk
       where lk.thread_id = t.thread_id and r.thread_id = t.thread_id and r.messages > 0
       returning (t.enrich_status = 'pending')::int as n)
     select (select ok from cur) as current, (select count(*) filter (where n = 1) from u)::int as n`,
    [loadId],
  );
  const row = r.rows[0];
  return row?.current === true ? row.n : null;
}
