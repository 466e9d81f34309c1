import type pg from 'pg';

/**
 * What every rollup job shares: the transaction a refresh or a rebuild runs in, under one
 * transaction-level advisory lock per schema (refreshes of concurrent loads run one after the
 * other), and what a job reports.
 */

export interface RollupRefresh {
  /** A full rebuild ran (the warehouse was flagged, or one was asked for). */
  rebuilt: boolean;
  days: number;
  threads: number;
  users: number;
}

export type Client = pg.PoolClient;
export type Progress = (step: string) => void;

const LOCK_SQL = `select pg_advisory_xact_lock(hashtext('crs-sync:rollups:' || current_schema()))`;

export async function inTransaction<T>(pool: pg.Pool, fn: (c: Client) => Promise<T>): Promise<T> {
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
