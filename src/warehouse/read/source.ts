import { ROLLUP_REBUILD_PENDING_SQL, ROLLUPS_CURRENT_SQL } from '../rollups/status.ts';
import { type Queryable, rowsOf } from './queryable.ts';

/**
 * Where a figure shown to people is read: `rollup` the per-day aggregate tables (rollup_*, kept
 * exact by src/warehouse/rollups/), `raw` the loaded tables themselves, `mixed` the rollups for
 * what is current and the raw rows of the marked days and threads only (a load or an enrichment
 * batch committed, its refresh not yet run; marked.ts). All three give the same rows
 * (test/dashboard/dashboard.test.ts, test/warehouse/read-source.test.ts,
 * test/warehouse/read-marked-fuzz.test.ts).
 */
export type Source = 'rollup' | 'mixed' | 'raw';

/**
 * The one rule for every reader: the rollups while they are current (nothing marked, no rebuild
 * pending: `ROLLUPS_CURRENT_SQL`); while days or threads are marked, the rollups for what is
 * current and the raw rows for what is marked (`mixed`: the days of `STALE_DAYS_SQL`, read by
 * each query in the same snapshot), so a reader's cost follows the marked days, not the table;
 * the raw tables while a rebuild is pending. No page, view or command ever shows stale figures,
 * with one exception by design: a day a pull is loading (daily, backfill or intraday) is shown as
 * its last finished pull left it (the pull's writes wait for its finalize: rollups/mark.ts
 * `marksWaitSql`), then changes at once.
 * Asked once per snapshot (a dashboard request, a command) and passed to each query of it. The
 * BI views make the same choice in SQL (migrations/2026-11-25T08-00-00_daily_usage_follows_marks.ts
 * for `daily_usage`, migrations/2026-11-25T12-00-00_entity_views_follow_marks.ts for the three
 * per-entity views).
 */
export async function readSource(q: Queryable): Promise<Source> {
  const [r] = await rowsOf<{ current: boolean; rebuild: boolean }>(
    q,
    `select ${ROLLUPS_CURRENT_SQL} as current, ${ROLLUP_REBUILD_PENDING_SQL} as rebuild`,
  );
  if (r?.current === true) return 'rollup';
  return r?.rebuild === false ? 'mixed' : 'raw';
}
