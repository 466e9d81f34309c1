import { ROLLUPS_CURRENT_SQL } from '../rollups/status.ts';
import { type Queryable, rowsOf } from './queryable.ts';

/**
 * Where a figure shown to people is read: `rollup` the per-day aggregate tables (rollup_*, kept
 * exact by src/warehouse/rollups/), `raw` the loaded tables themselves. Both give the same
 * rows (test/dashboard/dashboard.test.ts checks every query both ways).
 */
export type Source = 'rollup' | 'raw';

/**
 * The one rule for every reader: the rollups while they are current (nothing marked, no rebuild
 * pending: `ROLLUPS_CURRENT_SQL`), the raw tables otherwise, so no page, view or command ever
 * shows stale figures. Asked once per snapshot (a dashboard request, a command) and passed to
 * each query of it. The BI views make the same choice in SQL, on the same condition (the views
 * of migrations/2026-11-24T03-00-00_rollups.ts, recreated by `recreateRollupViews`).
 */
export async function readSource(q: Queryable): Promise<Source> {
  const [r] = await rowsOf<{ current: boolean }>(q, `select ${ROLLUPS_CURRENT_SQL} as current`);
  return r?.current === true ? 'rollup' : 'raw';
}
