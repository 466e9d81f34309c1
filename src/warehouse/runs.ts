import { sql } from 'kysely';
import type { LoadCounts } from '../common/counts.ts';
import { touchDay } from './days.ts';
import type { Executor, RunKind, RunStatus } from './types.ts';

/** The runs of the ledger (`sync_runs`): one row per sync, backfill, import or replay. */

export interface StartRunInput {
  loadId: string;
  kind: RunKind;
  windowStart?: string | null;
  windowEnd?: string | null;
  source?: string | null;
  workflowId?: string | null;
}

/**
 * Records a run; starting the same load id again (a resumed import, a retried activity) keeps its
 * row. Other runs still marked running that `run_liveness` finds abandoned (no sign of life for
 * `abandoned_after()`) are marked so (a terminated workflow, a killed import: nothing else would ever close them);
 * their ids are returned.
 */
export async function startRun(db: Executor, r: StartRunInput): Promise<{ abandoned: string[] }> {
  await db
    .insertInto('sync_runs')
    .values({
      load_id: r.loadId,
      kind: r.kind,
      window_start: r.windowStart ?? null,
      window_end: r.windowEnd ?? null,
      source: r.source ?? null,
      workflow_id: r.workflowId ?? null,
      status: 'running',
    })
    .onConflict((oc) =>
      oc
        .column('load_id')
        .doUpdateSet({ status: 'running', finished_at: null, error: null, progress_at: sql`now()` }),
    )
    .execute();
  return { abandoned: await abandonStaleRuns(db, r.loadId) };
}

/** Marks runs abandoned that read `running` yet `run_liveness` finds abandoned. */
export async function abandonStaleRuns(db: Executor, byLoadId: string): Promise<string[]> {
  const res = await sql<{ load_id: string }>`
    update sync_runs r
    set status = 'abandoned', finished_at = now(),
        error = 'no sign of life since ' || to_char(l.alive_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS')
          || ' UTC (terminated, or its worker is gone); marked abandoned by run ' || ${byLoadId}::text
    from run_liveness l
    where l.load_id = r.load_id and l.abandoned and r.status = 'running' and r.load_id <> ${byLoadId}
    returning r.load_id`.execute(db);
  return res.rows.map((x) => x.load_id);
}

/**
 * A sign of life of a run, and of its load of `day`: what its activities call as they heartbeat.
 * A run marked abandoned that shows one is running after all (its workers were only away).
 */
export async function touchRun(db: Executor, loadId: string, day?: string): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set((eb) => ({
      progress_at: sql`now()`,
      status: eb
        .case()
        .when('status', '=', 'abandoned')
        .then(eb.val<RunStatus>('running'))
        .else(eb.ref('status'))
        .end(),
      finished_at: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('finished_at')).end(),
      error: eb.case().when('status', '=', 'abandoned').then(null).else(eb.ref('error')).end(),
    }))
    .where('load_id', '=', loadId)
    .execute();
  if (day !== undefined) await touchDay(db, day, loadId);
}

/** A run's status, or undefined when no run has that load id. */
export async function runStatus(db: Executor, loadId: string): Promise<RunStatus | undefined> {
  const r = await db
    .selectFrom('sync_runs')
    .select('status')
    .where('load_id', '=', loadId)
    .executeTakeFirst();
  return r?.status;
}

/**
 * Writes how a run ended in its ledger row: status, error and, when given, its totals (a field
 * missing from `totals` is written 0; without `totals` the row's counts stay as they are).
 */
export async function closeRun(
  db: Executor,
  loadId: string,
  status: Exclude<RunStatus, 'running'>,
  totals?: Partial<Readonly<LoadCounts>>,
  error?: string,
): Promise<void> {
  await db
    .updateTable('sync_runs')
    .set({
      status,
      finished_at: new Date(),
      error: error ?? null,
      ...(totals
        ? {
            rows_read: totals.rowsRead ?? 0,
            rows_inserted: totals.inserted ?? 0,
            rows_updated: totals.updated ?? 0,
            rows_unchanged: totals.unchanged ?? 0,
            rows_rejected: totals.rejected ?? 0,
            rows_deleted: totals.deleted ?? 0,
            bytes_read: totals.bytesRead ?? 0,
          }
        : {}),
    })
    .where('load_id', '=', loadId)
    .execute();
}
