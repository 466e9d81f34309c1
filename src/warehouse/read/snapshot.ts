import type { Queryable } from './queryable.ts';

/**
 * The transaction a dashboard request reads in: `repeatable read, read only`, so every figure of
 * a page comes from one snapshot and nothing can be written; UTC for the days of timestamps; no
 * JIT (the pages' queries are small aggregations over rollups: compiling them, as PostgreSQL does
 * when a plan's estimated cost is high on a 10M-row warehouse, costs more than it saves); each
 * statement bounded.
 */
export async function beginReadSnapshot(q: Queryable, statementTimeoutMs: number): Promise<void> {
  await q.query('begin transaction isolation level repeatable read, read only');
  await q.query(`set local timezone = 'UTC'`);
  await q.query('set local jit = off');
  await q.query(`set local statement_timeout = ${Math.max(0, Math.floor(statementTimeoutMs))}`);
}

/** Nothing to keep (read only): the snapshot's transaction is rolled back. */
export async function endReadSnapshot(q: Queryable): Promise<void> {
  await q.query('rollback');
}

/**
 * One section of a snapshot under a savepoint of its own (`n`: its number within the
 * transaction): a query that fails rolls back to it, and the snapshot goes on for the others.
 */
export const savepoint = {
  open: (q: Queryable, n: number) => q.query(`savepoint s${Math.floor(n)}`),
  release: (q: Queryable, n: number) => q.query(`release savepoint s${Math.floor(n)}`),
  rollback: (q: Queryable, n: number) => q.query(`rollback to savepoint s${Math.floor(n)}`),
};
