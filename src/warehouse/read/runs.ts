import { STALE_AFTER_MS } from '../../common/liveness.ts';
import { isStale, RUN_ALIVE_AT_SQL } from '../liveness.ts';
import { type Queryable, rowsOf } from './queryable.ts';

export interface RecentRun {
  loadId: string;
  kind: string;
  /** As stored, but `abandoned` for a running run with no sign of life for the stale time. */
  status: string;
  windowStart: string | null;
  windowEnd: string | null;
  rowsRead: number;
  inserted: number;
  updated: number;
  rejected: number;
  deleted: number;
  startedAt: string;
  finishedAt: string | null;
  /** Its last heartbeat or batch commit. */
  lastSignOfLife: string;
  error: string | null;
}

export interface RecentRunsOptions {
  limit?: number;
  /** The time a run's silence is measured to (the caller's clock, so a test can pin it). */
  now?: Date;
  staleAfterMs?: number;
}

/**
 * The latest runs, newest first, as `crs-sync status` and the dashboard's health page show them:
 * a run still marked running whose worker is gone (no sign of life for `staleAfterMs`) is shown
 * `abandoned`, as the next run will take it over.
 */
export async function recentRuns(q: Queryable, opts: RecentRunsOptions = {}): Promise<RecentRun[]> {
  const now = opts.now ?? new Date();
  const staleAfterMs = opts.staleAfterMs ?? STALE_AFTER_MS;
  const runs = await rowsOf<
    Omit<RecentRun, 'startedAt' | 'finishedAt' | 'lastSignOfLife'> & {
      startedAt: Date;
      finishedAt: Date | null;
      aliveAt: Date;
    }
  >(
    q,
    `select r.load_id as "loadId", r.kind, r.status, r.window_start::text as "windowStart",
            r.window_end::text as "windowEnd", r.rows_read as "rowsRead", r.rows_inserted as inserted,
            r.rows_updated as updated, r.rows_rejected as rejected, r.rows_deleted as deleted,
            r.started_at as "startedAt", r.finished_at as "finishedAt", ${RUN_ALIVE_AT_SQL} as "aliveAt", r.error
       from sync_runs r order by r.started_at desc, r.load_id desc limit $1`,
    [opts.limit ?? 15],
  );
  return runs.map(({ aliveAt, ...r }) => ({
    ...r,
    status: r.status === 'running' && isStale(aliveAt, now, staleAfterMs) ? 'abandoned' : r.status,
    startedAt: r.startedAt.toISOString(),
    finishedAt: r.finishedAt ? r.finishedAt.toISOString() : null,
    lastSignOfLife: aliveAt.toISOString(),
  }));
}
