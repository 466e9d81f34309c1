import { type Queryable, rowsOf } from './queryable.ts';

export interface RecentRun {
  loadId: string;
  kind: string;
  /** As stored, but `abandoned` for a running run the view `run_liveness` finds silent. */
  status: string;
  windowStart: string | null;
  windowEnd: string | null;
  rowsRead: number;
  inserted: number;
  updated: number;
  rejected: number;
  /** Lines dropped because `crs-sync forget` erased their user or thread (read, neither written nor deleted). */
  suppressed: number;
  deleted: number;
  startedAt: string;
  finishedAt: string | null;
  /** Its last heartbeat or batch commit. */
  lastSignOfLife: string;
  error: string | null;
}

export interface RecentRunsOptions {
  limit?: number;
}

/**
 * The latest runs, newest first, as `crs-sync status` and the dashboard's health page show them:
 * a run still marked running whose worker is gone is shown `abandoned`, as the next run will take
 * it over. Whether it is gone is the view `run_liveness`'s one rule (`abandoned_after()`), which
 * `sync_health` and the next run's takeover read too.
 */
export async function recentRuns(q: Queryable, opts: RecentRunsOptions = {}): Promise<RecentRun[]> {
  const runs = await rowsOf<
    Omit<RecentRun, 'startedAt' | 'finishedAt' | 'lastSignOfLife'> & {
      startedAt: Date;
      finishedAt: Date | null;
      aliveAt: Date;
      abandoned: boolean;
    }
  >(
    q,
    `select r.load_id as "loadId", r.kind, r.status, r.window_start::text as "windowStart",
            r.window_end::text as "windowEnd", r.rows_read as "rowsRead", r.rows_inserted as inserted,
            r.rows_updated as updated, r.rows_rejected as rejected, r.rows_suppressed as suppressed,
            r.rows_deleted as deleted,
            r.started_at as "startedAt", r.finished_at as "finishedAt", l.alive_at as "aliveAt", l.abandoned, r.error
       from sync_runs r join run_liveness l on l.load_id = r.load_id order by r.started_at desc, r.load_id desc limit $1`,
    [opts.limit ?? 15],
  );
  return runs.map(({ aliveAt, abandoned, ...r }) => ({
    ...r,
    status: abandoned ? 'abandoned' : r.status,
    startedAt: r.startedAt.toISOString(),
    finishedAt: r.finishedAt ? r.finishedAt.toISOString() : null,
    lastSignOfLife: new Date(aliveAt).toISOString(),
  }));
}
