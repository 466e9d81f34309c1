import type { Logger } from '../log.ts';
import { openWarehouse, type Warehouse } from './db.ts';

/**
 * What every worker adds to the tenant's window when it leases (`src/api/shared-budget.ts`): a
 * grant must start within this long of the lease, so the budget counts each block for the window
 * plus this hold, and starts stay within the limit in any window. The stored `window_ms` is the
 * window plus the hold: a limit of 20/s is stored as 20 per 1,075 ms.
 */
export const BUDGET_HOLD_MS = 75;

/** What one lease of the shared request budget answered (see migrations/…_rate_budget.ts). */
export interface RateBudgetLease {
  /** Grants leased now, stamped with the database's clock; 0 when the window is full or paused. */
  granted: number;
  /** When the window is full: ms until its oldest block leaves it (0: there is room). */
  waitMs: number;
  /** When the deployment is paused by a Retry-After: ms until the pause ends (0: not paused). */
  pausedMs: number;
  /** The block's database time, as text (to the microsecond): what `release` names it by. */
  stamp?: string | undefined;
}

/** The shared budget of one deployment, kept in the warehouse (the row `rate_budget.name`). */
export interface RateBudgetStore {
  readonly name: string;
  /**
   * Leases up to `want` grants (one statement, one row lock), asking for `limit` per `windowMs`:
   * the budget counts against the lowest limit its callers asked for in the last 10 minutes, or
   * the lowest fixed one when a caller's limit is the deployment's (`fixed`).
   */
  lease(want: number, limit: number, windowMs: number): Promise<RateBudgetLease>;
  /** Gives back a block leased at `stamp` that was never used (no-op once it has left the window). */
  release(stamp: string): Promise<void>;
  /** No grant for anyone before `ms` from now (database clock); a longer pause already set stays. */
  pause(ms: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Bounds of the budget's own connection: a lease is one short statement, so one that hangs is
 * a database in trouble, and the limiter should hear so (and wait) rather than hang with it.
 */
const BUDGET_TIMEOUTS = { statementMs: 5_000, lockMs: 5_000, idleTxMs: 5_000 };

/**
 * The shared budget on a connection of its own (not the warehouse's pool): the pool is sized for
 * loads and enrichment, whose activities may hold every connection while they wait for a rate
 * grant, and a lease waiting for one of those connections would never come.
 */
export function openRateBudget(
  warehouse: Warehouse,
  name: string,
  log?: Logger,
  opts: { fixed?: boolean } = {},
): RateBudgetStore {
  const own = openWarehouse({
    url: warehouse.options.url,
    schema: warehouse.schema,
    max: 1,
    applicationName: 'crs-sync rate budget',
    timeouts: { ...warehouse.options.timeouts, ...BUDGET_TIMEOUTS },
    ...(log ? { log } : {}),
  });
  return rateBudgetOnPool(own.pool, name, () => own.close(), opts);
}

/** The budget's statements on a given pool (tests; `openRateBudget` for a worker). */
export function rateBudgetOnPool(
  pool: Pick<Warehouse['pool'], 'query'>,
  name: string,
  close: () => Promise<void> = async () => {},
  /** `fixed`: this caller's limit is the one the deployment set (CRS_SHARED_BUDGET_RPS). */
  opts: { fixed?: boolean } = {},
): RateBudgetStore {
  return {
    name,
    async lease(want, limit, windowMs) {
      const { rows } = await pool.query<{
        granted: number;
        wait_ms: number;
        paused_ms: number;
        // absent from the function as first written on 2026-11-24 (a schema migrated then)
        stamp?: string | null;
      }>('select * from rate_budget_lease($1, $2, $3, $4, $5)', [
        name,
        limit,
        Math.ceil(windowMs),
        want,
        opts.fixed === true,
      ]);
      const r = rows[0];
      if (!r) return { granted: 0, waitMs: 1, pausedMs: 0 };
      return { granted: r.granted, waitMs: r.wait_ms, pausedMs: r.paused_ms, stamp: r.stamp ?? undefined };
    },
    async release(stamp) {
      // The position is looked up on the locked row itself: blocks before it may have aged out
      // since the lease.
      await pool.query(
        `update rate_budget b
            set lease_at = b.lease_at[:array_position(b.lease_at, $2::timestamptz) - 1]
                           || b.lease_at[array_position(b.lease_at, $2::timestamptz) + 1:],
                lease_n = b.lease_n[:array_position(b.lease_at, $2::timestamptz) - 1]
                          || b.lease_n[array_position(b.lease_at, $2::timestamptz) + 1:],
                updated_at = clock_timestamp()
          where b.name = $1 and array_position(b.lease_at, $2::timestamptz) is not null`,
        [name, stamp],
      );
    },
    async pause(ms) {
      await pool.query(
        `insert into rate_budget (name, paused_until) values ($1, clock_timestamp() + $2 * interval '1 millisecond')
         on conflict (name) do update
           set paused_until = greatest(coalesce(rate_budget.paused_until, excluded.paused_until), excluded.paused_until),
               updated_at = clock_timestamp()`,
        [name, Math.ceil(ms)],
      );
    },
    close,
  };
}
