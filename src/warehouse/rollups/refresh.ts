import type pg from 'pg';
import { type Release, releaseParam, WAITING_SQL } from './mark.ts';
import { rebuildAll, vacuumRollups } from './rebuild.ts';
import { refreshMarked, type ThreadKeys } from './refresh-marked.ts';
import { ROLLUPS_CURRENT_SQL } from './status.ts';
import { type Client, inTransaction, type Progress, type RollupRefresh } from './transaction.ts';

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
 * One job a file: this one picks the refresh or the rebuild; refresh-marked.ts recomputes the
 * marked keys, rebuild.ts every key (or a range, marked by mark.ts), status.ts tells whether the
 * rollups are current; sql.ts holds the rows' SQL, days.ts the per-day rows of threads and users,
 * transaction.ts the transaction and lock they all run under.
 */

/**
 * Recomputes the days and threads writes have marked since the last refresh. On a warehouse
 * flagged for a rebuild (upgraded with data already in it) it does nothing unless `rebuild` is
 * set: the rebuild reads every raw row (about 10 minutes at 10M rows), which must not happen
 * inside a load's finalize or an enrichment batch; the views read the raw tables meanwhile, and
 * `crs-sync rollups rebuild` (or `refresh`) does it.
 *
 * `release`: the days whose waiting marks (a day pull's writes of its day, mark.ts `marksWaitSql`)
 * become marks first, in the same transaction, so readers never see those days marked: the pull's
 * finalize releases its day, `crs-sync rollups refresh` every day.
 *
 * `first`: a write to make in the same transaction, under the lock, before the marks are taken
 * (the finalize's thread queue), so the marks it leaves are refreshed before any reader sees them.
 * `threadKeys`: how the touched threads reach the statements over the large tables (refresh-marked.ts;
 * chosen by their number unless a test forces one form).
 */
export async function refreshRollups(
  pool: pg.Pool,
  onStep?: Progress,
  opts: {
    rebuild?: boolean;
    release?: Release;
    first?: (c: Client) => Promise<void>;
    threadKeys?: ThreadKeys;
  } = {},
): Promise<RollupRefresh> {
  const release = releaseParam(opts.release ?? []);
  // One read when nothing is marked or waiting to be released (an unchanged re-load): no
  // transaction, lock or temporary table. A mark committed after this read belongs to a write
  // whose own refresh follows it.
  const now = await pool.query<{ current: boolean }>(
    `select ${ROLLUPS_CURRENT_SQL} and not ${WAITING_SQL} as current`,
    [release],
  );
  if (now.rows[0]?.current === true && !opts.first) return { rebuilt: false, days: 0, threads: 0, users: 0 };
  const out = await inTransaction(pool, async (c) => {
    await opts.first?.(c);
    const state = await c.query<{ rebuild_needed: boolean }>('select rebuild_needed from rollup_state');
    if (state.rows[0]?.rebuild_needed !== false) {
      return opts.rebuild ? rebuildAll(c, onStep) : { rebuilt: false, days: 0, threads: 0, users: 0 };
    }
    return refreshMarked(c, onStep, opts.threadKeys, release);
  });
  if (out.rebuilt) await vacuumRollups(pool, onStep);
  return out;
}
